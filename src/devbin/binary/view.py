"""The one bounds-checked, zero-copy byte reader.

Every parser in devbin reads through :class:`ByteView` (random access) or
:class:`Cursor` (a stream over a view).  Nothing else indexes raw bytes.

Rules this module enforces, so that parsers do not have to:

* every ``offset + size`` is checked for overflow and against the end of the
  view *before* anything is read (a negative or huge value is an error, never
  a wrap-around or a Python ``IndexError``);
* counts taken from headers are capped against the bytes that remain
  (:meth:`ByteView.check_count`) before any list is built, so a lying count
  cannot make devbin allocate gigabytes;
* slices are ``memoryview`` windows over the caller's buffer (bytes, bytearray
  or an mmap), never copies;
* errors carry the format, the location path, the absolute byte offset
  (``base`` + local offset, so a view of an archive member still reports file
  offsets) and the bad value.
"""

from __future__ import annotations

import functools
import mmap
import re
import struct
from collections.abc import Iterator
from typing import Final

from devbin.binary import mapped
from devbin.errors import FormatError, TruncatedError

__all__ = ["Buffer", "ByteView", "Cursor", "format_view", "join_where"]

Buffer = bytes | bytearray | memoryview | mmap.mmap

_STRUCTS: dict[tuple[bool, str], struct.Struct] = {}

_MAX_LEB_BYTES: Final = 10  # 64-bit values need at most 10 LEB128 bytes
_FIND_COPY_LIMIT: Final = 1 << 20


def _struct(little: bool, fmt: str) -> struct.Struct:
    key = (little, fmt)
    st = _STRUCTS.get(key)
    if st is None:
        st = struct.Struct(("<" if little else ">") + fmt)
        _STRUCTS[key] = st
    return st


