"""The OpenCL ELF of Intel's compute runtime: what an ``ocloc`` fat archive's ``generic_ir`` member is.

Layout (compute-runtime ``shared/source/device_binary_format/elf/ocl_elf.h``): an ELF with ``e_machine``
``EM_NONE`` and an ``e_type`` of the OpenCL range, ``ET_OPENCL_SOURCE`` 0xFF01 to ``ET_OPENCL_DEBUG``
0xFF05 (``ET_OPENCL_OBJECTS`` 0xFF02 for ``generic_ir``, ``ET_OPENCL_EXECUTABLE`` 0xFF04 for a
patch-token program), whose sections are typed in the OpenCL range: ``SHT_OPENCL_SPIRV`` 0xFF000009
("SPIRV Object") holds a SPIR-V module, the intermediate representation the runtime compiles for a
device no member of the archive was built for (``device_binary_format_ar.cpp``).  The class (32/64-bit)
is the pointer size the SPIR-V was built for (``spir``/``spir64``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile, Section

__all__ = ["BUILD_OPTIONS", "ET_OPENCL_FIRST", "ET_OPENCL_LAST", "ET_OPENCL_OBJECTS", "SHT_OPENCL_OPTIONS",
           "SHT_OPENCL_SPIRV", "SPIRV_OBJECT", "is_opencl_elf", "spirv_sections", "triple_of"]

ET_OPENCL_FIRST: Final = 0xFF01  # ET_OPENCL_SOURCE
ET_OPENCL_OBJECTS: Final = 0xFF02  # generic_ir's type
ET_OPENCL_LAST: Final = 0xFF05  # ET_OPENCL_DEBUG
SHT_OPENCL_OPTIONS: Final = 0xFF000006
SHT_OPENCL_SPIRV: Final = 0xFF000009
#: The section names the runtime gives them (``SectionNamesOpenCl``).
SPIRV_OBJECT: Final = "SPIRV Object"
BUILD_OPTIONS: Final = "BuildOptions"


def is_opencl_elf(elf: ElfFile) -> bool:
    """Whether ``elf``'s type is one of the OpenCL ELF types."""
    return ET_OPENCL_FIRST <= elf.header.e_type <= ET_OPENCL_LAST


def spirv_sections(elf: ElfFile) -> list[Section]:
    """The non-empty ``SHT_OPENCL_SPIRV`` sections of an OpenCL ELF (none for another ELF)."""
    if not is_opencl_elf(elf):
        return []
    return [s for s in elf.sections if s.sh_type == SHT_OPENCL_SPIRV and s.file_size]


def triple_of(elf: ElfFile) -> str:
    """The SPIR triple its class stands for: ``spir64`` (ELFCLASS64) or ``spir``."""
    return "spir64" if elf.header.is64 else "spir"
