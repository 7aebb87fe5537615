"""The registry of container formats: one entry per format devbin finds device images in.

Each :class:`ContainerFormat` says, for its format, everything the scan, ``prune``, ``select``,
``size`` and ``extract`` need to know, so that none of them names a container:

* **magic**: the names of :mod:`devbin.formats.magic` (the one table of magics) whose bytes open it;
* **walk**: its images in a file or member that starts with one of those magics (``walk``), and in the
  sections of a host ELF (``in_elf``; the sections it owns: ``sections``, ``section_prefix``,
  ``section_type``: the section names are its format's constants, defined once there);
* **an image's bytes**: the format object each image keeps (``Image.native``) gives them itself
  (:class:`devbin.images.record.NativeImage`: ``image_data``/``image_head``), so ``Image.data()`` is one
  call for every format;
* **pruning**: ``rewrite`` (the container written again with the kept entries), the alignment its
  containers are packed at (``bare_align`` back to back in a file, ``section_align`` in a section it
  owns), ``always_kept`` (entries that stay whatever is selected), and the constraints of a linked file
  (``host_wrappers``: host-side wrappers point at the containers, so they can be moved;
  ``gap_ends_walk``: a reader stops at zero bytes between containers); ``prune_section`` where the host
  side describes the images (SYCL's descriptors), so the format rewrites its sections itself;
* **size accounting**: ``entry_header`` (an entry's own header bytes), ``container_header`` (each
  container's fixed header), ``stored_bytes`` (what an entry stores, for digests), ``decoded_size`` (the
  entry records a size that decoding trims), ``shares_stored`` (entries that share the container's
  compressed bytes), ``measure`` (a container's size where it lies outside the sections the format owns);
* **selection**: ``blobs_one_module`` (containers back to back in one section are one module),
  ``module_name`` (the module an image belongs to, where the format groups its images otherwise);
* **extract**: ``extract_kinds`` (the kinds written by default) and ``extract_name`` (the file names the
  vendor tools give).

Formats that hold *files* rather than images (``ar`` archives, zip files, host ELF files) are entries
too, with only a magic and a walk; their images name the container they sit in.  Where devbin writes a
format, its writer is in the format's package (``devbin.formats.<format>.writer``), and
``pack_compressions`` says that ``devbin pack --format`` offers it.

Adding a container format is one entry in :data:`FORMATS` and its reader (``devbin.formats.<format>``,
its magic in :mod:`devbin.formats.magic`); docs/ARCHITECTURE.md, "Adding a container format".  Readers
and writers are imported when an entry's function is first called: a scan imports the readers of the
containers it meets, and no writer (tests/test_lean.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Protocol

from devbin.binary import Buffer, ByteView
from devbin.binary.mapped import Rewritable
from devbin.errors import DeviceBinaryError
from devbin.formats import magic as M
from devbin.formats import oclelf as OCL
from devbin.formats.bundle import constants as BC
from devbin.formats.fatbin import constants as FC
from devbin.formats.offload import constants as OC
from devbin.formats.sycl import constants as SYCL_C
from devbin.images.address import Address, Member
from devbin.images.frame import Frame, Hit
from devbin.images.record import CUBIN, FATBIN, FATBIN_CONTAINER, HOST, LTO_IR, PTX, BareElf, Image
from devbin.images.scanreport import ScanReport
from devbin.images.sniff import device_elf, image_kind, vendor_of
from devbin.targets.registry import vendor_named

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile, Section
    from devbin.formats.fatbin.reader import FatbinEntry
    from devbin.formats.offload.reader import OffloadEntry
    from devbin.formats.wrapped.reader import WrappedImage

__all__ = [
    "CONTAINERS", "FORMATS", "ContainerFormat", "Walker", "device_section", "extract_names",
    "extracted_by_default", "format_named", "format_of", "member_frame", "owner_of_section", "producer_metadata",
]


class Walker(Protocol):
    """What a format's walk may ask of the scan (:class:`devbin.images.scan.Scanner`)."""

    rep: ScanReport
    all: bool
    follow_thin_outside: bool
    on_member: Callable[[Frame], None] | None

    def buffer(self, data: Buffer, frame: Frame, *, depth: int = 0, disk: Path | None = None) -> Iterator[Hit]:
        """The images of ``data``, the bytes of the file ``frame`` names (any format: the registry's walk)."""
        ...

    def file(self, path: Path, frame: Frame, depth: int = 0, *, explicit: bool = False) -> Iterator[Hit]:
        """The images of the file at ``path``."""
        ...

    def walk_zip(self, fileobj: IO[bytes], whole: Buffer | None, frame: Frame, depth: int, *,
                 strict: bool = False) -> Iterator[Hit]:
        """The images in the members of a zip file."""
        ...


