"""A zip writer that copies members' compressed bytes as they are, and compresses the others as it writes.

:mod:`zipfile` cannot write a member without compressing it (it has no raw copy), and the maintained
streaming writers (``stream-zip``, ``zipstream-ng``) make new members only; so devbin writes zips
itself, in the layout :mod:`zipfile` writes to a seekable file, field for field, so that a member it
makes has the very bytes :func:`zipfile.ZipFile.writestr` gave it (PKWARE APPNOTE.TXT 6.3.10):

* each member: a *local file header* (4.3.7: ``PK\\x03\\x04``, version needed 20, or 45 with zip64,
  46 bzip2, 63 LZMA; general-purpose flags; method; MS-DOS time and date; CRC-32; compressed and
  uncompressed sizes; name and extra-field lengths), the name (UTF-8 with flag bit 11 where it is
  not ASCII, 4.4.4), the extra field, then the compressed bytes.  Sizes are always in the local
  header (no data descriptor, flag bit 3 clear): a member :meth:`ZipWriter.add` compresses gets a
  header with sizes 0 that is written again, filled in, once its bytes are written (the output is
  seekable).  Where the size once read could pass :data:`ZIP64_LIMIT` (more than
  ``ZIP64_LIMIT / 1.05``, as zipfile decides), the local header's sizes are ``0xFFFFFFFF`` and a zip64
  extended information extra field (4.5.3, tag 1) holds both as 8-byte values;
* :meth:`ZipWriter.copy` copies a member of another zip: its compressed bytes (after its own local
  header, :func:`devbin.formats.zipmember.raw_pieces`), CRC-32, sizes and method as they are, in
  pieces: a member of any size costs one piece of memory and no inflating or deflating.  Its name,
  date, external attributes, creating system and comment are kept; its extra fields are not (zipfile
  wrote none either), nor its flags but bits 1-2 of a method other than deflate (they describe its
  compressed data, 4.4.4) and bit 11;
* then the central directory (4.3.12: one header per member, version made by its creating system and
  20 or more, the sizes and the local header's offset, zip64 extra field with those of them over
  :data:`ZIP64_LIMIT`), a zip64 end of central directory record and locator (4.3.14, 4.3.15) where
  the count, size or offset of the central directory needs them, and the end of central directory
  record (4.3.16).

A member of more than :data:`CHUNK` bytes is deflated in :data:`CHUNK`-byte chunks on threads (zlib releases
the GIL while it compresses), as pigz does (Mark Adler's pigz.c, https://github.com/madler/pigz: "Use
deflateSetDictionary() to make use of history"): each chunk is deflated on its own, level 6, with the last
32 KiB (deflate's window, RFC 1951 3.2.5) of the chunk before it as preset dictionary, and every chunk but
the last ends with a sync flush (an empty stored block, RFC 1951 3.2.4: byte-aligned, not final), so the
chunks' outputs laid end to end are one raw deflate stream that any inflater reads (the dictionary only
gives the compressor the history the inflater has anyway).  A chunk's bytes depend on it and the 32 KiB
before it only: the member's bytes are the same whatever the number of threads (:func:`deflate_chunks`),
but they are not those of one zlib stream (:mod:`zipfile`'s), which a member of at most :data:`CHUNK` bytes
still gets.  At most ``threads + 1`` chunks are in flight: memory grows by a few chunks, not the member.

Nothing depends on the clock or the machine: the same members give the same bytes.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Protocol

from devbin.errors import FormatError
from devbin.formats import zipmember

if TYPE_CHECKING:
    import zipfile

    from devbin.binary import Buffer

__all__ = ["CHUNK", "ZIP64_LIMIT", "ZipWriter", "deflate_chunks", "deflated_size"]

#: zipfile's limit for 4-byte sizes and offsets: past it, zip64 fields (zipfile.ZIP64_LIMIT).
ZIP64_LIMIT = (1 << 31) - 1
_COUNT_LIMIT = (1 << 16) - 1
_STORED, _DEFLATED, _BZIP2, _LZMA = 0, 8, 12, 14  # APPNOTE 4.4.5
_VERSION: dict[int, int] = {_BZIP2: 46, _LZMA: 63}  # version needed to extract by method (4.4.3.2); 20 otherwise
_DEFAULT_VERSION, _ZIP64_VERSION = 20, 45
_UTF8 = 0x800  # flag bit 11: name and comment in UTF-8
_OPTIONS = 0x6  # flag bits 1-2: compression options
_LOCAL = struct.Struct("<4s2B4H3L2H")
_CENTRAL = struct.Struct("<4s4B4H3L5H2L")
_END64 = struct.Struct("<4sQ2H2L4Q")
_LOCATOR = struct.Struct("<4sLQL")
_END = struct.Struct("<4s4H2LH")
#: Bytes compressed or copied at a time.
PIECE = 1 << 20
#: Bytes of a member deflated as one chunk on one thread (:func:`deflate_chunks`).
CHUNK = 4 << 20
#: Deflate's window: the history a chunk's compressor is given (RFC 1951 3.2.5).
_WINDOW = 1 << 15
#: The most threads a member is deflated on by default.
_MAX_THREADS = 8


def _threads() -> int:
    """The processors this process may run on (at most :data:`_MAX_THREADS`)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, _MAX_THREADS))


