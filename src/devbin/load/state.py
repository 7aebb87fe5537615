"""The state every part of an executable shares, and the steps common to eager and lazy loading:
placing a code object, mapping it whole, resolving references against the loaded exports, and
the transaction that undoes a failed public call.

:class:`devbin.load.Executable` is this state with its responsibilities in their own modules:
:mod:`devbin.load.symbol_table` (symbol queries), :mod:`devbin.load.lazy_loader` (the lazy side)
and :mod:`devbin.load.executable` (loading, target checks, freezing, device memory).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from devbin.errors import UsageError
from devbin.load.backend import load_backend
from devbin.load.lazy import MapUnit, ObjectPlan, plan_object
from devbin.load.loaded import LoadedCodeObject, ResolvedNvReloc
from devbin.load.relocation import AppliedReloc
from devbin.load.simulated import SimulatedDevice
from devbin.load.symbols import LoadedSymbol
from devbin.model.reach import Closure
from devbin.packaging.selection import Device, parse_device

__all__ = ["ExecutableState", "WalkKey"]

#: A node of the lazy closure walk: a unit of a code object, or (None) the whole code object.
WalkKey = tuple[LoadedCodeObject, MapUnit | None]


class ExecutableState:
    """The fields of an executable (see :class:`devbin.load.Executable`) and the shared steps."""

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
        self._walk: Closure[WalkKey] = Closure(self._expand)  # lazy: what is loaded, and why
        self._all_data: set[int] = set()  # lazy: code objects whose data one closure run brought whole
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

    def _expand(self, key: WalkKey) -> None:
        """The lazy closure walk's edges from ``key`` (:mod:`devbin.load.lazy_loader`)."""
        raise NotImplementedError

    def _check_open(self) -> None:
        if self._frozen:
            raise UsageError("the executable is frozen: no code object can be loaded after freeze() "
                             "(HSA_STATUS_ERROR_FROZEN_EXECUTABLE)", fmt="load")

    def _check_frozen(self) -> None:
        if not self._frozen:
            raise UsageError("the executable is not frozen: call freeze() before looking up symbols", fmt="load")

    def _place(self, obj: LoadedCodeObject) -> None:
        """Reserve the code object's address range (hook for lazy loading: cheap, no bytes copied)."""
        obj.base = self.backend.reserve(obj.index.span, obj.index.align)
        obj.state = "placed"

    def _materialize(self, obj: LoadedCodeObject) -> None:
        """Map the code object's pieces and apply its relocations (hook for lazy loading)."""
        base = obj.address(0)
        for p in obj.index.pieces:
            self.backend.map(base + p.offset, p.data, p.mem_size, label=f"{obj.name} {p.label}")
        # the loader's relocations (AMDGPU's dynamic ones) applied; those left to the driver (cubins) resolved
        obj.relocations = load_backend(obj.index.descriptor).apply_relocations(obj.index, base, self.backend,
                                                                                self._resolve)
        obj.nv_relocations = self._resolve_nv(obj)
        obj.state = "mapped"

    def _resolve_nv(self, obj: LoadedCodeObject) -> list[ResolvedNvReloc]:
        """The relocations ``obj`` leaves to the driver (a cubin's), each with its symbol's address."""
        if not obj.index.nv_relocations:
            return []
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

    def _planned_relocs(self, obj: LoadedCodeObject) -> list[AppliedReloc]:
        have = self._planned.get(id(obj))
        if have is None:
            have = self._planned[id(obj)] = load_backend(obj.index.descriptor).plan_relocations(
                obj.index, obj.address(0), self._resolve)
        return have

    def _plan(self, obj: LoadedCodeObject) -> ObjectPlan:
        plan = self._plans.get(id(obj))
        if plan is None:
            plan = self._plans[id(obj)] = plan_object(obj.index)
            obj.graph_source = plan.source
        return plan

