"""Images in LLVM offloading containers: OffloadBinaries and clang offload bundles.

* ``.llvm.offloading`` sections (``SHT_LLVM_OFFLOADING`` or that name) of host ELF files, and
  bare OffloadBinary files (``clang-offload-packager`` output): OffloadBinaries back to back,
  every entry one image (container ``offload``).
* ``.hip_fatbin`` sections: clang offload bundles, plain or compressed (CCOB), back to back,
  each 4096-aligned (a linked library has one per translation unit), and bare bundle files
  (container ``bundle``).  The ``.hipFatBinSegment`` wrappers (NVIDIA's layout, magic "HIPF")
  are reported in :attr:`ScanReport.wrappers`; a bundle a wrapper points at gets its
  ``wrapper-version``.  A compressed bundle is decompressed in memory (under
  :data:`MAX_BUNDLE_SIZE`) to read its entry table.
* ``__CLANG_OFFLOAD_BUNDLE__<id>`` sections of object-type bundles (``clang-offload-bundler
  -type=o`` with a host object): each entry is the whole section, addressed by it; the host
  entry (a 1-byte placeholder: the host object is the file itself) is not reported.

The image ``kind`` is decided from the image's bytes (:func:`devbin.images.sniff.image_kind`);
``arch`` is the container's target ID (``gfx90a:xnack-``, ``sm_90``) or, when it names none,
the one the image's ``e_flags`` give.  Empty host entries of bundles are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from devbin.binary import ByteView
from devbin.errors import DeviceBinaryError
from devbin.formats import bundle as _bundle
from devbin.formats import offload as _offload
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.fatbin.wrapper import HIP_WRAPPER_MAGIC
from devbin.formats.sycl import constants as _sycl
from devbin.images.address import Entry, SectionStep
from devbin.images.frame import Frame, Hit
from devbin.images.hostelf import HostElf
from devbin.images.record import DATA, PTX, Image
from devbin.images.scanreport import HIP_WRAPPER_SECTION, ScanReport, WrapperInfo
from devbin.images.sniff import image_kind, vendor_of

T = TypeVar("T")

_KIND_BYTES = 64  # what image_kind reads: the ELF header (e_flags), or a magic

__all__ = ["MAX_BUNDLE_SIZE", "bundle_images", "llvm_in_elf", "offload_images"]

#: Cap on a compressed (CCOB) bundle once decompressed.
MAX_BUNDLE_SIZE = 1 << 30


def _offload_image(e: _offload.OffloadEntry, frame: Frame, section: str, index: int, offset: int) -> Hit:
    kind, elf_arch = image_kind(e.image, ptx=e.image_kind == _offload.constants.IMG_PTX)
    meta = [*e.strings, ("offload-kind", e.producer), ("image-kind", e.image_kind_name)]
    base = frame.address.child(SectionStep(section)) if section else frame.address
    image = Image(address=base.child(Entry(index, e.index)), vendor=vendor_of(kind, e.triple), kind=kind,
                  arch=e.arch or elf_arch, size=e.image_size, stored_size=e.image_size, compression="none",
                  container="offload", section=section, offset=offset, metadata=tuple(meta), native=e)
    return image, frame


def _bundle_image(b: _bundle.Bundle, e: _bundle.BundleEntry, frame: Frame, section: str, index: int | None,
                  offset: int, wrapper_version: int | None = None) -> Hit | None:
    """The image of one bundle entry, or None for a host entry that is empty.  ``index`` None: an
    object-type bundle's entry, addressed by its own section ``section``."""
    bid = e.bundle_id
    if bid.is_host and (index is None or e.size == 0):
        return None
    # The first bytes decide the kind (an ELF header's e_flags, or a magic): an entry of a compressed
    # bundle is not decoded whole for it (devbin.binary.budget).
    # An entry of PTX's vendor (an nvptx triple) that is neither ELF nor bitcode is PTX text.
    ptx = vendor_of(DATA, bid.triple) == vendor_of(PTX)
    kind, elf_arch = image_kind(e.head(_KIND_BYTES), host=bid.is_host, ptx=ptx)
    meta = [("bundle-id", e.id), ("triple", bid.triple), ("offload-kind", bid.kind)]
    if wrapper_version is not None:
        meta.append(("wrapper-version", str(wrapper_version)))
    if index is None:
        address = frame.address.child(SectionStep(section))
    else:
        base = frame.address.child(SectionStep(section)) if section else frame.address
        address = base.child(Entry(index, e.index))
    image = Image(address=address, vendor=vendor_of(kind, bid.triple), kind=kind, arch=bid.target_id or elf_arch,
                  size=e.size, stored_size=e.size, compression=b.compressed.method_name if b.compressed else "none",
                  container="bundle", section=section, offset=offset, metadata=tuple(meta), native=e)
    return image, frame


