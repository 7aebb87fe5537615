"""The one model of a device ELF (:func:`model_of`), and the vendor importers behind it.

Import any vendor's code object into the unified model: the vendor of its ``e_machine``
(:func:`devbin.targets.registry.vendor_for_machine`) imports it
(:meth:`devbin.targets.vendor.Vendor.import_code_object`).

A new vendor registers its descriptor; callers (the CLI's annotate, callgraph and inspect, the
image record, the loader) stay as they are.
"""

from __future__ import annotations

from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.model import CodeObject
from devbin.targets.registry import VENDORS, vendor_for_machine
from devbin.targets.vendor import DEVBIN_SECTIONS as _DEVBIN_SECTIONS
from devbin.targets.vendor import VENDOR as _VENDOR
from devbin.targets.vendor import Diag

__all__ = ["Diag", "can_import", "has_model", "import_code_object", "load_vendor_attribute_names", "model_and_source",
           "model_of"]


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


#: Where :func:`model_and_source` found the model: devbin's own sections, or the vendor's metadata
#: (defined beside :data:`devbin.targets.vendor.ModelSource`, which the vendors' resources tables are given).
DEVBIN_SECTIONS = _DEVBIN_SECTIONS
VENDOR = _VENDOR


def has_model(elf: ElfFile) -> bool:
    """Whether :func:`model_of` has something to read: devbin sections, or a vendor that imports the machine."""
    from devbin.formats.devsec.elf import devbin_sections

    return can_import(elf) or bool(devbin_sections(elf))


def model_of(elf: ElfFile, *, diag: Diag | None = None) -> CodeObject:
    """The one unified model of ``elf``, whoever asks (``Image.code_object()``, resources, inspect,
    callgraph, size, link, load): its devbin sections when it has them, else its vendor's importer.

    The devbin sections come first because they say more than the vendor's metadata and never less:
    ``devbin cc`` records there the device functions' registers and scratch that LLVM 19's metadata
    note leaves out (docs/FORMAT.md), ``devbin annotate`` the vendor's facts plus edits, ``devbin link
    -o`` the propagated totals.  Devbin sections that cannot be decoded raise (a
    :class:`~devbin.errors.DeviceBinaryError`), or, with ``diag``, go to ``diag`` and the vendor's
    metadata is read instead; ``diag`` also gets what the importer tolerated (the importers' rule: no
    ``diag``, they raise).  Raises :class:`~devbin.errors.FormatError` for a file with neither."""
    return model_and_source(elf, diag=diag)[0]


def model_and_source(elf: ElfFile, *, diag: Diag | None = None) -> tuple[CodeObject, str]:
    """:func:`model_of` and where it came from: :data:`DEVBIN_SECTIONS` or :data:`VENDOR`."""
    from devbin.formats.devsec.elf import read_code_object

    try:
        have = read_code_object(elf)
    except DeviceBinaryError as e:
        if diag is None or not can_import(elf):
            raise
        diag(e)
        have = None
    if have is not None:
        load_vendor_attribute_names()  # vendor attributes in the sections print with their names
        return have, DEVBIN_SECTIONS
    return import_code_object(elf, diag=diag), VENDOR
