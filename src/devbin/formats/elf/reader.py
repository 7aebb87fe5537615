"""ELF read view: ELF32/ELF64, little and big endian.

``ElfFile(buf)`` parses and validates every *table* at open (file header,
section and program header tables, section names, symbol tables, relocation
tables); section *contents* stay lazy ``memoryview`` windows over ``buf``, so
opening a 2 GiB library copies nothing.

Quirks handled here, each in its own small function:

* extended numbering (:func:`_section0_counts`): when a file has 65,280 or
  more sections, ``e_shnum`` is 0 and the real count is section 0's
  ``sh_size``; ``e_shstrndx == SHN_XINDEX`` means section 0's ``sh_link``;
  ``e_phnum == PN_XNUM`` means section 0's ``sh_info``;
* symbols whose ``st_shndx`` is ``SHN_XINDEX`` take their section index from
  the ``SHT_SYMTAB_SHNDX`` section linked to their table;
* unknown section types, flags, OS/ABI and machine values are kept raw and
  named by range (``SHT_LOPROC+0x2``); they are never an error.

Errors are :class:`devbin.errors.FormatError` with format ``elf``, a location
such as ``section [7] '.nv.info'`` and the file offset.  Non-critical problems
(an unresolvable name, a bad link on an unknown section) go to ``diag``; the
default raises, an inspector may pass a callback that collects warnings.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple, overload

from devbin.binary import Buffer, ByteView
from devbin.errors import DeviceBinaryError, FormatError, NotThisFormat
from devbin.formats.elf import constants as C
from devbin.formats.elf import layout as L
from devbin.formats.elf.tables import (
    SH_ENTSIZE,
    SH_LINK,
    SH_NAME,
    SH_OFFSET,
    SH_SIZE,
    SH_TYPE,
    SectionRow,
    SectionTable,
    section_table,
)

Diag = Callable[[DeviceBinaryError], None]


def _raise(err: DeviceBinaryError) -> None:
    raise err


@dataclass(frozen=True, slots=True)
class ElfHeader:
    """The file header; ``e_shnum``/``e_shstrndx``/``e_phnum`` are the *resolved* values."""

    ei_class: int
    ei_data: int
    ei_version: int
    ei_osabi: int
    ei_abiversion: int
    e_type: int
    e_machine: int
    e_version: int
    e_entry: int
    e_phoff: int
    e_shoff: int
    e_flags: int
    e_ehsize: int
    e_phentsize: int
    e_phnum: int
    e_shentsize: int
    e_shnum: int
    e_shstrndx: int
    raw_e_phnum: int
    raw_e_shnum: int
    raw_e_shstrndx: int

    @property
    def is64(self) -> bool:
        return self.ei_class == C.ELFCLASS64

    @property
    def little(self) -> bool:
        return self.ei_data == C.ELFDATA2LSB


@dataclass(frozen=True, slots=True)
class Section:
    """One section header plus a lazy view of its contents."""

    index: int
    name: str
    sh_name: int
    sh_type: int
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_info: int
    sh_addralign: int
    sh_entsize: int
    file_size: int = field(repr=False)  # bytes in the file: 0 for SHT_NOBITS and NOBITS-like types
    file_view: ByteView = field(repr=False, compare=False)  # the whole file; bounds checked at open
    loc: str = field(default="", repr=False, compare=False)

    @property
    def view(self) -> ByteView:
        """A bounded view of the section's bytes (made on demand: most sections are never read)."""
        off = self.sh_offset if self.file_size else 0
        return self.file_view.sub(off, self.file_size, where=f"{self.loc}section [{self.index}]")

    @property
    def data(self) -> memoryview:
        """The section's bytes in the file (empty for ``SHT_NOBITS``)."""
        off = self.sh_offset if self.file_size else 0
        return self.file_view.bytes_at(off, self.file_size)

    @property
    def is_alloc(self) -> bool:
        return bool(self.sh_flags & C.SHF_ALLOC)

    @property
    def where(self) -> str:
        return f"section [{self.index}] {self.name!r}"


@dataclass(frozen=True, slots=True)
class Segment:
    index: int
    p_type: int
    p_flags: int
    p_offset: int
    p_vaddr: int
    p_paddr: int
    p_filesz: int
    p_memsz: int
    p_align: int


