"""Keep only some GPU architectures of a file, like nvprune and lipo -thin.

Works on bare fatbins, LLVM OffloadBinaries, clang offload bundles (plain and
compressed), host objects (.o), static libraries (.a) and, beyond nvprune,
shared libraries and executables.  Give --keep or --drop with a comma list.

Matching (nvprune -arch semantics for NVIDIA):
  sm_90        the sm_90 cubin and the compute_90 PTX/LTO-IR (sm_90a is another arch)
  compute_90   only the compute_90 PTX/LTO-IR
  gfx90a       every gfx90a target: gfx90a, gfx90a:xnack+, gfx90a:xnack- ...
  gfx90a:xnack+  only that exact target ID
Host entries of bundles always stay.  A selection that leaves no device image
is refused.

Objects and archives shrink: the fatbin/offload sections are rewritten and the
symbols and relocations pointing at them fixed up; archives are written again
deterministically (GNU format, symbol table rebuilt).  Shared libraries and
executables cannot move their code: each container is pruned in place and the
freed bytes zero-filled, so the file keeps its size ("file bytes saved: 0")
and the bytes freed inside the sections are reported.

--image ADDRESS (repeatable; as `devbin list --all` prints it) applies --keep or
--drop to those images only; every other image stays.  (--keep/--drop use
nvprune's matching, where sm_90 does not take sm_90a; --arch elsewhere is
cuobjdump's.)

-o OUT writes the result; the input is never overwritten unless --in-place.
--dry-run prints what would be dropped and the bytes saved per architecture
without writing anything.  Notes go to stderr.  Exit status: 0 success, 1
error (a selection that leaves nothing, a file that cannot be rewritten), 2
bad arguments (no -o, --dry-run or --in-place), 3 when the file holds no
device code.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from devbin.cli.common import BadArguments, ImageFilter, dump, holds_device_code, keep, no_device_code, note

HELP = "keep only the named GPU architectures (like nvprune / lipo -thin) in fatbins, bundles, objects, libraries"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="input file")
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--keep", metavar="ARCHS", help="comma list of architectures to keep (sm_90,gfx90a ...)")
    sel.add_argument("--drop", metavar="ARCHS", help="comma list of architectures to remove")
    p.add_argument("--image", action="append", default=[], metavar="ADDRESS",
                   help="apply --keep/--drop only to the image at this address (repeatable)")
    p.add_argument("-o", "--output", metavar="OUT", help="write the pruned file here")
    p.add_argument("--in-place", action="store_true", help="allow OUT to be the input file (or omit -o)")
    p.add_argument("--dry-run", action="store_true", help="write nothing; print the bytes saved per architecture")
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.images.scan import scan
    from devbin.packaging.pruning import footprint, prune_file

    output = args.output
    if output is None and args.in_place:
        output = args.path
    if output is None and not args.dry_run:
        raise BadArguments("give -o OUT (or --dry-run, or --in-place)")
    if not holds_device_code([args.path]):
        return no_device_code([args.path])
    if args.image:  # every address must name an image of the file
        choose = ImageFilter(args)
        keep(scan([args.path], all=True), choose, lambda i: i)
    result = prune_file(args.path, None if args.dry_run else output, keep=args.keep, drop=args.drop,
                        in_place=args.in_place, images=[str(a) for a in ImageFilter(args).addresses])
    if args.json:
        doc = {"input": args.path, "output": None if args.dry_run else output, "dry_run": bool(args.dry_run),
               **result.to_dict()}
        dump("prune", doc, out)
        return 0
    width = max([len("address"), *(len(str(i.address)) for i, _ in result.images)])
    out.write(f"{'address':{width}} {'kind':7} {'arch':16} {'bytes':>10}  action\n")
    for image, kept in result.images:
        out.write(f"{image.address!s:{width}} {image.kind:7} {image.arch or '-':16} {footprint(image):>10}  "
                  f"{'keep' if kept else 'drop'}\n")
    for arch, saved in result.saved_by_arch().items():
        out.write(f"saved {saved} bytes of {arch}\n")
    out.write(f"container bytes freed: {result.container_bytes_freed}\n")
    out.write(f"file bytes saved: {result.file_bytes_saved} ({result.input_size} -> {result.output_size})\n")
    if args.dry_run:
        out.write("dry run: nothing written\n")
    else:
        out.write(f"wrote {output}\n")
    for n in result.notes:
        note(n)
    return 0
