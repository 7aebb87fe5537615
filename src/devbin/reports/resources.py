"""The resources report: registers, stack, shared/local/constant memory and spills per function of every
vendor's device code object found: cubins, AMDGPU code objects, zebins (``devbin resources``; docs/JSON.md,
``devbin schema resources``).

:func:`resources_report` is ``devbin resources --json``'s document for Python users;
:func:`analyse_image` is the per-image work the command runs (in a process pool with ``--jobs``), which
returns plain data: the JSON record of the image and the rows of the text table.  The command line
only scans, filters, and renders these.

Where the numbers come from:

* a function's ``resources`` (JSON) are :attr:`devbin.model.Function.resources` of the image's one
  model (:func:`devbin.importers.model_of`: devbin sections, else the vendor importer), so they are
  what ``Image.code_object()``, inspect, callgraph and size give;
* the text rows, their columns and the fields ``--sort`` orders by are the vendor's
  (:meth:`devbin.targets.vendor.Vendor.resources_tables`, :attr:`~devbin.targets.vendor.Vendor.resource_sort_fields`):
  NVIDIA's are cuobjdump's numbers, AMD's the devbin sections' or the metadata note's, Intel's ``.ze_info``'s.
  What the file does not say is ``None`` (text ``?``), never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from devbin.reports.records import (
    AmdImage,
    AmdRow,
    AmdTable,
    FunctionResources,
    ImageKeys,
    ImageResources,
    IntelImage,
    IntelRow,
    IntelTable,
    NvidiaImage,
    NvidiaRow,
    NvidiaTable,
    ResourcesReport,
)

if TYPE_CHECKING:
    from devbin.errors import DeviceBinaryError
    from devbin.images import Image

# The records it returns (their home: devbin.reports.records) stay reachable here under their names.
__all__ = ["SORT_KEYS", "AmdImage", "AmdRow", "AmdTable", "FunctionFilter", "FunctionResources", "ImageResources",
           "IntelImage", "IntelRow", "IntelTable", "NvidiaImage", "NvidiaRow", "NvidiaTable", "ResourcesReport",
           "Unreadable", "analyse_image", "resources_report", "sorted_rows"]

#: Images of fewer bytes than this in all are read by this process whatever ``jobs`` says: a pool costs
#: more than it saves (52 small cubins of a 1 MB zstd library: +15 % CPU and no faster).
MIN_PARALLEL_BYTES = 8 << 20


# --------------------------------------------------------------------------- one image


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A code object that cannot be read (a warning; the report goes on).  ``in_table``: it is one
    whose fatbin entry header cuobjdump prints before its message (an image of a fatbin entry)."""

    message: str
    in_table: bool


def analyse_image(f: Image, *, json: bool = True, text: bool = False,
                  lines: bool = False) -> ImageResources | Unreadable | None:
    """The resources of image ``f`` (None: it is no vendor's code object, or one whose vendor has no resources
    report).  ``json``: build the JSON record; ``text``: the text table's rows (``--format cuobjdump`` needs
    neither: ``usage`` only).  The vendor of the image's kind builds them
    (:meth:`devbin.targets.vendor.Vendor.resources_tables`).  ``lines`` (with neither): only the tool's
    lines are wanted, whole, and the vendor's compiled pass gives them where it can, as
    :attr:`ImageResources.lines <devbin.targets.resource_records.ImageResources.lines>`
    (:meth:`~devbin.targets.vendor.Vendor.resource_usage_lines`), without the ELF reader.
    Raises :class:`~devbin.errors.LimitExceeded` (the memory budget: not the file's fault)."""
    from devbin.errors import DeviceBinaryError, LimitExceeded
    from devbin.targets.registry import object_kinds, vendor_for_kind
    if f.kind not in object_kinds():
        return None
    try:
        data = f.data()
        if lines and not json and not text and (fast := vendor_for_kind(f.kind)) is not None:
            got = fast.resource_usage_lines(data)
            if got is not None:
                return ImageResources(image=None, table=None, lines=got)
        from devbin.formats.elf.reader import ElfFile
        from devbin.importers import model_and_source
        from devbin.targets.registry import vendor_for_machine
        elf = ElfFile(data, where=str(f.address))
        # the ELF's machine says whose code object it is (a bare device ELF's kind was a guess)
        vendor = vendor_for_machine(elf.header.e_machine)
        if vendor is None or (f.entry is not None and vendor.object_kind != f.kind):
            return None
        return vendor.resources_tables(elf, _image_keys(f), lambda: model_and_source(elf, diag=_sections_only),
                                       json=json, text=text)
    except LimitExceeded:
        raise  # over the memory budget: the command fails, the file is not to blame
    except DeviceBinaryError as e:
        return Unreadable(str(e), in_table=f.entry is not None)


def _image_keys(f: Image) -> ImageKeys:
    return cast(ImageKeys, f.to_dict())


