"""The AMDGPU load back end (:data:`LOAD_BACKEND`, named by the AMD descriptor's ``load_backend``).

What devbin.load does with an AMDGPU code object, as ROCr does (``llvm-amdgpu-formats.md`` §4-5):

* **indexing** (:func:`_index_amdgpu`): only an HSA code object linked by ``ld.lld -shared``
  (``ET_DYN``/``ET_EXEC``, ``EI_OSABI`` 64) loads; one piece per ``PT_LOAD`` at its ``p_vaddr``;
  ``.dynsym`` indexed at load (what binds across code objects), ``.symtab`` on first use; the
  dynamic relocations checked at load (only the five ROCr applies:
  :mod:`devbin.targets.amdgpu.load_relocs` applies them at freeze);
* **targets**: the target-ID rules of :func:`devbin.targets.amdgpu.matching.match` (features
  ``xnack``/``sramecc`` on, off or any; generic targets); a load that holds only with a feature
  in one state pins it for the executable;
* **kernels**: a kernel is a function with a 64-byte descriptor ``<name>.kd``; its address is the
  descriptor's (HSA's ``KERNEL_OBJECT``), its code is where the descriptor's
  ``kernel_code_entry_byte_offset`` (byte 16) leads;
* **lazy loading** (:func:`_plan_amdgpu`): a function is its range of the shared ``.text`` (a
  kernel with its descriptor); edges from devbin's sections, else ``--emit-relocs`` static
  relocations read per function, else LLVM's ``.llvm.callgraph``, else the whole object at once.
"""

from __future__ import annotations

from devbin.errors import FormatError, UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Section
from devbin.load.backend import Pins, Resolver
from devbin.load.indexed import (
    DynReloc,
    Holders,
    IndexedCodeObject,
    ObjDefinition,
    ObjReference,
    Piece,
)
from devbin.load.indexing import read_definitions, read_exports, read_references
from devbin.load.lazy import Finder, MapUnit, ObjectPlan, devbin_graph, empty_plan, use_graph
from devbin.load.relocation import AppliedReloc
from devbin.load.simulated import SimulatedDevice
from devbin.model import UNKNOWN_PROTOTYPE
from devbin.targets.amdgpu.load_relocs import R_NONE, R_RELATIVE64, RELOC_WIDTH, apply_relocations, plan_relocations
from devbin.targets.amdgpu.mach import decode_flags
from devbin.targets.amdgpu.matching import match
from devbin.targets.amdgpu.targetid import parse_target_id
from devbin.targets.amdgpu.vendor import AMD
from devbin.targets.vendor import Device

__all__ = ["LOAD_BACKEND", "AmdgpuLoad"]

ELFOSABI_AMDGPU_HSA = 64
#: The suffix of a kernel descriptor's symbol, and the descriptor's size (``kernel_descriptor_t``).
KD_SUFFIX, KD_BYTES = ".kd", 64
#: Where a descriptor holds ``kernel_code_entry_byte_offset`` (signed, relative to the descriptor).
KD_ENTRY_OFFSET = 16
#: AMDGPU static relocation types whose value is PC-relative to the literal after ``s_getpc``:
#: the referenced address is ``S + A - bias``.
_PCREL_BIAS = {4: 0, 10: 4, 11: 12, 8: 4, 9: 12, 7: 0}  # REL32, REL32_LO/HI, GOTPCREL32_LO/HI, GOTPCREL
_NOT_DEVICE_DATA = {C.SHT_NOTE, C.SHT_DYNSYM, C.SHT_STRTAB, C.SHT_HASH, C.SHT_DYNAMIC, 0x6FFFFFF6}  # + GNU_HASH


def _amdgpu_arch(elf: ElfFile) -> tuple[str, int]:
    f = decode_flags(elf.header.e_flags, elf.header.ei_osabi, elf.header.ei_abiversion)
    return f.target_id, (f.generic_version or 1)