def _deflate_chunk(history: bytes, chunk: bytes, last: bool) -> bytes:
    """``chunk`` as raw deflate (level 6), ``history`` (up to 32 KiB of input before it) its preset
    dictionary; ended by the final block when ``last``, else by a sync flush."""
    c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15, zdict=history) if history else \
        zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
    return c.compress(chunk) + c.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


def _chunks(pieces: Iterable[bytes | bytearray | memoryview]) -> Iterator[bytes]:
    """The bytes ``pieces`` gives regrouped into :data:`CHUNK`-byte chunks (the last shorter)."""
    held: list[bytes] = []
    n = 0
    for piece in pieces:
        view = memoryview(piece).cast("B")
        while len(view):
            take = min(len(view), CHUNK - n)
            held.append(bytes(view[:take]))
            n += take
            view = view[take:]
            if n == CHUNK:
                yield b"".join(held)
                held, n = [], 0
    if held:
        yield b"".join(held)


def deflate_chunks(chunks: Iterable[bytes], threads: int | None = None) -> Iterator[tuple[bytes, bytes]]:
    """Each of ``chunks`` (the last one ends the stream) and its raw deflate bytes, in order, deflated on up to
    ``threads`` threads (None: :func:`_threads`): the chunks' deflate bytes end to end are one raw deflate
    stream of the chunks' bytes, the same whatever ``threads`` (module docstring).  At most ``threads + 1``
    chunks are held at a time."""
    workers = threads or _threads()
    it = iter(chunks)
    history = b""
    pending: deque[tuple[bytes, Future[bytes]]] = deque()
    with ThreadPoolExecutor(workers) if workers > 1 else _Inline() as pool:
        current = next(it, None)
        while current is not None:
            after = next(it, None)
            pending.append((current, pool.submit(_deflate_chunk, history, current, after is None)))
            history = current[-_WINDOW:]
            current = after
            while len(pending) > workers or (pending and current is None):
                chunk, done = pending.popleft()
                yield chunk, done.result()


def _deflated(pieces: Iterable[bytes | bytearray | memoryview], size: int,
              threads: int | None) -> Iterator[tuple[bytes, bytes]]:
    """The chunks of the ``size`` bytes ``pieces`` gives and their deflate bytes, as :meth:`ZipWriter.add_pieces`
    writes a deflated member: one zlib stream up to :data:`CHUNK` bytes, else :func:`deflate_chunks`."""
    given = _chunks(pieces)
    if size <= CHUNK:  # one chunk: one zlib stream, as zipfile writes it, without a thread
        return deflate_chunks(iter([b"".join(given)]), 1)
    return deflate_chunks(given, threads)


def deflated_size(data: Buffer, threads: int | None = None) -> int:
    """How many bytes ``data`` takes as a deflated member that :class:`ZipWriter` writes (what ``size --keep``
    predicts of a pruned library in a wheel)."""
    view = memoryview(data).cast("B")
    pieces = (view[at:at + PIECE] for at in range(0, len(view), PIECE))
    return sum(len(out) for _, out in _deflated(pieces, len(view), threads))


