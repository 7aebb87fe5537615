"""The SPIR-V of an OpenCL ELF (:mod:`devbin.formats.oclelf`): an ``ocloc`` fat archive's ``generic_ir``.

Each ``SHT_OPENCL_SPIRV`` section of an OpenCL ELF is one image, kind ``spirv``, addressed as the section
(``k.ar!generic_ir@SPIRV Object``, as a SYCL library's ``generic_ir`` is), container ``oclelf``, vendor the
one its ``spir``/``spir64`` triple names (by the ELF class: ``spir64`` is Intel's JIT code); the bytes are
the section's.  What the runtime does with it: :mod:`devbin.targets.intel.fatarchive`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devbin.formats.oclelf import spirv_sections, triple_of
from devbin.images.address import SectionStep
from devbin.images.frame import Frame, Hit
from devbin.images.record import SPIRV, Image
from devbin.images.sniff import vendor_of

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile
    from devbin.images.scanreport import ScanReport

__all__ = ["CONTAINER", "SectionImage", "oclelf_in_elf"]

CONTAINER = "oclelf"


@dataclass(frozen=True, slots=True)
class SectionImage:
    """An image that is a section's bytes."""

    view: memoryview = field(repr=False, compare=False)

    def image_data(self, max_size: int, size: int = 0) -> memoryview:
        return self.view

    def image_head(self, n: int, size: int = 0) -> memoryview:
        return self.view[:n]


def oclelf_in_elf(rep: ScanReport, elf: ElfFile, frame: Frame, all: bool = False) -> Iterator[Hit]:
    """The SPIR-V sections of an OpenCL ELF (module docstring); nothing for another ELF."""
    triple = triple_of(elf)
    for sec in spirv_sections(elf):
        view = memoryview(sec.data)
        yield Image(address=frame.address.child(SectionStep(sec.name)), vendor=vendor_of(SPIRV, triple), kind=SPIRV,
                    arch="", size=len(view), stored_size=len(view), compression="none", container=CONTAINER,
                    section=sec.name, offset=sec.sh_offset, metadata=(("triple", triple),),
                    native=SectionImage(view)), frame
