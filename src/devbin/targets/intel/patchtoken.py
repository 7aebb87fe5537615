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
(compute-runtime commits ``47ada9c061``, ``25918894bc``).  Recognised here: the kind, the target (the
core family's ocloc release name: ``xe-hpg``), each kernel's name and code size, and the patch tokens
whose payload did not move between versions (IGC ``.../executable_format/patch_shared.h``):
``PATCH_TOKEN_ALLOCATE_LOCAL_SURFACE`` (15: offset, static SLM bytes), ``MEDIA_VFE_STATE`` (18, and
``_SLOT1`` 55: offset, per-thread scratch bytes), ``ALLOCATE_STATELESS_PRIVATE_MEMORY`` (38: surface
offset, data-parameter offset and size, private bytes, is-SIMT-thread) and the head of
``EXECUTION_ENVIRONMENT`` (23: required work-group size x, y, z in words 0-2, the largest compiled
SIMD size in word 3, has-barriers in word 5).  That structure grew a word between versions (``NumGRFRequired``
is word 20 of the 132-byte payload Debian's IGC writes, word 21 in today's header), so the GRF count
is read only from a 132-byte payload and is unknown otherwise.  ``tests/test_intel.py`` checks each
number against the zebin the same ocloc builds from the same source.
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
    """A kernel: name, heap and code sizes, and what its patch tokens say (``None``: no such token)."""

    name: str
    heap_size: int
    unpadded_size: int
    slm: int | None = None
    scratch: tuple[int, int] = (0, 0)  # per-thread scratch bytes of slot 0 and slot 1
    private: int | None = None  # per hardware thread (a SIMT size times the SIMD width)
    simd: int | None = None
    required_work_group_size: tuple[int, int, int] | None = None
    has_barriers: bool | None = None
    grf_count: int | None = None


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
        tokens = body + name_size + heap + gsh + dsh + ssh
        kernels.append(_kernel(v, name, heap, unpadded, tokens, tokens + kpatch))
        pos = body + total
    return PatchTokenProgram(version, device, ptr, stepping, tuple(kernels))


def _kernel(v: ByteView, name: str, heap: int, unpadded: int, pos: int, end: int) -> PatchTokenKernel:
    """The kernel's patch list ``[pos, end)`` read for the tokens of the module docstring."""
    found: dict[int, tuple[int, ...]] = {}
    while pos + 8 <= end:
        token, size = v.u32(pos), v.u32(pos + 4)
        if size < 8 or pos + size > end:
            raise v.error("patch token size outside the kernel's patch list", pos, size)
        if token in _READ and token not in found:
            found[token] = tuple(v.u32(pos + 8 + 4 * i) for i in range((size - 8) // 4))
        pos += size
    slm, vfe, vfe1, priv, env = (found.get(t, ()) for t in (15, 18, 55, 38, 23))
    simd = env[3] if len(env) > 3 else None
    private = None
    if len(priv) > 3:
        private = priv[3] * (simd or 1) if len(priv) > 4 and priv[4] else priv[3]
    return PatchTokenKernel(
        name, heap, unpadded, slm=slm[1] if len(slm) > 1 else None,
        scratch=(vfe[1] if len(vfe) > 1 else 0, vfe1[1] if len(vfe1) > 1 else 0), private=private, simd=simd,
        required_work_group_size=(env[0], env[1], env[2]) if len(env) > 2 and any(env[:3]) else None,
        has_barriers=bool(env[5]) if len(env) > 5 else None,
        grf_count=env[20] if len(env) == _ENV_WORDS_1081 else None)


_READ: Final = frozenset({15, 18, 23, 38, 55})
_ENV_WORDS_1081: Final = 33  # the 132-byte EXECUTION_ENVIRONMENT payload of Debian's IGC (version 1081)
