"""Images in SYCL host binaries of the old offload model (:mod:`devbin.formats.sycl`).

Each image of a ``__CLANG_OFFLOAD_BUNDLE__sycl-<target>`` section is entry ``i`` of container 0 of that
section (``lib.so@__CLANG_OFFLOAD_BUNDLE__sycl-spir64#0.2``: the section's images are the entries of the
wrapper's one binary descriptor per target).  An image whose payload (its zstd frame decoded) is an ``ar``
archive is opened: each member that holds a device image is reported at ``#0.i!<member>`` (a device ELF:
its vendor, kind and arch as for a bare file), and a member that is a host ELF carrying a SPIR-V module in
a section (an OpenCL ELF, the archive's IR fallback) at ``#0.i!<member>@<section>``; members of no known
kind (alignment fillers) are not images.  Any other payload is one image (SPIR-V, kind by its magic).

Fields: ``container`` ``sycl``; ``compression`` ``zstd`` when the image is a frame; ``stored_size`` the
frame's bytes for an image itself, a member's (or section's) bytes in the decoded archive for what is
inside one (as for an entry of a compressed bundle); ``offset`` the image's file offset; metadata
``target``, ``format``, ``descriptor-version``, ``entries`` (the kernel names, space-separated),
``compile-options``, ``link-options`` where the wrapper's descriptor gives them; ``devbin inspect`` adds the
property sets (:func:`producer_pairs`).

For ``devbin select`` (:func:`module_name`), the images of one host file that hold the same kernels (their
offload entries) are one module whatever their target: the SYCL runtime looks for an image with a
kernel among all the images registered for it, and the Level Zero adapter prefers the native
``spir64_gen`` one over ``spir64`` SPIR-V (intel/llvm ``sycl/source/detail/program_manager``,
``unified-runtime/source/adapters/level_zero/device.cpp``: ``urDeviceSelectBinary``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from devbin.binary import ByteView
from devbin.binary.mapped import Rewritable
from devbin.errors import DeviceBinaryError, UsageError
from devbin.formats import magic as M
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.fatbin import constants as FC
from devbin.formats.sycl.constants import PROP_BYTE_ARRAY, SECTION_PREFIX
from devbin.formats.sycl.reader import Property, SyclImage, read_sycl_images
from devbin.images.address import Address, Entry, Member, SectionStep
from devbin.images.armembers import ar_members
from devbin.images.frame import Frame, Hit
from devbin.images.record import DATA, HOST, SPIRV, BareElf, Image
from devbin.images.scanreport import ScanReport
from devbin.images.sniff import device_elf, image_kind, vendor_of
from devbin.targets.registry import vendor_named

__all__ = ["CONTAINER", "SyclMember", "SyclPart", "inside_frame", "module_name", "producer_pairs", "prune_sycl_section",
           "sycl_in_elf", "whole_image"]

CONTAINER = "sycl"


@dataclass(frozen=True, slots=True)
class SyclPart:
    """A part of a decoded image (an archive member, or a section of one): its bytes are
    ``image.image_data()[start:start + size]``."""

    image: SyclImage
    start: int
    size: int
    view: memoryview = field(repr=False, compare=False)

    def image_data(self, max_size: int, size: int = 0) -> memoryview:
        return self.view

    def image_head(self, n: int, size: int = 0) -> memoryview:
        return self.view[:n]


@dataclass(frozen=True, slots=True)
class SyclMember(BareElf):
    """A device ELF member of a decoded image's archive: a :class:`~devbin.images.record.BareElf` that knows
    the SYCL image it came from (:func:`producer_pairs`)."""

    sycl: SyclImage | None = field(default=None, repr=False, compare=False)


def _value_text(p: Property) -> str:
    """A property's value as text: a number (``UINT32``), else its bytes in hex (``BYTE_ARRAY``: the payload
    after the bit length; another type: the stored bytes, or the size field when it points at none)."""
    if isinstance(p.value, int):
        return str(p.value)
    return p.value.hex() if p.type == PROP_BYTE_ARRAY else f"type {p.type}: {p.value.hex()}"


def producer_pairs(native: object) -> tuple[tuple[str, str], ...]:
    """What the offload wrapper stored with an image (``devbin inspect``'s metadata): the descriptor's fields as
    ``list`` gives them, then every property as ``<set>/<property>`` (``SYCL/misc properties/optLevel: 2``),
    in stored order, values raw (:func:`_value_text`); () for a record of no SYCL image."""
    img = native if isinstance(native, SyclImage) else native.image if isinstance(native, SyclPart) \
        else native.sycl if isinstance(native, SyclMember) else None
    if img is None:
        return ()
    return (*_metadata(img), *((f"{ps.name}/{p.name}", _value_text(p)) for ps in img.property_sets
                               for p in ps.properties))


def _metadata(img: SyclImage) -> tuple[tuple[str, str], ...]:
    meta = [("target", img.target)]
    if img.version:
        meta += [("format", img.format_name), ("descriptor-version", str(img.version)),
                 ("entries", " ".join(img.entries))]
        if img.compile_options:
            meta.append(("compile-options", img.compile_options))
        if img.link_options:
            meta.append(("link-options", img.link_options))
    return tuple(meta)


def _part(img: SyclImage, address: Address, vendor: str, kind: str, arch: str, size: int, stored: int,
          native: BareElf | SyclPart, meta: tuple[tuple[str, str], ...]) -> Image:
    return Image(address=address, vendor=vendor, kind=kind, arch=arch, size=size, stored_size=stored,
                 compression=img.compression, container=CONTAINER, section=img.section, offset=img.offset,
                 metadata=meta, native=native)


def _member_image(img: SyclImage, data: memoryview, start: int, size: int, address: Address,
                  meta: tuple[tuple[str, str], ...]) -> Image | None:
    """The device image a member is (a device ELF, or SPIR-V in a host ELF's section), or None."""
    view = data[start:start + size]
    kind, arch = image_kind(view[:64])
    if kind == DATA and M.image_magic(view[:4]) == M.SPIRV:
        kind = SPIRV
    if kind == SPIRV:
        return _part(img, address, vendor_of(kind, img.target), kind, "", size, size,
                     SyclPart(img, start, size, view), meta)
    if kind == DATA:
        return None
    elf = ElfFile(ByteView(view, where=str(address)), where=str(address))
    h = elf.header
    vendor, kind, arch = device_elf(h.e_machine, h.e_flags, h.ei_osabi, h.ei_abiversion)
    if kind != HOST:
        owner = vendor_named(vendor)
        if not arch and owner is not None:
            arch = owner.arch_from_elf(elf)
        native = SyclMember(machine=h.e_machine, e_type=h.e_type, e_flags=h.e_flags, osabi=h.ei_osabi,
                            abi_version=h.ei_abiversion, size=elf.size, view=view[:elf.size], sycl=img)
        return _part(img, address, vendor, kind, arch, elf.size, size, native, meta)
    for sec in elf.sections:  # a host ELF: the IR it carries (an OpenCL ELF's "SPIRV Object")
        if sec.file_size >= 20 and M.image_magic(sec.view.bytes_at(0, 4)) == M.SPIRV:
            s0 = start + sec.sh_offset
            part = SyclPart(img, s0, sec.file_size, data[s0:s0 + sec.file_size])
            return _part(img, address.child(SectionStep(sec.name)), vendor_of(SPIRV, img.target), SPIRV, "",
                         sec.file_size, sec.file_size, part, meta)
    return None


def _archive(img: SyclImage, data: memoryview, address: Address, rep: ScanReport,
             meta: tuple[tuple[str, str], ...]) -> Iterator[Image]:
    """The device images among the members of the regular archive ``data`` (the scan's one walk over an
    archive's members: :func:`devbin.images.armembers.ar_members`; only a thin archive has members whose
    bytes are elsewhere, and one is not opened here: its magic is not :data:`devbin.formats.magic.AR`)."""
    for where, m, source in ar_members(rep, data, address):
        if not isinstance(source, memoryview):
            continue
        try:
            got = _member_image(img, data, m.offset, m.size, where, meta)
        except DeviceBinaryError as e:
            rep.warn(str(where), str(e))
            continue
        if got is not None:
            yield got


def inside_frame(image: Image) -> bool:
    """Whether ``image`` is a part of a decoded zstd frame (a member of its archive): it has no bytes of its
    own in the file, it shares the frame's (``devbin size``), as an entry of a compressed bundle does."""
    return image.container == CONTAINER and isinstance(image.native, BareElf | SyclPart) \
        and image.compression != "none"


def sycl_in_elf(rep: ScanReport, elf: ElfFile, frame: Frame, all: bool = False) -> Iterator[Hit]:
    """The images of the SYCL sections of a host ELF (module docstring); a bad image is a warning.
    ``all`` (the scan's scope flag) changes nothing here."""
    try:
        images = read_sycl_images(elf)
    except DeviceBinaryError as e:
        rep.warn(frame.where, str(e))
        return
    for img in images:
        address = frame.address.child(SectionStep(img.section), Entry(0, img.index))
        meta = _metadata(img)
        try:
            head = bytes(img.image_head(64))
            is_ar = M.detect(head) == M.AR
            if not is_ar:
                img.forget()  # a listing holds no decoded module; data() decodes it again
            if is_ar:
                data = memoryview(img.image_data(FC.DEFAULT_MAX))
                for image in _archive(img, data, address, rep, meta):
                    yield image, frame
                continue
            kind, arch = image_kind(head)
            if kind == HOST:
                kind = DATA
            yield Image(address=address, vendor=vendor_of(kind, img.target), kind=kind, arch=arch,
                        size=img.decoded_size, stored_size=len(img.stored), compression=img.compression,
                        container=CONTAINER, section=img.section, offset=img.offset, metadata=meta,
                        native=img), frame
        except DeviceBinaryError as e:
            rep.warn(str(address), str(e))


def module_name(image: Image) -> str:
    """The module ``image`` belongs to (module docstring): ``lib.so@__CLANG_OFFLOAD_BUNDLE__sycl-*[k1 k2]`` (the
    first three kernels, then how many more and a checksum of all); an image whose descriptor names no kernel
    (a device library's) is a module of its own, its SYCL image's address (``lib.so@<section>#0.3``)."""
    import zlib

    entries = next((v for k, v in image.metadata if k == "entries"), "")
    a = image.address
    at = next((i for i, st in enumerate(a.steps) if isinstance(st, SectionStep) and st.name.startswith(SECTION_PREFIX)),
              len(a.steps))
    base = f"{Address(a.path, a.steps[:at])}{SectionStep(SECTION_PREFIX)}*"
    names = entries.split()
    if not names:  # no kernels named (a device library's image): a module of its own, the image
        return str(Address(a.path, a.steps[:at + 2]))
    if len(names) <= 3:
        return f"{base}[{' '.join(names)}]"
    return f"{base}[{' '.join(names[:3])} +{len(names) - 3} {zlib.crc32(entries.encode()):08x}]"


def whole_image(image: Image) -> bool:
    """Whether ``image`` is a SYCL image itself (``#0.i``), not a part of the archive its frame decodes to:
    prune keeps it whatever is selected, since the wrapper's descriptor describes it and the runtime reads
    every descriptor (its members go, the image stays)."""
    return image.container == CONTAINER and image.address.entry is not None


def prune_sycl_section(elf: ElfFile, buf: Rewritable, sec: Section, at: Address,
                       dropped_under: Callable[[Address], bool]) -> tuple[int, list[tuple[int, int]]]:
    """Prune the SYCL section ``sec`` of the linked file ``elf`` (bytes ``buf``, written in place; ``at`` the
    section's address): in each image whose archive loses a member (``dropped_under`` an address below it),
    the members go (the vendor's :meth:`~devbin.targets.vendor.Vendor.prune_archive`), the archive is
    compressed again as it was, and the section is packed with every reference to its images moved
    (:func:`devbin.formats.sycl.prune.prune_section`).  The bytes the images shrank by and the file range of
    the freed tail; UsageError where the section cannot be rewritten."""
    from devbin.formats.ar.reader import ArchiveFile
    from devbin.formats.sycl.prune import compress_image, prune_section

    where = str(at)
    images = [i for i in read_sycl_images(elf) if i.section == sec.name]
    new: dict[int, tuple[bytes, int]] = {}
    for img in images:
        address = at.child(Entry(0, img.index))
        if not dropped_under(address):
            continue
        data = memoryview(img.image_data(FC.DEFAULT_MAX))
        rep = ScanReport()
        found = list(_archive(img, data, address, rep, ())) if M.detect(bytes(data[:8])) == M.AR else []
        owner = next((v for i in found if (v := vendor_named(i.vendor)) is not None), None)
        if rep.warnings or owner is None:
            raise UsageError(f"{address}: not an archive of device code prune can rewrite")
        ArchiveFile(data, where=str(address))  # the reader's checks first

        def keeps(name: str, n: int, base: Address = address) -> bool:
            return not dropped_under(base.child(Member(name, n)))

        pruned = owner.prune_archive(data, keeps, str(address))
        if pruned is None:
            raise UsageError(f"{address}: devbin cannot write {owner.title}'s archives")
        new[img.index] = (compress_image(pruned) if img.compressed else pruned, len(pruned))
        img.forget()
    got = prune_section(elf, buf, sec, images, new)
    if got.reason is not None:
        raise UsageError(f"{where}: cannot prune {sec.name}: {got.reason}")
    return got.freed, got.free
