"""The one Intel GPU device table: IP versions, ``ocloc`` names, product and core families.

Intel names a GPU three ways, and a binary may carry any of them:

* the **hardware IP version** ``architecture.release.revision`` (``12.60.7``), stored in a zebin's
  ``NT_INTELGT_PRODUCT_CONFIG`` note as a GMD ID (bits 31:22 architecture, 21:14 release, 5:0
  revision; IGC ``IGC/ZEBinWriter/zebin/spec/elf.md``, compute-runtime
  ``shared/source/helpers/hw_ip_version.h``) and in an ``ocloc`` fat archive's member names
  (``64.12.60.7``);
* the **ocloc acronyms** (``acm-g10``, ``dg2-g10``, ``ats-m150``, ``pvc``): what ``ocloc compile
  -device`` and ``ocloc ids <acronym>`` take (compute-runtime
  ``third_party/aot_config_headers/platforms.h``, ``deviceAcronyms``); a *generic* acronym
  (``dg2``, ``mtl``, ``bmg``, ``ptl``: ``genericIdAcronyms``) names a family a binary built for
  its base device runs on (:data:`COMPATIBLE`);
* the **product family** (``PRODUCT_FAMILY``, e.g. 1270 for DG2) and **core family**
  (``GFXCORE_FAMILY``, e.g. 0x0C07 ``XE_HPG_CORE``) of the ``.note.intelgt.compat`` notes and of
  the old patch-token program header (IGC ``inc/common/igfxfmid.h``).

devbin names an Intel architecture by its IP version where the binary records one, else by the
product family's acronym (a 2022 zebin records only the family: ``dg2``).  That is all such a zebin
lets one say, checked on Debian's ``ocloc`` 22.43 (``tests/test_intel_family.py``): compiled for
``acm-g10``, ``acm-g11`` or ``acm-g12`` (IP 12.55.8, 12.56.5, 12.57.0 by its ``ocloc ids``), the zebin's
notes are the same product family (1270), core family 0 and no ``NT_INTELGT_PRODUCT_CONFIG``; only
``NT_INTELGT_TARGET_METADATA``'s hardware revision range differs (8..8, 5..5, 0..0: the IP version's
revision), with its "validate revision" bit clear, so the runtime checks no revision
(compute-runtime ``zebin_decoder.cpp``, ``validateTargetDevice``: the range is compared only when
that bit is set) and takes the zebin on every device of the family; a revision (0 for ``acm-g12`` and
the deprecated ``-device dg2`` alike) names no device.  The family acronym is also what ``ocloc``'s
fat archive filter 4 and ``devbin pack --format ocloc`` name such a member (``64.dg2``,
:mod:`devbin.targets.intel.fatarchive`), and ``dg2`` as a generic target (``ocloc`` 2023+) covers the
same three devices.  In an ``ocloc`` fat archive the member's name (``64.12.55.8``) says which device
``ocloc`` built it for; ``select`` applies the runtime's member filters to it.

Where each row comes from: the IP versions and acronyms of the devices up to PVC are what
``ocloc ids <acronym>`` of Debian 12's ``intel-opencl-icd`` 22.43 prints
(``tests/test_intel.py`` checks those rows against it); their product and core families
are what that ``ocloc`` writes into the notes and patch-token headers it builds for them (checked
by the same test).  Meteor Lake and later are from ``platforms.h`` (that ``ocloc`` predates them);
their product families are left unknown (``None``) except Meteor Lake's, which DPC++ 2025 zebins
carry (1272 beside IP 12.70.4).

GRF size: 32 bytes per register up to Xe-HPG, 64 bytes from Xe-HPC on (compute-runtime
``shared/source/generated/<core>/hw_cmds_generated_<core>.inl``, ``tagGRF``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cache
from typing import Final

from devbin.errors import UsageError

__all__ = [
    "COMPATIBLE", "CORE_FAMILIES", "DEVICES", "PRODUCT_FAMILIES", "CoreFamily", "IntelDevice", "canonical_device",
    "core_family", "device_by_ip", "device_named", "devices_named", "gmdid_of", "ip_from_gmdid", "ip_text",
    "parse_ip", "product_acronym", "selected_device", "suggestions",
]

IP = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class CoreFamily:
    """A ``GFXCORE_FAMILY`` value, its IGC name and the size of one GRF register in bytes."""

    value: int
    name: str
    grf_bytes: int


#: ``GFXCORE_FAMILY`` values (IGC ``inc/common/igfxfmid.h``).  Gen9, Gen12LP, Xe-HPG and Xe-HPC are
#: the values Debian's ocloc writes into patch-token headers (``tests/test_intel.py``); the
#: Xe2/Xe3/Xe3P values are from the header only.
CORE_FAMILIES: Final[dict[int, CoreFamily]] = {c.value: c for c in (
    CoreFamily(0x0C, "GEN9_CORE", 32),
    CoreFamily(0x12, "GEN12LP_CORE", 32),
    CoreFamily(0x0C07, "XE_HPG_CORE", 32),
    CoreFamily(0x0C08, "XE_HPC_CORE", 64),
    CoreFamily(0x0C09, "XE2_HPG_CORE", 64),
    CoreFamily(0x1E00, "XE3_CORE", 64),
    CoreFamily(0x2300, "XE3P_CORE", 64),
)}

#: ``PRODUCT_FAMILY`` value -> the acronym devbin names the family by (the deprecated single-target
#: ``ocloc -device`` name where there is one).  Only values seen in real zebins.
PRODUCT_FAMILIES: Final[dict[int, str]] = {
    18: "skl",
    29: "tgllp",
    1210: "dg1",
    1270: "dg2",
    1271: "pvc",
    1272: "mtl",
}


@dataclass(frozen=True, slots=True)
class IntelDevice:
    """One device configuration: its IP version, its ocloc acronyms (the first is the canonical one),
    its product family (``None``: not known here) and its core family."""

    ip: IP
    names: tuple[str, ...]
    product_family: int | None
    core: int | None

    @property
    def ip_version(self) -> str:
        return ip_text(self.ip)

    @property
    def name(self) -> str:
        return self.names[0]

    @property
    def grf_bytes(self) -> int | None:
        c = CORE_FAMILIES.get(self.core) if self.core is not None else None
        return None if c is None else c.grf_bytes


_GEN9, _GEN12LP, _HPG, _HPC, _XE2, _XE3 = 0x0C, 0x12, 0x0C07, 0x0C08, 0x0C09, 0x1E00

#: Every device configuration devbin names, oldest first.
DEVICES: Final[tuple[IntelDevice, ...]] = (
    IntelDevice((9, 0, 9), ("skl",), 18, _GEN9),
    IntelDevice((12, 0, 0), ("tgllp",), 29, _GEN12LP),
    IntelDevice((12, 10, 0), ("dg1",), 1210, _GEN12LP),
    IntelDevice((12, 55, 8), ("acm-g10", "dg2-g10", "ats-m150"), 1270, _HPG),
    IntelDevice((12, 56, 5), ("acm-g11", "dg2-g11", "ats-m75"), 1270, _HPG),
    IntelDevice((12, 57, 0), ("acm-g12", "dg2-g12"), 1270, _HPG),
    IntelDevice((12, 60, 1), ("pvc-sdv",), 1271, _HPC),
    IntelDevice((12, 60, 7), ("pvc",), 1271, _HPC),
    IntelDevice((12, 70, 4), ("mtl-u", "mtl-s", "arl-u", "arl-s"), 1272, _HPG),
    IntelDevice((12, 71, 4), ("mtl-h", "mtl-p"), 1272, _HPG),
    IntelDevice((12, 74, 4), ("arl-h",), None, _HPG),
    IntelDevice((20, 1, 0), ("bmg-g21",), None, _XE2),
    IntelDevice((20, 2, 0), ("bmg-g31",), None, _XE2),
    IntelDevice((20, 4, 4), ("lnl-m",), None, _XE2),
    IntelDevice((30, 0, 4), ("ptl-h",), None, _XE3),
    IntelDevice((30, 1, 0), ("ptl-u",), None, _XE3),
)

#: Generic targets (compute-runtime ``platforms.h``, ``compatibilityMapping``): a binary built for
#: the key's IP version is accepted on these devices too.  The generic acronym names the key.
COMPATIBLE: Final[dict[IP, tuple[IP, ...]]] = {
    (12, 55, 8): ((12, 56, 5), (12, 57, 0)),
    (12, 70, 4): ((12, 71, 4),),
    (20, 1, 0): ((20, 2, 0), (20, 4, 4)),
    (30, 0, 4): ((30, 1, 0),),
}
#: Generic acronym -> the IP version a binary for it is built for (``genericIdAcronyms``).
GENERIC_ACRONYMS: Final[dict[str, IP]] = {"dg2": (12, 55, 8), "mtl": (12, 70, 4), "bmg": (20, 1, 0),
                                          "ptl": (30, 0, 4)}


def ip_text(ip: IP) -> str:
    return f"{ip[0]}.{ip[1]}.{ip[2]}"


def parse_ip(text: str) -> IP | None:
    """``"12.60.7"`` -> ``(12, 60, 7)``; None unless three decimal numbers in the GMD ID's ranges."""
    parts = text.split(".")
    if len(parts) != 3 or not all(p.isdigit() and p.isascii() and len(p) <= 4 for p in parts):
        return None
    a, r, v = (int(p) for p in parts)
    return (a, r, v) if a < 1024 and r < 256 and v < 64 else None


