"""The wrapped single image, byte by byte (little-endian; docs/FORMAT.md §15).

Runtimes and plugins that take *one* image (``cuModuleLoadData``, an OpenMP or
Triton plugin's ``load_binary``) get no place for metadata beside it; a package
format such as the OffloadBinary is more than they want.  The wrapped image is
the smallest header that carries the key/value metadata (producer, options,
target ID, vendor) and leaves the image itself untouched and aligned::

    +0x00  char[8]  magic "DEVBINW\\0"
    +0x08  u16      version (1)
    +0x0a  u16      flags (0; unknown bits are kept and shown, never fatal)
    +0x0c  u32      header_size: bytes before the image, a multiple of 16, >= 32
    +0x10  u64      image_size
    +0x18  u32      pair count N
    +0x1c  u32      reserved (0)
    +0x20  N pairs: uleb key length, key (UTF-8), uleb value length, value (UTF-8)
           zero bytes up to header_size
    header_size:    the image, image_size bytes; the wrapped file ends there

Why 16: an ELF image read in place needs its 8-byte fields 8-aligned, and a
loader that copies to a 16-aligned buffer keeps that; 16 costs at most 15 bytes.
Keys are unique and non-empty; pairs keep the writer's order (devbin writes the
standard keys first, then the user's, in the order given).  The image starts
with its own magic (``\\x7fELF``, PTX text, bitcode ...), so a reader that skips
``header_size`` bytes gets exactly the plain file back.
"""

from __future__ import annotations

from typing import Final

MAGIC: Final = b"DEVBINW\0"
VERSION: Final = 1
FIXED_SIZE: Final = 0x20
HEADER_ALIGN: Final = 16
MAX_PAIRS: Final = 1 << 16
