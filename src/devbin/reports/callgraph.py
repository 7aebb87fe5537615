"""The call-graph report: each code object of a file with its call graph (``devbin callgraph``; docs/JSON.md,
``devbin schema callgraph``).

Which images: :func:`devbin.reports.inspect.container_images` (the one policy ``inspect`` uses too).  Each
graph is the model's (:func:`devbin.importers.model_of`: devbin sections, else the vendor importer), its
nodes as :func:`devbin.analysis.callgraph_view.to_dict` gives them (every function's resources in the one shape).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats.elf.reader import ElfFile
from devbin.importers import has_model, model_of
from devbin.reports.inspect import FileImagesReport, Images, container_images, open_image, single_keys

if TYPE_CHECKING:
    from devbin.images import Image
    from devbin.model import CodeObject

__all__ = ["CallGraphReport", "Graph", "callgraph_report", "code_object_of", "graphs"]


class CallGraphReport(FileImagesReport):
    """``devbin callgraph --json``'s document (less ``schema``): one entry per code object read (the
    image's keys, ``target_id`` and ``nodes``), the images skipped, the warnings."""


@dataclass(frozen=True, slots=True)
class Graph:
    """One code object's graph: its scan record (None for a file read as one code object), the model and
    its entry of :class:`CallGraphReport`."""

    image: Image | None
    model: CodeObject
    doc: dict[str, Any]


def code_object_of(elf: ElfFile, where: str) -> CodeObject:
    """The model whose call graph is shown (:func:`devbin.importers.model_of`); FormatError for an ELF that
    has none (no vendor importer, no devbin sections)."""
    if has_model(elf):
        return model_of(elf)
    raise FormatError("no call graph: not a cubin or AMDGPU code object, and no devbin sections", fmt="elf",
                      where=where)


def _doc(head: dict[str, Any], obj: CodeObject) -> dict[str, Any]:
    from devbin.analysis.callgraph_view import arch_of, to_dict
    g = to_dict(obj, arch_of(obj))
    return {**head, "target_id": g["arch"], "nodes": g["nodes"]}


def graphs(images: Images, errors: list[str]) -> Iterator[Graph]:
    """Each code object of ``images`` with its graph, in order (one decoded at a time).  A container's code
    object that cannot be read is a message in ``errors``; a file read as one code object raises."""
    from devbin.binary import budget
    from devbin.entry.elf import open_elf
    if images.single:
        with open_elf(images.file) as elf:
            obj = code_object_of(elf, images.file)
        yield Graph(None, obj, _doc(single_keys(images), obj))
    for f in images.code_objects:
        try:
            with budget.current().unit():  # its decoded image goes before the next one is decoded
                obj = code_object_of(open_image(f), str(f.address))
        except DeviceBinaryError as e:
            errors.append(str(e))
            continue
        yield Graph(f, obj, _doc(f.to_dict(), obj))


def callgraph_report(path: str, images: Images | None = None) -> CallGraphReport:
    """``devbin callgraph --json``'s document for ``path`` (its :func:`container_images`, or ``images``: a
    selection of them)."""
    chosen = container_images(path) if images is None else images
    errors: list[str] = []
    docs = [g.doc for g in graphs(chosen, errors)]
    return {"file": path, "images": docs, "skipped": [f.to_dict() for f in chosen.skipped],
            "warnings": [*chosen.warnings, *errors]}