def _sections_only(e: DeviceBinaryError) -> None:
    """Devbin sections that cannot be decoded make the image a warning; what the vendor importer went past
    (a note that disagrees with a descriptor) does not stop the table."""
    from devbin.formats.devsec.constants import FMT
    if e.fmt == FMT:
        raise e


# --------------------------------------------------------------------------- --function, --sort


_Row = TypeVar("_Row", FunctionResources, NvidiaRow, AmdRow, IntelRow)
_Image = TypeVar("_Image", bound=Mapping[str, Any])  # an image record or table: its "functions" filtered


class FunctionFilter:
    """``--function NAME`` (repeatable): a function is kept when its mangled or demangled name is NAME or
    matches it as a glob (fnmatch, case-sensitive); no NAME keeps every function.  Applies to every
    output (text, cuobjdump's lines, JSON); the images stay, with the functions kept."""

    def __init__(self, patterns: Iterable[str] | None = None) -> None:
        self.patterns = list(patterns or [])
        self.matched: set[str] = set()

    def __call__(self, name: str) -> bool:
        if not self.patterns:
            return True
        from devbin.size.account import demangle
        hits = {p for p in self.patterns
                if p in (name, demangle(name)) or fnmatchcase(name, p) or fnmatchcase(demangle(name), p)}
        self.matched |= hits
        return bool(hits)

    def rows(self, rows: list[_Row]) -> list[_Row]:
        return [r for r in rows if self(r["name"])] if self.patterns else rows

    def image(self, image: _Image) -> _Image:
        return cast(_Image, {**image, "functions": self.rows(image["functions"])}) if self.patterns else image

    def unmatched(self) -> list[str]:
        return [p for p in self.patterns if p not in self.matched]


#: ``--sort``'s keys: the row's field each sorts by (numbers largest first, names A to Z; unknown first): the
#: field of each vendor's table is :attr:`devbin.targets.vendor.Vendor.resource_sort_fields`.
SORT_KEYS = ("regs", "stack", "frame", "spill", "name")


def sorted_rows(rows: list[_Row], key: str | None, table: NvidiaTable | AmdTable | IntelTable) -> list[_Row]:
    """The table's rows in ``--sort``'s order (stable: ties keep the file's order), by the field the table's
    vendor sorts ``key`` by (:attr:`~devbin.targets.vendor.Vendor.resource_sort_fields`)."""
    if key is None:
        return rows
    from devbin.size.account import demangle
    from devbin.targets.registry import vendor_named
    if key == "name":
        return sorted(rows, key=lambda r: demangle(r["name"]))
    vendor = vendor_named(table["vendor"])
    if vendor is None or key not in vendor.resource_sort_fields:
        return rows
    field = vendor.resource_sort_fields[key]

    def value(r: Any) -> tuple[int, int]:
        v = r[field]
        if v == "unknown" or v is True:
            return (0, 0)  # not statically known: could be anything, so first
        return (1, -v) if isinstance(v, int) else (2, 0)
    return sorted(rows, key=value)


# --------------------------------------------------------------------------- the whole report


def resources_report(paths: Sequence[str | Path], *, all: bool = False, functions: Iterable[str] | None = None,
                     jobs: int | None = 1, client: Any = None) -> ResourcesReport:
    """``devbin resources --json``'s document (less ``schema``) for ``paths`` (files or folders; URLs,
    :mod:`devbin.images.remote`): one record per cubin and AMDGPU code object, in scan order, and the
    warnings.  ``all``: also the relocatable ``__nv_relfatbin`` images beside ``.nv_fatbin`` ones (cuobjdump
    ``-all``); ``functions``: only these names or globs (``--function``); ``jobs``: processes reading the
    images (None: every processor); ``client``: a ``dask.distributed.Client`` whose workers read them instead
    (a large file's images cut into several tasks, :mod:`devbin.images.units`), the document the same."""
    from functools import partial

    from devbin.images.parallel import ordered_map, pool_jobs
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport
    from devbin.images.units import image_units, run_unit, unit_parts
    from devbin.targets.registry import object_kinds
    report = ScanReport()
    kinds = object_kinds()
    found = [f for f, _ in Scanner(report, all=all).paths([str(p) for p in paths])]
    todo = [f for f in found if f.kind in kinds]
    units = image_units(found, todo, all=all, parts=unit_parts(client) if client is not None else 0)
    results = (r for rs in ordered_map(partial(run_unit, analyse_image), units, client=client,
                                       jobs=pool_jobs(jobs, (f.size for f in todo), MIN_PARALLEL_BYTES))
               for r in rs)
    wanted = FunctionFilter(functions)
    images: list[NvidiaImage | AmdImage | IntelImage] = []
    for f, r in zip(todo, results, strict=True):
        if isinstance(r, Unreadable):
            report.warn(str(f.address), r.message)
        elif r is not None and r.image is not None:
            images.append(wanted.image(r.image))
    return {"images": images, "warnings": report.warnings}
