"""Device images wherever they sit: one :class:`Image` record, one :class:`Address`, one scan.

* :mod:`devbin.images.record`: the :class:`Image` record and the kind/vendor/container vocabulary.
* :mod:`devbin.images.address`: the address syntax (``lib.a!k.o@__nv_relfatbin#0.1``).
* :mod:`devbin.images.scan`: the walk over paths, folders, zip/wheel and ``ar`` members
  (:func:`scan`, :func:`scan_bytes`); :mod:`devbin.images.containers` the registry of container
  formats (each format's magic, walk, pruning, size accounting, extract names);
  :mod:`devbin.images.hostelf` the NVIDIA fatbins of host ELF files and their wrappers;
  :mod:`devbin.images.llvm` OffloadBinaries and offload bundles; :mod:`devbin.images.sniff` what kind
  of image the first bytes are; :mod:`devbin.images.scanreport` the warnings and wrappers a scan reports.

docs/IMAGES.md describes both.
"""

from __future__ import annotations

from devbin.images.address import Address, Entry, Member, SectionStep, Step
from devbin.images.containers import CONTAINERS, FORMATS, ContainerFormat
from devbin.images.record import KINDS, VENDORS, BareElf, Image, Native, NativeImage, fatbin_kind, find_image
from devbin.images.scan import scan, scan_bytes
from devbin.images.scanreport import ScanReport, WrapperInfo

__all__ = [
    "CONTAINERS", "FORMATS", "KINDS", "VENDORS", "Address", "BareElf", "ContainerFormat", "Entry", "Image", "Member",
    "Native", "NativeImage", "SectionStep",
    "ScanReport", "Step", "WrapperInfo", "fatbin_kind", "find_image", "scan", "scan_bytes",
]
