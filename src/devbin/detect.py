"""One table of magics: which format is this buffer?

``detect(view)`` looks at the first bytes only and never raises on short or
odd input: unknown bytes are :data:`UNKNOWN`.  Container readers reuse it at
member offsets.
"""

from __future__ import annotations

from functools import cache

from devbin.binary import Buffer, ByteView

ELF = "elf"
CUDA_FATBIN = "cuda-fatbin"
CUDA_FATBIN_WRAPPER = "cuda-fatbin-wrapper"
OFFLOAD_BINARY = "llvm-offload-binary"
OFFLOAD_BUNDLE = "clang-offload-bundle"
OFFLOAD_BUNDLE_COMPRESSED = "clang-offload-bundle-compressed"
AR = "ar"
AR_THIN = "ar-thin"
WRAPPED = "devbin-wrapped"
UNKNOWN = "unknown"


@cache
def _magics() -> tuple[tuple[bytes, int, str], ...]:
    """(magic, offset, format), longest first where prefixes overlap.

    The fatbin magics are defined once, in :mod:`devbin.formats.fatbin.constants`; they are
    imported on the first call so that ``import devbin`` does not load the fatbin package.
    """
    from devbin.formats.fatbin.constants import FATBIN_MAGIC_BYTES, WRAPPER_MAGIC_BYTES

    return (
        (b"__CLANG_OFFLOAD_BUNDLE__", 0, OFFLOAD_BUNDLE),
        (b"!<arch>\n", 0, AR),
        (b"!<thin>\n", 0, AR_THIN),
        (b"\x7fELF", 0, ELF),
        (FATBIN_MAGIC_BYTES, 0, CUDA_FATBIN),
        (WRAPPER_MAGIC_BYTES, 0, CUDA_FATBIN_WRAPPER),
        (b"\x10\xff\x10\xad", 0, OFFLOAD_BINARY),
        (b"CCOB", 0, OFFLOAD_BUNDLE_COMPRESSED),
        (b"DEVBINW\0", 0, WRAPPED),
    )


def detect(data: Buffer | ByteView, offset: int = 0) -> str:
    """The format name of the bytes at ``offset``, or ``"unknown"``."""
    view = data if isinstance(data, ByteView) else ByteView(data)
    for magic, at, name in _magics():
        if view.startswith(magic, offset + at):
            return name
    return UNKNOWN
