"""Read view of LLVM OffloadBinary blobs (``llvm-amdgpu-formats.md`` §1).

On-disk layout (little-endian; every offset is absolute within the blob)::

    header, 32 bytes
      +0x00 magic 10 FF 10 AD        +0x04 u32 version (1 or 2)
      +0x08 u64 size: bytes of this blob, padded to 8
      +0x10 u64 entries offset (32 as written)
      +0x18 u64 v1: size of the one entry (40); v2: number of entries
    entries, 40 bytes each
      +0x00 u16 image kind   +0x02 u16 offload kind   +0x04 u32 flags
      +0x08 u64 string entries offset   +0x10 u64 number of string entries
      +0x18 u64 image offset            +0x20 u64 image size
    string entries: v1 16 bytes (u64 key offset, u64 value offset),
                    v2 24 bytes (the same and a u64 value size: values may be any bytes)
    string table: NUL-terminated strings, suffix-merged (LLVM's StringTableBuilder)
    images

A version 1 blob always holds exactly one entry (the field at +0x18 is its
size, kept raw and not trusted); a version 2 blob holds ``count`` entries.
Several blobs lie back to back in a ``.llvm.offloading`` section (the linker
concatenates the sections of many objects), each starting 8-aligned:
:func:`iter_offload_binaries` walks them by ``size``.

Every table and every string and image range is checked against the blob's
``size`` before anything is read; strings that are not valid UTF-8 are kept
as ``\\xNN`` escapes.  Offload kinds are kept raw: see
:mod:`devbin.formats.offload.constants` for the two numberings LLVM used.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from devbin.binary import ByteView, align_up, format_view, join_where
from devbin.errors import FormatError, NotThisFormat, TruncatedError, UnsupportedVersion
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.offload import constants as C

__all__ = [
    "OffloadBinary",
    "OffloadEntry",
    "find_in_elf",
    "is_offload_binary",
    "iter_offload_binaries",
    "parse_offload_binary",
]

_FMT = "offload"
_ENTRY_FMT = "HHIQQQQ"


@dataclass(frozen=True)
class OffloadEntry:
    """One image of an OffloadBinary: the raw entry fields, its string map and a window on the image."""

    index: int
    offset: int  # absolute offset of the 40-byte entry
    version: int  # the version of the blob it came from (decides the numbering hint)
    image_kind: int
    offload_kind: int
    flags: int
    string_offset: int  # offsets are relative to the blob, as stored
    num_strings: int
    image_offset: int
    image_size: int
    strings: tuple[tuple[str, str], ...]  # in stored order
    image: memoryview = field(repr=False, compare=False)
    where: str = field(default="", repr=False, compare=False)

    def image_data(self, max_size: int, size: int) -> memoryview:
        """The image's bytes (:meth:`devbin.images.Image.data`): a window on the blob, never a copy."""
        return self.image

    def image_head(self, n: int, size: int) -> memoryview:
        return self.image[:n]

    @property
    def string_map(self) -> dict[str, str]:
        """The strings as a dict (a later duplicate key wins, as a map lookup in LLVM finds one)."""
        return dict(self.strings)

    def get(self, key: str, default: str = "") -> str:
        for k, v in self.strings:
            if k == key:
                return v
        return default

    @property
    def triple(self) -> str:
        return self.get("triple")

    @property
    def arch(self) -> str:
        return self.get("arch")

    @property
    def image_kind_name(self) -> str:
        return C.image_kind_name(self.image_kind)

    @property
    def objdump_kind(self) -> str:
        """The ``kind`` line ``llvm-objdump --offloading`` prints."""
        return C.objdump_image_kind(self.image_kind)

    @property
    def numbering(self) -> str:
        """Which offload-kind numbering the value most likely uses (:func:`constants.offload_numbering`)."""
        return C.offload_numbering(self.version, self.offload_kind)

    @property
    def producer_legacy(self) -> str:
        """The offload kind's name in LLVM <= 20's numbering (what ``llvm-objdump-19`` prints)."""
        return C.offload_kind_name(self.offload_kind, C.NUMBERING_LEGACY)

    @property
    def producer_mask(self) -> str:
        """The offload kind's name in LLVM 21+'s numbering (what ``llvm-objdump-22`` prints)."""
        return C.offload_kind_name(self.offload_kind, C.NUMBERING_MASK)

    @property
    def producer(self) -> str:
        """The name under the numbering :attr:`numbering` picks (``none`` when neither names it)."""
        return C.offload_kind_name(self.offload_kind, self.numbering)

    @property
    def is_metadata_only(self) -> bool:
        return bool(self.flags & C.FLAG_METADATA)

    @property
    def image_bytes(self) -> bytes:
        return self.image.tobytes()


