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

from devbin.binary.spans import SpanIndex, merge_ranges, subtract_ranges
from devbin.errors import DeviceBinaryError
from devbin.formats.devsec.elf import devbin_sections
from devbin.formats.elf import constants as C
from devbin.load.indexed import R_RELATIVE64, IndexedCodeObject, ObjDefinition, Piece
from devbin.model import UNKNOWN_PROTOTYPE, CallGraph, Prototype
from devbin.targets.nvidia.cubin import CONST_SECTION_RE

__all__ = ["ObjectPlan", "MapUnit", "merge_ranges", "plan_object", "subtract_ranges"]

#: AMDGPU static relocation types whose value is PC-relative to the literal after ``s_getpc``:
#: the referenced address is ``S + A - bias``.
_PCREL_BIAS = {4: 0, 10: 4, 11: 12, 8: 4, 9: 12, 7: 0}  # REL32, REL32_LO/HI, GOTPCREL32_LO/HI, GOTPCREL
_NOT_DEVICE_DATA = {C.SHT_NOTE, C.SHT_DYNSYM, C.SHT_STRTAB, C.SHT_HASH, C.SHT_DYNAMIC, 0x6FFFFFF6}  # + GNU_HASH


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


class _Finder:
    """The unit (function or variable) whose range holds an object offset."""

    def __init__(self, units: list[MapUnit]) -> None:
        # ordered by (start, end) alone: two units of one range (aliases) are not comparable
        spans = sorted(((lo, lo + max(sz, 1), u) for u in units for lo, sz in u.ranges[:1]), key=lambda s: s[:2])
        self.index = SpanIndex(spans, look_back=8)

    def at(self, offset: int) -> MapUnit | None:
        hit = self.index.at(offset)
        return hit[2] if hit is not None else None


def _kernels(idx: IndexedCodeObject) -> dict[str, ObjDefinition]:
    """AMDGPU kernel name -> its descriptor's definition."""
    defs = {d.name: d for d in idx.definitions}
    return {n[:-3]: d for n, d in defs.items() if n.endswith(".kd") and n[:-3] in defs and defs[n[:-3]].is_function}


def plan_object(idx: IndexedCodeObject) -> ObjectPlan:
    """Cut ``idx`` into units and find the edges between them."""
    if idx.vendor == "nvidia":
        return _plan_cubin(idx)
    return _plan_amdgpu(idx)


def _empty(source: str) -> ObjectPlan:
    return ObjectPlan(source, {}, {}, [], {}, {}, {}, {}, {}, {}, {}, False)


def _plan_amdgpu(idx: IndexedCodeObject) -> ObjectPlan:
    elf = idx.elf
    kds = _kernels(idx)
    kd_names = {d.name for d in kds.values()}
    plan = _empty("whole")
    for d in idx.definitions:
        if d.name in kd_names:
            continue
        if d.is_function:
            u = plan.functions.get(d.name)
            if u is None:
                u = plan.functions[d.name] = MapUnit(f"function:{d.name}", d.name, "function", [])
                kd = kds.get(d.name)
                if kd is not None:
                    u.ranges.append((kd.offset, 64))  # the descriptor first: a kernel's "address" is its kd
            u.ranges.append((d.offset, d.size))
        elif d.size:
            plan.data.setdefault(d.name, MapUnit(f"data:{d.name}", d.name, "data", [(d.offset, d.size)]))
    for u in plan.functions.values():
        if len(u.ranges) == 2:  # kernel: code range first for the finder, descriptor second
            u.ranges.reverse()
    finder = _Finder([*plan.functions.values(), *plan.data.values()])
    for s in elf.sections:
        if s.is_alloc and not s.sh_flags & C.SHF_EXECINSTR and s.sh_type not in _NOT_DEVICE_DATA and s.sh_size:
            plan.sections[s.name] = MapUnit(f"section:{s.name}", s.name, "section", [(s.sh_addr, s.sh_size)])
    # data edges and slots: the dynamic relocations
    slot_units: dict[int, MapUnit] = {}
    for i, r in enumerate(idx.relocations):
        holder = finder.at(r.offset)
        target: str | None = r.symbol
        if target is None:
            at = r.local if r.local is not None else (r.addend if r.rtype == R_RELATIVE64 else None)
            t = finder.at(at) if at is not None else None
            target = t.name if t is not None else None
        if holder is None:
            u = slot_units.get(r.offset)
            if u is None:
                u = slot_units[r.offset] = MapUnit(f"slot:{r.offset:#x}", target or f"{r.offset:#x}", "slot",
                                                [(r.offset, r.width)])
                plan.other.append(u)
                plan.slots.setdefault(target or "", []).append(u)
            u.relocs.append(i)
            continue
        holder.relocs.append(i)
        if target is None:
            continue
        if target in plan.functions and holder.kind == "data":
            plan.takes.setdefault(holder.name, set()).add(target)
            plan.taken_proto.setdefault(target, UNKNOWN_PROTOTYPE)
        else:
            plan.refs.setdefault(holder.name, set()).add(target)
    for name in plan.takes.get("", ()):
        plan.taken_proto.setdefault(name, UNKNOWN_PROTOTYPE)
    model_graph = _devbin_graph(idx, plan)
    if model_graph is not None:
        return model_graph
    code_tables = _static_code_tables(idx)
    if code_tables:
        plan.source, plan.precise_data = "relocations", True
        for f in plan.functions:
            plan.indirect[f] = (UNKNOWN_PROTOTYPE,)
        plan.edges_of = lambda name: _function_code_edges(idx, plan, finder, code_tables, name)
        return plan
    if _vendor_graph(idx, plan):
        return plan
    plan.source = "whole"
    return plan