def ip_from_gmdid(value: int) -> IP:
    """The IP version of a GMD ID (``NT_INTELGT_PRODUCT_CONFIG``): 0x030F0007 -> (12, 60, 7)."""
    return ((value >> 22) & 0x3FF, (value >> 14) & 0xFF, value & 0x3F)


def gmdid_of(ip: IP) -> int:
    """The GMD ID of an IP version (the reserved bits 13:6 zero)."""
    return (ip[0] << 22) | (ip[1] << 14) | ip[2]


@cache
def _by_name() -> dict[str, IntelDevice]:
    return {n: d for d in DEVICES for n in d.names}


def device_by_ip(ip: IP) -> IntelDevice | None:
    return next((d for d in DEVICES if d.ip == ip), None)


def device_named(text: str) -> IntelDevice | None:
    """The device an acronym (``acm-g10``) or IP version (``12.55.8``) names, or None (generic acronyms
    name no single device: :func:`devices_named`)."""
    t = text.strip().lower()
    ip = parse_ip(t)
    return device_by_ip(ip) if ip is not None else _by_name().get(t)


def devices_named(text: str) -> tuple[IntelDevice, ...]:
    """Every device a name covers: one for an acronym or IP version; for a generic acronym (``dg2``)
    its base device and those :data:`COMPATIBLE` lists; for a product-family acronym every device of
    that family."""
    d = device_named(text)
    if d is not None:
        return (d,)
    t = text.strip().lower()
    out: list[IntelDevice] = []
    if t in GENERIC_ACRONYMS:
        base = GENERIC_ACRONYMS[t]
        out = [x for x in DEVICES if x.ip == base or x.ip in COMPATIBLE.get(base, ())]
    fam = next((v for v, n in PRODUCT_FAMILIES.items() if n == t), None)
    if fam is not None:
        out += [x for x in DEVICES if x.product_family == fam and x not in out]
    return tuple(out)