@dataclass(frozen=True)
class OffloadBinary:
    """One blob: the 32-byte header and its entries (one for version 1)."""

    offset: int  # offset in the view it was read from
    version: int
    size: int
    entries_offset: int
    entry_field: int  # the raw u64 at +0x18: v1 entry size, v2 entry count
    entries: tuple[OffloadEntry, ...]




def _text(raw: memoryview) -> str:
    return bytes(raw).decode("utf-8", "backslashreplace")


def parse_offload_binary(view: ByteView | bytes | bytearray | memoryview, *, where: str = "") -> OffloadBinary:
    """Parse the OffloadBinary at offset 0 of ``view`` (bytes after its ``size`` are ignored).

    Raises :class:`NotThisFormat` for a wrong magic, :class:`UnsupportedVersion`
    for a version above 2, :class:`TruncatedError`/:class:`FormatError` for
    sizes, counts and offsets that do not fit in the blob.
    """
    v = format_view(view, _FMT, where)
    where = v.where
    if not v.startswith(C.MAGIC):
        got = v.u32(0) if len(v) >= 4 else None
        raise v.error("not an OffloadBinary (bad magic)", 0, got, cls=NotThisFormat)
    version, size, entries_offset, entry_field = v.unpack("IQQQ", 4, "OffloadBinary header")
    if version == 0:
        raise v.error("OffloadBinary version 0 is invalid", 4, version)
    if version > C.MAX_VERSION:
        raise v.error("unsupported OffloadBinary version", 4, version, cls=UnsupportedVersion)
    if size < C.HEADER_SIZE:
        raise v.error(f"size below the {C.HEADER_SIZE}-byte header", 8, size)
    if size > len(v):
        raise v.error(f"size runs past the end of the data ({v.base + len(v):#x})", 8, size, cls=TruncatedError)
    bv = v.sub(0, size, where=where)
    count = 1 if version == C.VERSION_1 else entry_field
    bv.check_count(count, C.ENTRY_SIZE, entries_offset, "entries")
    str_size = C.STRING_ENTRY_SIZE_V1 if version == C.VERSION_1 else C.STRING_ENTRY_SIZE_V2
    # First pass: every entry's tables and image are checked before anything is read from them.
    raw: list[tuple[int, ...]] = []
    for i in range(count):
        at = entries_offset + i * C.ENTRY_SIZE
        rec = bv.unpack(_ENTRY_FMT, at, "entry")
        loc = join_where(where, f"offload[{i}]")
        _img_kind, _ofk, _flags, str_off, num_strings, img_off, img_size = rec
        if str_off > size or num_strings > (size - str_off) // str_size:
            raise bv.error("string entries run past the end of the binary", at + 8, str_off,
                           cls=TruncatedError, where=loc)
        if img_off > size or img_size > size - img_off:
            raise bv.error("image runs past the end of the binary", at + 24, img_off, cls=TruncatedError, where=loc)
        raw.append(rec)
    entries = [_read_entry(bv, i, entries_offset + i * C.ENTRY_SIZE, rec, version, where)
               for i, rec in enumerate(raw)]
    return OffloadBinary(offset=0, version=version, size=size, entries_offset=entries_offset,
                         entry_field=entry_field, entries=tuple(entries))


