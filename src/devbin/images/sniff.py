"""What the first bytes of a file, member or container image are.

Two questions: which container or image format a file starts with (:func:`container_format`,
what the scan opens), and which image kind an image from an LLVM container or a devbin
wrapped image is (:func:`image_kind`, the record's ``kind``/``vendor``/``arch``).  Which vendor and
architecture a device ELF or a triple is for, the vendor descriptors say (:mod:`devbin.targets.registry`).
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
from devbin.formats.fatbin import constants as FC
from devbin.images.record import BITCODE, DATA, FATBIN, HOST, PTX, SPIRV
from devbin.targets.registry import vendor_for_kind, vendor_for_machine, vendor_for_triple

__all__ = [
    "SNIFF", "ZIP", "ZIP_MAGICS", "container_format", "device_elf", "image_kind", "vendor_of",
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


def device_elf(machine: int, flags: int, osabi: int, abi_version: int) -> tuple[str, str, str]:
    """``(vendor, kind, arch)`` of an ELF by its header: the code object of the vendor whose machine
    it is (:func:`devbin.targets.registry.vendor_for_machine`; the arch from the header by
    :meth:`~devbin.targets.vendor.Vendor.arch_from_header`), else ``("", host, "")``."""
    v = vendor_for_machine(machine)
    if v is None:
        return "", HOST, ""
    return v.name, v.object_kind, v.arch_from_header(flags, osabi, abi_version)


def vendor_of(kind: str, triple: str = "") -> str:
    """The vendor whose code an image of ``kind`` is (:func:`devbin.targets.registry.vendor_for_kind`), or
    for kinds of no vendor (bitcode, SPIR-V, data) the vendor of the ``triple`` (``nvptx64-nvidia-cuda``,
    ``amdgcn-amd-amdhsa``); ``""`` for host objects and unknowns."""
    if kind == HOST:
        return ""
    v = vendor_for_kind(kind) or vendor_for_triple(triple)
    return v.name if v is not None else ""


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
        _, kind, arch = device_elf(machine, flags, osabi, abi_version)
        return kind, arch
    if v.startswith(_BITCODE_MAGICS[0]) or v.startswith(_BITCODE_MAGICS[1]):
        return BITCODE, ""
    if v.startswith(FC.FATBIN_MAGIC_BYTES):
        return FATBIN, ""
    if v.startswith(_SPIRV_MAGIC):
        return SPIRV, ""
    if ptx:
        return PTX, ""
    return DATA, ""
