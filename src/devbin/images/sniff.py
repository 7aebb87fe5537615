"""What kind of image the first bytes of an image are.

:func:`image_kind` says which image kind an image from an LLVM container or a devbin wrapped image is
(the record's ``kind``/``arch``), by the magics of the one table (:mod:`devbin.formats.magic`); which
vendor and architecture a device ELF or a triple is for, the vendor descriptors say
(:mod:`devbin.targets.registry`).  Which container a file is, and how the scan opens it, is the
registry of container formats' (:mod:`devbin.images.containers`).
"""

from __future__ import annotations

from devbin.binary import Buffer, ByteView
from devbin.errors import DeviceBinaryError
from devbin.formats import magic as M
from devbin.images.record import BITCODE, DATA, FATBIN, HOST, PTX, SPIRV
from devbin.targets.registry import vendor_for_kind, vendor_for_machine, vendor_for_triple

__all__ = ["device_elf", "image_kind", "vendor_of"]

#: The image kind an image magic names.
_IMAGE_KINDS = {M.BITCODE: BITCODE, M.BITCODE_WRAPPER: BITCODE, M.SPIRV: SPIRV, M.CUDA_FATBIN: FATBIN}


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
    fmt = M.detect(v)
    if fmt == M.ELF:
        try:
            ev = ByteView(data, fmt="elf", little=v.u8(5) != 2)  # EI_DATA 2: big-endian
            machine = ev.u16(18)
            flags = ev.u32(48 if ev.u8(4) == 2 else 36)  # e_flags by EI_CLASS
            osabi, abi_version = ev.u8(7), ev.u8(8)
        except DeviceBinaryError:
            return DATA, ""
        _, kind, arch = device_elf(machine, flags, osabi, abi_version)
        return kind, arch
    named = _IMAGE_KINDS.get(fmt) or _IMAGE_KINDS.get(M.image_magic(v))
    if named is not None:
        return named, ""
    if ptx:
        return PTX, ""
    return DATA, ""
