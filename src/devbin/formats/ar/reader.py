"""Read view of Unix ``ar`` archives: GNU/System V, BSD/Darwin and GNU thin archives.

``ArchiveFile(buf, where="lib.a")`` walks and validates every member header at open
(binutils ``include/aout/ar.h``); member *data* stays a zero-copy window over ``buf``.

On-disk layout::

    "!<arch>\\n" | "!<thin>\\n"                8-byte global magic
    repeat:
        60-byte header (constants.py)          name, date, uid, gid, mode (octal), size (decimal), "`\\n"
        [BSD: N name bytes when ar_name is "#1/N"; counted in ar_size]
        data                                   ar_size bytes (absent for regular members of thin archives)
        ["\\n" when the header offset + 60 + ar_size is odd]

Name encodings, all resolved into :attr:`Member.name`:

* GNU/SysV: ``name/`` (the slash ends the name, so names may hold spaces); ``/123`` is
  offset 123 into the ``//`` member, where each name ends with ``/\\n`` (COFF uses NUL);
  ``/`` and ``/SYM64/`` are the symbol tables (big-endian u32 / u64), ``//`` the long names.
* BSD: ``#1/N`` means the real name is the first N bytes of the data (NUL-padded) and the
  member's data starts after it; short names are space-padded without a slash.  The
  symbol table is a member named ``__.SYMDEF`` (``__.SYMDEF_64`` for u64 fields,
  ``" SORTED"`` variants), little-endian as llvm-ar writes it.
* Thin (``!<thin>\\n``): the symbol table and ``//`` are stored, but regular members carry
  only a header whose name is a path relative to the archive's folder and whose size is
  that file's size; no data follows, so the next header comes straight after.

Quirks: GNU ar lists a BSD ``__.SYMDEF`` as an ordinary member because it does not know
the BSD layout; here it is a symbol table in either flavour.  A member of odd size is
followed by one padding byte; a missing final pad or a pad byte other than ``\\n`` is
reported to ``diag`` (non-critical), never read as part of the next header.

Every error is a :class:`devbin.errors.FormatError` with format ``ar`` and a location
``lib.a(member.o)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from devbin.binary import Buffer, ByteView
from devbin.errors import DeviceBinaryError, NotThisFormat, TruncatedError, UsageError, quote
from devbin.formats.ar import constants as C

Diag = Callable[[DeviceBinaryError], None]

__all__ = ["ArchiveFile", "ArchiveSymbol", "Member", "is_archive", "member_number", "numbered"]


def member_number(seen: dict[str, int], name: str) -> int:
    """The number of the member ``name`` now met among the members of that name, from 1, counted into ``seen``
    (one dict per archive): an address's ``name;N`` (docs/IMAGES.md), how the scan, prune and select all
    count an archive's (or a zip's) members, every member counted, whatever is done with it after."""
    seen[name] = n = seen.get(name, 0) + 1
    return n


def numbered(members: Iterable[Member]) -> list[tuple[Member, int]]:
    """Each of ``members`` (an archive's :attr:`ArchiveFile.files`) with its :func:`member_number`."""
    seen: dict[str, int] = {}
    return [(m, member_number(seen, m.name)) for m in members]


def _raise(err: DeviceBinaryError) -> None:
    raise err


def is_archive(data: Buffer | ByteView) -> bool:
    """True when ``data`` starts with the regular or the thin archive magic."""
    view = data if isinstance(data, ByteView) else ByteView(data)
    return view.startswith(C.MAGIC) or view.startswith(C.THIN_MAGIC)


@dataclass(frozen=True, slots=True)
class Member:
    """One archive member: resolved name, raw header fields and a window on its data.

    ``offset`` is the offset of the data in the archive (after a BSD ``#1/N`` name) and
    ``size`` the data size (the name bytes excluded).  For a regular member of a thin
    archive, ``thin`` is true, ``size`` is the external file's size and ``data`` is empty.
    ``mtime``/``uid``/``gid``/``mode`` are the header strings, trailing spaces removed.
    """

    index: int
    name: str
    raw_name: str
    kind: str
    header_offset: int
    offset: int
    size: int
    mtime: str
    uid: str
    gid: str
    mode: str
    thin: bool = False
    view: ByteView = field(repr=False, compare=False, default_factory=lambda: ByteView(b""))

    @property
    def data(self) -> memoryview:
        """The member's bytes (empty for thin members)."""
        return self.view.bytes_at(0, len(self.view))

    @property
    def is_symbol_table(self) -> bool:
        """True for ``/``, ``/SYM64/`` and ``__.SYMDEF*``."""
        return self.kind == C.KIND_SYMTAB

    @property
    def is_special(self) -> bool:
        """True for archive bookkeeping (symbol tables, long-name table, COFF extras), not a file."""
        return self.kind != C.KIND_FILE

    @property
    def mode_value(self) -> int | None:
        """``mode`` as an integer (it is octal on disk), or None when blank or not octal."""
        return _int_or_none(self.mode, 8)

    @property
    def mtime_value(self) -> int | None:
        return _int_or_none(self.mtime, 10)


@dataclass(frozen=True, slots=True)
class ArchiveSymbol:
    """One symbol-table entry: a name and the *header* offset of the member defining it."""

    name: str
    header_offset: int


def _int_or_none(text: str, base: int) -> int | None:
    digits = "01234567" if base == 8 else "0123456789"
    if not text or any(c not in digits for c in text):
        return None
    return int(text, base)


def _decimal(raw: bytes) -> int | None:
    text = raw.strip(b" ")
    if not text or not text.isdigit():
        return None
    return int(text)


def _text(raw: bytes | memoryview) -> str:
    return bytes(raw).decode("utf-8", "backslashreplace")


class ArchiveFile:
    """A parsed, validated, read-only ``ar`` archive over ``buf``."""

    def __init__(self, buf: Buffer | ByteView, *, where: str = "", diag: Diag | None = None) -> None:
        base = buf.base if isinstance(buf, ByteView) else 0
        self.view = ByteView(buf, fmt="ar", where=where, base=base)
        self.where = where
        self._diag = diag or _raise
        if self.view.startswith(C.MAGIC):
            self.thin = False
        elif self.view.startswith(C.THIN_MAGIC):
            self.thin = True
        else:
            raise self.view.error("not an ar archive (bad magic)", 0, cls=NotThisFormat)
        self._strtab: ByteView | None = None
        self.members: tuple[Member, ...] = self._parse_members()
        self._by_header = {m.header_offset: m for m in self.members}

    # -- public accessors -----------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.view)

    @property
    def files(self) -> tuple[Member, ...]:
        """The members that are files (what ``ar t`` lists), in archive order."""
        return tuple(m for m in self.members if not m.is_special)

    @property
    def flavour(self) -> str:
        """``"thin"``, ``"gnu"`` (``/``, ``//`` or ``name/`` seen), ``"bsd"`` (``#1/`` or
        ``__.SYMDEF``) or ``""`` when no member says (e.g. an empty archive)."""
        if self.thin:
            return "thin"
        for m in self.members:
            if m.raw_name.startswith(C.BSD_LONG_NAME_PREFIX) or m.name in C.BSD_SYMTABS + C.BSD_SYMTABS64:
                return "bsd"
            if m.raw_name.startswith("/") or m.raw_name.endswith("/"):
                return "gnu"
        return ""

    @property
    def symbol_table(self) -> Member | None:
        """The first symbol-table member, or None."""
        for m in self.members:
            if m.is_symbol_table:
                return m
        return None

    def member_at(self, header_offset: int) -> Member | None:
        """The member whose header starts at ``header_offset`` (symbol tables point there)."""
        return self._by_header.get(header_offset)

    def member_where(self, member: Member) -> str:
        """The location path of a member, ``lib.a(k.o)``."""
        return f"{self.where or '<archive>'}({member.name})"

    @cached_property
    def symbols(self) -> tuple[ArchiveSymbol, ...]:
        """The entries of the first symbol table (empty when there is none).

        Decoded on first use; a corrupt table raises :class:`FormatError`.
        """
        m = self.symbol_table
        if m is None:
            return ()
        view = ByteView(m.view, fmt="ar", where=self.member_where(m), base=m.offset)
        if m.name == C.GNU_SYMTAB:
            return _gnu_symbols(view.with_order(False), 4)
        if m.name == C.GNU_SYMTAB64:
            return _gnu_symbols(view.with_order(False), 8)
        return _bsd_symbols(view.with_order(True), 8 if m.name in C.BSD_SYMTABS64 else 4)

    def thin_member_path(self, member: Member, archive_path: str | Path, *, allow_outside: bool = False) -> Path:
        """Where a thin member's data lives: its name taken relative to the archive's folder.

        Refuses (:class:`UsageError`) a path that leaves the archive's folder (``..``,
        absolute paths, symlinks out) unless ``allow_outside`` is set.
        """
        if not member.thin:
            raise UsageError(f"{self.member_where(member)} is not a thin member", fmt="ar", where=self.where)
        folder = Path(archive_path).parent
        target = Path(member.name)
        if not target.is_absolute():
            target = folder / target
        if not allow_outside:
            try:
                inside = target.resolve().is_relative_to(folder.resolve())
            except (OSError, RuntimeError, ValueError):
                inside = False
            if not inside:
                raise UsageError(f"thin member {quote(member.name)} lies outside the archive's folder {str(folder)!r}",
                                 fmt="ar", where=self.member_where(member))
        return target

    # -- parsing ----------------------------------------------------------------
    def _loc(self, name: str) -> str:
        return f"{self.where or '<archive>'}({name})"

    def _parse_members(self) -> tuple[Member, ...]:
        v = self.view
        out: list[Member] = []
        pos = C.MAGIC_SIZE
        n = len(v)
        while pos < n:
            member, pos = self._parse_one(len(out), pos)
            out.append(member)
        return tuple(out)

    def _parse_one(self, index: int, hdr: int) -> tuple[Member, int]:
        v = self.view
        n = len(v)
        if n - hdr < C.HEADER_SIZE:
            raise v.error(f"member [{index}]: header needs {C.HEADER_SIZE} bytes, {n - hdr} left", hdr,
                          cls=TruncatedError, where=f"{self.where or '<archive>'}: member [{index}]")
        raw = bytes(v.bytes_at(hdr, C.HEADER_SIZE, "member header"))
        raw_name = _text(raw[C.NAME[0]:C.NAME[0] + C.NAME[1]].rstrip(b" "))
        loc = self._loc(raw_name)
        if raw[C.FMAG_FIELD[0]:C.FMAG_FIELD[0] + 2] != C.FMAG:
            raise v.error("member header does not end with \"`\\n\"", hdr + C.FMAG_FIELD[0],
                          raw[C.FMAG_FIELD[0]:C.FMAG_FIELD[0] + 2], where=loc)
        size = _decimal(raw[C.SIZE[0]:C.SIZE[0] + C.SIZE[1]])
        if size is None:
            raise v.error("ar_size is not a decimal number", hdr + C.SIZE[0],
                          _text(raw[C.SIZE[0]:C.SIZE[0] + C.SIZE[1]]), where=loc)
        data = hdr + C.HEADER_SIZE
        name, kind = self._resolve_name(raw_name, index, hdr, loc)
        thin = self.thin and kind == C.KIND_FILE
        if not thin and (data > n or size > n - data):
            raise v.error(f"ar_size {size:#x} runs past the end of the archive ({n:#x})", hdr + C.SIZE[0], size,
                          cls=TruncatedError, where=self._loc(name))
        stored = 0 if thin else size
        data_size = size
        if raw_name.startswith(C.BSD_LONG_NAME_PREFIX) and not thin:
            name, kind, name_len = self._bsd_name(raw_name, data, size, loc)
            data += name_len
            data_size -= name_len
        fields = {
            "mtime": _text(raw[C.DATE[0]:C.DATE[0] + C.DATE[1]].rstrip(b" ")),
            "uid": _text(raw[C.UID[0]:C.UID[0] + C.UID[1]].rstrip(b" ")),
            "gid": _text(raw[C.GID[0]:C.GID[0] + C.GID[1]].rstrip(b" ")),
            "mode": _text(raw[C.MODE[0]:C.MODE[0] + C.MODE[1]].rstrip(b" ")),
        }
        mview = v.sub(data, 0 if thin else data_size, where=self._loc(name))
        member = Member(index=index, name=name, raw_name=raw_name, kind=kind, header_offset=hdr, offset=data,
                        size=data_size, thin=thin, view=mview, **fields)
        if kind == C.KIND_STRTAB and self._strtab is None:
            self._strtab = mview
        end = hdr + C.HEADER_SIZE + stored
        if end % 2:
            if end == n:
                self._diag(v.error("odd-sized last member has no padding byte", end, where=self._loc(name)))
            elif not any(v.startswith(b, end) for b in C.PAD_BYTES_READ):
                self._diag(v.error("padding byte after an odd-sized member is neither '\\n' nor NUL", end, v.u8(end),
                                   where=self._loc(name)))
            end += 1
        return member, end

    def _resolve_name(self, raw_name: str, index: int, hdr: int, loc: str) -> tuple[str, str]:
        """The member name and kind from ``ar_name`` (BSD ``#1/N`` names are resolved later)."""
        if raw_name in (C.GNU_SYMTAB, C.GNU_SYMTAB64):
            return raw_name, C.KIND_SYMTAB
        if raw_name in (C.GNU_STRTAB, C.PSEUDO_BSD_STRTAB):
            return raw_name, C.KIND_STRTAB
        if raw_name in C.COFF_SPECIAL:
            return raw_name, C.KIND_SPECIAL
        if raw_name.startswith("/"):
            digits = raw_name[1:]
            if digits.isdigit() and digits.isascii():
                return self._long_name(int(digits), hdr, loc), C.KIND_FILE
            return raw_name, C.KIND_SPECIAL
        if raw_name.startswith(C.BSD_LONG_NAME_PREFIX):
            return raw_name, C.KIND_FILE
        name = raw_name[:-1] if raw_name.endswith("/") else raw_name
        if name in C.BSD_SYMTABS + C.BSD_SYMTABS64:
            return name, C.KIND_SYMTAB
        return name, C.KIND_FILE

    def _long_name(self, offset: int, hdr: int, loc: str) -> str:
        """Name at ``offset`` in ``//``: ends at ``\\n`` (GNU, after a ``/``) or NUL (COFF)."""
        tab = self._strtab
        if tab is None:
            raise self.view.error("long-name reference but no '//' member precedes it", hdr, offset, where=loc)
        if offset >= len(tab):
            raise self.view.error(f"long-name offset outside the '//' member (size {len(tab):#x})", hdr, offset,
                                  where=loc)
        ends = [e for e in (tab.find(b"\n", offset), tab.find(b"\0", offset)) if e >= 0]
        if not ends:
            raise self.view.error("long name in '//' is not terminated", tab.base - self.view.base + offset, offset,
                                  where=loc)
        name = _text(tab.bytes_at(offset, min(ends) - offset))
        return name[:-1] if name.endswith("/") else name

    def _bsd_name(self, raw_name: str, data: int, size: int, loc: str) -> tuple[str, str, int]:
        digits = raw_name[len(C.BSD_LONG_NAME_PREFIX):]
        if not digits.isdigit() or not digits.isascii():
            raise self.view.error("BSD long name length after '#1/' is not a decimal number", data - C.HEADER_SIZE,
                                  raw_name, where=loc)
        name_len = int(digits)
        if name_len > size:
            raise self.view.error(f"BSD long name of {name_len} bytes is longer than the member ({size})",
                                  data - C.HEADER_SIZE, name_len, where=loc)
        name = _text(bytes(self.view.bytes_at(data, name_len, "BSD long name")).rstrip(b"\0"))
        kind = C.KIND_SYMTAB if name in C.BSD_SYMTABS + C.BSD_SYMTABS64 else C.KIND_FILE
        return name, kind, name_len


def _gnu_symbols(view: ByteView, width: int) -> tuple[ArchiveSymbol, ...]:
    """GNU ``/`` (width 4) or ``/SYM64/`` (8): count, header offsets, then NUL-terminated names."""
    fmt = "I" if width == 4 else "Q"
    (count,) = view.unpack(fmt, 0, "symbol count")
    view.check_count(count, width, width, "symbol offsets")
    offsets = [o for (o,) in view.iter_unpack(fmt, width, count, "symbol offsets")]
    pos = width + count * width
    out = []
    for i, off in enumerate(offsets):
        name = view.cstr(pos, f"symbol name [{i}]")
        pos = view.find(b"\0", pos) + 1
        out.append(ArchiveSymbol(name, off))
    return tuple(out)


def _bsd_symbols(view: ByteView, width: int) -> tuple[ArchiveSymbol, ...]:
    """BSD ``__.SYMDEF`` (width 4) / ``__.SYMDEF_64`` (8): ranlib bytes, (strx, off) pairs, strtab bytes, strtab."""
    fmt = "I" if width == 4 else "Q"
    (ranlib_bytes,) = view.unpack(fmt, 0, "ranlib size")
    entry = 2 * width
    if ranlib_bytes % entry:
        raise view.error(f"ranlib size {ranlib_bytes:#x} is not a multiple of {entry}", 0, ranlib_bytes)
    count = ranlib_bytes // entry
    rows = list(view.iter_unpack(fmt + fmt, width, count, "ranlib entries"))
    str_at = width + ranlib_bytes
    (str_size,) = view.unpack(fmt, str_at, "string table size")
    strings = view.sub(str_at + width, str_size, where=view.where)
    return tuple(ArchiveSymbol(strings.cstr(strx, f"symbol name [{i}]"), off) for i, (strx, off) in enumerate(rows))
