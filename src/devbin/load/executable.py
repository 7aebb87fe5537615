"""The executable: code objects loaded for one target, resolved against each other at ``freeze()``.

Loading one code object is two steps, kept apart so that a lazy loader can run the second
one later and per code object:

1. **index** (at ``load_*``): parse the ELF, check vendor, kind and target, record its
   pieces, definitions, references and relocations (:mod:`devbin.load.indexing`), and check
   its exported symbols against those already loaded (duplicates).  No device memory.
2. **place, map, relocate** (at ``freeze()``, for every code object, in load order):
   :meth:`Executable._place` reserves the code object's span in the backend's address
   space (page- and segment-aligned, one code object after another);
   :meth:`Executable._materialize` maps its pieces there and applies its relocations
   (AMDGPU: :mod:`devbin.targets.amdgpu.load_relocs`; NVIDIA: symbols resolved and recorded for
   the driver, SASS is not patched).  Placement of *every* code object happens before any
   relocation, so a reference always resolves to the address its target will have.

Every public mutation is a transaction: on any error the executable (its code objects,
symbol table, and the backend's memory) is as it was before the call.

The class is split by responsibility: the shared state and steps (:mod:`devbin.load.state`),
what it holds (:mod:`devbin.load.loaded`), symbol queries (:mod:`devbin.load.symbol_table`),
the lazy side (:mod:`devbin.load.lazy_loader`); this module loads, checks targets and
duplicates, freezes, and reads device memory.
"""

from __future__ import annotations

import time
from typing import Any

from devbin.errors import UsageError
from devbin.load.backend import load_backend
from devbin.load.indexed import IndexedCodeObject
from devbin.load.indexing import index_code_object
from devbin.load.lazy_loader import LazyLoading
from devbin.load.loaded import (
    DuplicateSymbolError,
    LoadedCodeObject,
    ResolvedNvReloc,
    Source,
    Unresolved,
    UnresolvedSymbolsError,
    code_object_target,
    is_device_elf,
    read_source,
)
from devbin.load.symbol_table import SymbolQueries
from devbin.load.symbols import LoadedSymbol
from devbin.packaging.selection import select
from devbin.superarchive import SuperArchive
from devbin.superarchive import open as open_superarchive
from devbin.targets.registry import vendor_of_device

__all__ = ["DuplicateSymbolError", "Executable", "LoadedCodeObject", "ResolvedNvReloc", "Unresolved",
           "UnresolvedSymbolsError", "code_object_target", "is_device_elf"]


