"""A zebin's ``.note.intelgt.compat`` section: the target it was built for.

Standard ELF note records (``namesz, descsz, type``, name and descriptor each padded to 4) whose
owner is ``IntelGT`` (IGC ``IGC/ZEBinWriter/zebin/source/ZEELFObjectBuilder.cpp``,
``writeCompatibilityNote``; compute-runtime ``shared/source/device_binary_format/zebin/zebin_elf.h``,
``intelGTNoteOwnerName``: the runtime skips notes of another owner, and so does this reader).
Types (IGC ``IGC/ZEBinWriter/zebin/spec/elf.md``, "ELF Note"):

=== ============================================== =========================================
1   ``NT_INTELGT_PRODUCT_FAMILY``                  u32 ``PRODUCT_FAMILY`` (1270 DG2, 1271 PVC)
2   ``NT_INTELGT_GFXCORE_FAMILY``                  u32 ``GFXCORE_FAMILY`` (0 in IGC 2022 output)
3   ``NT_INTELGT_TARGET_METADATA``                 u32 bits: 7:0 generator flags, 12:8 min HW
                                                   revision, 13 validate revision, 14 disable
                                                   extended validation, 20:16 max HW revision,
                                                   23:21 generator (1 IGC, 2 NGEN)
4   ``NT_INTELGT_ZEBIN_VERSION``                   "major.minor", NUL-terminated
5   ``NT_INTELGT_VISA_ABI_VERSION``                u32 (kernels with stack calls)
6   ``NT_INTELGT_PRODUCT_CONFIG``                  u32 GMD ID: the IP version (IGC 2023+)
7   ``NT_INTELGT_INDIRECT_ACCESS_DETECTION_VERSION`` u32
8   ``NT_INTELGT_INDIRECT_ACCESS_BUFFER_MAJOR_VERSION`` u32
=== ============================================== =========================================

Unknown types, and known ones whose descriptor is not 4 bytes, are kept raw
(:attr:`CompatNotes.raw`).  ``llvm-readelf -n`` calls types 1 and 2 ``NT_VERSION``/``NT_ARCH``:
they are the generic note names of those numbers, not what IntelGT notes mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from devbin.formats.elf.reader import Note

__all__ = [
    "COMPAT_SECTION", "NOTE_NAMES", "NT_GFXCORE_FAMILY", "NT_PRODUCT_CONFIG", "NT_PRODUCT_FAMILY",
    "NT_TARGET_METADATA", "NT_ZEBIN_VERSION", "OWNER", "CompatNotes", "TargetMetadata", "read_compat_notes",
]

COMPAT_SECTION: Final = ".note.intelgt.compat"
OWNER: Final = "IntelGT"

NT_PRODUCT_FAMILY: Final = 1
NT_GFXCORE_FAMILY: Final = 2
NT_TARGET_METADATA: Final = 3
NT_ZEBIN_VERSION: Final = 4
NT_VISA_ABI_VERSION: Final = 5
NT_PRODUCT_CONFIG: Final = 6
NT_INDIRECT_ACCESS_DETECTION_VERSION: Final = 7
NT_INDIRECT_ACCESS_BUFFER_MAJOR_VERSION: Final = 8

NOTE_NAMES: Final[dict[int, str]] = {
    NT_PRODUCT_FAMILY: "NT_INTELGT_PRODUCT_FAMILY",
    NT_GFXCORE_FAMILY: "NT_INTELGT_GFXCORE_FAMILY",
    NT_TARGET_METADATA: "NT_INTELGT_TARGET_METADATA",
    NT_ZEBIN_VERSION: "NT_INTELGT_ZEBIN_VERSION",
    NT_VISA_ABI_VERSION: "NT_INTELGT_VISA_ABI_VERSION",
    NT_PRODUCT_CONFIG: "NT_INTELGT_PRODUCT_CONFIG",
    NT_INDIRECT_ACCESS_DETECTION_VERSION: "NT_INTELGT_INDIRECT_ACCESS_DETECTION_VERSION",
    NT_INDIRECT_ACCESS_BUFFER_MAJOR_VERSION: "NT_INTELGT_INDIRECT_ACCESS_BUFFER_MAJOR_VERSION",
}
_U32_NOTES: Final = frozenset({NT_PRODUCT_FAMILY, NT_GFXCORE_FAMILY, NT_TARGET_METADATA, NT_VISA_ABI_VERSION,
                               NT_PRODUCT_CONFIG, NT_INDIRECT_ACCESS_DETECTION_VERSION,
                               NT_INDIRECT_ACCESS_BUFFER_MAJOR_VERSION})


@dataclass(frozen=True, slots=True)
class TargetMetadata:
    """``NT_INTELGT_TARGET_METADATA`` decoded (the same bits as the runtime's ``ZebinTargetFlags``)."""

    raw: int

    @property
    def generator_flags(self) -> int:
        return self.raw & 0xFF

    @property
    def min_revision(self) -> int:
        return (self.raw >> 8) & 0x1F

    @property
    def validate_revision(self) -> bool:
        return bool(self.raw >> 13 & 1)

    @property
    def disable_extended_validation(self) -> bool:
        return bool(self.raw >> 14 & 1)

    @property
    def max_revision(self) -> int:
        return (self.raw >> 16) & 0x1F

    @property
    def generator(self) -> int:
        """0 unregistered, 1 IGC, 2 NGEN."""
        return (self.raw >> 21) & 0x7


@dataclass(frozen=True, slots=True)
class CompatNotes:
    """The decoded IntelGT notes; ``None`` where the note is absent; ``raw``: every IntelGT note not
    decoded (unknown type, or a descriptor of an unexpected size) as ``(type, descriptor)``."""

    product_family: int | None = None
    core_family: int | None = None
    target_metadata: TargetMetadata | None = None
    zebin_version: str | None = None
    visa_abi_version: int | None = None
    product_config: int | None = None
    indirect_access_detection_version: int | None = None
    indirect_access_buffer_major_version: int | None = None
    raw: tuple[tuple[int, bytes], ...] = ()


def read_compat_notes(notes: list[Note]) -> CompatNotes:
    """The IntelGT notes among ``notes`` (a parsed ``.note.intelgt.compat``); other owners skipped."""
    u32: dict[int, int] = {}
    version: str | None = None
    raw: list[tuple[int, bytes]] = []
    for n in notes:
        if n.name != OWNER:
            continue
        if n.n_type in _U32_NOTES and len(n.desc) == 4 and n.n_type not in u32:
            u32[n.n_type] = int.from_bytes(n.desc, "little")
        elif n.n_type == NT_ZEBIN_VERSION and version is None:
            version = n.desc.split(b"\0", 1)[0].decode("ascii", "backslashreplace")
        else:
            raw.append((n.n_type, n.desc))
    tm = u32.get(NT_TARGET_METADATA)
    return CompatNotes(
        product_family=u32.get(NT_PRODUCT_FAMILY),
        core_family=u32.get(NT_GFXCORE_FAMILY),
        target_metadata=None if tm is None else TargetMetadata(tm),
        zebin_version=version,
        visa_abi_version=u32.get(NT_VISA_ABI_VERSION),
        product_config=u32.get(NT_PRODUCT_CONFIG),
        indirect_access_detection_version=u32.get(NT_INDIRECT_ACCESS_DETECTION_VERSION),
        indirect_access_buffer_major_version=u32.get(NT_INDIRECT_ACCESS_BUFFER_MAJOR_VERSION),
        raw=tuple(raw),
    )
