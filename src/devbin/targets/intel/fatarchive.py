"""``ocloc``'s multi-device output ("fat binary"): an ``ar`` archive of zebins named by device.

Layout (compute-runtime ``shared/source/device_binary_format/ar/ar.h``, ``ar_encoder.cpp``; the
names are made in ``shared/offline_compiler/source/ocloc_fatbinary.cpp``, ``buildFatBinaryForTarget``
and ``appendGenericIr``): a GNU/System V ``ar`` (read with :mod:`devbin.formats.ar`) whose members
are

* ``<pointer bits>.<architecture>.<release>.<revision>`` (``64.12.60.7``): a zebin for the device of
  that IP version (ocloc since 2022-03); ``<bits>.<acronym>`` (``64.dg2``) for a generic acronym;
  ``<bits>.<acronym>.<stepping>`` (``64.tgllp.0``) from older ocloc;
* ``generic_ir``: an OpenCL ELF (``e_type`` 0xFF02) with the SPIR-V the archive was built from,
  written when the input was SPIR-V and IR was not excluded (the device zebins then carry no
  ``.spv``): the runtime's fallback when no member fits the device;
* ``pad_<n>``: filler the encoder puts before a member so that the member's data starts on an
  8-byte boundary (its bytes are spaces); no device code.

The runtime picks a member by prefix match of its name (compute-runtime
``shared/source/device_binary_format/device_binary_format_ar.cpp``, ``unpackSingleDeviceBinary``):
it looks for the first member whose name starts with, in this order,

1. ``<bits>.<major>.<minor>.<revision>``, the device's IP version (``64.12.60.7``);
2. ``<bits>.<product>.<stepping>``, the device's product abbreviation and stepping (``64.dg2.0``);
3. ``<bits>.<major>.<minor>`` (``64.12.55``: a member for another revision of the same IP);
4. ``<bits>.<product>`` (``64.dg2``, also ``64.dg2.<any stepping>``);
5. ``generic_ir``,

and takes the first of these whose device code the zebin decoder accepts for the device
(``device_binary_format_zebin.cpp``: ``validateTargetDevice`` on the zebin's notes); ``generic_ir``
(or the ``.spv`` of a member the decoder refused) is then compiled for the device.  ``<bits>`` is 64 on
every device ocloc names (``maxPointerSizeInBytes`` 8).  A member no filter names is never looked at.
:func:`member_target` gives what a name says, :func:`member_filters` the names the runtime looks for on a
device and :func:`member_match` which of them a member answers.  devbin does not know a device's
stepping (the revision ID the driver reads from the GPU): filter 2 is not applied, and a
``<bits>.<product>.<stepping>`` member is taken by filter 4, which its name also answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from devbin.binary import Buffer, ByteView
from devbin.formats.ar import ArchiveFile, Member
from devbin.targets.intel.devices import PRODUCT_FAMILIES, IntelDevice, ip_text, parse_ip

__all__ = ["GENERIC_IR", "PAD_PREFIX", "FatMember", "member_filters", "member_match", "member_target",
           "product_abbreviation", "read_fat_archive"]

GENERIC_IR: Final = "generic_ir"
PAD_PREFIX: Final = "pad_"


@dataclass(frozen=True, slots=True)
class FatMember:
    """A member and what its name says: ``role`` is ``zebin`` (a device's code), ``generic_ir`` or
    ``pad``, or ``other`` for names ocloc does not write; ``arch`` the IP version or acronym; ``bits``
    the pointer size (0 when the name gives none)."""

    member: Member
    role: str
    arch: str
    bits: int


def member_target(name: str) -> tuple[str, str, int]:
    """``(role, arch, pointer bits)`` of a member name (module docstring)."""
    if name == GENERIC_IR:
        return GENERIC_IR, "", 0
    if name.startswith(PAD_PREFIX):
        return "pad", "", 0
    bits, dot, rest = name.partition(".")
    if not dot or bits not in ("32", "64") or not rest:
        return "other", "", 0
    ip = parse_ip(rest)
    if ip is not None:
        return "zebin", ip_text(ip), int(bits)
    acronym = rest.partition(".")[0].lower()  # "dg2", or "tgllp" of the old "tgllp.0"
    return ("zebin", acronym, int(bits)) if acronym else ("other", "", 0)


def read_fat_archive(data: Buffer | ByteView, *, where: str = "") -> tuple[FatMember, ...]:
    """Every regular member of an ocloc archive with its role and arch (FormatError from the ar reader)."""
    ar = ArchiveFile(data, where=where)
    out = []
    for m in ar.files:
        if m.is_special:
            continue
        role, arch, bits = member_target(m.name)
        out.append(FatMember(m, role, arch, bits))
    return tuple(out)


def product_abbreviation(device: IntelDevice) -> str:
    """The product abbreviation the runtime names ``device``'s members by (compute-runtime ``hardwarePrefix``:
    ``dg2`` for every DG2 device, ``pvc``, ``mtl``): its product family's acronym, else its acronym's stem
    (``bmg-g21`` -> ``bmg``)."""
    pf = device.product_family
    return PRODUCT_FAMILIES[pf] if pf is not None and pf in PRODUCT_FAMILIES else device.name.split("-")[0]


def member_filters(device: IntelDevice, bits: int = 64) -> tuple[tuple[int, str, str], ...]:
    """The name prefixes the runtime looks for on ``device``, in its order (module docstring): ``(filter
    number 1-5, prefix, what it is)``; filter 2 (the stepping) is left out: devbin does not know it."""
    a, r, v = device.ip
    product = product_abbreviation(device)
    return ((1, f"{bits}.{a}.{r}.{v}", "the device's IP version"),
            (3, f"{bits}.{a}.{r}", "the device's IP major.minor"),
            (4, f"{bits}.{product}", "the device's product"),
            (5, GENERIC_IR, "the SPIR-V fallback"))


def member_match(name: str, device: IntelDevice) -> tuple[int, str, str] | None:
    """The first filter of :func:`member_filters` whose prefix ``name`` starts with (the runtime's
    ``startsWith``, so ``64.12.55`` answers for ``64.12.55.8``), or None: the runtime never looks at it."""
    return next((f for f in member_filters(device) if name.startswith(f[1])), None)
