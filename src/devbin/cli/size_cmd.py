"""Where the bytes of device code go: per file, architecture, kind and function, stored and uncompressed.

PATH may be a cubin, an AMDGPU code object, a fatbin, an OffloadBinary, a clang offload bundle, a host
object, library or executable, an ar archive, a wheel/zip, a folder, or a whole environment (a
site-packages or conda prefix).  Every innermost file holding device code is measured (a wheel's or an
archive's members are files too: pkg.whl!lib/libk.so): its device sections' bytes (.nv_fatbin,
__nv_relfatbin, .hip_fatbin, .llvm.offloading, __CLANG_OFFLOAD_BUNDLE__*; the whole file for a bare
container or code object), the bytes each image takes in it (stored) and as extracted (uncompressed), and
the containers' own bytes (overhead: headers and padding), so that stored + overhead = the device
sections' sizes.  A function's size is its symbol's st_size, with what else belongs to it beside it
(its own constant bank, .nv.info.<f>, relocations, an AMDGPU kernel's descriptor); names are demangled
as c++filt prints them, the mangled name kept.

The text lists the files, the architectures, the containers (each translation unit's fatbin or
bundle), the kinds, the --top N functions (summed over every copy and architecture) and the
duplicates: identical images and identical functions (same name, architecture and code bytes) in
several translation units, containers, files or wheels, with the bytes the extra copies cost.
--json gives every image and function (`devbin schema size`) on one line (it can hold every function
of an environment; `python3 -m json.tool` indents it); --csv one row per function (and per image
without functions).  A progress bar goes to stderr when it is a terminal.  Names, paths and IDs read
from files are escaped for each output (docs/REPORT.md, "Escaping"): control and bidi characters shown
as \\x1b or \\u202e, a CSV cell that would start a formula (= + - @) prefixed with ', markdown names
and architectures as code spans.

--keep ARCHS (sm_90,gfx90a ...): what `devbin prune --keep ARCHS` would save, per file and in total,
computed by prune itself (the numbers prune then reports).

--jobs N measures the files (a folder, several paths, the libraries of a wheel for --keep; from 8 MB
of them) in N processes (default: one per processor; --jobs 1: this process only); the output is the
same whatever N.

--budget RULE (repeatable) for CI: SCOPE[:PATTERN]=SIZE with SCOPE total (all device bytes), file
(each file's device bytes; PATTERN a glob on its path), arch (stored bytes of each architecture;
PATTERN sm_90, sm_1*, gfx9*), kernel or function (each copy's size; PATTERN a glob on the mangled or
demangled name); SIZE in bytes or with K, M, G (binary).  E.g. --budget total=400M --budget
arch:sm_90=120M --budget 'kernel:*gemm*=2M'.  Each subject over its limit is printed; the exit status
is then 4.

--html OUT also writes the report as one self-contained HTML page (no network at view time): a
zoomable treemap of stored bytes (vendor -> file -> architecture -> template family -> function; what
--keep removes in red, duplicates outlined), sortable tables, the duplicates and the call graph of the
largest code object whose functions call one another, or of each --graph ADDRESS (docs/REPORT.md).

--diff OLD NEW compares two builds (each a file, folder or wheel): bytes per architecture and per
function, and the registers, stack and spills of every kernel whose resources changed, as markdown
tables fit for a CI comment (--json: `devbin schema size-diff`).

--arch ARCH and --image ADDRESS (repeatable) keep only those images in the tables; the images left out
are counted under "hidden" so the sums still hold.

Exit status: 1 on an error, which includes a file named on the command line that cannot be opened
or that gives no image, only warnings (truncated, corrupt); 3 when no input holds device code (one
line on stderr, nothing on stdout); 4 when a --budget rule is exceeded; 0 otherwise, also when files
found while walking a folder or a zip/wheel cannot be read (each becomes a warning, on stderr); 2 for
bad arguments.
"""

from __future__ import annotations

import argparse
import csv
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TextIO

from devbin.cli.common import BadArguments, ImageFilter, add_image_options, add_jobs_option, dump, no_device_code, warn
from devbin.cli.progress import progress_bar
from devbin.cli.render import scan_status

if TYPE_CHECKING:
    from devbin.size.account import FileSize
    from devbin.size.budget import Rule, Violation

HELP = "where the bytes of device code go: per file, architecture, kind and function; duplicates, --keep " \
       "savings, --budget, --diff"

#: The exit status when a --budget rule is exceeded.
EXIT_OVER_BUDGET: Final = 4

