"""Write ``ar`` archives deterministically (GNU, GNU with ``/SYM64/``, BSD, Darwin): plan the layout, then emit it.

Flavours and their layouts (binutils ``include/aout/ar.h``, LLVM ``ArchiveWriter.cpp``;
constants in ``constants.py``)::

    gnu, gnu64 (what ``ar rcsD`` / ``llvm-ar rcsD --format=gnu`` write)
        "!<arch>\\n"
        "/" or "/SYM64/"  symbol table  count, count x member-header offset (u32 BE for "/", u64 BE for
                          "/SYM64/"), NUL-terminated names, one NUL more when that makes the size odd
        "//"              long names    "name/\\n" per member whose name does not fit ar_name (16 bytes, with a "/")
        members           header (60 bytes) + data, each padded with "\\n" to an even offset

    bsd, darwin (what ``llvm-ar rcsD --format=bsd`` / ``--format=darwin`` write)
        "!<arch>\\n"
        "#1/12" + "__.SYMDEF\\0\\0\\0"   symbol table (``__.SYMDEF_64`` with u64 fields), little-endian:
                          ranlib byte count, (name offset, member-header offset) pairs, string-table byte
                          count, NUL-terminated names, then NULs up to a multiple of 8
        members           "#1/N" header + name, NUL-padded so the data starts 8-aligned, + data
                          (darwin: "\\n"-padded to a multiple of 8 inside ar_size), then "\\n" to an even offset

What the tools write, and what this writer writes:

* every member header has date 0, uid 0, gid 0 and mode ``644`` (octal text);
  the symbol table's has date, uid, gid and mode ``0``; GNU's long-name table's
  has all of them blank, and that table is padded to an even size *inside* (its
  size counts the ``\\n``), exactly as binutils writes them;
* GNU: a member name of up to 15 bytes is stored as ``name/``; longer names go
  into ``//`` and are referenced as ``/<offset>``.  BSD/Darwin: *every* name is
  a ``#1/N`` name, even a short one, because llvm-ar pads the name so that the
  data is 8-byte aligned (ld64 expects aligned members).  A name may not
  contain ``/`` (ar strips directories; a slash would make the name ambiguous);
* Darwin, deterministic: members that share a name get the fake dates 1, 2, 3 …
  so that dsymutil and lldb can tell them apart (llvm-ar does this; unique names
  keep date 0);
* the symbol table lists, member by member in archive order, every *defined
  global* symbol of each ELF member (``STB_GLOBAL``, ``STB_WEAK``,
  ``STB_GNU_UNIQUE``; ``SHN_COMMON`` counts as defined), in symbol-table order;
  members that are no ELF contribute nothing.  When the table is written:

  - gnu/gnu64: when at least one member is an object (ELF, or ``symbols`` given
    non-empty), as binutils does (an object without global symbols gives a
    table of 0 entries, 4 or 8 bytes); no member is an object -> no table;
  - bsd: the same condition; darwin: always, even for an archive without
    objects (llvm-ar does).  When there are objects but no symbols, the BSD
    string table is ``"\\0\\0\\0"`` (llvm-ar's quirk "for Solaris
    compatibility"; llvm-ar also does it for GNU tables, binutils does not, and
    the GNU flavours follow binutils);

* offsets that no longer fit 32 bits: ``gnu`` switches to ``/SYM64/`` (as GNU
  ar and llvm-ar do once a member header lies at or beyond 4 GiB), ``bsd`` and
  ``darwin`` to ``__.SYMDEF_64`` (llvm-ar switches ``--format=bsd`` to GNU's
  ``/SYM64/`` instead, which BSD readers do not expect; ``darwin`` matches);
* names readers take for bookkeeping are refused: ``__.SYMDEF`` and its
  variants, and ``ARFILENAMES`` (stored as ``ARFILENAMES/``, binutils' old name
  of ``//``).
  ``sym64_threshold`` moves that limit, like llvm-ar's ``SYM64_THRESHOLD``
  environment variable, so the switch can be tested with small archives.
  ``gnu64`` writes ``/SYM64/`` whatever the size.

The same members give the same bytes, run after run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from devbin.binary import ByteView, Emitter
from devbin.errors import DeviceBinaryError, UsageError, quote
from devbin.formats.ar import constants as C

__all__ = ["FLAVOURS", "ArMember", "ArchivePlan", "Flavour", "elf_global_symbols", "plan_archive", "write_archive"]

Flavour = Literal["gnu", "gnu64", "bsd", "darwin"]
FLAVOURS: tuple[str, ...] = get_args(Flavour)

_SHN_ABS = 0xFFF1
_SHN_COMMON = 0xFFF2
_SYM64_THRESHOLD = 1 << 32
_BSD_ALIGN = 8
_BSD_SYMTAB_NAME = b"__.SYMDEF"
_BSD_SYMTAB64_NAME = b"__.SYMDEF_64"
_SOLARIS_EMPTY_STRTAB = b"\0\0\0"
_WORD_SIZE = {"I": 4, "Q": 8}


@dataclass(frozen=True)
class ArMember:
    """One member: its file name (no directories) and bytes; ``symbols`` overrides the ELF scan when given."""

    name: str
    data: bytes
    symbols: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ArchivePlan:
    """Where everything goes: the symbol table (names, member index per name), the long-name table,
    each member's header offset and ar_name field text, and the total size.

    ``flavour`` is the one written (``gnu`` becomes ``gnu64`` past 4 GiB); ``symtab_size`` counts the
    symbol table's data bytes, its padding and (BSD) its ``#1/12`` name included, 0 when there is none.
    ``prefixes`` are the BSD name bytes before each member's data, ``mtimes`` the date fields and
    ``tail_pads`` the Darwin ``\\n`` bytes counted in ar_size after each member's data.
    """

    symbols: tuple[tuple[str, int], ...]
    symtab_size: int
    longnames: bytes
    names: tuple[str, ...]  # the ar_name text of each member
    header_offsets: tuple[int, ...]
    size: int
    flavour: str = "gnu"
    prefixes: tuple[bytes, ...] = ()
    mtimes: tuple[int, ...] = ()
    tail_pads: tuple[int, ...] = ()
    has_object: bool = False


def elf_global_symbols(data: bytes | bytearray | memoryview) -> tuple[str, ...]:
    """The defined global symbols of an ELF file, in symbol-table order; () when ``data`` is no ELF.

    A corrupt ELF raises the reader's :class:`~devbin.errors.FormatError`.
    """
    from devbin.formats.elf.reader import ElfFile

    view = ByteView(data, fmt="elf")
    if not view.startswith(b"\x7fELF"):
        return ()
    return tuple(s.name for s in ElfFile(view).global_symbols(defined=True))


def _is_bsd(flavour: str) -> bool:
    return flavour in ("bsd", "darwin", "bsd64", "darwin64")


def _is_64(flavour: str) -> bool:
    return flavour.endswith("64")


def _pad(size: int, align: int) -> int:
    return -size % align


def _header(name: str, size: int, mode: str, *, blank: bool = False, mtime: int = 0) -> bytes:
    stamp = "" if blank else "0"
    fields = [(name, 16), ("" if blank else str(mtime), 12), (stamp, 6), (stamp, 6), (mode, 8), (str(size), 10)]
    out = b"".join(text.encode("utf-8").ljust(width, b" ") for text, width in fields) + C.FMAG
    if len(out) != C.HEADER_SIZE:
        raise UsageError(f"ar: header field too long for member {quote(name)}")
    return out


def _bsd_name(name: bytes, header_offset: int) -> bytes:
    """The ``#1/N`` name bytes: the name, NUL-padded so that the data after it starts 8-aligned."""
    return name + bytes(_pad(header_offset + C.HEADER_SIZE + len(name), _BSD_ALIGN))