class Executable(SymbolQueries, LazyLoading):
    """An executable for one device target, HSA-style (see :mod:`devbin.load`).

    ``target``: ``gfx90a``, ``gfx90a:xnack+``, ``gfx942:sramecc+:xnack-`` or ``sm_90``, as
    :func:`devbin.select` names devices.  ``backend``: the device memory
    (:class:`~devbin.load.simulated.SimulatedDevice` by default).

    ``lazy=True``: ``freeze()`` resolves and places every code object (addresses equal eager
    loading) but maps nothing; the first :meth:`symbol` lookup of a kernel maps exactly the
    functions and data of its call-graph closure (:mod:`devbin.load.lazy`), once, under a lock
    (concurrent lookups are safe).  :meth:`stats` counts what is loaded and the time it took.
    """

    # -- loading --------------------------------------------------------------------------
    def load_code_object(self, source: Source, *, name: str = "") -> LoadedCodeObject:
        """Load one code object (a path or its bytes): HSA's ``hsa_executable_load_agent_code_object``."""
        self._check_open()
        data, name = read_source(source, name, len(self._objects))
        with self._transaction():
            return self._add(self._index(data, name))

    def load(self, source: Source, *, name: str = "") -> tuple[LoadedCodeObject, ...]:
        """Load a bare code object (AMDGPU or cubin) as is, anything else as a package (:meth:`load_package`)."""
        self._check_open()
        data, name = read_source(source, name, len(self._objects))
        if is_device_elf(data):
            return (self.load_code_object(data, name=name),)
        return self.load_package(data, name=name)

    def load_package(self, source: Source, *, name: str = "") -> tuple[LoadedCodeObject, ...]:
        """Load the image(s) :func:`devbin.select` chooses for this target from a package
        (fatbin, offload bundle, OffloadBinary, host binary embedding them, folder): one per module."""
        self._check_open()
        sel = select(source, self.device, name=name)  # NoImageError names what the package holds
        with self._transaction():
            out = []
            for choice in sel.choices:
                if choice.jit:
                    raise UsageError(f"{choice.name}: the selected image is {choice.kind} ({choice.arch}), which "
                                     "the driver JIT-compiles; the simulated backend loads only machine code",
                                     where=sel.source)
                out.append(self._add(self._index(bytes(choice.image.data()), choice.name)))
            return tuple(out)

    def load_superarchive_member(self, archive: SuperArchive | Source, member: int | str, *,
                                 archive_target: str | None = None, name: str = "") -> LoadedCodeObject:
        """Load one member of a super-archive: by ordinal, or by member name through the target's
        fallback chain (``archive_target``, default: the archive target named like this device)."""
        self._check_open()
        if not isinstance(archive, SuperArchive):
            data, where = read_source(archive, "<super-archive>", 0)
            archive = open_superarchive(data, where=where)
        if isinstance(member, int):
            ordinal, member_name = member, archive.record(member).name
        else:
            ordinal, member_name = self._member_ordinal(archive, member, archive_target), member
        data = archive.member_data(ordinal)
        label = name or f"{archive.where or '<super-archive>'}({member_name})"
        with self._transaction():
            return self._add(self._index(data, label))

    def _member_ordinal(self, archive: SuperArchive, member: str, archive_target: str | None) -> int:
        targets = archive.targets()
        tgt = archive_target
        if tgt is None:
            for cand in (self.device.name, str(self.device.target) if self.device.target else "",
                         self.device.target.processor if self.device.target else ""):
                if cand and cand in targets:
                    tgt = cand
                    break
        if tgt is None or tgt not in targets:
            raise UsageError(f"super-archive has no target {tgt or self.device.name!r} (it has "
                             f"{', '.join(targets)}); pass archive_target=", where=archive.where)
        for level in archive.chain(tgt):
            for tm in archive.members(level):
                if tm.name == member:
                    return tm.ordinal
        raise UsageError(f"no member {member!r} in target {tgt} or its fallback chain "
                         f"{' -> '.join(archive.chain(tgt))}", where=archive.where)

    def _index(self, data: bytes | bytearray | memoryview, name: str) -> IndexedCodeObject:
        t0 = time.perf_counter()
        try:
            return index_code_object(data, name)
        finally:
            self._times["index_s"] += time.perf_counter() - t0

    def _add(self, idx: IndexedCodeObject) -> LoadedCodeObject:
        """Check target and duplicates, then add: nothing changes unless every check passes."""
        if any(o.name == idx.name for o in self._objects):
            raise UsageError(f"a code object named {idx.name!r} is already loaded; pass name=", fmt="load")
        note = self._check_target(idx)
        exports, weak = idx.exported, idx.exported.weak
        dups = []
        for name in exports:
            have = self._exports.get(name)
            if have is not None and name not in weak and name not in have.index.exported.weak:
                dups.append((name, have.name))
        if dups:
            raise DuplicateSymbolError(idx.name, tuple(dups))
        obj = LoadedCodeObject(idx, note)
        for name in exports:
            have = self._exports.get(name)
            if have is None or (name in have.index.exported.weak and name not in weak):
                self._exports[name] = obj
        self._objects.append(obj)
        return obj

    def _check_target(self, idx: IndexedCodeObject) -> str:
        """Whether the device loads ``idx``: the same vendor, then the vendor's rule
        (:meth:`devbin.load.backend.LoadBackend.check_target`); the reason, or UsageError."""
        dev = self.device
        if dev.vendor != idx.vendor:
            raise UsageError(f"incompatible target: an {idx.descriptor.device_title} code object ({idx.arch}) cannot "
                             f"be loaded into an executable for {dev.name} ({vendor_of_device(dev).device_title})",
                             fmt="load", where=idx.name)
        return load_backend(idx.descriptor).check_target(idx, dev, self._pins)

    # -- freezing -------------------------------------------------------------------------
    def unresolved(self) -> tuple[Unresolved, ...]:
        """Every non-weak undefined reference that no loaded code object exports."""
        out = []
        for obj in self._objects:
            for ref_name, optional in obj.index.undefined:
                if not optional and ref_name not in self._exports:
                    sites = next((r.sites for r in obj.index.references if r.name == ref_name), ())
                    out.append(Unresolved(ref_name, obj.name, sites))
        return tuple(out)

    def freeze(self) -> None:
        """Resolve every reference, place, map and relocate every code object, build the symbol table
        (HSA's ``hsa_executable_freeze``).  UnresolvedSymbolsError lists what is missing and who needs it."""
        if self._frozen:
            raise UsageError("the executable is already frozen", fmt="load")
        missing = self.unresolved()
        if missing:
            raise UnresolvedSymbolsError(missing)
        t0 = time.perf_counter()
        with self._lock, self._transaction():
            for obj in self._objects:
                self._place(obj)
            if self.lazy:
                for obj in self._objects:  # .dynsym only: .symtab is indexed when the code object is used
                    for export in obj.index.exported:
                        self._exporters.setdefault(export, []).append(obj)
            else:
                for obj in self._objects:
                    self._materialize(obj)
                self._symbols = self._build_symbols()
                self._all_symbols = True
            self._frozen = True
        self._times["freeze_s"] += time.perf_counter() - t0

    def symbol(self, name: str, *, code_object: str | None = None) -> LoadedSymbol:
        """The symbol ``name`` (HSA's ``hsa_executable_get_symbol_by_name``).

        A kernel is found by its name or its descriptor's (``k.kd``).  An exported symbol wins over
        module-local ones of the same name; between locals, give ``code_object``.
        """
        self._check_frozen()
        with self._lock:
            found = self._lookup(name, code_object)
            if self.lazy:
                self._load_for(found)
            return found

    # -- device memory --------------------------------------------------------------------
    def read(self, address: int, size: int) -> bytes:
        return self.backend.read(address, size)

    def u32(self, address: int) -> int:
        return self.backend.u32(address)

    def u64(self, address: int) -> int:
        return self.backend.u64(address)

    def stats(self) -> dict[str, Any]:
        """What is loaded: code objects by state, bytes mapped, relocations applied, time spent."""
        states: dict[str, int] = {}
        for o in self._objects:
            states[o.state] = states.get(o.state, 0) + 1
        out: dict[str, Any] = {
            "code_objects": len(self._objects), "states": states, "bytes_mapped": self.backend.bytes_mapped,
            "relocations_applied": sum(len(o.relocations) + len(o.nv_relocations) for o in self._objects),
            "symbols": len(self._symbols), "lazy": self.lazy}
        if self.lazy:
            total_f = total_d = 0
            for o in self._objects:
                plan = self._plans.get(id(o))
                if plan is not None:
                    total_f += len(plan.functions)
                    total_d += len(plan.data)
                else:
                    total_f += sum(1 for d in o.index.definitions if d.is_function)
                    total_d += sum(1 for d in o.index.definitions if not d.is_function and d.size
                                   and not d.name.endswith(".kd"))
            out.update({
                "functions_loaded": sum(len(o.loaded_functions) for o in self._objects), "functions_total": total_f,
                "data_loaded": sum(len(o.loaded_data) for o in self._objects), "data_total": total_d,
                "bytes_total": sum(p.mem_size for o in self._objects for p in o.index.pieces),
                "lazy_loads": self._lazy_loads,
                "graph_sources": {o.name: o.graph_source for o in self._objects if o.graph_source}})
        out.update({k: round(v, 6) for k, v in self._times.items()})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.device.to_dict(), "backend": self.backend.name, "frozen": self._frozen,
                "code_objects": [o.to_dict() for o in self._objects],
                "symbols": [s.to_dict() for s in (self.symbols() if self._frozen else ())],
                "stats": self.stats()}
