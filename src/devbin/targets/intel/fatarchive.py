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
``device_binary_format_ar.cpp``); :func:`member_target` gives what a name says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from devbin.binary import Buffer, ByteView
from devbin.formats.ar import ArchiveFile, Member
from devbin.targets.intel.devices import ip_text, parse_ip

__all__ = ["GENERIC_IR", "PAD_PREFIX", "FatMember", "member_target", "read_fat_archive"]

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
