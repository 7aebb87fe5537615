"""Write a new ELF file from an :class:`~devbin.formats.elf.model.ElfModel`.

Two phases.  :func:`plan` is pure: it orders sections (null, allocated,
other user sections, relocation sections, ``.symtab``, ``.strtab``,
``.shstrtab``), sorts symbols (locals first, as ``sh_info`` requires), builds
string tables in first-use order, assigns file offsets, addresses and
segments.  :func:`emit` writes exactly that plan and checks every piece lands
where planned.  The output is deterministic: the same model gives the same
bytes, with no timestamps or host-dependent values.

For ``ET_EXEC``/``ET_DYN`` the writer makes one ``PT_LOAD`` per run of
allocated sections with the same permissions (each run starts on a new page,
``p_offset`` congruent to ``p_vaddr`` modulo the page size), plus
``PT_DYNAMIC`` and ``PT_NOTE`` for allocated ``SHT_DYNAMIC``/``SHT_NOTE``
sections.  Dynamic-linking contents (``.dynsym``, ``.hash``, ``.dynamic``) are
taken as given: the writer lays them out but does not generate them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from devbin.binary import Emitter, align_up
from devbin.errors import UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf import layout as L
from devbin.formats.elf.model import ElfModel, SymbolSpec

#: The largest section alignment the writer lays out (a larger one is corrupt input, not padding to write).
MAX_ALIGN = 1 << 16

__all__ = ["plan", "emit", "symbol_indices", "write"]


@dataclass(slots=True)
class _Sec:
    name: str
    sh_type: int
    flags: int
    data: bytes
    size: int
    addr: int
    align: int
    entsize: int
    link: int = 0
    info: int = 0
    offset: int = 0
    sh_name: int = 0


@dataclass(slots=True)
class Plan:
    model: ElfModel
    sections: list[_Sec] = field(default_factory=list)
    segments: list[tuple[int, int, int, int, int, int, int, int]] = field(default_factory=list)
    phoff: int = 0
    shoff: int = 0
    shstrndx: int = 0
    total: int = 0


class _StrTab:
    """A string table in first-use order; equal strings share one copy."""

    def __init__(self) -> None:
        self.data = bytearray(b"\0")
        self._at: dict[str, int] = {"": 0}

    def add(self, s: str) -> int:
        if s not in self._at:
            self._at[s] = len(self.data)
            self.data += s.encode("utf-8") + b"\0"
        return self._at[s]


def _perm(flags: int) -> int:
    return (C.PF_R | (C.PF_W if flags & C.SHF_WRITE else 0) | (C.PF_X if flags & C.SHF_EXECINSTR else 0))


def plan(model: ElfModel) -> Plan:
    ec = model.elfclass
    if ec not in (C.ELFCLASS32, C.ELFCLASS64):
        raise UsageError(f"ELF class must be 1 or 2, not {ec}")
    user = [s for s in model.sections if s.flags & C.SHF_ALLOC] + [
        s for s in model.sections if not s.flags & C.SHF_ALLOC
    ]
    names = [s.name for s in user]
    reserved = {".symtab", ".strtab", ".shstrtab"}
    if reserved & set(names):
        raise UsageError(f"the writer makes {sorted(reserved & set(names))} itself; do not add them")
    p = Plan(model)
    p.sections.append(_Sec("", 0, 0, b"", 0, 0, 0, 0))
    for s in user:
        if s.align < 0 or s.align & (s.align - 1) or s.align > MAX_ALIGN:
            raise UsageError(f"section {s.name!r}: alignment {s.align:#x} is not a power of two up to {MAX_ALIGN:#x}")
        size = s.size if s.sh_type == C.SHT_NOBITS and s.size is not None else len(s.data)
        p.sections.append(_Sec(s.name, s.sh_type, s.flags, b"" if s.sh_type == C.SHT_NOBITS else bytes(s.data),
                               size, s.addr or 0, max(s.align, 1), s.entsize))
    index = {sec.name: i for i, sec in reversed(list(enumerate(p.sections))) if i}
    syms = _sorted_symbols(model)
    order = {orig: new + 1 for new, (orig, _) in enumerate(syms)}
    strtab = _StrTab()
    sym_rows: list[dict[str, int]] = [dict(st_name=0, st_value=0, st_size=0, st_info=0, st_other=0, st_shndx=0)]
    for _, sym in syms:
        sym_rows.append(dict(
            st_name=strtab.add(sym.name), st_value=sym.value, st_size=sym.size,
            st_info=(sym.bind << 4) | (sym.type & 0xF), st_other=sym.other, st_shndx=_shndx(sym, index),
        ))
    by_name = symbol_indices(model)
    n_local = 1 + sum(1 for _, sym in syms if sym.bind == C.STB_LOCAL)
    # relocation sections
    rel_lay = (L.RELA if model.use_rela else L.REL)[ec]
    for target in sorted(model.relocations, key=lambda n: index.get(n, 1 << 30)):
        if target not in index:
            raise UsageError(f"relocations for unknown section {target!r}")
        out = Emitter(model.little)
        for r in model.relocations[target]:
            if isinstance(r.symbol, int):
                si = order[r.symbol - 1] if r.symbol else 0
            elif r.symbol in by_name:
                si = by_name[r.symbol]
            else:
                raise UsageError(f"relocation against unknown symbol {r.symbol!r}")
            info = L.r_info(ec, si, r.type)
            if model.use_rela:
                out.pack(rel_lay.fmt, r.offset, info, r.addend)
            else:
                out.pack(rel_lay.fmt, r.offset, info)
        name = (".rela" if model.use_rela else ".rel") + target
        p.sections.append(_Sec(name, C.SHT_RELA if model.use_rela else C.SHT_REL, C.SHF_INFO_LINK, out.getvalue(),
                               len(out), 0, 8 if ec == 2 else 4, rel_lay.size, info=index[target]))
    sym_lay = L.SYM[ec]
    if model.symbols or model.relocations:
        out = Emitter(model.little)
        for row in sym_rows:
            out.pack(sym_lay.fmt, *(row[f] for f in sym_lay.fields))
        symtab_i = len(p.sections)
        p.sections.append(_Sec(".symtab", C.SHT_SYMTAB, 0, out.getvalue(), len(out), 0, 8 if ec == 2 else 4,
                               sym_lay.size, link=symtab_i + 1, info=n_local))
        p.sections.append(_Sec(".strtab", C.SHT_STRTAB, 0, bytes(strtab.data), len(strtab.data), 0, 1, 0))
        for sec in p.sections:
            if sec.sh_type in (C.SHT_REL, C.SHT_RELA):
                sec.link = symtab_i
        index[".symtab"] = symtab_i
        index[".strtab"] = symtab_i + 1
    # user links and infos
    for spec, sec in zip(user, p.sections[1:], strict=False):
        if spec.link:
            if spec.link not in index:
                raise UsageError(f"section {spec.name!r} links to unknown section {spec.link!r}")
            sec.link = index[spec.link]
        if isinstance(spec.info, str):
            if spec.info not in index:
                raise UsageError(f"section {spec.name!r} info names unknown section {spec.info!r}")
            sec.info = index[spec.info]
            if sec.sh_type not in (C.SHT_REL, C.SHT_RELA):
                sec.flags |= C.SHF_INFO_LINK
        else:
            sec.info = spec.info
    shstr = _StrTab()
    p.shstrndx = len(p.sections)
    p.sections.append(_Sec(".shstrtab", C.SHT_STRTAB, 0, b"", 0, 0, 1, 0))
    for sec in p.sections[1:]:
        sec.sh_name = shstr.add(sec.name)
    p.sections[-1].data = bytes(shstr.data)
    p.sections[-1].size = len(shstr.data)
    _place(p)
    if model.e_type in (C.ET_EXEC, C.ET_DYN) and (model.symbols or model.relocations):
        _rebase_symbols(p, model)
    return p


def _rebase_symbols(p: Plan, model: ElfModel) -> None:
    """In loadable files a symbol's value is an address: add its section's ``sh_addr``.

    The model keeps values section-relative, as in relocatable objects, so the
    same model writes correctly as either kind.
    """
    ec = model.elfclass
    lay = L.SYM[ec]
    symtab = next(s for s in p.sections if s.name == ".symtab")
    out = Emitter(model.little)
    fmt = ("<" if model.little else ">") + lay.fmt
    for row in struct.iter_unpack(fmt, symtab.data):
        vals = dict(zip(lay.fields, row, strict=True))
        if 0 < vals["st_shndx"] < C.SHN_LORESERVE and vals["st_info"] & 0xF != C.STT_SECTION:
            vals["st_value"] += p.sections[vals["st_shndx"]].addr
        out.pack(lay.fmt, *(vals[f] for f in lay.fields))
    symtab.data = out.getvalue()


def _sorted_symbols(model: ElfModel) -> list[tuple[int, SymbolSpec]]:
    """Symbols in file order: locals first (``sh_info`` counts them), then the rest, stably."""
    return sorted(enumerate(model.symbols), key=lambda t: (t[1].bind != C.STB_LOCAL, t[0]))


def symbol_indices(model: ElfModel) -> dict[str, int]:
    """The ``.symtab`` index each symbol name will get (the first symbol of a name wins).

    Lets a caller encode sections that refer to symbols by index (devbin's own
    sections) before the file is written.
    """
    out: dict[str, int] = {}
    for new, (_, s) in enumerate(_sorted_symbols(model)):
        out.setdefault(s.name, new + 1)
    return out


def _shndx(s: SymbolSpec, index: dict[str, int]) -> int:
    if s.section is not None:
        if s.section not in index:
            raise UsageError(f"symbol {s.name!r} is in unknown section {s.section!r}")
        return index[s.section]
    return s.shndx if s.shndx is not None else C.SHN_UNDEF


def _place(p: Plan) -> None:
    m = p.model
    ec = m.elfclass
    loadable = m.e_type in (C.ET_EXEC, C.ET_DYN)
    allocs = [s for s in p.sections[1:] if s.flags & C.SHF_ALLOC]
    runs: list[list[_Sec]] = []
    if loadable:
        for s in allocs:
            if runs and _perm(runs[-1][-1].flags) == _perm(s.flags):
                runs[-1].append(s)
            else:
                runs.append([s])
    extra = [s for s in allocs if s.sh_type in (C.SHT_DYNAMIC, C.SHT_NOTE)] if loadable else []
    nseg = len(runs) + len(extra)
    pos = L.EHDR_SIZE[ec]
    if nseg:
        p.phoff = pos
        pos += nseg * L.PHDR[ec].size
    first_of_run = {id(r[0]) for r in runs}
    page = max(m.page_size, 1)
    vaddr_next = 0
    for s in p.sections[1:]:
        if loadable and s.flags & C.SHF_ALLOC:
            if id(s) in first_of_run:
                pos = align_up(pos, page) if pos > L.EHDR_SIZE[ec] + nseg * L.PHDR[ec].size or s.addr else pos
            pos = align_up(pos, s.align)
            if s.addr:
                pos += (s.addr - pos) % page
            else:
                s.addr = max(pos, align_up(vaddr_next, s.align))
                if (s.addr - pos) % page:
                    s.addr += (pos - s.addr) % page
            s.offset = pos
            vaddr_next = s.addr + s.size
            if s.sh_type != C.SHT_NOBITS:
                pos += s.size
        else:
            pos = align_up(pos, s.align)
            s.offset = pos
            if s.sh_type != C.SHT_NOBITS:
                pos += s.size
    p.shoff = align_up(pos, 8 if ec == C.ELFCLASS64 else 4)
    p.total = p.shoff + len(p.sections) * L.SHDR[ec].size
    for run in runs:
        filesz_end = max((s.offset + s.size for s in run if s.sh_type != C.SHT_NOBITS), default=run[0].offset)
        mem_end = max(s.addr + s.size for s in run)
        p.segments.append((C.PT_LOAD, _perm(run[0].flags), run[0].offset, run[0].addr, run[0].addr,
                           filesz_end - run[0].offset, mem_end - run[0].addr, page))
    for s in extra:
        ptype = C.PT_DYNAMIC if s.sh_type == C.SHT_DYNAMIC else C.PT_NOTE
        p.segments.append((ptype, _perm(s.flags), s.offset, s.addr, s.addr, s.size, s.size, s.align))


def emit(p: Plan) -> bytes:
    m = p.model
    ec = m.elfclass
    out = Emitter(m.little)
    ident = C.ELFMAG + bytes([ec, C.ELFDATA2LSB if m.little else C.ELFDATA2MSB, C.EV_CURRENT, m.osabi,
                              m.abiversion]) + bytes(7)
    out.write(ident)
    nsec = len(p.sections)
    hdr = dict(
        e_type=m.e_type, e_machine=m.machine, e_version=C.EV_CURRENT, e_entry=m.entry, e_phoff=p.phoff,
        e_shoff=p.shoff, e_flags=m.flags, e_ehsize=L.EHDR_SIZE[ec],
        e_phentsize=L.PHDR[ec].size if p.segments else 0, e_phnum=len(p.segments),
        e_shentsize=L.SHDR[ec].size, e_shnum=nsec if nsec < C.SHN_LORESERVE else 0,
        e_shstrndx=p.shstrndx if p.shstrndx < C.SHN_LORESERVE else C.SHN_XINDEX,
    )
    lay = L.EHDR[ec]
    out.pack(lay.fmt, *(hdr[f] for f in lay.fields))
    if p.segments:
        out.at(p.phoff, "program header table")
        play = L.PHDR[ec]
        for ptype, pflags, off, vaddr, paddr, filesz, memsz, align in p.segments:
            vals = dict(p_type=ptype, p_flags=pflags, p_offset=off, p_vaddr=vaddr, p_paddr=paddr, p_filesz=filesz,
                        p_memsz=memsz, p_align=align)
            out.pack(play.fmt, *(vals[f] for f in play.fields))
    for s in p.sections[1:]:
        if s.sh_type == C.SHT_NOBITS:
            continue
        out.pad_to(s.offset, s.name)
        out.write(s.data)
    out.pad_to(p.shoff, "section header table")
    slay = L.SHDR[ec]
    for i, s in enumerate(p.sections):
        size, link = s.size, s.link
        if i == 0:
            size = nsec if nsec >= C.SHN_LORESERVE else 0
            link = p.shstrndx if p.shstrndx >= C.SHN_LORESERVE else 0
        vals = dict(sh_name=s.sh_name, sh_type=s.sh_type, sh_flags=s.flags, sh_addr=s.addr, sh_offset=s.offset,
                    sh_size=size, sh_link=link, sh_info=s.info, sh_addralign=s.align if i else 0,
                    sh_entsize=s.entsize)
        out.pack(slay.fmt, *(vals[f] for f in slay.fields))
    if len(out) != p.total:
        raise UsageError(f"layout error: planned {p.total:#x} bytes, wrote {len(out):#x}")
    return out.getvalue()


def write(model: ElfModel) -> bytes:
    """Plan and emit ``model``; deterministic."""
    return emit(plan(model))

