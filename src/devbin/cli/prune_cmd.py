"""Keep only some GPU architectures of a file, like nvprune and lipo -thin.

Works on bare fatbins, LLVM OffloadBinaries, clang offload bundles (plain and
compressed), host objects (.o), static libraries (.a) and, beyond nvprune,
shared libraries and executables (NVIDIA, AMD, and Intel SYCL libraries).
Give --keep or --drop, repeated or with a
comma list (--keep sm_80 --keep sm_90,gfx90a names three), in any case
(SM_90, gfx90A).  A name that is no architecture devbin knows is refused
(exit 2) with the one meant ("sm90: ... did you mean sm_90?"), and a kept
name that matches no image of the input is an error before anything is
written (exit 1, naming the architectures the input holds).

Matching (nvprune -arch names for NVIDIA):
  sm_90        the sm_90 cubin and the compute_90 PTX/LTO-IR (sm_90a is another arch);
               nvprune -arch sm_90 drops that PTX (--ptx none below; the default is
               its -gencode arch=compute_90,code=[sm_90,compute_90])
  compute_90   only the compute_90 PTX/LTO-IR
  gfx90a       every gfx90a target: gfx90a, gfx90a:xnack+, gfx90a:xnack- ...
  gfx90a:xnack+  only that exact target ID
Host entries of bundles always stay.  A selection that leaves no device image
is refused.

--ptx chooses the PTX (pack's words, docs/PRUNE.md "The PTX policy"):
  kept         (the default) the PTX/LTO-IR of the kept architectures, as above
  none         no PTX/LTO-IR at all: nvprune -arch sm_90's rule (byte for byte)
  highest      the kept ones plus, in each fatbin, the highest PTX a newer GPU
               can JIT: the slim library still runs (JIT) on GPUs newer than kept

--spirv chooses the SPIR-V in the same words (docs/PRUNE.md, "SPIR-V"): kept
(the default) and highest keep every module (SPIR-V names no device), none
drops what a container can lose (an ocloc archive's generic_ir; a SYCL image
that is itself SPIR-V stays whole, a note says so).  --jit-ir POLICY gives
PTX and SPIR-V that policy at once; --ptx and --spirv beside it win.

Intel (SYCL host libraries, DPC++'s old offload model): --keep 12.60.7 (or
acm-g10, dg2, pvc: the names list and select use) drops the other devices'
zebins from the ocloc archive in each image of __CLANG_OFFLOAD_BUNDLE__sycl-*,
writes the archive again as ocloc does, compresses the frame again (zstd),
packs the section with the descriptors, .tgtimg and symbols moved, and cuts
the freed whole pages out of the file.  A SYCL image itself always stays;
relocatable objects are refused.

A kept GPU loads from the result what it loaded from the input: in each
container the image the driver picks for it stays, named or not (a fatbin
holding only compute_50 PTX keeps it under --keep sm_90: sm_90 JIT-compiles
it; sm_86 runs sm_80 SASS); a note and the JSON's fallback_images count them.
--ptx none drops such PTX, and a --drop name equal to an image's arch drops
that image: a note and unloadable_containers count the containers a kept GPU
then loads nothing from.  Containers emptied of LTO-IR (no driver loads it;
a library may link it with nvJitLink) are counted in a note.

Objects and archives shrink: the fatbin/offload sections are rewritten and the
symbols and relocations pointing at them fixed up; archives are written again
deterministically (GNU format, symbol table rebuilt).  Shared libraries and
executables shrink too: the kept images are packed at the start of .nv_fatbin /
.hip_fatbin (the wrappers pointing at them moved), and the freed whole pages
are cut out of the file (virtual addresses unchanged; docs/PRUNE.md).

A wheel (.whl) is pruned library by library into a new wheel with its RECORD
regenerated; a library of another vendor than the one named stays
byte-identical, and so does one the selection would leave without device
code (a cufftw holding sm_52 only, --keep sm_90): a note and the JSON's
"untouched" say why.  --missing fail refuses such a wheel or folder instead,
before any library is pruned, naming each library.  The wheel is verified first, as an installer verifies it:
member names (no absolute path, drive letter, backslash or '..' component, no
two members of one name), one top-level *.dist-info/RECORD, and a row for
every member whose hash and size match its bytes.  A wheel that fails is
refused (exit 1) with one line naming the member and the check: devbin would
otherwise sign tampered bytes with a valid RECORD.  --force goes on past RECORD
problems (a wrong hash or size, a missing or extra row, a RECORD that is not
UTF-8 CSV): the new RECORD describes the members as they are and a note (and
the JSON's notes) names each problem.  Unsafe or duplicate names are refused
even with --force: no rewrite of such a wheel is faithful.  Members are
streamed, never read whole (but the libraries being pruned), also for
--dry-run.  A truncated .whl, or one that is not a zip, is an error ("not a
zip file", exit 1), in this and every other command.  A folder (an installed site-packages) is pruned in place
(--in-place), with the RECORD rows of the pruned files updated and each
backup's row added to its package's RECORD (pip uninstall removes it).  --jobs N
prunes the libraries of a wheel or folder (from 8 MB of them) in N
processes (default: one per processor; --jobs 1: this process only); the
output, the new wheel and the files written are the same whatever N.

--max-segments N: the most program headers a pruned library or executable
may have (default 2,048).  Each range of freed pages cut out of a data
section adds one, and glibc's loader holds them on the stack of the thread
that calls dlopen (about 112 bytes each); past N the smaller ranges stay as
zeros (a note says how many bytes).  cuFFT --keep sm_90 --ptx none: 2,048
saves 57.3 MB and loads from a thread with a 256 KiB stack; 4,096 saves
89.4 MB and needs a 1 MiB stack; 8,192 saves 130.9 MB (docs/PRUNE.md).

--image ADDRESS (repeatable; as `devbin list --all` prints it) applies --keep or
--drop to those images only; every other image stays.  (--keep/--drop use
nvprune's matching, where sm_90 does not take sm_90a; --arch elsewhere is
cuobjdump's.)

-o OUT writes the result; -o DIR/ (or an existing folder) writes DIR/<input
name> (a wheel keeps its name, which pip needs).  The output's folder must
exist and take files; that is checked before any work.  The input is never
overwritten unless --in-place, and never written at all without it.  --in-place writes a new file beside the
input, flushed, and renames it over the input; the original is kept as
INPUT.devbin-backup unless --no-backup, and a backup that exists is never
replaced (it is the first original; a note says so).  An in-place prune holds
a lock (.INPUT.devbin-lock, or FOLDER/.devbin-lock): a second devbin stops at
once with one line.  A folder is written all or nothing (each new file staged,
then all renamed in; on a failure every file is put back); one killed between
two renames is put back by the next --in-place prune of that folder.  Files
named *.devbin-backup are never read as a folder's libraries.  Every check
runs before anything is written: a failure leaves the input as it was and no
partial output (docs/PRUNE.md, "What --in-place promises").
--dry-run prints what would be dropped and the bytes saved per architecture
without writing anything.  Notes go to stderr, and a progress bar (the bytes of the libraries
pruned) when stderr is a terminal.  When the input held PTX a GPU
newer than its SASS could JIT and the result keeps none, a note says so and
names what to keep (the rule `devbin pack` warns with); under --ptx none it
only says what that choice means.  Under --spirv none a note says which
SPIR-V stays, or, when none does, that other devices cannot run the result.  Exit status: 0 success, 1
error (a selection that leaves nothing, a file that cannot be rewritten), 2
bad arguments (no -o, --dry-run or --in-place), 3 when the file holds no
device code.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from devbin.cli.common import (
    BadArguments,
    ImageFilter,
    add_jobs_option,
    add_max_segments_option,
    arch_list,
    dump,
    holds_device_code,
    keep,
    max_segments,
    no_device_code,
    note,
)
from devbin.cli.progress import progress_bar
from devbin.escape.text import visible

if TYPE_CHECKING:
    from devbin.images.record import Image

HELP = ("keep only the named GPU architectures (like nvprune / lipo -thin) in fatbins, bundles, objects, libraries, "
        "executables, wheels")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="input file")
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--keep", action="append", metavar="ARCHS",
                     help="architectures to keep (sm_90,gfx90a ...; repeatable, or a comma list)")
    sel.add_argument("--drop", action="append", metavar="ARCHS",
                     help="architectures to remove (repeatable, or a comma list)")
    p.add_argument("--missing", choices=("keep", "fail"), default=None,
                   help="a wheel's or folder's library the selection would leave no device image: keep it as it "
                        "is, with a note (the default), or fail before any work")
    # devbin.packaging.pruning.PRUNE_PTX_POLICIES, spelt out: importing it here would load the writers for every command
    p.add_argument("--ptx", choices=("kept", "none", "highest"), default=None,
                   help="which PTX stays: the kept architectures' (kept, the default), none (nvprune -arch's rule), "
                        "or the kept ones plus each fatbin's highest as a JIT fallback for newer GPUs (highest)")
    p.add_argument("--spirv", choices=("kept", "none", "highest"), default=None,
                   help="which SPIR-V stays: every module (kept, the default; highest is the same: SPIR-V names no "
                        "device), or none (an ocloc archive's generic_ir goes)")
    p.add_argument("--jit-ir", choices=("kept", "none", "highest"), default=None,
                   help="the policy for every JIT IR at once (PTX and SPIR-V); --ptx and --spirv override it")
    p.add_argument("--image", action="append", default=[], metavar="ADDRESS",
                   help="apply --keep/--drop only to the image at this address (repeatable)")
    p.add_argument("-o", "--output", metavar="OUT", help="write the pruned file here")
    p.add_argument("--in-place", action="store_true", help="rewrite the input itself (a file, wheel or folder)")
    p.add_argument("--no-backup", action="store_true", help="with --in-place: keep no INPUT.devbin-backup")
    p.add_argument("--dry-run", action="store_true", help="write nothing; print the bytes saved per architecture")
    p.add_argument("--force", action="store_true",
                   help="a wheel whose RECORD does not match its members: go on, with a new RECORD (notes say what "
                        "was wrong)")
    add_max_segments_option(p)
    add_jobs_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, out: TextIO) -> int:
    import os

    args.keep = arch_list(args.keep, "--keep") or None
    args.drop = arch_list(args.drop, "--drop") or None
    args.max_segments = max_segments(args.max_segments)
    args.ptx = args.ptx or args.jit_ir or "kept"
    args.spirv = args.spirv or args.jit_ir or "kept"
    output = args.output
    if output is None and args.in_place:
        output = args.path
    if output is None and not args.dry_run:
        raise BadArguments("give -o OUT (or --dry-run, or --in-place)")
    if args.no_backup and not args.in_place:
        raise BadArguments("--no-backup goes with --in-place")
    if not holds_device_code([args.path]):
        return no_device_code([args.path])
    package = os.path.isdir(args.path) or _is_zip(args.path)
    if args.output is not None and not args.in_place and not args.dry_run and not os.path.isdir(args.path):
        output = _destination(args.output, args.path)  # every output path checked before the work
    if package:
        if args.image:
            raise BadArguments("--image applies to one file, not to a wheel or folder")
        if args.force and os.path.isdir(args.path):
            raise BadArguments("--force goes with a wheel")
        return _package(args, output, out)
    if args.force:
        raise BadArguments("--force goes with a wheel")
    if args.missing is not None:
        raise BadArguments("--missing goes with a wheel or folder")
    from devbin.images.scan import scan
    from devbin.packaging.prune_packages import BACKUP_SUFFIX
    from devbin.packaging.pruning import prune_file

    if args.image:  # every address must name an image of the file
        choose = ImageFilter(args)
        keep(scan([args.path], all=True), choose, lambda i: i)
    backup = args.path + BACKUP_SUFFIX if args.in_place and not args.no_backup and not args.dry_run else None
    with progress_bar("pruning") as progress:  # one file: one step, but the bar says something is going on
        size = os.path.getsize(args.path)
        if progress is not None:
            progress(0, size)
        result = prune_file(args.path, None if args.dry_run else output, keep=args.keep, drop=args.drop,
                            in_place=args.in_place, images=[str(a) for a in ImageFilter(args).addresses],
                            backup=backup, ptx=args.ptx, spirv=args.spirv, max_segments=args.max_segments)
    arch_bytes = result.to_dict()["arch_bytes"]
    files = [{"name": args.path, "input_size": result.input_size, "output_size": result.output_size,
              "file_bytes_saved": result.file_bytes_saved, "saved_by_arch": result.saved_by_arch(),
              "arch_bytes": arch_bytes, "untouched": "", "fallback_images": result.fallback_images,
              "unloadable_containers": result.unloadable_containers}]
    if args.json:
        doc = {"input": args.path, "output": None if args.dry_run else output, "dry_run": bool(args.dry_run),
               "kind": "file", **result.to_dict(), "files": files, "package": None, "backup": backup,
               "ptx_policy": args.ptx, "spirv_policy": args.spirv, "max_segments": _segments(args)}
        dump("prune", doc, out)
        return 0
    _images(result.rows(), out)
    _arch_table(result.bytes_by_arch(), out)
    out.write(f"\n{_saved('file', result.input_size, result.output_size)}; the containers "
              f"{result.container_bytes_freed:,} bytes smaller\n")
    _written(args, output, backup, out)
    for n in result.notes:
        note(n)
    return 0


def _segments(args: argparse.Namespace) -> int:
    """The program-header limit the prune ran with (``--max-segments``, or the default)."""
    from devbin.formats.elf.pages import MAX_SEGMENTS
    return int(args.max_segments) if args.max_segments is not None else MAX_SEGMENTS


def _destination(output: str, path: str) -> str:
    """Where ``-o output`` writes (``DIR/`` or an existing folder: ``DIR/<input name>``), checked now:
    the folder exists and takes files, the file is not the input (devbin.binary.output.destination)."""
    from devbin.binary.output import destination
    from devbin.errors import InputClash
    try:
        return destination(output, path, inputs=(path,))
    except InputClash as e:
        raise InputClash(f"{e.message}, or pass --in-place", where=e.where) from None


def _is_zip(path: str) -> bool:
    from devbin.formats.magic import SNIFF, is_zip
    try:
        with open(path, "rb") as f:
            return is_zip(f.read(SNIFF))
    except OSError:
        return False


def _images(rows: list[tuple[Image, bool, int]], out: TextIO) -> None:
    """One short row per image: keep or drop, architecture, kind, its bytes in the container, and its
    address last (the long column: a wheel's addresses do not push the others out of line)."""
    archs = [visible(i.arch or "-") for i, _, _ in rows]
    aw = max([len("arch"), *(len(a) for a in archs)])
    out.write(f"{'action':6} {'arch':{aw}} {'kind':7} {'bytes':>12}  image\n")
    for (image, kept, footprint), arch in zip(rows, archs, strict=True):
        out.write(f"{'keep' if kept else 'drop':6} {arch:{aw}} {image.kind:7} {footprint:>12,}  "
                  f"{visible(str(image.address))}\n")


def _arch_table(rows: dict[str, tuple[int, int]], out: TextIO) -> None:
    """The bytes of each architecture's images before and after, and what pruning saved of them."""
    archs = [visible(a or "-") for a in rows]
    aw = max([len("arch"), *(len(a) for a in archs)])
    out.write(f"\n{'arch':{aw}} {'before':>12} {'after':>12} {'saved':>12}\n")
    for arch, (before, after) in zip(archs, rows.values(), strict=True):
        out.write(f"{arch:{aw}} {before:>12,} {after:>12,} {before - after:>12,}\n")


def _saved(what: str, before: int, after: int) -> str:
    """``file: 1,011,112 -> 1,002,920 bytes, 8,192 saved (0.8%)``."""
    pct = f" ({100 * (before - after) / before:.1f}%)" if before else ""
    return f"{what}: {before:,} -> {after:,} bytes, {before - after:,} saved{pct}"


def _written(args: argparse.Namespace, output: str | None, backup: str | None, out: TextIO) -> None:
    if args.dry_run:
        out.write("dry run: nothing written\n")
        return
    out.write(f"wrote {output}\n")
    if backup:
        out.write(f"original kept as {backup}\n")


def _package(args: argparse.Namespace, output: str | None, out: TextIO) -> int:
    """A wheel (-o OUT.whl or --in-place) or a folder (--in-place or --dry-run)."""
    import os

    from devbin.packaging.prune_packages import BACKUP_SUFFIX, prune_tree, prune_wheel

    backup = None
    if os.path.isdir(args.path):
        if not (args.in_place or args.dry_run):
            raise BadArguments("a folder is pruned in place: give --in-place (or --dry-run)")
        if args.output is not None and os.path.realpath(args.output) != os.path.realpath(args.path):
            raise BadArguments("a folder is pruned in place: -o cannot name another place")
        with progress_bar("pruning") as progress:
            result = prune_tree(args.path, keep=args.keep, drop=args.drop, dry_run=args.dry_run,
                                backup=not args.no_backup, jobs=args.jobs, missing=args.missing or "keep",
                                progress=progress, ptx=args.ptx, spirv=args.spirv, max_segments=args.max_segments)
        output = None if args.dry_run else args.path
    else:
        backup = args.path + BACKUP_SUFFIX if args.in_place and not args.no_backup and not args.dry_run else None
        with progress_bar("pruning") as progress:
            result = prune_wheel(args.path, None if args.dry_run else output, keep=args.keep, drop=args.drop,
                                 in_place=args.in_place, backup=backup, jobs=args.jobs, force=args.force,
                                 missing=args.missing or "keep", progress=progress, ptx=args.ptx,
                                 spirv=args.spirv, max_segments=args.max_segments)
    totals = result.to_dict()
    freed = sum(f.result.container_bytes_freed for f in result.files if f.result is not None)
    if args.json:
        doc = {"input": args.path, "output": None if args.dry_run else output, "dry_run": bool(args.dry_run),
               "kind": result.kind, "input_size": result.input_size, "output_size": result.output_size,
               "file_bytes_saved": result.bytes_saved, "container_bytes_freed": freed,
               "fallback_images": sum(f.result.fallback_images for f in result.files if f.result is not None),
               "unloadable_containers": sum(f.result.unloadable_containers for f in result.files
                                            if f.result is not None),
               "saved_by_arch": result.saved_by_arch(),
               "arch_bytes": {a: {"before": b, "after": c} for a, (b, c) in result.bytes_by_arch().items()},
               "images": [{**i.to_dict(), "container": i.container, "kept": k} for i, k in result.images],
               "notes": list(result.notes), "files": totals["files"],
               "package": {k: totals[k] for k in ("kind", "package_size_before", "package_size_after",
                                                  "files_size_before", "files_size_after", "installed_size_before",
                                                  "installed_size_after")},
               "backup": backup, "ptx_policy": args.ptx, "spirv_policy": args.spirv,
               "max_segments": _segments(args)}
        dump("prune", doc, out)
        return 0
    _images(result.rows(), out)
    _arch_table(result.bytes_by_arch(), out)
    out.write(f"\n{'before':>12} {'after':>12}  file\n")
    files_after = 0
    for f in result.files:
        after = f.result.output_size if f.result is not None else f.size
        files_after += after
        why = f" ({visible(f.untouched)})" if f.untouched else ""
        out.write(f"{f.size:>12,} {after:>12,}  {visible(f.name)}{why}\n")
    out.write(f"\n{_saved('files', sum(f.size for f in result.files), files_after)}\n")
    if result.kind == "wheel":
        out.write(f"{_saved('wheel (compressed)', result.input_size, result.output_size)}\n")
    out.write(f"{_saved('installed', result.installed_before, result.installed_after)}\n")
    _written(args, output, backup, out)
    for n in result.notes:
        note(n)
    return 0
