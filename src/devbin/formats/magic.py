"""The one table of magics: which format do these bytes start with?

Every magic devbin recognises is one row of :data:`MAGICS`, its bytes taken from the format's own
constants module (defined there once, beside its reader):

* the **files devbin reads** (:func:`detect`): ELF (``\\x7fELF``), CUDA fatbins and their host-side
  ``__fatBinC_Wrapper_t`` (``fatbinary_section.h``), LLVM OffloadBinaries
  (``llvm/include/llvm/Object/OffloadBinary.h``), clang offload bundles plain and compressed
  (``clang/lib/Driver/OffloadBundler.cpp``: ``__CLANG_OFFLOAD_BUNDLE__``, ``CCOB``), ``ar``
  archives regular and thin (binutils ``include/aout/ar.h``) and devbin wrapped images
  (docs/FORMAT.md §15);
* **zip** files (wheels, eggs; PKWARE APPNOTE 4.3.7 local header, 4.3.16 end of central
  directory for an empty zip), which the scan opens through :mod:`devbin.formats.zipmember`;
* **image magics** (:func:`image_magic`): LLVM bitcode raw and in its wrapper
  (``llvm/docs/BitCodeFormat.rst``) and SPIR-V (SPIR-V spec §3.1, "Magic Number": the word
  0x07230203 in the module's byte order, §2.3, so either order: its row is ``either_order``);
* the **zstd frame** magic (:data:`ZSTD_FRAME`; RFC 8878 §3.1.1), which no file starts with: the fatbin
  and SYCL readers test their payloads with it.

:func:`detect` looks at the first bytes only and never raises on short or odd input (unknown bytes
are :data:`UNKNOWN`); container readers reuse it at member offsets.  Which of these formats the scan
opens, and how, is the registry's (:mod:`devbin.images.containers`).  Importing this module imports the
formats' constants modules only, never a reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from devbin.binary import Buffer, ByteView
from devbin.formats import zstdframe as _zstd
from devbin.formats.ar import constants as _ar
from devbin.formats.bundle import constants as _bundle
from devbin.formats.elf import constants as _elf
from devbin.formats.fatbin import constants as _fatbin
from devbin.formats.offload import constants as _offload
from devbin.formats.wrapped import layout as _wrapped

__all__ = [
    "AR", "AR_THIN", "BITCODE", "BITCODE_WRAPPER", "CUDA_FATBIN", "CUDA_FATBIN_WRAPPER", "ELF", "MAGICS",
    "OFFLOAD_BINARY", "OFFLOAD_BUNDLE", "OFFLOAD_BUNDLE_COMPRESSED", "SNIFF", "SPIRV", "UNKNOWN", "WRAPPED",
    "SPIRV_WORD", "ZIP", "ZIP_EMPTY", "ZIP_MAGICS", "ZSTD_FRAME", "Magic", "detect", "image_magic", "is_zip",
]

ELF: Final = "elf"
CUDA_FATBIN: Final = "cuda-fatbin"
CUDA_FATBIN_WRAPPER: Final = "cuda-fatbin-wrapper"
OFFLOAD_BINARY: Final = "llvm-offload-binary"
OFFLOAD_BUNDLE: Final = "clang-offload-bundle"
OFFLOAD_BUNDLE_COMPRESSED: Final = "clang-offload-bundle-compressed"
AR: Final = "ar"
AR_THIN: Final = "ar-thin"
WRAPPED: Final = "devbin-wrapped"
ZIP: Final = "zip"
ZIP_EMPTY: Final = "zip-empty"
BITCODE: Final = "bitcode"
BITCODE_WRAPPER: Final = "bitcode-wrapper"
SPIRV: Final = "spirv"
UNKNOWN: Final = "unknown"

#: What a row names: a file format :func:`detect` answers, a zip, or the magic of an image kind.
FILE, ARCHIVE_ZIP, IMAGE = "file", "zip", "image"


@dataclass(frozen=True, slots=True)
class Magic:
    """One magic: ``data[offset:offset+len(magic)] == magic`` names the format ``name``; with
    ``either_order`` the magic is a word that may be stored in either byte order (``magic`` reversed
    matches too)."""

    name: str
    magic: bytes
    role: str = FILE
    offset: int = 0
    either_order: bool = False


#: SPIR-V's magic number (SPIR-V spec §3.1), a 32-bit word in the module's byte order (§2.3).
SPIRV_WORD: Final = 0x07230203
#: A Zstandard frame's magic (RFC 8878 §3.1.1): the fatbin's compressed payloads, SYCL's compressed images.
ZSTD_FRAME: Final = _zstd.MAGIC

#: Every magic, longest first where prefixes overlap (none do today).
MAGICS: Final[tuple[Magic, ...]] = (
    Magic(OFFLOAD_BUNDLE, _bundle.BUNDLE_MAGIC),
    Magic(AR, _ar.MAGIC),
    Magic(AR_THIN, _ar.THIN_MAGIC),
    Magic(ELF, _elf.ELFMAG),
    Magic(CUDA_FATBIN, _fatbin.FATBIN_MAGIC_BYTES),
    Magic(CUDA_FATBIN_WRAPPER, _fatbin.WRAPPER_MAGIC_BYTES),
    Magic(OFFLOAD_BINARY, _offload.MAGIC),
    Magic(OFFLOAD_BUNDLE_COMPRESSED, _bundle.CCOB_MAGIC),
    Magic(WRAPPED, _wrapped.MAGIC),
    Magic(ZIP, b"PK\x03\x04", ARCHIVE_ZIP),
    Magic(ZIP_EMPTY, b"PK\x05\x06", ARCHIVE_ZIP),
    Magic(BITCODE, b"BC\xc0\xde", IMAGE),
    Magic(BITCODE_WRAPPER, b"\xde\xc0\x17\x0b", IMAGE),
    Magic(SPIRV, SPIRV_WORD.to_bytes(4, "little"), IMAGE, either_order=True),
)

#: Bytes enough for every magic (the longest: ``__CLANG_OFFLOAD_BUNDLE__``).
SNIFF: Final = max(m.offset + len(m.magic) for m in MAGICS)

#: The zip magics, for callers that test a file's first bytes with ``startswith``.
ZIP_MAGICS: Final = tuple(m.magic for m in MAGICS if m.role == ARCHIVE_ZIP)


def _match(view: ByteView, offset: int, role: str) -> str:
    for m in MAGICS:
        if m.role == role and (view.startswith(m.magic, offset + m.offset)
                               or (m.either_order and view.startswith(m.magic[::-1], offset + m.offset))):
            return m.name
    return UNKNOWN


def _view(data: Buffer | ByteView) -> ByteView:
    return data if isinstance(data, ByteView) else ByteView(data)


def detect(data: Buffer | ByteView, offset: int = 0) -> str:
    """The file format name of the bytes at ``offset`` (ELF, a container or ``ar``), or ``"unknown"``
    (zip files and bare images too: :func:`is_zip`, :func:`image_magic`)."""
    return _match(_view(data), offset, FILE)


def is_zip(data: Buffer | ByteView) -> bool:
    """Whether the bytes start as a zip file (a local header, or the end record of an empty zip)."""
    return _match(_view(data), 0, ARCHIVE_ZIP) != UNKNOWN


def image_magic(data: Buffer | ByteView) -> str:
    """:data:`BITCODE`, :data:`BITCODE_WRAPPER`, :data:`SPIRV` (either byte order) by the first bytes, or
    ``"unknown"``."""
    return _match(_view(data), 0, IMAGE)
