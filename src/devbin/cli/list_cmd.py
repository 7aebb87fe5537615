"""List every device image in files, archives, wheels/zips and folders.

One line per image: where it is (file, container section, fatbin and entry
index), kind (elf, ptx, ltoir, amdgpu, bitcode, host ...), architecture
(SM or AMDGPU target ID), bytes on disk, bytes once decompressed, compression
and identifier.  Images in LLVM containers (.llvm.offloading, OffloadBinary
files, .hip_fatbin, clang offload bundles, plain or compressed, devbin wrapped
images) are listed
too: their "index" is <container #>.<entry #>, and the identifier column shows
the bundle entry ID or the OffloadBinary triple.  Nothing is extracted to
disk; zips and archives are read in memory.  --json prints the same facts
(plus container_format, triple, bundle_id, offload_kind, and the key/value
metadata an OffloadBinary or devbin wrapped image carries); a progress bar goes
to stderr when it is a terminal.

Exit status: 1 on an error, which includes a file named on the command line
that cannot be opened or that gives no image, only warnings (truncated,
corrupt); 0 otherwise, also when files found while walking a folder or a
zip/wheel cannot be read (each becomes a warning); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

from devbin.cli.progress import progress_bar
from devbin.cli.render import scan_status

if TYPE_CHECKING:
    from devbin.discover import Found


HELP = ("list every device image (cubin, PTX, LTO-IR, AMDGPU code objects, offload bundles and binaries) "
        "in files, archives, wheels and folders")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    p.add_argument("--json", action="store_true", help="print JSON")


#: The path column grows to the longest path up to this width; longer paths are shortened in the middle.
PATH_WIDTH = 64


def fit_path(path: str, width: int) -> str:
    """``path`` in at most ``width`` characters, shortened in the middle: the innermost file's
    name and its archive member (``lib.a(k.o)``) are always kept whole, even past ``width``."""
    if len(path) <= width:
        return path
    inner = path.rsplit("(", 1)[0] if path.endswith(")") else path
    cut = max(inner.rfind("/"), inner.rfind("!")) + 1
    head, tail = path[:cut], path[cut:]
    room = width - len(tail) - 3
    return ("..." if room <= 0 else head[:room] + "...") + tail


def found_dict(f: Found) -> dict[str, Any]:
    return {
        "path": f.path,
        "container": f.container,
        "fatbin_index": f.fatbin_index,
        "entry_index": f.entry_index,
        "fatbin_offset": f.fatbin_offset,
        "kind": f.kind,
        "arch": f.arch,
        "size": f.size,
        "uncompressed_size": f.uncompressed_size,
        "compression": f.compression,
        "identifier": f.identifier,
        "wrapper_version": f.wrapper_version,
        "container_format": f.container_format,
        "triple": f.triple,
        "bundle_id": f.bundle_id,
        "offload_kind": f.offload_kind,
        "metadata": dict(f.metadata),
    }


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.discover import ScanReport, discover
    report = ScanReport()
    with progress_bar("scanning") as progress:
        found = [found_dict(f) for f in discover(args.paths, progress=progress, report=report)]
    if args.json:
        out.write(json.dumps({"images": found, "warnings": report.warnings}, indent=2) + "\n")
        return scan_status(report.failed)
    width = min(max([len("path"), *(len(f["path"]) for f in found)]), PATH_WIDTH)
    out.write(f"{'path':{width}} {'container':16} {'index':>7} {'kind':5} {'arch':11} {'size':>10} "
              f"{'uncompr.':>10} {'compr.':6} identifier\n")
    for f in found:
        index = "-" if f["fatbin_index"] is None else f"{f['fatbin_index']}.{f['entry_index']}"
        ident = f["identifier"] or f["bundle_id"] or f["triple"]
        out.write(f"{fit_path(f['path'], width):{width}} {f['container'][:16]:16} {index:>7} {f['kind']:5} "
                  f"{f['arch']:11} {f['size']:>10} {f['uncompressed_size']:>10} {f['compression']:6} {ident}\n")
    out.write(f"{len(found)} images\n")
    for w in report.warnings:
        out.write(f"warning: {w}\n")
    return scan_status(report.failed)
