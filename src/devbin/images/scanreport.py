"""What a scan notices besides the images: warnings, host-side wrappers, counts."""

from __future__ import annotations

from dataclasses import dataclass, field

from devbin.formats.bundle.constants import HIP_WRAPPER_SECTION
from devbin.formats.fatbin.constants import WRAPPER_SECTION

__all__ = ["HIP_WRAPPER_SECTION", "WRAPPER_SECTION", "ScanReport", "WrapperInfo"]

# WRAPPER_SECTION (NVIDIA's 24-byte ``__fatBinC_Wrapper_t`` records) and HIP_WRAPPER_SECTION (HIP's, the same
# layout, magic "HIPF") are defined with their formats and named here for the WrapperInfo records.


@dataclass(frozen=True, slots=True)
class WrapperInfo:
    """One 24-byte ``.nvFatBinSegment`` wrapper and the fatbin it points at, or one
    ``.hipFatBinSegment`` wrapper and the offload bundle it points at (``section``).

    ``path`` is the address of the file holding it; ``offset`` the wrapper's file offset;
    ``target_section``/``target_offset`` (file offset) say where its data pointer leads, or are
    ``""``/None when it could not be resolved; ``found`` says whether a fatbin (a bundle, for
    HIP) was found there.
    """

    path: str
    index: int
    offset: int
    version: int
    target_section: str
    target_offset: int | None
    found: bool
    section: str = WRAPPER_SECTION


@dataclass
class ScanReport:
    """What a scan noticed besides the images: warnings, wrappers, counts."""

    warnings: list[str] = field(default_factory=list)
    wrappers: list[WrapperInfo] = field(default_factory=list)
    files: int = 0
    members: int = 0
    #: Files named explicitly (not found in a folder) that gave warnings and no image at all:
    #: a truncated or corrupt file the user asked about.  The CLI exits 1 when there are any.
    failed: list[str] = field(default_factory=list)

    def merge(self, other: ScanReport) -> None:
        """Add what ``other`` (the report of a later part of the same scan) noticed."""
        self.warnings.extend(other.warnings)
        self.wrappers.extend(other.wrappers)
        self.files += other.files
        self.members += other.members
        self.failed.extend(other.failed)

    def warn(self, path: str, message: str) -> None:
        """Add ``message``, prefixed with ``path`` unless it names the path already (errors do)."""
        self.warnings.append(message if not path or path in message else f"{path}: {message}")
