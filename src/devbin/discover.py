"""Compatibility shim: the old ``Found`` records, made from :mod:`devbin.images` scans.

The scanner lives in :mod:`devbin.images` (docs/IMAGES.md) and gives one
:class:`devbin.images.Image` per device image.  Until ``packaging`` (selection, pruning,
build) and ``link.inputs`` are ported to that record, they read the images through this
module, which turns each one into the ``Found`` record they were written for, with the same
values as before: kind ``elf`` for a cubin and the fatbin entry kind names (``ltoir``,
``oldcubin``), display paths ``lib.a(k.o)`` and ``w.whl!x.so``, ``container`` the section name
or what holds a bare image (``file``, ``ar``, ``zip``, ``wrapped``).  It scans with
``all=True`` (every ``__nv_relfatbin`` image too): these consumers count and choose among every
image, as they did.  New code uses :func:`devbin.images.scan` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from devbin.binary import Buffer
from devbin.errors import FormatError, UsageError
from devbin.formats import bundle as _bundle
from devbin.formats.bundle import BundleEntry
from devbin.formats.fatbin import FatbinEntry
from devbin.formats.offload import OffloadEntry
from devbin.formats.wrapped import WrappedImage
from devbin.images.address import Address
from devbin.images.frame import Frame, Hit
from devbin.images.record import CUBIN, BareElf, Image
from devbin.images.scan import Progress, Scanner
from devbin.images.scanreport import ScanReport, WrapperInfo
from devbin.images.sniff import ZIP_MAGICS

__all__ = ["ZIP_MAGICS", "ElfImage", "Found", "ScanReport", "WrapperInfo", "discover", "discover_bytes", "found_of"]


@dataclass(frozen=True, slots=True)
class ElfImage:
    """Facts of a bare device ELF (a cubin or an AMDGPU code object)."""

    machine: int
    e_type: int
    e_flags: int
    osabi: int
    abi_version: int
    size: int
    arch: str


@dataclass(frozen=True, slots=True)
class Found:
    """One device image, as ``devbin.discover`` described it before :class:`devbin.images.Image`."""

    path: str
    container: str
    kind: str
    arch: str
    size: int
    uncompressed_size: int
    compression: str = "none"
    identifier: str = ""
    fatbin_index: int | None = None
    fatbin_offset: int | None = None
    entry_index: int | None = None
    wrapper_version: int | None = None
    entry: FatbinEntry | None = field(default=None, compare=False, repr=False)
    elf: ElfImage | None = None
    bare: memoryview | None = field(default=None, compare=False, repr=False)
    container_format: str = ""
    triple: str = ""
    bundle_id: str = ""
    offload_kind: str = ""
    image_kind: str = ""
    metadata: tuple[tuple[str, str], ...] = ()
    payload: memoryview | None = field(default=None, compare=False, repr=False)
    image_record: Image | None = field(default=None, compare=False, repr=False)  # the record it was made from

    def image_view(self, max_size: int = 1 << 30) -> memoryview | bytes:
        """The image for parsing, zero-copy when stored plain (see ``FatbinEntry.image_view``)."""
        return self._view(max_size, trimmed=False)

    def extract_view(self, max_size: int = 1 << 30) -> memoryview | bytes:
        """What :meth:`image` returns, without copying an image stored plain."""
        return self._view(max_size, trimmed=True)

    def image(self, max_size: int = 1 << 30) -> bytes:
        """The image's bytes, decompressed: what ``cuobjdump -xelf``/``-xptx`` writes for it."""
        return bytes(self._view(max_size, trimmed=True))

    def _view(self, max_size: int, *, trimmed: bool) -> memoryview | bytes:
        if self.entry is not None:
            return self.entry.extract_view(max_size) if trimmed else self.entry.image_view(max_size)
        if self.bare is not None:
            return self.bare
        if self.payload is not None:
            if len(self.payload) > max_size:
                raise FormatError(f"{self.path}: {self.container} image of {len(self.payload)} bytes is larger "
                                  f"than the limit of {max_size} bytes", fmt=self.container_format, where=self.path)
            return self.payload
        raise UsageError(f"{self.path}: no image bytes for this {self.kind} entry")