#: Files of fewer bytes than this in all are measured (and pruned for --keep) by this process whatever
#: --jobs says: a pool costs more than it saves.
MIN_PARALLEL_BYTES = 8 << 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="files, folders, wheels, environments")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON (`devbin schema size`)")
    out.add_argument("--csv", action="store_true", help="print CSV: one row per function")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows per table (default: %(default)s)")
    p.add_argument("--keep", metavar="ARCHS", help="also what `devbin prune --keep ARCHS` would save")
    p.add_argument("--budget", action="append", default=[], metavar="RULE",
                   help="SCOPE[:PATTERN]=SIZE, scope total, file, arch, kernel or function (repeatable; exit 4 "
                        "when exceeded)")
    p.add_argument("--diff", nargs=2, metavar=("OLD", "NEW"), help="compare two builds")
    p.add_argument("--html", metavar="OUT", help="also write the report as one self-contained HTML page: zoomable "
                                                 "treemap, sortable tables, duplicates, call graphs (docs/REPORT.md)")
    p.add_argument("--graph", action="append", default=[], metavar="ADDRESS",
                   help="a code object whose call graph --html shows (repeatable; default: the largest)")
    add_image_options(p, all=False)
    add_jobs_option(p)


# --------------------------------------------------------------------------- the report


def _filtered(files: list[FileSize], choose: ImageFilter) -> list[FileSize]:
    """``files`` with only the images ``choose`` takes; what is left out is counted in ``hidden``."""
    if not choose.active:
        return files
    out = []
    for f in files:
        kept = [i for i in f.images if choose(i.image)]
        f.hidden = sum(i.stored for i in f.images if i not in kept)
        f.images = kept
        if kept:
            out.append(f)
    choose.check()
    return out


def size_doc(args: argparse.Namespace, progress: Callable[[int, int], None] | None = None,
             measured: Callable[[list[FileSize]], None] | None = None,
             detail: bool = True) -> tuple[dict[str, Any], list[str]]:
    """The report dict of one command line (what --json prints, less its schema key) and the scan's
    files that failed.  The HTML report (--html) renders this same dict.  ``detail=False``: each file's
    images left out (the text tables do not print them)."""
    from devbin.images.scanreport import ScanReport
    from devbin.size.account import measure
    from devbin.size.report import report_dict

    choose = ImageFilter(args)
    paths = choose.paths(args.paths)
    keep = None
    if args.keep:
        from devbin.packaging.pruning import parse_arch_list  # prune's readers and writers only for --keep

        keep = parse_arch_list(args.keep)
    report = ScanReport()
    files = _filtered(measure(paths, progress=progress, report=report, jobs=args.jobs, min_bytes=MIN_PARALLEL_BYTES),
                      choose)
    if measured is not None:
        measured(files)
    return report_dict(files, keep=keep, warnings=report.warnings, top=args.top, detail=detail, jobs=args.jobs,
                       min_bytes=MIN_PARALLEL_BYTES), report.failed


# --------------------------------------------------------------------------- text


def _n(v: int) -> str:
    return f"{v:,}"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


def _cut(name: str, width: int = 100) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def _count(images: list[Any] | int) -> int:
    return images if isinstance(images, int) else len(images)


def _lcut(path: str, width: int = 60) -> str:
    """A path or address in ``width`` characters, its end kept (the file's name, the container's number)."""
    return path if len(path) <= width else "..." + path[-(width - 3):]


def _copies(addresses: list[str], shown: int = 3) -> str:
    """The first ``shown`` addresses, the part they share (up to a ``!`` or ``@``) said once."""
    head = os.path.commonprefix(addresses)  # noqa: RUF071  (addresses, not paths: character by character)
    cut = max(head.rfind("!"), head.rfind("@")) if len(addresses) > 1 else -1
    prefix, rest = (addresses[0][:cut], [a[cut:] for a in addresses]) if cut > 0 else ("", addresses)
    text = ", ".join(rest[:shown]) + (f" and {len(rest) - shown} more" if len(rest) > shown else "")
    if len(prefix) > 60:
        prefix = "..." + prefix[-57:]
    return f"{prefix} {text}" if prefix else text