#: ``walk(scanner, view, frame, depth, disk)``: the images of a file or member starting with the format's magic.
Walk = Callable[[Walker, ByteView, Frame, int, "Path | None"], Iterator[Hit]]
#: ``in_elf(report, elf, frame, all)``: the images of the format's containers in a host ELF's sections.
ElfWalk = Callable[[ScanReport, "ElfFile", Frame, bool], Iterator[Hit]]
#: ``rewrite(view, keeps, where) -> (old size, new bytes)``: the container at offset 0 of ``view`` with the
#: entries ``keeps(index)`` refuses left out (``b""``: the container goes whole).
Rewrite = Callable[[ByteView, Callable[[int], bool], str], tuple[int, bytes]]
#: ``prune_section(elf, bytes, section, its address, dropped_under)``: a section whose images the host side
#: describes (so their format rewrites the section itself, in place in ``bytes``, references moved): the bytes
#: its images shrank by and the file ranges freed (zero now, to be cut out).
SectionPrune = Callable[["ElfFile", Rewritable, "Section", Address, Callable[[Address], bool]],
                        tuple[int, list[tuple[int, int]]]]
#: ``extract_name(image, names)``: the file name ``devbin extract`` gives the image.
ExtractName = Callable[[Image, "_Names"], str]


def _no_header(native: Any) -> int:
    return 0


def _never(image: Image) -> bool:
    return False


def _no_stored(native: Any) -> Buffer | None:
    return None


def _not_decoded(native: Any) -> bool:
    return False


def _no_pairs(native: Any) -> tuple[tuple[str, str], ...]:
    return ()