@dataclass(frozen=True, slots=True)
class Symbol:
    index: int
    name: str
    st_name: int
    st_value: int
    st_size: int
    st_info: int
    st_other: int
    st_shndx: int  # resolved through SHT_SYMTAB_SHNDX when the raw value is SHN_XINDEX

    @property
    def bind(self) -> int:
        return self.st_info >> 4

    @property
    def type(self) -> int:
        return self.st_info & 0xF

    @property
    def visibility(self) -> int:
        return self.st_other & 0x3

    @property
    def defined(self) -> bool:
        return self.st_shndx != C.SHN_UNDEF


@dataclass(frozen=True, slots=True)
class Relocation:
    r_offset: int
    r_sym: int
    r_type: int
    r_addend: int | None  # None for SHT_REL


@dataclass(frozen=True, slots=True)
class Note:
    name: str
    n_type: int
    desc: bytes
    offset: int  # of the note header within its section


_BULK_MIN = 64  # a table walked whole above this size is decoded in one pass


class SymbolColumns(NamedTuple):
    """A symbol table's fields, one tuple per field in table order (``st_shndx`` resolved through
    ``SHT_SYMTAB_SHNDX``): for readers that filter thousands of symbols by their raw fields and
    need the names, or a :class:`Symbol`, of only the few they keep."""

    st_name: tuple[int, ...]
    st_value: tuple[int, ...]
    st_size: tuple[int, ...]
    st_info: tuple[int, ...]
    st_other: tuple[int, ...]
    st_shndx: tuple[int, ...]


#: The bindings resolved across objects (and indexed by ``ar``): ``STB_GLOBAL``, ``STB_WEAK``, ``STB_GNU_UNIQUE``.
GLOBAL_BINDINGS = frozenset({C.STB_GLOBAL, C.STB_WEAK, 10})
_NOT_GLOBAL_TYPES = (C.STT_SECTION, C.STT_FILE)