def render_text(doc: dict[str, Any], out: TextIO, top: int) -> None:
    from devbin.escape.text import visible_tree
    doc = visible_tree(doc)  # the text rule on every name, path and ID read from a file
    w = out.write
    t = doc["totals"]
    dev = t["device_bytes"]
    w(f"{t['files']} file{'s' if t['files'] != 1 else ''} with device code: {_n(t['file_bytes'])} bytes, device "
      f"code {_n(dev)} ({_pct(dev, t['file_bytes']).strip()}) in {t['images']} images and container overhead "
      f"{_n(t['overhead'])}; uncompressed {_n(t['size'])}\n")
    files = sorted(doc["files"], key=lambda f: (-f["device_bytes"], f["path"]))
    if len(files) > 1:
        w(f"\n{'FILE':60} {'DEVICE':>14} {'%':>6} {'FILE BYTES':>14} {'IMAGES':>6}\n")
        for f in files[:top]:
            w(f"{_lcut(f['path']):60} {_n(f['device_bytes']):>14} {_pct(f['device_bytes'], dev)} "
              f"{_n(f['file_bytes']):>14} {_count(f['images']):>6}\n")
        if len(files) > top:
            w(f"... {len(files) - top} more files\n")
    w(f"\n{'VENDOR':6} {'ARCH':14} {'IMAGES':>6} {'STORED':>14} {'%':>6} {'UNCOMPRESSED':>14} {'FUNCTIONS':>14}\n")
    for a in doc["by_arch"][:top]:
        w(f"{a['vendor'] or '-':6} {a['arch'] or '-':14} {a['images']:>6} {_n(a['stored_size']):>14} "
          f"{_pct(a['stored_size'], dev)} {_n(a['size']):>14} {_n(a['function_bytes']):>14}\n")
    if len(doc["by_arch"]) > top:
        w(f"... {len(doc['by_arch']) - top} more architectures\n")
    conts = doc["by_container"]
    if len(conts) > 1:
        w(f"\n{'CONTAINER':60} {'IMAGES':>6} {'STORED':>14} {'%':>6} {'UNCOMPRESSED':>14}  ARCHS\n")
        for c in conts[:top]:
            name = c["container"] + (f" ({c['identifier']})" if c["identifier"] else "")
            w(f"{_lcut(name):60} {c['images']:>6} {_n(c['stored_size']):>14} {_pct(c['stored_size'], dev)} "
              f"{_n(c['size']):>14}  {_cut(' '.join(a or '-' for a in c['archs']), 60)}\n")
        if len(conts) > top:
            w(f"... {len(conts) - top} more containers\n")
    w(f"\n{'KIND':8} {'IMAGES':>6} {'STORED':>14} {'%':>6} {'UNCOMPRESSED':>14}\n")
    for k in doc["by_kind"]:
        w(f"{k['kind']:8} {k['images']:>6} {_n(k['stored_size']):>14} {_pct(k['stored_size'], dev)} "
          f"{_n(k['size']):>14}\n")
    w(f"{'overhead':8} {'':>6} {_n(t['overhead']):>14} {_pct(t['overhead'], dev)}\n")
    fns = doc["top_functions"]
    if fns:
        w(f"\nTOP {min(top, len(fns))} FUNCTIONS (bytes of every copy in every architecture; {t['functions']} "
          "functions in all)\n")
        w(f"{'SIZE':>12} {'COPIES':>6} {'KIND':8} NAME\n")
        for f in fns[:top]:
            w(f"{_n(f['size']):>12} {f['copies']:>6} {f['kind']:8} {_cut(f['demangled'])}\n")
    d = doc["duplicates"]
    w(f"\nDUPLICATES: {_n(doc['duplicate_bytes'])} bytes in extra copies: {len(d['images'])} identical images "
      f"({_n(d['image_bytes'])} bytes), {len(d['functions'])} identical functions ({_n(d['function_bytes'])} "
      "bytes)\n")
    for g in d["images"][:top]:
        w(f"  image {g['kind']} {g['arch'] or '-'}: {len(g['copies'])} copies of {_n(g['stored_size'])} bytes, "
          f"{_n(g['wasted'])} wasted: {_copies(g['copies'])}\n")
    for g in d["functions"][:top]:
        w(f"  {g['arch']:8} {len(g['copies'])} copies x {_n(g['size']):>9} = {_n(g['wasted']):>10} wasted  "
          f"{_cut(g['demangled'], 80)}\n")
    if "savings" in doc:
        s = doc["savings"]
        w(f"\n--keep {','.join(s['keep'])}: `devbin prune` saves {_n(s['bytes'])} file bytes; the containers shrink "
          f"by {_n(s['freed'])}; dropped images per architecture: "
          + (", ".join(f"{a} {_n(n)}" for a, n in s["by_arch"].items()) or "none") + "\n")
        for f in files:
            fs = f.get("savings", {})
            why = f"  (refused: {fs['refused']})" if fs.get("refused") else ""
            w(f"  {_lcut(f['path']):60} {_n(fs.get('bytes', 0)):>14} saved, {_n(fs.get('freed', 0)):>14} "
              f"freed{why}\n")