def found_of(image: Image, frame: Frame) -> Found:
    """The old record of ``image``, found in the file ``frame``."""
    n = image.native
    entry = image.address.entry
    index = entry.container if entry is not None else None
    entry_index = entry.entry if entry is not None else None
    wrapper = image.get("wrapper-version")
    version = int(wrapper) if wrapper else None
    common = {"path": frame.display, "arch": image.arch, "fatbin_index": index, "entry_index": entry_index,
              "wrapper_version": version, "image_record": image}
    if isinstance(n, FatbinEntry):
        return Found(container=image.section or frame.origin, kind=n.kind_name, size=n.payload_size,
                     uncompressed_size=n.uncompressed_size if n.is_compressed else len(n.raw_payload),
                     compression=n.compression, identifier=n.identifier, fatbin_offset=image.offset, entry=n,
                     **common)  # type: ignore[arg-type]
    if isinstance(n, BareElf):
        elf = ElfImage(machine=n.machine, e_type=n.e_type, e_flags=n.e_flags, osabi=n.osabi,
                       abi_version=n.abi_version, size=n.size, arch=image.arch)
        return Found(container=frame.origin, kind="elf" if image.kind == CUBIN else image.kind, size=n.size,
                     uncompressed_size=n.size, elf=elf, bare=n.view, **common)  # type: ignore[arg-type]
    kind = "elf" if image.kind == CUBIN else image.kind
    if isinstance(n, WrappedImage):
        return Found(container="wrapped", kind=kind, size=image.size, uncompressed_size=image.size,
                     fatbin_offset=n.header_size, container_format="wrapped", triple=image.triple,
                     metadata=n.metadata, payload=n.image, **{**common, "fatbin_index": None,
                                                               "entry_index": None})  # type: ignore[arg-type]
    if isinstance(n, OffloadEntry):
        return Found(container=image.section or "offload", kind=kind, size=image.size,
                     uncompressed_size=image.size, fatbin_offset=image.offset, container_format="offload",
                     triple=n.triple, offload_kind=n.producer, image_kind=n.image_kind_name, metadata=n.strings,
                     payload=n.image, **common)  # type: ignore[arg-type]
    assert isinstance(n, BundleEntry)
    bid = n.bundle_id
    container = image.section or "bundle"
    if entry is None:  # an object-type bundle's entry, addressed by its section
        container, common = _bundle.constants.SECTION_PREFIX, {**common, "fatbin_index": 0, "entry_index": n.index}
    return Found(container=container, kind=kind, size=n.size, uncompressed_size=n.size,
                 compression=image.compression, fatbin_offset=image.offset, container_format="bundle",
                 triple=bid.triple, bundle_id=n.id, offload_kind=bid.kind, payload=n.data,
                 **common)  # type: ignore[arg-type]


def _founds(hits: Iterator[Hit]) -> Iterator[Found]:
    for image, frame in hits:
        yield found_of(image, frame)


def discover(paths: Iterable[str | Path], *, progress: Progress | None = None, report: ScanReport | None = None,
             follow_thin_outside: bool = False) -> Iterator[Found]:
    """Every device image in ``paths`` (files or folders) as a ``Found``; see :func:`devbin.images.scan`."""
    scanner = Scanner(report, all=True, follow_thin_outside=follow_thin_outside)
    yield from _founds(scanner.paths(paths, progress))


def discover_bytes(data: Buffer, where: str, *, report: ScanReport | None = None) -> Iterator[Found]:
    """Every device image in ``data`` as a ``Found``, named ``where``."""
    yield from _founds(Scanner(report, all=True).buffer(data, Frame(Address(where), where)))