def _devbin_graph(idx: IndexedCodeObject, plan: ObjectPlan) -> ObjectPlan | None:
    if not devbin_sections(idx.elf):
        return None
    model = idx.model
    if not any(f.name in plan.functions for f in model.functions):
        return None  # stale or foreign sections: the model names nothing here
    plan.source = "devbin"
    _use_graph(plan, model.callgraph)
    for key, value in model.metadata.entries if model.metadata is not None else ():
        if key.startswith("reaches:") and isinstance(value, str):
            plan.reaches[key[8:]] = tuple(value.split())
    return plan


def _vendor_graph(idx: IndexedCodeObject, plan: ObjectPlan) -> bool:
    if idx.elf.section(".llvm.callgraph") is None:
        return False
    graph = idx.model.callgraph
    if not graph.direct and not graph.indirect_sites:
        return False
    plan.source = "model"
    _use_graph(plan, graph)
    return True


def _use_graph(plan: ObjectPlan, graph: CallGraph) -> None:
    for a, b in graph.direct:
        plan.calls.setdefault(a, set()).add(b)
    ind: dict[str, list[Prototype]] = {}
    for a, p in graph.indirect_sites:
        ind.setdefault(a, []).append(p)
    plan.indirect.update({k: tuple(v) for k, v in ind.items()})
    for f, p in graph.address_taken:
        plan.taken_proto[f] = p


def _static_code_tables(idx: IndexedCodeObject) -> list[int]:
    """The static relocation tables (``--emit-relocs``) against code sections; empty when the file has none."""
    elf = idx.elf
    return [r.index for r in elf.sections if r.sh_type in (C.SHT_REL, C.SHT_RELA)
            and 0 < r.sh_info < len(elf.sections) and elf.sections[r.sh_info].sh_flags & C.SHF_EXECINSTR]


def _function_code_edges(idx: IndexedCodeObject, plan: ObjectPlan, finder: _Finder, tables: list[int],
                         name: str) -> None:
    """Edges of function ``name`` from the static relocations inside its code: each relocation is the
    edge of the unit :class:`_Finder` says holds it, so reading them function by function gives what
    reading them all at once would."""
    elf = idx.elf
    unit = plan.functions[name]
    lo, size = unit.ranges[0]
    for ri in tables:
        rsec = elf.sections[ri]
        table = elf.symbol_tables.get(rsec.sh_link)
        for r in elf.relocations_between(ri, lo, lo + max(size, 1)):
            if finder.at(r.r_offset) is not unit or table is None or not 0 < r.r_sym < len(table):
                continue
            sym = table[r.r_sym]
            target: str | None = None
            if sym.type == C.STT_SECTION or not sym.name:
                if not 0 < sym.st_shndx < len(elf.sections):
                    continue
                at = sym.st_value + (r.r_addend or 0) - _PCREL_BIAS.get(r.r_type, 0)
                t = finder.at(at)
                if t is not None:
                    target = t.name
                else:
                    sec = elf.sections[sym.st_shndx]
                    if sec.name in plan.sections:
                        target = f"section:{sec.name}"
            else:
                target = sym.name
            if target is None or target == name:
                continue
            if target in plan.functions or (not sym.defined and sym.type in (C.STT_FUNC, C.STT_NOTYPE)
                                            and target not in plan.data):
                plan.calls.setdefault(name, set()).add(target)
            else:
                plan.refs.setdefault(name, set()).add(target)


