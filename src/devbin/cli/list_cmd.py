"""List every device image in files, archives, wheels/zips and folders.

One line per image: its address (docs/IMAGES.md: the file, then !member,
@section and #container.entry steps, e.g. libk.a!k.o@__nv_relfatbin#0.1),
vendor, kind (cubin, ptx, lto-ir, amdgpu, bitcode, spirv, fatbin, host,
data), architecture (SM or AMDGPU target ID), bytes as extracted
(decompressed), bytes stored, compression, and an identifier (the fatbin
entry's identifier, the bundle entry ID or the OffloadBinary triple).
Images in LLVM containers (.llvm.offloading, OffloadBinary files,
.hip_fatbin, clang offload bundles, plain or compressed, devbin wrapped
images) are listed too.  Nothing is extracted to disk; zips and archives are
read in memory.  --json prints the same facts (address, vendor, kind, arch,
size, stored_size, compression, and container, section, offset and the
key/value metadata); a progress bar goes to stderr when it is a terminal.
Addresses are shortened in the middle only when stdout is a terminal.
--image ADDRESS and --arch ARCH (both repeatable) list only those images
(docs/IMAGES.md; --arch as cuobjdump -arch).

Scope as cuobjdump's: where a host ELF holds executable images in
.nv_fatbin, its relocatable __nv_relfatbin images are left out unless --all
(cuobjdump -all), which lists them after the .nv_fatbin ones.

--jobs N reads the files (a folder, several paths; from 8 MB of them) in N
processes (default: one per processor; --jobs 1: this process only); the
output is the same whatever N.  --scheduler ADDRESS reads them on the
workers of a Dask cluster instead (one file a task; pip install
'devbin[dask]'); the output is the same as with --jobs 1.  A PATH may be a
URL read through fsspec, by the workers where they read the file
(https://host/x.whl with range requests, s3://bucket/x.whl with s3fs;
docs/API.md, "Many machines").

Exit status: 1 on an error, which includes a file named on the command line
that cannot be opened or that gives no image, only warnings (truncated,
corrupt); 3 when no input holds device code (one line on stderr, nothing on
stdout); 0 otherwise, also when files found while walking a folder or a
zip/wheel cannot be read (each becomes a warning, on stderr); 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from devbin.cli.common import (
    ImageFilter,
    add_image_options,
    add_jobs_option,
    add_scheduler_option,
    dump,
    keep,
    no_device_code,
    scheduler_client,
    warn,
)
from devbin.cli.progress import progress_bar
from devbin.cli.render import count, scan_status
from devbin.escape.text import visible

if TYPE_CHECKING:
    from devbin.images import Image


HELP = ("list every device image (cubin, PTX, LTO-IR, AMDGPU code objects, offload bundles and binaries) "
        "in files, archives, wheels and folders")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: the files of --image)")
    add_image_options(p)
    add_jobs_option(p)
    add_scheduler_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")


#: Files of fewer bytes than this in all are listed by this process whatever --jobs says (a pool costs more).
MIN_PARALLEL_BYTES = 8 << 20

#: On a terminal the address column grows to the longest address up to this width; longer ones are
#: shortened in the middle.  Elsewhere (a pipe, a file) addresses are printed whole.
PATH_WIDTH = 64


def fit_path(path: str, width: int) -> str:
    """``path`` in at most ``width`` characters, shortened in the middle: everything after the last
    ``/`` (the innermost file's name, an archive's member, ``libk.a!k.o@.nv_fatbin#0.1``) is always
    kept whole, even past ``width``."""
    if len(path) <= width:
        return path
    cut = path.rfind("/") + 1
    head, tail = path[:cut], path[cut:]
    room = width - len(tail) - 3
    return ("..." if room <= 0 else head[:room] + "...") + tail


def image_dict(image: Image) -> dict[str, Any]:
    """What ``--json`` gives for one image."""
    return {**image.to_dict(), "container": image.container, "section": image.section, "offset": image.offset,
            "metadata": dict(image.metadata)}


def identifier(image: Image) -> str:
    """The identifier column: a fatbin entry's identifier, else the bundle entry ID or the triple."""
    return image.identifier or image.get("bundle-id") or image.triple


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport
    choose = ImageFilter(args)
    paths = choose.paths(args.paths)
    report = ScanReport()
    # files spread over --jobs processes or the --scheduler's workers, in order
    with scheduler_client(args.scheduler) as client, progress_bar("scanning") as progress:
        found = Scanner(report, all=args.all or choose.all).listing(paths, progress, jobs=args.jobs,
                                                                    min_bytes=MIN_PARALLEL_BYTES, client=client)
    if not found and not report.warnings:
        for w in report.warnings:
            warn(w)
        return no_device_code(paths)
    images = keep(found, choose, lambda i: i)
    for w in report.warnings:
        warn(w)
    if args.json:
        dump("list", {"images": [image_dict(i) for i in images], "warnings": report.warnings}, out)
        return scan_status(report.failed)
    addresses = [visible(str(i.address)) for i in images]  # the text rule on every string read from a file
    width = max([len("address"), *(len(a) for a in addresses)])
    if out.isatty():
        width = min(width, PATH_WIDTH)
    out.write(f"{'address':{width}} {'vendor':6} {'kind':7} {'arch':13} {'size':>10} {'stored':>10} {'compr.':6} "
              "identifier\n")
    for image, address in zip(images, addresses, strict=True):
        out.write(f"{fit_path(address, width):{width}} {image.vendor or '-':6} {image.kind:7} "
                  f"{visible(image.arch or '-'):13} {image.size:>10} {image.stored_size:>10} {image.compression:6} "
                  f"{visible(identifier(image))}".rstrip() + "\n")
    out.write(f"{count(len(images), 'image')}\n")
    return scan_status(report.failed)
