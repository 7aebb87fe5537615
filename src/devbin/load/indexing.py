"""Indexing a code object (:func:`index_code_object`): the ELF checked, its vendor found (its
``e_machine``: :func:`devbin.load.backend.loadable_vendor`) and the vendor's load back end asked to
make the records of :mod:`devbin.load.indexed` (:meth:`devbin.load.backend.LoadBackend.index`: AMDGPU
code objects from ``.dynsym`` first, the rest of ``.symtab`` on first use, :mod:`devbin.targets.amdgpu.load`;
cubins from their symbol table, ``.nv.info`` and sections, :mod:`devbin.targets.nvidia.load`).  The symbol
table readers every back end shares are here: they read a table through its bulk columns and
:meth:`SymbolTable.globals`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from devbin.binary import ByteView
from devbin.errors import NotThisFormat, UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, SymbolTable
from devbin.load.backend import load_backend, loadable_vendor
from devbin.load.indexed import (
    ExportTable,
    IndexedCodeObject,
    ObjDefinition,
    ObjReference,
)

__all__ = ["OffsetOf", "index_code_object", "read_definitions", "read_exports", "read_references"]

_DATA_TYPES = {C.STT_OBJECT, C.STT_CUDA_OBJECT, C.STT_COMMON}
_DEFINITION_TYPES = frozenset({C.STT_FUNC, C.STT_AMDGPU_HSA_KERNEL, *_DATA_TYPES})
_EXPORT_BINDINGS = (C.STB_GLOBAL, C.STB_WEAK)
_EXPORT_VISIBILITIES = (C.STV_DEFAULT, C.STV_PROTECTED)


# ------------------------------------------------------------------------------------------ entry


def index_code_object(data: bytes | bytearray | memoryview, name: str) -> IndexedCodeObject:
    """Parse and index one code object; FormatError/UsageError (naming ``name``) if it cannot be loaded."""
    view = ByteView(data, fmt="elf", where=name)
    try:
        elf = ElfFile(view, where=name)
    except NotThisFormat:
        raise UsageError("not a code object (no ELF header); give a package to load_package()", where=name) \
            from None
    h = elf.header
    vendor = loadable_vendor(h.e_machine)
    if vendor is not None:
        return load_backend(vendor).index(elf, name)
    raise UsageError(f"not a device code object: e_machine {C.simple_name(C.EM_NAMES, h.e_machine)} "
                     "(expected an AMDGPU code object or a cubin)", where=name)


#: Where a definition lies in the code object, from its ``st_shndx`` and ``st_value`` (None: not mapped).
OffsetOf = Callable[[int, int], "int | None"]


def _candidates(table: SymbolTable) -> Iterator[tuple[int, str]]:
    """(index, name) of every named, defined function or data symbol in a regular section, in table order."""
    c = table.columns
    rows = [i for i, (info, shndx, st_name) in enumerate(zip(c.st_info, c.st_shndx, c.st_name, strict=True))
            if st_name and 0 < shndx < C.SHN_LORESERVE and info & 0xF in _DEFINITION_TYPES]
    return ((i, n) for i, n in zip(rows, table.names(rows), strict=True) if n)


def _definition(elf: ElfFile, table: SymbolTable, i: int, name: str, offset: int, exported: bool) -> ObjDefinition:
    c = table.columns
    shndx, info, other = c.st_shndx[i], c.st_info[i], c.st_other[i]
    sec = elf.sections[shndx].name if shndx < len(elf.sections) else ""
    return ObjDefinition(name, info & 0xF, offset, c.st_size[i], sec, c.st_value[i], C.binding_word(info >> 4),
                         C.visibility_word(other & 3), exported)


def read_definitions(elf: ElfFile, table: SymbolTable | None, exported: frozenset[str],
                 offset_of: OffsetOf) -> tuple[ObjDefinition, ...]:
    """Every named function and data definition (once per name and offset), in table order."""
    if table is None:
        return ()
    c = table.columns
    out: list[ObjDefinition] = []
    seen: set[tuple[str, int]] = set()
    for i, name in _candidates(table):
        off = offset_of(c.st_shndx[i], c.st_value[i])
        if off is None or (name, off) in seen:
            continue
        seen.add((name, off))
        out.append(_definition(elf, table, i, name, off, name in exported))
    return tuple(out)


def read_exports(elf: ElfFile, table: SymbolTable | None, offset_of: OffsetOf) -> ExportTable:
    """The first definition of each exportable name, as :func:`read_definitions` would list it, without
    making a record for any of them (see :class:`ExportTable`); one pass over the table."""
    if table is None:
        return ExportTable({}, frozenset(), frozenset())
    c = table.columns
    defined = [i for i, shndx in enumerate(c.st_shndx) if shndx]
    named = [(i, n) for i, n in zip(defined, table.names(defined), strict=True) if n]
    info, other, shndx, value = c.st_info, c.st_other, c.st_shndx, c.st_value
    names = frozenset(n for i, n in named if info[i] >> 4 in _EXPORT_BINDINGS and other[i] & 3 in _EXPORT_VISIBILITIES)
    rows: dict[str, int] = {}
    for i, n in named:
        if n in names and n not in rows and shndx[i] < C.SHN_LORESERVE and info[i] & 0xF in _DEFINITION_TYPES \
                and offset_of(shndx[i], value[i]) is not None:
            rows[n] = i
    weak = frozenset(n for n, i in rows.items() if info[i] >> 4 == C.STB_WEAK)

    def build(name: str, i: int) -> ObjDefinition:
        off = offset_of(shndx[i], value[i])
        assert table is not None and off is not None
        return _definition(elf, table, i, name, off, True)

    return ExportTable(rows, weak, names, build)


def read_references(table: SymbolTable | None, sites: dict[str, list[str]],
                driver: tuple[str, ...] = ()) -> tuple[ObjReference, ...]:
    """The named undefined non-local symbols of ``table``, with the places that need them."""
    if table is None:
        return ()
    out: dict[str, ObjReference] = {}
    for sym in table.globals(bindings=None, defined=False):
        if sym.name not in out:
            optional = sym.bind == C.STB_WEAK or sym.name.startswith(driver or ("\0",))
            out[sym.name] = ObjReference(sym.name, optional, tuple(sites.get(sym.name, ())))
    return tuple(out.values())