@dataclass(frozen=True, slots=True, eq=False)
class ContainerFormat:
    """One container format (the module docstring says what each field is for); compared by identity."""

    name: str
    description: str
    #: What a message calls one container ("OffloadBinary").
    label: str
    #: True: its images carry ``Image.container == name`` (:data:`CONTAINERS`); False: it holds files.
    holds_images: bool = True
    magics: tuple[str, ...] = ()
    #: Where formats share a magic (an ``ar`` archive of one vendor's device images is an ``ar`` archive),
    #: ``claims(first bytes)`` says whether these bytes are this format's; the first entry that claims them
    #: wins, an entry without ``claims`` takes what the others leave.
    claims: Callable[[ByteView], bool] | None = None
    walk: Walk | None = None
    #: Its walk makes its members' errors warnings itself; what escapes it (the memory budget) ends the scan.
    reports_own_errors: bool = False
    in_elf: ElfWalk | None = None
    #: ``in_elf`` runs in every host ELF (fatbins are also searched for in data sections), not only in
    #: one with a section the format owns.
    in_elf_always: bool = False
    #: The host-ELF sections that hold only its containers, back to back: by name, name prefix, ``sh_type``.
    sections: tuple[str, ...] = ()
    section_prefix: str = ""
    section_type: int | None = None
    #: A section whose name starts with this holds one image, the section itself (an object-type bundle).
    object_section_prefix: str = ""
    #: prune: containers back to back in a bare file are packed at ``bare_align``, in a section the format
    #: owns at ``section_align`` (None: pruned in place); ``rewrite`` writes one with the kept entries.
    bare_align: int = 1
    section_align: int | None = None
    rewrite: Rewrite | None = None
    #: prune of a linked file: the format rewrites the sections it owns itself (None: ``rewrite`` per container).
    prune_section: SectionPrune | None = None
    #: prune: an entry that stays whatever is selected.
    always_kept: Callable[[Image], bool] = _never
    #: prune of a linked file: host-side wrappers point at its containers (they can be moved with them).
    host_wrappers: bool = False
    #: prune in place: a reader stops at zero bytes between containers (a whole one cannot be dropped).
    gap_ends_walk: bool = False
    #: size: an entry's own header bytes (``Image.native`` given), each container's fixed header.
    entry_header: Callable[[Any], int] = _no_header
    container_header: int = 0
    #: size: ``measure(view, where)``, the size of the container at offset 0 of ``view``, for one found outside
    #: the sections a format owns (a fatbin in ``.rodata``), whose bytes ``size`` counts as device bytes too.
    measure: Callable[[ByteView, str], int] | None = None
    #: size: what an entry stores (for digests; None: its image's bytes).
    stored_bytes: Callable[[Any], Buffer | None] = _no_stored
    #: size: the entry records a size that decoding trims (the decoded image is measured).
    decoded_size: Callable[[Any], bool] = _not_decoded
    #: size: the entry shares its container's stored bytes (the container is compressed whole).
    shares_stored: Callable[[Image], bool] = _never
    #: The key/value pairs the producer stored with an entry (``Image.native`` given), in stored order.
    producer_pairs: Callable[[Any], tuple[tuple[str, str], ...]] = _no_pairs
    #: select: its containers back to back in one file or section are one module.
    blobs_one_module: bool = False
    #: select: the module an image of this format belongs to, where the format says (None: by its address).
    module_name: Callable[[Image], str] | None = None
    #: extract: the kinds written when nothing narrows the choice (None: every kind), and the file names.
    extract_kinds: frozenset[str] | None = None
    extract_name: ExtractName | None = None
    #: pack: the compressions ``devbin pack --format <name>`` writes it with (None: pack does not write it).
    pack_compressions: tuple[str, ...] | None = None

    def owns(self, sec: Section) -> bool:
        """Whether the host-ELF section ``sec`` holds this format's containers back to back."""
        name = sec.name
        return (name in self.sections or (bool(self.section_prefix) and name.startswith(self.section_prefix))
                or (self.section_type is not None and sec.sh_type == self.section_type))

    def owns_object_section(self, name: str) -> bool:
        """Whether the section ``name`` is one image of this format (``__CLANG_OFFLOAD_BUNDLE__<id>``)."""
        p = self.object_section_prefix
        return bool(p) and name.startswith(p) and len(name) > len(p)

    def footprint(self, image: Image) -> int:
        """The bytes ``image`` takes in its container, what dropping it frees: its entry header and its
        stored bytes (uncompressed for a compressed bundle)."""
        return (self.entry_header(image.native) if image.native is not None else 0) + image.stored_size


# --------------------------------------------------------------------------- walks


def member_frame(parent: Frame, name: str, seen: dict[str, int], origin: str) -> Frame:
    """The frame of archive/zip member ``name`` (``;N`` for the N-th of that name:
    :func:`devbin.formats.ar.member_number`)."""
    from devbin.formats.ar.reader import member_number
    return Frame(parent.address.child(Member(name, member_number(seen, name))), origin)


def _walk_zip(s: Walker, view: ByteView, frame: Frame, depth: int, disk: Path | None) -> Iterator[Hit]:
    import io
    whole = view.bytes_at(0, len(view))
    yield from s.walk_zip(io.BytesIO(whole), whole, frame, depth)


def _walk_ar(s: Walker, view: ByteView, frame: Frame, depth: int, disk: Path | None) -> Iterator[Hit]:
    """Every member of an ``ar`` archive (regular, BSD, thin: :func:`devbin.images.armembers.ar_members`),
    recursively; thin members from disk only inside the archive's folder (``follow_thin_outside`` lifts that)."""
    from devbin.images.armembers import ar_members
    rep = s.rep
    for at, _m, source in ar_members(rep, view, frame.address, disk, outside=s.follow_thin_outside):
        sub = Frame(at, AR.name)
        rep.members += 1
        if s.on_member is not None:
            s.on_member(sub)
        if isinstance(source, Path):
            try:
                yield from s.file(source, sub, depth=depth + 1)
            except OSError as e:
                rep.warn(sub.where, f"cannot read thin member {str(source)!r}: {e}")
        elif source is not None:
            yield from s.buffer(source, sub, depth=depth + 1)


