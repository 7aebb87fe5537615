"""NVIDIA backend of ``devbin link``: remove functions and variables from relocatable cubins.

``devbin link`` decides what stays (resolution, call-graph DCE) and then hands
``nvlink`` exactly the code it kept: the functions it dropped are cut out of the
relocatable cubins (``nvcc -rdc=true -cubin``, ``nvcc -dc`` device code, ``ptxas -c``)
here, through the ELF reader, instead of asking nvlink to guess with
``-kernels-used`` (whose rules differ: see :mod:`devbin.targets.nvidia.link_nvlink`).

What :func:`prune_cubin` rewrites (layout: the cubin sections as the public decoders
redplait/denvdis and VivekPanyam/cudaparsers read them, checked against nvlink 13.0):

* **Sections.**  A removed function takes its ``.text.<f>`` with it, and every
  section tied to that one by ``sh_info`` (``SHF_INFO_LINK`` or a relocation
  section): ``.nv.info.<f>``, ``.rel(a).text.<f>``, ``.nv.shared.<f>``,
  ``.nv.local.<f>``, ``.nv.constant<N>.<f>``.  Surviving sections are renumbered
  and every section index is rewritten (``sh_link``, ``sh_info`` where it is an
  index, ``st_shndx``).
* **Symbols.**  The named symbols go, with every symbol defined in a removed
  section (section symbols, a kernel's static ``__shared__`` arrays) and every
  undefined function that only removed code called (so nvlink does not ask for a
  definition of a dead external).  The table keeps its order; symbol indices are
  rewritten in relocations, in ``.text.<f>``'s ``sh_info`` (the function's
  symbol; the top byte, the register count on sm_7x/8x, is kept), in ``.nv.info``
  records (``REGCOUNT``/``FRAME_SIZE``/``MIN_STACK_SIZE``/``MAX_STACK_SIZE``
  ``{sym, n}``: dropped for removed functions; ``PARAM_CBANK``'s constant-bank
  section symbol; ``EXTERNS`` lists), in ``.nv.callgraph`` (both words of direct
  edges and address references, the function word of address-taken and
  indirect-call entries, whose second word is a ``.strtab`` offset) and in
  ``.nv.prototype``.  ``.strtab`` and ``.shstrtab`` are kept byte for byte, so the
  prototype strings' offsets stay valid (removed names become unused strings).
* **.debug_frame.**  ptxas writes one CIE followed by the FDE(s) of each function
  (64-bit DWARF), the FDE's initial location relocated against the function.  The
  FDEs of removed functions are cut out, with their CIE when no FDE of it is left;
  the relocations after a cut move by the bytes removed before them, and those
  against the ``.debug_frame`` section symbol (the CIE pointers) by the bytes
  removed before their CIE.
* **Variables.**  A removed variable loses its symbol; its bytes in
  ``.nv.global.init`` (or another section with contents) are zeroed and the
  relocations inside it dropped (a table of function pointers then stops
  referring to its functions).  Nothing moves, so no byte is saved: the point is
  to let the functions go.

* **Mercury copies (sm_100 and later).**  ptxas 13.0 writes for every Blackwell cubin (sm_100,
  sm_103, sm_110, sm_120, sm_121) a second set of sections for deferred finalisation:
  ``.nv.merc.symtab`` (Elf64_Sym rows in the same string table; its first entries mirror
  ``.symtab``'s index for index, but its functions are defined in ``.nv.capmerc.text.<f>``),
  ``.nv.capmerc.text.<f>`` (``sh_info`` the function's Mercury symbol, like ``.text.<f>``),
  ``.nv.merc.nv.info[.<f>]`` (EIATTR records indexing the Mercury table),
  ``.nv.merc.rela.*`` (Elf64_Rela against it, ``R_MERCURY_*`` types 0x10000 + n),
  ``.nv.merc.debug_frame`` and ``.nv.merc.nv.global.init``.  Each is rewritten as its
  ``.symtab`` counterpart is: a removed function's ``.nv.capmerc.text.<f>`` goes with every
  section tied to it, the Mercury table is renumbered on its own and its relocations,
  records, FDEs and variables follow.  The first word of a capsule (``.nv.capmerc.text.<f>``)
  is the section index of its ``.text.<f>`` (true of every function ptxas 13.0 writes); it is
  renumbered too, since nvlink 13.0 crashes on a capsule naming the wrong section.  Section
  types as redplait/denvdis ``test/nvd.cc`` names them.
* **Unknown kept.**  Relocation types are copied whatever they are; ``.nv.info`` records are
  copied unless they are among the few known to hold symbol indices (rewritten).

Refused with :class:`~devbin.errors.UsageError`: removing something that kept
code or data still refers to (a relocation outside the removed ranges, in either symbol
table's relocations, a direct call or address reference from a kept function), so a caller
cannot produce an object nvlink would reject or, worse, link wrongly; names not defined in
the cubin; linked cubins (``ET_EXEC``).

Output layout: every kept section in its original file order, each at its
alignment right after the previous one (what ``ElfEditor.compact_relocatable``
does; nothing in a relocatable object refers to file offsets), then the section
header table.  An empty ``remove`` gives the input back unchanged.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Set
from dataclasses import dataclass, field

from devbin.binary import Emitter, align_up
from devbin.errors import FormatError, UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf import layout as L
from devbin.formats.elf.reader import ElfFile, Relocation, Section, Symbol
from devbin.targets.nvidia import eiattr as E
from devbin.targets.nvidia.cubin import (
    SHT_CUDA_CALLGRAPH,
    SHT_CUDA_CAPMERC_TEXT,
    SHT_CUDA_INFO,
    SHT_CUDA_MERC_INFO,
    SHT_CUDA_MERC_RELA,
    SHT_CUDA_MERC_SYMTAB,
    SHT_CUDA_PROTOTYPE,
)
from devbin.targets.nvidia.nvinfo import parse_nvinfo

__all__ = ["prune_cubin", "removable"]

_FMT = "cubin"
_SYMTABS = (C.SHT_SYMTAB, SHT_CUDA_MERC_SYMTAB)
_RELOCS = (C.SHT_REL, C.SHT_RELA, SHT_CUDA_MERC_RELA)
_INFOS = (SHT_CUDA_INFO, SHT_CUDA_MERC_INFO)
_TEXT_PREFIXES = ((".text.", C.SHT_PROGBITS), (".nv.capmerc.text.", SHT_CUDA_CAPMERC_TEXT))
_WORD0_SYMBOL = E.INDEXED | {E.CODES["PARAM_CBANK"]}
_SYMBOL_LIST = frozenset({E.CODES["EXTERNS"]})
_FUNCTION_RECORDS = E.INDEXED  # {function sym, value}: dropped with the function
_CIE_ID = {4: 0xFFFFFFFF, 12: 0xFFFFFFFFFFFFFFFF}


@dataclass(slots=True)
class _Table:
    """One symbol table (``.symtab``, or sm_100+'s ``.nv.merc.symtab``) and what goes from it."""

    section: Section
    symbols: list[Symbol]
    removed: set[int] = field(default_factory=set)
    new_index: dict[int, int] = field(default_factory=dict)

    def name(self, i: int) -> str:
        return self.symbols[i].name if 0 <= i < len(self.symbols) else f"<symbol {i}>"


@dataclass(slots=True)
class _Frame:
    """A ``.debug_frame`` (or ``.nv.merc.debug_frame``): the byte ranges cut from it."""

    index: int
    table: int  # the symbol table its relocations use
    cuts: list[tuple[int, int]] = field(default_factory=list)  # [start, end)
    cie_of: dict[int, int] = field(default_factory=dict)  # FDE start -> its CIE start


@dataclass(slots=True)
class _Plan:
    """What goes: sections, symbols (per table), byte ranges cut from (or zeroed in) kept sections."""

    elf: ElfFile
    tables: dict[int, _Table]  # by section index
    main: _Table  # .symtab: .nv.callgraph and .nv.prototype index it
    relocs: dict[int, list[Relocation]]  # every relocation section, Mercury ones included
    sections: set[int] = field(default_factory=set)
    zeroed: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # section -> [start, end)
    frames: dict[int, _Frame] = field(default_factory=dict)

    def table_of(self, sec: Section) -> _Table:
        t = self.tables.get(sec.sh_link)
        if t is None:
            raise FormatError(f"section {sec.name!r}: sh_link {sec.sh_link} is not a symbol table", fmt=_FMT,
                              where=self.elf.where, value=sec.sh_link)
        return t


_MAX_ALIGN = 1 << 16  # a larger (or non power of two) sh_addralign is corrupt input, not padding to write


def prune_cubin(data: bytes, remove: Set[str], *, where: str = "") -> bytes:
    """Return relocatable cubin ``data`` without the functions and variables named in ``remove``.

    See the module docstring for what is rewritten.  Raises :class:`UsageError` when a
    name is not defined here or something kept still refers to it, and
    :class:`FormatError` when the cubin is malformed.
    """
    elf = _open(data, where)
    if not remove:
        return bytes(data)
    plan = _plan(elf, set(remove))
    return _write(plan)


def removable(data: bytes, remove: Set[str], *, where: str = "") -> str | None:
    """``None`` when :func:`prune_cubin` accepts ``remove``, else the reason it refuses."""
    try:
        _plan(_open(data, where), set(remove))
    except UsageError as e:
        return e.message
    return None


# --------------------------------------------------------------------------- checks


def _open(data: bytes, where: str) -> ElfFile:
    elf = ElfFile(data, where=where)
    h = elf.header
    if h.e_machine != C.EM_CUDA:
        raise UsageError(f"not a cubin: e_machine is {h.e_machine}, not EM_CUDA (190)", fmt=_FMT, where=where)
    if h.e_type != C.ET_REL or elf.segments:
        raise UsageError("only relocatable cubins (ET_REL: nvcc -rdc=true -cubin, nvcc -dc, ptxas -c) can have "
                         "functions removed; this one is already linked", fmt=_FMT, where=where)
    if not h.little or not h.is64:
        raise UsageError("only little-endian ELF64 cubins are supported", fmt=_FMT, where=where)
    for s in elf.sections:
        if s.sh_type == C.SHT_SYMTAB_SHNDX:
            raise UsageError("extended section numbering (SHT_SYMTAB_SHNDX) is not supported", fmt=_FMT, where=where)
    tables = [t for t in elf.symbol_tables.values() if t.section.sh_type == C.SHT_SYMTAB]
    if len(tables) != 1:
        raise FormatError(f"a cubin has one symbol table, this one has {len(tables)}", fmt=_FMT, where=where)
    merc = elf.sections_of_type(SHT_CUDA_MERC_SYMTAB)
    if len(merc) > 1:
        raise FormatError(f"a cubin has at most one .nv.merc.symtab, this one has {len(merc)}", fmt=_FMT,
                          where=where)
    return elf


def _read_symbols(elf: ElfFile, sec: Section) -> list[Symbol]:
    """Every entry of symbol table ``sec`` (``.symtab`` or ``.nv.merc.symtab``: the same Elf64_Sym rows)."""
    if sec.sh_type == C.SHT_SYMTAB:
        table = elf.symbol_tables[sec.index]
        return [table[i] for i in range(len(table))]
    lay = L.SYM[C.ELFCLASS64]
    if sec.sh_entsize != lay.size or sec.sh_size % lay.size:
        raise FormatError(f"{sec.name!r}: not a table of {lay.size}-byte symbols (sh_entsize {sec.sh_entsize}, "
                          f"sh_size {sec.sh_size:#x})", fmt=_FMT, where=elf.where)
    if not 0 < sec.sh_link < len(elf.sections) or elf.sections[sec.sh_link].sh_type != C.SHT_STRTAB:
        raise FormatError(f"{sec.name!r}: sh_link {sec.sh_link} is not a string table", fmt=_FMT, where=elf.where)
    strings = elf.sections[sec.sh_link].view
    out = []
    for i, row in enumerate(sec.view.iter_unpack(lay.fmt, 0, sec.sh_size // lay.size, sec.name)):
        d = dict(zip(lay.fields, row, strict=True))
        name = strings.cstr(d["st_name"], "symbol name") if d["st_name"] else ""
        out.append(Symbol(index=i, name=name, **d))
    return out


def _read_relocations(elf: ElfFile, sec: Section) -> list[Relocation]:
    if sec.sh_type in (C.SHT_REL, C.SHT_RELA):
        return elf.relocation_table(sec.index)
    lay = L.RELA[C.ELFCLASS64]  # .nv.merc.rela.*: Elf64_Rela
    if sec.sh_entsize not in (0, lay.size) or sec.sh_size % lay.size:
        raise FormatError(f"{sec.name!r}: not a table of {lay.size}-byte relocations", fmt=_FMT, where=elf.where)
    return [Relocation(off, L.r_sym(C.ELFCLASS64, info), L.r_type(C.ELFCLASS64, info), addend)
            for off, info, addend in sec.view.iter_unpack(lay.fmt, 0, sec.sh_size // lay.size, sec.name)]


# --------------------------------------------------------------------------- planning


def _plan(elf: ElfFile, remove: set[str]) -> _Plan:
    tables = {s.index: _Table(s, _read_symbols(elf, s)) for s in elf.sections if s.sh_type in _SYMTABS}
    main = next(t for t in tables.values() if t.section.sh_type == C.SHT_SYMTAB)
    relocs = {s.index: _read_relocations(elf, s) for s in elf.sections if s.sh_type in _RELOCS}
    plan = _Plan(elf, tables, main, relocs)
    _resolve_names(plan, remove)
    _close_sections(plan)
    for t in tables.values():
        t.removed |= {s.index for s in t.symbols if s.index and 0 < s.st_shndx < C.SHN_LORESERVE
                      and s.st_shndx in plan.sections}
    _plan_debug_frames(plan)
    kept_refs, removed_refs = _references(plan)
    for ti, t in tables.items():
        for si in sorted(t.removed):
            if (ti, si) in kept_refs:
                raise UsageError(f"cannot remove {t.name(si)!r}: {kept_refs[ti, si]} still refers to it",
                                 fmt=_FMT, where=elf.where)
        for s in t.symbols:  # undefined functions only removed code called
            if (s.index and s.st_shndx == C.SHN_UNDEF and s.type == C.STT_FUNC and (ti, s.index) in removed_refs
                    and (ti, s.index) not in kept_refs):
                t.removed.add(s.index)
    return plan


def _function_section(plan: _Plan, t: _Table, s: Symbol) -> Section | None:
    """The ``.text.<f>`` (``.nv.capmerc.text.<f>`` in the Mercury table) that function ``s`` owns."""
    sec = plan.elf.sections[s.st_shndx]
    for prefix, sh_type in _TEXT_PREFIXES:
        if sec.name.startswith(prefix) and sec.sh_type == sh_type and sec.sh_link == t.section.index:
            return sec if sec.sh_info & 0xFFFFFF == s.index else None
    return None


def _resolve_names(plan: _Plan, remove: set[str]) -> None:
    elf = plan.elf
    for t in [plan.main, *(t for t in plan.tables.values() if t is not plan.main)]:
        by_name: dict[str, list[Symbol]] = {}
        for s in t.symbols:
            if s.index and s.name and s.defined and s.type in (C.STT_FUNC, C.STT_OBJECT, C.STT_CUDA_OBJECT):
                by_name.setdefault(s.name, []).append(s)
        for name in sorted(remove):
            found = by_name.get(name)
            if not found:
                if t is plan.main:
                    raise UsageError(f"cannot remove {name!r}: no function or variable of that name is defined in "
                                     "this cubin", fmt=_FMT, where=elf.where)
                continue  # not in the Mercury table: nothing of it there to remove
            for s in found:
                t.removed.add(s.index)
                if s.st_shndx >= min(C.SHN_LORESERVE, len(elf.sections)):
                    continue  # SHN_ABS/SHN_COMMON: the symbol is all there is
                sec = elf.sections[s.st_shndx]
                if s.type == C.STT_FUNC:
                    text = _function_section(plan, t, s)
                    if text is None:
                        raise UsageError(f"cannot remove function {name!r}: it is not the function of its section "
                                         f"{sec.name!r}", fmt=_FMT, where=elf.where)
                    plan.sections.add(text.index)
                elif sec.sh_flags & C.SHF_EXECINSTR:
                    raise UsageError(f"cannot remove {name!r}: a data symbol inside code section {sec.name!r}",
                                     fmt=_FMT, where=elf.where)
                elif sec.file_size:
                    end = s.st_value + s.st_size
                    if end > sec.file_size:
                        raise FormatError(f"variable {name!r} ends at {end:#x}, past its section {sec.name!r}",
                                          fmt=_FMT, where=elf.where, value=sec.file_size)
                    ranges = plan.zeroed.setdefault(sec.index, [])
                    if (s.st_value, end) not in ranges:
                        ranges.append((s.st_value, end))


def _close_sections(plan: _Plan) -> None:
    """Add every section tied to a removed one by ``sh_info`` (relocations, ``SHF_INFO_LINK``)."""
    secs = plan.elf.sections
    changed = True
    while changed:
        changed = False
        for s in secs[1:]:
            if s.index not in plan.sections and _info_is_index(s) and s.sh_info in plan.sections:
                plan.sections.add(s.index)
                changed = True
    if plan.elf.header.e_shstrndx in plan.sections:
        name = secs[plan.elf.header.e_shstrndx].name
        raise FormatError(f"cannot remove section {name!r}: it is the section-name table (e_shstrndx) but is "
                          "tied to a removed section", fmt=_FMT, where=plan.elf.where, value=plan.elf.header.e_shstrndx)
    for s in secs[1:]:
        if s.index not in plan.sections and s.sh_link in plan.sections:
            raise UsageError(f"cannot remove section {secs[s.sh_link].name!r}: {s.name!r} links to it",
                             fmt=_FMT, where=plan.elf.where)


def _info_is_index(s: Section) -> bool:
    return s.sh_type in _RELOCS or bool(s.sh_flags & C.SHF_INFO_LINK)


def _in(ranges: Iterable[tuple[int, int]], offset: int) -> bool:
    return any(a <= offset < b for a, b in ranges)


def _cut_ranges(plan: _Plan, section: int) -> list[tuple[int, int]]:
    frame = plan.frames.get(section)
    if frame is not None and frame.cuts:
        return frame.cuts
    return plan.zeroed.get(section, [])


def _references(plan: _Plan) -> tuple[dict[tuple[int, int], str], set[tuple[int, int]]]:
    """(table, symbol) -> first kept thing that refers to it; and those removed content refers to."""
    elf = plan.elf
    kept: dict[tuple[int, int], str] = {}
    gone: set[tuple[int, int]] = set()
    for ri, relocs in plan.relocs.items():
        rsec = elf.sections[ri]
        ti = plan.table_of(rsec).section.index
        cuts = _cut_ranges(plan, rsec.sh_info)
        for r in relocs:
            if ri in plan.sections or _in(cuts, r.r_offset):
                gone.add((ti, r.r_sym))
            else:
                kept.setdefault((ti, r.r_sym), f"relocation at {r.r_offset:#x} in {rsec.name!r}")
    main = plan.main.section.index
    for sec in elf.sections_of_type(SHT_CUDA_CALLGRAPH):
        for marker, a, b in _callgraph_rows(sec):
            if marker in (-1, -4):
                what = "a direct call" if marker == -1 else "an address reference"
                if a in plan.main.removed:
                    gone.add((main, b))
                else:
                    kept.setdefault((main, b), f"{what} from {plan.main.name(a)!r} in .nv.callgraph")
    return kept, gone


def _plan_debug_frames(plan: _Plan) -> None:
    """Find the CIE/FDE entries of ``.debug_frame`` (and ``.nv.merc.debug_frame``) of removed functions."""
    for name in (".debug_frame", ".nv.merc.debug_frame"):
        sec = plan.elf.section(name)
        if sec is None or sec.index in plan.sections or not sec.file_size:
            continue
        targets: dict[int, set[int]] = {}  # offset -> symbols relocations there refer to
        table: _Table | None = None
        for ri, relocs in plan.relocs.items():
            rsec = plan.elf.sections[ri]
            if rsec.sh_info == sec.index:
                table = plan.table_of(rsec)
                for r in relocs:
                    targets.setdefault(r.r_offset, set()).add(r.r_sym)
        frame = plan.frames[sec.index] = _Frame(sec.index, table.section.index if table else -1)
        removed = table.removed if table is not None else set()
        cie = -1
        groups: list[tuple[int, int, list[tuple[int, int, bool]]]] = []  # CIE (start, end), its FDEs
        for start, end, is_cie in _frame_entries(sec):
            if is_cie:
                groups.append((start, end, []))
                cie = start
                continue
            gone = any(t & removed for off, t in targets.items() if start <= off < end)
            if not groups:
                if gone:
                    raise FormatError(f"an FDE before any CIE in {name}", fmt=_FMT, where=plan.elf.where,
                                      offset=start)
                continue
            groups[-1][2].append((start, end, gone))
            frame.cie_of[start] = cie
        for c_start, c_end, fdes in groups:
            if fdes and all(g for _, _, g in fdes):
                frame.cuts.append((c_start, c_end))
            frame.cuts += [(s, e) for s, e, g in fdes if g]
        frame.cuts.sort()


def _frame_entries(sec: Section) -> list[tuple[int, int, bool]]:
    """(start, end, is CIE) of each entry of a ``.debug_frame`` (32- or 64-bit DWARF)."""
    v = sec.view
    out: list[tuple[int, int, bool]] = []
    at = 0
    while at < len(v):
        (length,) = v.unpack("I", at, ".debug_frame entry length")
        head, id_size = (12, 8) if length == 0xFFFFFFFF else (4, 4)
        if head == 12:
            (length,) = v.unpack("Q", at + 4, ".debug_frame entry length")
        end = at + head + length
        v.check(at, head + length, ".debug_frame entry")
        if length < id_size:
            raise v.error(".debug_frame entry shorter than its CIE id", at, length)
        (cid,) = v.unpack("Q" if id_size == 8 else "I", at + head, ".debug_frame CIE id")
        out.append((at, end, cid == _CIE_ID[head]))
        at = end
    return out


# --------------------------------------------------------------------------- rewriting


def _write(plan: _Plan) -> bytes:
    elf = plan.elf
    kept_secs = [s.index for s in elf.sections if s.index not in plan.sections]
    sections = {old: new for new, old in enumerate(kept_secs)}
    for t in plan.tables.values():
        t.new_index = {old: new for new, old in enumerate(i for i in range(len(t.symbols)) if i not in t.removed)}
    contents: dict[int, bytes] = {}
    infos: dict[int, int] = {}
    for s in elf.sections[1:]:
        if s.index in plan.sections:
            continue
        frame = plan.frames.get(s.index)
        if s.sh_type in _SYMTABS:
            t = plan.tables[s.index]
            contents[s.index] = _symtab(plan, t, sections)
            infos[s.index] = sum(1 for i in range(min(s.sh_info, len(t.symbols))) if i not in t.removed)
        elif s.sh_type in _RELOCS:
            contents[s.index] = _relocations(plan, s)
        elif s.sh_type in _INFOS:
            contents[s.index] = _nvinfo(plan, plan.table_of(s), s)
        elif s.sh_type == SHT_CUDA_CALLGRAPH:
            contents[s.index] = _callgraph(plan, s)
        elif s.sh_type == SHT_CUDA_PROTOTYPE:
            contents[s.index] = _prototypes(plan, s)
        elif frame is not None and frame.cuts:
            contents[s.index] = _cut(bytes(s.data), frame.cuts)
        elif s.sh_type == SHT_CUDA_CAPMERC_TEXT:
            contents[s.index] = _capsule(plan, s, sections)
        elif s.index in plan.zeroed:
            raw = bytearray(s.data)
            for a, b in plan.zeroed[s.index]:
                raw[a:b] = bytes(b - a)
            contents[s.index] = bytes(raw)
        if any(s.name.startswith(prefix) and s.sh_type == sh_type for prefix, sh_type in _TEXT_PREFIXES):
            t = plan.table_of(s)
            sym = s.sh_info & 0xFFFFFF
            if sym not in t.new_index:
                raise FormatError(f"{s.name!r}: sh_info names symbol {sym}, which is not kept", fmt=_FMT,
                                  where=elf.where)
            infos[s.index] = (s.sh_info & 0xFF000000) | t.new_index[sym]
    return _emit(elf, kept_secs, sections, contents, infos)


def _capsule(plan: _Plan, sec: Section, sections: dict[int, int]) -> bytes:
    """``.nv.capmerc.text.<f>`` with its first word, the section index of ``.text.<f>`` (the SASS of the same
    function: verified on every function ptxas 13.0 writes for sm_100-sm_121), renumbered; nvlink 13.0
    dereferences a null pointer when it names another section."""
    (text,) = sec.view.unpack("I", 0, "capsule's .text section index")
    if text not in sections:
        what = plan.elf.sections[text].name if 0 < text < len(plan.elf.sections) else f"section {text}"
        raise UsageError(f"{sec.name!r} is kept but its code section {what!r} is removed", fmt=_FMT,
                         where=plan.elf.where)
    return struct.pack("<I", sections[text]) + bytes(sec.data)[4:]


def _symtab(plan: _Plan, t: _Table, sections: dict[int, int]) -> bytes:
    lay = L.SYM[C.ELFCLASS64]
    out = Emitter()
    for i, row in enumerate(t.section.view.iter_unpack(lay.fmt, 0, len(t.symbols), "symbol table")):
        if i in t.removed:
            continue
        vals = dict(zip(lay.fields, row, strict=True))
        if 0 < vals["st_shndx"] < C.SHN_LORESERVE:
            if vals["st_shndx"] not in sections:
                raise FormatError(f"symbol {i} is defined in section {vals['st_shndx']}, which does not exist",
                                  fmt=_FMT, where=plan.elf.where)
            vals["st_shndx"] = sections[vals["st_shndx"]]
        out.pack(lay.fmt, *(vals[f] for f in lay.fields))
    return out.getvalue()


def _frame_shift(frame: _Frame, offset: int) -> int:
    return sum(b - a for a, b in frame.cuts if b <= offset)


def _relocations(plan: _Plan, rsec: Section) -> bytes:
    rela = rsec.sh_type != C.SHT_REL
    lay = (L.RELA if rela else L.REL)[C.ELFCLASS64]
    relocs = plan.relocs.get(rsec.index, [])
    t = plan.table_of(rsec)
    frame = plan.frames.get(rsec.sh_info)
    if frame is not None and not frame.cuts:
        frame = None
    cuts = _cut_ranges(plan, rsec.sh_info)
    frame_sym = next((s.index for s in t.symbols if s.type == C.STT_SECTION and s.st_shndx == frame.index),
                     -1) if frame is not None else -1
    out = Emitter()
    for r in relocs:
        if _in(cuts, r.r_offset):
            continue
        if r.r_sym not in t.new_index:
            raise UsageError(f"relocation at {r.r_offset:#x} in {rsec.name!r} refers to a removed symbol",
                             fmt=_FMT, where=plan.elf.where)
        offset, addend = r.r_offset, r.r_addend
        if frame is not None:
            offset -= _frame_shift(frame, r.r_offset)
            if r.r_sym == frame_sym and addend is not None:
                fde = max((s for s in frame.cie_of if s <= r.r_offset), default=None)
                anchor = frame.cie_of[fde] if fde is not None else addend
                addend -= _frame_shift(frame, anchor)
        info = L.r_info(C.ELFCLASS64, t.new_index[r.r_sym], r.r_type)  # the type is copied, known or not
        if rela:
            out.pack(lay.fmt, offset, info, addend or 0)
        else:
            out.pack(lay.fmt, offset, info)
    return out.getvalue()


def _cut(data: bytes, cuts: list[tuple[int, int]]) -> bytes:
    out = bytearray()
    at = 0
    for a, b in cuts:
        out += data[at:a]
        at = b
    return bytes(out + data[at:])


def _nvinfo(plan: _Plan, t: _Table, sec: Section) -> bytes:
    raw = bytes(sec.data)
    out = bytearray()
    for rec in parse_nvinfo(sec.view):
        if rec.fmt not in (E.EIFMT_NVAL, E.EIFMT_BVAL, E.EIFMT_HVAL, E.EIFMT_SVAL):
            out += raw[rec.offset:]  # unsizeable: kept as is, to the end
            break
        chunk = raw[rec.offset:rec.offset + rec.raw_size]
        if rec.fmt == E.EIFMT_SVAL and len(rec.payload) >= 4 and rec.attr in _WORD0_SYMBOL | _SYMBOL_LIST:
            n = len(rec.payload) // 4
            words = list(struct.unpack_from(f"<{n}I", rec.payload))
            tail = rec.payload[4 * n:]
            if rec.attr in _SYMBOL_LIST:
                words = [t.new_index[w] for w in words if w not in t.removed and w in t.new_index]
                if not words:
                    continue
            elif words[0] in t.removed:
                if rec.attr in _FUNCTION_RECORDS:
                    continue
                raise UsageError(f"{sec.name!r}: {rec.name} still names removed symbol {t.name(words[0])!r}",
                                 fmt=_FMT, where=plan.elf.where)
            elif words[0] in t.new_index:
                words[0] = t.new_index[words[0]]
            payload = struct.pack(f"<{len(words)}I", *words) + tail
            chunk = struct.pack("<BBH", rec.fmt, rec.attr, len(payload)) + payload
        out += chunk
    return bytes(out)


def _callgraph_rows(sec: Section) -> list[tuple[int, int, int]]:
    """(block marker, a, b) for each entry of ``.nv.callgraph``; markers are (0, 0, -N)."""
    v = sec.view
    if len(v) % 8:
        raise v.error(".nv.callgraph size is not a multiple of 8", None, len(v))
    rows: list[tuple[int, int, int]] = []
    marker = 0
    for a, b in v.iter_unpack("Ii", 0, len(v) // 8, ".nv.callgraph entries"):
        if a == 0 and b < 0:
            marker = b
            rows.append((0, 0, b))
        elif marker == 0:
            raise v.error(".nv.callgraph entry before the first block marker", None, a)
        else:
            rows.append((marker, a, b))
    return rows


def _callgraph(plan: _Plan, sec: Section) -> bytes:
    out = Emitter()
    t = plan.table_of(sec)
    sym = t.new_index
    identity = all(k == v for k, v in sym.items())
    for marker, a, b in _callgraph_rows(sec):
        if marker == 0:
            out.pack("Ii", a, b)
        elif marker in (-1, -4):
            if a in t.removed or b in t.removed:
                continue
            out.pack("Ii", sym.get(a, a), sym.get(b, b))
        elif marker in (-2, -3):
            if a in t.removed:
                continue
            out.pack("Ii", sym.get(a, a), b)
        elif identity:
            out.pack("Ii", a, b)
        else:
            raise UsageError(f".nv.callgraph block {marker} is unknown: its symbol indices cannot be renumbered",
                             fmt=_FMT, where=plan.elf.where)
    return out.getvalue()


def _prototypes(plan: _Plan, sec: Section) -> bytes:
    v = sec.view
    t = plan.table_of(sec)
    out = Emitter()
    for s, o in v.iter_unpack("II", 0, len(v) // 8, ".nv.prototype entries"):
        if s not in t.removed:
            out.pack("II", t.new_index.get(s, s), o)
    out.write(bytes(v.bytes_at(len(v) // 8 * 8, len(v) % 8)))
    return out.getvalue()


def _emit(elf: ElfFile, kept: list[int], sections: dict[int, int], contents: dict[int, bytes],
          infos: dict[int, int]) -> bytes:
    """Compact layout: kept sections in original file order, then the section header table."""
    h = elf.header
    secs = elf.sections
    offsets: dict[int, int] = {}
    sizes: dict[int, int] = {}
    pos = L.EHDR_SIZE[C.ELFCLASS64]
    pieces: list[tuple[int, bytes]] = []
    for i in sorted(kept[1:], key=lambda j: (secs[j].sh_offset, j)):
        s = secs[i]
        data = contents.get(i)
        sizes[i] = len(data) if data is not None else s.sh_size
        if data is None and not s.file_size:
            offsets[i] = pos  # SHT_NOBITS and NVIDIA's NOBITS-like sections: memory only
            continue
        if data is None:
            data = bytes(s.data)
        align = max(1, s.sh_addralign)
        if align & (align - 1) or align > _MAX_ALIGN:
            raise FormatError(f"section {s.name!r}: sh_addralign is not a power of two up to {_MAX_ALIGN:#x}",
                              fmt="cubin", value=s.sh_addralign)
        pos = align_up(pos, align)
        offsets[i] = pos
        pieces.append((pos, data))
        pos += len(data)
    shoff = align_up(pos, 8)
    out = Emitter()
    out.write(elf.bytes()[:L.EI_NIDENT])
    ehdr = L.EHDR[C.ELFCLASS64]
    values = {f: getattr(h, f) for f in ehdr.fields}
    values.update(e_phoff=0, e_shoff=shoff, e_shnum=len(kept), e_shstrndx=sections[h.e_shstrndx])
    out.pack(ehdr.fmt, *(values[f] for f in ehdr.fields))
    for at, data in pieces:
        out.pad_to(at, "section")
        out.write(data)
    out.pad_to(shoff, "section header table")
    shdr = L.SHDR[C.ELFCLASS64]
    for i in kept:
        s = secs[i]
        if i == 0:
            out.write(bytes(shdr.size))
            continue
        info = infos.get(i, sections.get(s.sh_info, 0) if _info_is_index(s) and s.sh_info else s.sh_info)
        vals = {"sh_name": s.sh_name, "sh_type": s.sh_type, "sh_flags": s.sh_flags, "sh_addr": s.sh_addr,
                "sh_offset": offsets[i], "sh_size": sizes[i], "sh_link": sections.get(s.sh_link, 0),
                "sh_info": info, "sh_addralign": s.sh_addralign, "sh_entsize": s.sh_entsize}
        out.pack(shdr.fmt, *(vals[f] for f in shdr.fields))
    return out.getvalue()
