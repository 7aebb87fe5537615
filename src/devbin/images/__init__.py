"""Device images wherever they sit: one :class:`Image` record, one :class:`Address`, one scan.

* :mod:`devbin.images.record`: the :class:`Image` record and the kind/vendor/container vocabulary.
* :mod:`devbin.images.address`: the address syntax (``lib.a!k.o@__nv_relfatbin#0.1``).

docs/IMAGES.md describes both.
"""

from __future__ import annotations

from devbin.images.address import Address, Entry, Member, Section, Step
from devbin.images.record import CONTAINERS, KINDS, VENDORS, BareElf, Image, Native, fatbin_kind, find_image

__all__ = [
    "CONTAINERS", "KINDS", "VENDORS", "Address", "BareElf", "Entry", "Image", "Member", "Native", "Section",
    "Step", "fatbin_kind", "find_image",
]
