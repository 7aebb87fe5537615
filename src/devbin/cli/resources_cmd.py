"""Registers, stack, shared, local and constant memory per function, for every cubin found.

AMDGPU code objects get SGPR/VGPR/AGPR, private/group/kernarg segment, dynamic
stack and spills per function: from the devbin sections when the object has
them (`devbin cc` output: device functions included), else from the metadata
note and LLVM 20+ resource symbols.  What the file does not say prints `?`
(JSON null, with "source": "unknown"), and a note after the tables points to
`devbin cc`, which records device functions' resources when compiling.
--format cuobjdump prints cubins only.

PATH may be a cubin, a fatbin, a host object, library or executable, an ar
archive, a wheel/zip or a folder.  --format cuobjdump prints exactly the
lines of `cuobjdump -res-usage` (fatbin entry headers included), so scripts
that parse them can switch; --json gives the same facts as data: one list
"images", in the order the text prints them, each image under its address
(docs/IMAGES.md) with the keys every command gives images, then its
"functions" (NVIDIA: "common" too; AMDGPU: "target_id" and "source"), each
function's numbers under "resources" in the shape every command gives a
function's resources (docs/JSON.md).

--image ADDRESS (repeatable) reads only those images (addresses as `devbin
list --all` prints them); --arch ARCH (repeatable) only those
architectures: `--arch sm_90 --format cuobjdump` prints exactly what
`cuobjdump -arch sm_90 -res-usage` prints (sm_90 also takes sm_90a and the
compute_90 PTX entries).

Scope as cuobjdump's: where a host ELF holds executable images in
.nv_fatbin, its relocatable __nv_relfatbin images are left out unless --all
(cuobjdump -all), which prints them after the .nv_fatbin ones, as
`cuobjdump -all -res-usage` does.

--jobs N reads the images (from 8 MB of them) in N processes (default: one
per processor; --jobs 1: this process only); the output is the same
whatever N.

Warnings go to stderr.  Exit status: 1 on an error, which includes a file
named on the command line that cannot be opened or that gives no image, only
warnings (truncated, corrupt); 3 when no input holds device code (one line on
stderr, nothing on stdout); 0 otherwise, also when files found while walking
a folder or a zip/wheel cannot be read (each becomes a warning); 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any, TextIO

from devbin.cli.common import (
    ImageFilter,
    add_image_options,
    add_jobs_option,
    dump,
    keep,
    no_device_code,
    note,
    warn,
)
from devbin.cli.progress import progress_bar
from devbin.cli.render import scan_status
from devbin.escape.text import visible, visible_tree

if TYPE_CHECKING:
    from devbin.images import Image
    from devbin.images.frame import Frame


HELP = "print per-function resource usage of every cubin and AMDGPU code object found"

#: Images of fewer bytes than this in all are read by this process whatever --jobs says: a pool costs
#: more than it saves (52 small cubins of a 1 MB zstd library: +15 % CPU and no faster).
MIN_PARALLEL_BYTES = 8 << 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: the files of --image)")
    p.add_argument("--format", choices=("text", "cuobjdump"), default="text", help="text layout (default: text)")
    add_image_options(p)
    add_jobs_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def _entry_header(f: Image) -> str:
    """The block cuobjdump prints before each fatbin entry."""
    e = f.entry
    assert e is not None
    lines = ["", "Fatbin ptx code:" if f.kind == "ptx" else f"Fatbin {e.kind_name} code:", "================",
             f"arch = sm_{e.arch}{e.variant}", f"code version = [{e.major},{e.minor}]",
             "host = " + ("linux" if e.flags & 0x10 else "mac" if e.flags & 0x20 else "windows" if e.flags & 0x40
                          else "unknown"),
             f"compile_size = {'64bit' if e.is_64bit else '32bit'}"]
    if e.is_compressed:
        lines.append("compressed")
    if f.kind == "ptx" and e.has_options:  # cuobjdump prints no line for a descriptor without a string
        lines.append(f"ptxasOptions = {e.options}")
    return "\n".join(lines) + "\n"


def _member_line(frame: Frame) -> str | None:
    """cuobjdump's line before the images of an archive member."""
    from devbin.images import Address
    a, member = frame.address, frame.address.member
    if frame.origin != "ar" or member is None:
        return None
    archive = str(Address(a.path, a.steps[:-1])) if len(a.steps) > 1 else os.path.abspath(a.path)
    return f"\nmember {visible(f'{archive}:{member.name}')}:\n"  # an archive on disk: its absolute path (cuobjdump)


_AMD_COLUMNS = ("sgpr", "vgpr", "agpr", "private_segment", "group_segment", "kernarg_segment", "dynamic_stack",
                "sgpr_spill", "vgpr_spill")


def _is_amdgpu(f: Image) -> bool:
    from devbin.errors import DeviceBinaryError
    from devbin.formats.elf import constants as C
    from devbin.formats.elf.reader import ElfFile
    try:
        return ElfFile(f.data(), where=str(f.address)).header.e_machine == C.EM_AMDGPU
    except DeviceBinaryError:
        return False