class SymbolTable(Sequence[Symbol]):
    """A ``SHT_SYMTAB``/``SHT_DYNSYM``: sized, indexable, with a name lookup.

    The table's shape (entry size, size, string table link) is checked at open;
    each symbol is decoded the first time it is asked for, so a reader that
    needs a few symbols of a large table (a cubin's functions, a library's
    exports) does not pay for all of them.
    """

    def __init__(self, section: Section, count: int, decode: Callable[[int], Symbol],
                 raw_columns: Callable[[], SymbolColumns], strings: Callable[[], bytes | None]) -> None:
        """``decode``: one entry; ``raw_columns``: every entry's fields as stored (``st_shndx`` not yet
        resolved through ``SHT_SYMTAB_SHNDX``); ``strings``: the string table's bytes, None without one."""
        self.section = section
        self._count = count
        self._decode = decode
        self._raw_columns = raw_columns
        self._string_bytes = strings
        self._names_checked = False
        self._cache: list[Symbol | None] = [None] * count
        self._complete = False

    def __len__(self) -> int:
        return self._count

    def _at(self, i: int) -> Symbol:
        s = self._cache[i]
        if s is None:
            s = self._cache[i] = self._quick(i) or self._decode(i)
        return s

    @cached_property
    def _raw(self) -> SymbolColumns:
        return self._raw_columns()

    @property
    def stored(self) -> SymbolColumns:
        """Every entry's fields exactly as stored (``st_shndx`` not resolved through ``SHT_SYMTAB_SHNDX``,
        so nothing is decoded to give them): for readers of ``st_size``/``st_other``/``st_value``."""
        return self._raw

    def name_of(self, i: int) -> str:
        """``self[i].name`` without making the :class:`Symbol` when the name is plain (the same diagnostic
        through the one-by-one decoder when it is not)."""
        s = self._cache[i]
        if s is not None:
            return s.name
        off = self._raw.st_name[i]
        if not off:
            return ""
        strings = self._strings
        text = strings[1] if strings is not None else None
        end = text.find("\0", off) if text is not None and off < len(text) else -1
        return text[off:end] if text is not None and end >= 0 else self._at(i).name

    def _quick(self, i: int) -> Symbol | None:
        """Entry ``i`` from the table's columns and string table, when it is the plain case (a NUL-terminated
        ASCII name, no ``SHN_XINDEX``); None sends it to the one-by-one decoder and its diagnostics."""
        c = self._raw
        off, shndx = c.st_name[i], c.st_shndx[i]
        if shndx == C.SHN_XINDEX:
            return None
        name = ""
        if off:
            strings = self._strings
            if strings is None or strings[1] is None:
                return None
            text = strings[1]
            end = text.find("\0", off) if off < len(text) else -1
            if end < 0:
                return None
            name = text[off:end]
        return Symbol(i, name, off, c.st_value[i], c.st_size[i], c.st_info[i], c.st_other[i], shndx)

    @overload
    def __getitem__(self, i: int) -> Symbol: ...

    @overload
    def __getitem__(self, i: slice) -> list[Symbol]: ...

    def __getitem__(self, i: int | slice) -> Symbol | list[Symbol]:
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(i)  # Sequence protocol: callers check len() first, as for a list
        return self._at(i)

    def __iter__(self) -> Iterator[Symbol]:
        if not self._complete and self._count > _BULK_MIN:
            # walking the whole table: one pass over its bytes instead of one bounds-checked read each
            # (the entries the bulk path cannot read, through SHT_SYMTAB_SHNDX or with a name that is
            # not plain ASCII, are decoded one by one on the way, with that path's diagnostics)
            names = self.names(range(self._count))
            c = self.columns
            self._cache = [s if s is not None else Symbol(i, names[i], c.st_name[i], c.st_value[i], c.st_size[i],
                                                          c.st_info[i], c.st_other[i], c.st_shndx[i])
                           for i, s in enumerate(self._cache)]
            self._complete = True
        return (self._at(i) for i in range(self._count))

    @cached_property
    def _by_name(self) -> dict[str, Symbol]:
        out: dict[str, Symbol] = {}
        for s in self:
            if s.name and (s.name not in out or (not out[s.name].defined and s.defined)):
                out[s.name] = s
        return out

    def get(self, name: str) -> Symbol | None:
        """The symbol named ``name`` (a defined one wins over an undefined one), or None."""
        return self._by_name.get(name)

    def globals(self, *, bindings: Container[int] | None = GLOBAL_BINDINGS,
                defined: bool | None = None) -> list[Symbol]:
        """The one walk over a table's global symbols: the named entries (not entry 0, not
        ``STT_SECTION``/``STT_FILE``) whose binding is in ``bindings`` (None: any but
        ``STB_LOCAL``), only the defined (``defined=True``) or undefined (False) ones when asked, in
        table order.  One pass over :attr:`columns`; records are made for the entries kept only."""
        c = self.columns
        info, shndx, st_name = c.st_info, c.st_shndx, c.st_name
        rows = [i for i in range(1, self._count)
                if st_name[i] and (info[i] >> 4 != C.STB_LOCAL if bindings is None else info[i] >> 4 in bindings)
                and info[i] & 0xF not in _NOT_GLOBAL_TYPES
                and (defined is None or (shndx[i] != C.SHN_UNDEF) == defined)]
        out: list[Symbol] = []
        for i, name in zip(rows, self.names(rows), strict=True):
            if not name:
                continue
            sym = self._cache[i]
            if sym is None:
                sym = self._cache[i] = Symbol(i, name, st_name[i], c.st_value[i], c.st_size[i], info[i],
                                              c.st_other[i], shndx[i])
            out.append(sym)
        return out

    @cached_property
    def columns(self) -> SymbolColumns:
        """Every entry's fields in one pass over the table's bytes (no :class:`Symbol` made; an entry
        whose ``st_shndx`` is ``SHN_XINDEX`` is decoded, and kept, to resolve it)."""
        cols = self._raw
        if C.SHN_XINDEX in cols.st_shndx:
            cols = cols._replace(st_shndx=tuple(self._at(i).st_shndx if x == C.SHN_XINDEX else x
                                                for i, x in enumerate(cols.st_shndx)))
        return cols

    @cached_property
    def _strings(self) -> tuple[bytes, str | None] | None:
        """The string table's bytes, and its text when all of it is ASCII (names are then sliced from it)."""
        raw = self._string_bytes()
        if raw is None:
            return None
        return raw, raw.decode("ascii") if raw.isascii() else None

    def _check_names(self) -> None:
        """Every entry whose name is not a NUL-terminated string inside the string table (or not ASCII)
        decoded once, one by one, so that its diagnostic comes as a whole walk of the table would give
        it, also when the bulk reader is asked for other names only (usually nothing to do)."""
        strings = self._strings
        if strings is not None:
            raw, text = strings
            st_name = self.columns.st_name
            end = raw.rfind(b"\0") + 1  # names starting at or past it have no terminator
            if text is None or max(st_name, default=0) >= end:
                for i, off in enumerate(st_name):
                    if off and (off >= end or (text is None and not raw[off:raw.find(b"\0", off)].isascii())):
                        self._at(i)
        self._names_checked = True

    def names(self, indices: Iterable[int]) -> list[str]:
        """The names of the entries ``indices`` (each as ``self[i].name``), read straight from the string
        table; a name that is not plain NUL-terminated ASCII goes through the one-by-one decoder, so its
        diagnostic is the same (:meth:`_check_names`: a corrupt name anywhere in the table is reported
        on the first call, as a walk of the whole table would)."""
        strings = self._strings
        if strings is None:  # no string table: every name is "" (or the one-by-one path's diagnostic)
            return [self[i].name for i in indices]
        if not self._names_checked:
            self._check_names()
        raw, text = strings
        st_name = self.columns.st_name
        out = []
        n = len(raw)
        if text is not None:
            tfind = text.find
            for i in indices:
                off = st_name[i]
                end = tfind("\0", off) if 0 < off < n else -1
                out.append(text[off:end] if end >= 0 else "" if not off else self[i].name)
            return out
        find = raw.find
        for i in indices:
            off = st_name[i]
            if not off:
                out.append("")
                continue
            end = find(b"\0", off) if off < n else -1
            name = raw[off:end]
            out.append(name.decode("ascii") if end >= 0 and name.isascii() else self[i].name)
        return out


