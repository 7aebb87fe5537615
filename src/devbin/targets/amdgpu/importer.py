"""Import an AMDGPU HSA code object (``.o`` or linked ``.so``) into the unified model.

* kernels: the ``NT_AMDGPU_METADATA`` note, cross-checked against each
  ``<kernel>.kd`` descriptor (group/private segment, kernarg size, wave32 bit
  versus ``.wavefront_size``); disagreements go to ``diag``;
* device functions: defined ``STT_FUNC`` symbols that are not kernels;
* per-function resources: :mod:`devbin.targets.amdgpu.resources`;
* call graph, from static relocations (a ``.o``, or a ``.so`` linked with
  ``--emit-relocs``): an ``R_AMDGPU_REL32_LO/HI`` or ``GOTPCREL32_LO/HI`` in an
  executable section against a function is a direct call from the function
  containing the relocation; against an undefined symbol, a call to an
  external; against a variable (a data symbol type, or defined outside code,
  e.g. a ``__global int`` read through its GOT slot) nothing: that is data.
  (Relocations do not say whether code calls or only takes the
  address; LLVM uses the same ``s_getpc_b64`` pair for both.)  ``ABS64``/
  ``RELATIVE64`` from data to a function make it address-taken.  AMDGPU
  objects carry no prototypes, so address-taken functions and indirect call
  sites get :data:`~devbin.model.UNKNOWN_PROTOTYPE`, which matches any.
  Indirect call sites are known only where the producer says a function makes
  indirect calls (LLVM 20+ ``f.has_indirect_call`` symbols, the devbin
  sections of ``devbin cc`` output, ``.llvm.callgraph`` callee type ids); an
  LLVM 19 object does not say, so a consumer must treat its address-taken
  functions as reachable from any indirect call.
* LLVM 22's ``.llvm.callgraph`` (``-fexperimental-call-graph-section``,
  :mod:`devbin.formats.elf.llvm_callgraph`): each function's type id becomes
  the ``amdgpu.llvm_type_id`` attribute (only for records flagged "indirect
  target", LLVM's word for "not local", so it does not make a function
  address-taken); callee lists, where present, add direct edges and indirect
  call sites.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from devbin._version import __version__
from devbin.binary.spans import SpanIndex
from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.llvm_callgraph import CallGraphRecord, read_llvm_callgraph
from devbin.formats.elf.reader import ElfFile, Relocation, Symbol, SymbolTable
from devbin.model import (
    UNKNOWN_PROTOTYPE,
    Applies,
    AttrForm,
    Attribute,
    CallConv,
    CallGraph,
    CodeObject,
    Function,
    FunctionKind,
    KernelParam,
    Metadata,
    StdAttr,
    Target,
    TypeKind,
    encode_param_layout,
    register_vendor_attribute,
)
from devbin.model.resources import AMD_MAX_FLAT_WG as AMD_MAX_FLAT_WG  # re-exported: the ids are defined there
from devbin.model.resources import AMD_SGPR_SPILL as AMD_SGPR_SPILL
from devbin.model.resources import AMD_VGPR_SPILL as AMD_VGPR_SPILL
from devbin.targets.amdgpu.descriptor import KernelDescriptor, read_descriptor
from devbin.targets.amdgpu.mach import AmdgpuFlags, decode_flags
from devbin.targets.amdgpu.metadata import AmdgpuMetadata, KernelMeta, read_metadata
from devbin.targets.amdgpu.resources import FunctionResources, function_resources, resource_symbols
from devbin.targets.amdgpu.targetid import parse_note_target

__all__ = ["AmdgpuFacts", "code_object_facts", "import_amdgpu", "usage"]

Diag = Callable[[DeviceBinaryError], None]

R_REL32, R_GOTPCREL, R_GOTPCREL32_LO, R_GOTPCREL32_HI, R_REL32_LO, R_REL32_HI = 4, 7, 8, 9, 10, 11
R_ABS64, R_RELATIVE64 = 3, 13
_CALL_RELOCS = frozenset({R_REL32, R_GOTPCREL, R_GOTPCREL32_LO, R_GOTPCREL32_HI, R_REL32_LO, R_REL32_HI})

AMD_KERNARG_ALIGN = 0x204
AMD_RSRC1 = 0x205
AMD_RSRC2 = 0x206
AMD_RSRC3 = 0x207
AMD_KCP = 0x208
AMD_USES_VCC = 0x209
AMD_USES_FLAT_SCRATCH = 0x20A
AMD_HAS_INDIRECT_CALL = 0x20B
AMD_LANGUAGE = 0x20C
AMD_LLVM_TYPE_ID = 0x20D

for _id, _name, _form, _ap, _doc in (
    (AMD_SGPR_SPILL, "amdgpu.sgpr_spill_count", AttrForm.UINT, Applies.BOTH, "SGPRs spilled (.sgpr_spill_count)"),
    (AMD_VGPR_SPILL, "amdgpu.vgpr_spill_count", AttrForm.UINT, Applies.BOTH, "VGPRs spilled (.vgpr_spill_count)"),
    (AMD_MAX_FLAT_WG, "amdgpu.max_flat_workgroup_size", AttrForm.UINT, Applies.KERNEL,
     "largest work-group size (flat) the kernel supports"),
    (AMD_KERNARG_ALIGN, "amdgpu.kernarg_segment_align", AttrForm.UINT, Applies.KERNEL, "kernarg segment alignment"),
    (AMD_RSRC1, "amdgpu.compute_pgm_rsrc1", AttrForm.UINT, Applies.KERNEL, "kernel descriptor COMPUTE_PGM_RSRC1"),
    (AMD_RSRC2, "amdgpu.compute_pgm_rsrc2", AttrForm.UINT, Applies.KERNEL, "kernel descriptor COMPUTE_PGM_RSRC2"),
    (AMD_RSRC3, "amdgpu.compute_pgm_rsrc3", AttrForm.UINT, Applies.KERNEL, "kernel descriptor COMPUTE_PGM_RSRC3"),
    (AMD_KCP, "amdgpu.kernel_code_properties", AttrForm.UINT, Applies.KERNEL, "kernel descriptor properties bits"),
    (AMD_USES_VCC, "amdgpu.uses_vcc", AttrForm.FLAG, Applies.BOTH, "uses VCC (LLVM 20+ resource symbol)"),
    (AMD_USES_FLAT_SCRATCH, "amdgpu.uses_flat_scratch", AttrForm.FLAG, Applies.BOTH, "uses flat scratch"),
    (AMD_HAS_INDIRECT_CALL, "amdgpu.has_indirect_call", AttrForm.FLAG, Applies.BOTH, "makes indirect calls"),
    (AMD_LANGUAGE, "amdgpu.language", AttrForm.BYTES, Applies.KERNEL, "source language (.language)"),
    (AMD_LLVM_TYPE_ID, "amdgpu.llvm_type_id", AttrForm.UINT, Applies.BOTH,
     "type id of the function's signature (.llvm.callgraph); equal ids, equal signatures"),
):
    register_vendor_attribute(_id, _name, _form, _ap, _doc)


def _raise(e: DeviceBinaryError) -> None:
    raise e


@dataclass(frozen=True, slots=True)
class AmdgpuFacts:
    """Everything the importer read, before it became a :class:`CodeObject`."""

    flags: AmdgpuFlags
    metadata: AmdgpuMetadata | None
    target_id: str
    triple: str
    descriptors: dict[str, KernelDescriptor]
    kernels: tuple[str, ...]
    device_functions: tuple[str, ...]
    resources: tuple[FunctionResources, ...]
    callgraph: CallGraph
    llvm_callgraph: tuple[CallGraphRecord, ...] = ()
    function_symbols: dict[str, Symbol] = field(default_factory=dict)  # defined STT_FUNC by name (first of each)


def _symtab(elf: ElfFile) -> SymbolTable | None:
    return elf.symtab or elf.dynsym


def _funcs(symtab: SymbolTable | None) -> dict[str, Symbol]:
    out: dict[str, Symbol] = {}
    for s in symtab or ():
        if s.type == C.STT_FUNC and s.defined and s.name and s.st_shndx != C.SHN_ABS:
            out.setdefault(s.name, s)
    return out


class _FunctionIndex:
    """Functions by section for "which function holds this place" in O(log n) (a code object of
    10,000 kernels has as many relocations as functions times calls), and by start address."""

    def __init__(self, funcs: list[Symbol]) -> None:
        groups: dict[int, list[Symbol]] = {}
        for f in funcs:
            groups.setdefault(f.st_shndx, []).append(f)
        self.by_section = {shndx: SpanIndex((f.st_value, f.st_value + max(f.st_size, 1), f) for f in fs)
                           for shndx, fs in groups.items()}
        self.by_value: dict[int, list[Symbol]] = {}
        for f in funcs:
            self.by_value.setdefault(f.st_value, []).append(f)

    def containing(self, shndx: int, addr: int) -> Symbol | None:
        """The function holding ``addr``: the first in symbol-table order among those that do."""
        index = self.by_section.get(shndx)
        hits = index.containing(addr) if index is not None else []
        return min((f for _, _, f in hits), key=lambda f: f.index, default=None)


def _code_relocations(elf: ElfFile, index: int, target: int, funcs: dict[str, Symbol],
                      callers: frozenset[str] | None) -> list[Relocation]:
    """The relocations of table ``index`` (against code section ``target``); with ``callers``, only
    those inside these functions (found by offset: a function's among a large object's)."""
    if callers is None:
        return elf.relocation_table(index)
    spans = sorted({(f.st_value, f.st_value + max(f.st_size, 1)) for n in callers
                    if (f := funcs.get(n)) is not None and f.st_shndx == target})
    out: list[Relocation] = []
    for lo, hi in spans:
        out += elf.relocations_between(index, lo, hi)
    return out


_DATA_TYPES = frozenset({C.STT_OBJECT, C.STT_COMMON, C.STT_TLS})


def _is_data(elf: ElfFile, sym: Symbol) -> bool:
    """The symbol says it is a variable: a data type (``STT_OBJECT``, ``STT_COMMON``, ``STT_TLS``), or
    defined in a section that holds no code.  An undefined ``STT_NOTYPE`` symbol (what clang writes for
    every external declaration, function or variable) says nothing: it stays a possible callee, and
    the linker's graph turns the edge into a data edge once it resolves to a variable."""
    if sym.type in _DATA_TYPES:
        return True
    if sym.type in (C.STT_FUNC, C.STT_SECTION) or not 0 < sym.st_shndx < min(C.SHN_LORESERVE, len(elf.sections)):
        return False
    return not elf.sections[sym.st_shndx].sh_flags & C.SHF_EXECINSTR


