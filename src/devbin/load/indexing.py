"""Indexing a code object (:func:`index_code_object`): the ELF checked, its vendor and kind, and
the records of :mod:`devbin.load.indexed` made: AMDGPU code objects from ``.dynsym`` first (the
rest of ``.symtab`` on first use), cubins from their symbol table, ``.nv.info`` and sections.
Symbol tables are read through their bulk columns and :meth:`SymbolTable.globals`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from devbin.binary import ByteView
from devbin.errors import DeviceBinaryError, FormatError, NotThisFormat, UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Section, SymbolTable
from devbin.load.indexed import (
    R_NONE,
    R_RELATIVE64,
    RELOC_WIDTH,
    STT_AMDGPU_HSA_KERNEL,
    STT_CUDA_OBJECT,
    DynReloc,
    ExportTable,
    Holders,
    IndexedCodeObject,
    NvReloc,
    ObjDefinition,
    ObjReference,
    Piece,
)
from devbin.targets.amdgpu.mach import decode_flags
from devbin.targets.nvidia.cubin import SHT_CUDA_INFO, cubin_arch
from devbin.targets.nvidia.nvinfo import parse_nvinfo

__all__ = ["NV_DRIVER_SYMBOLS", "index_code_object"]

ELFOSABI_AMDGPU_HSA = 64
_NV_UNMAPPED = frozenset({0x70000009, 0x7000000A, 0x70000015})  # .nv.local.*, .nv.shared.*, reserved shared
#: ... and by name: a linked (executable) cubin gives ``.nv.shared.<f>`` and ``.nv.local.<f>`` the type
#: SHT_NOBITS (seen in libcurand's sm_90 cubins), as nvlink turns ``.nv.constant0.<f>`` into PROGBITS.
_NV_UNMAPPED_PREFIXES = (".nv.shared.", ".nv.local.")
_DATA_TYPES = {C.STT_OBJECT, STT_CUDA_OBJECT, C.STT_COMMON}
_DEFINITION_TYPES = frozenset({C.STT_FUNC, STT_AMDGPU_HSA_KERNEL, *_DATA_TYPES})
_EXPORT_BINDINGS = (C.STB_GLOBAL, C.STB_WEAK)
_EXPORT_VISIBILITIES = (C.STV_DEFAULT, C.STV_PROTECTED)


# ------------------------------------------------------------------------------------------ entry


def index_code_object(data: bytes | bytearray | memoryview, name: str) -> IndexedCodeObject:
    """Parse and index one code object; FormatError/UsageError (naming ``name``) if it cannot be loaded."""
    view = ByteView(data, fmt="elf", where=name)
    try:
        elf = ElfFile(view, where=name)
    except NotThisFormat:
        raise UsageError("not a code object (no ELF header); give a package to load_package()", where=name) \
            from None
    h = elf.header
    if h.e_machine == C.EM_AMDGPU:
        return _index_amdgpu(elf, name)
    if h.e_machine == C.EM_CUDA:
        return _index_cubin(elf, name)
    raise UsageError(f"not a device code object: e_machine {C.simple_name(C.EM_NAMES, h.e_machine)} "
                     "(expected an AMDGPU code object or a cubin)", where=name)


#: Where a definition lies in the code object, from its ``st_shndx`` and ``st_value`` (None: not mapped).
OffsetOf = Callable[[int, int], "int | None"]


def _candidates(table: SymbolTable) -> Iterator[tuple[int, str]]:
    """(index, name) of every named, defined function or data symbol in a regular section, in table order."""
    c = table.columns
    rows = [i for i, (info, shndx, st_name) in enumerate(zip(c.st_info, c.st_shndx, c.st_name, strict=True))
            if st_name and 0 < shndx < C.SHN_LORESERVE and info & 0xF in _DEFINITION_TYPES]
    return ((i, n) for i, n in zip(rows, table.names(rows), strict=True) if n)


def _definition(elf: ElfFile, table: SymbolTable, i: int, name: str, offset: int, exported: bool) -> ObjDefinition:
    c = table.columns
    shndx, info, other = c.st_shndx[i], c.st_info[i], c.st_other[i]
    sec = elf.sections[shndx].name if shndx < len(elf.sections) else ""
    return ObjDefinition(name, info & 0xF, offset, c.st_size[i], sec, c.st_value[i], C.binding_word(info >> 4),
                         C.visibility_word(other & 3), exported)


def _definitions(elf: ElfFile, table: SymbolTable | None, exported: frozenset[str],
                 offset_of: OffsetOf) -> tuple[ObjDefinition, ...]:
    """Every named function and data definition (once per name and offset), in table order."""
    if table is None:
        return ()
    c = table.columns
    out: list[ObjDefinition] = []
    seen: set[tuple[str, int]] = set()
    for i, name in _candidates(table):
        off = offset_of(c.st_shndx[i], c.st_value[i])
        if off is None or (name, off) in seen:
            continue
        seen.add((name, off))
        out.append(_definition(elf, table, i, name, off, name in exported))
    return tuple(out)


def _exports(elf: ElfFile, table: SymbolTable | None, offset_of: OffsetOf) -> ExportTable:
    """The first definition of each exportable name, as :func:`_definitions` would list it, without
    making a record for any of them (see :class:`ExportTable`); one pass over the table."""
    if table is None:
        return ExportTable({}, frozenset(), frozenset())
    c = table.columns
    defined = [i for i, shndx in enumerate(c.st_shndx) if shndx]
    named = [(i, n) for i, n in zip(defined, table.names(defined), strict=True) if n]
    info, other, shndx, value = c.st_info, c.st_other, c.st_shndx, c.st_value
    names = frozenset(n for i, n in named if info[i] >> 4 in _EXPORT_BINDINGS and other[i] & 3 in _EXPORT_VISIBILITIES)
    rows: dict[str, int] = {}
    for i, n in named:
        if n in names and n not in rows and shndx[i] < C.SHN_LORESERVE and info[i] & 0xF in _DEFINITION_TYPES \
                and offset_of(shndx[i], value[i]) is not None:
            rows[n] = i
    weak = frozenset(n for n, i in rows.items() if info[i] >> 4 == C.STB_WEAK)

    def build(name: str, i: int) -> ObjDefinition:
        off = offset_of(shndx[i], value[i])
        assert table is not None and off is not None
        return _definition(elf, table, i, name, off, True)

    return ExportTable(rows, weak, names, build)


# ------------------------------------------------------------------------------------------ AMDGPU


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
    exported = _exports(elf, dyn, _st_value)
    undefined = tuple((r.name, r.weak) for r in _references(dyn, {}))
    obj = IndexedCodeObject(name, "amdgpu", elf, arch, generic, span, align, tuple(pieces), exported, undefined,
                            _index_rest=_amdgpu_rest)
    obj._dyn_relocs = _amdgpu_relocations(elf, obj)  # checked now: a bad one fails the load
    return obj


def _st_value(_shndx: int, value: int) -> int:
    return value


def _amdgpu_rest(obj: IndexedCodeObject) -> tuple[tuple[ObjDefinition, ...], tuple[ObjReference, ...],
                                                  tuple[DynReloc, ...]]:
    elf = obj.elf
    dyn = elf.dynsym
    definitions = _definitions(elf, elf.symtab or dyn, obj.exported.names, _st_value)
    obj._indexed = (definitions, (), ())  # the holders (relocation sites) need the definitions
    holders = Holders(obj)
    relocs = tuple(r.at_site(holders.at(r.offset)) for r in obj._dyn_relocs)
    sites: dict[str, list[str]] = {}
    for r in relocs:
        if r.symbol is not None:
            sites.setdefault(r.symbol, []).append(r.site)
    return definitions, _references(dyn, sites), relocs


#: Symbols a CUDA driver supplies itself (reserved shared memory; the unified function/data
#: tables nvlink fills): never looked up among code objects, never "unresolved".
NV_DRIVER_SYMBOLS = (".nv.reservedSmem", "__UFT", "__UDT")


def _references(table: SymbolTable | None, sites: dict[str, list[str]],
                driver: tuple[str, ...] = ()) -> tuple[ObjReference, ...]:
    """The named undefined non-local symbols of ``table``, with the places that need them."""
    if table is None:
        return ()
    out: dict[str, ObjReference] = {}
    for sym in table.globals(bindings=None, defined=False):
        if sym.name not in out:
            optional = sym.bind == C.STB_WEAK or sym.name.startswith(driver or ("\0",))
            out[sym.name] = ObjReference(sym.name, optional, tuple(sites.get(sym.name, ())))
    return tuple(out.values())


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
            out.append(DynReloc(r.r_offset, r.r_type, symbol, local, r.r_addend, weak, "", sym_name))
    return tuple(out)


# ------------------------------------------------------------------------------------------ NVIDIA


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
    exported = _exports(elf, table, offset_of)
    definitions = _definitions(elf, table, exported.names, offset_of)
    obj = IndexedCodeObject(name, "nvidia", elf, arch, 1, cursor, 256, tuple(pieces), exported, (),
                            _indexed=(definitions, (), ()))
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
            nv.append(NvReloc(target.name, r.r_offset, r.r_type, sym.name, r.r_addend or 0))
            if not sym.defined:
                sites.setdefault(sym.name, []).append(holders.at(off))
    refs = _references(table, sites, NV_DRIVER_SYMBOLS)
    obj._indexed = (definitions, refs, ())
    obj.undefined = tuple((r.name, r.weak) for r in refs)
    obj.nv_relocations = tuple(nv)
    return obj
