"""Write devbin's device sections into a copy of a cubin or an AMDGPU code object.

The vendor's metadata (a cubin's .nv.info, .nv.callgraph, .nv.prototype and
memory sections; an AMDGPU object's metadata note, kernel descriptors,
symbols and call relocations) is imported into the unified model and written
as the devbin sections through the ELF editor, which keeps every byte the
vendor's loader reads in place: the output is checked before it is written.
`cuobjdump -res-usage` and `nvdisasm` read an annotated cubin as they read the
input; `ld.lld-19` links an annotated AMDGPU object and `llvm-readelf-19
--notes` reads it exactly as before.  A devbin wrapped image comes back
wrapped, with the same metadata, around the annotated image.  Exit status: 0
written, 1 error, 2 bad arguments, 3 the file holds no device code.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from devbin.cli.common import dump, holds_device_code, no_device_code

HELP = "write the devbin sections into a copy of a cubin or AMDGPU code object"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a cubin or an AMDGPU code object (or a devbin wrapped image of one)")
    p.add_argument("-o", "--output", required=True,
                   help="where to write the annotated copy (DIR/ or a folder: DIR/<input name>)")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.binary.output import destination, write_file
    from devbin.entry.elf import open_elf
    from devbin.errors import UsageError
    from devbin.formats.devsec.elf import annotate
    from devbin.formats.elf.compare import loader_differences
    from devbin.formats.elf.reader import ElfFile
    from devbin.importers import import_code_object
    args.output = destination(args.output, args.file, [args.file])  # -o DIR/: DIR/<input name>; checked now
    if not holds_device_code([args.file]):
        return no_device_code([args.file])
    from devbin.entry.elf import wrapped_metadata
    from devbin.formats.wrapped import parse_wrapped, write_wrapped
    raw = Path(args.file).read_bytes()
    wrapped = wrapped_metadata(raw) is not None
    with open_elf(args.file) as elf:  # a wrapped image opens as the ELF inside it
        obj = import_code_object(elf)
        data = annotate(elf, obj)
        diffs = loader_differences(elf, ElfFile(data, where=args.output))
        size_in = elf.size
    if diffs:
        raise UsageError(f"internal error: the annotated file would differ where the driver reads: {diffs}")
    if wrapped:  # wrap the annotated image again, with the input's metadata and flags
        w = parse_wrapped(raw, where=args.file)
        data = write_wrapped(data, w.metadata, flags=w.flags)
        size_in = len(raw)
    write_file(args.output, data, inputs=[args.file])
    result = {"input": args.file, "output": args.output, "size_before": size_in, "size_after": len(data),
              "functions": len(obj.functions), "kernels": len(obj.kernels)}
    if args.json:
        dump("annotate", result, out)
    else:
        out.write(f"{args.output}: {len(obj.functions)} functions ({len(obj.kernels)} kernels) described; "
                  f"{size_in} -> {len(data)} bytes; nothing the loader reads moved\n")
    return 0
