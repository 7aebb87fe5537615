"""The NVIDIA load back end (:data:`LOAD_BACKEND`, named by the NVIDIA descriptor's ``load_backend``).

What devbin.load does with a cubin (``nvidia-formats.md`` §5):

* **indexing** (:func:`_index_cubin`): a cubin has no program headers that matter to a driver:
  every allocated section that lives in global or constant memory is a piece, placed one after
  another in section order at its ``sh_addralign``; ``.nv.shared.*`` (per block) and
  ``.nv.local.*`` (per thread) are not device-global memory and are not mapped.  Its global and
  weak symbols are exported; its relocations (``R_CUDA_*`` in SASS) are recorded, resolved at
  freeze and left for the driver to apply; the symbols the driver supplies itself
  (:data:`NV_DRIVER_SYMBOLS`) are never unresolved;
* **targets**: the driver's rule (:func:`devbin.targets.nvidia.archs.runs_on`: same major, minor
  not above the device's; ``a``/``f`` variants);
* **kernels**: a kernel is a function the model calls one (``EIATTR``/``STO_CUDA_ENTRY``); it has no
  descriptor symbol: its address is its code;
* **lazy loading** (:func:`_plan_cubin`): a function is its ``.text.<f>`` with its own constant
  banks; edges from the call graph (``.nv.callgraph``) and the relocations.
"""

from __future__ import annotations

from collections.abc import Callable

from devbin.errors import DeviceBinaryError, FormatError, UsageError
from devbin.formats.devsec.elf import devbin_sections
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.load.backend import Pins, Resolver
from devbin.load.indexed import Holders, IndexedCodeObject, NvReloc, ObjDefinition, Piece
from devbin.load.indexing import read_definitions, read_exports, read_references
from devbin.load.lazy import Finder, MapUnit, ObjectPlan, empty_plan, use_graph
from devbin.load.relocation import AppliedReloc
from devbin.load.simulated import SimulatedDevice
from devbin.model import UNKNOWN_PROTOTYPE, CallGraph
from devbin.targets.nvidia.archs import parse_arch, runs_on
from devbin.targets.nvidia.cubin import CONST_SECTION_RE, SHT_CUDA_INFO, cubin_arch
from devbin.targets.nvidia.nvinfo import parse_nvinfo
from devbin.targets.nvidia.vendor import NVIDIA
from devbin.targets.vendor import Device

__all__ = ["LOAD_BACKEND", "NV_DRIVER_SYMBOLS", "NvidiaLoad"]

_NV_UNMAPPED = frozenset({0x70000009, 0x7000000A, 0x70000015})  # .nv.local.*, .nv.shared.*, reserved shared
#: ... and by name: a linked (executable) cubin gives ``.nv.shared.<f>`` and ``.nv.local.<f>`` the type
#: SHT_NOBITS (seen in libcurand's sm_90 cubins), as nvlink turns ``.nv.constant0.<f>`` into PROGBITS.
_NV_UNMAPPED_PREFIXES = (".nv.shared.", ".nv.local.")


#: Symbols a CUDA driver supplies itself (reserved shared memory; the unified function/data
#: tables nvlink fills): never looked up among code objects, never "unresolved".
NV_DRIVER_SYMBOLS = (".nv.reservedSmem", "__UFT", "__UDT")


def _cubin_arch(elf: ElfFile, name: str) -> str:
    """The cubin's arch, once it is checked as a cubin (a symbol table; its global ``.nv.info``, which
    the driver reads at load, parses): a corrupt one fails the load, not a later lookup."""
    try:
        arch = cubin_arch(elf)
        info = elf.section(".nv.info")
        if info is not None and info.sh_type == SHT_CUDA_INFO:
            parse_nvinfo(info.view)
        return arch
    except DeviceBinaryError as e:
        raise e.within(name) from None


