"""Pack device images of any kind into one multi-target package, with metadata beside each.

  devbin pack -o app.offload --image file=k.sm_90.cubin --image file=k.ptx \\
              --image file=k.gfx90a.o,Team=kernels

Each --image is file=PATH followed by KEY=VALUE pairs (no commas in values), as in
clang-offload-packager; PATH may also be an image address as `devbin list --all`
prints it (app.fatbin#0.1, libk.a!k.o), which packs that one image.  A file may be a
cubin, PTX, an AMDGPU code object, an Intel zebin, SPIR-V, LLVM bitcode, a devbin-annotated object, or a
container (fatbin, OffloadBinary, bundle, wrapped image, ocloc fat archive, host object): a container
contributes every image in it.  Zebins (triple spir64_gen-unknown-unknown) and SPIR-V (spir64-unknown-unknown)
are offload kind sycl, which only LLVM 21+ numbers (llvm-objdump-22 reads it; docs/PACKAGING.md).
Keys read by pack itself: tu= (which translation unit the image came from; by
default a container input is one unit of its own and loose images share one),
kind= (offload kind: cuda, hip, openmp, sycl; a SPIR-V module without one takes
the kind the other images agree on).

Every image gets Producer, CompileOptions, LinkOptions, TargetID, VendorId and
VendorName, filled from the image itself (empty when it does not record them),
then the keys you give.  --format picks the container: offload (LLVM
OffloadBinary, the default: it has a string map and LLVM tools read it),
fatbin (NVIDIA images only; CompileOptions goes in each entry's options
string), bundle (clang offload bundle; no metadata), wrapped (devbin's
single-image wrapper: one image with its metadata, for runtimes that take one
image), ocloc (Intel's fat archive, byte for byte as ocloc writes it: each zebin
named by its TargetID, its device as an IP version where the name gives one, a
SPIR-V module as generic_ir; no other metadata).  Keys a container cannot
store are named in a warning.

--ptx decides which PTX goes in, per translation unit (default highest: each
unit's PTX of the highest virtual arch, which every newer GPU can JIT; see
docs/PACKAGING.md).  --check-only runs the PTX policy and the option checks
and writes nothing.
Contradictory options across images (relocatable vs whole-program, debug vs
optimised, fast-math, FTZ, xnack/sramecc, code object versions, arch sets and
PTX across translation units) are warnings (on stderr); --strict makes them errors.
Exit status: 0 packed, 1 error, 2 bad arguments (no -o without --check-only), 3
no input holds device code (and no TargetID=/triple= says what it is).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from devbin.cli.common import BadArguments, dump, holds_device_code, no_device_code, warn
from devbin.escape.text import visible

if TYPE_CHECKING:
    from devbin.packaging import PackInput, PackResult

HELP = "pack device images into one multi-target package (OffloadBinary, fatbin, bundle, wrapped, ocloc)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", help="the package to write (required unless --check-only)")
    p.add_argument("--image", action="append", default=[], metavar="file=PATH[,KEY=VALUE...]", required=True,
                   help="an image (or container) and its metadata; repeat for each")
    from devbin.packaging.packing import pack_format_names
    p.add_argument("--format", choices=pack_format_names(), default="offload",
                   help="container to write (default: offload)")
    p.add_argument("--ptx", default="highest", metavar="POLICY",
                   help="none | highest | lowest | all | sm_XX,... (default: highest)")
    p.add_argument("--strict", action="store_true", help="make option contradictions errors")
    p.add_argument("--check-only", action="store_true",
                   help="apply the PTX policy and the option checks, print the result, write nothing")
    p.add_argument("--offload-version", type=int, choices=(1, 2), default=1,
                   help="OffloadBinary version (default 1: what every LLVM since 15 reads)")
    p.add_argument("--compress", choices=("none", "zstd", "zlib", "lz4"), default="none",
                   help="compression (fatbin: zstd, lz4; bundle: zstd, zlib)")
    p.add_argument("--json", action="store_true", help="print what was packed as JSON")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.binary.output import Inputs, check_destination, write_file
    from devbin.packaging import check, pack
    inputs = [_input(s) for s in args.image]
    files = [_file_of(i.name) for i in inputs]
    if not any("TargetID=" in s or "triple=" in s for s in args.image) and not holds_device_code(files):
        return no_device_code(files)
    if args.check_only:
        res = check(inputs, ptx=args.ptx, strict=args.strict, llvm_keys=args.format == "offload")
        if args.json:
            dump("pack", {"output": None, "check_only": True, **res.to_dict()}, out)
        else:
            out.write(f"check only: {len(res.images)} image(s) would be packed, "
                      f"{len(res.findings)} option contradiction(s)\n")
            _report(res, args, out)
        return 0
    if not args.output:
        raise BadArguments("-o/--output is required (or --check-only)")
    sources = Inputs(files)
    check_destination(args.output, sources)  # before packing: an -o naming an input fails at once
    res = pack(inputs, format=args.format, ptx=args.ptx, strict=args.strict, offload_version=args.offload_version,
               compression=args.compress)
    write_file(args.output, res.data, inputs=sources)
    if args.json:
        dump("pack", {"output": args.output, "check_only": False, **res.to_dict()}, out)
        return 0
    out.write(f"{args.output}: {res.format}, {len(res.images)} image(s), {len(res.data)} bytes\n")
    _report(res, args, out)
    return 0


def _is_address(text: str) -> bool:
    """Whether ``file=TEXT`` names an image inside a container (an address with steps) rather than a file."""
    import os
    return not os.path.exists(text) and any(c in text for c in "!@#")


def _file_of(name: str) -> str:
    """The file on disk an input comes from (an address's file)."""
    from devbin.images import Address
    return Address.parse(name).path if _is_address(name) else name


def _input(spec: str) -> PackInput:
    """One ``--image file=PATH[,KEY=VALUE...]``; PATH may be an image address (``app.fatbin#0.1``)."""
    from devbin.cli.common import image_inputs
    from devbin.packaging import PackInput
    from devbin.packaging.packing import parse_image_spec
    path, keys = parse_image_spec(spec)
    if not _is_address(path):
        return PackInput.from_spec(spec)
    ((_, data),) = image_inputs([path])
    return PackInput(data, path, keys)


def _report(res: PackResult, args: argparse.Namespace, out: TextIO) -> None:
    for img in res.images:
        out.write(f"  {img.image.kind:<7} {visible(img.image.arch or '?'):<16} {len(img.data):>9}  "
                  f"{visible(img.label)}\n")
    for img in res.dropped:
        out.write(f"  left out by --ptx {args.ptx}: {visible(img.label)} ({visible(str(img.image.arch))})\n")
    for w in res.warnings:
        warn(str(w))
    for finding in res.findings:
        warn(str(finding))
