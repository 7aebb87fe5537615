"""Print the call graph of a cubin, an AMDGPU code object, or any code object with devbin sections.

Each function with its register count, entry points (^) and address-taken
functions (&); an indirect call potentially reaches every address-taken
function of the same prototype.  The text layout is nvlink's
(`nvlink --dump-callgraph`); --json and --dot (Graphviz) give the same graph.

FILE may also be a container of device images: a CUDA fatbin, an LLVM
OffloadBinary, a clang offload bundle (binary or compressed), a host object,
library or executable with .nv_fatbin, .llvm.offloading, .hip_fatbin or
offload bundle sections, or an ar archive.  Then every code object in it
(cubins, AMDGPU code objects; as `devbin list` finds them) gets a header line
naming it and its call graph, exactly as for the extracted image; PTX,
bitcode and other images are skipped with a note.  --json then prints
{"file": FILE, "images": [{"path", "container", ..., "arch", "nodes"}], ...};
--dot prints one digraph with one `subgraph cluster_N` per code object.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import CodeObject

HELP = ("print the call graph with registers, entry points and address-taken functions, of a code object "
        "or of every code object in a fatbin, offload bundle or binary, host object or archive")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a cubin, an AMDGPU code object or an ELF with devbin sections, or a container "
                                "of them (fatbin, OffloadBinary, offload bundle, host object/library, ar archive)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON")
    g.add_argument("--dot", action="store_true", help="print Graphviz DOT")


def _code_object(elf: ElfFile, where: str) -> CodeObject:
    from devbin.errors import FormatError
    from devbin.formats.devsec.elf import read_code_object
    from devbin.importers import can_import, import_code_object
    found = read_code_object(elf)
    if found is not None:
        return found
    if can_import(elf):
        return import_code_object(elf)
    raise FormatError("no call graph: not a cubin or AMDGPU code object, and no devbin sections", fmt="elf",
                      where=where)


def _arch(obj: CodeObject) -> str:
    return obj.target.target_id if obj.target else "unknown"


def _dot_id(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_dot_clusters(graphs: list[tuple[str, CodeObject]]) -> str:
    """One Graphviz digraph holding one ``subgraph cluster_N`` per (label, code object).

    Nodes and edges are styled as :func:`devbin.analysis.callgraph.format_dot` styles them;
    node IDs are prefixed with ``N:`` so that functions of the same name in two images stay apart.
    """
    from devbin.analysis.callgraph import nodes
    lines = ['digraph "callgraph" {', "  node [fontname=monospace];"]
    for i, (label, obj) in enumerate(graphs):
        ns = nodes(obj)
        direct = set(obj.callgraph.direct)
        lines += [f"  subgraph cluster_{i} {{", f"    label={_dot_id(f'{label} ({_arch(obj)})')};"]
        for n in ns:
            attrs = [f"label={_dot_id(n.name + (f' [{n.registers}]' if n.registers is not None else ''))}"]
            if n.kind == "kernel":
                attrs.append("shape=box")
            if n.address_taken:
                attrs.append("style=dashed")
            if n.kind == "external":
                attrs.append("color=grey")
            lines.append(f"    {_dot_id(f'{i}:{n.name}')} [{', '.join(attrs)}];")
        for n in ns:
            for c in dict.fromkeys(n.calls):
                style = "" if (n.name, c) in direct else " [style=dotted]"
                lines.append(f"    {_dot_id(f'{i}:{n.name}')} -> {_dot_id(f'{i}:{c}')}{style};")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.analysis.callgraph import format_dot, format_text, to_dict
    from devbin.api import open_file
    from devbin.cli.inspect_cmd import (
        container_images,
        image_dict,
        image_header,
        image_label,
        open_image,
        write_container_tail,
    )
    from devbin.errors import DeviceBinaryError
    images = container_images(args.file)
    if images is None:
        with open_file(args.file) as elf:
            obj = _code_object(elf, args.file)
        arch = _arch(obj)
        if args.json:
            out.write(json.dumps(to_dict(obj, arch), indent=2) + "\n")
        elif args.dot:
            out.write(format_dot(obj, arch))
        else:
            out.write(format_text(obj, arch))
        return 0
    graphs: list[tuple[str, CodeObject]] = []
    docs: list[dict[str, Any]] = []
    errors: list[str] = []
    for f in images.code_objects:
        try:
            obj = _code_object(open_image(f), image_label(f))
        except DeviceBinaryError as e:
            errors.append(str(e))
            continue
        graphs.append((image_label(f), obj))
        if args.json:
            docs.append({**image_dict(f), **to_dict(obj, _arch(obj))})
        elif not args.dot:
            if len(graphs) > 1:
                out.write("\n")
            out.write(image_header(f) + "\n")
            out.write(format_text(obj, _arch(obj)))
    if args.json:
        out.write(json.dumps({"file": args.file, "images": docs, "skipped": [image_dict(f) for f in images.skipped],
                              "warnings": [*images.warnings, *errors]}, indent=2) + "\n")
    elif args.dot:
        out.write(format_dot_clusters(graphs))
        for line in [*(f"skipped {image_label(f)}: {f.kind}" for f in images.skipped), *images.warnings, *errors]:
            out.write(f"// {line}\n")
    else:
        if graphs and (images.skipped or images.warnings or errors):
            out.write("\n")
        write_container_tail(images, errors, out)
    return 1 if errors else 0