def _walk_elf(s: Walker, view: ByteView, frame: Frame, depth: int, disk: Path | None) -> Iterator[Hit]:
    """A bare device ELF (one image, container ``file``), or a host ELF: the images of every format's
    containers in its sections (each format's ``in_elf``, in registry order, where it has a section)."""
    from devbin.formats.elf.reader import ElfFile
    where = frame.where
    rep = s.rep
    elf = ElfFile(ByteView(view, where=where), where=where, diag=lambda e: rep.warn(where, str(e)))
    h = elf.header
    vendor, kind, arch = device_elf(h.e_machine, h.e_flags, h.ei_osabi, h.ei_abiversion)
    if vendor:
        owner = vendor_named(vendor)
        if not arch and owner is not None:  # the header does not name it (a zebin's notes do)
            arch = owner.arch_from_elf(elf)
        native = BareElf(machine=h.e_machine, e_type=h.e_type, e_flags=h.e_flags, osabi=h.ei_osabi,
                         abi_version=h.ei_abiversion, size=elf.size, view=elf.view.bytes_at(0, elf.size))
        yield Image(address=frame.address, vendor=vendor, kind=kind, arch=arch, size=elf.size, stored_size=elf.size,
                    compression="none", container=BARE.name, section="", offset=0, native=native), frame
        return
    needed = _elf_walks(elf)
    done: list[ElfWalk] = []
    for fmt in FORMATS:
        walk = fmt.in_elf
        if walk is None or walk in done or walk not in needed:
            continue
        done.append(walk)
        try:
            yield from walk(rep, elf, frame, s.all)
        except DeviceBinaryError as e:
            rep.warn(where, str(e))


def _elf_walks(elf: ElfFile) -> list[ElfWalk]:
    """The ``in_elf`` walks a host ELF needs: those that always run, and those of the formats that own one
    of its sections (one pass over the section table; the readers are imported only for these)."""
    walks = [(f, f.in_elf) for f in FORMATS if f.in_elf is not None]
    needed = [w for f, w in walks if f.in_elf_always]
    rest = [(f, w) for f, w in walks if w not in needed]
    for sec in elf.sections:
        if not rest:
            break
        hit = next((w for f, w in rest if f.owns(sec) or f.owns_object_section(sec.name)), None)
        if hit is not None:
            needed.append(hit)
            rest = [(f, w) for f, w in rest if w is not hit]
    return needed


def _walk_wrapped(s: Walker, view: ByteView, frame: Frame, depth: int, disk: Path | None) -> Iterator[Hit]:
    """A devbin wrapped image: its image, reported with the wrapper's metadata and addressed as the file
    (the wrapper holds one image); a container inside is opened, its steps right after the file's."""
    from devbin.formats.wrapped.reader import parse_wrapped
    w = parse_wrapped(view, where=frame.where)
    inner = format_of(bytes(w.image[:M.SNIFF]))
    kind, elf_arch = image_kind(w.image, ptx=(w.get("ImageKind") or "").lower() == PTX)
    address = frame.address  # one image: the wrapper is no step of its own
    if (inner is not None and inner is not ELF) or kind == HOST:
        yield from s.buffer(w.image, Frame(address, WRAPPED.name), depth=depth + 1)
        return
    triple = w.get("Triple") or ""
    image = Image(address=address, vendor=vendor_of(kind, triple), kind=kind, arch=w.get("TargetID") or elf_arch,
                  size=len(w.image), stored_size=len(w.image), compression="none", container=WRAPPED.name,
                  section="", offset=0, metadata=w.metadata, native=w)
    yield image, frame


def _walk_fatbins(s: Walker, view: ByteView, frame: Frame, depth: int, disk: Path | None) -> Iterator[Hit]:
    from devbin.images.hostelf import fatbin_images, walk_fatbins
    where = frame.where
    for index, offset, fb in walk_fatbins(ByteView(view, fmt="fatbin", where=where), s.rep, where, where):
        yield from fatbin_images(fb, frame, "", index, offset, None)


def _fatbins_in_elf(rep: ScanReport, elf: ElfFile, frame: Frame, all: bool) -> Iterator[Hit]:
    from devbin.images.hostelf import HostElf
    return HostElf(rep, elf, frame).scan(all=all)


