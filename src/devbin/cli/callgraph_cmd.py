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
bitcode and other images are skipped with a note (on stderr).  --image
ADDRESS and --arch ARCH (repeatable) take only those images.

--json prints one shape for every input (schema devbin.callgraph/1):
{"schema", "file": FILE, "images": [{"address", "vendor", "kind", "arch",
"size", "stored_size", "compression", "target_id", "nodes"}], "skipped":
[...], "warnings": [...]}; a single code object is one entry of "images".
Each node: "number", "name", "kind", "resources" (a function's resources in
the shape every command prints them, docs/JSON.md; null for an external
callee), "address_taken", "calls".
--dot prints one digraph per code object, or one digraph with one
`subgraph cluster_N` per code object for a container.  Exit status 3 (one
line on stderr) when the file holds no device code.

--svg -o OUT also writes the graph as an SVG picture to OUT (what is printed
is unchanged): a layered drawing computed by devbin (no Graphviz), each
function a box with its registers and stack where the file records them;
kernels bold, address-taken functions dashed, external callees grey,
indirect calls dotted, recursion (back edges) red.  A container's code
objects are drawn one below the other, each titled with its address.  A
graph of more than 150 functions shows the 150 reached first from the
kernels, with a note.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from devbin.model import CodeObject

HELP = ("print the call graph with registers, entry points and address-taken functions, of a code object "
        "or of every code object in a fatbin, offload bundle or binary, host object or archive")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from devbin.cli.common import add_image_options, add_picture_option
    p.add_argument("file", nargs="?", help="a cubin, an AMDGPU code object or an ELF with devbin sections, or a "
                                           "container of them (fatbin, OffloadBinary, offload bundle, host "
                                           "object/library, ar archive); default: the file of --image")
    add_image_options(p, all=False)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print JSON")
    g.add_argument("--dot", action="store_true", help="print Graphviz DOT")
    add_picture_option(p, "--svg", "also write the call graph as SVG (layout computed by devbin; a container's code "
                                   "objects one below the other)")


def _arch(obj: CodeObject) -> str:
    from devbin.analysis.callgraph_view import arch_of
    return arch_of(obj)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.analysis.callgraph_view import format_dot, format_dot_clusters, format_text
    from devbin.cli.common import dump, no_device_code, picture_output, warn
    from devbin.cli.inspect_cmd import image_header, image_label, selected_images, write_container_tail
    from devbin.reports.callgraph import graphs as read_graphs
    svg = picture_output(args, "--svg")
    path, images = selected_images(args)
    if images is None:
        return no_device_code([path])
    graphs: list[tuple[str, CodeObject]] = []
    pictures: list[tuple[str, CodeObject]] = []  # for --svg: titled with the arch
    docs: list[dict[str, Any]] = []
    errors: list[str] = []
    for g in read_graphs(images, errors):  # each written as soon as it is read
        obj = g.model
        docs.append(g.doc)
        if g.image is None:
            pictures.append((f"{path} ({_arch(obj)})", obj))
            if not args.json:
                out.write(format_dot(obj, _arch(obj)) if args.dot else format_text(obj, _arch(obj)))
            continue
        graphs.append((image_label(g.image), obj))
        pictures.append((f"{image_label(g.image)} ({_arch(obj)})", obj))
        if not args.json and not args.dot:
            if len(graphs) > 1:
                out.write("\n")
            out.write(image_header(g.image) + "\n")
            out.write(format_text(obj, _arch(obj)))
    if svg is not None:
        from devbin.binary.output import write_file
        from devbin.htmlreport.callgraph import callgraphs_svg
        write_file(svg, callgraphs_svg(pictures).encode(), inputs=[path])
    if args.json:
        dump("callgraph", {"file": path, "images": docs, "skipped": [f.to_dict() for f in images.skipped],
                           "warnings": [*images.warnings, *errors]}, out)
        for w in [*images.warnings, *errors]:
            warn(w)
    else:
        if args.dot and not images.single:
            out.write(format_dot_clusters(graphs))
        write_container_tail(images, errors)
    return 1 if errors else 0
