"""Import any vendor's code object into the unified model, by ``e_machine``.

A new vendor adds its importer to :data:`IMPORTERS`; callers (the CLI's
annotate, callgraph and inspect) stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable

from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.model import CodeObject

Diag = Callable[[DeviceBinaryError], None]


def _nvidia(elf: ElfFile, diag: Diag | None) -> CodeObject:
    from devbin.targets.nvidia.importer import import_cubin

    return import_cubin(elf, diag=diag)


def _amdgpu(elf: ElfFile, diag: Diag | None) -> CodeObject:
    from devbin.targets.amdgpu.importer import import_amdgpu

    return import_amdgpu(elf, diag=diag)


IMPORTERS: dict[int, Callable[[ElfFile, Diag | None], CodeObject]] = {C.EM_CUDA: _nvidia, C.EM_AMDGPU: _amdgpu}


def load_vendor_attribute_names() -> None:
    """Import every vendor package so their attribute ids have names (they register at import)."""
    import devbin.targets.amdgpu.importer
    import devbin.targets.nvidia.importer  # noqa: F401


def can_import(elf: ElfFile) -> bool:
    return elf.header.e_machine in IMPORTERS


def import_code_object(elf: ElfFile, *, diag: Diag | None = None) -> CodeObject:
    """The vendor metadata of ``elf`` (a cubin, an AMDGPU code object) as a :class:`CodeObject`."""
    importer = IMPORTERS.get(elf.header.e_machine)
    if importer is None:
        raise FormatError(f"no importer for e_machine {C.simple_name(C.EM_NAMES, elf.header.e_machine)}",
                          fmt="elf", where=elf.where)
    return importer(elf, diag)