def _walk_offload(s: Walker, view: ByteView, frame: Frame, depth: int, disk: Path | None) -> Iterator[Hit]:
    from devbin.images.llvm import offload_images
    return offload_images(view, s.rep, frame, "", 0)


def _walk_bundles(s: Walker, view: ByteView, frame: Frame, depth: int, disk: Path | None) -> Iterator[Hit]:
    from devbin.images.llvm import bundle_images
    return bundle_images(view, s.rep, frame, "", 0)


def _sycl_in_elf(rep: ScanReport, elf: ElfFile, frame: Frame, all: bool) -> Iterator[Hit]:
    from devbin.images.sycl import sycl_in_elf
    return sycl_in_elf(rep, elf, frame, all)


def _inside_sycl_frame(image: Image) -> bool:
    """A member of the archive a SYCL image's zstd frame decodes to: it shares the frame's stored bytes."""
    from devbin.images.sycl import inside_frame
    return inside_frame(image)


def _oclelf_in_elf(rep: ScanReport, elf: ElfFile, frame: Frame, all: bool) -> Iterator[Hit]:
    from devbin.images.oclelf import oclelf_in_elf
    return oclelf_in_elf(rep, elf, frame, all)


def _prune_sycl(elf: ElfFile, buf: Rewritable, sec: Section, at: Address,
                dropped_under: Callable[[Address], bool]) -> tuple[int, list[tuple[int, int]]]:
    from devbin.images.sycl import prune_sycl_section
    return prune_sycl_section(elf, buf, sec, at, dropped_under)


def _whole_sycl_image(image: Image) -> bool:
    from devbin.images.sycl import whole_image
    return whole_image(image)


def _llvm_in_elf(rep: ScanReport, elf: ElfFile, frame: Frame, all: bool) -> Iterator[Hit]:
    from devbin.images.llvm import llvm_in_elf  # OffloadBinaries and bundles, in one pass in section order
    return llvm_in_elf(rep, elf, frame)


# --------------------------------------------------------------------------- rewriters (prune)


def _rewrite_fatbin(view: ByteView, keeps: Callable[[int], bool], where: str) -> tuple[int, bytes]:
    from devbin.formats.fatbin.prune import prune_fatbin
    return prune_fatbin(view, keeps, where)


def _rewrite_offload(view: ByteView, keeps: Callable[[int], bool], where: str) -> tuple[int, bytes]:
    from devbin.formats.offload.prune import prune_offload_binary
    return prune_offload_binary(view, keeps, where)


def _rewrite_bundle(view: ByteView, keeps: Callable[[int], bool], where: str) -> tuple[int, bytes]:
    from devbin.formats.bundle.prune import prune_bundle
    return prune_bundle(view, keeps, where)


# --------------------------------------------------------------------------- size accounting


def _fatbin_entry_header(native: FatbinEntry) -> int:
    return native.header_size


def _fatbin_size(view: ByteView, where: str) -> int:
    from devbin.formats.fatbin.reader import parse_fatbin
    return parse_fatbin(view, where=where).size


def _fatbin_stored(native: FatbinEntry) -> Buffer | None:
    return native.payload_area


def _fatbin_decoded_size(native: FatbinEntry) -> bool:
    """A compressed entry's header records the decoded size; what extract writes is trimmed (PTX: at its NUL)."""
    return native.is_compressed and not native.is_opaque


def _offload_strings(native: OffloadEntry) -> tuple[tuple[str, str], ...]:
    return native.strings


def _wrapped_pairs(native: WrappedImage) -> tuple[tuple[str, str], ...]:
    return native.metadata


def _compressed_whole(image: Image) -> bool:
    """An entry of a compressed bundle: the bundle is compressed as a whole, its entries have no bytes of
    their own in the file."""
    return image.compression not in ("none", "")


def _sycl_pairs(native: Any) -> tuple[tuple[str, str], ...]:
    from devbin.images.sycl import producer_pairs
    return producer_pairs(native)


def _sycl_module(image: Image) -> str:
    from devbin.images.sycl import module_name
    return module_name(image)