class ByteView:
    """A bounded, read-only window over a buffer.

    ``fmt`` and ``where`` name the format and location used in error
    messages; ``base`` is the offset of this window in the outermost buffer;
    ``little`` selects the byte order of the integer readers.
    """

    __slots__ = ("_blob", "_mv", "base", "fmt", "little", "where")

    def __init__(
        self,
        data: Buffer | ByteView,
        *,
        fmt: str = "",
        where: str = "",
        base: int = 0,
        little: bool = True,
    ) -> None:
        if isinstance(data, ByteView):
            data = data._mv
        mv = data if isinstance(data, memoryview) else memoryview(data)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        self._mv: memoryview = mv
        self._blob: bytes | None = None  # a copy for find(), made once, for small views only
        self.base = base
        self.fmt = fmt
        self.where = where
        self.little = little

    # -- basic facts ---------------------------------------------------------
    def __len__(self) -> int:
        return len(self._mv)

    def __repr__(self) -> str:
        return f"<ByteView {self.fmt} {self.where!r} base={self.base:#x} size={len(self._mv):#x}>"

    # -- errors --------------------------------------------------------------
    def error(
        self,
        message: str,
        offset: int | None = None,
        value: object = None,
        *,
        cls: type[FormatError] = FormatError,
        where: str | None = None,
    ) -> FormatError:
        """Build (not raise) an error located in this view; ``offset`` is local."""
        return cls(
            message,
            fmt=self.fmt,
            where=self.where if where is None else where,
            offset=None if offset is None else self.base + offset,
            value=value,
        )

    def check(self, offset: int, size: int, what: str = "read") -> None:
        """Raise unless ``[offset, offset + size)`` lies inside this view."""
        n = len(self._mv)
        if offset < 0 or size < 0:
            raise self.error(f"{what}: negative offset or size {size:#x}", max(offset, 0), offset, cls=TruncatedError)
        if offset > n or size > n - offset:
            raise self.error(
                f"{what}: {size:#x} bytes run past the end ({self.base + n:#x})", offset, size, cls=TruncatedError
            )

    def check_count(self, count: int, item_size: int, offset: int, what: str = "table") -> None:
        """Check that ``count`` items of ``item_size`` bytes fit at ``offset``.

        Call this before building a list from a count read out of a header.
        """
        if count < 0:
            raise self.error(f"{what}: negative count", offset, count)
        if item_size <= 0:
            if count > len(self._mv) + 1:
                raise self.error(f"{what}: count larger than the data", offset, count)
            return
        self.check(offset, count * item_size, what)

    # -- integers ------------------------------------------------------------
    def unpack(self, fmt: str, offset: int, what: str = "read") -> tuple[int, ...]:
        """Unpack a ``struct`` format (no byte-order prefix) at ``offset``."""
        st = _struct(self.little, fmt)
        self.check(offset, st.size, what)
        return st.unpack_from(self._mv, offset)

    def iter_unpack(self, fmt: str, offset: int, count: int, what: str = "table") -> Iterator[tuple[int, ...]]:
        """Iterate ``count`` records of a ``struct`` format starting at ``offset``."""
        st = _struct(self.little, fmt)
        self.check_count(count, st.size, offset, what)
        if count == 0:
            return iter(())
        return st.iter_unpack(self._mv[offset : offset + count * st.size])

    def _int(self, fmt: str, offset: int) -> int:
        st = _struct(self.little, fmt)
        self.check(offset, st.size)
        return st.unpack_from(self._mv, offset)[0]  # type: ignore[no-any-return]

    def u8(self, offset: int) -> int:
        return self._int("B", offset)

    def u16(self, offset: int) -> int:
        return self._int("H", offset)

    def u32(self, offset: int) -> int:
        return self._int("I", offset)

    def u64(self, offset: int) -> int:
        return self._int("Q", offset)

    def i32(self, offset: int) -> int:
        return self._int("i", offset)

    def i64(self, offset: int) -> int:
        return self._int("q", offset)

    # -- bytes and strings ----------------------------------------------------
    def bytes_at(self, offset: int, size: int, what: str = "read") -> memoryview:
        """A zero-copy window of ``size`` bytes at ``offset``."""
        self.check(offset, size, what)
        return self._mv[offset : offset + size]

    def tobytes(self) -> bytes:
        return self._mv.tobytes()

    def sub(self, offset: int, size: int, *, where: str | None = None, fmt: str | None = None) -> ByteView:
        """A bounded child view; its errors report absolute offsets."""
        self.check(offset, size, where or "window")
        return ByteView(
            self._mv[offset : offset + size],
            fmt=self.fmt if fmt is None else fmt,
            where=self.where if where is None else where,
            base=self.base + offset,
            little=self.little,
        )

    def with_order(self, little: bool) -> ByteView:
        return ByteView(self._mv, fmt=self.fmt, where=self.where, base=self.base, little=little)

    def cstr(self, offset: int, what: str = "string", encoding: str = "utf-8") -> str:
        """The NUL-terminated string at ``offset`` (the NUL must be inside the view).

        Bytes that are not valid in ``encoding`` are kept as ``\\xNN`` escapes
        (``backslashreplace``), so a corrupt name is shown, never fatal.
        """
        n = len(self._mv)
        if offset < 0 or offset >= n:
            raise self.error(f"{what}: offset outside the string table (size {n:#x})", None, offset)
        end = self.find(b"\0", offset)
        if end < 0:
            raise self.error(f"{what}: string is not NUL-terminated", offset, cls=TruncatedError)
        return bytes(self._mv[offset:end]).decode(encoding, "backslashreplace")

    def find(self, needle: bytes, start: int = 0, end: int | None = None) -> int:
        """Offset of ``needle`` in ``[start, end)``, or -1."""
        stop = len(self._mv) if end is None else min(end, len(self._mv))
        if start < 0 or start > stop:
            return -1
        if len(self._mv) <= _FIND_COPY_LIMIT:
            # memoryview has no find(): copy a small view once (string tables are searched many times).
            if self._blob is None:
                self._blob = self._mv.tobytes()
            return self._blob.find(needle, start, stop)
        return _find(self._mv, needle, start, stop)

    def is_zero_from(self, offset: int) -> bool:
        """True when every byte from ``offset`` to the end is zero (padding after back-to-back containers).

        Checked in 64 KiB windows so a large tail is never copied whole.
        """
        n = len(self._mv)
        pos = max(offset, 0)
        while pos < n:
            size = min(1 << 16, n - pos)
            if any(self._mv[pos : pos + size]):
                return False
            pos += size
        return True

    def startswith(self, prefix: bytes, offset: int = 0) -> bool:
        n = len(prefix)
        return offset >= 0 and len(self._mv) - offset >= n and self._mv[offset : offset + n] == prefix

    def cursor(self, offset: int = 0) -> Cursor:
        return Cursor(self, offset)


@functools.lru_cache(maxsize=64)
def _pattern(needle: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(needle))


