"""The resources report: registers, stack, shared/local/constant memory and spills per function of every
cubin and AMDGPU code object found (``devbin resources``; docs/JSON.md, ``devbin schema resources``).

:func:`resources_report` is ``devbin resources --json``'s document for Python users;
:func:`analyse_image` is the per-image work the command runs (in a process pool with ``--jobs``), which
returns plain data: the JSON record of the image and the rows of the text table.  The command line
only scans, filters, and renders these.

Where the numbers come from:

* a function's ``resources`` (JSON) are :attr:`devbin.model.Function.resources` of the image's one
  model (:func:`devbin.importers.model_of`: devbin sections, else the vendor importer), so they are
  what ``Image.code_object()``, inspect, callgraph and size give;
* NVIDIA text rows are cuobjdump's numbers (:func:`devbin.targets.nvidia.resources.usage`), with
  STACK only where the cubin gives the kernel's whole stack (:func:`_nv_row`);
* AMD text rows are the model's attributes where devbin sections were read (``devbin cc`` output:
  device functions included), else the vendor's facts (metadata note, LLVM 20+ resource symbols).
  What the file does not say is ``None`` (text ``?``; JSON ``"source": "unknown"``), never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from devbin.reports.records import (
    AMD_COLUMNS,
    AmdImage,
    AmdRow,
    AmdTable,
    ConstantBank,
    FunctionResources,
    ImageKeys,
    NvidiaCommon,
    NvidiaImage,
    NvidiaRow,
    NvidiaTable,
    ResourcesReport,
)

# the records are re-exported here: their home is devbin.reports.records

if TYPE_CHECKING:
    from devbin.errors import DeviceBinaryError
    from devbin.formats.elf.reader import ElfFile
    from devbin.images import Image
    from devbin.targets.nvidia.cubin import CubinFunction

__all__ = ["AMD_COLUMNS", "SORT_KEYS", "AmdImage", "AmdRow", "AmdTable", "ConstantBank", "FunctionFilter",
           "FunctionResources", "ImageResources", "NvidiaCommon", "NvidiaImage", "NvidiaRow", "NvidiaTable",
           "ResourcesReport", "Unreadable", "analyse_image", "resources_report", "sorted_rows"]

#: Images of fewer bytes than this in all are read by this process whatever ``jobs`` says: a pool costs
#: more than it saves (52 small cubins of a 1 MB zstd library: +15 % CPU and no faster).
MIN_PARALLEL_BYTES = 8 << 20


# --------------------------------------------------------------------------- one image


@dataclass(frozen=True, slots=True)
class ImageResources:
    """What :func:`analyse_image` found in one code object (plain data: it crosses processes).

    ``image``: the JSON record; ``table``: the text table (None where not asked for); ``usage``:
    cuobjdump ``-res-usage``'s numbers of a cubin (:func:`devbin.targets.nvidia.resources.usage`,
    what ``--format cuobjdump`` prints), None for an AMD code object."""

    image: NvidiaImage | AmdImage | None
    table: NvidiaTable | AmdTable | None
    usage: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A code object that cannot be read (a warning; the report goes on).  ``in_table``: it is one
    whose fatbin entry header cuobjdump prints before its message (a cubin)."""

    message: str
    in_table: bool


def analyse_image(f: Image, *, json: bool = True, text: bool = False) -> ImageResources | Unreadable | None:
    """The resources of image ``f`` (None: it is no cubin or AMDGPU code object).  ``json``: build the JSON
    record; ``text``: the text table's rows (``--format cuobjdump`` needs neither: ``usage`` only).
    Raises :class:`~devbin.errors.LimitExceeded` (the memory budget: not the file's fault)."""
    from devbin.errors import DeviceBinaryError, LimitExceeded
    from devbin.formats.elf.reader import ElfFile
    kind = f.kind
    if kind == "cubin" and f.entry is None:  # a bare device ELF: its machine's vendor says what it is
        kind = _object_kind(f) or kind
    if kind not in ("amdgpu", "cubin"):
        return None
    try:
        elf = ElfFile(f.data(), where=str(f.address))
        if kind == "amdgpu":
            return _amdgpu(f, elf)
        if _object_kind_of(elf) != "cubin":
            return None
        return _nvidia(f, elf, json, text)
    except LimitExceeded:
        raise  # over the memory budget: the command fails, the file is not to blame
    except DeviceBinaryError as e:
        return Unreadable(str(e), in_table=kind == "cubin")