def _bundle_host_entry(image: Image) -> bool:
    """A bundle's host entry stays whatever is selected (clang-offload-bundler needs one)."""
    return image.get("offload-kind") == HOST


# --------------------------------------------------------------------------- extract's file names


def _clean(text: str, keep: str = "._+-") -> str:
    """``text`` with every character but ASCII letters, digits and ``keep`` replaced by ``_``."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in keep else "_" for c in text)


def _stem(name: str) -> str:
    """A file name without its folders and last extension."""
    return os.path.splitext(os.path.basename(name))[0]


#: The extension of an extracted image by its kind (``bin`` for any other).
_EXT: Final = {"amdgpu": "o", "host": "o", "cubin": "cubin", "ptx": "ptx", "bitcode": "bc", "fatbin": "fatbin",
               "spirv": "spv", "zebin": "zebin"}
#: An OffloadBinary image's extension by its image kind, as ``llvm-objdump --offloading`` names them.
_OFFLOAD_EXT: Final = {"object": "o", "bitcode": "bc", "cubin": "cubin", "fatbinary": "fatbin", "ptx": "s"}


class _Names:
    """The naming state of one extract: the numbered unit (an archive counts as one file) and its counters."""

    def __init__(self) -> None:
        self.counters: dict[tuple[str, str], int] = {}
        self.unit = ""
        self.stem = ""  # the unit's stem
        self.file_stem = ""  # the innermost file's stem

    def count(self, key: str) -> int:
        """The next number of ``key`` in this unit, from 1."""
        k = (self.unit, key)
        self.counters[k] = n = self.counters.get(k, 0) + 1
        return n

    def target(self, image: Image) -> str:
        return _clean((image.arch or image.triple or "none").replace(":", "_"))


def _single_name(image: Image, names: _Names) -> str:
    """One image of its file (a wrapped image, a bare code object): named after the file."""
    return f"{names.file_stem}.{names.target(image)}.{_EXT.get(image.kind, 'bin')}"


def _bare_name(image: Image, names: _Names) -> str:
    """A bare code object: named after its file; cuobjdump numbers a bare cubin among the unit's ELF files
    (a fatbin's vendor's code objects count)."""
    if image.vendor and image.vendor == vendor_of(FATBIN):
        names.count("elf")
        return f"{names.file_stem}.{image.arch}.cubin"
    return _single_name(image, names)


def _fatbin_name(image: Image, names: _Names) -> str:
    """cuobjdump's ``-xelf``/``-xptx`` name (:func:`devbin.formats.fatbin.extract_name`), numbered per kind
    (ELF, PTX, LTO-IR) through the unit."""
    from devbin.formats.fatbin import extract_name
    n = names.count(image.kind if image.kind in (PTX, LTO_IR) else "elf")
    entry = image.entry
    if entry is None:
        return f"{names.file_stem}.{image.arch}.cubin"
    return extract_name(entry, names.stem, n)


def _offload_name(image: Image, names: _Names) -> str:
    """``<stem>-<triple>-<arch>.<n>.<ext>``, as ``clang-offload-packager``/``llvm-objdump --offloading`` do."""
    n = names.count("offload") - 1
    base = f"{names.stem}-{_clean(image.triple)}-{_clean(image.arch, '._+-:')}"
    return f"{base}.{n}.{_OFFLOAD_EXT.get(image.get('image-kind'), 'bin')}"


def _sycl_name(image: Image, names: _Names) -> str:
    """``<stem>.<n>.<arch or target>.<ext>`` (``zebin``, ``spv``), numbered through the file."""
    n = names.count("sycl")
    ext = _EXT.get(image.kind, "bin")
    return f"{names.stem}.{n}.{_clean(image.arch or image.get('target') or 'none')}.{ext}"


def _bundle_name(image: Image, names: _Names) -> str:
    """``<stem>.<n>.<target id>.<ext>`` (clang-offload-bundler -unbundle takes the names as given)."""
    n = names.count("bundle")
    return f"{names.stem}.{n}.{names.target(image)}.{_EXT.get(image.kind, 'bin')}"


def _unit(frame: Frame) -> tuple[str, str]:
    """The file whose images are numbered together (an archive, not its member): its address and its own name."""
    a = frame.address
    steps = a.steps[:-1] if frame.origin == AR.name else a.steps
    name = next((s.name for s in reversed(steps) if isinstance(s, Member)), a.path)
    return str(Address(a.path, steps)), name


def _file_name(frame: Frame) -> str:
    """The innermost file's own name: the member's for a member."""
    member = frame.address.member
    return member.name if member is not None else frame.address.path


def extract_names(hits: Sequence[Hit]) -> list[str]:
    """The file name ``devbin extract`` gives each image: the vendor tools' names, numbered per container
    format (and per kind for fatbins) through each file (an archive counts as one)."""
    names = _Names()
    out: list[str] = []
    for image, frame in hits:
        names.unit, unit_name = _unit(frame)
        names.stem, names.file_stem = _stem(unit_name), _stem(_file_name(frame))
        fmt = format_named(image.container)
        namer = fmt.extract_name if fmt is not None and fmt.extract_name is not None else _single_name
        out.append(namer(image, names))
    return out


def extracted_by_default(image: Image) -> bool:
    """Whether ``devbin extract`` writes ``image`` when no --kind/--arch narrows it: a fatbin's cubins and
    PTX (as cuobjdump), every other container's images."""
    fmt = format_named(image.container)
    return fmt is None or fmt.extract_kinds is None or image.kind in fmt.extract_kinds


