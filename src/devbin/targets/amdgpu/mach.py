"""The one AMDGPU processor table, and ``e_flags`` (``EF_AMDGPU_MACH``, feature settings, generic version).

Every other module asks this one about AMDGPU processors: names and their
``EF_AMDGPU_MACH`` numbers, the target-ID features each accepts (``xnack``, ``sramecc``),
the generic target that covers it (and the generic version a loader needs), the GFX
major version, the LLVM alternative names (``tahiti`` = ``gfx600``).

Sources (public):

* ``EF_AMDGPU_MACH`` values: LLVM ``llvm/include/llvm/BinaryFormat/ELF.h`` ("AMDGPU specific
  e_flags") and the "AMDGPU ELF Header" table of LLVM's ``llvm/docs/AMDGPUUsage.rst``
  (https://llvm.org/docs/AMDGPUUsage.html#amdgpu-elf-header);
* processors, alternative names, target features, generic targets and their members:
  AMDGPUUsage "Processors" and "Generic processors" tables (#amdgpu-processors) and
  ``llvm/lib/TargetParser/AMDGPUTargetParser.cpp``;
* the generic version written into ``e_flags`` bits 24..31 (1 for every generic target
  today): ``llvm/lib/Target/AMDGPU/Utils/AMDGPUBaseInfo.h`` (``GenericVersion``); ROCr
  loads a generic object on a member device when that version is at least 1
  (``ROCR-Runtime`` ``isa.cpp``, ``Isa::IsCompatible``).

Checked against the tools (tests/test_arch_tables.py): ``llvm-readelf-19`` and
``llvm-readelf-22 -h`` name exactly the mach numbers whose :attr:`Processor.named_by`
holds that release; ``clang-19``/``clang-22 --target=amdgcn-amd-amdhsa -mcpu=NAME`` accept
each such name (and its alternative names), write its mach number, and accept
``NAME:xnack+`` / ``NAME:sramecc+`` exactly for the features listed.  Entries named by
neither release come from LLVM main after 22 (gfx1154, gfx1170-gfx1172, gfx1310,
gfx11-7-generic, gfx12-5-generic, gfx13-generic).  LLVM 22 retired gfx940 (0x040) and
gfx941 (0x04b); they keep their LLVM 19 names because objects built then carry them.
gfx1250 and gfx1251 (LLVM 22) accept no feature suffix although their objects record
both features as *any*.  A mach number with no name comes back as
``EF_AMDGPU_MACH_0x..`` and is kept raw, never fatal.

On-disk layout of ``e_flags`` in code object v4 and later (``EI_ABIVERSION`` >= 2)::

    bits  0..7   EF_AMDGPU_MACH                processor, table below
    bits  8..9   EF_AMDGPU_FEATURE_XNACK_V4     0 unsupported, 1 any, 2 off, 3 on
    bits 10..11  EF_AMDGPU_FEATURE_SRAMECC_V4   same encoding
    bits 24..31  EF_AMDGPU_GENERIC_VERSION      generic targets only (code object v6), min 1

Code object v3 (``EI_ABIVERSION`` 1) used single bits instead: 0x100 xnack on,
0x200 sramecc on (so "any" cannot be expressed there, only on/off); v2 used 0x01
xnack and 0x02 trap handler.  The code object version is ``EI_ABIVERSION + 2`` for
``ELFOSABI_AMDGPU_HSA`` (0 = v2 ... 4 = v6).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = [
    "ALIASES",
    "BY_MACH",
    "BY_NAME",
    "EF_AMDGPU_FEATURE_SRAMECC_V4",
    "EF_AMDGPU_FEATURE_XNACK_V4",
    "EF_AMDGPU_GENERIC_VERSION",
    "EF_AMDGPU_MACH",
    "FEATURES",
    "GENERIC_FAMILIES",
    "GENERIC_MIN_VERSION",
    "ELFOSABI_AMDGPU_HSA",
    "ELFOSABI_AMDGPU_MESA3D",
    "ELFOSABI_AMDGPU_PAL",
    "MACH_BY_NAME",
    "MACH_NAMES",
    "PROCESSORS",
    "AmdgpuFlags",
    "FeatureSetting",
    "Processor",
    "code_object_version",
    "decode_flags",
    "generic_of",
    "gfx_major",
    "mach_name",
    "processor",
    "readelf_flag_names",
    "supported_features",
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


FEATURES = ("sramecc", "xnack")  # target-ID features, in canonical (alphabetical) order


@dataclass(frozen=True, slots=True)
class Processor:
    """One AMDGPU processor or generic target.

    ``features``: the target-ID features clang accepts after the name (alphabetical);
    ``generic``: for a processor, the generic target whose family includes it; ``gfx``: the
    GFX major version (6..13; 0 for R600); ``named_by``: the LLVM releases checked here whose
    ``llvm-readelf`` names its mach number (empty: LLVM main after 22); ``aliases``: LLVM's
    alternative processor names; ``generic_version``: for a generic target, the
    ``EF_AMDGPU_GENERIC_VERSION`` LLVM writes, which is also the lowest a loader accepts;
    ``unified_vgpr``: one VGPR/AGPR register file (gfx90a and the gfx94x/gfx950 line).
    """

    name: str
    mach: int
    features: tuple[str, ...] = ()
    generic: str | None = None
    gfx: int = 0
    named_by: tuple[int, ...] = (19, 22)
    aliases: tuple[str, ...] = ()
    generic_version: int = 0
    unified_vgpr: bool = False

    @property
    def is_generic(self) -> bool:
        return self.name.endswith("-generic")

    @property
    def is_r600(self) -> bool:
        return self.gfx == 0


_X = ("xnack",)
_SX = ("sramecc", "xnack")
_L22 = (22,)
_MAIN: tuple[int, ...] = ()


def _P(name: str, mach: int, gfx: int, features: tuple[str, ...] = (), generic: str | None = None, *,
       named_by: tuple[int, ...] = (19, 22), aliases: tuple[str, ...] = (), unified_vgpr: bool = False) -> Processor:
    return Processor(name, mach, features, generic, gfx, named_by, aliases,
                     1 if name.endswith("-generic") else 0, unified_vgpr)


#: Every processor and generic target, in ``EF_AMDGPU_MACH`` order.
PROCESSORS: tuple[Processor, ...] = (
    # R600 family (ELF32): Radeon HD 2000 .. 6000
    _P("r600", 0x001, 0), _P("r630", 0x002, 0), _P("rs880", 0x003, 0), _P("rv670", 0x004, 0),
    _P("rv710", 0x005, 0), _P("rv730", 0x006, 0), _P("rv770", 0x007, 0), _P("cedar", 0x008, 0),
    _P("cypress", 0x009, 0), _P("juniper", 0x00A, 0), _P("redwood", 0x00B, 0), _P("sumo", 0x00C, 0),
    _P("barts", 0x00D, 0), _P("caicos", 0x00E, 0), _P("cayman", 0x00F, 0), _P("turks", 0x010, 0),
    # GCN GFX6 .. GFX8
    _P("gfx600", 0x020, 6, aliases=("tahiti",)),
    _P("gfx601", 0x021, 6, aliases=("pitcairn", "verde")),
    _P("gfx700", 0x022, 7, aliases=("kaveri",)),
    _P("gfx701", 0x023, 7, aliases=("hawaii",)),
    _P("gfx702", 0x024, 7),
    _P("gfx703", 0x025, 7, aliases=("kabini", "mullins")),
    _P("gfx704", 0x026, 7, aliases=("bonaire",)),
    _P("gfx801", 0x028, 8, _X, aliases=("carrizo",)),
    _P("gfx802", 0x029, 8, aliases=("iceland", "tonga")),
    _P("gfx803", 0x02A, 8, aliases=("fiji", "polaris10", "polaris11")),
    _P("gfx810", 0x02B, 8, _X, aliases=("stoney",)),
    # GCN GFX9 (Vega), CDNA 1-4
    _P("gfx900", 0x02C, 9, _X, "gfx9-generic"),
    _P("gfx902", 0x02D, 9, _X, "gfx9-generic"),
    _P("gfx904", 0x02E, 9, _X, "gfx9-generic"),
    _P("gfx906", 0x02F, 9, _SX, "gfx9-generic"),
    _P("gfx908", 0x030, 9, _SX),
    _P("gfx909", 0x031, 9, _X, "gfx9-generic"),
    _P("gfx90c", 0x032, 9, _X, "gfx9-generic"),
    # RDNA 1, 2
    _P("gfx1010", 0x033, 10, _X, "gfx10-1-generic"),
    _P("gfx1011", 0x034, 10, _X, "gfx10-1-generic"),
    _P("gfx1012", 0x035, 10, _X, "gfx10-1-generic"),
    _P("gfx1030", 0x036, 10, (), "gfx10-3-generic"),
    _P("gfx1031", 0x037, 10, (), "gfx10-3-generic"),
    _P("gfx1032", 0x038, 10, (), "gfx10-3-generic"),
    _P("gfx1033", 0x039, 10, (), "gfx10-3-generic"),
    _P("gfx602", 0x03A, 6, aliases=("hainan", "oland")),
    _P("gfx705", 0x03B, 7),
    _P("gfx805", 0x03C, 8, aliases=("tongapro",)),
    _P("gfx1035", 0x03D, 10, (), "gfx10-3-generic"),
    _P("gfx1034", 0x03E, 10, (), "gfx10-3-generic"),
    _P("gfx90a", 0x03F, 9, _SX, unified_vgpr=True),
    _P("gfx940", 0x040, 9, _SX, "gfx9-4-generic", named_by=(19,), unified_vgpr=True),
    _P("gfx1100", 0x041, 11, (), "gfx11-generic"),
    _P("gfx1013", 0x042, 10, _X, "gfx10-1-generic"),
    _P("gfx1150", 0x043, 11, (), "gfx11-generic"),
    _P("gfx1103", 0x044, 11, (), "gfx11-generic"),
    _P("gfx1036", 0x045, 10, (), "gfx10-3-generic"),
    _P("gfx1101", 0x046, 11, (), "gfx11-generic"),
    _P("gfx1102", 0x047, 11, (), "gfx11-generic"),
    _P("gfx1200", 0x048, 12, (), "gfx12-generic"),
    _P("gfx1250", 0x049, 12, (), "gfx12-5-generic", named_by=_L22),
    _P("gfx1151", 0x04A, 11, (), "gfx11-generic"),
    _P("gfx941", 0x04B, 9, _SX, "gfx9-4-generic", named_by=(19,), unified_vgpr=True),
    _P("gfx942", 0x04C, 9, _SX, "gfx9-4-generic", unified_vgpr=True),
    _P("gfx1201", 0x04E, 12, (), "gfx12-generic"),
    _P("gfx950", 0x04F, 9, _SX, "gfx9-4-generic", named_by=_L22, unified_vgpr=True),
    _P("gfx1310", 0x050, 13, (), "gfx13-generic", named_by=_MAIN),
    _P("gfx9-generic", 0x051, 9, _X),
    _P("gfx10-1-generic", 0x052, 10, _X),
    _P("gfx10-3-generic", 0x053, 10),
    _P("gfx11-generic", 0x054, 11),
    _P("gfx1152", 0x055, 11, (), "gfx11-generic"),
    _P("gfx1154", 0x057, 11, (), "gfx11-generic", named_by=_MAIN),
    _P("gfx1153", 0x058, 11, (), "gfx11-generic", named_by=_L22),
    _P("gfx12-generic", 0x059, 12),
    _P("gfx1251", 0x05A, 12, (), "gfx12-5-generic", named_by=_L22),
    _P("gfx12-5-generic", 0x05B, 12, named_by=_MAIN),
    _P("gfx1172", 0x05C, 11, (), "gfx11-7-generic", named_by=_MAIN),
    _P("gfx1170", 0x05D, 11, (), "gfx11-7-generic", named_by=_MAIN),
    _P("gfx1171", 0x05E, 11, (), "gfx11-7-generic", named_by=_MAIN),
    _P("gfx9-4-generic", 0x05F, 9, _SX, named_by=_L22, unified_vgpr=True),
    _P("gfx11-7-generic", 0x062, 11, named_by=_MAIN),
    _P("gfx13-generic", 0x063, 13, named_by=_MAIN),
)

BY_MACH: dict[int, Processor] = {p.mach: p for p in PROCESSORS}
BY_NAME: dict[str, Processor] = {p.name: p for p in PROCESSORS}
#: LLVM's alternative processor names (``tahiti``) -> the processor name (``gfx600``).
ALIASES: dict[str, str] = {a: p.name for p in PROCESSORS for a in p.aliases}
#: Generic target -> its member processors (sorted by name).
GENERIC_FAMILIES: dict[str, tuple[str, ...]] = {
    g.name: tuple(sorted(p.name for p in PROCESSORS if p.generic == g.name)) for g in PROCESSORS if g.is_generic}
#: Lowest generic version a loader accepts, per generic target.
GENERIC_MIN_VERSION: dict[str, int] = {g: BY_NAME[g].generic_version for g in GENERIC_FAMILIES}
#: ``EF_AMDGPU_MACH`` -> name (kept for callers that want a plain mapping).
MACH_NAMES: dict[int, str] = {p.mach: p.name for p in PROCESSORS}
MACH_BY_NAME: dict[str, int] = {p.name: p.mach for p in PROCESSORS}


def processor(name: str) -> Processor | None:
    """The table entry for a processor, generic target or alternative name; None when unknown."""
    return BY_NAME.get(name) or BY_NAME.get(ALIASES.get(name, ""))


def mach_name(mach: int) -> str:
    """Processor name of an ``EF_AMDGPU_MACH`` value; ``EF_AMDGPU_MACH_0x..`` when unknown (kept raw)."""
    p = BY_MACH.get(mach)
    return p.name if p is not None else f"EF_AMDGPU_MACH_{mach:#05x}"


def generic_of(name: str) -> str | None:
    """The generic target whose family includes processor ``name``, or None."""
    p = processor(name)
    return p.generic if p is not None else None


def supported_features(name: str) -> tuple[str, ...]:
    """The target-ID features a processor accepts (what may follow it in a target ID); () when unknown."""
    p = processor(name)
    return p.features if p is not None else ()


def gfx_major(name: str) -> int | None:
    """The GFX major version (9 for ``gfx90a``, 11 for ``gfx1151`` or ``gfx11-generic``).

    From the table; for a name it does not hold, from the digits LLVM's naming uses
    (``gfxNNN`` -> N, ``gfxNNNN`` -> NN, ``gfxN-...-generic`` -> N); None when it is no gfx name.
    """
    p = processor(name)
    if p is not None:
        return p.gfx or None
    if not name.startswith("gfx"):
        return None
    head = name[3:].split("-", 1)[0]
    digits = head[:-2] if "-" not in name[3:] else head
    return int(digits) if digits.isdigit() and digits else None


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