def _read_entry(bv: ByteView, index: int, at: int, rec: tuple[int, ...], version: int, where: str) -> OffloadEntry:
    img_kind, ofk, flags, str_off, num_strings, img_off, img_size = rec
    loc = join_where(where, f"offload[{index}]")
    strings: list[tuple[str, str]] = []
    if version == C.VERSION_1:
        for key_off, val_off in bv.iter_unpack("QQ", str_off, num_strings, "string entries"):
            strings.append((_cstr(bv, key_off, loc, "key"), _cstr(bv, val_off, loc, "value")))
    else:
        for key_off, val_off, val_size in bv.iter_unpack("QQQ", str_off, num_strings, "string entries"):
            if val_off > len(bv) or val_size > len(bv) - val_off:
                raise bv.error("string value runs past the end of the binary", val_off, val_size,
                               cls=TruncatedError, where=loc)
            strings.append((_cstr(bv, key_off, loc, "key"), _text(bv.bytes_at(val_off, val_size, "value"))))
    arch = next((val for key, val in strings if key == "arch"), "")
    if arch:
        loc = f"{loc} {arch}"
    return OffloadEntry(
        index=index, offset=bv.base + at, version=version, image_kind=img_kind, offload_kind=ofk, flags=flags,
        string_offset=str_off, num_strings=num_strings, image_offset=img_off, image_size=img_size,
        strings=tuple(strings), image=bv.bytes_at(img_off, img_size, "image"), where=loc,
    )


def _cstr(bv: ByteView, offset: int, loc: str, what: str) -> str:
    if offset >= len(bv):
        raise bv.error(f"{what} string offset outside the binary", None, offset, where=loc)
    end = bv.find(b"\0", offset)
    if end < 0:
        raise bv.error(f"{what} string is not NUL-terminated", offset, cls=TruncatedError, where=loc)
    return _text(bv.bytes_at(offset, end - offset, what))


def iter_offload_binaries(
    view: ByteView | bytes | bytearray | memoryview, *, where: str = ""
) -> Iterator[OffloadBinary]:
    """OffloadBinaries stored back to back (a ``.llvm.offloading`` section), each 8-aligned.

    Walks ``size`` from one blob to the next (rounded up to 8) and stops
    cleanly at the end or where only zero bytes remain (section padding).
    ``OffloadBinary.offset`` is the offset in ``view``; entry offsets are absolute.
    """
    v = format_view(view, _FMT, where)
    pos = 0
    index = 0
    n = len(v)
    while pos < n:
        if v.is_zero_from(pos):
            return
        sub = v.sub(pos, n - pos, where=join_where(v.where, f"offload #{index}"))
        ob = parse_offload_binary(sub)
        yield OffloadBinary(offset=pos, version=ob.version, size=ob.size, entries_offset=ob.entries_offset,
                            entry_field=ob.entry_field, entries=ob.entries)
        pos = align_up(pos + ob.size, C.ALIGNMENT)
        index += 1



def is_offload_binary(view: ByteView | bytes | bytearray | memoryview) -> bool:
    """True when ``view`` starts with a complete, valid OffloadBinary."""
    try:
        parse_offload_binary(view)
    except FormatError:
        return False
    return True


def offloading_sections(elf: ElfFile) -> list[Section]:
    """The sections that hold OffloadBinaries: ``SHT_LLVM_OFFLOADING`` or named ``.llvm.offloading*``.

    ELF host objects use the type (clang sets it, with ``SHF_EXCLUDE`` and
    alignment 8); the name prefix is what LLVM matches in COFF, and catches
    sections written by tools that do not set the type.
    """
    return [s for s in elf.sections
            if s.sh_type == C.SHT_LLVM_OFFLOADING or s.name.startswith(C.SECTION_NAME)]


def find_in_elf(elf: ElfFile) -> list[OffloadBinary]:
    """Every OffloadBinary in the ``.llvm.offloading`` sections of a host object, in file order.

    Offsets (``OffloadBinary.offset``) are relative to their section; entry
    offsets are absolute in the file.  A corrupt blob raises, located at its section.
    """
    found: list[OffloadBinary] = []
    for sec in offloading_sections(elf):
        v = sec.view
        found.extend(iter_offload_binaries(ByteView(v, fmt=_FMT, where=join_where(elf.where, sec.where), base=v.base)))
    return found

