"""Remove functions from an AMDGPU relocatable object, so ``ld.lld`` never sees them.

Dead-code elimination decides which functions go; this module takes them out of the ``.o``
(``ET_REL``) before the vendor linker runs.  An object compiled with ``-ffunction-sections``
keeps each function in its own ``.text.<f>`` section, so removing ``f`` means:

* dropping its section and the relocation section that applies to it (``.rela.text.<f>``);
* dropping its symbol and any other symbol defined in that section (its section symbol), and
  every undefined symbol only removed code referred to;
* renumbering the symbol table (locals first, as before) and every relocation's symbol index;
* dropping ``.llvm_addrsig`` (a list of symbol indices; without it ``ld.lld`` treats every
  symbol as address-significant, which only matters for ``--icf``) and, when it refers to a
  removed function or comes one per function (``-ffunction-sections``: several sections of one
  name), LLVM 22's ``.llvm.callgraph`` (call-graph metadata, not code);
* rewriting the devbin sections of an annotated object (they cite symbols by index) for the
  functions that remain.

A kernel goes with its code section and, besides: its 64-byte descriptor ``<kernel>.kd``
(the symbol is dropped and its bytes in ``.rodata`` zeroed, so the other descriptors and
data there keep their offsets; the ``R_AMDGPU_REL64`` at ``kd+0x10`` that points the
descriptor at the code goes with it), and its entry of ``amdhsa.kernels`` in the
``NT_AMDGPU_METADATA`` note (cut from the MessagePack document, the array count rewritten
in its own width; the note shrinks, which a relocatable object allows).

A function that shares its section with code that stays (no ``-ffunction-sections``) and a
function still referenced by a relocation from kept code are refused with a
:class:`~devbin.errors.UsageError` that says why.

Section contents are copied unchanged; only the layout of the file is new (the
:mod:`devbin.formats.elf.writer` plans it: allocated sections first, then the others, the
relocation sections, ``.symtab``, ``.strtab``, ``.shstrtab``).  Nothing in a relocatable
object refers to file offsets, so ``ld.lld`` links the result to the same code.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field, replace

from devbin.errors import FormatError, UsageError
from devbin.formats.devsec.elf import devbin_sections, read_code_object, with_devbin_sections
from devbin.formats.elf import constants as C
from devbin.formats.elf.model import ElfModel, RelocSpec, SectionSpec, SymbolSpec
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.elf.writer import write
from devbin.model import CallGraph
from devbin.targets.amdgpu.descriptor import KD_SIZE
from devbin.targets.amdgpu.link_patch import drop_kernels_from_notes

__all__ = ["prune_object"]

_FMT = "amdgpu-prune"
SHT_LLVM_ADDRSIG = 0x6FFF4C03
SHT_LLVM_CALL_GRAPH = 0x6FFF4C0F


@dataclass(slots=True)
class _Removal:
    sections: set[int] = field(default_factory=set)  # code sections that go whole
    kernels: set[str] = field(default_factory=set)
    descriptors: set[int] = field(default_factory=set)  # symbol indices of the removed kernels' <k>.kd
    zeroed: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # section -> descriptor ranges


def _removed_sections(elf: ElfFile, remove: Set[str], where: str) -> _Removal:
    symtab = elf.symtab
    if symtab is None:
        raise UsageError(f"{where}: no symbol table", fmt=_FMT)
    by_name = {s.name: s for s in symtab if s.name and s.defined and s.type == C.STT_FUNC}
    kds = {s.name[:-3]: s for s in symtab if s.name.endswith(".kd") and s.defined}
    out = _Removal()
    for name in sorted(remove):
        s = by_name.get(name)
        if s is None:
            raise UsageError(f"{where}: {name!r} is not a function defined in this object", fmt=_FMT)
        if not 0 < s.st_shndx < C.SHN_LORESERVE:
            raise UsageError(f"{where}: {name!r} is not in a section", fmt=_FMT)
        if s.st_shndx >= len(elf.sections):
            raise FormatError(f"symbol {name!r} is defined in section {s.st_shndx}, which does not exist",
                              fmt="amdgpu", where=where, value=s.st_shndx)
        out.sections.add(s.st_shndx)
        kd = kds.get(name)
        if kd is not None:  # a kernel: its descriptor's bytes are zeroed (the others in .rodata stay put)
            if not 0 < kd.st_shndx < min(C.SHN_LORESERVE, len(elf.sections)):
                raise UsageError(f"{where}: descriptor {kd.name!r} is not in a section", fmt=_FMT)
            sec = elf.sections[kd.st_shndx]
            end = kd.st_value + max(kd.st_size, KD_SIZE)
            if sec.sh_flags & C.SHF_EXECINSTR or (sec.sh_type != C.SHT_NOBITS and end > sec.sh_size):
                raise FormatError(f"descriptor {kd.name!r} [{kd.st_value:#x}, {end:#x}) does not fit in section "
                                  f"{sec.name!r}", fmt="amdgpu", where=where, value=sec.sh_size)
            out.kernels.add(name)
            out.descriptors.add(kd.index)
            out.zeroed.setdefault(kd.st_shndx, []).append((kd.st_value, end))
    for s in symtab:
        if s.st_shndx in out.sections and s.name and s.type in (C.STT_FUNC, C.STT_OBJECT) and s.name not in remove:
            shared = elf.sections[s.st_shndx].name
            gone = ", ".join(sorted(n for n in remove if by_name[n].st_shndx == s.st_shndx))
            raise UsageError(f"{where}: cannot remove {gone}: section {shared} also holds {s.name!r}, which stays "
                             "(compile with -ffunction-sections to give each function its own section)", fmt=_FMT)
    return out


def _inside(ranges: list[tuple[int, int]], offset: int) -> bool:
    return any(lo <= offset < hi for lo, hi in ranges)


def _rel_target(sec: Section) -> int | None:
    return sec.sh_info if sec.sh_type in (C.SHT_REL, C.SHT_RELA) else None


def _bad_target(rsec: Section, where: str) -> FormatError:
    return FormatError(f"{rsec.name!r} applies to section {rsec.sh_info}, which does not exist",
                       fmt="amdgpu", where=where, value=rsec.sh_info)


def prune_object(data: bytes, remove: Set[str], *, where: str = "object") -> bytes:
    """``data`` (an AMDGPU ``ET_REL`` object) without the functions in ``remove``."""
    elf = ElfFile(data, where=where)
    h = elf.header
    if h.e_machine != C.EM_AMDGPU or h.e_type != C.ET_REL:
        raise UsageError(f"{where}: prune_object takes an AMDGPU relocatable object (clang -c)", fmt=_FMT)
    if not remove:
        return data
    if any(s.sh_type == C.SHT_GROUP for s in elf.sections):
        raise UsageError(f"{where}: objects with section groups (COMDAT) are not supported yet", fmt=_FMT)
    # clang-22 -ffunction-sections -fexperimental-call-graph-section writes one .llvm.callgraph (and its
    # .rela) per function, SHF_LINK_ORDER to its code: several sections of one name, which cannot be
    # rewritten by name; being metadata (no code), they all go, as one that names a removed function does
    graphs = {s.index for s in elf.sections if s.sh_type == SHT_LLVM_CALL_GRAPH}
    per_function = len(graphs) > 1
    if per_function:
        graphs |= {s.index for s in elf.sections if s.sh_type in (C.SHT_REL, C.SHT_RELA) and s.sh_info in graphs}
    names = [s.name for s in elf.sections[1:] if not (per_function and s.index in graphs)]
    if len(set(names)) != len(names):
        raise UsageError(f"{where}: duplicate section names; cannot rewrite by name", fmt=_FMT)
    removal = _removed_sections(elf, remove, where)
    gone = removal.sections
    symtab = elf.symtab
    assert symtab is not None
    dropped_syms = {s.index for s in symtab if s.index and (s.st_shndx in gone or s.name in remove)}
    dropped_syms |= removal.descriptors
    devsec = {s.index for s in devbin_sections(elf).values()}
    skip = {symtab.section.index, symtab.section.sh_link, h.e_shstrndx} | gone | devsec
    if per_function:
        skip |= graphs
    for s in elf.sections:
        if s.sh_type == SHT_LLVM_ADDRSIG:
            skip.add(s.index)
    # Relocations from kept sections to removed symbols; .llvm.callgraph just goes.
    for idx, relocs in elf.relocation_tables.items():
        rsec = elf.sections[idx]
        target = _rel_target(rsec)
        if target is not None and not 0 < target < len(elf.sections):
            raise _bad_target(rsec, where)
        if target in gone or target in skip:
            skip.add(idx)
            continue
        cut = removal.zeroed.get(target, []) if target is not None else []
        bad = sorted({symtab[r.r_sym].name or elf.sections[symtab[r.r_sym].st_shndx].name
                      for r in relocs if r.r_sym in dropped_syms and not _inside(cut, r.r_offset)})
        if not bad:
            continue
        if target is not None and elf.sections[target].sh_type == SHT_LLVM_CALL_GRAPH:
            skip |= {idx, target}
            continue
        tname = elf.sections[target].name if target is not None else rsec.name
        raise UsageError(f"{where}: cannot remove {', '.join(bad)}: still referenced from {tname}", fmt=_FMT)
    # undefined symbols only removed code referred to go too (ld.lld would otherwise still see them)
    kept_refs: set[int] = set()
    gone_refs: set[int] = set()
    for idx, relocs in elf.relocation_tables.items():
        target = _rel_target(elf.sections[idx])
        cut = removal.zeroed.get(target, []) if target is not None else []
        for r in relocs:
            (gone_refs if idx in skip or _inside(cut, r.r_offset) else kept_refs).add(r.r_sym)
    dropped_syms |= {s.index for s in symtab if s.index and s.st_shndx == C.SHN_UNDEF and s.name
                     and s.index in gone_refs and s.index not in kept_refs}
    model = ElfModel(elfclass=h.ei_class, little=h.little, osabi=h.ei_osabi, abiversion=h.ei_abiversion,
                     e_type=h.e_type, machine=h.e_machine, flags=h.e_flags, use_rela=True)
    for s in elf.sections[1:]:
        if s.index in skip or s.sh_type in (C.SHT_REL, C.SHT_RELA):
            continue
        link = ".symtab" if s.sh_link == symtab.section.index else (
            elf.sections[s.sh_link].name if 0 < s.sh_link < len(elf.sections) else "")
        info: int | str = s.sh_info
        if s.sh_flags & C.SHF_INFO_LINK and 0 < s.sh_info < len(elf.sections):
            info = elf.sections[s.sh_info].name
        data = bytes(s.data)
        if s.index in removal.zeroed and s.sh_type != C.SHT_NOBITS:
            raw = bytearray(data)
            for lo, hi in removal.zeroed[s.index]:
                raw[lo:hi] = bytes(hi - lo)
            data = bytes(raw)
        elif s.sh_type == C.SHT_NOTE and removal.kernels:
            data = drop_kernels_from_notes(s, removal.kernels) or data
        model.sections.append(SectionSpec(
            s.name, s.sh_type, s.sh_flags, data, s.sh_size if s.sh_type == C.SHT_NOBITS else None,
            None, s.sh_addralign, s.sh_entsize, link, info))
    new_index: dict[int, int] = {}
    for sym in symtab:
        if sym.index == 0 or sym.index in dropped_syms:
            continue
        sec = sym.st_shndx
        in_sec = 0 < sec < C.SHN_LORESERVE
        if in_sec and sec >= len(elf.sections):
            raise FormatError(f"symbol {sym.name!r} is defined in section {sec}, which does not exist",
                              fmt="amdgpu", where=where, value=sec)
        new_index[sym.index] = len(model.symbols) + 1
        model.symbols.append(SymbolSpec(sym.name, sym.st_value, sym.st_size, sym.bind, sym.type, sym.st_other,
                                        elf.sections[sec].name if in_sec else None, None if in_sec else sec))
    for idx, relocs in elf.relocation_tables.items():
        rsec = elf.sections[idx]
        if idx in skip or rsec.sh_link != symtab.section.index:
            continue
        if not 0 < rsec.sh_info < len(elf.sections):
            raise _bad_target(rsec, where)
        rows: list[RelocSpec] = []
        cut = removal.zeroed.get(rsec.sh_info, [])
        for r in relocs:
            if _inside(cut, r.r_offset):
                continue  # inside a removed kernel's descriptor: its entry point (R_AMDGPU_REL64 at kd+0x10)
            if r.r_sym and r.r_sym not in new_index:
                raise FormatError(f"a relocation in {rsec.name!r} names symbol {r.r_sym}, which is not in the "
                                  "symbol table or is removed", fmt="amdgpu", where=where, value=r.r_sym)
            rows.append(RelocSpec(r.r_offset, new_index[r.r_sym] if r.r_sym else 0, r.r_type, r.r_addend or 0))
        model.relocations[elf.sections[rsec.sh_info].name] = rows
    if devsec:
        _reannotate(elf, model, remove)
    return write(model)


def _reannotate(old: ElfFile, model: ElfModel, remove: Set[str]) -> None:
    """Add the devbin sections again, for the functions that remain."""
    obj = read_code_object(old)
    if obj is None:
        return
    cg = obj.callgraph
    direct = tuple((a, b) for a, b in cg.direct if a not in remove and b not in remove)
    called = {b for _, b in direct}
    keep_cg = CallGraph(
        direct=direct,
        indirect_sites=tuple(x for x in cg.indirect_sites if x[0] not in remove),
        address_taken=tuple(x for x in cg.address_taken if x[0] not in remove),
        external=tuple(e for e in cg.external if e in called),  # their undefined symbols go with the callers
        unknown_blocks=cg.unknown_blocks)
    kept = replace(obj, functions=tuple(f for f in obj.functions if f.name not in remove), callgraph=keep_cg)
    with_devbin_sections(model, kept)