class Sections(Sequence[Section]):
    """An ELF file's sections, in index order: each :class:`Section` is made the first time it is asked
    for (a cubin has ~150 sections and a command reads a handful); the headers behind them are read and
    checked at open.  Indexing and slicing as for a tuple (a slice is a tuple)."""

    __slots__ = ("_cache", "_elf")

    def __init__(self, elf: ElfFile) -> None:
        self._elf = elf
        self._cache: list[Section | None] = [None] * len(elf.section_rows)

    def __len__(self) -> int:
        return len(self._cache)

    def _at(self, i: int) -> Section:
        s = self._cache[i]
        if s is None:
            s = self._cache[i] = self._elf._make_section(i)
        return s

    @overload
    def __getitem__(self, i: int) -> Section: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[Section, ...]: ...

    def __getitem__(self, i: int | slice) -> Section | tuple[Section, ...]:
        if isinstance(i, slice):
            return tuple(self._at(j) for j in range(*i.indices(len(self._cache))))
        n = len(self._cache)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)  # Sequence protocol, as for a tuple
        return self._at(i)

    def __iter__(self) -> Iterator[Section]:
        return (self._at(i) for i in range(len(self._cache)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sections):
            other = tuple(other)
        return isinstance(other, tuple) and tuple(self) == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Sections({len(self._cache)})"


def _no_file_types(machine: int) -> tuple[int, ...]:
    return _NO_FILE.get(machine) or _NO_FILE.setdefault(machine, tuple(sorted(C.no_file_types(machine))))


_NO_FILE: dict[int, tuple[int, ...]] = {}
_TYPE = operator.itemgetter(SH_TYPE)


class ElfFile:
    """A parsed, validated, read-only ELF file over ``buf`` (bytes, bytearray, memoryview, mmap)."""

    def __init__(self, buf: Buffer | ByteView, *, where: str = "", diag: Diag | None = None) -> None:
        self.view = buf if isinstance(buf, ByteView) else ByteView(buf, fmt="elf", where=where)
        if isinstance(buf, ByteView):
            self.view = ByteView(buf, fmt="elf", where=where or buf.where, base=buf.base)
        self.where = where
        self._diag = diag or _raise
        self.header = self._parse_header()
        self.view = self.view.with_order(self.header.little)
        self._check_section_header_table()
        self.segments: tuple[Segment, ...] = self._parse_program_headers()
        rows, sizes, names = self._section_table()
        self._rows: list[SectionRow] = rows
        self._sizes: list[int] = sizes
        self._names: list[str] = names
        self._loc_prefix = f"{self.where}: " if self.where else ""
        self.sections: Sections = Sections(self)
        n = len(names)
        self._by_name: dict[str, int] = dict(zip(reversed(names), range(n - 1, -1, -1), strict=True))  # the first wins
        self._types: list[int] = list(map(_TYPE, rows))
        self.symbol_tables: dict[int, SymbolTable] = {
            i: self._parse_symbols(self.sections[i]) for i in self._indices_of_type(C.SHT_SYMTAB, C.SHT_DYNSYM)
        }
        for i in self._indices_of_type(C.SHT_REL, C.SHT_RELA):
            self._check_relocation_table(i)
        self._relocs: dict[int, list[Relocation]] = {}
        self._reloc_order: dict[int, tuple[list[int], list[int] | None]] = {}

    # -- public accessors -----------------------------------------------------
    @cached_property
    def relocation_tables(self) -> dict[int, list[Relocation]]:
        """Every ``SHT_REL``/``SHT_RELA`` table, by section index.

        Their shape (entry size, size a multiple of it, within the file) is checked at
        open; the entries are decoded on first use, since most readers never need them.
        """
        return {i: self.relocation_table(i) for i in self._indices_of_type(C.SHT_REL, C.SHT_RELA)}

    def relocation_table(self, index: int) -> list[Relocation]:
        """The entries of the ``SHT_REL``/``SHT_RELA`` section ``index``, decoded alone on first use
        (a loader needs ``.rela.dyn``, not the ``--emit-relocs`` tables beside it); KeyError otherwise."""
        have = self._relocs.get(index)
        if have is None:
            sec = self.sections[index] if 0 <= index < len(self.sections) else None
            if sec is None or sec.sh_type not in (C.SHT_REL, C.SHT_RELA):
                raise KeyError(index)
            have = self._relocs[index] = self._parse_relocations(sec)
        return have

    def relocations_between(self, index: int, lo: int, hi: int) -> list[Relocation]:
        """The entries of the ``SHT_REL``/``SHT_RELA`` section ``index`` whose ``r_offset`` lies in
        ``[lo, hi)``, in table order: O(log n) per query, and only those entries are decoded (one
        function's relocations among a large object's).  The offsets are indexed on first use; KeyError
        for a section that is no such table."""
        sec = self.sections[index] if 0 <= index < len(self.sections) else None
        if sec is None or sec.sh_type not in (C.SHT_REL, C.SHT_RELA):
            raise KeyError(index)
        order = self._reloc_order.get(index)
        if order is None:
            lay = (L.RELA if sec.sh_type == C.SHT_RELA else L.REL)[self.header.ei_class]
            offsets = [row[0] for row in sec.view.iter_unpack(lay.fmt, 0, sec.sh_size // lay.size, "relocation table")]
            if all(a <= b for a, b in itertools.pairwise(offsets)):
                order = self._reloc_order[index] = (offsets, None)
            else:  # linkers write them sorted; anything else is sorted here, stably
                by_offset = sorted(range(len(offsets)), key=offsets.__getitem__)
                order = self._reloc_order[index] = ([offsets[i] for i in by_offset], by_offset)
        starts, perm = order
        i, j = bisect.bisect_left(starts, lo), bisect.bisect_left(starts, hi)
        have = self._relocs.get(index)
        if perm is None:
            return have[i:j] if have is not None else self._parse_relocations(sec, i, j)
        rows = sorted(perm[i:j])
        return [have[k] if have is not None else self._parse_relocations(sec, k, k + 1)[0] for k in rows]

    @property
    def size(self) -> int:
        return len(self.view)

    def section(self, name: str) -> Section | None:
        """The first section named ``name``, or None."""
        i = self._by_name.get(name)
        return None if i is None else self.sections[i]

    def sections_of_type(self, sh_type: int) -> list[Section]:
        return [self.sections[i] for i in self._indices_of_type(sh_type)]

    def _indices_of_type(self, *types: int) -> list[int]:
        """The indices of the sections of these types, in section order (searched at C speed: most types
        occur a few times among a cubin's ~150 sections)."""
        have = self._types
        out: list[int] = []
        for t in types:
            i = -1
            while True:
                try:
                    i = have.index(t, i + 1)
                except ValueError:
                    break
                out.append(i)
        return sorted(out) if len(types) > 1 else out

    @property
    def section_rows(self) -> Sequence[SectionRow]:
        """Every section header as stored, a tuple each (indices :data:`SH_NAME` ... :data:`SH_ENTSIZE` of
        :mod:`devbin.formats.elf.tables`): for readers that filter many sections by their fields and need
        a :class:`Section` (made on first use) for only the few they keep."""
        return self._rows

    @property
    def section_names(self) -> Sequence[str]:
        """Every section's name, in section order (``self.sections[i].name``)."""
        return self._names

    @property
    def section_file_sizes(self) -> Sequence[int]:
        """The bytes each section takes in the file, in section order (``self.sections[i].file_size``:
        0 for ``SHT_NOBITS`` and its like), checked at open to lie inside the file."""
        return self._sizes

    @property
    def symtab(self) -> SymbolTable | None:
        """The static symbol table (``SHT_SYMTAB``), or None."""
        for idx, table in self.symbol_tables.items():
            if self.sections[idx].sh_type == C.SHT_SYMTAB:
                return table
        return None

    def global_symbols(self, *, bindings: Container[int] | None = GLOBAL_BINDINGS,
                       defined: bool | None = None) -> list[Symbol]:
        """:meth:`SymbolTable.globals` over every ``SHT_SYMTAB`` (``.dynsym`` left out, as linkers
        and ``ar`` read relocatable objects), in section then table order."""
        return [sym for t in self.symbol_tables.values() if t.section.sh_type == C.SHT_SYMTAB
                for sym in t.globals(bindings=bindings, defined=defined)]

    @property
    def dynsym(self) -> SymbolTable | None:
        for idx, table in self.symbol_tables.items():
            if self.sections[idx].sh_type == C.SHT_DYNSYM:
                return table
        return None

    def notes(self, section: Section) -> list[Note]:
        """Decode the notes of an ``SHT_NOTE`` section (4-byte aligned name and descriptor)."""
        return parse_notes(section.view.sub(0, len(section.view), where=section.where), self.header.little)

    def bytes(self) -> bytes:
        return self.view.tobytes()

    # -- parsing ----------------------------------------------------------------
    def _loc(self, inner: str) -> str:
        return f"{self.where}: {inner}" if self.where else inner

    def _err(self, message: str, offset: int | None = None, value: object = None,
             where: str | None = None) -> FormatError:
        return self.view.error(message, offset, value, where=None if where is None else self._loc(where))

    def _parse_header(self) -> ElfHeader:
        v = self.view
        if not v.startswith(C.ELFMAG):
            raise v.error("not an ELF file (bad magic)", 0, cls=NotThisFormat)
        v.check(0, L.EI_NIDENT, "e_ident")
        ei_class, ei_data, ei_version, ei_osabi, ei_abiversion = v.unpack("BBBBB", 4)
        if ei_class not in (C.ELFCLASS32, C.ELFCLASS64):
            raise v.error("unknown ELF class EI_CLASS", 4, ei_class)
        if ei_data not in (C.ELFDATA2LSB, C.ELFDATA2MSB):
            raise v.error("unknown ELF data encoding EI_DATA", 5, ei_data)
        v = v.with_order(ei_data == C.ELFDATA2LSB)
        lay = L.EHDR[ei_class]
        vals = dict(zip(lay.fields, v.unpack(lay.fmt, L.EI_NIDENT, "ELF header"), strict=True))
        phnum, shnum, shstrndx = _section0_counts(v, ei_class, vals)
        return ElfHeader(
            ei_class=ei_class, ei_data=ei_data, ei_version=ei_version, ei_osabi=ei_osabi,
            ei_abiversion=ei_abiversion, e_phnum=phnum, e_shnum=shnum, e_shstrndx=shstrndx,
            raw_e_phnum=vals["e_phnum"], raw_e_shnum=vals["e_shnum"], raw_e_shstrndx=vals["e_shstrndx"],
            **{k: vals[k] for k in lay.fields if k not in ("e_phnum", "e_shnum", "e_shstrndx")},
        )

    def _check_section_header_table(self) -> None:
        h = self.header
        if h.e_shnum == 0:
            return
        lay = L.SHDR[h.ei_class]
        if h.e_shentsize != lay.size:
            raise self._err(f"e_shentsize must be {lay.size:#x}", None, h.e_shentsize)
        self.view.check_count(h.e_shnum, lay.size, h.e_shoff, "section header table")

    def _parse_program_headers(self) -> tuple[Segment, ...]:
        h = self.header
        if h.e_phnum == 0:
            return ()
        lay = L.PHDR[h.ei_class]
        if h.e_phentsize != lay.size:
            raise self._err(f"e_phentsize must be {lay.size:#x}", None, h.e_phentsize)
        rows = self.view.iter_unpack(lay.fmt, h.e_phoff, h.e_phnum, "program header table")
        segs = []
        for i, r in enumerate(rows):
            d = dict(zip(lay.fields, r, strict=True))
            if d["p_filesz"] and (d["p_offset"] > self.size or d["p_filesz"] > self.size - d["p_offset"]):
                raise self._err(
                    f"segment [{i}]: p_offset {d['p_offset']:#x} + p_filesz {d['p_filesz']:#x} exceeds file size "
                    f"{self.size:#x}", h.e_phoff + i * lay.size,
                )
            segs.append(Segment(index=i, **d))
        return tuple(segs)

    def _section_table(self) -> SectionTable:
        """The rows, file sizes and names of every section: the one-pass fast path
        (:func:`devbin.formats.elf.tables.section_table`) when all is well formed, else the careful
        walk below, which reports what is wrong."""
        h = self.header
        if h.e_shnum == 0:
            return [], [], []
        fast = section_table(self.view.bytes_at(0, len(self.view)), h.e_shoff, h.e_shnum, h.is64, h.little,
                             _no_file_types(h.e_machine), h.e_shstrndx)
        return fast if fast is not None else self._section_table_checked()

    def _section_table_checked(self) -> SectionTable:
        h = self.header
        lay = L.SHDR[h.ei_class]
        rows: list[SectionRow] = list(self.view.iter_unpack(lay.fmt, h.e_shoff, h.e_shnum,  # type: ignore[arg-type]
                                                            "section header table"))
        strtab: ByteView | None = None
        if rows and h.e_shstrndx != C.SHN_UNDEF:
            if h.e_shstrndx >= len(rows):
                self._diag(self._err("e_shstrndx is not a valid section index", None, h.e_shstrndx))
            else:
                size = self._file_size(h.e_shstrndx, rows[h.e_shstrndx])
                strtab = self.view.sub(rows[h.e_shstrndx][SH_OFFSET] if size else 0, size,
                                       where=self._loc(f"section [{h.e_shstrndx}]"))
        sizes, names = [], []
        for i, r in enumerate(rows):
            sizes.append(self._file_size(i, r))
            name = ""
            if strtab is not None and (r[SH_NAME] or i):
                try:
                    name = strtab.cstr(r[SH_NAME], "section name")
                except FormatError as e:
                    self._diag(e.within(self._loc(f"section [{i}]")))
                    name = f"<corrupt:{r[SH_NAME]:#x}>"
            names.append(name)
        return rows, sizes, names

    def _file_size(self, index: int, r: SectionRow) -> int:
        """The bytes section ``index`` takes in the file, checked to lie inside it."""
        size = r[SH_SIZE] if C.occupies_file(r[SH_TYPE], self.header.e_machine) else 0
        off = r[SH_OFFSET] if size else 0
        if size and (off > self.size or size > self.size - off):
            raise self._err(
                f"sh_offset {off:#x} + sh_size {size:#x} exceeds file size {self.size:#x}",
                self.header.e_shoff + index * L.SHDR[self.header.ei_class].size, where=f"section [{index}]",
            )
        return size

    def _make_section(self, i: int) -> Section:
        return Section(i, self._names[i], *self._rows[i], self._sizes[i], self.view, self._loc_prefix)

    def _linked(self, sec: Section, want: tuple[int, ...], what: str) -> Section | None:
        if sec.sh_link >= len(self.sections) or self.sections[sec.sh_link].sh_type not in want:
            self._diag(self._err(f"sh_link {sec.sh_link} does not point at a {what}", None, sec.sh_link,
                                 where=sec.where))
            return None
        return self.sections[sec.sh_link]

    def _parse_symbols(self, sec: Section) -> SymbolTable:
        ec = self.header.ei_class
        lay = L.SYM[ec]
        if sec.sh_entsize != lay.size:
            raise self._err(f"invalid sh_entsize: expected {lay.size}, but got {sec.sh_entsize}", where=sec.where)
        if sec.sh_size % lay.size:
            raise self._err(f"sh_size {sec.sh_size:#x} is not a multiple of sh_entsize {lay.size}", where=sec.where)
        strsec = self._linked(sec, (C.SHT_STRTAB,), "string table")
        strings = strsec.view if strsec is not None else None
        view = sec.view
        xindex: list[list[int] | None] = []

        def decode(i: int) -> Symbol:
            d = dict(zip(lay.fields, view.unpack(lay.fmt, i * lay.size, "symbol"), strict=True))
            name = ""
            if d["st_name"] and strings is not None:
                try:
                    name = strings.cstr(d["st_name"], "symbol name")
                except FormatError as e:
                    self._diag(e.within(self._loc(f"{sec.where}: symbol [{i}]")))
                    name = f"<corrupt:{d['st_name']:#x}>"
            shndx = d["st_shndx"]
            if shndx == C.SHN_XINDEX:
                if not xindex:
                    xindex.append(self._xindex_table(sec))
                words = xindex[0]
                if words is not None and i < len(words):
                    shndx = words[i]
                elif words is not None:
                    self._diag(self._err(f"symbol [{i}] has no SHT_SYMTAB_SHNDX entry", where=sec.where))
            return Symbol(index=i, name=name, **{**d, "st_shndx": shndx})

        count = sec.sh_size // lay.size
        at = [lay.fields.index(f) for f in SymbolColumns._fields]

        def columns() -> SymbolColumns:
            rows = list(view.iter_unpack(lay.fmt, 0, count, "symbol table"))
            cols = list(zip(*rows, strict=True)) if rows else [()] * len(lay.fields)
            return SymbolColumns(*(cols[i] for i in at))

        def string_bytes() -> bytes | None:
            return bytes(strings.bytes_at(0, len(strings), "string table")) if strings is not None else None

        return SymbolTable(sec, count, decode, columns, string_bytes)

    def _xindex_table(self, symsec: Section) -> list[int] | None:
        for i, r in enumerate(self._rows):
            if r[SH_TYPE] == C.SHT_SYMTAB_SHNDX and r[SH_LINK] == symsec.index:
                s = self.sections[i]
                return [w for (w,) in s.view.iter_unpack("I", 0, len(s.view) // 4, "SHT_SYMTAB_SHNDX")]
        return None

    def _check_relocation_table(self, index: int) -> None:
        """The shape of the relocation table ``index``, from its header row (no :class:`Section` made:
        a cubin has one table per function)."""
        r = self._rows[index]
        lay = (L.RELA if r[SH_TYPE] == C.SHT_RELA else L.REL)[self.header.ei_class]
        entsize, size = r[SH_ENTSIZE], r[SH_SIZE]
        if entsize not in (lay.size, 0):
            raise self._err(f"invalid sh_entsize: expected {lay.size}, but got {entsize}",
                            where=f"section [{index}] {self._names[index]!r}")
        if size % lay.size:
            raise self._err(f"sh_size {size:#x} is not a multiple of {lay.size}",
                            where=f"section [{index}] {self._names[index]!r}")

    def _parse_relocations(self, sec: Section, first: int = 0, stop: int | None = None) -> list[Relocation]:
        """Entries ``first`` up to ``stop`` (default: all) of a relocation table."""
        ec = self.header.ei_class
        rela = sec.sh_type == C.SHT_RELA
        lay = (L.RELA if rela else L.REL)[ec]
        count = sec.sh_size // lay.size
        stop = count if stop is None else min(stop, count)
        out = []
        for row in sec.view.iter_unpack(lay.fmt, first * lay.size, max(stop - first, 0), "relocation table"):
            info = row[1]
            out.append(Relocation(row[0], L.r_sym(ec, info), L.r_type(ec, info), row[2] if rela else None))
        return out


def _section0_counts(v: ByteView, ei_class: int, vals: dict[str, int]) -> tuple[int, int, int]:
    """Resolve e_phnum/e_shnum/e_shstrndx through section 0 (extended numbering).

    Section 0 is a special case because the section count itself may live in
    section 0's ``sh_size`` when the file has 65,280 or more sections.
    """
    phnum, shnum, shstrndx = vals["e_phnum"], vals["e_shnum"], vals["e_shstrndx"]
    needs0 = phnum == C.PN_XNUM or shstrndx == C.SHN_XINDEX or (shnum == 0 and vals["e_shoff"] != 0)
    if not needs0:
        return phnum, shnum, shstrndx
    if vals["e_shoff"] == 0:
        raise v.error("extended numbering used but e_shoff is 0")
    lay = L.SHDR[ei_class]
    if vals["e_shentsize"] != lay.size:
        raise v.error(f"e_shentsize must be {lay.size:#x}", None, vals["e_shentsize"])
    s0 = dict(zip(lay.fields, v.unpack(lay.fmt, vals["e_shoff"], "section header 0"), strict=True))
    if shnum == 0:
        shnum = s0["sh_size"]
    if shstrndx == C.SHN_XINDEX:
        shstrndx = s0["sh_link"]
    if phnum == C.PN_XNUM and s0["sh_info"]:
        phnum = s0["sh_info"]
    return phnum, shnum, shstrndx


def parse_notes(view: ByteView, little: bool = True) -> list[Note]:
    """Notes: ``namesz, descsz, type`` (u32 each), name and descriptor each padded to 4."""
    view = view.with_order(little)
    out = []
    cur = view.cursor()
    while cur.remaining > 0:
        start = cur.pos
        if cur.remaining < 12:
            raise view.error("truncated note header", start)
        namesz, descsz, ntype = cur.u32(), cur.u32(), cur.u32()
        name_raw = bytes(cur.bytes(namesz, "note name"))
        cur.skip(min(-namesz % 4, cur.remaining), "note padding")
        desc = bytes(cur.bytes(descsz, "note descriptor"))
        cur.skip(min(-descsz % 4, cur.remaining), "note padding")
        name = name_raw.rstrip(b"\0").decode("utf-8", "backslashreplace")
        out.append(Note(name, ntype, desc, start))
    return out


def open_elf(buf: Buffer, *, where: str = "", diag: Diag | None = None) -> ElfFile:
    return ElfFile(buf, where=where, diag=diag)
