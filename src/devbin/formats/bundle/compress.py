"""The payload codecs of compressed ("CCOB") bundles and their truncated-MD5 hash.

The payload of a CCOB file is one plain zstd frame (method 1) or one zlib
stream (method 0, RFC 1950 with its Adler-32) of the *whole* uncompressed
binary bundle.  The header's hash is the first 8 bytes of the MD5 digest of
the uncompressed bundle, read as a little-endian u64 (verified against
``clang-offload-bundler-19 -verbose``, "Truncated MD5 hash"); ``hashlib.md5``
computes it, so no third-party hash library is needed.

The uncompressed size comes from an untrusted header: decompression refuses a
size above ``max_size`` before allocating, never produces more than one byte
beyond the recorded size (streaming reader, zlib ``max_length``), caps the zstd
window and checks the produced length.  Every exception the libraries raise
becomes a :class:`~devbin.errors.FormatError`.

Compression reproduces the bundler's bytes: LLVM compresses zstd with long
distance matching enabled and the content size in the frame header, at level
3 unless ``-compression-level`` says otherwise (byte-identical output checked
against clang-offload-bundler 19 and 22 in ``tests/test_bundle.py``).
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

import zstandard

from devbin.binary import budget
from devbin.errors import FormatError, UsageError
from devbin.formats.bundle import constants as C
from devbin.formats.zstdcap import decompressor

__all__ = ["PayloadStream", "compress", "decompress", "truncated_md5"]

_FMT = "bundle"


def truncated_md5(data: bytes | bytearray | memoryview) -> int:
    """The CCOB hash: the first 8 bytes of MD5(``data``) as a little-endian u64."""
    return int.from_bytes(hashlib.md5(data).digest()[:8], "little")


class PayloadStream:
    """A CCOB payload decoded front to back: :meth:`readinto` fills a buffer with the next bytes.

    Output is produced only as asked for (zstd through a streaming reader, zlib with
    ``max_length``), so reading a prefix or skipping to an entry never holds more than the
    buffer given; :meth:`skip` decodes into a small scratch buffer and drops it.  ``pos`` is the
    number of bytes produced so far.  Library errors become :class:`FormatError`.
    """

    _SCRATCH = 1 << 20

    def __init__(self, method: int, data: bytes | memoryview, uncompressed_size: int, max_size: int, *,
                 where: str = "", offset: int | None = None) -> None:
        self.method = method
        self.where = where
        self.offset = offset
        self.pos = 0
        self._data = data
        self._zlib: Any = None
        self._zstd: Any = None
        try:
            if method == C.METHOD_ZSTD:
                self._zstd = decompressor(uncompressed_size, max_size).stream_reader(data, read_across_frames=True)
            elif method == C.METHOD_ZLIB:
                self._zlib = zlib.decompressobj()
                self._tail: bytes | memoryview = data
                self._pending = b""
            else:
                raise self.error("unknown compression method", method)
        except FormatError:
            raise
        except Exception as e:  # zstandard.ZstdError, ValueError: library boundary
            raise self.error(f"corrupt {C.METHOD_NAMES.get(method, 'compressed')} data: {e}") from None

    def error(self, message: str, value: object = None) -> FormatError:
        return FormatError(message, fmt=_FMT, where=self.where, offset=self.offset, value=value)

    def readinto(self, out: memoryview) -> int:
        """Fill ``out`` with the next decoded bytes; fewer only at the end of the stream."""
        n = 0
        try:
            while n < len(out):
                got = self._zstd.readinto(out[n:]) if self._zstd is not None else self._zlib_into(out[n:])
                if not got:
                    break
                n += got
        except FormatError:
            raise
        except zlib.error as e:
            raise self.error(f"corrupt zlib data: {e}") from None
        except MemoryError:
            raise self.error(f"{C.METHOD_NAMES[self.method]} data too large to decompress") from None
        except Exception as e:  # zstandard.ZstdError, ValueError: library boundary
            raise self.error(f"corrupt {C.METHOD_NAMES[self.method]} data: {e}") from None
        self.pos += n
        return n

    def _zlib_into(self, out: memoryview) -> int:
        while not self._pending:
            if self._zlib.eof:
                return 0
            before = len(self._tail)
            self._pending = self._zlib.decompress(self._tail, min(len(out), self._SCRATCH))
            self._tail = self._zlib.unconsumed_tail
            if not self._pending and not self._zlib.eof and (not self._tail or len(self._tail) == before):
                raise self.error("zlib stream is truncated")
        k = min(len(out), len(self._pending))
        out[:k] = self._pending[:k]
        self._pending = self._pending[k:]
        return k

    def skip(self, count: int) -> int:
        """Decode and drop ``count`` bytes (fewer at the end); feeds ``sink`` when given."""
        return self.feed(count, None)

    def feed(self, count: int, sink: Any) -> int:
        """Decode ``count`` bytes through a scratch buffer, passing each piece to ``sink.update``."""
        scratch = bytearray(min(count, self._SCRATCH) or 1)
        done = 0
        with memoryview(scratch) as mv:
            while done < count:
                got = self.readinto(mv[:min(len(mv), count - done)])
                if not got:
                    break
                if sink is not None:
                    sink.update(mv[:got])
                done += got
        return done


def decompress(
    method: int, data: bytes | memoryview, uncompressed_size: int, *, max_size: int = C.DEFAULT_MAX,
    where: str = "", offset: int | None = None,
) -> bytearray:
    """Decompress a CCOB payload into exactly ``uncompressed_size`` bytes.

    The result is the one buffer decoded into, taken from the command's memory budget
    (:mod:`devbin.binary.budget`) and charged while it is alive.
    """

    def err(message: str, value: object = None) -> FormatError:
        return FormatError(message, fmt=_FMT, where=where, offset=offset, value=value)

    if uncompressed_size > max_size:
        raise err(f"uncompressed size exceeds the limit of {max_size:#x} bytes (decompression bomb?)",
                  uncompressed_size)
    if method not in C.METHOD_NAMES:
        raise err("unknown compression method", method)
    stream = PayloadStream(method, data, uncompressed_size, max_size, where=where, offset=offset)
    out = budget.current().allocate(uncompressed_size, what="compressed bundle", fmt=_FMT, where=where,
                                    offset=offset)
    with memoryview(out) as mv:
        n = stream.readinto(mv)
    extra = bytearray(1)
    if n == uncompressed_size and stream.readinto(memoryview(extra)):
        raise err(f"{C.METHOD_NAMES[method]} data decompresses to more than the recorded uncompressed size",
                  uncompressed_size)
    if n != uncompressed_size:
        raise err(f"{C.METHOD_NAMES[method]} data decompresses to {n:#x} bytes, not the recorded uncompressed "
                  "size", uncompressed_size)
    return out


def compress(method: str, data: bytes, level: int | None = None) -> bytes:
    """Compress ``data`` as the bundler does (``method`` ``"zstd"`` or ``"zlib"``)."""
    if method == "zstd":
        lvl = C.ZSTD_DEFAULT_LEVEL if level is None else level
        try:
            params = zstandard.ZstdCompressionParameters.from_level(lvl, source_size=len(data), enable_ldm=True)
        except zstandard.ZstdError as e:
            raise UsageError(f"bundle: bad zstd compression level {lvl}: {e}") from None
        return zstandard.ZstdCompressor(compression_params=params).compress(data)
    if method == "zlib":
        lvl = C.ZLIB_DEFAULT_LEVEL if level is None else level
        if not -1 <= lvl <= 9:
            raise UsageError(f"bundle: bad zlib compression level {lvl} (expected -1..9)")
        return zlib.compress(data, lvl)
    raise UsageError(f"bundle: unknown compression method {method!r} (expected 'zstd' or 'zlib')")
