"""A deflated zip member inflated in one call with libdeflate, for scans of wheels and zips.

Layout (PKWARE APPNOTE.TXT 6.3.10, sections 4.3.7 and 4.4): a member's compressed bytes follow
its *local file header*: the signature ``PK\\x03\\x04``, 26 bytes of fields, then the file name
and the extra field, whose lengths are the little-endian 16-bit words at offsets 26 and 28.
They are read from the local header, not taken from the central directory, because the two
may differ (a local extra field often carries padding or a zip64 record the central one does
not).  The central directory, which :mod:`zipfile` has already read, gives the compressed
size, the size once inflated and the CRC-32, valid even where the local header leaves them 0
and a data descriptor follows the data (general-purpose flag bit 3).

Why not :class:`zipfile.ZipExtFile`: it inflates with zlib in pieces and checks the CRC with
zlib's; a wheel's device library is one large member (the 167 MB ``libcurand.so.10`` of
nvidia-curand-cu12 10.3.10.19, deflated to 68 MB), where zlib takes 0.40 s and its CRC
0.04 s, libdeflate (https://github.com/ebiggers/libdeflate, through the ``deflate`` package)
0.19 s and 0.007 s (benchmarks/README.md, bench_size).  libdeflate inflates whole buffers
only: the input is a view of the archive (memory-mapped by the scan, not copied) and the
output one buffer of the recorded size, allocated by libdeflate.  A member that inflates to
more than its recorded size fails in libdeflate as soon as the output is full, so a lying
size cannot decode a bomb; the caller charges :func:`most_bytes` to the memory budget
(:mod:`devbin.binary.budget`) before calling.

Members stored uncompressed, or compressed with bzip2 or LZMA, or encrypted, are read by
:mod:`zipfile` (:func:`inflatable` says which), into a buffer that grows as their bytes come and
never past the recorded size: :func:`read` is the one way devbin reads a member's bytes whole into
memory, :func:`load` the one way the scan reads them (a member larger than :data:`SPILL_BYTES` is
inflated by :func:`spill` into an unnamed temporary file that is then memory-mapped, never held in the
heap: a wheel's 716 MB ``libcublasLt.so.12`` costs the pages a reader touches), and
:func:`pieces` the one way it streams them (hashing or copying a member of any size in :data:`CHUNK`
pieces).  :func:`open_zip` is the one way a zip file is opened: whatever :mod:`zipfile` raises on a file
that is not a zip, or one cut short (its end-of-central-directory record gone), becomes one FormatError
saying "not a zip file".
"""

from __future__ import annotations

import atexit
import mmap
import os
import struct
import zlib
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

from devbin.binary import Buffer
from devbin.binary.mapped import Mapped, Spilled
from devbin.errors import FormatError, TruncatedError

if TYPE_CHECKING:
    import zipfile

__all__ = ["CHUNK", "KEEP_SPILLED", "MAX_RATIO", "SPILL_BYTES", "data_span", "inflatable", "inflate", "is_folder",
           "load", "most_bytes", "open_zip", "pieces", "raw_pieces", "read", "spill"]

_LOCAL = struct.Struct("<4s22xHH")  # signature, then the name and extra-field lengths at 26 and 28
_LOCAL_MAGIC = b"PK\x03\x04"
_STORED, _DEFLATED = 0, 8  # compression methods 0 and 8 (APPNOTE 4.4.5)
_ENCRYPTED = 0x1  # general-purpose flag bit 0 (APPNOTE 4.4.4)
#: A member zipfile reads (stored, bzip2, LZMA) is read this much at a time.  Small pieces are faster:
#: ZipExtFile reads as many compressed bytes as asked for output, and 16 MiB pieces make it copy the
#: unconsumed input and join the pieces (zlib on the 167 MB library of a wheel: 0.54 s in 16 MiB
#: pieces, 0.44 s in 64 KiB ones).
CHUNK = 1 << 16
#: Deflate's largest ratio of output to input: a 258-byte match coded in about two bits
#: (https://zlib.net/zlib_tech.html: "the limit on the compression ratio is 1032:1").
MAX_RATIO = 1032
#: A member that holds more bytes than this once read is inflated into a temporary file and memory-mapped
#: (:func:`spill`), not into the heap.  Below it libdeflate's one call is kept (twice zlib's speed; the
#: pieces zlib streams in cost a second pass over the output for the CRC); above it the heap would hold
#: the whole member for as long as its images are read.
SPILL_BYTES = 64 << 20
#: The most bytes :func:`spill` inflates at a time (what one step of it holds in the heap).
SPILL_PIECE = 1 << 20


