"""The device images of a SYCL host binary (old offload model) and what the wrapper says of each.

On-disk layout (intel/llvm ``clang/tools/clang-offload-wrapper/ClangOffloadWrapper.cpp``; the runtime's
mirror ``sycl/source/detail/compiler.hpp``; :mod:`devbin.formats.sycl.constants` gives the structs):

* a section ``__CLANG_OFFLOAD_BUNDLE__sycl-<target>`` per target holds the images, one data object each,
  16-byte aligned, zero bytes between them: **no header** of its own.  A compressed image (driver option
  ``--offload-compress``; intel/llvm ``clang/test/Driver/sycl-offload-wrapper-compression.cpp``) is one
  bare zstd frame whose header records the content size (the runtime refuses a frame without it:
  ``sycl/source/detail/compression.hpp``); an image under the wrapper's compression threshold is stored
  as is.  ``zstd -d`` on a whole section stops after the first frame, at the padding.
* ``.tgtimg``: one {address, size} record per image, there so that tools find the images after linking
  (the wrapper's comment).  The size is the *decompressed* one for a compressed image.
* the image descriptors (version 2: 96 bytes with a manifest pair; version 3: 80 bytes without),
  pointed at by a binary descriptor that ``__sycl_register_lib`` receives from ``.init_array``: target
  (``spir64_gen`` for Intel GPU code compiled ahead of time, ``spir64`` for SPIR-V compiled at run time),
  compile and link options, the image's start and end (its stored length), its offload entries (kernel
  names) and its property sets.  In a linked library every pointer field is an ``R_X86_64_RELATIVE``
  relocation whose addend is the target; the stored value is used where there is none.

How images are found: every ``.tgtimg`` record's address that lies in a SYCL section is an image start;
the descriptor is the one whose ImageStart field points at it (version 2 at +48, version 3 at +32,
checked by the version word); its ImageEnd gives the stored length.  An image no descriptor describes
ends where the next one (or the section) starts; a section no ``.tgtimg`` record points into (an
unlinked object, a stripped table) is walked: zstd frames measured by decoding them, anything else runs
to the next 16-byte-aligned frame.  Unknown formats, kinds and property types are kept as numbers.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devbin.binary import ByteView
from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats import zstdframe
from devbin.formats.elf import constants as EC
from devbin.formats.sycl import constants as C

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile, Section

__all__ = ["Property", "PropertySet", "SyclImage", "read_sycl_images", "sycl_sections"]

_FMT = "sycl"
#: Cap on one decoded image (the fatbin and bundle readers' default).
_MAX_DECODED = 1 << 30
#: Cap on the offload entries and properties the image descriptors of one file reference (:class:`_Arrays`).
MAX_RECORDS = 1 << 20
#: Cap on the property value bytes one file's descriptors are read for (each property may point at a
#: large block, and many properties at overlapping ones).
MAX_VALUE_BYTES = 1 << 26


@dataclass(frozen=True, slots=True)
class Property:
    """One property: ``value`` is the u32 (type 1) or the payload bytes after the bit length (type 2), else
    the raw bytes (or the size field when there are none)."""

    name: str
    type: int
    value: int | bytes


@dataclass(frozen=True, slots=True)
class PropertySet:
    name: str
    properties: tuple[Property, ...]


@dataclass(eq=False, slots=True)
class SyclImage:
    """One device image of a SYCL section.

    ``index``: its place among the section's images (file order); ``offset``: file offset of its
    stored bytes; ``stored``: those bytes (a zstd frame when ``compressed``); ``decoded_size``: the
    size ``.tgtimg`` or the frame header records (the stored length when not compressed).
    ``version`` is the descriptor's (0: none found) and ``format`` its ``Format`` field (-1: none).
    """

    section: str
    index: int
    offset: int
    stored: memoryview = field(repr=False)
    compressed: bool
    decoded_size: int
    target: str
    version: int = 0
    kind: int = -1
    format: int = -1
    compile_options: str = ""
    link_options: str = ""
    entries: tuple[str, ...] = ()
    property_sets: tuple[PropertySet, ...] = ()
    #: The address of the descriptor's ImageEnd field (0: no descriptor), which prune moves with the image's end.
    end_slot: int = 0
    _decoded: bytearray | None = field(default=None, repr=False)

    @property
    def format_name(self) -> str:
        return C.FORMAT_NAMES.get(self.format, str(self.format)) if self.format >= 0 else ""

    @property
    def compression(self) -> str:
        return "zstd" if self.compressed else "none"

    def image_data(self, max_size: int, size: int = 0) -> bytes | memoryview:
        """The image as the runtime sees it: the frame decoded (FormatError when it is bad or larger than
        ``max_size``), or the stored bytes."""
        if not self.compressed:
            return self.stored
        if self._decoded is None:
            from devbin.formats.zstdcap import decompress_capped
            if self.decoded_size < 0:
                raise FormatError("zstd frame without its content size (the SYCL runtime refuses it too)",
                                  fmt=_FMT, where=self.section, offset=self.offset)
            if self.decoded_size > max_size:
                raise FormatError(f"image of {self.decoded_size} bytes is larger than the limit of {max_size} bytes",
                                  fmt=_FMT, where=self.section, offset=self.offset)
            out = decompress_capped(self.stored, self.decoded_size, max_size, fmt=_FMT, where=self.section,
                                    offset=self.offset)
            if len(out) != self.decoded_size:
                raise FormatError(f"zstd frame decodes to {len(out)} bytes, its header says {self.decoded_size}",
                                  fmt=_FMT, where=self.section, offset=self.offset)
            self._decoded = out
        return memoryview(self._decoded)

    def forget(self) -> None:
        """Let go of the decoded bytes (decoded again when next asked for)."""
        self._decoded = None

    def image_head(self, n: int, size: int = 0) -> bytes | memoryview:
        """The first ``n`` bytes (a frame is decoded whole: zstd frames here are small)."""
        return self.image_data(_MAX_DECODED)[:n]


def sycl_sections(elf: ElfFile) -> list[Section]:
    """The ``__CLANG_OFFLOAD_BUNDLE__sycl-<target>`` sections with bytes, in section order."""
    return [s for s in elf.sections if s.name.startswith(C.SECTION_PREFIX) and len(s.name) > len(C.SECTION_PREFIX)
            and s.file_size]


class _Memory:
    """The loaded view of a linked file: pointer fields (relocation addends first) and strings by address."""

    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        self.spans = sorted((s.sh_addr, s.sh_addr + s.file_size, s.sh_offset) for s in elf.sections
                            if s.is_alloc and s.file_size and s.sh_addr)
        self.starts = [s[0] for s in self.spans]
        self.relative: dict[int, int] = {}
        linked = elf.header.e_type in (EC.ET_DYN, EC.ET_EXEC)
        if linked and elf.header.e_machine == EC.EM_X86_64:
            for table in elf.relocation_tables.values():
                for r in table:
                    if r.r_type == C.R_X86_64_RELATIVE and r.r_addend is not None:
                        self.relative[r.r_offset] = r.r_addend

    def offset(self, addr: int, size: int = 1) -> int | None:
        k = bisect.bisect_right(self.starts, addr) - 1
        if k < 0:
            return None
        lo, hi, off = self.spans[k]
        return off + addr - lo if addr + size <= hi else None

    def u64(self, addr: int) -> int | None:
        off = self.offset(addr, 8)
        return None if off is None else self.elf.view.u64(off)

    def u32(self, addr: int) -> int | None:
        off = self.offset(addr, 4)
        return None if off is None else self.elf.view.u32(off)

    def u16(self, addr: int) -> int | None:
        off = self.offset(addr, 2)
        return None if off is None else self.elf.view.u16(off)

    def pointer(self, addr: int) -> int | None:
        got = self.relative.get(addr)
        return got if got is not None else self.u64(addr)

    def string(self, addr: int | None) -> str:
        off = self.offset(addr) if addr else None
        if off is None:
            return ""
        try:
            return self.elf.view.cstr(off)
        except DeviceBinaryError:
            return ""

    def block(self, addr: int, size: int) -> bytes:
        off = self.offset(addr, size) if size > 0 else None
        return b"" if off is None else bytes(self.elf.view.bytes_at(off, size))


@dataclass(slots=True)
class _Descriptor:
    version: int
    kind: int
    format: int
    target: str
    compile_options: str
    link_options: str
    end: int
    entries: tuple[str, ...]
    property_sets: tuple[PropertySet, ...]
    end_slot: int = 0


class _Arrays:
    """The entry and property arrays the descriptors point at, each (begin, end) range read once.

    Every descriptor (and every property set) may point at the same array, so reading per pointer costs
    descriptors x records; here each range is read once and shared.  What the descriptors reference in all
    (entries plus, for every property set, its properties) is capped at :data:`MAX_RECORDS` per file, and
    the property value bytes read at :data:`MAX_VALUE_BYTES`: past either a FormatError names the limit (a
    real library holds a few thousand properties of a few bytes each)."""

    def __init__(self, mem: _Memory) -> None:
        self.mem = mem
        self.entries_read: dict[tuple[int, int], tuple[str, ...]] = {}
        self.props_read: dict[tuple[int, int], tuple[Property, ...]] = {}
        self.sets_read: dict[tuple[int, int], tuple[PropertySet, ...]] = {}
        self.records = 0
        self.value_bytes = 0

    def _count(self, n: int) -> None:
        self.records += n
        if self.records > MAX_RECORDS:
            raise FormatError(f"the image descriptors reference more than {MAX_RECORDS} offload entries and "
                              "properties (the limit per file)", fmt=_FMT)

    def entries(self, begin: int | None, end: int | None) -> tuple[str, ...]:
        """The names of the offload entries in [begin, end): the layout whose name fields all point at
        strings."""
        mem = self.mem
        if not begin or not end or end <= begin or mem.offset(begin, end - begin) is None:
            return ()  # an array must lie in the file: a bad pointer gives nothing, not a long walk
        got = self.entries_read.get((begin, end))
        if got is None:
            got = ()
            span = end - begin
            for size, name_at in C.ENTRY_LAYOUTS:
                if span % size:
                    continue
                names = [mem.string(mem.pointer(a + name_at)) for a in range(begin, end, size)]
                if all(names):
                    got = tuple(names)
                    break
            self.entries_read[begin, end] = got
        self._count(len(got))
        return got

    def _properties(self, pb: int | None, pe: int | None) -> tuple[Property, ...]:
        mem = self.mem
        if not pb or not pe or pe <= pb or (pe - pb) % C.PROPERTY_SIZE or mem.offset(pb, pe - pb) is None:
            return ()
        got = self.props_read.get((pb, pe))
        if got is None:
            props: list[Property] = []
            for p in range(pb, pe, C.PROPERTY_SIZE):
                ptype = mem.u32(p + 16) or 0
                vsize = mem.u64(p + 24) or 0
                vaddr = mem.pointer(p + 8)
                value: int | bytes = vsize
                if vaddr and ptype != C.PROP_UINT32:
                    self.value_bytes += vsize
                    if self.value_bytes > MAX_VALUE_BYTES:
                        raise FormatError(f"the image descriptors' properties hold more than {MAX_VALUE_BYTES} "
                                          "bytes of values (the limit per file)", fmt=_FMT)
                    raw = mem.block(vaddr, vsize)
                    value = raw[8:] if ptype == C.PROP_BYTE_ARRAY and len(raw) >= 8 else raw
                props.append(Property(mem.string(mem.pointer(p)), ptype, value))
            got = self.props_read[pb, pe] = tuple(props)
        return got

    def property_sets(self, begin: int | None, end: int | None) -> tuple[PropertySet, ...]:
        mem = self.mem
        if (not begin or not end or end <= begin or (end - begin) % C.PROPERTY_SET_SIZE
                or mem.offset(begin, end - begin) is None):
            return ()
        got = self.sets_read.get((begin, end))
        if got is None:
            sets: list[PropertySet] = []
            for a in range(begin, end, C.PROPERTY_SET_SIZE):
                props = self._properties(mem.pointer(a + 8), mem.pointer(a + 16))
                self._count(len(props))
                sets.append(PropertySet(mem.string(mem.pointer(a)), props))
            got = self.sets_read[begin, end] = tuple(sets)
        else:
            self._count(sum(len(s.properties) for s in got))
        return got


def _descriptors(mem: _Memory, starts: set[int]) -> dict[int, _Descriptor]:
    """The image descriptors by the image start they point at (see the module docstring).  A descriptor
    must lie whole in one section: one that runs past its section's end is none (its image is then
    measured as one no descriptor describes)."""
    slots: dict[int, list[int]] = {}
    for slot, target in mem.relative.items():
        if target in starts:
            slots.setdefault(target, []).append(slot)
    if not slots:  # no relocations (or not x86-64): the stored values of the writable data
        for s in mem.elf.sections:
            if not (s.is_alloc and s.sh_flags & EC.SHF_WRITE and s.file_size and s.sh_addr):
                continue
            v = s.view
            for off in range(0, s.file_size - 7, 8):
                value = v.u64(off)
                if value in starts:
                    slots.setdefault(value, []).append(s.sh_addr + off)
    arrays = _Arrays(mem)
    out: dict[int, _Descriptor] = {}
    for start, candidates in slots.items():
        for slot in candidates:
            for version, at in C.FIELD_IMAGE_START.items():
                d = slot - at
                if mem.u16(d) != version or mem.offset(d, C.DESCRIPTOR_SIZE[version]) is None:
                    continue
                end = mem.pointer(slot + 8)
                if end is None or end < start:
                    continue
                head = mem.block(d, 4)
                out[start] = _Descriptor(
                    version, head[2], head[3], mem.string(mem.pointer(d + C.FIELD_TARGET)),
                    mem.string(mem.pointer(d + C.FIELD_COMPILE_OPTIONS)),
                    mem.string(mem.pointer(d + C.FIELD_LINK_OPTIONS)), end,
                    arrays.entries(mem.pointer(slot + 16), mem.pointer(slot + 24)),
                    arrays.property_sets(mem.pointer(slot + 32), mem.pointer(slot + 40)), slot + 8)
                break
            if start in out:
                break
    return out


def _frame_size(data: memoryview, where: str, offset: int) -> tuple[int, int]:
    """``(stored bytes, content size or -1)`` of the zstd frame at the start of ``data``, from its frame
    and block headers (RFC 8878 §3.1.1: nothing is decoded); FormatError when they run past ``data``."""
    v = ByteView(data, fmt=_FMT, where=where, base=offset)
    fhd = v.u8(4)
    fcs_flag, single, checksum, dict_flag = fhd >> 6, (fhd >> 5) & 1, (fhd >> 2) & 1, fhd & 3
    fcs_size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    content = -1
    if fcs_size:
        raw = int.from_bytes(v.bytes_at(pos, fcs_size), "little")
        content = raw + 256 if fcs_size == 2 else raw
    pos += fcs_size
    while True:
        h = int.from_bytes(v.bytes_at(pos, 3), "little")
        btype, bsize = (h >> 1) & 3, h >> 3
        if btype == 3:
            raise FormatError("zstd block of the reserved type", fmt=_FMT, where=where, offset=offset + pos)
        pos += 3 + (1 if btype == 1 else bsize)
        if pos > len(v):
            raise FormatError("zstd frame cut short", fmt=_FMT, where=where, offset=offset)
        if h & 1:
            break
    pos += 4 if checksum else 0
    if pos > len(v):
        raise FormatError("zstd frame cut short", fmt=_FMT, where=where, offset=offset)
    return pos, content


def _walk(sec: Section, target: str) -> list[SyclImage]:
    """A section no ``.tgtimg`` record points into: frames measured, other payloads to the next frame."""
    data = sec.data
    whole = data.tobytes()  # searched for the next frame
    out: list[SyclImage] = []
    pos = 0
    while pos < len(data):
        if not any(data[pos:pos + C.IMAGE_ALIGN]):
            pos += C.IMAGE_ALIGN
            continue
        if data[pos:pos + 4].tobytes() == zstdframe.MAGIC:
            stored, content = _frame_size(data[pos:], sec.name, sec.sh_offset + pos)
            out.append(SyclImage(sec.name, len(out), sec.sh_offset + pos, data[pos:pos + stored], True, content,
                                 target))
        else:
            stop = whole.find(zstdframe.MAGIC, pos + 1)
            while stop != -1 and stop % C.IMAGE_ALIGN:
                stop = whole.find(zstdframe.MAGIC, stop + 1)
            stored = (stop if stop != -1 else len(data)) - pos
            out.append(SyclImage(sec.name, len(out), sec.sh_offset + pos, data[pos:pos + stored], False, stored,
                                 target))
        pos += -(-stored // C.IMAGE_ALIGN) * C.IMAGE_ALIGN
    return out


def read_sycl_images(elf: ElfFile) -> list[SyclImage]:
    """Every image of every SYCL section, sections in section order, images in file order (module
    docstring); FormatError for a zstd frame that cannot be measured."""
    sections = sycl_sections(elf)
    if not sections:
        return []
    mem = _Memory(elf)
    records: dict[int, int] = {}
    tgt = elf.section(C.TGTIMG_SECTION)
    if tgt is not None and tgt.file_size and tgt.sh_addr:
        for a in range(tgt.sh_addr, tgt.sh_addr + tgt.file_size - C.TGTIMG_RECORD + 1, C.TGTIMG_RECORD):
            start, size = mem.pointer(a), mem.u64(a + 8)
            if start and size is not None:
                records[start] = size
    descriptors = _descriptors(mem, set(records))
    out: list[SyclImage] = []
    for sec in sections:
        target = sec.name[len(C.SECTION_PREFIX):]
        lo, hi = sec.sh_addr, sec.sh_addr + sec.file_size
        starts = sorted(a for a in records if sec.sh_addr and lo <= a < hi)
        if not starts:
            out.extend(_walk(sec, target))
            continue
        data = sec.data
        for k, start in enumerate(starts):
            d = descriptors.get(start)
            nxt = starts[k + 1] if k + 1 < len(starts) else hi
            end = min(d.end, nxt) if d is not None else nxt
            rel = start - lo
            stored = data[rel:end - lo]
            compressed = stored[:4].tobytes() == zstdframe.MAGIC
            decoded = len(stored)
            if compressed:  # the runtime takes the size from the frame header; .tgtimg's is a fallback
                n, content = _frame_size(stored, sec.name, sec.sh_offset + rel)
                if d is None:  # the stored length from the frame itself
                    stored = stored[:n]
                decoded = content if content >= 0 else records[start]
            img = SyclImage(sec.name, k, sec.sh_offset + rel, stored, compressed, decoded,
                            d.target if d is not None and d.target else target)
            if d is not None:
                img.version, img.kind, img.format = d.version, d.kind, d.format
                img.compile_options, img.link_options = d.compile_options, d.link_options
                img.entries, img.property_sets, img.end_slot = d.entries, d.property_sets, d.end_slot
            out.append(img)
    return out
