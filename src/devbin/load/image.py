"""Step 1 of loading a code object: parse and index it (no device memory is touched).

:func:`index_code_object` checks the ELF, its vendor and kind, and records what the later
steps need, all relative to the code object's own base address ("object offsets"):

* ``pieces``: the ranges to map.  AMDGPU (an ``ET_DYN`` from ``ld.lld -shared``, what ROCr
  loads): one piece per ``PT_LOAD`` at its ``p_vaddr`` (file bytes, zeros up to
  ``p_memsz``), so the code object keeps the exact layout the linker gave it.  NVIDIA
  cubins have no program headers that matter to a driver: every allocated section that
  lives in global or constant memory is a piece, placed one after another in section order
  at its ``sh_addralign``; ``.nv.shared.*`` (per block) and ``.nv.local.*`` (per thread)
  are not device-global memory and are not mapped.
* ``definitions``: every named function and data symbol with its object offset, and
  whether it is *exported* (binds other code objects' references: an AMDGPU ``.dynsym``
  entry that is global/weak and not hidden; a cubin's global/weak symbols).  An AMDGPU
  code object is indexed from ``.dynsym`` alone (``exported``, ``undefined``, the dynamic
  relocations checked); its ``.symtab`` (``definitions``, and ``references``/``relocations``
  with their sites) is read on first use: ROCr binds across code objects through
  ``.dynsym`` only, where an ``ET_DYN``'s undefined references and exports both live.
  ``exported`` (:class:`ExportTable`) holds only names at first, read from the table's raw
  columns (:attr:`~devbin.formats.elf.reader.SymbolTable.columns`): a definition's record is
  made when something asks for it, so loading 10,000 kernels makes no per-symbol object.
* ``references``: undefined symbols with who needs them (the relocated place, as
  ``holder+0xoff``), weak or not.
* ``relocations`` (AMDGPU): the dynamic relocations, checked now so that a bad one fails
  the load, not the freeze.  Only the sections without a target section (``sh_info`` 0:
  ``.rela.dyn``) are dynamic; static ones kept by ``--emit-relocs`` are skipped, as ROCr
  does, and only the five types ROCr applies are accepted (anything else is
  ``HSA_STATUS_ERROR_INVALID_CODE_OBJECT`` there, a :class:`FormatError` here).
  Cubin relocations (``R_CUDA_*`` in SASS) are *recorded*, resolved at freeze, and left
  for the driver to apply: patching SASS is the driver's job.

The unified model (:attr:`IndexedCodeObject.model`: registers, stack, calling convention,
call graph) is imported on first use, from the devbin sections when present, else the
vendor's metadata; lazy loading needs it, eager ``freeze()`` reads it once for symbols.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from devbin.binary import ByteView
from devbin.binary.spans import SpanIndex
from devbin.errors import DeviceBinaryError, FormatError, NotThisFormat, UsageError
from devbin.formats.devsec.elf import devbin_sections, read_code_object
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Section, SymbolTable
from devbin.importers import import_code_object
from devbin.model import CallGraph, CodeObject, Function
from devbin.targets.amdgpu.importer import import_amdgpu
from devbin.targets.amdgpu.mach import decode_flags
from devbin.targets.nvidia.cubin import SHT_CUDA_INFO, cubin_arch
from devbin.targets.nvidia.importer import import_cubin
from devbin.targets.nvidia.nvinfo import parse_nvinfo

__all__ = ["DynReloc", "ExportTable", "IndexedCodeObject", "ObjDefinition", "ObjReference", "Piece",
           "RELOC_WIDTH", "index_code_object"]

R_NONE, R_ABS32_LO, R_ABS32_HI, R_ABS64, R_ABS32, R_RELATIVE64 = 0, 1, 2, 3, 6, 13
#: The dynamic relocations ROCr applies, and the bytes each writes (reference §4.6).
RELOC_WIDTH = {R_NONE: 0, R_ABS32_LO: 4, R_ABS32_HI: 4, R_ABS64: 8, R_ABS32: 4, R_RELATIVE64: 8}

ELFOSABI_AMDGPU_HSA = 64
STT_CUDA_OBJECT = 13
STT_AMDGPU_HSA_KERNEL = 10
_NV_UNMAPPED = frozenset({0x70000009, 0x7000000A, 0x70000015})  # .nv.local.*, .nv.shared.*, reserved shared
#: ... and by name: a linked (executable) cubin gives ``.nv.shared.<f>`` and ``.nv.local.<f>`` the type
#: SHT_NOBITS (seen in libcurand's sm_90 cubins), as nvlink turns ``.nv.constant0.<f>`` into PROGBITS.
_NV_UNMAPPED_PREFIXES = (".nv.shared.", ".nv.local.")
_DATA_TYPES = {C.STT_OBJECT, STT_CUDA_OBJECT, C.STT_COMMON}
_DEFINITION_TYPES = frozenset({C.STT_FUNC, STT_AMDGPU_HSA_KERNEL, *_DATA_TYPES})
_EXPORT_BINDINGS = (C.STB_GLOBAL, C.STB_WEAK)
_EXPORT_VISIBILITIES = (C.STV_DEFAULT, C.STV_PROTECTED)


@dataclass(frozen=True, slots=True)
class Piece:
    """A range to map: ``mem_size`` bytes at object offset ``offset``, starting with ``data``."""

    label: str
    offset: int
    data: memoryview = field(repr=False)
    mem_size: int
    align: int
    executable: bool = False


@dataclass(frozen=True, slots=True)
class ObjDefinition:
    """A defined function or data symbol; ``offset`` is relative to the code object's base."""

    name: str
    st_type: int
    offset: int
    size: int
    section: str
    st_value: int
    binding: str
    visibility: str
    exported: bool

    @property
    def is_function(self) -> bool:
        return self.st_type in (C.STT_FUNC, STT_AMDGPU_HSA_KERNEL)