def _symbol_strings(symbols: Sequence[tuple[str, int]]) -> bytes:
    return b"".join(s.encode("utf-8") + b"\0" for s, _ in symbols)


def _symtab_body_size(flavour: str, symbols: Sequence[tuple[str, int]], has_object: bool) -> int:
    """Data bytes of the symbol table (without a BSD name), padding included."""
    word = 8 if _is_64(flavour) else 4
    strings = len(_symbol_strings(symbols))
    if _is_bsd(flavour):
        if not strings and has_object:
            strings = len(_SOLARIS_EMPTY_STRTAB)
        size = word + 2 * word * len(symbols) + word + strings
        return size + _pad(size, _BSD_ALIGN)
    size = word + word * len(symbols) + strings
    return size + size % 2


_RESERVED = frozenset((*C.BSD_SYMTABS, *C.BSD_SYMTABS64, C.PSEUDO_BSD_STRTAB[:-1]))


def _validate(members: Sequence[ArMember]) -> None:
    """Refuse names a reader could not give back: with '/', newline or NUL, or read as a special member."""
    for m in members:
        if not m.name or "/" in m.name or "\n" in m.name or "\0" in m.name:
            raise UsageError(f"ar: member name {quote(m.name)} is empty or holds '/', a newline or NUL")
        if m.name in _RESERVED:
            raise UsageError(f"ar: member name {quote(m.name)} is reserved (readers take it for a symbol or name "
                             "table)")