def is_folder(info: zipfile.ZipInfo) -> bool:
    """Whether the member is a folder entry (its name ends with ``/``, APPNOTE 4.4.17).  Not
    :meth:`zipfile.ZipInfo.is_dir`, which raises IndexError on an empty name."""
    return info.filename.endswith("/")


def most_bytes(info: zipfile.ZipInfo) -> int:
    """The most bytes the member can hold once read: its recorded size, or less where its method cannot
    make that many of its compressed bytes (stored: as many; deflated: :data:`MAX_RATIO` times as many).
    What the memory budget is charged: a recorded size that lies costs no more than the bytes can give."""
    if info.compress_type == _STORED:
        return min(info.file_size, info.compress_size)
    if info.compress_type == _DEFLATED:
        return min(info.file_size, _deflated_most(info.compress_size))
    return info.file_size


def _deflated_most(compressed: int) -> int:
    return compressed * MAX_RATIO + 64


def inflatable(info: zipfile.ZipInfo) -> bool:
    """Whether :func:`inflate` reads this member: deflated and not encrypted."""
    return info.compress_type == _DEFLATED and not info.flag_bits & _ENCRYPTED


def data_span(archive: Buffer, info: zipfile.ZipInfo) -> tuple[int, int]:
    """(offset, length) of the member's compressed bytes in ``archive``, checked to lie inside it."""
    size = len(memoryview(archive))
    at = info.header_offset
    if at < 0 or at + _LOCAL.size > size:
        raise TruncatedError(f"local header at {at} is past the end of the archive ({size} bytes)",
                             fmt="zip", offset=at)
    magic, name_len, extra_len = _LOCAL.unpack_from(archive, at)
    if magic != _LOCAL_MAGIC:
        raise FormatError(f"no local header at {at} (found {magic.hex()})", fmt="zip", offset=at)
    start = at + _LOCAL.size + name_len + extra_len
    if start + info.compress_size > size:
        raise TruncatedError(f"{info.compress_size} compressed bytes at {start} run past the end of the archive "
                             f"({size} bytes)", fmt="zip", offset=start)
    return start, info.compress_size


def inflate(archive: Buffer, info: zipfile.ZipInfo) -> bytearray:
    """The member's bytes, inflated and checked against the recorded size and CRC-32.

    Raises :class:`FormatError` (with ``TruncatedError`` for a member cut short) on a corrupt member;
    the caller has charged :func:`most_bytes` to the memory budget."""
    import deflate  # libdeflate; imported with the first zip member that needs it

    start, length = data_span(archive, info)
    if info.file_size > _deflated_most(length):
        raise FormatError(f"records {info.file_size} bytes once inflated, more than {length} deflated bytes can "
                          "hold", fmt="zip", offset=start)
    with memoryview(archive) as whole, whole[start:start + length] as data:
        try:
            out = deflate.deflate_decompress(data, info.file_size)
        except deflate.DeflateError:
            raise FormatError(f"corrupt deflate data, or more than the recorded {info.file_size} bytes once "
                              "inflated", fmt="zip", offset=start) from None
    if len(out) != info.file_size:
        raise FormatError(f"inflates to {len(out)} bytes, not the recorded {info.file_size}", fmt="zip", offset=start)
    crc = deflate.crc32(out)
    if crc != info.CRC:
        raise FormatError(f"bad CRC-32 {crc:08x} (recorded {info.CRC:08x})", fmt="zip", offset=start)
    return out