def _find(mv: memoryview, needle: bytes, start: int, stop: int) -> int:
    # memoryview has no find(), but a compiled regular expression searches any buffer in place:
    # a large view (a host library's data sections, a mapped file) is never copied, and a short
    # search (a name in a large string table) stops at its first hit.
    pattern = _pattern(needle)
    if not isinstance(mv.obj, mapped.Spilled):
        m = pattern.search(mv, start, stop)
        return -1 if m is None else m.start()
    # A spilled file (a zip member's bytes in a mapped temporary file, devbin.binary.mapped): searched a window
    # at a time, the bytes read through counted, so that its pages are given back as the search goes.
    window = mapped.DROP_BYTES
    pos = start
    while pos < stop:
        end = min(stop, pos + window)
        m = pattern.search(mv, pos, min(stop, end + len(needle) - 1))
        if m is not None:
            mapped.pages_read(m.start() - pos)
            return m.start()
        mapped.pages_read(end - pos)
        pos = end
    return -1


def format_view(data: Buffer | ByteView, fmt: str, where: str = "") -> ByteView:
    """``data`` as a little-endian view named for format ``fmt``.

    A container reader's entry point: a view handed in keeps its absolute ``base`` (and its
    ``where`` unless one is given), so errors still name file offsets.
    """
    if isinstance(data, ByteView):
        return ByteView(data, fmt=fmt, where=where or data.where, base=data.base, little=True)
    return ByteView(data, fmt=fmt, where=where)


def join_where(outer: str, inner: str) -> str:
    """A location path: ``lib.a(k.o): fatbin[2] sm_90``."""
    return f"{outer}: {inner}" if outer else inner


class Cursor:
    """A stream reader over a :class:`ByteView`.

    Reads advance ``pos``.  A failed read raises and leaves ``pos`` where it
    was, so a caller may catch, report and stop.  LEB128 readers reject
    encodings longer than 10 bytes (more than 64 bits).
    """

    __slots__ = ("pos", "view")

    def __init__(self, view: ByteView, pos: int = 0) -> None:
        self.view = view
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self.view) - self.pos

    def at_end(self) -> bool:
        return self.pos >= len(self.view)

    def error(self, message: str, value: object = None, *, offset: int | None = None) -> FormatError:
        return self.view.error(message, self.pos if offset is None else offset, value)

    def _take(self, fmt: str) -> int:
        v = self.view.unpack(fmt, self.pos)[0]
        self.pos += _struct(self.view.little, fmt).size
        return v

    def u8(self) -> int:
        return self._take("B")

    def u16(self) -> int:
        return self._take("H")

    def u32(self) -> int:
        return self._take("I")

    def u64(self) -> int:
        return self._take("Q")

    def i32(self) -> int:
        return self._take("i")

    def bytes(self, size: int, what: str = "read") -> memoryview:
        mv = self.view.bytes_at(self.pos, size, what)
        self.pos += size
        return mv

    def skip(self, size: int, what: str = "skip") -> None:
        self.view.check(self.pos, size, what)
        self.pos += size

    def uleb(self, what: str = "ULEB128") -> int:
        """An unsigned LEB128 integer (at most 64 bits)."""
        start = self.pos
        result = 0
        shift = 0
        for i in range(_MAX_LEB_BYTES):
            b = self.view.u8(start + i)
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                if result >> 64:
                    raise self.view.error(f"{what}: value exceeds 64 bits", start)
                self.pos = start + i + 1
                return result
            shift += 7
        raise self.view.error(f"{what}: encoding longer than {_MAX_LEB_BYTES} bytes", start)

    def sleb(self, what: str = "SLEB128") -> int:
        """A signed LEB128 integer (at most 64 bits)."""
        start = self.pos
        result = 0
        shift = 0
        for i in range(_MAX_LEB_BYTES):
            b = self.view.u8(start + i)
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if b & 0x40:
                    result -= 1 << shift
                if not -(1 << 63) <= result < (1 << 63):
                    raise self.view.error(f"{what}: value exceeds 64 bits", start)
                self.pos = start + i + 1
                return result
        raise self.view.error(f"{what}: encoding longer than {_MAX_LEB_BYTES} bytes", start)

    def count(self, item_min_size: int, what: str = "count") -> int:
        """A ULEB128 count, capped so ``count * item_min_size`` fits in what remains."""
        at = self.pos
        n = self.uleb(what)
        too_many = n * item_min_size > self.remaining if item_min_size > 0 else n > self.remaining + 1
        if too_many:
            raise self.view.error(f"{what}: {n} items cannot fit in the {self.remaining} bytes left", at, n)
        return n

    def cstr(self, what: str = "string") -> str:
        s = self.view.cstr(self.pos, what)
        end = self.view.find(b"\0", self.pos)
        self.pos = end + 1
        return s

    def str_with_len(self, what: str = "string") -> str:
        """A ULEB128 length followed by that many UTF-8 bytes."""
        n = self.uleb(what)
        raw = self.bytes(n, what)
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.view.error(f"{what}: not valid UTF-8 ({e.reason})", self.pos - n + e.start) from None
