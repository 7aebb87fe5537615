"""What an executable holds: loaded code objects, the errors ``freeze()`` and ``load_*`` raise,
and the small readers every part of :class:`devbin.load.Executable` shares."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devbin.errors import UsageError
from devbin.load.backend import load_backend, loadable_vendor
from devbin.load.indexed import IndexedCodeObject, ObjDefinition
from devbin.load.indexing import index_code_object
from devbin.load.relocation import AppliedReloc
from devbin.load.symbols import LoadedSymbol, SymbolKind
from devbin.model import Function

__all__ = ["DuplicateSymbolError", "LoadedCodeObject", "ResolvedNvReloc", "Source", "Unresolved",
           "UnresolvedSymbolsError", "code_object_target", "is_device_elf", "make_symbol", "read_source"]

Source = str | os.PathLike[str] | bytes | bytearray | memoryview


_LISTED = 10  # problems named in one error line; the exception's fields hold them all


@dataclass(frozen=True, slots=True)
class Unresolved:
    """An undefined reference no loaded code object defines: the symbol, who needs it, and where."""

    symbol: str
    needed_by: str
    sites: tuple[str, ...]

    def __str__(self) -> str:
        where = f" (at {', '.join(self.sites[:4])}{', ...' if len(self.sites) > 4 else ''})" if self.sites else ""
        return f"{self.symbol!r} needed by {self.needed_by}{where}"


class UnresolvedSymbolsError(UsageError):
    """``freeze()`` found undefined references; ``unresolved`` lists each with who needs it."""

    def __init__(self, unresolved: tuple[Unresolved, ...]) -> None:
        self.unresolved = unresolved
        lines = "; ".join(str(u) for u in unresolved[:_LISTED])
        if len(unresolved) > _LISTED:
            lines += f"; and {len(unresolved) - _LISTED} more"
        super().__init__(f"cannot freeze: {len(unresolved)} unresolved symbol"
                         f"{'s' if len(unresolved) != 1 else ''}: {lines}", fmt="load")


class DuplicateSymbolError(UsageError):
    """A code object defines an exported symbol another loaded code object already defines."""

    def __init__(self, name: str, duplicates: tuple[tuple[str, str], ...]) -> None:
        self.duplicates = duplicates  # (symbol, the code object that defined it first)
        what = ", ".join(f"{s!r} (already defined by {o})" for s, o in duplicates[:_LISTED])
        if len(duplicates) > _LISTED:
            what += f" and {len(duplicates) - _LISTED} more"
        super().__init__(f"duplicate definition{'s' if len(duplicates) != 1 else ''}: {what}", fmt="load",
                         where=name)


@dataclass(frozen=True, slots=True)
class ResolvedNvReloc:
    """A cubin relocation resolved at freeze and left for the driver to apply to SASS."""

    section: str
    offset: int
    type_name: str
    symbol: str
    addend: int
    address: int | None  # the symbol's device address; None: a weak reference left unresolved
    target_object: str | None


@dataclass(eq=False)
class LoadedCodeObject:
    """One loaded code object (HSA's ``hsa_loaded_code_object_t``).

    ``state``: ``indexed`` (loaded, not frozen), ``placed`` (address range reserved),
    ``partial`` (lazy: some functions and data mapped, their relocations applied), ``mapped``
    (every piece in device memory, every relocation applied).  ``loaded_functions`` and
    ``loaded_data`` name what is mapped; ``graph_source`` says where a lazy executable took
    the call graph from (:mod:`devbin.load.lazy`).
    """

    index: IndexedCodeObject
    note: str = ""
    base: int | None = None
    state: str = "indexed"
    relocations: list[AppliedReloc] = field(default_factory=list)
    nv_relocations: list[ResolvedNvReloc] = field(default_factory=list)
    loaded_functions: set[str] = field(default_factory=set)
    loaded_data: set[str] = field(default_factory=set)
    graph_source: str = ""

    @property
    def name(self) -> str:
        return self.index.name

    @property
    def vendor(self) -> str:
        return self.index.vendor

    @property
    def arch(self) -> str:
        return self.index.arch

    @property
    def size(self) -> int:
        return self.index.span

    def address(self, offset: int) -> int:
        """The device address of object offset ``offset`` (after placement)."""
        if self.base is None:
            raise UsageError(f"{self.name} has no address yet: freeze() the executable first")
        return self.base + offset

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "vendor": self.vendor, "arch": self.arch, "e_type": self.index.e_type,
            "note": self.note, "base": self.base, "size": self.size, "state": self.state,
            "loaded_functions": sorted(self.loaded_functions), "loaded_data": sorted(self.loaded_data),
            "graph_source": self.graph_source or None,
            "pieces": [{"label": p.label, "address": None if self.base is None else self.base + p.offset,
                        "offset": p.offset, "file_size": len(p.data), "mem_size": p.mem_size}
                       for p in self.index.pieces],
            "relocations": [{"address": r.address, "offset": r.offset, "type": r.type_name, "value": r.value,
                             "symbol": r.symbol, "addend": r.addend, "target_object": r.target_object,
                             "site": r.site} for r in self.relocations],
            "driver_relocations": [{"section": r.section, "offset": r.offset, "type": r.type_name,
                                    "symbol": r.symbol, "addend": r.addend, "address": r.address,
                                    "target_object": r.target_object} for r in self.nv_relocations],
            "warnings": [str(w) for w in self.index.warnings],
        }


def make_symbol(obj: LoadedCodeObject, d: ObjDefinition, kind: SymbolKind, address: int, *,
            code_address: int | None = None, descriptor: str = "", function: Function | None = None) -> LoadedSymbol:
    return LoadedSymbol(d.name, kind, address, d.size, obj.name, "program" if d.exported else "module",
                        d.section, d.st_value, d.binding, d.visibility, code_address, descriptor, function,
                        obj.index.descriptor)


def is_device_elf(data: bytes | bytearray | memoryview) -> bool:
    """True for the bytes of a bare code object devbin loads (an AMDGPU code object, a cubin: ELF magic and
    an ``e_machine`` whose vendor has a load back end, :func:`devbin.load.backend.loadable_vendor`)."""
    head = bytes(data[:20])
    return len(head) == 20 and head[:4] == b"\x7fELF" and head[5] == 1 and \
        loadable_vendor(int.from_bytes(head[18:20], "little")) is not None


def code_object_target(source: Source) -> str:
    """The device target a bare code object names: ``gfx90a:xnack+`` (its e_flags), ``sm_90`` (its SASS arch)."""
    data, name = read_source(source, "", 0)
    if not is_device_elf(data):
        raise UsageError("not a bare code object: name the target (a package may hold several)", where=name)
    idx = index_code_object(data, name)
    return load_backend(idx.descriptor).target_of(idx)


def read_source(source: Source, name: str, count: int) -> tuple[bytes | bytearray | memoryview, str]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return source, name or f"<bytes #{count}>"
    path = Path(source)
    return path.read_bytes(), name or str(source)