def _collect_symbols(members: Sequence[ArMember]) -> tuple[list[tuple[str, int]], bool]:
    """Every (symbol, member index) in archive order, and whether any member is an object."""
    symbols: list[tuple[str, int]] = []
    has_object = False
    for i, m in enumerate(members):
        try:
            syms = m.symbols if m.symbols is not None else elf_global_symbols(m.data)
        except DeviceBinaryError as e:
            raise UsageError(f"ar: cannot read the symbols of member {quote(m.name)}: {e}") from e
        has_object = has_object or bool(syms) or m.data[:4] == b"\x7fELF"
        symbols.extend((s, i) for s in syms)
    return symbols, has_object


def _layout(members: Sequence[ArMember], flavour: str, symbols: list[tuple[str, int]], has_object: bool,
            with_symtab: bool) -> ArchivePlan:
    bsd = _is_bsd(flavour)
    longnames = bytearray()
    names: list[str] = []
    if not bsd:
        for m in members:
            raw = m.name.encode("utf-8")
            if len(raw) <= 15:
                names.append(m.name + "/")
            else:
                names.append(f"/{len(longnames)}")
                longnames += raw + b"/\n"
        if len(longnames) % 2:
            longnames += C.PAD_BYTE  # binutils pads the table itself (and counts the byte in its size)
    pos = C.MAGIC_SIZE
    symtab_size = 0
    if with_symtab:
        symtab_size = _symtab_body_size(flavour, symbols, has_object)
        if bsd:
            symtab_size += len(_bsd_name(_BSD_SYMTAB64_NAME if _is_64(flavour) else _BSD_SYMTAB_NAME, pos))
        pos += C.HEADER_SIZE + symtab_size + symtab_size % 2
    if longnames:
        pos += C.HEADER_SIZE + len(longnames)
    offsets: list[int] = []
    prefixes: list[bytes] = []
    tail_pads: list[int] = []
    for m in members:
        offsets.append(pos)
        prefix = _bsd_name(m.name.encode("utf-8"), pos) if bsd else b""
        tail = _pad(len(m.data), _BSD_ALIGN) if flavour.startswith("darwin") else 0
        if bsd:
            names.append(f"{C.BSD_LONG_NAME_PREFIX}{len(prefix)}")
        prefixes.append(prefix)
        tail_pads.append(tail)
        stored = len(prefix) + len(m.data) + tail
        pos += C.HEADER_SIZE + stored + stored % 2
    mtimes = [0] * len(members)
    if flavour.startswith("darwin"):
        seen: dict[str, int] = {}
        for m in members:
            seen[m.name] = seen.get(m.name, 0) + 1
        counters = {n: 1 for n, k in seen.items() if k > 1}
        for i, m in enumerate(members):
            if m.name in counters:
                mtimes[i] = counters[m.name]
                counters[m.name] += 1
    return ArchivePlan(tuple(symbols), symtab_size, bytes(longnames), tuple(names), tuple(offsets), pos,
                       flavour, tuple(prefixes), tuple(mtimes), tuple(tail_pads), has_object)


