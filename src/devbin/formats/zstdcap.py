"""Streaming zstd decompression under a size cap, shared by the fatbin and bundle readers.

A container records the uncompressed size; the decoder writes the output in place into one
buffer of that size taken from the command's memory budget (:mod:`devbin.binary.budget`: no
second copy, and an image over the budget is a LimitExceeded before anything is decoded),
reads at most one byte more than that (so a lying size is caught without decoding a bomb)
and limits the window it accepts to what the recorded size and the caller's cap allow.
The super-archive's packed members (devbin.superarchive.packed) use the same decoder with a
raw-content dictionary (a delta against a sibling's bytes, as ``zstd --patch-from``) and
magicless frames.
"""

from __future__ import annotations

import zstandard

from devbin.binary import budget
from devbin.errors import FormatError

_MIN_WINDOW = 1 << 10  # ZSTD_WINDOWLOG_MIN
_MAX_WINDOW = 1 << 31  # ZSTD_WINDOWLOG_MAX_64
_CHUNK = 1 << 20


def window_limit(uncompressed_size: int, max_size: int) -> int:
    """The largest window to accept: the recorded size rounded up (long-distance matching), within the cap."""
    want = max(_MIN_WINDOW, 1 << max(uncompressed_size - 1, 1).bit_length(), 1 << 20)
    cap = max(_MIN_WINDOW, 1 << max(max_size - 1, 1).bit_length())
    return min(want, cap, _MAX_WINDOW)


def decompressor(uncompressed_size: int, max_size: int, *, dictionary: bytes | None = None,
                 magicless: bool = False) -> zstandard.ZstdDecompressor:
    """A decoder whose window is limited by :func:`window_limit` (raises zstandard/ValueError on bad input)."""
    window = window_limit(uncompressed_size + (len(dictionary) if dictionary else 0), max_size)
    dict_data = (zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
                 if dictionary else None)
    return zstandard.ZstdDecompressor(max_window_size=window, dict_data=dict_data,
                                      format=zstandard.FORMAT_ZSTD1_MAGICLESS if magicless else zstandard.FORMAT_ZSTD1)


def decompress_capped(data: bytes | memoryview, uncompressed_size: int, max_size: int, *, fmt: str, where: str = "",
                      offset: int | None = None, dictionary: bytes | None = None,
                      magicless: bool = False) -> bytearray:
    """Decode zstd frame(s) into one buffer of ``uncompressed_size`` bytes taken from the command's
    memory budget (:mod:`devbin.binary.budget`); the caller checks the length.

    The output is written in place (no second copy); one byte is then read past the recorded
    size: when there is one, it is appended, so the result is longer than recorded.  A shorter
    stream gives a shorter result.  ``dictionary``: raw-content dictionary bytes (matches may
    reach into it, so the window accepted grows by its size); ``magicless``: frames written
    without the 4-byte magic.
    """
    out = budget.current().allocate(uncompressed_size, what="zstd data", fmt=fmt, where=where, offset=offset)
    n = 0
    extra = b""
    try:
        dctx = decompressor(uncompressed_size, max_size, dictionary=dictionary, magicless=magicless)
        with memoryview(out) as mv, dctx.stream_reader(data, read_across_frames=True) as reader:
            while n < uncompressed_size:
                got = reader.readinto(mv[n:min(n + _CHUNK, uncompressed_size)])
                if not got:
                    break
                n += got
            if n == uncompressed_size:
                extra = reader.read(1)
    except Exception as e:  # zstandard.ZstdError, ValueError, MemoryError: library boundary
        raise FormatError(f"corrupt zstd data: {e}", fmt=fmt, where=where, offset=offset) from None
    if n < uncompressed_size:
        del out[n:]
    elif extra:
        out += extra
    return out