def _index_cubin(elf: ElfFile, name: str) -> IndexedCodeObject:
    arch = _cubin_arch(elf, name)
    pieces: list[Piece] = []
    place: dict[int, int] = {}
    cursor = 0
    for s in elf.sections:
        if not s.is_alloc or s.sh_type in _NV_UNMAPPED or s.sh_type == C.SHT_NULL \
                or s.name.startswith(_NV_UNMAPPED_PREFIXES):
            continue
        a = max(s.sh_addralign, 1)
        if a & (a - 1) or a > (1 << 20):
            raise FormatError(f"bad alignment {a:#x}", fmt="elf", where=f"{name}: {s.where}", value=a)
        cursor = (cursor + a - 1) // a * a
        place[s.index] = cursor
        pieces.append(Piece(s.name, cursor, s.data, s.sh_size, a, bool(s.sh_flags & C.SHF_EXECINSTR)))
        cursor += s.sh_size
    rel = elf.header.e_type == C.ET_REL

    def offset_of(shndx: int, value: int) -> int | None:
        base = place.get(shndx)
        if base is None:
            return None
        return base + value - (0 if rel else elf.sections[shndx].sh_addr)

    table = elf.symtab
    exported = read_exports(elf, table, offset_of)
    definitions = read_definitions(elf, table, exported.names, offset_of)
    obj = IndexedCodeObject(name, NVIDIA.name, elf, arch, 1, cursor, 256, tuple(pieces), exported, (),
                            _indexed=(definitions, (), ()),
                            section_spans=tuple((p.offset, p.offset + p.mem_size, p.label) for p in pieces))
    holders = Holders(obj)
    sites: dict[str, list[str]] = {}
    nv: list[NvReloc] = []
    for idx, relocs in elf.relocation_tables.items():
        rsec = elf.sections[idx]
        target = elf.sections[rsec.sh_info] if 0 < rsec.sh_info < len(elf.sections) else None
        symtab = elf.symbol_tables.get(rsec.sh_link)
        if target is None or target.index not in place or symtab is None:
            continue  # .rela.debug_frame and other unmapped targets
        for r in relocs:
            if not 0 < r.r_sym < len(symtab):
                continue
            sym = symtab[r.r_sym]
            if not sym.name or sym.type == C.STT_SECTION:
                continue
            off = place[target.index] + r.r_offset
            nv.append(NvReloc(target.name, r.r_offset, r.r_type, sym.name, r.r_addend or 0, elf.header.e_machine))
            if not sym.defined:
                sites.setdefault(sym.name, []).append(holders.at(off))
    refs = read_references(table, sites, NV_DRIVER_SYMBOLS)
    obj._indexed = (definitions, refs, ())
    obj.undefined = tuple((r.name, r.weak) for r in refs)
    obj.nv_relocations = tuple(nv)
    return obj


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
    plan = empty_plan("model")
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
    finder = Finder(list(plan.data.values()))

    def holder_of(section: str, place: int) -> MapUnit | None:
        return owner.get(section) or finder.at(place) or plan.sections.get(section)

    for i, r in enumerate(idx.nv_relocations):  # recorded for the driver when their holder is mapped
        p = pieces.get(r.section)
        holder = holder_of(r.section, p.offset + r.offset) if p is not None else None
        if holder is not None:
            holder.relocs.append(i)
    _cubin_edges(idx, plan, pieces, holder_of, finder, owner)
    try:
        graph = _callgraph(idx)
    except DeviceBinaryError:
        plan.source = "whole"
        return plan
    use_graph(plan, graph)
    return plan


def _cubin_edges(idx: IndexedCodeObject, plan: ObjectPlan, pieces: dict[str, Piece],
                 holder_of: Callable[[str, int], MapUnit | None], finder: Finder, owner: dict[str, MapUnit]) -> None:
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


def _callgraph(idx: IndexedCodeObject) -> CallGraph:
    """The call graph lazy loading walks: the model's; a cubin without devbin sections reads it alone
    (``.nv.callgraph`` and ``.nv.prototype``, no function's records: its direct edges, indirect
    call sites and address-taken functions are the model's, its ``external`` lacks the callees
    only ``EIATTR_EXTERNS`` names)."""
    if "model" in idx.__dict__ or devbin_sections(idx.elf):
        return idx.model.callgraph
    return NVIDIA.import_code_object(idx.elf, diag=idx._warn, only=frozenset()).callgraph


class NvidiaLoad:
    """The NVIDIA load back end (:class:`devbin.load.backend.LoadBackend`)."""

    def index(self, elf: ElfFile, name: str) -> IndexedCodeObject:
        return _index_cubin(elf, name)

    def target_of(self, idx: IndexedCodeObject) -> str:
        """The SM of its SASS, without an ``a``/``f`` variant (``sm_90`` of ``sm_90a``)."""
        return idx.arch.rstrip("af")

    def check_target(self, idx: IndexedCodeObject, device: Device, pins: Pins) -> str:
        assert device.cc is not None
        ok, why = runs_on(parse_arch(idx.arch), device.cc)
        if not ok:
            raise UsageError(f"incompatible target: {why}", fmt="load", where=idx.name)
        return why

    def descriptors(self, idx: IndexedCodeObject) -> None:
        """None: a kernel has no descriptor symbol (the model says which functions are kernels)."""
        return None

    def kernel_entry(self, idx: IndexedCodeObject, descriptor: ObjDefinition, address: int) -> int:
        return address

    def apply_relocations(self, idx: IndexedCodeObject, base: int, device: SimulatedDevice,
                          resolve: Resolver) -> list[AppliedReloc]:
        """None: a cubin's relocations are the driver's (SASS is not patched; they are resolved and recorded)."""
        return []

    def plan_relocations(self, idx: IndexedCodeObject, base: int, resolve: Resolver) -> list[AppliedReloc]:
        return []

    def plan(self, idx: IndexedCodeObject) -> ObjectPlan:
        return _plan_cubin(idx)


LOAD_BACKEND = NvidiaLoad()