def _until_corrupt(it: Iterator[T], rep: ScanReport, frame: Frame, label: str) -> Iterator[tuple[int, T]]:
    """``(index, container)`` for containers stored back to back; a corrupt one ends the walk with a
    warning (its size is unknown, so nothing after it can be trusted)."""
    index = 0
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        except DeviceBinaryError as e:
            rep.warn(frame.where, f"{label}: {e}")
            return
        yield index, item
        index += 1


def offload_images(view: ByteView, rep: ScanReport, frame: Frame, section: str, base: int) -> Iterator[Hit]:
    """OffloadBinaries back to back in ``view`` (at file offset ``base``); a corrupt one ends the walk."""
    label = section or "offload"
    it = _offload.iter_offload_binaries(ByteView(view, fmt="offload", where=label, base=view.base))
    for index, ob in _until_corrupt(it, rep, frame, label):
        for oe in ob.entries:
            yield _offload_image(oe, frame, section, index, base + ob.offset)


def bundle_images(view: ByteView, rep: ScanReport, frame: Frame, section: str, base: int,
                  pointed: dict[int, int] | None = None) -> Iterator[Hit]:
    """Bundles (plain or CCOB) back to back in ``view``, each 4096-aligned; a corrupt one ends the walk.
    ``pointed`` gives the HIP wrapper version of a bundle by its offset in ``view``."""
    label = section or "bundle"
    it = _bundle.iter_hip_fatbin(ByteView(view, fmt="bundle", where=label, base=view.base),
                                 max_size=MAX_BUNDLE_SIZE, lazy=True)
    for index, b in _until_corrupt(it, rep, frame, label):
        ver = (pointed or {}).get(b.offset)
        for be in b.entries:
            hit = _bundle_image(b, be, frame, section, index, base + b.offset, ver)
            if hit is not None:
                yield hit


def _hip_wrappers(rep: ScanReport, elf: ElfFile, frame: Frame, hip_fatbin: Section) -> dict[int, int]:
    """``.hipFatBinSegment`` wrappers: each is reported (``found`` when a bundle starts where it
    points); returns ``{offset in .hip_fatbin: wrapper version}``."""
    pointed: dict[int, int] = {}
    host = HostElf(rep, elf, frame)
    for i, (off, ver, w_sec, w_off) in enumerate(host.wrappers(HIP_WRAPPER_SECTION, HIP_WRAPPER_MAGIC)):
        found = False
        if w_sec == hip_fatbin.index and w_off is not None:
            view = hip_fatbin.view
            found = view.startswith(_bundle.constants.BUNDLE_MAGIC, w_off) or view.startswith(
                _bundle.constants.CCOB_MAGIC, w_off)
            if found:
                pointed[w_off] = ver
        target = elf.sections[w_sec].name if w_sec is not None else ""
        t_off = elf.sections[w_sec].sh_offset + w_off if w_sec is not None and w_off is not None else None
        rep.wrappers.append(WrapperInfo(frame.where, i, off, ver, target, t_off, found, HIP_WRAPPER_SECTION))
    return pointed


def llvm_in_elf(rep: ScanReport, elf: ElfFile, frame: Frame) -> Iterator[Hit]:
    """``.llvm.offloading``, ``.hip_fatbin`` and ``__CLANG_OFFLOAD_BUNDLE__<id>`` sections, in section order."""
    prefix = _bundle.constants.SECTION_PREFIX
    object_bundle = False
    for sec in elf.sections:
        try:
            if not sec.file_size:
                continue
            if sec.sh_type == _offload.constants.SHT_LLVM_OFFLOADING or sec.name.startswith(
                    _offload.constants.SECTION_NAME):
                view = sec.view.sub(0, sec.file_size, fmt="offload", where=sec.name)
                yield from offload_images(view, rep, frame, sec.name, sec.sh_offset)
            elif sec.name == _bundle.constants.HIP_FATBIN_SECTION:
                view = sec.view.sub(0, sec.file_size, fmt="bundle", where=sec.name)
                pointed = _hip_wrappers(rep, elf, frame, sec)
                yield from bundle_images(view, rep, frame, sec.name, sec.sh_offset, pointed)
            elif (sec.name.startswith(prefix) and len(sec.name) > len(prefix)
                  and not sec.name.startswith(_sycl.SECTION_PREFIX)):  # SYCL's: images/sycl.py
                object_bundle = True
        except DeviceBinaryError as e:
            rep.warn(frame.where, f"{sec.name}: {e}")
    if not object_bundle:
        return
    try:
        b = _bundle.bundles_in_elf(elf)
    except DeviceBinaryError as e:
        rep.warn(frame.where, str(e))
        return
    for ent in b.entries:
        hit = _bundle_image(b, ent, frame, prefix + ent.id, None, ent.offset)
        if hit is not None:
            yield hit
