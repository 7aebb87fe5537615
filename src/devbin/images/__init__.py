"""Device images wherever they sit: one :class:`Image` record, one :class:`Address`, one scan.

* :mod:`devbin.images.record`: the :class:`Image` record and the kind/vendor/container vocabulary.
* :mod:`devbin.images.address`: the address syntax (``lib.a!k.o@__nv_relfatbin#0.1``).
* :mod:`devbin.images.scan`: the walk over paths, folders, zip/wheel and ``ar`` members
  (:func:`scan`, :func:`scan_bytes`); :mod:`devbin.images.hostelf` the NVIDIA fatbins of host
  ELF files and their wrappers; :mod:`devbin.images.llvm` OffloadBinaries and offload bundles;
  :mod:`devbin.images.sniff` what the first bytes are; :mod:`devbin.images.scanreport` the
  warnings and wrappers a scan reports.

docs/IMAGES.md describes both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin._lazy import lazy_attributes
from devbin.images.address import Address, Entry, Member, SectionStep, Step
from devbin.images.record import CONTAINERS, KINDS, VENDORS, BareElf, Image, fatbin_kind, find_image
from devbin.images.scan import scan, scan_bytes
from devbin.images.scanreport import ScanReport, WrapperInfo

if TYPE_CHECKING:
    from devbin.images.record import Native

__all__ = [
    "CONTAINERS", "KINDS", "VENDORS", "Address", "BareElf", "Entry", "Image", "Member", "Native", "SectionStep",
    "ScanReport", "Step", "WrapperInfo", "fatbin_kind", "find_image", "scan", "scan_bytes",
]

#: ``Native`` names every container reader's entry class: built on first use (record.__getattr__).
__getattr__ = lazy_attributes(__name__, {"Native": "record"})