def _plan_cubin(idx: IndexedCodeObject) -> ObjectPlan:
    """Units of a cubin: a function is its ``.text.<f>`` with its own constant banks
    (``.nv.constant<N>.<f>``), a variable its range, any other global or constant section a unit of
    its own.  Edges: the call graph (``.nv.callgraph``), and the relocations against named symbols
    and sections: a function's (``.rela.text.<f>``: the variables and functions it uses), a
    variable's or section's (``.rela.nv.global.init``: function tables; ``.rela.nv.constant4``: the
    addresses of globals).  A relocatable cubin keeps every function's relocations, so its data is
    per function (``precise_data``); a linked one keeps none (nvlink applied them), so its first
    function brings the data, and the functions whose addresses that data holds are loaded when a
    loaded indirect call site matches their prototype."""
    elf = idx.elf
    plan = _empty("model")
    plan.precise_data = elf.header.e_type == C.ET_REL
    pieces = {p.label: p for p in idx.pieces}
    banks: dict[str, list[str]] = {}
    for label in pieces:
        m = CONST_SECTION_RE.match(label)
        if m is not None and m[2] is not None:  # .nv.constant<N>.<f>: function f's bank N
            banks.setdefault(m[2], []).append(label)
    owner: dict[str, MapUnit] = {}  # section -> the function owning it
    for d in idx.definitions:
        if d.is_function and d.name not in plan.functions:
            u = MapUnit(f"function:{d.name}", d.name, "function", [])
            for label in (f".text.{d.name}", *banks.get(d.name, ())):
                p = pieces.get(label)
                if p is not None and label not in owner:
                    u.ranges.append((p.offset, p.mem_size))
                    owner[label] = u
            if not u.ranges:
                u.ranges.append((d.offset, d.size))
            plan.functions[d.name] = u
    for d in idx.definitions:
        if not d.is_function and d.size and d.section in pieces and d.section not in owner:
            plan.data.setdefault(d.name, MapUnit(f"data:{d.name}", d.name, "data", [(d.offset, d.size)]))
    for p in idx.pieces:
        if p.label not in owner and not p.executable:
            plan.sections[p.label] = MapUnit(f"section:{p.label}", p.label, "section", [(p.offset, p.mem_size)])
    finder = _Finder(list(plan.data.values()))

    def holder_of(section: str, place: int) -> MapUnit | None:
        return owner.get(section) or finder.at(place) or plan.sections.get(section)

    for i, r in enumerate(idx.nv_relocations):  # recorded for the driver when their holder is mapped
        p = pieces.get(r.section)
        holder = holder_of(r.section, p.offset + r.offset) if p is not None else None
        if holder is not None:
            holder.relocs.append(i)
    _cubin_edges(idx, plan, pieces, holder_of, finder, owner)
    try:
        graph = idx.callgraph
    except DeviceBinaryError:
        plan.source = "whole"
        return plan
    _use_graph(plan, graph)
    return plan


def _cubin_edges(idx: IndexedCodeObject, plan: ObjectPlan, pieces: dict[str, Piece],
                 holder_of: Callable[[str, int], MapUnit | None], finder: _Finder, owner: dict[str, MapUnit]) -> None:
    """Edges from a cubin's relocations: what each function, variable or section uses."""
    elf = idx.elf
    rel = elf.header.e_type == C.ET_REL
    for ri, relocs in elf.relocation_tables.items():
        rsec = elf.sections[ri]
        target = elf.sections[rsec.sh_info] if 0 < rsec.sh_info < len(elf.sections) else None
        symtab = elf.symbol_tables.get(rsec.sh_link)
        if target is None or target.name not in pieces or symtab is None:
            continue  # .rela.debug_frame, and tables against sections that are not mapped
        base = pieces[target.name].offset
        for r in relocs:
            if not 0 < r.r_sym < len(symtab):
                continue
            holder = holder_of(target.name, base + r.r_offset)
            sym = symtab[r.r_sym]
            name: str | None = sym.name or None
            if sym.type == C.STT_SECTION:
                tsec = elf.sections[sym.st_shndx] if 0 < sym.st_shndx < len(elf.sections) else None
                if tsec is None or tsec.name not in pieces:
                    continue
                at = pieces[tsec.name].offset + sym.st_value - (0 if rel else tsec.sh_addr) + (r.r_addend or 0)
                hit = owner.get(tsec.name) or finder.at(at)
                name = hit.name if hit is not None else f"section:{tsec.name}"
            if holder is None or name is None or name == holder.name:
                continue
            key = holder.name if holder.kind != "section" else f"section:{holder.name}"
            if holder.kind == "function":
                if name in plan.functions or (not sym.defined and sym.type == C.STT_FUNC):
                    plan.calls.setdefault(key, set()).add(name)
                else:
                    plan.refs.setdefault(key, set()).add(name)
            elif name in plan.functions:  # a variable or constant bank holding a function's address
                plan.takes.setdefault(key, set()).add(name)
                plan.taken_proto.setdefault(name, UNKNOWN_PROTOTYPE)
            else:
                plan.refs.setdefault(key, set()).add(name)
