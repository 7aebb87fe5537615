"""Lazy loading by the call graph: what a code object's functions and data need, per unit.

A lazy :class:`~devbin.load.Executable` places every code object at ``freeze()`` (so every
address equals eager loading) and maps nothing.  The first lookup of a kernel maps its
*closure*: the functions it can reach, the data they use, and what that data points at.
This module cuts one code object into **units**, each a set of object-offset ranges:

* a function (its ``[st_value, st_value+st_size)``; a kernel also owns its 64-byte
  descriptor ``<name>.kd``).  AMDGPU functions share one ``.text`` segment, so these are
  sub-segment ranges; a cubin's function is its ``.text.<f>`` section (and its own constant
  banks ``.nv.constant<N>.<f>``: a kernel's parameters are bank 0);
* a variable (``STT_OBJECT``, a cubin's ``STT_CUDA_OBJECT``: its range);
* a GOT slot or any other dynamically relocated place no symbol covers: a *slot*, keyed by
  the symbol it holds, mapped when something of the same code object uses that symbol;
* a section range an unnamed static reference lands in (mapped whole).

and records the edges between them, from the best source the file has (``source``):

``devbin``
    devbin's sections (``.devbin.callgraph``: direct calls, indirect call sites and
    address-taken functions with prototypes); a kernel's ``reaches:<kernel>`` metadata
    (written by ``devbin link -o``, docs/FORMAT.md §9.2) is its closure ready-made.
``relocations``
    the static relocations ``ld.lld --emit-relocs`` keeps (``.rela.text``): which function
    references which function, variable or GOT slot.  A function's edges are read when the
    closure first reaches it, from the relocations inside its code alone (found by offset), so
    the first lookup in a code object of thousands of kernels reads a handful of relocations.
    LLVM 19 objects do not say which functions make indirect calls: every function is taken to
    have an indirect call site of unknown prototype (conservative; an unknown prototype matches
    any).
``model``
    the vendor importer's call graph (cubins: ``.nv.callgraph``/``.nv.prototype``;
    AMDGPU: LLVM 22's ``.llvm.callgraph``).
``whole``
    nothing says who calls whom (an AMDGPU ``.so`` linked without ``--emit-relocs`` and
    without devbin sections): the first use of anything in the code object maps all of it.

AMDGPU data edges always come from the dynamic relocations (which slot of which variable holds
which address); a cubin's from its relocations (a relocatable cubin's ``.rela.text.<f>`` name
the variables each function uses; ``.rela.nv.global.init`` which function a table holds).
Without per-function data references (``devbin`` and ``model`` sources, except a relocatable
cubin), the first function of a code object that is loaded brings every variable, slot and
data section of that code object with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from devbin.binary.spans import SpanIndex, merge_ranges, subtract_ranges
from devbin.formats.devsec.elf import devbin_sections
from devbin.load.backend import load_backend
from devbin.load.indexed import IndexedCodeObject
from devbin.model import CallGraph, Prototype

__all__ = ["Finder", "ObjectPlan", "MapUnit", "devbin_graph", "empty_plan", "merge_ranges", "plan_object",
           "subtract_ranges",
           "use_graph"]

@dataclass(eq=False)
class MapUnit:
    """What is mapped together: ``ranges`` (object offset, size) and the relocations inside them."""

    key: str  # "function:f", "data:v", "slot:0x..", "section:.rodata"
    name: str
    kind: str  # "function", "data", "slot", "section"
    ranges: list[tuple[int, int]]
    relocs: list[int] = field(default_factory=list)  # indices into IndexedCodeObject.relocations / nv_relocations
    loaded: bool = False

    @property
    def size(self) -> int:
        return sum(s for _, s in self.ranges)


@dataclass(eq=False)
class ObjectPlan:
    """One code object cut into units, with the edges between them (see the module docstring)."""

    source: str
    functions: dict[str, MapUnit]
    data: dict[str, MapUnit]
    other: list[MapUnit]  # slots and sections
    slots: dict[str, list[MapUnit]]  # symbol name -> slots holding it
    calls: dict[str, set[str]]  # function -> functions it calls (by name; may be defined elsewhere)
    refs: dict[str, set[str]]  # unit name -> variables / symbols / "section:" units it uses
    takes: dict[str, set[str]]  # variable -> functions whose address it holds
    indirect: dict[str, tuple[Prototype, ...]]  # function -> prototypes of its indirect call sites
    taken_proto: dict[str, Prototype]  # address-taken function -> its prototype
    reaches: dict[str, tuple[str, ...]]  # kernel -> its closure (reaches:<kernel> metadata)
    precise_data: bool
    sections: dict[str, MapUnit] = field(default_factory=dict)
    #: reads a function's edges into ``calls``/``refs`` on first use (``relocations``); None: all are there
    edges_of: Callable[[str], None] | None = field(default=None, repr=False)
    _read: set[str] = field(default_factory=set, repr=False)

    def all_units(self) -> list[MapUnit]:
        return [*self.functions.values(), *self.data.values(), *self.other]

    def _edges(self, name: str) -> None:
        if self.edges_of is not None and name not in self._read and name in self.functions:
            self.edges_of(name)
            self._read.add(name)

    def callees(self, name: str) -> set[str]:
        """The functions ``name`` calls (by name; some may be defined in other code objects)."""
        self._edges(name)
        return self.calls.get(name, set())

    def uses(self, name: str) -> set[str]:
        """The variables, symbols and ``section:`` units the function or variable ``name`` uses."""
        self._edges(name)
        return self.refs.get(name, set())


class Finder:
    """The unit (function or variable) whose range holds an object offset."""

    def __init__(self, units: list[MapUnit]) -> None:
        # ordered by (start, end) alone: two units of one range (aliases) are not comparable
        spans = sorted(((lo, lo + max(sz, 1), u) for u in units for lo, sz in u.ranges[:1]), key=lambda s: s[:2])
        self.index = SpanIndex(spans, look_back=8)

    def at(self, offset: int) -> MapUnit | None:
        hit = self.index.at(offset)
        return hit[2] if hit is not None else None


def plan_object(idx: IndexedCodeObject) -> ObjectPlan:
    """Cut ``idx`` into units and find the edges between them: the vendor's load back end's plan
    (:meth:`devbin.load.backend.LoadBackend.plan`; AMDGPU :mod:`devbin.targets.amdgpu.load`, cubins
    :mod:`devbin.targets.nvidia.load`), from the helpers here."""
    return cast(ObjectPlan, load_backend(idx.descriptor).plan(idx))


def empty_plan(source: str) -> ObjectPlan:
    return ObjectPlan(source, {}, {}, [], {}, {}, {}, {}, {}, {}, {}, False)


def devbin_graph(idx: IndexedCodeObject, plan: ObjectPlan) -> ObjectPlan | None:
    if not devbin_sections(idx.elf):
        return None
    model = idx.model
    if not any(f.name in plan.functions for f in model.functions):
        return None  # stale or foreign sections: the model names nothing here
    plan.source = "devbin"
    use_graph(plan, model.callgraph)
    for key, value in model.metadata.entries if model.metadata is not None else ():
        if key.startswith("reaches:") and isinstance(value, str):
            plan.reaches[key[8:]] = tuple(value.split())
    return plan


def use_graph(plan: ObjectPlan, graph: CallGraph) -> None:
    for a, b in graph.direct:
        plan.calls.setdefault(a, set()).add(b)
    ind: dict[str, list[Prototype]] = {}
    for a, p in graph.indirect_sites:
        ind.setdefault(a, []).append(p)
    plan.indirect.update({k: tuple(v) for k, v in ind.items()})
    for f, p in graph.address_taken:
        plan.taken_proto[f] = p


