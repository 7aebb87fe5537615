"""Extract device images to files, named and laid out as `cuobjdump -xelf all` / `-xptx all` does.

NVIDIA fatbin entries: names are <stem>.<n>.<arch>.cubin|ptx (n counts each
kind from 1 through the whole input file, archive members included; stem is
the input file name without its last extension), or <identifier base
name>.<arch>.<ext> when the image carries an identifier.  Cubins are written
trimmed to their last section and PTX up to its first NUL, byte for byte as
cuobjdump writes them; a family-specific cubin is named by its own arch
(sm_100f -> k.1.sm_100.cubin), as cuobjdump names it.  LTO-IR entries, which
cuobjdump does not extract, only with --kind lto-ir: <stem>.<n>.<arch>.ltoir
with the entry's bytes, or <stem>.<n>.<arch>.ltoir.fatbin, a one-entry fatbin
holding the entry as stored, when the LTO-IR is in NVIDIA's own encoding
(`devbin list` says compression nvidia-opaque; nvJitLink takes it as a fatbin).
A bare cubin is written as <stem>.<arch>.cubin, a bare AMDGPU code object
(a file, or an archive member such as the archives
`clang-offload-bundler --unbundle -type=a` writes) as <stem>.<target id>.o,
a bare Intel zebin (a file, or a member of an ocloc fat archive) as
<stem>.<device>.zebin, stem from the member's name for a member (its last
dot-part dropped: ocloc's member 64.12.60.7 gives 64.12.60.pvc.zebin).

Scope as cuobjdump's: where a host ELF holds executable images in
.nv_fatbin, its relocatable __nv_relfatbin images are not extracted unless
--all (cuobjdump -all); with --all they are numbered after the .nv_fatbin
ones, as `cuobjdump -all -xelf all` numbers them.

Images in LLVM containers are written byte for byte as the LLVM tools
extract them:

* OffloadBinary entries (bare packager output or .llvm.offloading sections)
  take clang-offload-packager's own default name, <stem>-<triple>-<arch>.<n>.<ext>,
  ext by the entry's image kind (o, bc, cubin, fatbin, s; bin for others) and
  n counting OffloadBinary images from 0 through the input file (what the
  packager writes for one --image filter that matches them all).
* clang-offload-bundler names nothing itself (every output is given with
  -output), so bundle entries (.hip_fatbin, bare and compressed bundles,
  __CLANG_OFFLOAD_BUNDLE__ sections) are named <stem>.<n>.<target id>.<ext>:
  n counts bundle images from 1 through the input file, the target ID has
  ':' replaced by '_' (the triple stands in when there is none), and ext is o
  (AMDGPU code objects, host objects), cubin, ptx, bc, fatbin, spv or bin.
* A devbin wrapped image is written as <stem>.<target id>.<ext>, ext as for
  bundle entries.

Any character of a triple or target ID other than letters, digits and
"._+-" (and ':' in packager names) becomes '_'; a name that would still leave
DIR (a path separator, "..", a control character) is refused, and so are two
images that would get the same name, and an image whose name is that of an
input file (the same file, also through a symbolic or hard link): an archive
k.gfx90a.o holding k.o extracts to k.gfx90a.o; then nothing is written.  Each
file is written whole or not at all (a new file renamed into place).

--image ADDRESS (repeatable) writes only the images at those addresses (as
`devbin list --all` prints them; the files are then numbered as in --all's
scope), --arch ARCH (repeatable) only those architectures, as cuobjdump -arch
(sm_90 also takes sm_90a and the compute_90 PTX; gfx90a every gfx90a target ID),
numbered among themselves from 1 as `cuobjdump -arch sm_90 -xelf all` numbers
them.

-o - writes the one selected image to stdout, byte for byte (PTX as
cuobjdump -ptx prints it: `devbin extract k.o --arch sm_90 --kind ptx -o -`);
a selection of more than one image is an error naming the count (narrow it
with --image, --arch or --kind), and so is a cubin or code object to a
terminal.

--jobs N reads the images (from 8 MB of them to decompress: writing images
stored plain is the kernel's copy, which a pool does not shorten) in N
processes (default: one per processor; --jobs 1: this process only); the
output is the same whatever N.  --scheduler ADDRESS decodes them on the
workers of a Dask cluster instead (pip install 'devbin[dask]'); the files
are written here, the same as with --jobs 1.  PATH may be a URL read
through fsspec (https://..., s3://...; docs/API.md, "Many machines").

Exit status: 1 on an error, which includes a file named on the command line
that cannot be opened or that gives no image, only warnings (truncated,
corrupt); 3 when the input holds no device code (one line on stderr, nothing
on stdout); 0 otherwise, also when files found while walking a folder or a
zip/wheel cannot be read (each becomes a warning, on stderr); 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
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
from devbin.cli.render import scan_status
from devbin.escape.text import visible

if TYPE_CHECKING:
    from devbin.images import Image
    from devbin.images.frame import Frame


HELP = ("extract cubins and PTX like cuobjdump -xelf/-xptx, and the images of LLVM offload binaries "
        "and clang offload bundles")

#: --kind takes the image kinds of docs/IMAGES.md.
KINDS = ("cubin", "ptx", "lto-ir", "amdgpu", "bitcode", "spirv", "fatbin", "host", "data")

#: Images to decompress of fewer bytes than this in all are written by this process whatever --jobs says: a
#: pool costs more than it saves (52 small cubins of a 1 MB zstd library: +15 % CPU and no faster).  Images
#: stored plain do not count: writing them is the kernel's copy (libcurand's 143 cubins, 39 MB: 0.1 s), which
#: a pool does not shorten (a 9.7 MB library of plain cubins: 0.100 s of CPU in this process, 0.195 s pooled).
MIN_PARALLEL_BYTES = 8 << 20

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", help="a file or folder (default: the file of --image)")
    p.add_argument("--kind", choices=KINDS, help="only images of this kind")
    add_image_options(p)
    add_jobs_option(p)
    add_scheduler_option(p)
    p.add_argument("-o", "--output", default=".", metavar="DIR",
                   help="folder to write into (default: .); - writes the one selected image to stdout")
    p.add_argument("--max-size", type=int, default=1 << 30, help="refuse images larger than this once decompressed")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")


def safe_name(name: str) -> str:
    """``name`` if it is one plain file name; UsageError otherwise."""
    from devbin.errors import UsageError
    if (not name or name in (".", "..") or "/" in name or "\\" in name or os.sep in name
            or any(ord(c) < 32 or ord(c) == 127 for c in name)):
        raise UsageError(f"refusing to write an image named {name!r}: it would not stay inside the output folder")
    return name


def wanted(image: Image) -> bool:
    """Whether extract writes ``image`` (with no --kind/--arch): fatbin cubins and PTX (as cuobjdump),
    bare cubins and AMDGPU code objects, and every image of an LLVM container or wrapped image
    (:func:`devbin.images.containers.extracted_by_default`)."""
    from devbin.images.containers import extracted_by_default
    return extracted_by_default(image)


def names(hits: list[tuple[Image, Frame]]) -> list[str]:
    """cuobjdump's file name for each image: numbered per kind through each file (an archive counts as one)
    (:func:`devbin.images.containers.extract_names`)."""
    from devbin.images.containers import extract_names
    return extract_names(hits)


_LABELS = {"cubin": "ELF file", "ptx": "PTX file", "lto-ir": "LTO-IR file", "amdgpu": "AMDGPU code object",
           "bitcode": "bitcode file", "host": "host file"}


def _source_files(paths: list[str], images: list[Image]) -> list[str]:
    """The files on disk the images were read from: each of ``paths`` that is a file, and the file each
    image's address starts from (a file found in a folder walk)."""
    out = {p for p in paths if os.path.isfile(p)}
    out.update(p for p in (f.address.path for f in images) if os.path.isfile(p))
    return sorted(out)


