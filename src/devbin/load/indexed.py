"""Step 1 of loading a code object: parse and index it (no device memory is touched).

This module holds what indexing records (:class:`IndexedCodeObject` and its parts);
:func:`devbin.load.indexing.index_code_object` checks the ELF, its vendor and kind, and records what the later
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

from devbin.binary.spans import SpanIndex
from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats.devsec.elf import devbin_sections
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.importers import model_of
from devbin.model import CodeObject, Function
from devbin.targets.registry import vendor_for_machine
from devbin.targets.vendor import Vendor

__all__ = ["DynReloc", "ExportTable", "IndexedCodeObject", "ObjDefinition", "ObjReference", "Piece"]


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
        return self.st_type in (C.STT_FUNC, C.STT_AMDGPU_HSA_KERNEL)


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
    machine: int = 0  # the code object's e_machine (names the type)
    width: int = 0  # the bytes it writes (the back end's table: AMDGPU load_relocs.RELOC_WIDTH)

    @property
    def type_name(self) -> str:
        return C.reloc_name(self.machine, self.rtype)

    def at_site(self, site: str) -> DynReloc:
        return DynReloc(self.offset, self.rtype, self.symbol, self.local, self.addend, self.weak, site, self.name,
                        self.machine, self.width)


@dataclass(frozen=True, slots=True)
class NvReloc:
    """A cubin relocation, kept for the driver: at ``site`` (``section+0xoff``) against ``symbol``."""

    section: str
    offset: int
    rtype: int
    symbol: str
    addend: int
    machine: int = 0  # the code object's e_machine (names the type)

    @property
    def type_name(self) -> str:
        return C.reloc_name(self.machine, self.rtype)


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
    vendor: str  # the canonical vendor name (Vendor.name: "nvidia", "amd"), as its Device says it, in load's JSON
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
    #: ``(start, end, name)`` of its sections as object offsets, from the back end (:meth:`holder` names
    #: a place no symbol holds by them)
    section_spans: tuple[tuple[int, int, str], ...] = field(default=(), repr=False)

    @cached_property
    def descriptor(self) -> Vendor:
        """The vendor descriptor of the code object (by its ``e_machine``; indexing checked there is one)."""
        v = vendor_for_machine(self.elf.header.e_machine)
        assert v is not None  # index_code_object indexes only the machines of a vendor
        return v

    def _warn(self, e: DeviceBinaryError) -> None:
        """Record a problem once (a partial import and a later whole one may both meet it)."""
        if not any(type(w) is type(e) and str(w) == str(e) for w in self.warnings):
            self.warnings.append(e)

    @cached_property
    def model(self) -> CodeObject:
        """The unified model (devbin sections if present, else the vendor importer); problems become warnings."""
        return model_of(self.elf, diag=self._warn)

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
            part = self.descriptor.import_code_object(self.elf, diag=self._warn, only=missing)
            self._records.update((f.name, f) for f in part.functions if f.name in missing)
            self._asked |= missing
        return {n: self._records[n] for n in names if n in self._records}

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
        return Holders(self).at(offset)


class Holders:
    """The symbol (else section) holding an object offset, as ``name+0xoff``."""

    def __init__(self, obj: IndexedCodeObject) -> None:
        self.index = SpanIndex(sorted((d.offset, d.offset + max(d.size, 1), d.name) for d in obj.definitions))
        self.sections = obj.section_spans

    def at(self, offset: int) -> str:
        hit = self.index.at(offset)
        if hit is not None:
            return f"{hit[2]}+{offset - hit[0]:#x}"
        for lo, hi, name in self.sections:
            if lo <= offset < hi:
                return f"{name}+{offset - lo:#x}"
        return f"{offset:#x}"

