"""The executable: code objects loaded for one target, resolved against each other at ``freeze()``.

Loading one code object is two steps, kept apart so that a lazy loader can run the second
one later and per code object:

1. **index** (at ``load_*``): parse the ELF, check vendor, kind and target, record its
   pieces, definitions, references and relocations (:mod:`devbin.load.image`), and check
   its exported symbols against those already loaded (duplicates).  No device memory.
2. **place, map, relocate** (at ``freeze()``, for every code object, in load order):
   :meth:`Executable._place` reserves the code object's span in the backend's address
   space (page- and segment-aligned, one code object after another);
   :meth:`Executable._materialize` maps its pieces there and applies its relocations
   (AMDGPU: :mod:`devbin.load.amdgpu_relocs`; NVIDIA: symbols resolved and recorded for
   the driver, SASS is not patched).  Placement of *every* code object happens before any
   relocation, so a reference always resolves to the address its target will have.

Every public mutation is a transaction: on any error the executable (its code objects,
symbol table, and the backend's memory) is as it was before the call.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devbin.errors import FormatError, UsageError
from devbin.formats.elf import constants as C
from devbin.load.amdgpu_relocs import AppliedReloc, apply_relocations, plan_relocations
from devbin.load.image import IndexedCodeObject, ObjDefinition, index_code_object
from devbin.load.lazy import ObjectPlan, Unit, merge_ranges, plan_object, subtract_ranges
from devbin.load.simulated import SimulatedDevice
from devbin.load.symbols import LoadedSymbol, SymbolKind
from devbin.model import UNKNOWN_PROTOTYPE, Function, FunctionKind, Prototype
from devbin.packaging.selection import Device, parse_device

if TYPE_CHECKING:
    from devbin.superarchive import SuperArchive

__all__ = ["DuplicateSymbolError", "Executable", "LoadedCodeObject", "ResolvedNvReloc", "Unresolved",
           "UnresolvedSymbolsError", "code_object_target", "is_device_elf"]

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


def _symbol(obj: LoadedCodeObject, d: ObjDefinition, kind: SymbolKind, address: int, *,
            code_address: int | None = None, descriptor: str = "", function: Function | None = None) -> LoadedSymbol:
    return LoadedSymbol(d.name, kind, address, d.size, obj.name, "program" if d.exported else "module",
                        d.section, d.st_value, d.binding, d.visibility, code_address, descriptor, function)


def is_device_elf(data: bytes | bytearray | memoryview) -> bool:
    """True for the bytes of a bare AMDGPU code object or cubin (ELF magic and e_machine only)."""
    head = bytes(data[:20])
    return len(head) == 20 and head[:4] == b"\x7fELF" and head[5] == 1 and \
        int.from_bytes(head[18:20], "little") in (C.EM_AMDGPU, C.EM_CUDA)


def code_object_target(source: Source) -> str:
    """The device target a bare code object names: ``gfx90a:xnack+`` (its e_flags), ``sm_90`` (its SASS arch)."""
    data, name = _read(source, "", 0)
    if not is_device_elf(data):
        raise UsageError("not a bare code object: name the target (a package may hold several)", where=name)
    idx = index_code_object(data, name)
    if idx.vendor == "nvidia":
        return idx.arch.rstrip("af")
    return idx.arch


def _read(source: Source, name: str, count: int) -> tuple[bytes | bytearray | memoryview, str]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return source, name or f"<bytes #{count}>"
    path = Path(source)
    return path.read_bytes(), name or str(source)


class Executable:
    """An executable for one device target, HSA-style (see :mod:`devbin.load`).

    ``target``: ``gfx90a``, ``gfx90a:xnack+``, ``gfx942:sramecc+:xnack-`` or ``sm_90``, as
    :func:`devbin.select` names devices.  ``backend``: the device memory
    (:class:`~devbin.load.simulated.SimulatedDevice` by default).

    ``lazy=True``: ``freeze()`` resolves and places every code object (addresses equal eager
    loading) but maps nothing; the first :meth:`symbol` lookup of a kernel maps exactly the
    functions and data of its call-graph closure (:mod:`devbin.load.lazy`), once, under a lock
    (concurrent lookups are safe).  :meth:`stats` counts what is loaded and the time it took.
    """

    def __init__(self, target: str | Device, *, backend: SimulatedDevice | None = None, lazy: bool = False) -> None:
        self.device: Device = parse_device(target) if isinstance(target, str) else target
        self.backend = backend if backend is not None else SimulatedDevice()
        self._objects: list[LoadedCodeObject] = []
        self._exports: dict[str, LoadedCodeObject] = {}  # exported name -> the code object whose definition binds
        self._pins: dict[str, tuple[str, str]] = {}  # feature -> (state, code object) for conditional loads
        self._frozen = False
        self._symbols: tuple[LoadedSymbol, ...] = ()
        self._times = {"index_s": 0.0, "freeze_s": 0.0, "lazy_load_s": 0.0}
        self.lazy = lazy
        self._lock = threading.RLock()
        self._all_symbols = False  # lazy: the whole table built (symbols())
        self._obj_symbols: dict[int, list[LoadedSymbol]] = {}  # lazy: per code object, by id
        self._some_symbols: dict[tuple[int, frozenset[str]], list[LoadedSymbol]] = {}  # lazy: looked-up names
        self._defined_in: dict[str, list[LoadedCodeObject]] | None = None  # lazy: built on a lookup that needs it
        self._exporters: dict[str, list[LoadedCodeObject]] = {}  # lazy: the code objects exporting a name
        self._plans: dict[int, ObjectPlan] = {}
        self._planned: dict[int, list[AppliedReloc]] = {}
        self._taken: set[int] | None = None
        self._sites: list[Prototype] = []  # indirect call sites of everything loaded (lazy)
        self._pointers: dict[tuple[int, str], tuple[LoadedCodeObject, str]] = {}  # functions whose address is loaded
        self._mapped: dict[int, list[tuple[int, int]]] = {}  # lazy: object offsets mapped, per code object
        self._lazy_loads = 0

    # -- facts ----------------------------------------------------------------------------
    @property
    def target(self) -> str:
        return self.device.name

    @property
    def frozen(self) -> bool:
        return self._frozen

    @property
    def code_objects(self) -> tuple[LoadedCodeObject, ...]:
        return tuple(self._objects)

    # -- loading --------------------------------------------------------------------------
    def load_code_object(self, source: Source, *, name: str = "") -> LoadedCodeObject:
        """Load one code object (a path or its bytes): HSA's ``hsa_executable_load_agent_code_object``."""
        self._check_open()
        data, name = _read(source, name, len(self._objects))
        with self._transaction():
            return self._add(self._index(data, name))

    def load(self, source: Source, *, name: str = "") -> tuple[LoadedCodeObject, ...]:
        """Load a bare code object (AMDGPU or cubin) as is, anything else as a package (:meth:`load_package`)."""
        self._check_open()
        data, name = _read(source, name, len(self._objects))
        if is_device_elf(data):
            return (self.load_code_object(data, name=name),)
        return self.load_package(data, name=name)

    def load_package(self, source: Source, *, name: str = "") -> tuple[LoadedCodeObject, ...]:
        """Load the image(s) :func:`devbin.select` chooses for this target from a package
        (fatbin, offload bundle, OffloadBinary, host binary embedding them, folder): one per module."""
        from devbin.packaging.selection import select

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
        import devbin.superarchive as sa

        self._check_open()
        if not isinstance(archive, sa.SuperArchive):
            data, where = _read(archive, "<super-archive>", 0)
            archive = sa.open(data, where=where)
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

    def _check_open(self) -> None:
        if self._frozen:
            raise UsageError("the executable is frozen: no code object can be loaded after freeze() "
                             "(HSA_STATUS_ERROR_FROZEN_EXECUTABLE)", fmt="load")

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
        dev = self.device
        vendor_word = {"amdgpu": "AMDGPU", "nvidia": "NVIDIA"}
        if dev.vendor != idx.vendor:
            raise UsageError(f"incompatible target: an {vendor_word[idx.vendor]} code object ({idx.arch}) cannot "
                             f"be loaded into an executable for {dev.name} ({vendor_word[dev.vendor]})", fmt="load",
                             where=idx.name)
        if idx.vendor == "nvidia":
            from devbin.targets.nvidia.archs import parse_arch, runs_on

            assert dev.cc is not None
            ok, why = runs_on(parse_arch(idx.arch), dev.cc)
            if not ok:
                raise UsageError(f"incompatible target: {why}", fmt="load", where=idx.name)
            return why
        from devbin.targets.amdgpu.matching import match
        from devbin.targets.amdgpu.targetid import parse_target_id

        assert dev.target is not None
        m = match(parse_target_id(idx.arch), dev.target, generic_version=idx.generic_version)
        if not m.ok:
            raise UsageError(f"incompatible target: {m.reason}", fmt="load", where=idx.name)
        for c in m.conditional:
            feature, state = c[:-1], c[-1]
            prior = self._pins.get(feature)
            if prior is not None and prior[0] != state:
                raise UsageError(f"incompatible target: needs {c}, but {prior[1]} needs {feature}{prior[0]}; "
                                 "one device runs with one setting", fmt="load", where=idx.name)
        for c in m.conditional:
            self._pins.setdefault(c[:-1], (c[-1], idx.name))
        return m.reason

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

    def _place(self, obj: LoadedCodeObject) -> None:
        """Reserve the code object's address range (hook for lazy loading: cheap, no bytes copied)."""
        obj.base = self.backend.reserve(obj.index.span, obj.index.align)
        obj.state = "placed"

    def _materialize(self, obj: LoadedCodeObject) -> None:
        """Map the code object's pieces and apply its relocations (hook for lazy loading)."""
        base = obj.address(0)
        for p in obj.index.pieces:
            self.backend.map(base + p.offset, p.data, p.mem_size, label=f"{obj.name} {p.label}")
        if obj.vendor == "amdgpu":
            obj.relocations = apply_relocations(obj.index, base, self.backend, self._resolve)
        else:
            obj.nv_relocations = self._resolve_nv(obj)
        obj.state = "mapped"

    def _resolve_nv(self, obj: LoadedCodeObject) -> list[ResolvedNvReloc]:
        base = obj.address(0)
        out = []
        own = {d.name: d for d in obj.index.definitions}
        for r in obj.index.nv_relocations:
            d = own.get(r.symbol)
            hit = (base + d.offset, obj.name) if d is not None else self._resolve(r.symbol)
            out.append(ResolvedNvReloc(r.section, r.offset, r.type_name, r.symbol, r.addend,
                                       hit[0] if hit else None, hit[1] if hit else None))
        return out

    def _resolve(self, name: str) -> tuple[int, str] | None:
        obj = self._exports.get(name)
        if obj is None:
            return None
        return obj.address(obj.index.exported[name].offset), obj.name

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        saved = (list(self._objects), dict(self._exports), dict(self._pins), self.backend.mark(),
                 [(o, o.base, o.state, o.relocations, o.nv_relocations) for o in self._objects])
        try:
            yield
        except BaseException:
            self._objects, self._exports, self._pins = saved[0], saved[1], saved[2]
            self.backend.release(saved[3])
            for o, base, state, rel, nv in saved[4]:
                o.base, o.state, o.relocations, o.nv_relocations = base, state, rel, nv
            raise

    # -- symbols --------------------------------------------------------------------------
    def _taken_addresses(self) -> set[int]:
        """Addresses stored in data by any code object: functions there are address-taken.

        GOT slots are left out: a call to a preemptible function also goes through the GOT.
        A lazy executable computes the relocations it has not applied yet (the same values).
        """
        if self._taken is not None:
            return self._taken
        out: set[int] = set()
        for obj in self._objects:
            relocs = self._planned_relocs(obj) if self.lazy and obj.vendor == "amdgpu" else obj.relocations
            for r in relocs:
                if r.width == 8 and not r.site.startswith(".got"):
                    out.add(r.value)
            nv = self._resolve_nv(obj) if self.lazy and obj.vendor == "nvidia" else obj.nv_relocations
            for n in nv:
                if n.address is not None and not n.section.startswith(".text"):
                    out.add(n.address + n.addend)
        self._taken = out
        return out

    def _planned_relocs(self, obj: LoadedCodeObject) -> list[AppliedReloc]:
        have = self._planned.get(id(obj))
        if have is None:
            have = self._planned[id(obj)] = plan_relocations(obj.index, obj.address(0), self._resolve)
        return have

    def _build_symbols(self) -> tuple[LoadedSymbol, ...]:
        out: list[LoadedSymbol] = []
        for obj in self._objects:
            out += self._object_symbols(obj)
        return tuple(out)

    def _object_symbols(self, obj: LoadedCodeObject, names: frozenset[str] | None = None) -> list[LoadedSymbol]:
        """The symbols of ``obj`` (only those named ``names``: their model records alone are imported)."""
        idx = obj.index
        wanted = [d for d in idx.definitions if names is None or d.name in names]
        if names is None:
            funcs = {f.name: f for f in idx.model.functions}
        else:
            funcs = idx.functions_of(frozenset(d.name for d in wanted if d.is_function))
        defs = {d.name: d for d in idx.definitions}
        if obj.vendor == "amdgpu":
            kernels = {d.name for d in wanted if d.is_function and f"{d.name}.kd" in defs}
        else:
            kernels = {f.name for f in funcs.values() if f.kind == FunctionKind.KERNEL}
        model_taken = {f.name for f in funcs.values() if f.kind == FunctionKind.INDIRECT_TARGET}
        out = []
        for d in wanted:
            if obj.vendor == "amdgpu" and d.name.endswith(".kd") and d.name[:-3] in defs \
                    and defs[d.name[:-3]].is_function:
                continue  # folded into its kernel
            addr = obj.address(d.offset)
            if not d.is_function:
                out.append(_symbol(obj, d, SymbolKind.VARIABLE, addr))
                continue
            fn = funcs.get(d.name)
            if d.name in kernels:
                kd_name, kd_addr, entry = "", addr, addr
                if obj.vendor == "amdgpu":
                    kd = defs[f"{d.name}.kd"]
                    kd_name, kd_addr = kd.name, obj.address(kd.offset)
                    entry = kd_addr + int.from_bytes(idx.file_bytes(kd.offset + 16, 8), "little", signed=True)
                    if entry != addr:
                        idx.warnings.append(FormatError(
                            f"kernel {d.name!r}: descriptor entry {entry:#x} is not the kernel symbol {addr:#x}",
                            fmt="amdgpu", where=obj.name))
                out.append(_symbol(obj, d, SymbolKind.KERNEL, kd_addr, code_address=entry, descriptor=kd_name,
                                   function=fn))
                continue
            # (every code object's relocations are planned for ``taken``: only a device function needs it)
            kind = SymbolKind.INDIRECT_FUNCTION if (d.name in model_taken or addr in self._taken_addresses()) \
                else SymbolKind.DEVICE_FUNCTION
            out.append(_symbol(obj, d, kind, addr, code_address=addr, function=fn))
        return out

    def _check_frozen(self) -> None:
        if not self._frozen:
            raise UsageError("the executable is not frozen: call freeze() before looking up symbols", fmt="load")

    def symbols(self, kind: SymbolKind | None = None) -> tuple[LoadedSymbol, ...]:
        """Every symbol (HSA's ``hsa_executable_iterate_agent_symbols``), in load then symbol-table order.

        A lazy executable lists every symbol with its address without loading anything."""
        self._check_frozen()
        with self._lock:
            if not self._all_symbols:
                out: list[LoadedSymbol] = []
                for obj in self._objects:
                    out += self._symbols_of(obj)
                self._symbols = tuple(out)
                self._all_symbols = True
        return self._symbols if kind is None else tuple(s for s in self._symbols if s.kind == kind)

    def _symbols_of(self, obj: LoadedCodeObject) -> list[LoadedSymbol]:
        have = self._obj_symbols.get(id(obj))
        if have is None:
            have = self._obj_symbols[id(obj)] = self._object_symbols(obj)
        return have

    def _definers(self) -> dict[str, list[LoadedCodeObject]]:
        """Lazy: every defined name -> the code objects defining it (reads every code object's .symtab)."""
        if self._defined_in is None:
            defined_in: dict[str, list[LoadedCodeObject]] = {}
            for obj in self._objects:
                for d in obj.index.definitions:
                    have = defined_in.setdefault(d.name, [])
                    if obj not in have:
                        have.append(obj)
            self._defined_in = defined_in
        return self._defined_in

    def _named_symbols(self, obj: LoadedCodeObject, names: frozenset[str]) -> list[LoadedSymbol]:
        """Lazy: the symbols of ``obj`` named ``names``, built (and their model records imported) alone."""
        have = self._obj_symbols.get(id(obj))
        if have is not None:
            return [s for s in have if s.name in names]
        key = (id(obj), names)
        out = self._some_symbols.get(key)
        if out is None:
            out = self._some_symbols[key] = self._object_symbols(obj, names)
        return out

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

    def _lookup(self, name: str, code_object: str | None) -> LoadedSymbol:
        if self._all_symbols:
            pool: tuple[LoadedSymbol, ...] | list[LoadedSymbol] = self._symbols
        else:
            names = frozenset({name, name[:-3]} if name.endswith(".kd") else {name})
            # Only a code object exporting ``name`` (or the kernel of descriptor ``name``) can hold a
            # "program" symbol of that name; when exactly one such symbol is there, it is the answer
            # whatever other code objects define locally, and their .symtab need not be read.
            objs = {id(o) for n in names for o in self._exporters.get(n, ())}
            pool = [s for o in self._objects if id(o) in objs for s in self._named_symbols(o, names)]
            program = [s for s in pool if (s.name == name or (s.descriptor and s.descriptor == name))
                       and (code_object is None or s.code_object == code_object) and s.linkage == "program"]
            if len(program) != 1:
                defined_in = self._definers()
                objs = {id(o) for n in names for o in defined_in.get(n, ())}
                pool = [s for o in self._objects if id(o) in objs for s in self._named_symbols(o, names)]
        hits = [s for s in pool if (s.name == name or (s.descriptor and s.descriptor == name))
                and (code_object is None or s.code_object == code_object)]
        if not hits:
            raise UsageError(f"no symbol {name!r} in the executable"
                             + (f" from {code_object}" if code_object else ""), fmt="load")
        program = [s for s in hits if s.linkage == "program"]
        if len(program) == 1:
            return program[0]
        if len(hits) == 1:
            return hits[0]
        raise UsageError(f"{name!r} is local to several code objects ({', '.join(s.code_object for s in hits)}); "
                         "pass code_object=", fmt="load")

    # -- lazy loading ---------------------------------------------------------------------
    def _plan(self, obj: LoadedCodeObject) -> ObjectPlan:
        plan = self._plans.get(id(obj))
        if plan is None:
            plan = self._plans[id(obj)] = plan_object(obj.index)
            obj.graph_source = plan.source
        return plan

    def _load_for(self, sym: LoadedSymbol) -> None:
        """Map what ``sym`` needs (its call-graph closure), once; a transaction like every public call."""
        obj = next(o for o in self._objects if o.name == sym.code_object)
        plan = self._plan(obj)
        unit = plan.functions.get(sym.name) if sym.is_function else plan.data.get(sym.name)
        if plan.source != "whole" and (unit is None or unit.loaded):
            return
        if plan.source == "whole" and obj.state == "mapped":
            return
        t0 = time.perf_counter()
        n_sites, pointers = len(self._sites), dict(self._pointers)
        saved = [(o, o.state, list(o.relocations), list(o.nv_relocations), set(o.loaded_functions),
                  set(o.loaded_data), list(self._mapped.get(id(o), []))) for o in self._objects]
        mark = self.backend.mark()
        marked: list[tuple[LoadedCodeObject, Unit]] = []
        try:
            self._closure(obj, "function" if sym.is_function else "data", sym.name, marked)
            self._lazy_loads += 1
        except BaseException:
            for _o, u in marked:
                u.loaded = False
            del self._sites[n_sites:]
            self._pointers = pointers
            self.backend.release(mark)
            for o, state, rel, nv, lf, ld, mapped in saved:
                o.state, o.relocations, o.nv_relocations, o.loaded_functions, o.loaded_data = state, rel, nv, lf, ld
                self._mapped[id(o)] = mapped
            raise
        finally:
            self._times["lazy_load_s"] += time.perf_counter() - t0

    def _target(self, obj: LoadedCodeObject, name: str) -> tuple[LoadedCodeObject, str] | None:
        """The code object defining ``name`` as ``obj`` sees it: its own definition first, then the exports."""
        plan = self._plan(obj)
        if name in plan.functions or name in plan.data or name.startswith("section:"):
            return obj, name
        hit = self._exports.get(name)
        return (hit, name) if hit is not None else None

    def _closure(self, start: LoadedCodeObject, kind: str, name: str,
                 marked: list[tuple[LoadedCodeObject, Unit]]) -> None:
        todo: list[tuple[str, LoadedCodeObject, str]] = [(kind, start, name)]
        whole: list[LoadedCodeObject] = []
        all_data: set[int] = set()

        def take(obj: LoadedCodeObject, u: Unit) -> bool:
            if u.loaded:
                return False
            u.loaded = True
            marked.append((obj, u))
            return True

        def use(obj: LoadedCodeObject, what: str, name: str) -> None:
            """``obj``'s code or data uses ``name``: its slots holding it, and the definition itself."""
            plan = self._plan(obj)
            for u in plan.slots.get(name, ()):
                if take(obj, u):
                    todo.append(("slot", obj, name))
            hit = self._target(obj, name)
            if hit is None:
                return
            o2, n2 = hit
            if n2.startswith("section:"):
                todo.append(("section", o2, n2[8:]))
            elif n2 in self._plan(o2).functions:
                if what == "pointer":
                    self._pointers.setdefault((id(o2), n2), (o2, n2))
                else:
                    todo.append(("function", o2, n2))
            else:
                todo.append(("data", o2, n2))

        def holds(obj: LoadedCodeObject, plan: ObjectPlan, key: str) -> None:
            """Loaded data ``key`` (a variable, or ``section:<name>``): what it points at."""
            for ref in sorted(plan.uses(key)):
                use(obj, "pointer", ref)
            for fn in sorted(plan.takes.get(key, ())):
                self._pointers.setdefault((id(obj), fn), (obj, fn))

        while True:
            while todo:
                kind, obj, name = todo.pop()
                plan = self._plan(obj)
                if plan.source == "whole":
                    if obj.state != "mapped" and obj not in whole:
                        whole.append(obj)
                        for whole_unit in plan.all_units():
                            take(obj, whole_unit)
                        obj.loaded_functions.update(plan.functions)
                        obj.loaded_data.update(plan.data)
                        self._sites.append(UNKNOWN_PROTOTYPE)
                        for reference in obj.index.references:
                            use(obj, "call", reference.name)
                    continue
                if kind == "function":
                    fu = plan.functions.get(name)
                    if fu is None or not take(obj, fu):
                        continue
                    obj.loaded_functions.add(name)
                    reach = plan.reaches.get(name)
                    for callee in sorted(reach if reach is not None else plan.callees(name)):
                        if callee != name:
                            use(obj, "call", callee)
                    for ref in sorted(plan.uses(name)):
                        use(obj, "ref", ref)
                    self._sites.extend(plan.indirect.get(name, ()))
                    if not plan.precise_data and id(obj) not in all_data:
                        all_data.add(id(obj))
                        for n in sorted(plan.data):
                            todo.append(("data", obj, n))
                        for n in sorted(plan.sections):
                            todo.append(("section", obj, n))
                        for slot in plan.other:
                            if slot.kind == "slot" and take(obj, slot):
                                use(obj, "ref", slot.name)
                elif kind == "data":
                    du = plan.data.get(name)
                    if du is None or not take(obj, du):
                        continue
                    obj.loaded_data.add(name)
                    holds(obj, plan, name)
                elif kind == "section":
                    su = plan.sections.get(name)
                    if su is not None and take(obj, su):
                        holds(obj, plan, f"section:{name}")
            # address-taken functions a loaded indirect call site could reach (Prototype.matches)
            for key, (o2, fn) in list(self._pointers.items()):
                proto = self._plan(o2).taken_proto.get(fn, UNKNOWN_PROTOTYPE)
                if not self._plan(o2).functions[fn].loaded and any(p.matches(proto) for p in self._sites):
                    todo.append(("function", o2, fn))
                    del self._pointers[key]
            if not todo:
                break
        for obj in whole:
            self._materialize(obj)
        order = {id(o): i for i, o in enumerate(self._objects)}
        by_obj: dict[int, list[Unit]] = {}
        for owner, u in marked:
            if owner not in whole:
                by_obj.setdefault(id(owner), []).append(u)
        for oid in sorted(by_obj, key=lambda k: order[k]):
            self._map_units(self._objects[order[oid]], by_obj[oid])

    def _map_units(self, obj: LoadedCodeObject, units: list[Unit]) -> None:
        """Map the ranges of ``units`` not mapped yet (coalesced within each piece), then apply their
        relocations."""
        base = obj.address(0)
        have = self._mapped.setdefault(id(obj), [])
        new = subtract_ranges(merge_ranges((lo, lo + sz) for u in units for lo, sz in u.ranges if sz > 0), have)
        for lo, hi in new:
            covered = 0
            for p in obj.index.pieces:  # a range may run over adjacent pieces (cubin sections): one region each
                a, b = max(lo, p.offset), min(hi, p.offset + p.mem_size)
                if a < b:
                    self.backend.map(base + a, obj.index.file_part(p, a, b - a), b - a,
                                     label=f"{obj.name} {p.label}+{a - p.offset:#x}")
                    covered += b - a
            if covered != hi - lo:
                raise FormatError(f"{lo:#x}..{hi:#x} is not inside the mapped pieces", fmt=obj.vendor,
                                  where=obj.name)
        have[:] = merge_ranges([*have, *new])
        if obj.vendor == "amdgpu":
            planned = self._planned_relocs(obj)
            for i in sorted({i for u in units for i in u.relocs}):
                r = planned[i]
                self.backend.write_uint(r.address, r.value, r.width)
                obj.relocations.append(r)
        else:
            resolved = self._resolve_nv(obj)
            obj.nv_relocations.extend(resolved[i] for i in sorted({i for u in units for i in u.relocs}))
        plan = self._plan(obj)
        obj.state = "mapped" if all(u.loaded for u in plan.all_units()) and all(
            u.loaded for u in plan.sections.values()) else "partial"

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