def _to_stdout(images: list[Image], args: argparse.Namespace, out: TextIO) -> int:
    """``-o -``: the one selected image's bytes on stdout (what ``cuobjdump -ptx`` does for PTX); a cubin
    or code object is binary, so not onto a terminal."""
    import sys

    from devbin.cli.common import BadArguments
    from devbin.errors import UsageError
    if args.json:
        raise BadArguments("-o - writes the image itself to stdout; leave out --json")
    if len(images) != 1:
        raise BadArguments(f"-o - writes one image to stdout, and the selection holds {len(images)}: narrow it "
                         "with --image ADDRESS (as `devbin list --all` prints them), --arch or --kind")
    f = images[0]
    data = f.data(max_size=args.max_size)
    if f.kind != "ptx" and sys.stdout.isatty():
        raise UsageError(f"refusing to write a binary {f.kind} to a terminal; redirect stdout (> FILE) or "
                         "give -o DIR")
    out.flush()
    sys.stdout.buffer.write(data)  # the bytes as they are: not through the text rule of `out`
    sys.stdout.buffer.flush()
    return 0


def _image_bytes(f: Image, max_size: int) -> bytes:
    """What is written for ``f`` (in a worker of the cluster: the bytes travel back to be written here)."""
    return bytes(f.data(max_size=max_size))


