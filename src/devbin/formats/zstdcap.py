"""Streaming zstd decompression under a size cap, shared by the fatbin and bundle readers.

A container records the uncompressed size; the decoder reads at most one byte more than
that (so a lying size is caught without decoding a bomb) and limits the window it accepts
to what the recorded size and the caller's cap allow.
"""

from __future__ import annotations

import io

import zstandard

from devbin.errors import FormatError

_MIN_WINDOW = 1 << 10  # ZSTD_WINDOWLOG_MIN
_MAX_WINDOW = 1 << 31  # ZSTD_WINDOWLOG_MAX_64
_CHUNK = 1 << 20


def window_limit(uncompressed_size: int, max_size: int) -> int:
    """The largest window to accept: the recorded size rounded up (long-distance matching), within the cap."""
    want = max(_MIN_WINDOW, 1 << max(uncompressed_size - 1, 1).bit_length(), 1 << 20)
    cap = max(_MIN_WINDOW, 1 << max(max_size - 1, 1).bit_length())
    return min(want, cap, _MAX_WINDOW)


def decompress_capped(data: bytes | memoryview, uncompressed_size: int, max_size: int, *, fmt: str, where: str = "",
                      offset: int | None = None) -> bytearray:
    """Decode zstd frame(s), stopping one byte past ``uncompressed_size``; the caller checks the length."""
    out = bytearray()
    try:
        dctx = zstandard.ZstdDecompressor(max_window_size=window_limit(uncompressed_size, max_size))
        with dctx.stream_reader(io.BytesIO(bytes(data)), read_across_frames=True) as reader:
            while len(out) <= uncompressed_size:
                chunk = reader.read(min(_CHUNK, uncompressed_size + 1 - len(out)))
                if not chunk:
                    break
                out += chunk
    except Exception as e:  # zstandard.ZstdError, ValueError, MemoryError: library boundary
        raise FormatError(f"corrupt zstd data: {e}", fmt=fmt, where=where, offset=offset) from None
    return out