def _callgraph(elf: ElfFile, funcs: dict[str, Symbol], indirect_calls: set[str],
               records: tuple[CallGraphRecord, ...], callers: frozenset[str] | None = None) -> CallGraph:
    """The call graph from relocations and ``.llvm.callgraph``; with ``callers``, only the direct
    edges (and external callees) of these functions, found without reading the other functions'
    relocations; address-taken functions and indirect call sites are always the whole object's."""
    flist = list(funcs.values())
    index = _FunctionIndex(flist)
    rel = elf.header.e_type == C.ET_REL
    direct: set[tuple[str, str]] = set()
    external: set[str] = set()
    taken: set[str] = set()
    for rsec in elf.sections:
        if rsec.sh_type not in (C.SHT_REL, C.SHT_RELA):
            continue
        idx = rsec.index
        symtab = elf.symbol_tables.get(rsec.sh_link)
        target_sec = elf.sections[rsec.sh_info] if 0 < rsec.sh_info < len(elf.sections) else None
        code = target_sec is not None and bool(target_sec.sh_flags & C.SHF_EXECINSTR)
        relocs = _code_relocations(elf, idx, rsec.sh_info, funcs, callers) if code else elf.relocation_table(idx)
        for r in relocs:
            sym = symtab[r.r_sym] if symtab is not None and 0 < r.r_sym < len(symtab) else None
            if code and r.r_type in _CALL_RELOCS and sym is not None and target_sec is not None:
                caller = index.containing(target_sec.index, r.r_offset)
                if caller is None or (callers is not None and caller.name not in callers):
                    continue
                callee: str | None = None
                if _is_data(elf, sym):
                    pass  # a variable's address (through the GOT or pc-relative): data, not a call
                elif sym.type == C.STT_FUNC and sym.defined:
                    callee = sym.name
                elif sym.type == C.STT_SECTION and r.r_addend is not None and r.r_type == R_REL32_LO:
                    f = index.containing(sym.st_shndx, sym.st_value + r.r_addend - 4)
                    callee = f.name if f is not None else None
                elif not sym.defined and sym.type in (C.STT_NOTYPE, C.STT_FUNC) and sym.name:
                    callee = sym.name
                    external.add(sym.name)
                if callee is not None and callee != "":
                    direct.add((caller.name, callee))
            elif not code and r.r_type in (R_ABS64, R_RELATIVE64) and (
                    target_sec is None or target_sec.sh_flags & C.SHF_ALLOC):  # not .llvm.callgraph, debug info
                if sym is not None and sym.type == C.STT_FUNC and sym.defined:
                    taken.add(sym.name)
                elif r.r_type == R_RELATIVE64 and r.r_addend is not None and not rel:
                    taken.update(f.name for f in index.by_value.get(r.r_addend, ()))
    indirect = set(indirect_calls)
    for rec in records:
        if rec.function is None:
            continue
        if callers is not None and rec.function not in callers:
            if rec.indirect_type_ids:
                indirect.add(rec.function)
            continue
        direct.update((rec.function, c) for c in rec.direct_callees if c is not None)
        if rec.indirect_type_ids:
            indirect.add(rec.function)
    return CallGraph(direct=tuple(direct), address_taken=tuple((n, UNKNOWN_PROTOTYPE) for n in taken),
                     indirect_sites=tuple((n, UNKNOWN_PROTOTYPE) for n in indirect), external=tuple(external))