def run(args: argparse.Namespace, out: TextIO) -> int:
    with scheduler_client(args.scheduler) as client:
        return _run(args, out, client)


def _run(args: argparse.Namespace, out: TextIO, client: Any) -> int:
    from functools import partial

    from devbin.binary.output import Inputs, write_file
    from devbin.errors import OutputError, UsageError
    from devbin.images.parallel import ordered_map, pool_jobs
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport
    folder = Path(args.output)
    choose = ImageFilter(args)
    paths = choose.paths([args.path] if args.path else [])
    report = ScanReport()
    with progress_bar("scanning") as progress:
        found = list(Scanner(report, all=args.all or choose.all).paths(paths, progress))
    for message in report.warnings:
        warn(message)
    if not found and not report.warnings:
        return no_device_code(paths)
    hits = [h for h in found if choose.addresses or wanted(h[0])
            or (args.kind == "lto-ir" and h[0].kind == "lto-ir")]  # an address named is written, whatever its kind
    picked = {id(h) for h in keep(hits, choose, lambda h: h[0])}
    # cuobjdump -arch A -xelf all numbers the images it selects (1..n); --image numbers as in --all's scope
    numbered = hits if choose.addresses else [h for h in hits if id(h) in picked]
    selected = [(h[0], name) for h, name in zip(numbered, names(numbered), strict=True)
                if not (args.kind and h[0].kind != args.kind) and id(h) in picked]
    if args.output == "-":
        return _to_stdout([f for f, _ in selected], args, out)
    chosen: list[tuple[Image, Path]] = []
    taken: set[str] = set()
    for f, name in selected:
        if name in taken:
            raise UsageError(f"two images would both be written as {name!r} (from {f.address}); "
                             "extract the files one at a time or narrow with --arch/--kind")
        taken.add(name)
        chosen.append((f, folder / safe_name(name)))
    # An image's default name can be its input's own name (an archive k.gfx90a.o holding k.o, a
    # cubin kern.sm_90.cubin with identifier kern.cu): refuse before writing anything.
    inputs = Inputs(_source_files(paths, [h[0] for h in hits]))
    for f, target in chosen:
        hit = inputs.match(target)
        if hit is not None:
            raise OutputError(f"refusing to write over the input {hit}: the image {f.address} ({f.arch or f.kind}) "
                              f"extracts to {target.name}, which is that file; extract into another folder "
                              "with -o DIR", where=str(target))

    def write(item: tuple[Image, Path]) -> dict[str, Any]:
        # A decoded image goes before the next one is decoded: each process holds one at a time, and
        # ordered_map runs no more processes than the largest images fit in the memory budget together.
        f, target = item
        data = f.data(max_size=args.max_size)
        folder.mkdir(parents=True, exist_ok=True)
        write_file(target, data, inputs=inputs)  # each file whole or absent (devbin.binary.output)
        return {"file": str(target), **f.to_dict(), "size": len(data)}

    if client is None:
        written = list(ordered_map(write, chosen, jobs=pool_jobs(args.jobs, (f.size for f, _ in chosen
                                                                              if f.compression != "none"),
                                                                  MIN_PARALLEL_BYTES),
                                   weights=[f.size if f.compression != "none" else 0 for f, _ in chosen]))
    else:  # decoded on the cluster's workers, a large file's images cut into a few units; written here
        from devbin.images.units import image_units, run_unit, unit_parts
        units = image_units([f for f, _ in found], [f for f, _ in chosen], all=args.all or choose.all,
                            parts=unit_parts(client))
        decoded = (b for bs in ordered_map(partial(run_unit, partial(_image_bytes, max_size=args.max_size)), units,
                                           client=client) for b in bs)
        written = []
        for (f, target), data in zip(chosen, decoded, strict=True):
            folder.mkdir(parents=True, exist_ok=True)
            write_file(target, data, inputs=inputs)
            written.append({"file": str(target), **f.to_dict(), "size": len(data)})
    if args.json:
        dump("extract", {"written": written, "warnings": report.warnings}, out)
    else:
        counts: dict[str, int] = {}
        for w in written:
            counts[w["kind"]] = counts.get(w["kind"], 0) + 1
            label = _LABELS.get(w["kind"], f"{w['kind']} file")
            out.write(f"Extracting {label} {counts[w['kind']]:4}: {visible(Path(w['file']).name)}\n")
    return scan_status(report.failed)
