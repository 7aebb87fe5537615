"""One table of magics: which format is this buffer?

``detect(view)`` looks at the first bytes only and never raises on short or
odd input: unknown bytes are :data:`UNKNOWN`.  Container readers reuse it at
member offsets.
"""

from __future__ import annotations

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

# (magic, offset, format), longest first where prefixes overlap.
_MAGICS: tuple[tuple[bytes, int, str], ...] = (
    (b"__CLANG_OFFLOAD_BUNDLE__", 0, OFFLOAD_BUNDLE),
    (b"!<arch>\n", 0, AR),
    (b"!<thin>\n", 0, AR_THIN),
    (b"\x7fELF", 0, ELF),
    (b"\x50\xed\x55\xba", 0, CUDA_FATBIN),
    (b"\xb1\x43\x62\x46", 0, CUDA_FATBIN_WRAPPER),
    (b"\x10\xff\x10\xad", 0, OFFLOAD_BINARY),
    (b"CCOB", 0, OFFLOAD_BUNDLE_COMPRESSED),
    (b"DEVBINW\0", 0, WRAPPED),
)


def detect(data: Buffer | ByteView, offset: int = 0) -> str:
    """The format name of the bytes at ``offset``, or ``"unknown"``."""
    view = data if isinstance(data, ByteView) else ByteView(data)
    for magic, at, name in _MAGICS:
        if view.startswith(magic, offset + at):
            return name
    return UNKNOWN