@dataclass(frozen=True, slots=True)
class ObjReference:
    """An undefined symbol: ``weak`` references (and those a CUDA driver supplies) may stay unresolved."""

    name: str
    weak: bool
    sites: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DynReloc:
    """One AMDGPU dynamic relocation: write at object offset ``offset``.

    ``symbol`` is the name of an undefined symbol (resolved across code objects at freeze),
    ``local`` the object offset of a symbol this code object defines (resolved to
    base + offset, as ROCr does for ``STT_OBJECT``/``STT_FUNC``), both None for
    ``RELATIVE64`` (base + addend).  ``addend`` None: ``SHT_REL``, the slot holds it.
    """

    offset: int
    rtype: int
    symbol: str | None
    local: int | None
    addend: int | None
    weak: bool = False
    site: str = ""
    name: str = ""  # the symbol's name, also for a local one (reports)

    @property
    def width(self) -> int:
        return RELOC_WIDTH[self.rtype]

    @property
    def type_name(self) -> str:
        return C.reloc_name(C.EM_AMDGPU, self.rtype)

    def at_site(self, site: str) -> DynReloc:
        return DynReloc(self.offset, self.rtype, self.symbol, self.local, self.addend, self.weak, site, self.name)


@dataclass(frozen=True, slots=True)
class NvReloc:
    """A cubin relocation, kept for the driver: at ``site`` (``section+0xoff``) against ``symbol``."""

    section: str
    offset: int
    rtype: int
    symbol: str
    addend: int

    @property
    def type_name(self) -> str:
        return C.reloc_name(C.EM_CUDA, self.rtype)


def _raise(e: DeviceBinaryError) -> None:
    raise e


