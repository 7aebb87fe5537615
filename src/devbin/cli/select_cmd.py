"""Name the device image a driver would load from a package on a given GPU.

The device is an NVIDIA sm_XY (sm_86, sm_120; sm_90a and sm_100f name the 9.0 and
10.0 GPUs, the suffixes describe code, not devices) or an AMDGPU target id
(gfx90a:xnack+, gfx942:sramecc+:xnack-, gfx1101; features not given are unknown).

NVIDIA: SASS for sm_XY runs on the same major with equal or higher minor, sm_XYa only
on exactly X.Y, sm_XYf on the family (major X, minor >= Y); otherwise PTX of the
highest virtual arch not above the device is JIT-compiled (compute_XY on cc >= X.Y,
compute_XYa on X.Y only, compute_XYf within major X).  SASS is preferred over PTX, then
the highest compute capability, then a over f over plain.

Intel (an IP version 12.60.7 or an ocloc acronym: pvc, acm-g10; a generic target such as dg2
is judged as its base device): an ocloc fat archive is one module, its member picked by name as
the Level Zero runtime does (64.<IP version>, 64.<major>.<minor>, 64.<product>, generic_ir), then
by the zebin's notes; a bare zebin by its notes (IP version, generic target, product family),
and one refused that carries its SPIR-V (.spv) is compiled from it; SPIR-V (generic_ir, SYCL
spir64 images) is JIT-compiled when no native image fits.  A SYCL
library's images of the same kernels are one module.

AMD: the exact processor with compatible xnack/sramecc (an image's unspecified feature
matches either setting, a set one must equal the device's), most specific first; then
the family's generic target (gfx9-generic, gfx10-3-generic, gfx11-generic,
gfx12-generic ...) when its generic version is high enough.

The choice is made per module (a fatbin, an offload bundle, an OffloadBinary, a bare
cubin or code object), as the runtime registers each with the driver.  --explain adds
one line per candidate image: name, arch, verdict (chosen, usable, rejected, other) and
reason.  No compatible image is an error (exit 1) that names what the package
holds; a path with no device image at all exits 3; a DEVICE devbin cannot read
exits 2.  --image ADDRESS and --arch ARCH (repeatable) leave only those
images as candidates.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from devbin.cli.common import BadArguments, ImageFilter, add_image_options, dump, keep, no_device_code, note
from devbin.escape.text import visible

HELP = "name the image a driver would pick for a device (sm_86, sm_90a, gfx90a:xnack+, gfx1101, 12.60.7, pvc)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?",
                   help="a file or folder (fatbin, cubin, code object, bundle, host object, library ...); "
                        "default: the file of --image")
    p.add_argument("--device", required=True, metavar="DEVICE",
                   help="the GPU: sm_XY (sm_86, sm_90a, sm_100f, sm_120), gfxNNN[:sramecc±][:xnack±], or an Intel "
                        "IP version or ocloc name (12.60.7, pvc, acm-g10, dg2)")
    add_image_options(p, all=False)
    p.add_argument("--explain", action="store_true", help="list every candidate image with its verdict and reason")
    p.add_argument("--json", action="store_true", help="print the decision as JSON")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.errors import UsageError
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport
    from devbin.packaging.selection import decide, parse_device

    try:
        device = parse_device(args.device)
    except UsageError as e:
        raise BadArguments(str(e)) from None
    choose = ImageFilter(args)
    paths = choose.paths([args.path] if args.path else [])
    report = ScanReport()
    found = [image for image, _ in Scanner(report, all=True).paths(paths)]
    if not found and not report.warnings:
        return no_device_code(paths)
    sel = decide(keep(found, choose, lambda i: i), device, source=", ".join(paths))
    err = sel.error()
    if sel.device.note:
        note(sel.device.note)
    if args.json:
        dump("select", sel.to_dict(), out)
    else:
        if args.explain:
            out.write(f"device: {visible(sel.device.description)}\n")
            for line in sel.explain():
                out.write(visible(line.rstrip()) + "\n")
        for m in sel.modules:
            if m.chosen is None:
                continue
            c = m.chosen
            from devbin.targets.registry import load_label
            how = load_label(c.image.vendor, c.kind, c.jit)
            out.write(f"{visible(c.name)}: {visible(c.arch or '-')} ({how})\n")
    if err is not None:
        out.flush()
        raise err
    return 0
