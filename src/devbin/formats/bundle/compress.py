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

import zstandard

from devbin.errors import FormatError, UsageError
from devbin.formats.bundle import constants as C
from devbin.formats.zstdcap import decompress_capped

__all__ = ["compress", "decompress", "truncated_md5"]

_FMT = "bundle"


def truncated_md5(data: bytes | bytearray | memoryview) -> int:
    """The CCOB hash: the first 8 bytes of MD5(``data``) as a little-endian u64."""
    return int.from_bytes(hashlib.md5(data).digest()[:8], "little")


def decompress(
    method: int, data: bytes | memoryview, uncompressed_size: int, *, max_size: int = C.DEFAULT_MAX,
    where: str = "", offset: int | None = None,
) -> bytes:
    """Decompress a CCOB payload into exactly ``uncompressed_size`` bytes."""

    def err(message: str, value: object = None) -> FormatError:
        return FormatError(message, fmt=_FMT, where=where, offset=offset, value=value)

    if uncompressed_size > max_size:
        raise err(f"uncompressed size exceeds the limit of {max_size:#x} bytes (decompression bomb?)",
                  uncompressed_size)
    out = bytearray()
    if method == C.METHOD_ZSTD:
        out += decompress_capped(data, uncompressed_size, max_size, fmt=_FMT, where=where, offset=offset)
    elif method == C.METHOD_ZLIB:
        try:
            d = zlib.decompressobj()
            out += d.decompress(bytes(data), uncompressed_size + 1)
            if len(out) <= uncompressed_size and not d.eof:
                raise err("zlib stream is truncated")
        except zlib.error as e:
            raise err(f"corrupt zlib data: {e}") from None
        except MemoryError:
            raise err("zlib data too large to decompress") from None
    else:
        raise err("unknown compression method", method)
    if len(out) != uncompressed_size:
        more = "more than" if len(out) > uncompressed_size else f"{len(out):#x} bytes, not"
        raise err(f"{C.METHOD_NAMES[method]} data decompresses to {more} the recorded uncompressed size",
                  uncompressed_size)
    return bytes(out)


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