def _u64(v: int | None) -> TypeGuard[int]:
    return v is not None and 0 <= v < (1 << 64)


def _check(k: KernelMeta, kd: KernelDescriptor, diag: Diag) -> None:
    for what, note, desc in (("group_segment_fixed_size", k.group_segment_fixed_size, kd.group_segment_fixed_size),
                             ("private_segment_fixed_size", k.private_segment_fixed_size,
                              kd.private_segment_fixed_size),
                             ("kernarg_segment_size", k.kernarg_segment_size, kd.kernarg_size)):
        if note is not None and note != desc:
            diag(FormatError(f"kernel {k.name!r}: note {what} {note} != descriptor {desc}", fmt="amdgpu",
                             value=desc))
    if k.wavefront_size is not None and k.wavefront_size != (32 if kd.wave32 else 64):
        diag(FormatError(f"kernel {k.name!r}: note wavefront_size {k.wavefront_size} disagrees with the "
                         f"descriptor's wave32 bit", fmt="amdgpu", value=kd.kernel_code_properties))


def code_object_facts(elf: ElfFile, *, diag: Diag | None = None, only: frozenset[str] | None = None) -> AmdgpuFacts:
    """Read flags, metadata, descriptors, functions, resources and call graph.

    ``only``: kernels, descriptors, device functions and resources of just these names (their
    note entries alone are converted and checked); the call graph's direct edges and external
    callees are those of these functions (:func:`_callgraph`)."""
    diag = diag or _raise
    h = elf.header
    if h.e_machine != C.EM_AMDGPU:
        raise FormatError("not an AMDGPU code object", fmt="amdgpu", value=h.e_machine)
    flags = decode_flags(h.e_flags, h.ei_osabi, h.ei_abiversion)
    md: AmdgpuMetadata | None = None
    try:
        md = read_metadata(elf, only=only)
    except DeviceBinaryError as e:
        diag(e)
    target_id, triple = flags.target_id, "amdgcn-amd-amdhsa"
    if md is not None and md.target:
        try:
            triple, tid = parse_note_target(md.target)
            triple = triple.rstrip("-")  # an empty environment: amdgcn-amd-amdhsa- is amdgcn-amd-amdhsa
            target_id = str(tid)
        except DeviceBinaryError as e:
            diag(e)
    symtab = _symtab(elf)
    funcs = _funcs(symtab)
    by_name = {s.name: s for s in symtab or () if s.defined and s.name}
    kernels: dict[str, KernelMeta] = {}
    descriptors: dict[str, KernelDescriptor] = {}
    for k in md.kernels if md is not None else ():
        if not k.name or k.name in kernels:
            continue
        kernels[k.name] = k
        kd_sym = by_name.get(k.symbol or f"{k.name}.kd")
        if kd_sym is None:
            diag(FormatError(f"kernel {k.name!r}: no descriptor symbol {k.symbol!r}", fmt="amdgpu"))
            continue
        try:
            kd = read_descriptor(elf, kd_sym, flags.processor)
        except DeviceBinaryError as e:
            diag(e)
            continue
        descriptors[k.name] = kd
        _check(k, kd, diag)
    rsyms = resource_symbols(symtab)
    names = list(dict.fromkeys([*kernels, *funcs]))
    # the call graph's indirect call sites: every function's, also where ``only`` leaves it out
    indirect_calls = {n for n in names if rsyms.get(n, {}).get("has_indirect_call")}
    if only is not None:
        names = [n for n in names if n in only]
    resources = tuple(function_resources(n, kernels.get(n), rsyms.get(n)) for n in names)
    records: tuple[CallGraphRecord, ...] = ()
    try:
        records = read_llvm_callgraph(elf)
    except DeviceBinaryError as e:
        diag(e)
    return AmdgpuFacts(flags, md, target_id, triple, descriptors, tuple(kernels),
                       tuple(n for n in funcs if n not in kernels and (only is None or n in only)), resources,
                       _callgraph(elf, funcs, indirect_calls, records, only), records, funcs)


