"""What the first bytes of a file, member or container image are.

Two questions: which container or image format a file starts with (:func:`container_format`,
what the scan opens), and which image kind an image from an LLVM container or a devbin
wrapped image is (:func:`image_kind`, the record's ``kind``/``vendor``/``arch``).
"""

from __future__ import annotations

from typing import Final

from devbin.binary import Buffer, ByteView
from devbin.detect import (
    AR,
    AR_THIN,
    CUDA_FATBIN,
    ELF,
    OFFLOAD_BINARY,
    OFFLOAD_BUNDLE,
    OFFLOAD_BUNDLE_COMPRESSED,
    WRAPPED,
    detect,
)
from devbin.errors import DeviceBinaryError
from devbin.formats.elf import constants as EC
from devbin.formats.fatbin import constants as FC
from devbin.images.record import AMDGPU, BITCODE, CUBIN, DATA, FATBIN, HOST, PTX, SPIRV

__all__ = [
    "SNIFF", "ZIP", "ZIP_MAGICS", "amdgpu_arch", "container_format", "cuda_arch", "image_kind",
    "vendor_of",
]

ZIP_MAGICS: Final = (b"PK\x03\x04", b"PK\x05\x06")
#: The format name :func:`container_format` gives zip files (wheels, eggs).
ZIP: Final = "zip"
#: Bytes enough for every magic (the longest: ``__CLANG_OFFLOAD_BUNDLE__``).
SNIFF: Final = 24

_ELF_MAGIC: Final = b"\x7fELF"
_BITCODE_MAGICS: Final = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")  # raw bitcode, bitcode wrapper
_SPIRV_MAGIC: Final = b"\x03\x02\x23\x07"
_SCANNED: Final = (ELF, CUDA_FATBIN, AR, AR_THIN, OFFLOAD_BINARY, OFFLOAD_BUNDLE, OFFLOAD_BUNDLE_COMPRESSED, WRAPPED)


def container_format(head: bytes) -> str | None:
    """The format the first bytes announce (:mod:`devbin.detect` names, or ``zip``), or None
    when the scan does not look into it."""
    if head.startswith(ZIP_MAGICS):
        return ZIP
    k = detect(head)
    return k if k in _SCANNED else None


def cuda_arch(osabi: int, abi_version: int, flags: int) -> str:
    """``sm_N`` of a cubin's header (:func:`devbin.targets.nvidia.archs.sm_from_e_flags`)."""
    from devbin.targets.nvidia.archs import sm_from_e_flags  # the arch tables only for a bare device ELF
    return f"sm_{sm_from_e_flags(osabi, abi_version, flags)}"


def amdgpu_arch(flags: int) -> str:
    """The processor of an AMDGPU code object's ``e_flags`` (:func:`devbin.targets.amdgpu.mach.mach_name`)."""
    from devbin.targets.amdgpu.mach import EF_AMDGPU_MACH, mach_name
    return mach_name(flags & EF_AMDGPU_MACH)


def vendor_of(kind: str, triple: str = "") -> str:
    """``nvidia``/``amd`` by the kind, or for kinds of no vendor (bitcode, SPIR-V, data) by the
    triple (``nvptx64-nvidia-cuda``, ``amdgcn-amd-amdhsa``); ``""`` for host objects and unknowns."""
    if kind in (CUBIN, PTX, "lto-ir", FATBIN):
        return "nvidia"
    if kind == AMDGPU:
        return "amd"
    if kind == HOST:
        return ""
    if triple.startswith("nvptx"):
        return "nvidia"
    if triple.startswith(("amdgcn", "r600")):
        return "amd"
    return ""


def image_kind(data: Buffer, *, host: bool = False, ptx: bool = False) -> tuple[str, str]:
    """``(kind, arch from the image)`` of an image found in an LLVM container, by its bytes.

    ``host``: the container says it is a host entry; ``ptx``: it says the image is PTX.
    The arch is ``""`` unless the image is a device ELF whose ``e_flags`` name one.
    """
    if host:
        return HOST, ""
    v = ByteView(data, fmt="elf")
    if v.startswith(_ELF_MAGIC):
        try:
            ev = ByteView(data, fmt="elf", little=v.u8(5) != 2)  # EI_DATA 2: big-endian
            machine = ev.u16(18)
            flags = ev.u32(48 if ev.u8(4) == 2 else 36)  # e_flags by EI_CLASS
            osabi, abi_version = ev.u8(7), ev.u8(8)
        except DeviceBinaryError:
            return DATA, ""
        if machine == EC.EM_AMDGPU:
            return AMDGPU, amdgpu_arch(flags)
        if machine == EC.EM_CUDA:
            return CUBIN, cuda_arch(osabi, abi_version, flags)
        return HOST, ""
    if v.startswith(_BITCODE_MAGICS[0]) or v.startswith(_BITCODE_MAGICS[1]):
        return BITCODE, ""
    if v.startswith(FC.FATBIN_MAGIC_BYTES):
        return FATBIN, ""
    if v.startswith(_SPIRV_MAGIC):
        return SPIRV, ""
    if ptx:
        return PTX, ""
    return DATA, ""