def plan_archive(members: Sequence[ArMember], *, flavour: Flavour = "gnu",
                 sym64_threshold: int = _SYM64_THRESHOLD, symtab: bool = True) -> ArchivePlan:
    """Lay out an archive of ``members`` (nothing is written); see the module docstring.  ``symtab=False``:
    no symbol table whatever the members are (``gnu`` only)."""
    if flavour not in FLAVOURS:
        raise UsageError(f"ar: unknown flavour {flavour!r} (one of {', '.join(FLAVOURS)})")
    if not symtab and flavour != "gnu":
        raise UsageError(f"ar: an archive without a symbol table is written in the gnu flavour, not {flavour}")
    _validate(members)
    symbols, has_object = _collect_symbols(members) if symtab else ([], False)
    with_symtab = symtab and (has_object or flavour == "darwin")
    plan = _layout(members, flavour, symbols, has_object, with_symtab)
    last_header = plan.header_offsets[-1] if plan.header_offsets else plan.size
    if with_symtab and not _is_64(flavour) and last_header >= sym64_threshold:
        wide = {"gnu": "gnu64", "bsd": "bsd64", "darwin": "darwin64"}[flavour]
        plan = _layout(members, wide, symbols, has_object, True)
    if plan.header_offsets and plan.header_offsets[-1] >> 64:
        raise UsageError("ar: archive too large for 64-bit member offsets")
    return plan


def _emit_symtab(em: Emitter, plan: ArchivePlan) -> None:
    word = "Q" if _is_64(plan.flavour) else "I"
    start = len(em)
    if _is_bsd(plan.flavour):
        name = _BSD_SYMTAB64_NAME if _is_64(plan.flavour) else _BSD_SYMTAB_NAME
        prefix = _bsd_name(name, start)
        em.write(_header(f"{C.BSD_LONG_NAME_PREFIX}{len(prefix)}", plan.symtab_size, "0"))
        em.write(prefix)
        strings = _symbol_strings(plan.symbols)
        if not strings and plan.has_object:
            strings = _SOLARIS_EMPTY_STRTAB
        em.pack(word, 2 * _WORD_SIZE[word] * len(plan.symbols))
        strx = 0
        for sym, member in plan.symbols:
            em.pack(word + word, strx, plan.header_offsets[member])
            strx += len(sym.encode("utf-8")) + 1
        em.pack(word, len(strings))
        em.write(strings)
    else:
        em.write(_header(C.GNU_SYMTAB64 if _is_64(plan.flavour) else C.GNU_SYMTAB, plan.symtab_size, "0"))
        em.pack(word, len(plan.symbols))
        for _, member in plan.symbols:
            em.pack(word, plan.header_offsets[member])
        em.write(_symbol_strings(plan.symbols))
    end = start + C.HEADER_SIZE + plan.symtab_size
    em.pad_to(end, "end of symbol table")
    if plan.symtab_size % 2:
        em.write(C.PAD_BYTE)


def write_archive(members: Sequence[ArMember], *, flavour: Flavour = "gnu",
                  sym64_threshold: int = _SYM64_THRESHOLD, symtab: bool = True, pad_byte: bytes = C.PAD_BYTE,
                  ) -> bytes:
    """An ``ar`` archive of ``members`` in order, of the given ``flavour`` (see the module docstring).

    ``symtab=False`` writes no symbol table and ``pad_byte`` pads a member of odd size: compute-runtime's
    ``ArEncoder`` (``shared/source/device_binary_format/ar/ar_encoder.cpp``, ``ocloc``'s fat archives) writes
    neither table and pads with a NUL."""
    if len(pad_byte) != 1:
        raise UsageError("ar: the padding is one byte")
    plan = plan_archive(members, flavour=flavour, sym64_threshold=sym64_threshold, symtab=symtab)
    em = Emitter(little=_is_bsd(plan.flavour))  # GNU tables are big-endian, BSD ones little-endian (llvm-ar)
    em.write(C.MAGIC)
    if plan.symtab_size:
        _emit_symtab(em, plan)
    if plan.longnames:
        em.write(_header(C.GNU_STRTAB, len(plan.longnames), "", blank=True))
        em.write(plan.longnames)
    for i, (m, name, off) in enumerate(zip(members, plan.names, plan.header_offsets, strict=True)):
        em.at(off, f"member {quote(m.name)}")
        prefix, tail = plan.prefixes[i], plan.tail_pads[i]
        stored = len(prefix) + len(m.data) + tail
        em.write(_header(name, stored, "644", mtime=plan.mtimes[i]))
        em.write(prefix)
        em.write(m.data)
        em.write(pad_byte * (tail + stored % 2))
    em.at(plan.size, "end of archive")
    return em.getvalue()
