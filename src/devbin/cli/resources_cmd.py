"""Registers, stack, shared, local and constant memory per function, for every cubin, AMDGPU code object
and zebin found.

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

Intel zebins (alone, in an ocloc fat archive, in a SYCL host binary) get,
per function, what their .ze_info says: GRF (registers per hardware
thread), GRFB (bytes per GRF), SIMD width, PRIVATE and SPILL (bytes per
hardware thread), SCRATCH (every scratch buffer), SLM (static shared local
memory), BARRIERS, REQD_WG and REQD_SG (required work-group and sub-group
sizes); `?` where .ze_info does not list the function.  --sort regs sorts
by GRF, stack and frame by PRIVATE, spill by SPILL.

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

--jobs N reads the images (from 8 MB of them; for --format cuobjdump
without --function and --json, where a compiled pass reads a plain cubin
in about 0.1 ms, from 8 MB of them to decompress) in N processes (default: one per processor; --jobs 1:
this process only); the output is the same whatever N.  --scheduler
ADDRESS reads them on the workers of a Dask cluster instead (pip install
'devbin[dask]'): this process scans, the workers decode the images, a
large file's images cut into several tasks; the output is the same as
with --jobs 1.  A PATH may be a URL read through fsspec (https://...,
s3://...; docs/API.md, "Many machines").

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
    add_scheduler_option,
    dump,
    keep,
    no_device_code,
    note,
    scheduler_client,
    warn,
)
from devbin.cli.progress import progress_bar
from devbin.cli.render import scan_status
from devbin.escape.text import visible, visible_tree

if TYPE_CHECKING:
    from devbin.images import Image
    from devbin.images.frame import Frame
    from devbin.reports.records import AmdTable, IntelTable, NvidiaTable


HELP = "print per-function resource usage of every cubin, AMDGPU code object and zebin found"

#: The --sort keys (devbin.reports.resources.SORT_KEYS; spelled here so that --help imports no report).
SORT_KEYS = ("regs", "stack", "frame", "spill", "name")


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
    add_scheduler_option(p)
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


#: Printed once after the tables when a function's resources are unknown (JSON: ``"source": "unknown"``).
UNKNOWN_NOTE = ("? = not recorded in the file (LLVM 19 writes no resource counts for AMDGPU device functions); "
                "`devbin cc -- clang-19 ...` compiles and records them\n")


def _cell(v: Any) -> str:
    if v is None:
        return "?"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _write_amdgpu(a: AmdTable, sort: str | None, out: TextIO) -> None:
    from devbin.reports.records import AMD_COLUMNS
    from devbin.reports.resources import sorted_rows
    from devbin.size.account import demangle
    out.write(f"{a['address']} ({a['target_id']}, from {a['source']}):\n")
    out.write(f"  {'kind':7} {'SGPR':>5} {'VGPR':>5} {'AGPR':>5} {'PRIVATE':>8} {'GROUP':>6} "
              f"{'KERNARG':>7} {'DYNSTACK':>8} {'SSPILL':>6} {'VSPILL':>6}  function\n")
    for fn in sorted_rows(a["functions"], sort, a):
        c = {k: _cell(fn[k]) for k in AMD_COLUMNS}  # type: ignore[literal-required]
        out.write(f"  {fn['kind']:7} {c['sgpr']:>5} {c['vgpr']:>5} {c['agpr']:>5} "
                  f"{c['private_segment']:>8} {c['group_segment']:>6} {c['kernarg_segment']:>7} "
                  f"{c['dynamic_stack']:>8} {c['sgpr_spill']:>6} {c['vgpr_spill']:>6}  {demangle(fn['name'])}\n")


def _write_intel(t: IntelTable, sort: str | None, out: TextIO) -> None:
    """A zebin's table (the columns of devbin.targets.intel.resources), the (demangled) name last, whole."""
    from devbin.reports.resources import sorted_rows
    from devbin.size.account import demangle
    out.write(f"{t['address']} ({t['arch'] or '?'}, from {t['source']}):\n")
    out.write(f"  {'kind':7} {'GRF':>4} {'GRFB':>4} {'SIMD':>4} {'PRIVATE':>8} {'SPILL':>6} {'SCRATCH':>8} "
              f"{'SLM':>6} {'BARRIERS':>8} {'REQD_WG':>10} {'REQD_SG':>7}  function\n")
    for fn in sorted_rows(t["functions"], sort, t):
        c = {k: _cell(v) for k, v in fn.items()}
        out.write(f"  {fn['kind']:7} {c['grf']:>4} {c['grf_bytes']:>4} {c['simd']:>4} {c['private']:>8} "
                  f"{c['spill']:>6} {c['scratch']:>8} {c['slm']:>6} {c['barriers']:>8} {c['reqd_wg']:>10} "
                  f"{c['reqd_sg']:>7}  {demangle(fn['name'])}\n")


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


def run(args: argparse.Namespace, out: TextIO) -> int:
    with scheduler_client(args.scheduler) as client:
        return _run(args, out, client)


