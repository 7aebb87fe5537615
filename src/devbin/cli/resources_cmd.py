"""Registers, stack, shared, local and constant memory per function, for every cubin found.

The text table has one row per function: the numbers in their columns, then
the function's name, demangled (c++filt's form) and whole, so that long C++
names do not push the columns out.  For NVIDIA cubins:

  REG     registers (EIATTR_REGCOUNT: also a device function's, where
          cuobjdump prints REG:0 on sm_90+)
  STACK   the kernel's stack with everything it calls (EIATTR_MIN_STACK_SIZE,
          written by nvlink and whole-program ptxas); "unknown" where it is not
          statically known (0xffffffff: recursion); "-" in a relocatable (-rdc)
          cubin, where it is decided when nvlink links the call chains (ptxas
          writes 0 there, and so does cuobjdump: see FRAME)
  FRAME   the function's own stack frame (EIATTR_FRAME_SIZE; ptxas -v's
          "bytes stack frame")
  SPILL   spill and refill instructions ptxas marked (EIATTR_ANNOTATIONS: the
          register allocator's spills; not callee-saved register saves, which
          ptxas -v also counts in its spill bytes); "-": the file does not say
          (producers before CUDA 13)
  SHARED, LOCAL, CONSTANT   bytes of .nv.shared.<f>, .nv.local.<f> and each
          .nv.constant<N>.<f> ([N]:bytes)

--function NAME (repeatable) keeps the functions whose mangled or demangled
name is NAME or matches it as a glob (e.g. --function '*::pressure(*'), in the
text, --format cuobjdump (with mangled names, what cuobjdump -fun NAME,...
prints) and --json; a NAME that matches nothing is a warning, as in
cuobjdump.  --sort regs|stack|frame|spill|name orders the text table's rows
(numbers largest first, "unknown" before them; AMDGPU: VGPR, PRIVATE, VSPILL);
--format cuobjdump and --json keep the file's order.  A PTX file has no
registers or stack until ptxas compiles it: resources says so (exit 3).

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
function's resources (docs/JSON.md; an unknown stack: "stack" null and
"dynamic_stack" true).  In an ar archive, --format cuobjdump heads every
member with cuobjdump's "member ARCHIVE:NAME:" line, also a member without
device code.

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
    EXIT_NO_DEVICE_CODE,
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
    from devbin.errors import DeviceBinaryError
    from devbin.images import Image
    from devbin.images.frame import Frame
    from devbin.targets.nvidia.cubin import CubinFunction


HELP = "print per-function resource usage of every cubin and AMDGPU code object found"

#: Images of fewer bytes than this in all are read by this process whatever --jobs says: a pool costs
#: more than it saves (52 small cubins of a 1 MB zstd library: +15 % CPU and no faster).
MIN_PARALLEL_BYTES = 8 << 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: the files of --image)")
    p.add_argument("--format", choices=("text", "cuobjdump"), default="text", help="text layout (default: text)")
    p.add_argument("--function", action="append", metavar="NAME",
                   help="only functions whose mangled or demangled name is NAME or matches it as a glob "
                        "(cuobjdump -fun; repeatable)")
    p.add_argument("--sort", choices=SORT_KEYS, help="order the text table's rows: by registers, stack, frame, "
                   "spill (largest first) or name (default: the file's order)")
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
    from devbin.formats.elf.reader import ElfFile
    from devbin.importers import DEVBIN_SECTIONS, model_and_source
    from devbin.model import StdAttr
    from devbin.targets.amdgpu.importer import AMD_SGPR_SPILL, AMD_VGPR_SPILL, code_object_facts
    elf = ElfFile(f.data(), where=str(f.address))
    facts = code_object_facts(elf)
    obj, source = model_and_source(elf, diag=_sections_only)  # the one model (devbin.importers.model_of)
    rows: list[dict[str, Any]] = []
    if source == DEVBIN_SECTIONS:
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
        for r in facts.resources:
            d = r.to_dict()
            rows.append({"name": r.name, "kind": r.kind, **{k: d[k] for k in _AMD_COLUMNS}, "source": r.source})
    model = {fn.name: fn.resources for fn in obj.functions}
    functions = [{"name": r["name"], "kind": r["kind"], "source": r["source"],
                  "resources": model[r["name"]].to_dict() if r["name"] in model else None} for r in rows]
    head = {**f.to_dict(), "target_id": facts.target_id, "source": source}
    return {**head, "functions": rows}, {**head, "functions": functions}


def _sections_only(e: DeviceBinaryError) -> None:
    """Devbin sections that cannot be decoded make the image a warning; what the vendor importer went past
    (a note that disagrees with a descriptor) does not stop the table."""
    from devbin.formats.devsec.constants import FMT
    if e.fmt == FMT:
        raise e


#: Printed once after the tables when a function's resources are unknown (JSON: ``"source": "unknown"``).
UNKNOWN_NOTE = ("? = not recorded in the file (LLVM 19 writes no resource counts for AMDGPU device functions); "
                "`devbin cc -- clang-19 ...` compiles and records them\n")


def _cell(v: Any) -> str:
    if v is None:
        return "?"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _write_amdgpu(a: dict[str, Any], sort: str | None, out: TextIO) -> None:
    from devbin.size.account import demangle
    out.write(f"{a['address']} ({a['target_id']}, from {a['source']}):\n")
    out.write(f"  {'kind':7} {'SGPR':>5} {'VGPR':>5} {'AGPR':>5} {'PRIVATE':>8} {'GROUP':>6} "
              f"{'KERNARG':>7} {'DYNSTACK':>8} {'SSPILL':>6} {'VSPILL':>6}  function\n")
    for fn in _sorted(a["functions"], sort, "amd"):
        c = {k: _cell(fn[k]) for k in _AMD_COLUMNS}
        out.write(f"  {fn['kind']:7} {c['sgpr']:>5} {c['vgpr']:>5} {c['agpr']:>5} "
                  f"{c['private_segment']:>8} {c['group_segment']:>6} {c['kernarg_segment']:>7} "
                  f"{c['dynamic_stack']:>8} {c['sgpr_spill']:>6} {c['vgpr_spill']:>6}  {demangle(fn['name'])}\n")


def _no_device_code(paths: list[str]) -> int:
    """No input holds compiled device code: a PTX file is named as such (its registers, stack and spills are
    decided by ptxas), any other as :func:`no_device_code` says."""
    import sys

    from devbin.packaging.facts import is_ptx_text
    other = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                head = fh.read(4096)
        except OSError:
            head = b""
        if head and is_ptx_text(head):
            print(f"devbin: {visible(path)}: PTX text, no resource usage until ptxas compiles it "
                  "(`ptxas -v`, or devbin resources on the cubin ptxas writes)", file=sys.stderr)
        else:
            other.append(path)
    no_device_code(other)
    return EXIT_NO_DEVICE_CODE


def _nv_row(fn: CubinFunction) -> dict[str, Any]:
    """One row of the NVIDIA text table, from the cubin's records as ``Function.resources`` reads them, but
    STACK only where the cubin gives the kernel's whole stack (``EIATTR_MIN_STACK_SIZE``: linked or
    whole-program cubins); a relocatable cubin's ``EIATTR_MAX_STACK_SIZE`` is 0 whatever the frame (the
    call chains are summed by nvlink), so there STACK is ``None`` and FRAME says what the function needs."""
    from devbin.targets.nvidia.cubin import STACK_UNKNOWN
    stack: int | str | None = "unknown" if fn.min_stack_size == STACK_UNKNOWN else fn.min_stack_size
    return {"name": fn.name, "kind": "kernel" if fn.is_entry else "device", "registers": fn.register_count,
            "stack": stack, "frame": fn.frame_size, "spill": fn.spill_instructions, "shared": fn.shared,
            "local": fn.local, "constant": [{"bank": b, "size": n} for b, n in fn.constant_banks.items()]}


def _analyse(f: Image, as_json: bool, text: bool) -> tuple[Any, ...]:
    """The per-image work, done where ``--jobs`` puts it (plain data back, see devbin.images.parallel):
    ``("amd", rows, image)``, ``("nv", head, usage, json image or None, text rows or None)``,
    ``("warn", message)`` / ``("amd-warn", message)`` (the image cannot be read: a warning, the
    command goes on) or ``("skip",)``."""
    from devbin.errors import DeviceBinaryError, LimitExceeded
    from devbin.formats.elf import constants as C
    from devbin.formats.elf.reader import ElfFile
    from devbin.targets.nvidia.cubin import Cubin
    from devbin.targets.nvidia.importer import cubin_function_resources
    from devbin.targets.nvidia.resources import usage
    where = str(f.address)
    if f.kind == "amdgpu" or (f.kind == "cubin" and f.entry is None and _is_amdgpu(f)):
        try:
            amd_rows, amd_image = _amdgpu_usage(f)
        except LimitExceeded:
            raise  # over the memory budget: the command fails, the file is not to blame
        except DeviceBinaryError as e:
            return ("amd-warn", str(e))
        return ("amd", amd_rows, amd_image)
    if f.kind != "cubin":
        return ("skip",)
    try:
        elf = ElfFile(f.data(), where=where)
        if elf.header.e_machine != C.EM_CUDA:
            return ("skip",)
        # The JSON and the text table report spills (and the JSON launch bounds), which need every
        # per-function record; --format cuobjdump needs the resource records alone (cuobjdump's numbers).
        cubin = Cubin(elf, records=as_json or text)
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
    rows = [_nv_row(fn) for fn in cubin.functions] if text else None
    return ("nv", head, u, image, rows)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.images.parallel import ordered_map, pool_jobs
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport
    from devbin.targets.nvidia.resources import format_cuobjdump
    report = ScanReport()
    choose = ImageFilter(args)
    paths = choose.paths(args.paths)
    images: list[dict[str, Any]] = []  # both vendors, in scan order (JSON)
    results: list[dict[str, Any]] = []
    amd: list[dict[str, Any]] = []
    text: list[str] = []
    # The scan in order: each ar member's frame (cuobjdump heads every member with a line, also one
    # without device code) and each image found.
    events: list[Frame | tuple[Image, Frame]] = []
    with progress_bar("scanning") as progress:
        events.extend(Scanner(report, all=args.all or choose.all, on_member=events.append).paths(paths, progress))
    found = [e for e in events if isinstance(e, tuple)]
    for w in report.warnings:
        warn(w)
    if not found and not report.warnings:
        return _no_device_code(paths)
    warned = len(report.warnings)
    taken = keep(found, choose, lambda h: h[0], like_cuobjdump=args.format == "cuobjdump")
    hits = [h for h in taken if h[0].kind in ("amdgpu", "cubin", "ptx")]
    # Each image read in a worker of the pool (--jobs), in order; what only the scan knows (the
    # archive member lines, the fatbin entry headers) is written here.
    todo = [f for f, _ in hits if f.kind != "ptx"]
    text_table = not args.json and args.format == "text"
    wanted = _FunctionFilter(args.function)
    done = iter(ordered_map(lambda f: _analyse(f, args.json, text_table), todo,
                            jobs=pool_jobs(args.jobs, (f.size for f in todo), MIN_PARALLEL_BYTES),
                            weights=[f.size if f.compression != "none" else 0 for f in todo]))
    kept = {id(h) for h in hits}
    for event in events:
        if not isinstance(event, tuple):
            member = _member_line(event)
            if member:
                text.append(member)
            continue
        if id(event) not in kept:
            continue
        f = event[0]
        where = str(f.address)
        result = next(done) if f.kind != "ptx" else ("skip",)
        if result[0] == "amd":
            amd.append(wanted.image(result[1]))
            images.append(wanted.image(result[2]))
            continue
        if result[0] == "amd-warn":
            report.warn(where, result[1])
            continue
        if f.entry is not None:
            text.append(_entry_header(f))
        if result[0] == "warn":
            report.warn(where, result[1])
            continue
        if result[0] != "nv":
            continue
        _, head, u, image, rows = result
        u = wanted.image(u)
        if rows is not None:
            results.append({**head, **{k: v for k, v in u.items() if k not in head}, "functions": wanted.rows(rows)})
        if image is not None:
            images.append(wanted.image(image))
        text.append(format_cuobjdump(u))
    for w in report.warnings[warned:]:
        warn(w)
    for pattern in wanted.unmatched():
        warn(f"--function {pattern!r} matched no function")  # cuobjdump: "Function listed in --function ... not found"
    if args.json:
        dump("resources", {"images": images, "warnings": report.warnings}, out)
        return scan_status(report.failed)
    if args.format == "cuobjdump":
        out.write("".join(text))  # stdout is exactly cuobjdump's lines
        return scan_status(report.failed)
    for u in visible_tree(results):  # the text rule on every string read from a file
        _write_nvidia(u, args.sort, out)
    for a in visible_tree(amd):
        _write_amdgpu(a, args.sort, out)
    if any(fn["source"] == "unknown" for a in amd for fn in a["functions"]):
        note(UNKNOWN_NOTE.rstrip("\n"))
    return scan_status(report.failed)


class _FunctionFilter:
    """``--function NAME`` (repeatable): a function is kept when its mangled or demangled name is NAME or
    matches it as a glob (fnmatch, case-sensitive); no NAME keeps every function.  Applies to every
    output (text, --format cuobjdump, --json); the images stay, with the functions kept."""

    def __init__(self, patterns: list[str] | None) -> None:
        self.patterns = list(patterns or [])
        self.matched: set[str] = set()

    def __call__(self, name: str) -> bool:
        if not self.patterns:
            return True
        from fnmatch import fnmatchcase

        from devbin.size.account import demangle
        hits = {p for p in self.patterns
                if p in (name, demangle(name)) or fnmatchcase(name, p) or fnmatchcase(demangle(name), p)}
        self.matched |= hits
        return bool(hits)

    def rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in rows if self(r["name"])] if self.patterns else rows

    def image(self, image: dict[str, Any]) -> dict[str, Any]:
        return {**image, "functions": self.rows(image["functions"])} if self.patterns else image

    def unmatched(self) -> list[str]:
        return [p for p in self.patterns if p not in self.matched]


#: --sort's keys: the row's field each sorts by (numbers largest first, names A to Z; unknown last).
SORT_KEYS = ("regs", "stack", "frame", "spill", "name")
_SORT_FIELDS = {"nv": {"regs": "registers", "stack": "stack", "frame": "frame", "spill": "spill"},
                "amd": {"regs": "vgpr", "stack": "private_segment", "frame": "private_segment",
                        "spill": "vgpr_spill"}}


def _sorted(rows: list[dict[str, Any]], key: str | None, vendor: str) -> list[dict[str, Any]]:
    """The table's rows in --sort's order (stable: ties keep the file's order)."""
    if key is None:
        return rows
    if key == "name":
        from devbin.size.account import demangle
        return sorted(rows, key=lambda r: demangle(r["name"]))
    field = _SORT_FIELDS[vendor][key]

    def value(r: dict[str, Any]) -> tuple[int, int]:
        v = r[field]
        if v == "unknown" or v is True:
            return (0, 0)  # not statically known: could be anything, so first
        return (1, -v) if isinstance(v, int) else (2, 0)
    return sorted(rows, key=value)


def _cell_nv(v: Any) -> str:
    return "-" if v is None else str(v)


def _write_nvidia(u: dict[str, Any], sort: str | None, out: TextIO) -> None:
    """One cubin's table: the numbers first, each in its column, the (demangled) name last, whole."""
    from devbin.size.account import demangle
    out.write(f"{u['address']} ({u['arch']}): GLOBAL {u['common']['global']} bytes"
              + "".join(f", CONSTANT[{c['bank']}] {c['size']}" for c in u["common"]["constant"]) + "\n")
    banks = {id(fn): " ".join(f"[{c['bank']}]:{c['size']}" for c in fn["constant"]) for fn in u["functions"]}
    width = max([len("CONSTANT"), *map(len, banks.values())])
    out.write(f"  {'kind':7} {'REG':>4} {'STACK':>7} {'FRAME':>6} {'SPILL':>6} {'SHARED':>7} {'LOCAL':>6}  "
              f"{'CONSTANT':{width}}  function\n")
    for fn in _sorted(u["functions"], sort, "nv"):
        c = {k: _cell_nv(fn[k]) for k in ("registers", "stack", "frame", "spill", "shared", "local")}
        out.write(f"  {fn['kind']:7} {c['registers']:>4} {c['stack']:>7} {c['frame']:>6} {c['spill']:>6} "
                  f"{c['shared']:>7} {c['local']:>6}  {banks[id(fn)]:{width}}  {demangle(fn['name'])}\n")