def product_acronym(product_family: int) -> str:
    """The acronym of a ``PRODUCT_FAMILY`` value; unknown values stay raw (``PRODUCT_FAMILY_1300``)."""
    return PRODUCT_FAMILIES.get(product_family, f"PRODUCT_FAMILY_{product_family}")


def core_family(value: int) -> CoreFamily | None:
    return CORE_FAMILIES.get(value)


@cache
def known_names() -> tuple[str, ...]:
    """Every name :func:`canonical_device` takes: acronyms, generic acronyms, IP versions."""
    names = [n for d in DEVICES for n in d.names]
    names += [g for g in (*GENERIC_ACRONYMS, *PRODUCT_FAMILIES.values()) if g not in names]
    return (*dict.fromkeys(names), *(d.ip_version for d in DEVICES))


def suggestions(text: str) -> list[str]:
    """The names ``text`` probably meant, best first (at most three)."""
    t = text.strip().lower().replace("_", "-")
    if t in known_names():
        return [t]
    for repaired in (t.replace("o", "0"), t.replace(" ", "-")):  # the letter O for a zero; a space for the dash
        if repaired in known_names():
            return [repaired]
    return difflib.get_close_matches(t, known_names(), n=3, cutoff=0.6)


def canonical_device(text: str) -> str:
    """``text`` as devbin spells an Intel device: an IP version (``12.60.7``) or a known acronym, lower
    case; UsageError with the names probably meant otherwise."""
    t = text.strip().lower()
    if parse_ip(t) is not None or t in known_names():
        return t
    hint = suggestions(text)
    meant = f"; did you mean {' or '.join(hint)}?" if hint else ""
    raise UsageError(f"{text}: not an Intel GPU device (an IP version such as 12.60.7, or pvc, acm-g10, dg2 ...)"
                     f"{meant}")