def _run(args: argparse.Namespace, out: TextIO, client: Any) -> int:
    from functools import partial

    from devbin.binary.native import load_native
    from devbin.images.parallel import ordered_map, pool_jobs
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport
    from devbin.images.units import image_units, run_unit, unit_parts
    from devbin.reports.resources import (
        MIN_PARALLEL_BYTES,
        FunctionFilter,
        ImageResources,
        Unreadable,
        analyse_image,
    )
    from devbin.targets.registry import object_kinds, vendor_for_kind, vendor_named
    report = ScanReport()
    choose = ImageFilter(args)
    paths = choose.paths(args.paths)
    images: list[Any] = []  # both vendors, in scan order (JSON)
    results: list[NvidiaTable] = []
    other: list[AmdTable | IntelTable] = []  # the other vendors' tables, in scan order
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
    read = object_kinds() | {"ptx"}
    hits = [h for h in taken if h[0].kind in read]
    # Each image read in a worker of the pool (--jobs) or of the cluster (--scheduler: a large file's images
    # cut into a few units, each scanned again there), in order; what only the scan knows (the archive
    # member lines, the fatbin entry headers) is written here.
    todo = [f for f, _ in hits if f.kind != "ptx"]
    text_table = not args.json and args.format == "text"
    wanted = FunctionFilter(args.function)
    # cuobjdump's lines of whole images: the vendor's compiled pass writes them where it can, at about
    # 0.1 ms a cubin, so then only images to decompress are worth a pool (libcurand's 143 plain cubins:
    # the default pool took 0.22-0.30 s of wall time against 0.18-0.20 s in this process)
    lines = args.format == "cuobjdump" and not args.json and not wanted.patterns
    compiled = lines and load_native("devbin.binary._cdecode") is not None
    units = image_units([f for f, _ in found], todo, all=args.all or choose.all,
                        parts=unit_parts(client) if client is not None else 0)
    work = partial(run_unit, partial(analyse_image, json=args.json, text=text_table, lines=lines))
    done = (r for rs in ordered_map(work, units, client=client,
                                    jobs=pool_jobs(args.jobs, (f.size for f in todo
                                                               if not compiled or f.compression != "none"),
                                                   MIN_PARALLEL_BYTES),
                                    weights=[sum(f.size for f in u.held or () if f.compression != "none")
                                             for u in units])
            for r in rs)
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
        result = next(done) if f.kind != "ptx" else None
        if isinstance(result, ImageResources) and result.usage is None and result.lines is None:  # its own tables
            if result.table is not None:
                other.append(wanted.image(result.table))  # type: ignore[arg-type]
            if result.image is not None:
                images.append(wanted.image(result.image))
            continue
        if isinstance(result, Unreadable) and not result.in_table:
            report.warn(where, result.message)
            continue
        if f.entry is not None:
            text.append(_entry_header(f))
        if isinstance(result, Unreadable):
            report.warn(where, result.message)
            continue
        if result is not None and result.lines is not None:
            text.append(result.lines)
            continue
        if result is None or result.usage is None:
            continue
        u = wanted.image(result.usage)
        if result.table is not None:
            results.append(wanted.image(result.table))  # type: ignore[arg-type]
        if result.image is not None:
            images.append(wanted.image(result.image))
        vendor = vendor_named(f.vendor) or vendor_for_kind(f.kind)
        if vendor is not None:
            text.append(vendor.format_resource_usage(u))
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
    for t in visible_tree(other):
        if "target_id" in t:
            _write_amdgpu(t, args.sort, out)
        else:
            _write_intel(t, args.sort, out)
    if any(fn.get("source") == "unknown" for t in other for fn in t["functions"]):
        note(UNKNOWN_NOTE.rstrip("\n"))
    return scan_status(report.failed)


def _cell_nv(v: Any) -> str:
    return "-" if v is None else str(v)


def _write_nvidia(u: NvidiaTable, sort: str | None, out: TextIO) -> None:
    """One cubin's table: the numbers first, each in its column, the (demangled) name last, whole."""
    from devbin.reports.resources import sorted_rows
    from devbin.size.account import demangle
    out.write(f"{u['address']} ({u['arch']}): GLOBAL {u['common']['global']} bytes"
              + "".join(f", CONSTANT[{c['bank']}] {c['size']}" for c in u["common"]["constant"]) + "\n")
    banks = {id(fn): " ".join(f"[{c['bank']}]:{c['size']}" for c in fn["constant"]) for fn in u["functions"]}
    width = max([len("CONSTANT"), *map(len, banks.values())])
    out.write(f"  {'kind':7} {'REG':>4} {'STACK':>7} {'FRAME':>6} {'SPILL':>6} {'SHARED':>7} {'LOCAL':>6}  "
              f"{'CONSTANT':{width}}  function\n")
    for fn in sorted_rows(u["functions"], sort, u):
        c = {k: _cell_nv(fn[k]) for k in ("registers", "stack", "frame", "spill", "shared", "local")}
        out.write(f"  {fn['kind']:7} {c['registers']:>4} {c['stack']:>7} {c['frame']:>6} {c['spill']:>6} "
                  f"{c['shared']:>7} {c['local']:>6}  {banks[id(fn)]:{width}}  {demangle(fn['name'])}\n")
