"""NVIDIA cubins: the facts this version reads from a cubin's ELF header and symbols.

* SM number from ``e_flags``: the layout changed with CUDA 13's ELF ABI v8
  (OS/ABI 0x41).  In ABI v7 (CUDA <= 12, OS/ABI 0x33) the SM is the low byte;
  in v8 it is bits 8..15 (LLVM ``llvm/include/llvm/BinaryFormat/ELF.h``
  ``EF_CUDA_*``; llvm-project PRs #75624, #149534, #159354).
* kernel or device function from ``st_other``: ``STO_CUDA_ENTRY`` (0x10)
  marks kernels.

Attributes from ``.nv.info`` (registers, stack, parameters) are not imported
yet; :func:`code_object_from_symbols` gives names, kinds and metadata only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin._version import __version__
from devbin.formats.elf import constants as C
from devbin.targets.nvidia.archs import sm_from_e_flags

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import CodeObject

STO_CUDA_ENTRY = 0x10


def sm_of(elf: ElfFile) -> int:
    """The SM number a cubin was built for (e.g. 90), from ``e_flags`` by ABI version."""
    h = elf.header
    return sm_from_e_flags(h.ei_osabi, h.ei_abiversion, h.e_flags)


def code_object_from_symbols(elf: ElfFile) -> CodeObject:
    """A code object naming every defined function of a cubin, kernel or device, with metadata."""
    # The model is imported here, not with the package: the image scanner reads the arch table
    # (targets.nvidia.archs) for every cubin it lists, and must not pay for the model to do so.
    from devbin.model import CodeObject, Function, FunctionKind, Metadata, Target

    funcs = []
    for s in elf.symtab or ():
        if s.type == C.STT_FUNC and s.defined and s.name:
            kind = FunctionKind.KERNEL if s.st_other & STO_CUDA_ENTRY else FunctionKind.DEVICE
            funcs.append(Function(s.name, kind))
    sm = sm_of(elf)
    md = Metadata.of([("producer", f"devbin {__version__}"), ("vendor", "nvidia"), ("target-id", f"sm_{sm}")])
    return CodeObject(Target("nvidia", f"sm_{sm}"), tuple(funcs), metadata=md)