# --------------------------------------------------------------------------- the registry

#: A bare image: the whole file, archive or zip member (a device ELF today; found by the ELF walk).
BARE: Final = ContainerFormat("file", "a bare image: the whole file (or archive/zip member)", "bare image",
                              extract_name=_bare_name)

FATBIN_FORMAT: Final = ContainerFormat(
    FATBIN_CONTAINER, "an entry of a CUDA fatbin", "fatbin",
    magics=(M.CUDA_FATBIN,), walk=_walk_fatbins, in_elf=_fatbins_in_elf, in_elf_always=True, sections=FC.SECTIONS,
    bare_align=8, section_align=8, rewrite=_rewrite_fatbin, host_wrappers=True,
    entry_header=_fatbin_entry_header, container_header=FC.FATBIN_HEADER_SIZE, stored_bytes=_fatbin_stored,
    decoded_size=_fatbin_decoded_size, measure=_fatbin_size,
    extract_kinds=frozenset((CUBIN, PTX)), extract_name=_fatbin_name,
    pack_compressions=("none", "zstd", "lz4"))

OFFLOAD: Final = ContainerFormat(
    "offload", "an entry of an LLVM OffloadBinary", "OffloadBinary",
    magics=(M.OFFLOAD_BINARY,), walk=_walk_offload, in_elf=_llvm_in_elf, section_prefix=OC.SECTION_NAME,
    section_type=OC.SHT_LLVM_OFFLOADING,
    bare_align=8, section_align=8, rewrite=_rewrite_offload, gap_ends_walk=True,
    producer_pairs=_offload_strings, blobs_one_module=True,
    extract_name=_offload_name,
    pack_compressions=("none",))

#: SYCL host binaries of the old offload model (devbin.formats.sycl, devbin.images.sycl): before BUNDLE, whose
#: object-section prefix also matches these sections' names (the first format owning a section brings its walk).
SYCL: Final = ContainerFormat(
    "sycl", "an image of a SYCL host binary's offload wrapper (old offload model), or a member of the archive one "
    "decodes to", "SYCL image",
    in_elf=_sycl_in_elf, section_prefix=SYCL_C.SECTION_PREFIX, shares_stored=_inside_sycl_frame,
    prune_section=_prune_sycl, always_kept=_whole_sycl_image,
    extract_name=_sycl_name, module_name=_sycl_module, producer_pairs=_sycl_pairs)

#: The SPIR-V of an OpenCL ELF (devbin.formats.oclelf, devbin.images.oclelf): an ocloc fat archive's generic_ir.
OCLELF: Final = ContainerFormat(
    "oclelf", "the SPIR-V module of an OpenCL ELF (an ocloc fat archive's generic_ir)", "OpenCL ELF",
    in_elf=_oclelf_in_elf, section_type=OCL.SHT_OPENCL_SPIRV, extract_name=_single_name)