def _index_amdgpu(elf: ElfFile, name: str) -> IndexedCodeObject:
    h = elf.header
    if h.e_type == C.ET_REL:
        raise UsageError("AMDGPU relocatable object (ET_REL): ROCr loads only linked code objects; "
                         "link it first (ld.lld -shared)", where=name)
    if h.e_type not in (C.ET_DYN, C.ET_EXEC):
        raise FormatError(f"AMDGPU code object of type {C.ET_NAMES.get(h.e_type, h.e_type)} cannot be loaded",
                          fmt="amdgpu", where=name, value=h.e_type)
    if h.ei_osabi != ELFOSABI_AMDGPU_HSA:
        raise UsageError(f"not an HSA code object (EI_OSABI {h.ei_osabi}, expected 64): PAL and Mesa objects "
                         "are loaded by their own drivers", where=name)
    arch, generic = _amdgpu_arch(elf)
    loads = [s for s in elf.segments if s.p_type == C.PT_LOAD and s.p_memsz]
    if not loads:
        raise FormatError("no PT_LOAD segment: nothing to map", fmt="amdgpu", where=name)
    pieces: list[Piece] = []
    for seg in sorted(loads, key=lambda x: x.p_vaddr):
        if seg.p_filesz > seg.p_memsz:
            raise FormatError(f"segment [{seg.index}]: p_filesz {seg.p_filesz:#x} > p_memsz {seg.p_memsz:#x}",
                              fmt="amdgpu", where=name, value=seg.p_filesz)
        if pieces and seg.p_vaddr < pieces[-1].offset + pieces[-1].mem_size:
            raise FormatError(f"segment [{seg.index}] overlaps the previous PT_LOAD", fmt="amdgpu", where=name,
                              value=seg.p_vaddr)
        data = elf.view.bytes_at(seg.p_offset, seg.p_filesz, f"segment [{seg.index}]")
        flags = "".join(c if seg.p_flags & b else "-" for c, b in (("r", 4), ("w", 2), ("x", 1)))
        pieces.append(Piece(f"PT_LOAD[{seg.index}] {flags}", seg.p_vaddr, data, seg.p_memsz, max(seg.p_align, 1),
                            bool(seg.p_flags & 1)))
    if pieces[0].offset > (1 << 48) or pieces[-1].offset + pieces[-1].mem_size > (1 << 48):
        raise FormatError("segment addresses beyond 2^48", fmt="amdgpu", where=name)
    span = pieces[-1].offset + pieces[-1].mem_size
    align = max(p.align for p in pieces)
    if align & (align - 1) or align > (1 << 30):
        raise FormatError(f"bad segment alignment {align:#x}", fmt="amdgpu", where=name, value=align)
    dyn = elf.dynsym
    # Only .dynsym now (what binds across code objects, as in ROCr), and only names: a definition's
    # record is made when asked for; .symtab (every function and variable) is indexed when something
    # asks for the code object's definitions.
    exported = read_exports(elf, dyn, _st_value)
    undefined = tuple((r.name, r.weak) for r in read_references(dyn, {}))
    obj = IndexedCodeObject(name, AMD.name, elf, arch, generic, span, align, tuple(pieces), exported,
                            undefined, _index_rest=_amdgpu_rest,
                            section_spans=tuple((s.sh_addr, s.sh_addr + s.sh_size, s.name)
                                                for s in elf.sections if s.is_alloc))
    obj._dyn_relocs = _amdgpu_relocations(elf, obj)  # checked now: a bad one fails the load
    return obj


def _st_value(_shndx: int, value: int) -> int:
    return value


def _amdgpu_rest(obj: IndexedCodeObject) -> tuple[tuple[ObjDefinition, ...], tuple[ObjReference, ...],
                                                  tuple[DynReloc, ...]]:
    elf = obj.elf
    dyn = elf.dynsym
    definitions = read_definitions(elf, elf.symtab or dyn, obj.exported.names, _st_value)
    obj._indexed = (definitions, (), ())  # the holders (relocation sites) need the definitions
    holders = Holders(obj)
    relocs = tuple(r.at_site(holders.at(r.offset)) for r in obj._dyn_relocs)
    sites: dict[str, list[str]] = {}
    for r in relocs:
        if r.symbol is not None:
            sites.setdefault(r.symbol, []).append(r.site)
    return definitions, read_references(dyn, sites), relocs