def _amdgpu_usage(f: Image) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per-function AMDGPU resources: from the devbin sections when present, else from the vendor's facts.

    Returns the text rows (every value the file does not give is ``None``, text ``?``, never a
    guess) and the JSON image, whose functions carry ``Function.resources`` (docs/JSON.md).
    """
    from devbin.formats.devsec.elf import read_code_object
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import StdAttr
    from devbin.targets.amdgpu.importer import (
        AMD_SGPR_SPILL,
        AMD_VGPR_SPILL,
        code_object_facts,
        import_amdgpu,
    )
    elf = ElfFile(f.data(), where=str(f.address))
    facts = code_object_facts(elf)
    obj = read_code_object(elf)
    rows: list[dict[str, Any]] = []
    if obj is not None:
        source = "devbin-sections"
        for fn in obj.functions:
            known = fn.has(StdAttr.REGS_GENERAL) or fn.has(StdAttr.REGS_SCALAR)
            rows.append({
                "name": fn.name, "kind": "kernel" if fn.is_kernel else "device",
                "sgpr": fn.uint(StdAttr.REGS_SCALAR), "vgpr": fn.uint(StdAttr.REGS_GENERAL),
                "agpr": fn.uint(StdAttr.REGS_ACCUM), "private_segment": fn.uint(StdAttr.PRIVATE_BYTES),
                "group_segment": fn.uint(StdAttr.SHARED_BYTES), "kernarg_segment": fn.uint(StdAttr.PARAM_BYTES),
                # a flag is recorded only when true: its absence means "no" only where the kernel's note said so
                "dynamic_stack": True if fn.has(StdAttr.DYNAMIC_STACK) else (False if fn.is_kernel and known
                                                                            else None),
                "sgpr_spill": fn.uint(AMD_SGPR_SPILL), "vgpr_spill": fn.uint(AMD_VGPR_SPILL),
                "source": "devbin-sections" if known else "unknown",
            })
    else:
        source = "vendor"
        obj = import_amdgpu(elf, diag=lambda e: None)  # the model built from these same facts
        for r in facts.resources:
            d = r.to_dict()
            rows.append({"name": r.name, "kind": r.kind, **{k: d[k] for k in _AMD_COLUMNS}, "source": r.source})
    model = {fn.name: fn.resources for fn in obj.functions}
    functions = [{"name": r["name"], "kind": r["kind"], "source": r["source"],
                  "resources": model[r["name"]].to_dict() if r["name"] in model else None} for r in rows]
    head = {**f.to_dict(), "target_id": facts.target_id, "source": source}
    return {**head, "functions": rows}, {**head, "functions": functions}


#: Printed once after the tables when a function's resources are unknown (JSON: ``"source": "unknown"``).
UNKNOWN_NOTE = ("? = not recorded in the file (LLVM 19 writes no resource counts for AMDGPU device functions); "
                "`devbin cc -- clang-19 ...` compiles and records them\n")


def _cell(v: Any) -> str:
    if v is None:
        return "?"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _write_amdgpu(a: dict[str, Any], out: TextIO) -> None:
    out.write(f"{a['address']} ({a['target_id']}, from {a['source']}):\n")
    out.write(f"  {'function':32} {'kind':7} {'SGPR':>5} {'VGPR':>5} {'AGPR':>5} {'PRIVATE':>8} {'GROUP':>6} "
              f"{'KERNARG':>7} {'DYNSTACK':>8} {'SSPILL':>6} {'VSPILL':>6}\n")
    for fn in a["functions"]:
        c = {k: _cell(fn[k]) for k in _AMD_COLUMNS}
        out.write(f"  {_name(fn['name'], out)} {fn['kind']:7} {c['sgpr']:>5} {c['vgpr']:>5} {c['agpr']:>5} "
                  f"{c['private_segment']:>8} {c['group_segment']:>6} {c['kernarg_segment']:>7} "
                  f"{c['dynamic_stack']:>8} {c['sgpr_spill']:>6} {c['vgpr_spill']:>6}\n")


def _analyse(f: Image, as_json: bool) -> tuple[Any, ...]:
    """The per-image work, done where ``--jobs`` puts it (plain data back, see devbin.images.parallel):
    ``("amd", rows, image)``, ``("nv", head, usage, json image or None, cuobjdump text)``,
    ``("warn", message)`` / ``("amd-warn", message)`` (the image cannot be read: a warning, the
    command goes on) or ``("skip",)``."""
    from devbin.errors import DeviceBinaryError, LimitExceeded
    from devbin.formats.elf import constants as C
    from devbin.formats.elf.reader import ElfFile
    from devbin.targets.nvidia.cubin import Cubin
    from devbin.targets.nvidia.importer import cubin_function_resources
    from devbin.targets.nvidia.resources import format_cuobjdump, usage
    where = str(f.address)
    if f.kind == "amdgpu" or (f.kind == "cubin" and f.entry is None and _is_amdgpu(f)):
        try:
            rows, amd_image = _amdgpu_usage(f)
        except LimitExceeded:
            raise  # over the memory budget: the command fails, the file is not to blame
        except DeviceBinaryError as e:
            return ("amd-warn", str(e))
        return ("amd", rows, amd_image)
    if f.kind != "cubin":
        return ("skip",)
    try:
        elf = ElfFile(f.data(), where=where)
        if elf.header.e_machine != C.EM_CUDA:
            return ("skip",)
        # Only the JSON reports spills and launch bounds, which need every per-function record;
        # the text tables need the resource records alone (cuobjdump's numbers).
        cubin = Cubin(elf, records=as_json)
        u = usage(cubin)
    except LimitExceeded:
        raise  # over the memory budget: the command fails, the file is not to blame
    except DeviceBinaryError as e:
        return ("warn", str(e))
    head = f.to_dict()
    common = {"global": u["common"]["global"], "constant_banks": u["common"]["constant"]}
    image: dict[str, Any] | None = None
    if as_json:
        image = {**head, "common": common, "functions": [
            {"name": fn.name, "kind": "kernel" if fn.is_entry else "device",
             "resources": cubin_function_resources(fn).to_dict()} for fn in cubin.functions]}
    return ("nv", head, u, image, format_cuobjdump(u))


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.images.parallel import ordered_map, pool_jobs
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport
    report = ScanReport()
    choose = ImageFilter(args)
    paths = choose.paths(args.paths)
    images: list[dict[str, Any]] = []  # both vendors, in scan order (JSON)
    results: list[dict[str, Any]] = []
    amd: list[dict[str, Any]] = []
    text: list[str] = []
    last_member = None
    with progress_bar("scanning") as progress:
        found = list(Scanner(report, all=args.all or choose.all).paths(paths, progress))
    for w in report.warnings:
        warn(w)
    if not found and not report.warnings:
        return no_device_code(paths)
    warned = len(report.warnings)
    hits = [h for h in keep(found, choose, lambda h: h[0]) if h[0].kind in ("amdgpu", "cubin", "ptx")]
    # Each image read in a worker of the pool (--jobs), in order; what only the scan knows (the
    # archive member lines, the fatbin entry headers) is written here.
    todo = [f for f, _ in hits if f.kind != "ptx"]
    done = iter(ordered_map(lambda f: _analyse(f, args.json), todo,
                            jobs=pool_jobs(args.jobs, (f.size for f in todo), MIN_PARALLEL_BYTES),
                            weights=[f.size if f.compression != "none" else 0 for f in todo]))
    for f, frame in hits:
        where = str(f.address)
        result = next(done) if f.kind != "ptx" else ("skip",)
        if result[0] == "amd":
            amd.append(result[1])
            images.append(result[2])
            continue
        if result[0] == "amd-warn":
            report.warn(where, result[1])
            continue
        member = _member_line(frame)
        if member and member != last_member:
            text.append(member)
            last_member = member
        if f.entry is not None:
            text.append(_entry_header(f))
        if result[0] == "warn":
            report.warn(where, result[1])
            continue
        if result[0] != "nv":
            continue
        _, head, u, image, cuobjdump = result
        results.append({**head, **{k: v for k, v in u.items() if k not in head}})
        if args.json:
            images.append(image)
        text.append(cuobjdump)
    for w in report.warnings[warned:]:
        warn(w)
    if args.json:
        dump("resources", {"images": images, "warnings": report.warnings}, out)
        return scan_status(report.failed)
    if args.format == "cuobjdump":
        out.write("".join(text))  # stdout is exactly cuobjdump's lines
        return scan_status(report.failed)
    for u in visible_tree(results):  # the text rule on every string read from a file
        out.write(f"{u['address']} ({u['arch']}): GLOBAL {u['common']['global']} bytes"
                  + "".join(f", CONSTANT[{c['bank']}] {c['size']}" for c in u["common"]["constant"]) + "\n")
        out.write(f"  {'function':32} {'kind':7} {'REG':>4} {'STACK':>6} {'SHARED':>7} {'LOCAL':>6}  constant banks\n")
        for fn in u["functions"]:
            banks = " ".join(f"[{c['bank']}]:{c['size']}" for c in fn["constant"])
            out.write(f"  {_name(fn['name'], out)} {fn['kind']:7} {fn['registers']:>4} {fn['stack']:>6} "
                      f"{fn['shared']:>7} {fn['local']:>6}  {banks}\n")
    for a in visible_tree(amd):
        _write_amdgpu(a, out)
    if any(fn["source"] == "unknown" for a in amd for fn in a["functions"]):
        note(UNKNOWN_NOTE.rstrip("\n"))
    return scan_status(report.failed)


def _name(name: str, out: TextIO, width: int = 32) -> str:
    """A function name in its column: cut to ``width`` only on a terminal (whole in a pipe or file)."""
    from devbin.cli.render import cell
    return cell(name, width, out)