BUNDLE: Final = ContainerFormat(
    "bundle", "an entry of a clang offload bundle (plain or compressed)", "offload bundle",
    magics=(M.OFFLOAD_BUNDLE, M.OFFLOAD_BUNDLE_COMPRESSED), walk=_walk_bundles, in_elf=_llvm_in_elf,
    sections=(BC.HIP_FATBIN_SECTION,), object_section_prefix=BC.SECTION_PREFIX,
    bare_align=1, section_align=BC.HIP_FATBIN_ALIGN, rewrite=_rewrite_bundle, always_kept=_bundle_host_entry,
    host_wrappers=True,
    shares_stored=_compressed_whole,
    extract_name=_bundle_name,
    pack_compressions=("none", "zstd", "zlib"))

WRAPPED: Final = ContainerFormat(
    "wrapped", "the image of a devbin wrapped image", "wrapped image",
    magics=(M.WRAPPED,), walk=_walk_wrapped, producer_pairs=_wrapped_pairs,
    extract_name=_single_name,
    pack_compressions=("none",))

ELF: Final = ContainerFormat("elf", "an ELF file: a bare device code object, or a host file with device sections",
                             "ELF file", holds_images=False, magics=(M.ELF,), walk=_walk_elf)
AR: Final = ContainerFormat("ar", "an ar archive (GNU/SysV, BSD, thin): its members", "ar archive", holds_images=False,
                            magics=(M.AR, M.AR_THIN), walk=_walk_ar)
ZIP: Final = ContainerFormat("zip", "a zip file (wheel, egg): its members", "zip file", holds_images=False,
                             magics=(M.ZIP, M.ZIP_EMPTY), walk=_walk_zip, reports_own_errors=True)

#: Every container format, in the order a host ELF's sections are walked (NVIDIA's fatbins first, as
#: cuobjdump reads them, then LLVM's containers).
FORMATS: Final[tuple[ContainerFormat, ...]] = (BARE, FATBIN_FORMAT, OFFLOAD, SYCL, OCLELF, BUNDLE, WRAPPED, ELF, AR,
                                               ZIP)

#: ``Image.container``: the format holding the image, with what it means.
CONTAINERS: Final[dict[str, str]] = {f.name: f.description for f in FORMATS if f.holds_images}

_BY_NAME: Final = {f.name: f for f in FORMATS}
_BY_MAGIC: Final[dict[str, tuple[ContainerFormat, ...]]] = {
    m: tuple(sorted((f for f in FORMATS if m in f.magics), key=lambda f: f.claims is None))
    for m in {m for f in FORMATS for m in f.magics}}


def format_named(container: str) -> ContainerFormat | None:
    """The format of ``Image.container`` (or of a holder's name), or None."""
    return _BY_NAME.get(container)


def format_of(data: Buffer | ByteView) -> ContainerFormat | None:
    """The format whose magic the first bytes are (a file format, a zip, or an image magic an entry takes:
    a bare image), when the scan opens it, else None."""
    magic = M.detect(data)
    if magic == M.UNKNOWN:
        magic = M.ZIP if M.is_zip(data) else M.image_magic(data)
    candidates = _BY_MAGIC.get(magic, ())
    if len(candidates) > 1:
        view = data if isinstance(data, ByteView) else ByteView(data)
        return next((f for f in candidates if f.claims is None or f.claims(view)), None)
    return candidates[0] if candidates else None


def producer_metadata(image: Image) -> tuple[tuple[str, str], ...]:
    """The key/value pairs the producer stored with ``image`` (an OffloadBinary entry's string map, a
    wrapped image's metadata; what a plugin's debug log prints), in stored order; () for other images."""
    fmt = format_named(image.container)
    return fmt.producer_pairs(image.native) if fmt is not None and image.native is not None else ()


def owner_of_section(sec: Section) -> ContainerFormat | None:
    """The format whose containers the host-ELF section ``sec`` holds back to back, or None."""
    return next((f for f in FORMATS if f.owns(sec)), None)


def device_section(sec: Section) -> bool:
    """Whether ``sec`` holds only device code and its containers (``size`` counts its bytes)."""
    return any(f.owns(sec) or f.owns_object_section(sec.name) for f in FORMATS)