def _layout(k: KernelMeta) -> bytes | None:
    params = []
    for a in k.args:
        if not (_u64(a.offset) and _u64(a.size)):
            return None
        kind = TypeKind.POINTER if a.value_kind in ("global_buffer", "dynamic_shared_pointer") else TypeKind.BITS \
            if a.size in (1, 2, 4, 8) else TypeKind.AGGREGATE
        size = a.size or 0
        align = 1
        while align < 8 and align < size and size % (align * 2) == 0:
            align *= 2
        params.append(KernelParam(kind, a.offset or 0, size, align))
    return encode_param_layout(params) if params else None


def _attributes(r: FunctionResources, k: KernelMeta | None, kd: KernelDescriptor | None,
                type_id: int | None) -> list[Attribute]:
    a: list[Attribute] = []
    for attr_id, v in ((StdAttr.REGS_GENERAL, r.vgpr), (StdAttr.REGS_SCALAR, r.sgpr), (StdAttr.REGS_ACCUM, r.agpr),
                       (StdAttr.PRIVATE_BYTES, r.private_segment), (StdAttr.SHARED_BYTES, r.group_segment),
                       (StdAttr.PARAM_BYTES, r.kernarg_segment), (AMD_SGPR_SPILL, r.sgpr_spill),
                       (AMD_VGPR_SPILL, r.vgpr_spill)):
        if _u64(v):
            a.append(Attribute(attr_id, v))
    for attr_id, flag in ((StdAttr.DYNAMIC_STACK, r.dynamic_stack), (StdAttr.USES_RECURSION, r.has_recursion),
                          (AMD_USES_VCC, r.uses_vcc), (AMD_USES_FLAT_SCRATCH, r.uses_flat_scratch),
                          (AMD_HAS_INDIRECT_CALL, r.has_indirect_call)):
        if flag:
            a.append(Attribute(attr_id, True))
    if k is not None:
        if _u64(k.wavefront_size):
            a.append(Attribute(StdAttr.WAVE_SIZE, k.wavefront_size))
        if k.reqd_workgroup_size is not None and len(k.reqd_workgroup_size) == 3 and all(
                _u64(x) for x in k.reqd_workgroup_size):
            a.append(Attribute(StdAttr.REQD_BLOCK_SIZE, k.reqd_workgroup_size))
        if _u64(k.max_flat_workgroup_size):
            a.append(Attribute(AMD_MAX_FLAT_WG, k.max_flat_workgroup_size))
        if _u64(k.kernarg_segment_align):
            a.append(Attribute(AMD_KERNARG_ALIGN, k.kernarg_segment_align))
        if k.language:
            a.append(Attribute(AMD_LANGUAGE, k.language))
        layout = _layout(k)
        if layout is not None:
            a.append(Attribute(StdAttr.PARAM_LAYOUT, layout))
    if kd is not None:
        a += [Attribute(AMD_RSRC1, kd.compute_pgm_rsrc1.raw), Attribute(AMD_RSRC2, kd.compute_pgm_rsrc2.raw),
              Attribute(AMD_RSRC3, kd.compute_pgm_rsrc3.raw), Attribute(AMD_KCP, kd.kernel_code_properties)]
    if type_id:
        a.append(Attribute(AMD_LLVM_TYPE_ID, type_id))
    a.append(Attribute(StdAttr.CALLCONV, CallConv.KERNEL if k is not None else CallConv.DEFAULT))
    return a