class ExportTable(Mapping[str, ObjDefinition]):
    """A code object's exported definitions by name (the first definition of each exported name).

    Loading needs only the names (duplicates, and what binds at freeze) and which are weak; the
    :class:`ObjDefinition` of a name is built from its symbol-table entry when first asked for,
    so loading a code object of thousands of kernels makes no per-symbol record.
    """

    def __init__(self, rows: dict[str, int], weak: frozenset[str], names: frozenset[str],
                 build: Callable[[str, int], ObjDefinition] | None = None) -> None:
        self._rows = rows  # name -> symbol-table index of its definition
        self._built: dict[str, ObjDefinition] = {}
        self._build = build
        self.weak = weak  # exported names whose definition is weak
        self.names = names  # every exportable name of the table (also those that are no definition here)

    def __getitem__(self, name: str) -> ObjDefinition:
        d = self._built.get(name)
        if d is None:
            row = self._rows[name]  # KeyError: not exported here
            assert self._build is not None  # only an empty table has no builder
            d = self._built[name] = self._build(name, row)
        return d

    def __contains__(self, name: object) -> bool:
        return name in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


@dataclass(eq=False)
class IndexedCodeObject:
    """A code object parsed and indexed (see the module docstring); immutable once built."""

    name: str
    vendor: str  # "amdgpu" or "nvidia"
    elf: ElfFile = field(repr=False)
    arch: str  # AMDGPU target id from e_flags (gfx90a:xnack+), NVIDIA sm_XX[a|f]
    generic_version: int
    span: int  # bytes from the base to the end of the last piece
    align: int
    pieces: tuple[Piece, ...]
    exported: ExportTable  # exported definitions by name (the first of each name)
    undefined: tuple[tuple[str, bool], ...]  # (name, optional) of each reference, as ``references``
    nv_relocations: tuple[NvReloc, ...] = ()
    warnings: list[DeviceBinaryError] = field(default_factory=list, repr=False)
    #: definitions, references, relocations: given (cubins), or built on first use (AMDGPU: from .symtab)
    _indexed: tuple[tuple[ObjDefinition, ...], tuple[ObjReference, ...], tuple[DynReloc, ...]] | None = \
        field(default=None, repr=False)
    _index_rest: Callable[[IndexedCodeObject], tuple[tuple[ObjDefinition, ...], tuple[ObjReference, ...],
                                                     tuple[DynReloc, ...]]] | None = field(default=None, repr=False)
    _records: dict[str, Function] = field(default_factory=dict, repr=False)  # functions_of(): imported so far
    _dyn_relocs: tuple[DynReloc, ...] = field(default=(), repr=False)  # AMDGPU: checked at load, sites not named
    _asked: set[str] = field(default_factory=set, repr=False)

    def _warn(self, e: DeviceBinaryError) -> None:
        """Record a problem once (a partial import and a later whole one may both meet it)."""
        if not any(type(w) is type(e) and str(w) == str(e) for w in self.warnings):
            self.warnings.append(e)

    @cached_property
    def model(self) -> CodeObject:
        """The unified model (devbin sections if present, else the vendor importer); problems become warnings."""
        try:
            have = read_code_object(self.elf)
        except DeviceBinaryError as e:
            self._warn(e)
            have = None
        return have if have is not None else import_code_object(self.elf, diag=self._warn)

    def functions_of(self, names: frozenset[str]) -> dict[str, Function]:
        """The model records of the functions ``names`` (those the model has), each equal to
        ``model``'s.  A code object without devbin sections imports just these functions (AMDGPU:
        their note entries and descriptors, :func:`~devbin.targets.amdgpu.importer.import_amdgpu`
        ``only=``; a cubin: their ``.nv.info.<f>`` records, :func:`~devbin.targets.nvidia.importer.
        import_cubin` ``only=``), once per name; with devbin sections, or once ``model`` is built,
        it reads ``model``."""
        if "model" in self.__dict__ or self._has_devbin_sections:
            return {f.name: f for f in self.model.functions if f.name in names}
        missing = frozenset(names - self._asked)
        if missing:
            importer = import_amdgpu if self.vendor == "amdgpu" else import_cubin
            part = importer(self.elf, diag=self._warn, only=missing)
            self._records.update((f.name, f) for f in part.functions if f.name in missing)
            self._asked |= missing
        return {n: self._records[n] for n in names if n in self._records}

    @cached_property
    def callgraph(self) -> CallGraph:
        """The call graph lazy loading walks: the model's; a cubin without devbin sections reads it alone
        (``.nv.callgraph`` and ``.nv.prototype``, no function's records: its direct edges, indirect
        call sites and address-taken functions are the model's, its ``external`` lacks the callees
        only ``EIATTR_EXTERNS`` names)."""
        if "model" in self.__dict__ or self._has_devbin_sections or self.vendor != "nvidia":
            return self.model.callgraph
        return import_cubin(self.elf, diag=self._warn, only=frozenset()).callgraph

    @cached_property
    def _has_devbin_sections(self) -> bool:
        return bool(devbin_sections(self.elf))

    def _rest(self) -> tuple[tuple[ObjDefinition, ...], tuple[ObjReference, ...], tuple[DynReloc, ...]]:
        if self._indexed is None:
            assert self._index_rest is not None
            self._indexed = self._index_rest(self)
        return self._indexed

    @property
    def indexed(self) -> bool:
        """Whether ``definitions``, ``references`` and ``relocations`` are built (an AMDGPU code
        object builds them from its ``.symtab`` on first use)."""
        return self._indexed is not None

    @property
    def definitions(self) -> tuple[ObjDefinition, ...]:
        return self._rest()[0]

    @property
    def references(self) -> tuple[ObjReference, ...]:
        return self._rest()[1]

    @property
    def relocations(self) -> tuple[DynReloc, ...]:
        return self._rest()[2]

    @property
    def e_type(self) -> str:
        return C.ET_NAMES.get(self.elf.header.e_type, str(self.elf.header.e_type))

    def file_part(self, piece: Piece, offset: int, size: int) -> memoryview:
        """The file bytes of ``piece`` within ``[offset, offset+size)`` (object offsets; no zeros added:
        what lies past the piece's file bytes is for the device to zero-fill)."""
        lo = offset - piece.offset
        return piece.data[lo: lo + size] if 0 <= lo <= len(piece.data) else piece.data[:0]

    def file_bytes(self, offset: int, size: int) -> bytes:
        """``size`` bytes at object offset ``offset`` as the code object's pieces give them (zeros past a
        piece's file bytes): what device memory holds there before relocation.  FormatError outside every piece."""
        for p in self.pieces:
            if p.offset <= offset and offset + size <= p.offset + p.mem_size:
                lo = offset - p.offset
                have = bytes(p.data[lo: lo + size])
                return have + bytes(size - len(have))
        raise FormatError(f"object offset {offset:#x}+{size:#x} lies outside every mapped piece", fmt=self.vendor,
                          where=self.name, value=offset)

    def holder(self, offset: int) -> str:
        """``name+0xoff`` for the symbol (else section) holding object offset ``offset``."""
        return _Holders(self).at(offset)


class _Holders:
    def __init__(self, obj: IndexedCodeObject) -> None:
        self.index = SpanIndex(sorted((d.offset, d.offset + max(d.size, 1), d.name) for d in obj.definitions))
        self.sections = _section_spans(obj)

    def at(self, offset: int) -> str:
        hit = self.index.at(offset)
        if hit is not None:
            return f"{hit[2]}+{offset - hit[0]:#x}"
        for lo, hi, name in self.sections:
            if lo <= offset < hi:
                return f"{name}+{offset - lo:#x}"
        return f"{offset:#x}"


def _section_spans(obj: IndexedCodeObject) -> list[tuple[int, int, str]]:
    if obj.vendor == "amdgpu":
        return [(s.sh_addr, s.sh_addr + s.sh_size, s.name) for s in obj.elf.sections if s.is_alloc]
    return [(p.offset, p.offset + p.mem_size, p.label) for p in obj.pieces]


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
    holders = _Holders(obj)
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
    holders = _Holders(obj)
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
