"""Payload compression of fatbin entries: LZ4 *block* (flag 0x2000) and zstd (flag 0x8000).

On disk a compressed entry stores ``compressed_size`` bytes of compressed data
(the payload area itself is padded to 8) and records the exact decompressed
length in ``uncompressed_size``:

* **LZ4 block format**, no frame header, no stored size: the stream of
  sequences that ``LZ4_compress_default`` writes.  The output length cannot
  be known from the data, so the header's ``uncompressed_size`` is the only
  bound; ``lz4.block.decompress`` is given it.
* **zstd**: one standard zstd frame (magic ``28 b5 2f fd``), which NVIDIA's
  ``--compress-mode`` (CUDA 12.8+) writes.

Both sizes come from an untrusted header, so decompression refuses an
``uncompressed_size`` above ``max_size`` (default :data:`DEFAULT_MAX`, 1 GiB)
before allocating anything ("decompression bomb?"), takes the output from the
command's memory budget (:mod:`devbin.binary.budget`: a zstd image is decoded in
place into one buffer of the recorded size, charged while it is alive; an LZ4
block, at most 255 times its stored size, is charged while it decodes), reads
zstd through a streaming reader that never produces more than
``uncompressed_size + 1`` bytes, caps the zstd window, and checks that the
produced length equals the recorded one.  Every exception the compression
libraries raise becomes a :class:`~devbin.errors.FormatError`, an image over the
budget a :class:`~devbin.errors.LimitExceeded`.
"""

from __future__ import annotations

import lz4.block  # type: ignore[import-untyped]
import zstandard

from devbin.binary import budget
from devbin.errors import FormatError, LimitExceeded, UsageError
from devbin.formats.fatbin.constants import DEFAULT_MAX
from devbin.formats.zstdcap import decompress_capped

__all__ = ["DEFAULT_MAX", "compress", "decompress", "decompress_lz4", "decompress_zstd"]

_FMT = "fatbin"


def _check_size(uncompressed_size: int, max_size: int, where: str, offset: int | None) -> None:
    if uncompressed_size < 0:
        raise FormatError("negative uncompressed size", fmt=_FMT, where=where, offset=offset, value=uncompressed_size)
    if uncompressed_size > max_size:
        raise FormatError(
            f"uncompressed size exceeds the limit of {max_size:#x} bytes (decompression bomb?)",
            fmt=_FMT,
            where=where,
            offset=offset,
            value=uncompressed_size,
        )


def _mismatch(got: int, want: int, algo: str, where: str, offset: int | None) -> FormatError:
    more = "more than" if got > want else f"{got:#x} bytes, not"
    return FormatError(
        f"{algo} data decompresses to {more} the recorded uncompressed size", fmt=_FMT, where=where, offset=offset,
        value=want,
    )


def decompress_lz4(
    data: bytes | memoryview, uncompressed_size: int, *, max_size: int = DEFAULT_MAX, where: str = "",
    offset: int | None = None,
) -> bytes:
    """Decode one LZ4 block into exactly ``uncompressed_size`` bytes."""
    _check_size(uncompressed_size, max_size, where, offset)
    if uncompressed_size == 0:  # nothing to produce (python-lz4 reads 0 as "size unknown")
        return b""
    with budget.current().charged(uncompressed_size, what="lz4 block", fmt=_FMT, where=where, offset=offset):
        try:
            out = lz4.block.decompress(data, uncompressed_size=uncompressed_size)
        except MemoryError:
            raise LimitExceeded(f"lz4 block needs {uncompressed_size} bytes once decoded and the system has not that "
                                "much memory free", fmt=_FMT, where=where, offset=offset,
                                value=uncompressed_size) from None
        except Exception as e:  # lz4.block.LZ4BlockError, ValueError: library boundary
            raise FormatError(f"corrupt lz4 block: {e}", fmt=_FMT, where=where, offset=offset) from None
    if len(out) != uncompressed_size:
        raise _mismatch(len(out), uncompressed_size, "lz4", where, offset)
    return bytes(out)



def decompress_zstd(
    data: bytes | memoryview, uncompressed_size: int, *, max_size: int = DEFAULT_MAX, where: str = "",
    offset: int | None = None,
) -> bytearray:
    """Decode zstd frame(s) into exactly ``uncompressed_size`` bytes, reading at most one byte more.

    The result is the one buffer decoded into, charged to the memory budget while it is alive."""
    _check_size(uncompressed_size, max_size, where, offset)
    out = decompress_capped(data, uncompressed_size, max_size, fmt=_FMT, where=where, offset=offset)
    if len(out) != uncompressed_size:
        raise _mismatch(len(out), uncompressed_size, "zstd", where, offset)
    return out


def decompress(
    algo: str, data: bytes | memoryview, uncompressed_size: int, *, max_size: int = DEFAULT_MAX, where: str = "",
    offset: int | None = None,
) -> bytes | bytearray:
    """Decompress with ``algo`` (``"lz4"`` or ``"zstd"``); anything else is a :class:`FormatError`."""
    if algo == "lz4":
        return decompress_lz4(data, uncompressed_size, max_size=max_size, where=where, offset=offset)
    if algo == "zstd":
        return decompress_zstd(data, uncompressed_size, max_size=max_size, where=where, offset=offset)
    raise FormatError(f"unknown compression {algo}", fmt=_FMT, where=where, offset=offset)


def compress(algo: str, data: bytes) -> bytes:
    """Compress ``data`` as an entry payload: an LZ4 block (no size prefix) or one zstd frame."""
    if algo == "lz4":
        return bytes(lz4.block.compress(data, store_size=False))
    if algo == "zstd":
        return zstandard.ZstdCompressor(level=19, write_content_size=True).compress(data)
    raise UsageError(f"fatbin: unknown compression {algo!r} (expected 'none', 'lz4' or 'zstd')")