def render_csv(doc: dict[str, Any], out: TextIO) -> None:
    cols = ["file", "address", "vendor", "kind", "arch", "compression", "image_size", "image_stored_size",
            "function", "demangled", "function_kind", "function_size"]
    from devbin.escape.csvcell import cell  # the CSV rule: no formula, control or raw byte in a cell
    wr = csv.writer(out, lineterminator="\n")
    wr.writerow(cols)
    for f in doc["files"]:
        for i in f["images"]:
            base = [cell(v) for v in (f["path"], i["address"], i["vendor"], i["kind"], i["arch"], i["compression"],
                                      i["size"], i["stored_size"])]
            if not i["functions"]:
                wr.writerow([*base, "", "", "", ""])
            for fn in i["functions"]:
                wr.writerow([*base, cell(fn["name"]), cell(fn["demangled"]), cell(fn["kind"]), fn["size"]])


def render_budget(violations: Sequence[Violation], rules: Sequence[Rule], out: TextIO) -> None:
    from devbin.escape.text import visible
    w = out.write
    if not violations:
        w(f"\nbudget: {len(rules)} rule{'s' if len(rules) != 1 else ''}, all within their limits\n")
        return
    w(f"\nBUDGET EXCEEDED: {len(violations)} over their limit\n")
    for v in violations:
        w(f"  {visible(v.rule)}: {_cut(visible(v.subject), 90)} is {_n(v.bytes)} bytes, {_n(v.bytes - v.limit)} "
          f"over {_n(v.limit)}\n")


# --------------------------------------------------------------------------- run


def _run_diff(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.images.scanreport import ScanReport
    from devbin.size.account import measure
    from devbin.size.diff import diff, markdown

    sides = []
    for path in args.diff:
        report = ScanReport()
        sides.append(measure([path], report=report, resources=True))
        for m in report.warnings:
            warn(m)
    if not sides[0] and not sides[1]:
        return no_device_code(args.diff)
    d = diff(sides[0], sides[1])
    d = {"old": args.diff[0], "new": args.diff[1], **d}
    if args.json:
        dump("size-diff", d, out)
    else:
        out.write(markdown(d, top=args.top))
    return 0


#: The largest code objects --html looks at, by default, for one with calls to draw.
GRAPH_CANDIDATES = 8


def _write_html(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    import devbin
    from devbin.analysis.callgraph import nodes
    from devbin.binary.output import write_file
    from devbin.htmlreport import callgraph_svg, largest_code_objects, render_size_report
    from devbin.images.address import Address
    graphs: dict[str, str] = {}
    # by default the largest code object whose functions call one another: a graph of kernels alone is
    # a row of unconnected boxes that says nothing
    for address in args.graph or largest_code_objects(doc, GRAPH_CANDIDATES):
        with devbin.open(Address.parse(address).path) as src:
            obj = src.image(address).code_object()
        if obj is None:
            raise BadArguments(f"--graph {address}: not a cubin or AMDGPU code object")
        if not args.graph and not any(n.calls for n in nodes(obj)):
            continue
        graphs[address] = callgraph_svg(obj, title=address)
        if not args.graph:
            break
    write_file(args.html, render_size_report(doc, graphs).encode(), inputs=args.paths)


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.top < 1:
        raise BadArguments("--top must be at least 1")
    if args.diff:
        if args.paths:
            raise BadArguments("--diff OLD NEW takes no other PATH")
        return _run_diff(args, out)
    from devbin.errors import UsageError
    from devbin.size.budget import check, parse_rule
    try:
        rules = [parse_rule(r) for r in args.budget]
    except UsageError as e:
        raise BadArguments(f"--budget: {e.message}") from None
    measured: list[FileSize] = []
    with progress_bar("measuring") as progress:
        doc, failed = size_doc(args, progress, measured.extend, detail=bool(args.json or args.csv or args.html))
    for m in doc["warnings"]:
        warn(m)
    if not doc["files"] and not doc["warnings"]:
        return no_device_code(args.paths or [str(a) for a in ImageFilter(args).paths([])])
    violations = check(rules, measured)
    if rules:
        doc["budget"] = {"rules": [r.text for r in rules], "violations": [v.to_dict() for v in violations]}
    if args.html:
        _write_html(args, doc)
    if args.json:
        dump("size", doc, out, indent=None)
    elif args.csv:
        render_csv(doc, out)
    else:
        render_text(doc, out, args.top)
        if rules:
            render_budget(violations, rules, out)
    status = scan_status(failed)
    if status == 0 and violations:
        return EXIT_OVER_BUDGET
    return status