def read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, whole: Buffer | None = None) -> bytearray:
    """The bytes of the member ``info`` of ``zf``: :func:`inflate` for a deflated one, on ``whole`` (the
    archive's bytes) or else on the archive's file memory-mapped; the others through :mod:`zipfile`,
    :data:`CHUNK` at a time into a buffer that grows as they come, never past the recorded size.
    Raises FormatError as :func:`inflate` does, and zipfile's own errors for the others."""
    if inflatable(info):
        if whole is not None:
            return inflate(whole, info)
        if isinstance(zf.filename, str):
            with open(zf.filename, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return inflate(mapped, info)
    buf = bytearray()
    with zf.open(info) as fh:
        while len(buf) < info.file_size:
            piece = fh.read(min(CHUNK, info.file_size - len(buf)))
            if not piece:
                break
            buf += piece
    return buf


def load(zf: zipfile.ZipFile, info: zipfile.ZipInfo, whole: Buffer | None = None, *,
         spill_bytes: int | None = None, where: str = "") -> bytearray | Spilled:
    """The bytes of the member ``info`` of ``zf`` for a reader: :func:`read` (into the heap) when it holds
    at most ``spill_bytes`` (default :data:`SPILL_BYTES`) once read, else the map of :func:`spill` (a
    temporary file, memory-mapped; an empty member: an empty buffer).  Raises as :func:`read` does."""
    limit = SPILL_BYTES if spill_bytes is None else spill_bytes
    if most_bytes(info) <= limit or zf.fp is None:
        return read(zf, info, whole)
    out = spill(zf, info, where)
    out.close()  # the map keeps the file for as long as it lives
    return out.data if isinstance(out.data, Spilled) else bytearray()


def spill(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str = "") -> Mapped:
    """The bytes of the member ``info`` of ``zf`` written as they are inflated, :data:`SPILL_PIECE` at a
    time, into a :class:`devbin.binary.mapped.Mapped` file (unnamed, temporary), then memory-mapped (its
    pages given back after every unit of work).  The one way a member is inflated outside the heap: the scan
    (:func:`load`) and prune (a wheel's library, devbin.packaging.prune_packages) both read it so.  A
    deflated member is inflated with zlib from its compressed bytes (:func:`raw_pieces` from the archive's
    file), its output never past the recorded size (a bomb stops there), the CRC-32 taken as it comes and
    checked with the length at the end; the other methods are copied from :mod:`zipfile` (which checks the
    CRC).  An empty member is a Mapped of size 0 (its ``data`` ``b""``).  Raises :class:`FormatError` as
    :func:`inflate` does (a size or CRC that does not match, corrupt or truncated data), and zipfile's own
    errors for the other methods; OSError where the temporary file cannot be written (a full disk).

    The last :data:`KEEP_SPILLED` members spilled are kept (their temporary files, not their maps:
    :data:`_LAST`) and given again, not inflated again, to a later spill of the same member of the same
    archive file (same device, inode, size and modification time; same offset, sizes, method and CRC):
    ``devbin prune`` of a wheel reads its large members three times (the command's first-image check, the
    scan of the wheel's libraries, the prune), torch 2.14.1's 446 MB ``libtorch_cpu.so`` (no device code,
    but an ELF file the scan reads) and 503 MB ``libtorch_cuda.so`` are each inflated once instead of two
    and three times."""
    key = _key(zf, info)
    kept = _kept(key)
    if kept is not None:
        return kept.twin().map()
    out = Mapped()
    try:
        if inflatable(info):
            _inflate_into(out, zf, info, where)
        else:
            with zf.open(info) as fh:
                while out.size < info.file_size and (piece := fh.read(min(SPILL_PIECE, info.file_size - out.size))):
                    out.write(piece)
        out.map()
    except BaseException:
        out.close()
        raise
    if key is not None and out.size:
        _keep_last(key, out)
    return out


#: How many members :func:`spill` keeps for a later reader: their temporary files stay (on disk, in ``TMPDIR``;
#: no memory of the process's) until others replace them or the process ends.
KEEP_SPILLED = 2
#: The members :func:`spill` keeps, least recently used first: each one's key (:func:`_key`) and its file (a
#: :class:`Mapped` not mapped).
_LAST: list[tuple[tuple[int, ...], Mapped]] = []


def _key(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[int, ...] | None:
    """What names the member's bytes: the archive file's device, inode, size and modification time, the
    member's offset, sizes, method and CRC-32; None for an archive that is no file (a zip in memory)."""
    try:
        st = os.fstat(zf.fp.fileno())  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):  # no file object, or one without a descriptor (BytesIO)
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, info.header_offset, info.compress_size,
            info.file_size, info.compress_type, info.CRC)


def _kept(key: tuple[int, ...] | None) -> Mapped | None:
    """The member :func:`spill` keeps under ``key`` (now the most recently used), or None."""
    if key is None:
        return None
    for i, (k, kept) in enumerate(_LAST):
        if k == key:
            _LAST.append(_LAST.pop(i))
            return kept
    return None


@atexit.register
def _forget() -> None:
    """Close the kept members' files (at exit: no unclosed-file warning)."""
    while _LAST:
        _LAST.pop()[1].close()


def _keep_last(key: tuple[int, ...], out: Mapped) -> None:
    """Keep ``out``'s file as the member spilled last, the least recently used past :data:`KEEP_SPILLED`
    closed (its temporary file is gone once no map of it is left)."""
    try:
        kept = out.twin()
    except OSError:  # no descriptor left: nothing kept
        return
    _LAST.append((key, kept))
    while len(_LAST) > KEEP_SPILLED:
        _LAST.pop(0)[1].close()