def _object_kind_of(elf: ElfFile) -> str | None:
    """The image kind of a device ELF by its machine's vendor (``cubin``, ``amdgpu``), None for no vendor's."""
    from devbin.targets.registry import vendor_for_machine
    vendor = vendor_for_machine(elf.header.e_machine)
    return vendor.object_kind if vendor is not None else None


def _object_kind(f: Image) -> str | None:
    from devbin.errors import DeviceBinaryError
    from devbin.formats.elf.reader import ElfFile
    try:
        return _object_kind_of(ElfFile(f.data(), where=str(f.address)))
    except DeviceBinaryError:
        return None


def _image_keys(f: Image) -> ImageKeys:
    return cast(ImageKeys, f.to_dict())


def _sections_only(e: DeviceBinaryError) -> None:
    """Devbin sections that cannot be decoded make the image a warning; what the vendor importer went past
    (a note that disagrees with a descriptor) does not stop the table."""
    from devbin.formats.devsec.constants import FMT
    if e.fmt == FMT:
        raise e


def _amdgpu(f: Image, elf: ElfFile) -> ImageResources:
    """Per-function AMDGPU resources: from the devbin sections when present, else from the vendor's facts."""
    from devbin.importers import DEVBIN_SECTIONS, model_and_source
    from devbin.targets.amdgpu.importer import code_object_facts
    from devbin.targets.amdgpu.resources import model_function_resources
    facts = code_object_facts(elf)
    obj, source = model_and_source(elf, diag=_sections_only)  # the one model (devbin.importers.model_of)
    # the table's columns: the model's attributes where devbin sections were read, else the vendor's facts
    found = [model_function_resources(fn) for fn in obj.functions] if source == DEVBIN_SECTIONS else facts.resources
    rows: list[AmdRow] = []
    for r in found:
        d = r.to_dict()
        rows.append(cast(AmdRow, {"name": r.name, "kind": r.kind, **{k: d[k] for k in AMD_COLUMNS},
                                  "source": r.source}))
    model = {fn.name: fn.resources for fn in obj.functions}
    functions: list[FunctionResources] = [
        {"name": r["name"], "kind": "kernel" if r["kind"] == "kernel" else "device", "source": r["source"],
         "resources": model[r["name"]].to_dict() if r["name"] in model else None} for r in rows]
    head = _image_keys(f)
    return ImageResources(image=AmdImage(**head, target_id=facts.target_id, source=source, functions=functions),
                          table=AmdTable(**head, target_id=facts.target_id, source=source, functions=rows))


def _nv_row(fn: CubinFunction) -> NvidiaRow:
    """One row of the NVIDIA text table, from the cubin's records as ``Function.resources`` reads them, but
    STACK only where the cubin gives the kernel's whole stack (``EIATTR_MIN_STACK_SIZE``: linked or
    whole-program cubins); a relocatable cubin's ``EIATTR_MAX_STACK_SIZE`` is 0 whatever the frame (the
    call chains are summed by nvlink), so there STACK is ``None`` and FRAME says what the function needs."""
    from devbin.targets.nvidia.cubin import STACK_UNKNOWN
    stack: int | Literal["unknown"] | None = "unknown" if fn.min_stack_size == STACK_UNKNOWN else fn.min_stack_size
    return {"name": fn.name, "kind": "kernel" if fn.is_entry else "device", "registers": fn.register_count,
            "stack": stack, "frame": fn.frame_size, "spill": fn.spill_instructions, "shared": fn.shared,
            "local": fn.local, "constant": [{"bank": b, "size": n} for b, n in fn.constant_banks.items()]}