def _dynamic_reloc_sections(elf: ElfFile) -> list[Section]:
    return [s for s in elf.sections if s.sh_type in (C.SHT_RELA, C.SHT_REL) and s.sh_info == 0]


def _amdgpu_relocations(elf: ElfFile, obj: IndexedCodeObject) -> tuple[DynReloc, ...]:
    """The dynamic relocations, checked (their sites, which need ``.symtab``, are left empty)."""
    out: list[DynReloc] = []
    spans = [(p.offset, p.offset + p.mem_size) for p in obj.pieces]
    for sec in _dynamic_reloc_sections(elf):
        table = elf.symbol_tables.get(sec.sh_link)
        cols = table.columns if table is not None else None
        for i, r in enumerate(elf.relocation_table(sec.index)):
            where = f"{sec.where} entry {i}"
            if r.r_type not in RELOC_WIDTH:
                raise FormatError(f"dynamic relocation {C.reloc_name(C.EM_AMDGPU, r.r_type)} is not one the HSA "
                                  "loader applies (ABS32_LO/HI, ABS32, ABS64, RELATIVE64)", fmt="amdgpu",
                                  where=f"{obj.name}: {where}", value=r.r_type)
            if r.r_type == R_NONE:
                continue
            width = RELOC_WIDTH[r.r_type]
            if not any(lo <= r.r_offset and r.r_offset + width <= hi for lo, hi in spans):
                raise FormatError(f"relocated place {r.r_offset:#x} lies outside every PT_LOAD", fmt="amdgpu",
                                  where=f"{obj.name}: {where}", value=r.r_offset)
            symbol: str | None = None
            local: int | None = None
            weak = False
            sym_name = ""
            if r.r_type != R_RELATIVE64 and r.r_sym:
                if table is None or cols is None or r.r_sym >= len(table):
                    raise FormatError("relocation symbol index outside the symbol table", fmt="amdgpu",
                                      where=f"{obj.name}: {where}", value=r.r_sym)
                sym_name = table.names((r.r_sym,))[0]
                shndx = cols.st_shndx[r.r_sym]
                if shndx:
                    local = cols.st_value[r.r_sym] if shndx != C.SHN_ABS else None
                    if local is None:
                        raise FormatError(f"relocation against absolute symbol {sym_name!r}", fmt="amdgpu",
                                          where=f"{obj.name}: {where}")
                elif not sym_name:
                    raise FormatError("relocation against an unnamed undefined symbol", fmt="amdgpu",
                                      where=f"{obj.name}: {where}", value=r.r_sym)
                else:
                    symbol, weak = sym_name, cols.st_info[r.r_sym] >> 4 == C.STB_WEAK
            out.append(DynReloc(r.r_offset, r.r_type, symbol, local, r.r_addend, weak, "", sym_name,
                                  elf.header.e_machine, width))
    return tuple(out)


def _kernels(idx: IndexedCodeObject) -> dict[str, ObjDefinition]:
    """AMDGPU kernel name -> its descriptor's definition."""
    defs = {d.name: d for d in idx.definitions}
    return {n[:-3]: d for n, d in defs.items() if n.endswith(KD_SUFFIX) and n[:-3] in defs and defs[n[:-3]].is_function}


