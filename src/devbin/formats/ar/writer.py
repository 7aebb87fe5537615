"""Write GNU (System V) ``ar`` archives deterministically: plan the layout, then emit it.

Layout (shared/reference/archives.md §1; constants in ``constants.py``)::

    "!<arch>\\n"
    "/"   symbol table  u32 BE count, count x u32 BE member-header offset, NUL-terminated names
    "//"  long names    "name/\\n" per member whose name does not fit ar_name (16 bytes, with a "/")
    members             header (60 bytes) + data, each padded with "\\n" to an even offset

What ``ar rcsD`` (binutils, deterministic mode) writes, and what this writer writes:

* every member header has date 0, uid 0, gid 0 and mode ``644`` (octal text);
  the symbol table's has date, uid, gid and mode ``0``; the long-name table's
  has all of them blank, and the table is padded to an even size *inside* (its
  size counts the ``\n``), exactly as binutils writes them;
* a member name of up to 15 bytes is stored as ``name/``; longer names go into
  ``//`` and are referenced as ``/<offset>``.  A name may not contain ``/``
  (ar strips directories; a slash would make the name ambiguous);
* the symbol table lists, member by member in archive order, every *defined
  global* symbol of each ELF member (``STB_GLOBAL``, ``STB_WEAK``,
  ``STB_GNU_UNIQUE``; ``SHN_COMMON`` counts as defined), in symbol-table order;
  members that are no ELF contribute nothing.  No ``/`` member is written when
  no member defines a symbol, as binutils does.  Offsets are 32-bit: an archive
  above 4 GiB would need ``/SYM64/``, which is refused rather than written wrong.

The same members give the same bytes, run after run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from devbin.binary import ByteView, Emitter
from devbin.errors import DeviceBinaryError, UsageError
from devbin.formats.ar import constants as C

__all__ = ["ArMember", "ArchivePlan", "elf_global_symbols", "plan_archive", "write_archive"]

_BINDINGS_GLOBAL = (1, 2, 10)  # STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE
_SHN_UNDEF = 0
_SHN_ABS = 0xFFF1
_SHN_COMMON = 0xFFF2
_U32 = 0xFFFFFFFF


@dataclass(frozen=True)
class ArMember:
    """One member: its file name (no directories) and bytes; ``symbols`` overrides the ELF scan when given."""

    name: str
    data: bytes
    symbols: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ArchivePlan:
    """Where everything goes: the symbol table (names, member index per name), the long-name table,
    each member's header offset and ar_name field text, and the total size."""

    symbols: tuple[tuple[str, int], ...]
    symtab_size: int  # data bytes of "/" (0: no symbol table)
    longnames: bytes
    names: tuple[str, ...]  # the ar_name text of each member
    header_offsets: tuple[int, ...]
    size: int


def elf_global_symbols(data: bytes | bytearray | memoryview) -> tuple[str, ...]:
    """The defined global symbols of an ELF file, in symbol-table order; () when ``data`` is no ELF.

    A corrupt ELF raises the reader's :class:`~devbin.errors.FormatError`.
    """
    from devbin.formats.elf.reader import ElfFile

    view = ByteView(data, fmt="elf")
    if not view.startswith(b"\x7fELF"):
        return ()
    elf = ElfFile(view)
    out: list[str] = []
    for table in elf.symbol_tables.values():
        if table.section.sh_type != 2:  # SHT_SYMTAB only: .dynsym of a shared object is not indexed by ar
            continue
        for s in table:
            if s.index == 0 or s.bind not in _BINDINGS_GLOBAL or s.st_shndx == _SHN_UNDEF or not s.name:
                continue
            out.append(s.name)
    return tuple(out)


def _name_field(name: str) -> bytes | None:
    """The ar_name bytes of a short name, or None when it needs the long-name table."""
    raw = name.encode("utf-8")
    return raw + b"/" if len(raw) <= 15 else None


def _header(name: str, size: int, mode: str, *, blank: bool = False) -> bytes:
    stamp = "" if blank else "0"
    fields = [(name, 16), (stamp, 12), (stamp, 6), (stamp, 6), (mode, 8), (str(size), 10)]
    out = b"".join(text.encode("utf-8").ljust(width, b" ") for text, width in fields) + C.FMAG
    if len(out) != C.HEADER_SIZE:
        raise UsageError(f"ar: header field too long for member {name!r}")
    return out


def plan_archive(members: Sequence[ArMember]) -> ArchivePlan:
    """Lay out an archive of ``members`` (nothing is written)."""
    symbols: list[tuple[str, int]] = []
    longnames = bytearray()
    names: list[str] = []
    for i, m in enumerate(members):
        if not m.name or "/" in m.name or "\n" in m.name or "\0" in m.name:
            raise UsageError(f"ar: member name {m.name!r} is empty or holds '/', a newline or NUL")
        field_ = _name_field(m.name)
        if field_ is None:
            names.append(f"/{len(longnames)}")
            longnames += m.name.encode("utf-8") + b"/\n"
        else:
            names.append(field_.decode("utf-8"))
        try:
            syms = m.symbols if m.symbols is not None else elf_global_symbols(m.data)
        except DeviceBinaryError as e:
            raise UsageError(f"ar: cannot read the symbols of member {m.name!r}: {e}") from e
        symbols.extend((s, i) for s in syms)
    if len(longnames) % 2:
        longnames += C.PAD_BYTE  # binutils pads the table itself (and counts the byte in its size)
    symtab_size = 0
    if symbols:
        symtab_size = 4 + 4 * len(symbols) + sum(len(s.encode("utf-8")) + 1 for s, _ in symbols)
    pos = C.MAGIC_SIZE
    if symtab_size:
        pos += C.HEADER_SIZE + symtab_size + symtab_size % 2
    if longnames:
        pos += C.HEADER_SIZE + len(longnames)
    offsets: list[int] = []
    for m in members:
        offsets.append(pos)
        pos += C.HEADER_SIZE + len(m.data) + len(m.data) % 2
    if symbols and offsets[-1] > _U32:
        raise UsageError("ar: archive larger than 4 GiB needs a /SYM64/ symbol table, which is not written")
    return ArchivePlan(tuple(symbols), symtab_size, bytes(longnames), tuple(names), tuple(offsets), pos)


def write_archive(members: Sequence[ArMember]) -> bytes:
    """A GNU ``ar`` archive of ``members`` in order (see the module docstring)."""
    plan = plan_archive(members)
    em = Emitter(little=False)  # the symbol table's numbers are big-endian
    em.write(C.MAGIC)
    if plan.symtab_size:
        em.write(_header(C.GNU_SYMTAB, plan.symtab_size, "0"))
        start = len(em)
        em.pack("I", len(plan.symbols))
        for _, member in plan.symbols:
            em.pack("I", plan.header_offsets[member])
        for name, _ in plan.symbols:
            em.write(name.encode("utf-8") + b"\0")
        em.at(start + plan.symtab_size, "end of symbol table")
        if plan.symtab_size % 2:
            em.write(C.PAD_BYTE)
    if plan.longnames:
        em.write(_header(C.GNU_STRTAB, len(plan.longnames), "", blank=True))
        em.write(plan.longnames)
    for m, name, off in zip(members, plan.names, plan.header_offsets, strict=True):
        em.at(off, f"member {m.name!r}")
        em.write(_header(name, len(m.data), "644"))
        em.write(m.data)
        if len(m.data) % 2:
            em.write(C.PAD_BYTE)
    em.at(plan.size, "end of archive")
    return em.getvalue()