class _Inline:
    """An executor that runs each call at once (one thread: no pool to start)."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: object, *args: object) -> Future[bytes]:
        done: Future[bytes] = Future()
        assert callable(fn)
        done.set_result(fn(*args))
        return done


class _Out(Protocol):
    def write(self, data: bytes | bytearray | memoryview, /) -> int: ...
    def tell(self) -> int: ...
    def seek(self, offset: int, whence: int = ..., /) -> int: ...


@dataclass
class _Entry:
    """One member as the central directory records it."""

    name: bytes
    flags: int
    method: int
    date_time: tuple[int, int, int, int, int, int]
    crc: int
    compressed: int
    size: int
    offset: int
    version: int  # version needed to extract, as the local header said
    create_system: int
    external_attr: int
    comment: bytes


def _dos(dt: tuple[int, int, int, int, int, int]) -> tuple[int, int]:
    """(time, date) in MS-DOS form (APPNOTE 4.4.6)."""
    return dt[3] << 11 | dt[4] << 5 | dt[5] // 2, (dt[0] - 1980) << 9 | dt[1] << 5 | dt[2]


def _name(info: zipfile.ZipInfo) -> tuple[bytes, int]:
    try:
        return info.filename.encode("ascii"), 0
    except UnicodeEncodeError:
        return info.filename.encode("utf-8"), _UTF8


class ZipWriter:
    """A new zip written to ``out`` (write/tell/seek) member by member; :meth:`close` writes the directory."""

    def __init__(self, out: _Out | IO[bytes], threads: int | None = None) -> None:
        """``threads``: how many threads a member of more than :data:`CHUNK` bytes is deflated on (None: the
        processors this process may use, at most 8); the bytes written do not depend on it."""
        self._out = out
        self._threads = threads
        self._entries: list[_Entry] = []

    def _entry(self, info: zipfile.ZipInfo, flags: int, method: int) -> _Entry:
        name, utf8 = _name(info)
        return _Entry(name, flags | utf8, method, info.date_time, 0, 0, 0, self._out.tell(), 0,
                      info.create_system, info.external_attr or 0o600 << 16, info.comment)

    def _local(self, e: _Entry, zip64: bool) -> None:
        """Write ``e``'s local header where the output is."""
        extra = b""
        compressed, size = e.compressed, e.size
        version = _VERSION.get(e.method, _DEFAULT_VERSION)
        if zip64:
            extra = struct.pack("<HHQQ", 1, 16, size, compressed)
            compressed = size = 0xFFFFFFFF
            version = max(version, _ZIP64_VERSION)
        e.version = version
        time, date = _dos(e.date_time)
        self._out.write(_LOCAL.pack(b"PK\x03\x04", version, 0, e.flags, e.method, time, date, e.crc, compressed,
                                    size, len(e.name), len(extra)) + e.name + extra)

    def copy(self, info: zipfile.ZipInfo, src: IO[bytes], where: str) -> None:
        """The member ``info`` of the zip in the file ``src`` copied, its compressed bytes as they are."""
        if info.flag_bits & 0x1:
            raise FormatError("the member is encrypted; cannot copy it", fmt="zip", where=where)
        flags = info.flag_bits & _OPTIONS if info.compress_type not in (_STORED, _DEFLATED) else 0
        e = self._entry(info, flags, info.compress_type)
        e.crc, e.compressed, e.size = info.CRC, info.compress_size, info.file_size
        self._local(e, e.size * 1.05 > ZIP64_LIMIT or e.compressed > ZIP64_LIMIT)
        for piece in zipmember.raw_pieces(src, info, where, PIECE):
            self._out.write(piece)
        self._entries.append(e)

    def add(self, info: zipfile.ZipInfo, data: Buffer) -> None:
        """``data`` as a member with ``info``'s name, date, attributes and method, compressed as it is written
        (stored and deflate here, level 6 as zipfile; bzip2 and LZMA by zipfile in memory, then copied)."""
        view = memoryview(data).cast("B")
        self.add_pieces(info, (view[at:at + PIECE] for at in range(0, len(view), PIECE)), len(view))

    def add_pieces(self, info: zipfile.ZipInfo, pieces: Iterable[bytes | bytearray | memoryview], size: int) -> None:
        """The ``size`` bytes ``pieces`` gives, one after another, as a member (:meth:`add`): compressed piece
        by piece as they come, so a member streamed from a file costs a few :data:`CHUNK` of memory (deflate:
        :func:`deflate_chunks`, one zlib stream as zipfile writes it up to :data:`CHUNK` bytes).  FormatError when
        the pieces do not hold ``size`` bytes (the local header's zip64 field was chosen by it)."""
        method = info.compress_type
        if method not in (_STORED, _DEFLATED):
            self._add_by_zipfile(info, b"".join(bytes(p) for p in pieces))
            return
        e = self._entry(info, 0, method)
        e.size = size
        zip64 = e.size * 1.05 > ZIP64_LIMIT
        start = self._out.tell()
        self._local(e, zip64)
        import deflate  # libdeflate's CRC-32, 4 times zlib's speed (as zipmember's inflate takes it)

        crc = 0
        seen = 0
        if method == _DEFLATED:
            for chunk, out in _deflated(pieces, size, self._threads):
                seen += len(chunk)
                crc = deflate.crc32(chunk, crc)
                e.compressed += len(out)
                self._out.write(out)
        else:
            for piece in pieces:
                seen += len(piece)
                crc = deflate.crc32(piece, crc)
                e.compressed += len(piece)
                self._out.write(piece)
        if seen != size:
            raise FormatError(f"{seen} bytes given for a member of {size}", fmt="zip", where=info.filename)
        if not zip64 and e.compressed > ZIP64_LIMIT:
            raise FormatError(f"{e.compressed} compressed bytes need zip64, which its size did not ask for",
                              fmt="zip", where=info.filename)
        e.crc = crc
        end = self._out.tell()
        self._out.seek(start)
        self._local(e, zip64)  # the same length: now with the CRC and sizes
        self._out.seek(end)
        self._entries.append(e)

    def _add_by_zipfile(self, info: zipfile.ZipInfo, data: Buffer) -> None:
        import io
        import zipfile

        buf = io.BytesIO()
        like = zipfile.ZipInfo(info.filename, date_time=info.date_time)
        for attr in ("compress_type", "external_attr", "create_system", "comment"):
            setattr(like, attr, getattr(info, attr))
        with zipfile.ZipFile(buf, "w") as zo:
            zo.writestr(like, bytes(data))
        buf.seek(0)
        with zipfile.ZipFile(buf) as made:
            self.copy(made.infolist()[0], buf, info.filename)

    def close(self) -> None:
        """The central directory and the end records, after the last member."""
        out = self._out
        start = out.tell()
        for e in self._entries:
            extra: list[int] = []
            compressed, size, offset = e.compressed, e.size, e.offset
            if size > ZIP64_LIMIT or compressed > ZIP64_LIMIT:
                extra += [size, compressed]
                compressed = size = 0xFFFFFFFF
            if offset > ZIP64_LIMIT:
                extra.append(offset)
                offset = 0xFFFFFFFF
            version = e.version
            field = b""
            if extra:
                field = struct.pack(f"<HH{len(extra)}Q", 1, 8 * len(extra), *extra)
                version = max(version, _ZIP64_VERSION)
            time, date = _dos(e.date_time)
            out.write(_CENTRAL.pack(b"PK\x01\x02", version, e.create_system, version, 0, e.flags, e.method, time,
                                    date, e.crc, compressed, size, len(e.name), len(field), len(e.comment), 0, 0,
                                    e.external_attr, offset) + e.name + field + e.comment)
        end = out.tell()
        count, length, at = len(self._entries), end - start, start
        if count > _COUNT_LIMIT or at > ZIP64_LIMIT or length > ZIP64_LIMIT:
            out.write(_END64.pack(b"PK\x06\x06", 44, _ZIP64_VERSION, _ZIP64_VERSION, 0, 0, count, count, length, at))
            out.write(_LOCATOR.pack(b"PK\x06\x07", 0, end, 1))
            count, length, at = min(count, _COUNT_LIMIT), min(length, 0xFFFFFFFF), min(at, 0xFFFFFFFF)
        out.write(_END.pack(b"PK\x05\x06", 0, 0, count, count, length, at, 0))
