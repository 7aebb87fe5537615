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
--top N rows per table (default 20; 0: every row, as bloaty's -n 0).  Function names are cut to fit
the width COLUMNS says, else the terminal's when stdout is one, else 80 (a pipe or a file: the same
text wherever it ran); --wide never cuts them.
--json gives every image and function (`devbin schema size`) on one line (it can hold every function
of an environment; `python3 -m json.tool` indents it); --csv one row per function (and per image
without functions).  A progress bar goes to stderr when it is a terminal.  Names, paths and IDs read
from files are escaped for each output (docs/REPORT.md, "Escaping"): control and bidi characters shown
as \\x1b or \\u202e, a CSV cell that would start a formula (= + - @) prefixed with ', markdown names
and architectures as code spans.

--keep ARCHS (sm_90,gfx90a ...): what `devbin prune --keep ARCHS` would save, per file and in total,
computed by prune itself (the numbers prune then reports): the total under the first line, a SAVED
column in the architecture table (the bytes of the images dropped), a table per file at the end,
then per wheel its size (compressed) and installed size before and after, and for a folder (an
environment's site-packages) its installed size before and after `prune --in-place` (every file but
the backups, its packages' RECORDs included);
and a line when prune keeps images no name keeps (what a kept GPU loads: docs/PRUNE.md, "What a kept
GPU loads") or leaves containers a kept GPU loads nothing from.

--max-segments N (with --keep): prune's limit on a pruned library's program headers (default 2,048;
docs/PRUNE.md): a higher one cuts more freed pages out of a library that keeps its fatbins in data
sections, at the cost of the loading thread's stack.

--jobs N measures the files (a folder, several paths, the libraries of a wheel for --keep; from 8 MB
of them) in N processes (default: one per processor; --jobs 1: this process only); the output is the
same whatever N.  --scheduler ADDRESS measures the files on the workers of a Dask cluster instead
(one file a task; pip install 'devbin[dask]'), the output the same as with --jobs 1 (--keep's pruning
stays in this machine's processes).  A PATH may be a URL read through fsspec (https://..., s3://...;
docs/API.md, "Many machines").

--budget RULE (repeatable) for CI: SCOPE[:PATTERN]=SIZE with SCOPE total (all device bytes), file
(each file's device bytes; PATTERN a glob on its path), arch (stored bytes of each architecture;
PATTERN sm_90, sm_1*, gfx9*), kernel or function (each copy's size; PATTERN a glob on the mangled or
demangled name); SIZE in bytes or with K, M, G (binary).  E.g. --budget total=400M --budget
arch:sm_90=120M --budget 'kernel:*gemm*=2M'.  Each subject over its limit is printed once (a
function's copy with its architecture); the exit status is then 4.  With --diff the rules are checked
against NEW.

--html -o OUT also writes the report as one self-contained HTML page (no network at view time): a
zoomable treemap of stored bytes (vendor -> file -> architecture -> template family -> function; what
--keep removes in red, duplicates outlined), sortable tables, the duplicates and the call graph of the
largest code object whose functions call one another, or of each --graph ADDRESS (docs/REPORT.md).

--diff OLD NEW compares two builds (each a file, folder or wheel): bytes per architecture and per
function, and the registers, stack and spills of every kernel whose resources changed, as markdown
tables fit for a CI comment, under a line naming OLD and NEW (--json: `devbin schema size-diff`).  An
architecture only one build has is one row of the architecture table (its functions counted there,
listed in --json), not rows of the function table.

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

from devbin.cli.common import (
    EXIT_OVER_BUDGET,
    BadArguments,
    ImageFilter,
    add_image_options,
    add_jobs_option,
    add_max_segments_option,
    add_picture_option,
    add_scheduler_option,
    arch_list,
    dump,
    max_segments,
    no_device_code,
    picture_output,
    scheduler_client,
    warn,
)
from devbin.cli.progress import progress_bar
from devbin.cli.render import count, scan_status

if TYPE_CHECKING:
    from devbin.size.account import FileSize
    from devbin.size.budget import Rule, Violation
    from devbin.size.shapes import SizeReport

HELP = "where the bytes of device code go: per file, architecture, kind and function; duplicates, --keep " \
       "savings, --budget, --diff"

#: Files of fewer bytes than this in all are measured (and pruned for --keep) by this process whatever
#: --jobs says: a pool costs more than it saves.
MIN_PARALLEL_BYTES = 8 << 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="files, folders, wheels, environments")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print JSON (`devbin schema size`)")
    out.add_argument("--csv", action="store_true", help="print CSV: one row per function")
    p.add_argument("--top", type=int, default=20, metavar="N", help="rows per table; 0: all (default: %(default)s)")
    p.add_argument("--wide", action="store_true", help="names whole, however long (default: cut to the width of "
                                                       "COLUMNS, of the terminal, or 80)")
    p.add_argument("--keep", action="append", metavar="ARCHS",
                   help="also what `devbin prune --keep ARCHS` would save (repeatable, or a comma list)")
    p.add_argument("--budget", action="append", default=[], metavar="RULE",
                   help="SCOPE[:PATTERN]=SIZE, scope total, file, arch, kernel or function (repeatable; exit 4 "
                        "when exceeded)")
    p.add_argument("--diff", nargs=2, metavar=("OLD", "NEW"), help="compare two builds")
    add_picture_option(p, "--html", "also write the report as one self-contained HTML page: zoomable treemap, "
                                    "sortable tables, duplicates, call graphs (docs/REPORT.md)")
    p.add_argument("--graph", action="append", default=[], metavar="ADDRESS",
                   help="a code object whose call graph --html shows (repeatable; default: the largest)")
    add_image_options(p, all=False)
    add_max_segments_option(p)
    add_jobs_option(p)
    add_scheduler_option(p)


# --------------------------------------------------------------------------- the report


def size_doc(args: argparse.Namespace, progress: Callable[[int, int], None] | None = None,
             measured: Callable[[list[FileSize]], None] | None = None,
             detail: bool = True) -> tuple[SizeReport, list[str]]:
    """The report dict of one command line (what --json prints, less its schema key) and the scan's
    files that failed.  The HTML report (--html) renders this same dict.  ``detail=False``: each file's
    images left out (the text tables do not print them)."""
    from devbin.images.scanreport import ScanReport
    from devbin.size.account import measure
    from devbin.size.report import only_images, report_dict

    choose = ImageFilter(args)
    paths = choose.paths(args.paths)
    keep = arch_list(args.keep, "--keep") or None
    segments = max_segments(args.max_segments)
    if segments is not None and keep is None:
        raise BadArguments("--max-segments goes with --keep (it is prune's)")
    from devbin.images.remote import is_url
    if keep is not None and any(is_url(p) for p in paths):
        raise BadArguments("--keep prunes copies of files on this machine, and a URL is not one: download it first")
    report = ScanReport()
    with scheduler_client(getattr(args, "scheduler", None)) as client:
        files = measure(paths, progress=progress, report=report, jobs=args.jobs, min_bytes=MIN_PARALLEL_BYTES,
                        client=client)
    if choose.active:
        files = only_images(files, choose)
        choose.check()
    if measured is not None:
        measured(files)
    return report_dict(files, keep=keep, warnings=report.warnings, top=args.top, detail=detail, jobs=args.jobs,
                       min_bytes=MIN_PARALLEL_BYTES, paths=paths, max_segments=segments), report.failed


# --------------------------------------------------------------------------- text


def _n(v: int) -> str:
    return f"{v:,}"


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "    -"


def _cut(name: str, width: int | None = 100) -> str:
    return name if width is None or len(name) <= width else name[:width - 3] + "..."


#: The width of text output when neither COLUMNS nor a terminal says (bloaty's and ls's default).
DEFAULT_COLUMNS: Final = 80


def columns(out: TextIO, wide: bool) -> int | None:
    """The width function names are cut to (None: ``--wide``, never cut): ``COLUMNS`` when set, else
    the terminal's width when ``out`` is a terminal, else :data:`DEFAULT_COLUMNS` (a pipe or a file: the
    same text whatever terminal ran the command)."""
    if wide:
        return None
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    if out.isatty():
        import shutil
        return shutil.get_terminal_size((DEFAULT_COLUMNS, 24)).columns
    return DEFAULT_COLUMNS


def _more(rows: Sequence[Any], top: int | None, what: str) -> str:
    """The ``... N more WHAT`` line under a table cut to ``top`` rows (None: not cut), or ""."""
    return f"... {len(rows) - top} more {what}\n" if top is not None and len(rows) > top else ""


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


def render_text(doc: SizeReport, out: TextIO, top: int | None, width: int | None = DEFAULT_COLUMNS) -> None:
    """The text report: ``top`` rows per table (None: all), function names cut to fit ``width`` columns
    (None: whole).  With ``--keep`` its result comes second, under the totals, and the architecture
    table has a SAVED column."""
    from devbin.escape.text import visible_tree
    doc = visible_tree(doc)  # the text rule on every name, path and ID read from a file
    w = out.write
    t = doc["totals"]
    dev = t["device_bytes"]
    w(f"{count(t['files'], 'file')} with device code: {_n(t['file_bytes'])} bytes, device "
      f"code {_n(dev)} ({_pct(dev, t['file_bytes']).strip()}) in {count(t['images'], 'image')} and container overhead "
      f"{_n(t['overhead'])}; uncompressed {_n(t['size'])}\n")
    saved = doc.get("savings")
    if saved is not None:
        w(f"--keep {','.join(saved['keep'])}: `devbin prune` saves {_n(saved['bytes'])} of {_n(t['file_bytes'])} file "
          f"bytes ({_pct(saved['bytes'], t['file_bytes']).strip()}); the containers shrink by {_n(saved['freed'])}\n")
        if saved.get("fallback_images") or saved.get("unloadable_containers"):
            w(f"  it keeps {_n(saved.get('fallback_images', 0))} images no name keeps (what a kept GPU loads from "
              f"their containers), and {_n(saved.get('unloadable_containers', 0))} containers no longer load on a "
              "kept GPU (devbin prune's notes say which)\n")
    files = sorted(doc["files"], key=lambda f: (-f["device_bytes"], f["path"]))
    if len(files) > 1:
        w(f"\n{'FILE':60} {'DEVICE':>14} {'%':>6} {'FILE BYTES':>14} {'IMAGES':>6}\n")
        for f in files[:top]:
            w(f"{_lcut(f['path']):60} {_n(f['device_bytes']):>14} {_pct(f['device_bytes'], dev)} "
              f"{_n(f['file_bytes']):>14} {_count(f['images']):>6}\n")
        w(_more(files, top, "files"))
    w(f"\n{'VENDOR':6} {'ARCH':14} {'IMAGES':>6} {'STORED':>14} {'%':>6} {'UNCOMPRESSED':>14} {'FUNCTIONS':>14}"
      + (f" {'SAVED':>14}" if saved is not None else "") + "\n")
    for a in doc["by_arch"][:top]:
        w(f"{a['vendor'] or '-':6} {a['arch'] or '-':14} {a['images']:>6} {_n(a['stored_size']):>14} "
          f"{_pct(a['stored_size'], dev)} {_n(a['size']):>14} {_n(a['function_bytes']):>14}"
          + (f" {_n(saved['by_arch'].get(a['arch'], 0)):>14}" if saved is not None else "") + "\n")
    w(_more(doc["by_arch"], top, "architectures"))
    conts = doc["by_container"]
    if len(conts) > 1:
        w(f"\n{'CONTAINER':60} {'IMAGES':>6} {'STORED':>14} {'%':>6} {'UNCOMPRESSED':>14}  ARCHS\n")
        for c in conts[:top]:
            name = c["container"] + (f" ({c['identifier']})" if c["identifier"] else "")
            w(f"{_lcut(name):60} {c['images']:>6} {_n(c['stored_size']):>14} {_pct(c['stored_size'], dev)} "
              f"{_n(c['size']):>14}  {_cut(' '.join(a or '-' for a in c['archs']), 60)}\n")
        w(_more(conts, top, "containers"))
    w(f"\n{'KIND':8} {'IMAGES':>6} {'STORED':>14} {'%':>6} {'UNCOMPRESSED':>14}\n")
    for k in doc["by_kind"]:
        w(f"{k['kind']:8} {k['images']:>6} {_n(k['stored_size']):>14} {_pct(k['stored_size'], dev)} "
          f"{_n(k['size']):>14}\n")
    w(f"{'overhead':8} {'':>6} {_n(t['overhead']):>14} {_pct(t['overhead'], dev)}\n")
    fns = doc["top_functions"]
    if fns:
        w(f"\nTOP {len(fns[:top])} FUNCTIONS (bytes of every copy in every architecture; {t['functions']} "
          "functions in all)\n")
        w(f"{'SIZE':>12} {'COPIES':>6} {'KIND':8} NAME\n")
        for fn in fns[:top]:  # the name fills the rest of the line: 29 columns before it
            w(f"{_n(fn['size']):>12} {fn['copies']:>6} {fn['kind']:8} "
              f"{_cut(fn['demangled'], None if width is None else max(width - 29, 20))}\n")
    d = doc["duplicates"]
    w(f"\nDUPLICATES: {_n(doc['duplicate_bytes'])} bytes in extra copies: {len(d['images'])} identical images "
      f"({_n(d['image_bytes'])} bytes), {len(d['functions'])} identical functions ({_n(d['function_bytes'])} "
      "bytes)\n")
    for g in d["images"][:top]:
        w(f"  image {g['kind']} {g['arch'] or '-'}: {len(g['copies'])} copies of {_n(g['stored_size'])} bytes, "
          f"{_n(g['wasted'])} wasted: {_copies(g['copies'])}\n")
    for h in d["functions"][:top]:
        line = f"  {h['arch']:8} {len(h['copies'])} copies x {_n(h['size']):>9} = {_n(h['wasted']):>10} wasted  "
        w(line + f"{_cut(h['demangled'], None if width is None else max(width - len(line), 20))}\n")
    if saved is not None:
        w(f"\n--keep {','.join(saved['keep'])}: per file\n"
          f"{'FILE':60} {'BEFORE':>14} {'AFTER':>14} {'SAVED':>14} {'FREED':>14}\n")
        for f in files[:top]:
            fs = f.get("savings", {})
            why = fs.get("refused", "")
            why = f"  refused: {why.removeprefix(f['path'] + ': ')}" if why else ""  # the row names the file
            after = f["file_bytes"] - fs.get("bytes", 0)
            w(f"{_lcut(f['path']):60} {_n(f['file_bytes']):>14} {_n(after):>14} {_n(fs.get('bytes', 0)):>14} "
              f"{_n(fs.get('freed', 0)):>14}{why}\n")
        w(_more(files, top, "files"))
        for p in saved.get("packages", []):
            if "refused" in p:
                w(f"{p['kind']} {p['path']}: refused: {p['refused'].removeprefix(p['path'] + ': ')}\n")
                continue
            compressed = (f"{_n(p['package_size_before'])} -> {_n(p['package_size_after'])} bytes compressed, "
                          if "package_size_before" in p else "")  # a wheel's; a folder is its installed size
            w(f"{p['kind']} {p['path']}: {compressed}installed {_n(p['installed_size_before'])} -> "
              f"{_n(p['installed_size_after'])}\n")


def render_csv(doc: SizeReport, out: TextIO) -> None:
    cols = ["file", "address", "vendor", "kind", "arch", "compression", "image_size", "image_stored_size",
            "function", "demangled", "function_kind", "function_size"]
    from devbin.escape.csvcell import cell  # the CSV rule: no formula, control or raw byte in a cell
    wr = csv.writer(out, lineterminator="\n")
    wr.writerow(cols)
    for f in doc["files"]:
        assert not isinstance(f["images"], int), "a summary (detail=False) has no rows"
        for i in f["images"]:
            base = [cell(v) for v in (f["path"], i["address"], i["vendor"], i["kind"], i["arch"], i["compression"],
                                      i["size"], i["stored_size"])]
            if not i["functions"]:
                wr.writerow([*base, "", "", "", ""])
            for fn in i["functions"]:
                wr.writerow([*base, cell(fn["name"]), cell(fn["demangled"]), cell(fn["kind"]), fn["size"]])


def render_budget(violations: Sequence[Violation], rules: Sequence[Rule], out: TextIO) -> None:
    """Each violation once: its rule, its subject (a function's with its architecture), how far over."""
    from devbin.escape.text import visible
    w = out.write
    if not violations:
        w(f"\nbudget: {count(len(rules), 'rule')}, all within their limits\n")
        return
    w(f"\nBUDGET EXCEEDED: {len(violations)} over their limit\n")
    for v in violations:
        w(f"  {visible(v.rule)}: {visible(v.label())} is {_n(v.bytes)} bytes, {_n(v.bytes - v.limit)} "
          f"over {_n(v.limit)}\n")


# --------------------------------------------------------------------------- run


def _run_diff(args: argparse.Namespace, rules: Sequence[Rule], out: TextIO) -> int:
    """--diff OLD NEW; the --budget rules are checked against NEW (the build CI is about to ship)."""
    from devbin.images.scanreport import ScanReport
    from devbin.size.diff import diff_report, markdown

    report = ScanReport()
    d, violations = diff_report(args.diff[0], args.diff[1], rules=rules, report=report)
    for m in report.warnings:
        warn(m)
    if not d["totals"]["files"]["old"] and not d["totals"]["files"]["new"]:
        return no_device_code(args.diff)
    if args.json:
        dump("size-diff", dict(d), out)
    else:
        out.write(markdown(d, top=args.top))
        if rules:
            render_budget(violations, rules, out)
    return EXIT_OVER_BUDGET if violations else 0


def _write_html(args: argparse.Namespace, doc: SizeReport) -> None:
    from devbin.binary.output import write_file
    from devbin.errors import UsageError
    from devbin.htmlreport import render_size_report, report_graphs
    try:
        graphs = report_graphs(doc, args.graph)
    except UsageError as e:
        raise BadArguments(e.message) from None
    write_file(args.html_out, render_size_report(doc, graphs).encode(), inputs=args.paths)


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.top < 0:
        raise BadArguments("--top must be 0 (all rows) or more")
    args.top = args.top or None  # 0: every row, as bloaty's -n 0
    args.html_out = picture_output(args, "--html")
    from devbin.errors import UsageError
    from devbin.size.budget import check, parse_rule
    try:
        rules = [parse_rule(r) for r in args.budget]
    except UsageError as e:
        raise BadArguments(f"--budget: {e.message}") from None
    if args.diff:
        if args.paths:
            raise BadArguments("--diff OLD NEW takes no other PATH")
        if args.html_out or args.keep or args.csv:
            raise BadArguments("--diff OLD NEW prints markdown or --json only (no --html, --keep or --csv)")
        return _run_diff(args, rules, out)
    measured: list[FileSize] = []
    with progress_bar("measuring") as progress:
        # --json writes each file's images as it goes (report.streamed): the document is not held whole
        doc, failed = size_doc(args, progress, measured.extend, detail=bool(args.csv or args.html_out))
    for m in doc["warnings"]:
        warn(m)
    if not doc["files"] and not doc["warnings"]:
        return no_device_code(args.paths or [str(a) for a in ImageFilter(args).paths([])])
    violations = check(rules, measured)
    if rules:
        doc["budget"] = {"rules": [r.text for r in rules], "violations": [v.to_dict() for v in violations]}
    if args.html_out:
        _write_html(args, doc)
    if args.json:
        from devbin.size.report import streamed
        dump("size", streamed(doc, measured), out, indent=None)
    elif args.csv:
        render_csv(doc, out)
    else:
        render_text(doc, out, args.top, columns(out, args.wide))
        if rules:
            render_budget(violations, rules, out)
    status = scan_status(failed)
    if status == 0 and violations:
        return EXIT_OVER_BUDGET
    return status