def covered_ips(name: str) -> frozenset[IP]:
    """The IP versions a name covers (:func:`devices_named`; an IP version not in the table covers itself)."""
    ip = parse_ip(name.strip().lower())
    found = {d.ip for d in devices_named(name)}
    return frozenset(found | ({ip} if ip is not None else set()))


def names_overlap(found: str, wanted: str) -> bool:
    """Whether two Intel architecture names cover a common device: ``acm-g10`` and ``12.55.8``, ``dg2``
    and ``acm-g11`` (the ``--arch`` and ``prune --keep`` rule: a name takes every binary built for a
    device it covers)."""
    return found == wanted or bool(covered_ips(found) & covered_ips(wanted))


def match_rank(binary_arch: str, device: IntelDevice) -> tuple[int, str] | None:
    """How a zebin named ``binary_arch`` fits ``device`` by the runtime's rule (:func:`runs_on`): ``(0, why)``
    built for its IP version, ``(1, why)`` for the generic target that covers it, ``(2, why)`` for its
    product family (a zebin without the IP version note); None when the runtime refuses it."""
    ip = parse_ip(binary_arch)
    if ip is not None:
        if device.ip == ip:
            return 0, f"built for {device.ip_version}"
        if device.ip in COMPATIBLE.get(ip, ()):
            return 1, f"built for {ip_text(ip)}, whose generic target covers {device.ip_version}"
        return None
    fam = next((v for v, n in PRODUCT_FAMILIES.items() if n == binary_arch), None)
    if fam is not None and device.product_family == fam:
        return 2, f"built for the {binary_arch} family (the zebin names no IP version)"
    return None


def selected_device(text: str) -> IntelDevice | None:
    """The device ``devbin select --device text`` judges for: the one an acronym or IP version names, or for a
    generic acronym (``dg2``, ``mtl``) the generic target's base device, the IP version ``ocloc -device dg2``
    compiles for (:data:`GENERIC_ACRONYMS`); None for a name of no device."""
    d = device_named(text)
    if d is not None:
        return d
    base = GENERIC_ACRONYMS.get(text.strip().lower())
    return device_by_ip(base) if base is not None else None


def runs_on(binary_arch: str, device: str) -> bool:
    """Whether a zebin named ``binary_arch`` (:func:`devbin.targets.intel.zebin.zebin_arch`) is accepted on
    ``device`` (an IP version or acronym naming one device), by the runtime's rule (compute-runtime
    ``shared/source/device_binary_format/zebin/zebin_decoder.cpp``, ``validateTargetDevice``): a binary
    with an IP version runs on that device and on those :data:`COMPATIBLE` lists for it; a binary that
    names only a product family runs on every device of that family (the stepping range of
    ``NT_INTELGT_TARGET_METADATA`` is checked only when the binary asks, and is not modelled here)."""
    d = device_named(device)
    return d is not None and match_rank(binary_arch, d) is not None