def _inflate_into(out: Mapped, zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> None:
    """:func:`spill`'s deflated member: inflated into ``out``, checked (its docstring)."""
    import deflate  # libdeflate's CRC-32, 4 times zlib's speed

    assert zf.fp is not None
    d = zlib.decompressobj(-zlib.MAX_WBITS)
    crc = n = 0
    try:
        for piece in raw_pieces(zf.fp, info, where):
            data: bytes = piece
            while data:
                got = d.decompress(data, SPILL_PIECE)
                data = d.unconsumed_tail
                n += len(got)
                if n > info.file_size:
                    break
                crc = deflate.crc32(got, crc)
                out.write(got)
            if n > info.file_size or d.eof:
                break
        while not d.eof and n <= info.file_size and (got := d.decompress(b"", SPILL_PIECE)):
            n += len(got)
            crc = deflate.crc32(got, crc)
            out.write(got)
    except zlib.error as e:
        raise FormatError(f"corrupt deflate data ({e})", fmt="zip", where=where) from None
    if n > info.file_size:
        raise FormatError(f"inflates to more than the recorded {info.file_size} bytes", fmt="zip", where=where)
    if not d.eof:
        raise TruncatedError(f"the deflate data ends before its last block ({n} of the recorded "
                             f"{info.file_size} bytes inflated)", fmt="zip", where=where)
    if n != info.file_size:
        raise FormatError(f"inflates to {n} bytes, not the recorded {info.file_size}", fmt="zip", where=where)
    if crc != info.CRC:
        raise FormatError(f"bad CRC-32 {crc:08x} (recorded {info.CRC:08x})", fmt="zip", where=where)


def pieces(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The bytes of the member ``info`` of ``zf``, :data:`CHUNK` at a time through :mod:`zipfile` (which
    checks the CRC-32 at the end): a member of any size costs one piece of memory.  zipfile's own errors
    (bad CRC, corrupt data, encryption) are raised as they come.  A member :func:`spill` keeps (checked when
    it was inflated) is read from its temporary file instead, :data:`SPILL_PIECE` at a time (pread(2): no
    map, no pages of the process's), not inflated again: a wheel's RECORD check after the command's
    first-image check reads torch's two large libraries so."""
    kept = _kept(_key(zf, info))
    if kept is not None:
        fd = kept.file.fileno()
        for at in range(0, kept.size, SPILL_PIECE):
            piece = os.pread(fd, min(SPILL_PIECE, kept.size - at), at)
            if not piece:
                raise TruncatedError(f"the member's temporary file ends at {at} of {kept.size} bytes", fmt="zip")
            yield piece
        return
    with zf.open(info) as fh:
        while piece := fh.read(CHUNK):
            yield piece


def raw_pieces(file: IO[bytes], info: zipfile.ZipInfo, where: str, size: int = CHUNK) -> Iterator[bytes]:
    """The compressed bytes of the member ``info`` of the zip in ``file`` (a seekable binary file), as they
    are (not inflated, no CRC checked), ``size`` at a time: found after the member's local header as
    :func:`data_span` finds them, read with seek and read (not memory-mapped: a copied member costs one
    piece of memory, never its pages).  TruncatedError where the file ends before them."""
    at = info.header_offset
    if at < 0:  # zipfile subtracts the bytes it finds before the archive: a damaged directory goes below 0
        raise FormatError(f"local header at {at}, before the start of the archive", fmt="zip", offset=at,
                          where=where)
    file.seek(at)
    head = file.read(_LOCAL.size)
    if len(head) < _LOCAL.size:
        raise TruncatedError(f"local header at {at} is past the end of the archive", fmt="zip", offset=at,
                             where=where)
    magic, name_len, extra_len = _LOCAL.unpack(head)
    if magic != _LOCAL_MAGIC:
        raise FormatError(f"no local header at {at} (found {magic.hex()})", fmt="zip", offset=at, where=where)
    start = at + _LOCAL.size + name_len + extra_len
    file.seek(start)
    left = info.compress_size
    while left:
        piece = file.read(min(size, left))
        if not piece:
            raise TruncatedError(f"{info.compress_size} compressed bytes at {start} run past the end of the "
                                 "archive", fmt="zip", offset=start, where=where)
        left -= len(piece)
        yield piece


def open_zip(file: str | IO[bytes], where: str) -> zipfile.ZipFile:
    """``file`` (a path or a binary file object) opened with :mod:`zipfile` for reading, its member list
    read; :class:`FormatError` "not a zip file" naming ``where`` when zipfile cannot (a truncated file
    has no end-of-central-directory record, APPNOTE 4.3.16).  An OSError naming a file passes (a path
    that cannot be opened); one from a seek that the damaged records ask for is the zip's fault."""
    import zipfile

    try:
        return zipfile.ZipFile(file)
    except OSError as e:
        if e.filename is not None:
            raise
        raise FormatError(f"not a zip file ({type(e).__name__}: {e})", fmt="zip", where=where) from None
    except Exception as e:  # zipfile raises many types on corrupt input (BadZipFile, ValueError, EOFError...)
        raise FormatError(f"not a zip file ({type(e).__name__}: {e})", fmt="zip", where=where) from None
