"""Numbers of the LLVM OffloadBinary format (``llvm-amdgpu-formats.md`` §1).

Every enum field is kept raw by the reader; the tables here only name values.

The offload kind has two numberings, and the format version was *not* bumped
when LLVM switched between them (LLVM 21, PR #135809):

* LLVM 15-20 (``clang-offload-packager-19`` writes this): sequential,
  none 0, openmp 1, cuda 2, hip 3;
* LLVM 21+ (``clang-offload-packager-22``/``llvm-offload-binary-22``): a bit
  mask, none 0, openmp 1, cuda 2, hip 4, sycl 8.

So ``llvm-objdump-22`` shows an LLVM 19 HIP image (3) as ``producer none`` and
``llvm-objdump-19`` shows an LLVM 22 HIP image (4) the same way.
:func:`offload_numbering` says which numbering a value most likely belongs to.
"""

from __future__ import annotations

from typing import Final

from devbin.errors import UsageError, quote

MAGIC: Final = b"\x10\xff\x10\xad"
MAGIC_U32: Final = 0xAD10FF10  # the magic read as a little-endian u32

VERSION_1: Final = 1  # LLVM 15-22: one entry per blob
VERSION_2: Final = 2  # LLVM main after the 22 branch: several entries, sized string values
MAX_VERSION: Final = VERSION_2

HEADER_SIZE: Final = 32
ENTRY_SIZE: Final = 40
STRING_ENTRY_SIZE_V1: Final = 16  # key offset, value offset
STRING_ENTRY_SIZE_V2: Final = 24  # key offset, value offset, value size
ALIGNMENT: Final = 8  # blobs start 8-aligned; images and sizes are padded to 8

SECTION_NAME: Final = ".llvm.offloading"
SHT_LLVM_OFFLOADING: Final = 0x6FFF4C0B

# Entry flags (LLVM main): the entry carries only metadata, no image.
FLAG_METADATA: Final = 0x1

# ImageKind (u16), same in every version.
IMG_NONE: Final = 0
IMG_OBJECT: Final = 1
IMG_BITCODE: Final = 2
IMG_CUBIN: Final = 3
IMG_FATBINARY: Final = 4
IMG_PTX: Final = 5
IMG_SPIRV: Final = 6  # LLVM 22 headers; not in 19

IMAGE_KIND_NAMES: Final[dict[int, str]] = {
    IMG_NONE: "none", IMG_OBJECT: "object", IMG_BITCODE: "bitcode", IMG_CUBIN: "cubin",
    IMG_FATBINARY: "fatbinary", IMG_PTX: "ptx", IMG_SPIRV: "spirv",
}
# What ``llvm-objdump --offloading`` prints on its ``kind`` line (19 and 22 agree; SPIR-V is ``<none>``).
OBJDUMP_IMAGE_KIND: Final[dict[int, str]] = {
    IMG_OBJECT: "elf", IMG_BITCODE: "llvm ir", IMG_CUBIN: "cubin", IMG_FATBINARY: "fatbinary", IMG_PTX: "ptx",
}
# The packager derives the image kind from the input file's extension; any other extension
# (``.co``, and ``.spv`` even in clang-offload-packager-22) gives IMG_NONE.
IMAGE_KIND_BY_EXTENSION: Final[dict[str, int]] = {
    "o": IMG_OBJECT, "bc": IMG_BITCODE, "cubin": IMG_CUBIN, "fatbin": IMG_FATBINARY, "s": IMG_PTX,
}

# OffloadKind (u16).
OFK_NONE: Final = 0
OFK_OPENMP: Final = 1
OFK_CUDA: Final = 2
OFK_HIP_LEGACY: Final = 3  # LLVM <= 20
OFK_HIP: Final = 4  # LLVM 21+
OFK_SYCL: Final = 8  # LLVM 21+

LEGACY_OFFLOAD_KIND_NAMES: Final[dict[int, str]] = {OFK_OPENMP: "openmp", OFK_CUDA: "cuda", OFK_HIP_LEGACY: "hip"}
MASK_OFFLOAD_KIND_NAMES: Final[dict[int, str]] = {OFK_OPENMP: "openmp", OFK_CUDA: "cuda", OFK_HIP: "hip",
                                                   OFK_SYCL: "sycl"}

# Values of :func:`offload_numbering`.
NUMBERING_BOTH: Final = "both"  # 0, 1, 2: the same meaning in both numberings
NUMBERING_LEGACY: Final = "llvm<=20"  # sequential (3 = hip)
NUMBERING_MASK: Final = "llvm>=21"  # bit mask (4 = hip, 8 = sycl)
NUMBERING_UNKNOWN: Final = "unknown"


def image_kind_name(kind: int) -> str:
    """``object``, ``bitcode``, ... or ``IMG_0x..`` for a value no LLVM defines."""
    return IMAGE_KIND_NAMES.get(kind, f"IMG_{kind:#x}")


def objdump_image_kind(kind: int) -> str:
    """The ``kind`` line of ``llvm-objdump --offloading``."""
    return OBJDUMP_IMAGE_KIND.get(kind, "<none>")


def offload_numbering(version: int, kind: int) -> str:
    """Which offload-kind numbering ``kind`` most likely uses.

    Version 2 blobs only come from LLVM newer than 22, which uses the bit mask.
    In version 1 blobs the value decides: 3 only means something (hip) in the
    LLVM <= 20 numbering, 4 and 8 only in the LLVM 21+ one, and 0-2 mean the
    same in both.
    """
    if version >= VERSION_2:
        return NUMBERING_MASK if kind in MASK_OFFLOAD_KIND_NAMES or kind == OFK_NONE else NUMBERING_UNKNOWN
    if kind in (OFK_NONE, OFK_OPENMP, OFK_CUDA):
        return NUMBERING_BOTH
    if kind == OFK_HIP_LEGACY:
        return NUMBERING_LEGACY
    if kind in (OFK_HIP, OFK_SYCL):
        return NUMBERING_MASK
    return NUMBERING_UNKNOWN


def offload_kind_name(kind: int, numbering: str) -> str:
    """The producer name of ``kind`` in ``numbering`` (``none`` where it names nothing, as llvm-objdump)."""
    table = LEGACY_OFFLOAD_KIND_NAMES if numbering == NUMBERING_LEGACY else MASK_OFFLOAD_KIND_NAMES
    return table.get(kind, "none")


def offload_kinds(*, legacy: bool) -> dict[str, int]:
    """Every producer name of a numbering with its value, ``none`` first (what a writer may be asked for)."""
    table = LEGACY_OFFLOAD_KIND_NAMES if legacy else MASK_OFFLOAD_KIND_NAMES
    return {"none": OFK_NONE, **{n: v for v, n in table.items()}}


def offload_kind_value(name: str, *, legacy: bool) -> int:
    """The raw value for producer ``name`` (``hip``, ``cuda`` ...) in the chosen numbering."""
    table = LEGACY_OFFLOAD_KIND_NAMES if legacy else MASK_OFFLOAD_KIND_NAMES
    for value, n in table.items():
        if n == name:
            return value
    if name == "none":
        return OFK_NONE
    raise UsageError(f"unknown offload kind name {quote(name)}")
