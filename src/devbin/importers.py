"""Import any vendor's code object into the unified model: the vendor of its ``e_machine``
(:func:`devbin.targets.registry.vendor_for_machine`) imports it
(:meth:`devbin.targets.vendor.Vendor.import_code_object`).

A new vendor registers its descriptor; callers (the CLI's annotate, callgraph and inspect, the
image record, the loader) stay as they are.
"""

from __future__ import annotations

from devbin.errors import FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.model import CodeObject
from devbin.targets.registry import VENDORS, vendor_for_machine
from devbin.targets.vendor import Diag

__all__ = ["Diag", "can_import", "import_code_object", "load_vendor_attribute_names"]


def load_vendor_attribute_names() -> None:
    """Import every vendor's importer so their attribute ids have names (they register at import)."""
    for v in VENDORS:
        v.load_attribute_names()


def can_import(elf: ElfFile) -> bool:
    return vendor_for_machine(elf.header.e_machine) is not None


def import_code_object(elf: ElfFile, *, diag: Diag | None = None) -> CodeObject:
    """The vendor metadata of ``elf`` (a cubin, an AMDGPU code object) as a :class:`CodeObject`."""
    vendor = vendor_for_machine(elf.header.e_machine)
    if vendor is None:
        raise FormatError(f"no importer for e_machine {C.simple_name(C.EM_NAMES, elf.header.e_machine)}",
                          fmt="elf", where=elf.where)
    return vendor.import_code_object(elf, diag=diag)