def _nvidia(f: Image, elf: ElfFile, as_json: bool, text: bool) -> ImageResources:
    from devbin.formats.devsec.elf import devbin_sections
    from devbin.importers import model_of
    from devbin.targets.nvidia.cubin import Cubin
    from devbin.targets.nvidia.importer import cubin_function_resources
    from devbin.targets.nvidia.resources import usage
    # The JSON and the text table report spills (and the JSON launch bounds), which need every
    # per-function record; --format cuobjdump needs the resource records alone (cuobjdump's numbers).
    cubin = Cubin(elf, records=as_json or text)
    u = usage(cubin)
    head = _image_keys(f)
    image: NvidiaImage | None = None
    if as_json:
        common: NvidiaCommon = {"global": u["common"]["global"], "constant_banks": u["common"]["constant"]}
        if devbin_sections(elf):  # the one model: devbin sections first (devbin.importers.model_of)
            model = {fn.name: fn.resources for fn in model_of(elf).functions}
            res = {fn.name: model[fn.name].to_dict() if fn.name in model else None for fn in cubin.functions}
        else:  # the same records model_of's importer reads (Function.resources after import_cubin), read once
            res = {fn.name: cubin_function_resources(fn).to_dict() for fn in cubin.functions}
        image = NvidiaImage(**head, common=common, functions=[
            {"name": fn.name, "kind": "kernel" if fn.is_entry else "device", "resources": res[fn.name]}
            for fn in cubin.functions])
    table = NvidiaTable(**head, common=u["common"], functions=[_nv_row(fn) for fn in cubin.functions]) if text \
        else None
    return ImageResources(image=image, table=table, usage=u)


# --------------------------------------------------------------------------- --function, --sort


_Row = TypeVar("_Row", FunctionResources, NvidiaRow, AmdRow)
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


#: ``--sort``'s keys: the row's field each sorts by (numbers largest first, names A to Z; unknown first).
SORT_KEYS = ("regs", "stack", "frame", "spill", "name")
_SORT_FIELDS = {"cubin": {"regs": "registers", "stack": "stack", "frame": "frame", "spill": "spill"},
                "amdgpu": {"regs": "vgpr", "stack": "private_segment", "frame": "private_segment",
                           "spill": "vgpr_spill"}}


def sorted_rows(rows: list[_Row], key: str | None, table: NvidiaTable | AmdTable) -> list[_Row]:
    """The table's rows in ``--sort``'s order (stable: ties keep the file's order); AMD: VGPR, PRIVATE, VSPILL."""
    if key is None:
        return rows
    from devbin.size.account import demangle
    if key == "name":
        return sorted(rows, key=lambda r: demangle(r["name"]))
    field = _SORT_FIELDS["cubin" if "common" in table else "amdgpu"][key]  # by the table's image kind

    def value(r: Any) -> tuple[int, int]:
        v = r[field]
        if v == "unknown" or v is True:
            return (0, 0)  # not statically known: could be anything, so first
        return (1, -v) if isinstance(v, int) else (2, 0)
    return sorted(rows, key=value)


# --------------------------------------------------------------------------- the whole report


def resources_report(paths: Sequence[str | Path], *, all: bool = False, functions: Iterable[str] | None = None,
                     jobs: int | None = 1) -> ResourcesReport:
    """``devbin resources --json``'s document (less ``schema``) for ``paths`` (files or folders): one record
    per cubin and AMDGPU code object, in scan order, and the warnings.  ``all``: also the relocatable
    ``__nv_relfatbin`` images beside ``.nv_fatbin`` ones (cuobjdump ``-all``); ``functions``: only these
    names or globs (``--function``); ``jobs``: processes reading the images (None: every processor)."""
    from devbin.images.parallel import ordered_map, pool_jobs
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport
    report = ScanReport()
    todo = [f for f, _ in Scanner(report, all=all).paths([str(p) for p in paths]) if f.kind in ("amdgpu", "cubin")]
    wanted = FunctionFilter(functions)
    images: list[NvidiaImage | AmdImage] = []
    for f, r in zip(todo, ordered_map(analyse_image, todo, jobs=pool_jobs(jobs, (f.size for f in todo),
                                                                           MIN_PARALLEL_BYTES)), strict=True):
        if isinstance(r, Unreadable):
            report.warn(str(f.address), r.message)
        elif r is not None and r.image is not None:
            images.append(wanted.image(r.image))
    return {"images": images, "warnings": report.warnings}