def _plan_amdgpu(idx: IndexedCodeObject) -> ObjectPlan:
    elf = idx.elf
    kds = _kernels(idx)
    kd_names = {d.name for d in kds.values()}
    plan = empty_plan("whole")
    for d in idx.definitions:
        if d.name in kd_names:
            continue
        if d.is_function:
            u = plan.functions.get(d.name)
            if u is None:
                u = plan.functions[d.name] = MapUnit(f"function:{d.name}", d.name, "function", [])
                kd = kds.get(d.name)
                if kd is not None:
                    u.ranges.append((kd.offset, KD_BYTES))  # the descriptor first: a kernel's "address" is its kd
            u.ranges.append((d.offset, d.size))
        elif d.size:
            plan.data.setdefault(d.name, MapUnit(f"data:{d.name}", d.name, "data", [(d.offset, d.size)]))
    for u in plan.functions.values():
        if len(u.ranges) == 2:  # kernel: code range first for the finder, descriptor second
            u.ranges.reverse()
    finder = Finder([*plan.functions.values(), *plan.data.values()])
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
    model_graph = devbin_graph(idx, plan)
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


def _vendor_graph(idx: IndexedCodeObject, plan: ObjectPlan) -> bool:
    if idx.elf.section(".llvm.callgraph") is None:
        return False
    graph = idx.model.callgraph
    if not graph.direct and not graph.indirect_sites:
        return False
    plan.source = "model"
    use_graph(plan, graph)
    return True


def _static_code_tables(idx: IndexedCodeObject) -> list[int]:
    """The static relocation tables (``--emit-relocs``) against code sections; empty when the file has none."""
    elf = idx.elf
    return [r.index for r in elf.sections if r.sh_type in (C.SHT_REL, C.SHT_RELA)
            and 0 < r.sh_info < len(elf.sections) and elf.sections[r.sh_info].sh_flags & C.SHF_EXECINSTR]


def _function_code_edges(idx: IndexedCodeObject, plan: ObjectPlan, finder: Finder, tables: list[int],
                         name: str) -> None:
    """Edges of function ``name`` from the static relocations inside its code: each relocation is the
    edge of the unit :class:`Finder` says holds it, so reading them function by function gives what
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


class AmdgpuLoad:
    """The AMDGPU load back end (:class:`devbin.load.backend.LoadBackend`)."""

    def index(self, elf: ElfFile, name: str) -> IndexedCodeObject:
        return _index_amdgpu(elf, name)

    def target_of(self, idx: IndexedCodeObject) -> str:
        """Its target ID from ``e_flags`` (``gfx90a:xnack+``)."""
        return idx.arch

    def check_target(self, idx: IndexedCodeObject, device: Device, pins: Pins) -> str:
        assert device.target is not None
        m = match(parse_target_id(idx.arch), device.target, generic_version=idx.generic_version)
        if not m.ok:
            raise UsageError(f"incompatible target: {m.reason}", fmt="load", where=idx.name)
        for c in m.conditional:
            feature, state = c[:-1], c[-1]
            prior = pins.get(feature)
            if prior is not None and prior[0] != state:
                raise UsageError(f"incompatible target: needs {c}, but {prior[1]} needs {feature}{prior[0]}; "
                                 "one device runs with one setting", fmt="load", where=idx.name)
        for c in m.conditional:
            pins.setdefault(c[:-1], (c[-1], idx.name))
        return m.reason

    def descriptors(self, idx: IndexedCodeObject) -> dict[str, ObjDefinition]:
        """Kernel name -> its descriptor ``<name>.kd`` (a function of that name is defined too)."""
        return _kernels(idx)

    def kernel_entry(self, idx: IndexedCodeObject, descriptor: ObjDefinition, address: int) -> int:
        return address + int.from_bytes(idx.file_bytes(descriptor.offset + KD_ENTRY_OFFSET, 8), "little",
                                        signed=True)

    def apply_relocations(self, idx: IndexedCodeObject, base: int, device: SimulatedDevice,
                          resolve: Resolver) -> list[AppliedReloc]:
        return apply_relocations(idx, base, device, resolve)

    def plan_relocations(self, idx: IndexedCodeObject, base: int, resolve: Resolver) -> list[AppliedReloc]:
        return plan_relocations(idx, base, resolve)

    def plan(self, idx: IndexedCodeObject) -> ObjectPlan:
        return _plan_amdgpu(idx)


LOAD_BACKEND = AmdgpuLoad()
