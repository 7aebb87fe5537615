"""The lazy side of an executable: the first lookup of a symbol maps its call-graph closure.

The closure is walked by the one walk (:class:`devbin.model.reach.Closure`), kept for the
executable's life, so a later lookup walks only what is new.  Its nodes are the units of
:mod:`devbin.load.lazy` (functions, variables, GOT slots, data sections), or a whole code
object where nothing says who calls whom (``whole``).  Its edges:

* a function: its callees (the ``reaches:<kernel>`` list when the file has it), the variables,
  slots and sections it uses, the prototypes of its indirect call sites; without per-function
  data references (``precise_data`` False), the first function of a code object loaded in one
  lookup brings all of that code object's data;
* a variable or section: what it points at; a function whose address it holds is
  *address-taken*: the walk loads it once a loaded indirect call site matches its prototype
  (:meth:`devbin.model.Prototype.matches`), the rule dead-code elimination uses;
* a name resolves in the code object using it first, then through the executable's exports.

Then what the run reached is mapped (coalesced ranges, per piece) and its relocations applied;
a failure undoes all of it (the walk included).
"""

from __future__ import annotations

import time

from devbin.errors import FormatError
from devbin.load.lazy import MapUnit, ObjectPlan, merge_ranges, subtract_ranges
from devbin.load.loaded import LoadedCodeObject
from devbin.load.state import ExecutableState, WalkKey
from devbin.load.symbols import LoadedSymbol
from devbin.model import UNKNOWN_PROTOTYPE

__all__ = ["LazyLoading"]


class LazyLoading(ExecutableState):
    """The lazy side of :class:`devbin.load.Executable` (see the module docstring)."""

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
        saved = [(o, o.state, list(o.relocations), list(o.nv_relocations), set(o.loaded_functions),
                  set(o.loaded_data), list(self._mapped.get(id(o), []))) for o in self._objects]
        mark = self.backend.mark()
        walk_mark = self._walk.mark()
        try:
            self._closure(obj, unit)
            self._lazy_loads += 1
        except BaseException:
            for o, u in self._walk.order[walk_mark[0]:]:
                for loaded in ([u] if u is not None else self._plan(o).all_units()):
                    loaded.loaded = False
            self._walk.release(walk_mark)
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

    def _reach(self, obj: LoadedCodeObject, unit: MapUnit | None) -> bool:
        """Name ``obj``'s ``unit`` as needed (any unit of a ``whole`` code object: all of it); True if new."""
        if self._plan(obj).source == "whole":
            return obj.state != "mapped" and self._walk.reach((obj, None))
        return unit is not None and self._walk.reach((obj, unit))

    def _key(self, obj: LoadedCodeObject, unit: MapUnit) -> WalkKey:
        return (obj, None) if self._plan(obj).source == "whole" else (obj, unit)

    def _use(self, obj: LoadedCodeObject, what: str, name: str) -> None:
        """``obj``'s code or data uses ``name``: its slots holding it, and the definition itself (``what``
        is ``pointer`` for data holding a function's address: address-taken, not called)."""
        plan = self._plan(obj)
        for slot in plan.slots.get(name, ()):
            self._reach(obj, slot)
        hit = self._target(obj, name)
        if hit is None:
            return
        o2, n2 = hit
        p2 = self._plan(o2)
        if n2.startswith("section:"):
            self._reach(o2, p2.sections.get(n2[8:]))
        elif n2 in p2.functions:
            if what == "pointer":
                self._walk.taken(self._key(o2, p2.functions[n2]), p2.taken_proto.get(n2, UNKNOWN_PROTOTYPE))
            else:
                self._reach(o2, p2.functions[n2])
        else:
            self._reach(o2, p2.data.get(n2))

    def _holds(self, obj: LoadedCodeObject, plan: ObjectPlan, key: str) -> None:
        """Loaded data ``key`` (a variable, or ``section:<name>``): what it points at."""
        for ref in sorted(plan.uses(key)):
            self._use(obj, "pointer", ref)
        for fn in sorted(plan.takes.get(key, ())):
            self._walk.taken(self._key(obj, plan.functions[fn]), plan.taken_proto.get(fn, UNKNOWN_PROTOTYPE))

    def _expand(self, key: WalkKey) -> None:
        obj, unit = key
        plan = self._plan(obj)
        if unit is not None:
            unit.loaded = True
        if unit is None:  # a whole code object
            for u in plan.all_units():
                u.loaded = True
            obj.loaded_functions.update(plan.functions)
            obj.loaded_data.update(plan.data)
            self._walk.site(UNKNOWN_PROTOTYPE, key)
            for reference in obj.index.references:
                self._use(obj, "call", reference.name)
        elif unit.kind == "function":
            name = unit.name
            obj.loaded_functions.add(name)
            reach = plan.reaches.get(name)
            for callee in sorted(reach if reach is not None else plan.callees(name)):
                if callee != name:
                    self._use(obj, "call", callee)
            for ref in sorted(plan.uses(name)):
                self._use(obj, "ref", ref)
            for proto in plan.indirect.get(name, ()):
                self._walk.site(proto, key)
            if not plan.precise_data and id(obj) not in self._all_data:
                self._all_data.add(id(obj))
                for n in sorted(plan.data):
                    self._reach(obj, plan.data[n])
                for n in sorted(plan.sections):
                    self._reach(obj, plan.sections[n])
                for slot in plan.other:
                    if slot.kind == "slot" and self._reach(obj, slot):
                        self._use(obj, "ref", slot.name)
        elif unit.kind == "data":
            obj.loaded_data.add(unit.name)
            self._holds(obj, plan, unit.name)
        elif unit.kind == "section":
            self._holds(obj, plan, f"section:{unit.name}")

    def _closure(self, start: LoadedCodeObject, unit: MapUnit | None) -> None:
        """Walk from ``start``'s ``unit`` to the fixpoint, then map and relocate what is new."""
        self._all_data = set()
        self._reach(start, unit)
        new = self._walk.run()
        whole = [o for o, u in new if u is None]
        for obj in whole:
            self._materialize(obj)
        order = {id(o): i for i, o in enumerate(self._objects)}
        by_obj: dict[int, list[MapUnit]] = {}
        for owner, u in new:
            if u is not None:
                by_obj.setdefault(id(owner), []).append(u)
        for oid in sorted(by_obj, key=lambda k: order[k]):
            self._map_units(self._objects[order[oid]], by_obj[oid])

    def _map_units(self, obj: LoadedCodeObject, units: list[MapUnit]) -> None:
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
        if obj.index.relocations:  # the loader's (AMDGPU's dynamic) relocations; else those left to the driver
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
