"""The old Intel GPU binary format ("patch tokens"): recognised and listed, not imported.

Before zebin, ``ocloc`` wrote an OpenCL ELF (``e_type`` 0xFF04 ``ET_OPENCL_EXECUTABLE``,
``e_machine`` 0; compute-runtime ``shared/source/device_binary_format/elf/ocl_elf.h``) whose section
``Intel(R) OpenCL Device Binary`` (``sh_type`` 0xFF000005 ``SHT_OPENCL_DEV_BINARY``) holds a program
binary (IGC ``IGC/AdaptorOCL/ocl_igc_shared/executable_format/patch_list.h``):

* ``SProgramBinaryHeader``, 7 u32: magic 0x494E5443 ("CTNI" on disk), version, device (the
  ``GFXCORE_FAMILY``), GPU pointer size, number of kernels, stepping id, program patch-list size;
  then the program patch list;
* per kernel, ``SKernelBinaryHeaderCommon`` (40 bytes: checksum u32, shader hash u64, kernel-name
  size, patch-list size, kernel heap size, general-state, dynamic-state and surface-state heap
  sizes, kernel unpadded size), the name, the four heaps and the kernel's patch list.

Debian's ocloc 22.43 writes it by default for DG2; the runtime dropped it in 2026
(compute-runtime commits ``47ada9c061``, ``25918894bc``).  The per-kernel patch tokens change
layout between versions (``EXECUTION_ENVIRONMENT`` grew a word), so resources are not decoded here:
the kind, the target (the core family's ocloc release name: ``xe-hpg``) and each kernel's name and
code size are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from devbin.binary import ByteView
from devbin.formats.elf.reader import ElfFile

__all__ = ["DEV_BINARY_SECTION_TYPE", "ET_OPENCL_EXECUTABLE", "PROGRAM_MAGIC", "PatchTokenKernel",
           "PatchTokenProgram", "is_patch_token_elf", "read_patch_token_program"]

ET_OPENCL_EXECUTABLE: Final = 0xFF04
DEV_BINARY_SECTION_TYPE: Final = 0xFF000005
PROGRAM_MAGIC: Final = 0x494E5443
_PROGRAM_HEADER: Final = 28
_KERNEL_HEADER: Final = 40

#: ``GFXCORE_FAMILY`` -> the name ``ocloc -device`` takes for that core's release or family.
RELEASE_NAMES: Final[dict[int, str]] = {0x0C: "gen9", 0x12: "gen12lp", 0x0C07: "xe-hpg", 0x0C08: "xe-hpc"}


@dataclass(frozen=True, slots=True)
class PatchTokenKernel:
    name: str
    heap_size: int
    unpadded_size: int


@dataclass(frozen=True, slots=True)
class PatchTokenProgram:
    version: int
    core_family: int
    pointer_size: int
    stepping: int
    kernels: tuple[PatchTokenKernel, ...]

    @property
    def arch(self) -> str:
        """The core family's release name (``xe-hpg``), or ``GFXCORE_FAMILY_<n>``."""
        return RELEASE_NAMES.get(self.core_family, f"GFXCORE_FAMILY_{self.core_family}")


def is_patch_token_elf(elf: ElfFile) -> bool:
    return elf.header.e_type == ET_OPENCL_EXECUTABLE and bool(elf.sections_of_type(DEV_BINARY_SECTION_TYPE))


def read_patch_token_program(elf: ElfFile) -> PatchTokenProgram:
    """The program header and kernel list of a patch-token ELF (FormatError on damage)."""
    secs = elf.sections_of_type(DEV_BINARY_SECTION_TYPE)
    if elf.header.e_type != ET_OPENCL_EXECUTABLE or not secs:
        raise ByteView(b"", fmt="patchtoken", where=elf.where).error("not a patch-token program (no device binary)")
    v = secs[0].view
    v.check(0, _PROGRAM_HEADER, "program header")
    magic, version, device, ptr, count, stepping, patch = (v.u32(4 * i) for i in range(7))
    if magic != PROGRAM_MAGIC:
        raise v.error("bad program magic", 0, magic)
    pos = _PROGRAM_HEADER + patch
    v.check_count(count, _KERNEL_HEADER, pos, "kernels")
    kernels = []
    for _ in range(count):
        v.check(pos, _KERNEL_HEADER, "kernel header")
        name_size, kpatch, heap, gsh, dsh, ssh, unpadded = (v.u32(pos + 12 + 4 * i) for i in range(7))
        body = pos + _KERNEL_HEADER
        total = name_size + heap + gsh + dsh + ssh + kpatch
        v.check(body, total, "kernel")
        name = bytes(v.bytes_at(body, name_size)).split(b"\0", 1)[0].decode("utf-8", "backslashreplace")
        kernels.append(PatchTokenKernel(name, heap, unpadded))
        pos = body + total
    return PatchTokenProgram(version, device, ptr, stepping, tuple(kernels))
