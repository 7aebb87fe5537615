"""Print the call graph of a cubin, an AMDGPU code object, or any code object with devbin sections.

Each function with its register count, entry points (^) and address-taken
functions (&); an indirect call potentially reaches every address-taken
function of the same prototype.  The text layout is nvlink's
(`nvlink --dump-callgraph`); --json and --dot (Graphviz) give the same graph.
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

HELP = "print the call graph with registers, entry points and address-taken functions"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a cubin, or an ELF with devbin sections")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON")
    g.add_argument("--dot", action="store_true", help="print Graphviz DOT")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.analysis.callgraph import format_dot, format_text, to_dict
    from devbin.api import open_file
    from devbin.errors import FormatError
    from devbin.formats.devsec.elf import read_code_object
    from devbin.importers import can_import, import_code_object
    with open_file(args.file) as elf:
        found = read_code_object(elf)
        if found is not None:
            obj = found
        elif can_import(elf):
            obj = import_code_object(elf)
        else:
            raise FormatError("no call graph: not a cubin or AMDGPU code object, and no devbin sections", fmt="elf",
                              where=args.file)
    arch = obj.target.target_id if obj.target else "unknown"
    if args.json:
        out.write(json.dumps(to_dict(obj, arch), indent=2) + "\n")
    elif args.dot:
        out.write(format_dot(obj, arch))
    else:
        out.write(format_text(obj, arch))
    return 0
