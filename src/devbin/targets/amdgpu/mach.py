"""AMDGPU ``e_flags``: processor (``EF_AMDGPU_MACH``), feature settings, generic version.

On-disk layout of ``e_flags`` in code object v4 and later (``EI_ABIVERSION`` >= 2)::

    bits  0..7   EF_AMDGPU_MACH                processor, table below
    bits  8..9   EF_AMDGPU_FEATURE_XNACK_V4     0 unsupported, 1 any, 2 off, 3 on
    bits 10..11  EF_AMDGPU_FEATURE_SRAMECC_V4   same encoding
    bits 24..31  EF_AMDGPU_GENERIC_VERSION      generic targets only (code object v6), min 1

Code object v3 (``EI_ABIVERSION`` 1) used single bits instead: 0x100 xnack on,
0x200 sramecc on (so "any" cannot be expressed there, only on/off); v2 used 0x01
xnack and 0x02 trap handler.  The code object version is ``EI_ABIVERSION + 2`` for
``ELFOSABI_AMDGPU_HSA`` (0 = v2 ... 4 = v6).

The MACH table is LLVM's (``llvm/BinaryFormat/ELF.h``), checked value by value
against ``llvm-readelf -h``.  Values LLVM 22 retired (gfx940 0x040, gfx941 0x04b)
keep their LLVM 19 names because objects built then still carry them; values with
no name come back as ``EF_AMDGPU_MACH_0x..`` and are kept raw.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "EF_AMDGPU_FEATURE_SRAMECC_V4",
    "EF_AMDGPU_FEATURE_XNACK_V4",
    "EF_AMDGPU_GENERIC_VERSION",
    "EF_AMDGPU_MACH",
    "ELFOSABI_AMDGPU_HSA",
    "ELFOSABI_AMDGPU_MESA3D",
    "ELFOSABI_AMDGPU_PAL",
    "MACH_BY_NAME",
    "MACH_NAMES",
    "AmdgpuFlags",
    "FeatureSetting",
    "code_object_version",
    "decode_flags",
    "mach_name",
    "readelf_flag_names",
]

ELFOSABI_AMDGPU_HSA = 64
ELFOSABI_AMDGPU_PAL = 65
ELFOSABI_AMDGPU_MESA3D = 66

EF_AMDGPU_MACH = 0x0FF
EF_AMDGPU_FEATURE_XNACK_V4 = 0x300
EF_AMDGPU_FEATURE_SRAMECC_V4 = 0xC00
EF_AMDGPU_GENERIC_VERSION = 0xFF000000
EF_AMDGPU_GENERIC_VERSION_OFFSET = 24
EF_AMDGPU_FEATURE_XNACK_V3 = 0x100
EF_AMDGPU_FEATURE_SRAMECC_V3 = 0x200
EF_AMDGPU_FEATURE_XNACK_V2 = 0x01
EF_AMDGPU_FEATURE_TRAP_HANDLER_V2 = 0x02

MACH_NAMES: dict[int, str] = {
    # R600 family
    0x001: "r600", 0x002: "r630", 0x003: "rs880", 0x004: "rv670", 0x005: "rv710", 0x006: "rv730",
    0x007: "rv770", 0x008: "cedar", 0x009: "cypress", 0x00A: "juniper", 0x00B: "redwood", 0x00C: "sumo",
    0x00D: "barts", 0x00E: "caicos", 0x00F: "cayman", 0x010: "turks",
    # AMDGCN
    0x020: "gfx600", 0x021: "gfx601", 0x022: "gfx700", 0x023: "gfx701", 0x024: "gfx702", 0x025: "gfx703",
    0x026: "gfx704", 0x028: "gfx801", 0x029: "gfx802", 0x02A: "gfx803", 0x02B: "gfx810", 0x02C: "gfx900",
    0x02D: "gfx902", 0x02E: "gfx904", 0x02F: "gfx906", 0x030: "gfx908", 0x031: "gfx909", 0x032: "gfx90c",
    0x033: "gfx1010", 0x034: "gfx1011", 0x035: "gfx1012", 0x036: "gfx1030", 0x037: "gfx1031",
    0x038: "gfx1032", 0x039: "gfx1033", 0x03A: "gfx602", 0x03B: "gfx705", 0x03C: "gfx805",
    0x03D: "gfx1035", 0x03E: "gfx1034", 0x03F: "gfx90a", 0x040: "gfx940", 0x041: "gfx1100",
    0x042: "gfx1013", 0x043: "gfx1150", 0x044: "gfx1103", 0x045: "gfx1036", 0x046: "gfx1101",
    0x047: "gfx1102", 0x048: "gfx1200", 0x049: "gfx1250", 0x04A: "gfx1151", 0x04B: "gfx941",
    0x04C: "gfx942", 0x04E: "gfx1201", 0x04F: "gfx950", 0x051: "gfx9-generic", 0x052: "gfx10-1-generic",
    0x053: "gfx10-3-generic", 0x054: "gfx11-generic", 0x055: "gfx1152", 0x058: "gfx1153",
    0x059: "gfx12-generic", 0x05A: "gfx1251", 0x05F: "gfx9-4-generic",
}
MACH_BY_NAME: dict[str, int] = {v: k for k, v in MACH_NAMES.items()}


def mach_name(mach: int) -> str:
    """Processor name of an ``EF_AMDGPU_MACH`` value; ``EF_AMDGPU_MACH_0x..`` when unknown (kept raw)."""
    return MACH_NAMES.get(mach, f"EF_AMDGPU_MACH_{mach:#05x}")


class FeatureSetting(IntEnum):
    """A V4 feature field (xnack, sramecc): the 2-bit value as stored."""

    UNSUPPORTED = 0
    ANY = 1
    OFF = 2
    ON = 3

    @property
    def suffix(self) -> str:
        """The target-id suffix: ``+``, ``-`` or ``""`` (any and unsupported say nothing)."""
        return {FeatureSetting.ON: "+", FeatureSetting.OFF: "-"}.get(self, "")


def code_object_version(ei_osabi: int, ei_abiversion: int) -> int | None:
    """Code object version (2..6) from ``EI_ABIVERSION`` for HSA objects; None for PAL/Mesa/others."""
    if ei_osabi != ELFOSABI_AMDGPU_HSA:
        return None
    return ei_abiversion + 2


@dataclass(frozen=True, slots=True)
class AmdgpuFlags:
    """``e_flags`` decoded.  ``raw`` is kept so nothing is lost."""

    raw: int
    mach: int
    processor: str
    code_object_version: int | None
    xnack: FeatureSetting
    sramecc: FeatureSetting
    generic_version: int
    unknown_bits: int

    @property
    def is_generic(self) -> bool:
        return self.processor.endswith("-generic")

    @property
    def target_id(self) -> str:
        """Canonical target id (features alphabetical: sramecc before xnack)."""
        parts = [self.processor]
        for name, s in (("sramecc", self.sramecc), ("xnack", self.xnack)):
            if s.suffix:
                parts.append(name + s.suffix)
        return ":".join(parts)


def decode_flags(e_flags: int, ei_osabi: int = ELFOSABI_AMDGPU_HSA, ei_abiversion: int = 2) -> AmdgpuFlags:
    """Decode ``e_flags`` by code object version (v4+ two-bit fields, v3 single bits, v2 xnack bit)."""
    e_flags &= 0xFFFFFFFF
    mach = e_flags & EF_AMDGPU_MACH
    cov = code_object_version(ei_osabi, ei_abiversion)
    generic = 0
    if cov is None or cov >= 4:
        xnack = FeatureSetting((e_flags & EF_AMDGPU_FEATURE_XNACK_V4) >> 8)
        sramecc = FeatureSetting((e_flags & EF_AMDGPU_FEATURE_SRAMECC_V4) >> 10)
        generic = (e_flags & EF_AMDGPU_GENERIC_VERSION) >> EF_AMDGPU_GENERIC_VERSION_OFFSET
        known = EF_AMDGPU_MACH | EF_AMDGPU_FEATURE_XNACK_V4 | EF_AMDGPU_FEATURE_SRAMECC_V4 | EF_AMDGPU_GENERIC_VERSION
    elif cov == 3:
        xnack = FeatureSetting.ON if e_flags & EF_AMDGPU_FEATURE_XNACK_V3 else FeatureSetting.ANY
        sramecc = FeatureSetting.ON if e_flags & EF_AMDGPU_FEATURE_SRAMECC_V3 else FeatureSetting.ANY
        known = EF_AMDGPU_MACH | EF_AMDGPU_FEATURE_XNACK_V3 | EF_AMDGPU_FEATURE_SRAMECC_V3
    else:  # v2: the MACH field did not exist (processor came from a note); keep bits raw
        xnack = FeatureSetting.ON if e_flags & EF_AMDGPU_FEATURE_XNACK_V2 else FeatureSetting.ANY
        sramecc = FeatureSetting.ANY
        known = EF_AMDGPU_FEATURE_XNACK_V2 | EF_AMDGPU_FEATURE_TRAP_HANDLER_V2
        mach = 0
    return AmdgpuFlags(e_flags, mach, mach_name(mach) if mach else "", cov, xnack, sramecc, generic,
                       e_flags & ~known & 0xFFFFFFFF)


def readelf_flag_names(flags: AmdgpuFlags) -> list[str]:
    """The names ``llvm-readelf -h`` prints after the hex value for a v4+ object.

    Order: processor, ``xnack``/``xnack-``/``xnack+`` (unless unsupported), the
    same for ``sramecc``, then ``generic_v<N>`` when the generic version is set.
    """
    out = [flags.processor] if flags.mach in MACH_NAMES else []
    for name, s in (("xnack", flags.xnack), ("sramecc", flags.sramecc)):
        if s != FeatureSetting.UNSUPPORTED:
            out.append(name + s.suffix)
    if flags.generic_version:
        out.append(f"generic_v{flags.generic_version}")
    return out