def import_amdgpu(elf: ElfFile, *, diag: Diag | None = None, only: frozenset[str] | None = None) -> CodeObject:
    """The unified model of an AMDGPU code object: kernels, device functions, call graph, metadata.

    ``only``: just the functions of these names (each record equal to the one the whole import
    gives; only their note entries and descriptors are read), the whole object's metadata, and the
    call graph as far as it concerns these functions: their direct edges and external callees, and
    the whole object's address-taken functions and indirect call sites (a record's kind depends on
    them).  What a lazy loader needs for one kernel of thousands."""
    facts = code_object_facts(elf, diag=diag, only=only)
    funcs = facts.function_symbols
    taken = {n for n, _ in facts.callgraph.address_taken}
    type_ids = {rec.function: rec.type_id for rec in facts.llvm_callgraph if rec.function and rec.indirect_target}
    out = []
    for r in facts.resources:
        k = facts.metadata.kernel(r.name) if facts.metadata is not None and r.name in facts.kernels else None
        kind = FunctionKind.KERNEL if k is not None else (
            FunctionKind.INDIRECT_TARGET if r.name in taken else FunctionKind.DEVICE)
        sym = funcs.get(r.name)
        sec = elf.sections[sym.st_shndx].name if sym is not None and 0 < sym.st_shndx < len(elf.sections) else ""
        attrs = _attributes(r, k, facts.descriptors.get(r.name), type_ids.get(r.name))
        out.append(Function(r.name, kind, tuple(attrs), section=sec,
                            offset=sym.st_value if sym else 0, size=sym.st_size if sym else 0,
                            binding=C.binding_word(sym.bind) if sym else "global",
                            visibility=C.visibility_word(sym.visibility) if sym else "default"))
    meta: list[tuple[str, str | int | bytes]] = [("vendor", "amd"), ("target-id", facts.target_id),
                                                 ("importer", f"devbin {__version__}")]
    if facts.flags.code_object_version is not None:
        meta.append(("amdgpu.code-object-version", facts.flags.code_object_version))
    if facts.flags.generic_version:
        meta.append(("amdgpu.generic-version", facts.flags.generic_version))
    if facts.metadata is not None and facts.metadata.version:
        meta.append(("amdgpu.metadata-version", ".".join(str(v) for v in facts.metadata.version)))
    try:
        target = Target.parse(facts.target_id, "amd", facts.triple)
    except DeviceBinaryError as e:
        if diag is None:
            raise
        diag(e)
        target = None
    return CodeObject(target, tuple(out), facts.callgraph, Metadata.of(meta))


def usage(elf: ElfFile) -> dict[str, Any]:
    """Resource usage of every kernel and device function (symbol order), as JSON-ready data."""
    facts = code_object_facts(elf)
    return {
        "target-id": facts.target_id,
        "functions": [r.to_dict() for r in facts.resources],
    }
