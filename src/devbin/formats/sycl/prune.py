"""A SYCL section of a linked host file written again with new image bytes: what ``devbin prune`` does to one.

The section holds its images back to back, each 16-byte aligned, zero bytes between them (the layout of
:mod:`devbin.formats.sycl.reader`); nothing in the section says where an image starts or ends.  The host
side does: each image descriptor's ImageStart and ImageEnd fields, the ``.tgtimg`` record of each image
({start, size}: the decoded size of a compressed image), and the local symbol the wrapper gives each
image (``.sycl_offloading.<n>.data``, its ``st_value`` and ``st_size``).  In a linked file the pointer
fields are ``R_X86_64_RELATIVE`` (``R_AARCH64_RELATIVE``, a ``SHT_RELR`` place) relocations whose target
is the address; the linker writes the target into the field too.

:func:`prune_section` gives each image its new bytes, packs the images towards the section's start at
their 16-byte alignment (by address; the first image stays where it is, aligned or not), and moves every
reference with them: a reference to an image's start moves to its new start, one to its end (the ImageEnd
field, told apart by its place when an end is also the next image's start) to its new end, a ``.tgtimg``
start, size and a symbol size that were the old ones become the new ones (a position-dependent file's fields,
which no relocation names, as written).  It refuses (returns the reason, writes nothing) when a
reference points into the section anywhere else, a dynamic symbol lies in it, or the bytes between images
are not zero.  The section's tail, freed, is zero-filled and returned, for the caller to cut its whole
pages out of the file (:func:`devbin.formats.elf.pages.remove_pages`).

A compressed image is compressed again by :func:`compress_image`: one zstd frame with its content size in
the header (the SYCL runtime refuses a frame without it: intel/llvm ``sycl/source/detail/compression.hpp``)
at level :data:`devbin.formats.sycl.constants.ZSTD_LEVEL`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from devbin.binary.mapped import Rewritable
from devbin.formats.elf import constants as EC
from devbin.formats.elf.pages import RELATIVE_RELOCATION, file_offset, relr_places
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.sycl import constants as C
from devbin.formats.sycl.reader import SyclImage

__all__ = ["SectionPrune", "compress_image", "prune_section"]


def compress_image(data: bytes) -> bytes:
    """``data`` as one zstd frame that records its content size (module docstring)."""
    import zstandard

    return zstandard.ZstdCompressor(level=C.ZSTD_LEVEL, write_content_size=True).compress(data)


@dataclass
class SectionPrune:
    """What :func:`prune_section` did: ``freed`` the bytes the images shrank by, ``free`` the file range
    ``(lo, hi)`` of the section's zeroed tail (empty when nothing was freed), ``reason`` why nothing was
    written (None: it was)."""

    freed: int = 0
    free: list[tuple[int, int]] = field(default_factory=list)
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class _Place:
    old_start: int  # section offsets
    old_end: int
    new_start: int
    new_end: int
    old_decoded: int
    new_decoded: int
    end_slot: int


def prune_section(elf: ElfFile, buf: Rewritable, sec: Section, images: Sequence[SyclImage],
                  new: Mapping[int, tuple[bytes, int]]) -> SectionPrune:
    """Write into ``buf`` (the linked file ``elf``: a copy, or a copy-on-write map) the section ``sec`` with
    image ``i`` of ``images`` (those of ``sec``, by :attr:`SyclImage.index`) replaced by ``new[i]`` (stored
    bytes, decoded size), packed, and every reference moved (module docstring)."""
    h = elf.header
    if not h.is64 or not h.little:
        return SectionPrune(reason="only 64-bit little-endian files are handled")
    base = sec.sh_offset
    own = sorted((i for i in images if base <= i.offset < base + sec.file_size), key=lambda i: i.offset)
    if not own:
        return SectionPrune()
    places: list[_Place] = []
    pos = own[0].offset - base
    for k, img in enumerate(own):
        start = img.offset - base
        data, decoded = new.get(img.index, (bytes(img.stored), img.decoded_size))
        # the first image stays where it is; each next one goes to the next 16-byte-aligned address (the
        # wrapper's images are aligned objects: by address, whatever the section's own alignment)
        at = pos if k == 0 else pos + -(sec.sh_addr + pos) % C.IMAGE_ALIGN
        places.append(_Place(start, start + len(img.stored), at, at + len(data), img.decoded_size, decoded,
                             img.end_slot))
        pos = at + len(data)
    if places[-1].new_end > sec.file_size:
        return SectionPrune(reason=f"the rewritten images take {places[-1].new_end - places[0].new_start:,} bytes, "
                                   f"more than {sec.name} holds")
    gaps = [(a.old_end, b.old_start) for a, b in pairwise(places)]
    gaps.append((places[-1].old_end, sec.file_size))
    if any(any(buf[base + g0:base + g1]) for g0, g1 in gaps):
        return SectionPrune(reason=f"{sec.name} holds bytes other than images and their zero padding")
    patches: dict[int, int] = {}  # file offset of a u64 -> new value
    reason = _references(elf, buf, sec, places, patches)
    if reason is not None:
        return SectionPrune(reason=reason)
    content = bytearray()
    for img, p in zip(own, places, strict=True):
        content += bytes(p.new_start - (places[0].new_start + len(content)))
        content += new.get(img.index, (bytes(img.stored), 0))[0]
    first = base + places[0].old_start
    end = base + sec.file_size
    buf[first:end] = content + bytes(end - first - len(content))
    for off, value in patches.items():
        struct.pack_into("<Q", buf, off, value)
    freed = sum((p.old_end - p.old_start) - (p.new_end - p.new_start) for p in places)
    tail = first + len(content)
    return SectionPrune(freed, [(tail, end)] if tail < end else [])


def _references(elf: ElfFile, buf: Rewritable, sec: Section, places: list[_Place], patches: dict[int, int],
                ) -> str | None:
    """Fill ``patches`` with every reference to an image of ``sec`` moved (module docstring), or the reason
    one cannot be."""
    lo, hi = sec.sh_addr, sec.sh_addr + sec.sh_size
    starts = {p.old_start: p for p in places}
    ends = {p.old_end: p for p in places}
    slots = {p.end_slot: p for p in places if p.end_slot}

    def moved(target: int, place: int, what: str) -> int | str:
        rel = target - lo
        p = slots.get(place)
        if p is not None and rel == p.old_end:
            return lo + p.new_end
        if rel in starts:
            return lo + starts[rel].new_start
        if rel in ends:
            return lo + ends[rel].new_end
        return f"{what} points at {sec.name}+{rel:#x}, which is no image's start or end"

    def word(place: int, old: int, new: int) -> None:
        off = file_offset(elf, place, 8)
        if off is not None and struct.unpack_from("<Q", buf, off)[0] == old:
            patches[off] = new

    relative = RELATIVE_RELOCATION.get(elf.header.e_machine)
    addends: dict[int, int] = {}  # place -> target of its relative relocation
    for rsec in elf.sections:
        if rsec.sh_type not in (EC.SHT_REL, EC.SHT_RELA) or not rsec.is_alloc:
            continue
        for i, rel in enumerate(elf.relocation_table(rsec.index)):
            if rel.r_type != relative:
                continue
            old = rel.r_addend
            if old is None:
                off = file_offset(elf, rel.r_offset, 8)
                old = struct.unpack_from("<Q", buf, off)[0] if off is not None else None
            if old is None:
                continue
            addends[rel.r_offset] = old
            if not lo <= old <= hi:
                continue
            got = moved(old, rel.r_offset, f"a relative relocation at {rel.r_offset:#x}")
            if isinstance(got, str):
                return got
            if rel.r_addend is not None:
                patches[rsec.sh_offset + i * 24 + 16] = got
            word(rel.r_offset, old, got)
    for rsec in elf.sections:
        if rsec.sh_type != EC.SHT_RELR:
            continue
        for place in relr_places(elf, rsec):
            off = file_offset(elf, place, 8)
            if off is None:
                continue
            old = struct.unpack_from("<Q", buf, off)[0]
            addends[place] = old
            if lo <= old <= hi:
                got = moved(old, place, f"a RELR place at {place:#x}")
                if isinstance(got, str):
                    return got
                patches[off] = got
    for p in places:  # a position-dependent file's descriptor fields, which no relocation names
        if p.end_slot:
            word(p.end_slot - 8, lo + p.old_start, lo + p.new_start)
            word(p.end_slot, lo + p.old_end, lo + p.new_end)
    tgt = elf.section(C.TGTIMG_SECTION)
    if tgt is not None and tgt.file_size:
        for k in range(tgt.file_size // C.TGTIMG_RECORD):
            at = tgt.sh_offset + k * C.TGTIMG_RECORD
            start = addends.get(tgt.sh_addr + k * C.TGTIMG_RECORD, struct.unpack_from("<Q", buf, at)[0])
            rec = starts.get(start - lo)
            if rec is not None and struct.unpack_from("<Q", buf, at)[0] == lo + rec.old_start:
                patches[at] = lo + rec.new_start  # the start as written (a position-dependent file: no relocation)
            if rec is not None and struct.unpack_from("<Q", buf, at + 8)[0] == rec.old_decoded:
                patches[at + 8] = rec.new_decoded
    if elf.dynsym is not None:
        for sym in elf.dynsym:
            if sym.defined and sym.st_shndx == sec.index:
                return f"dynamic symbol {sym.name!r} lies in {sec.name}"
    symtab = elf.symtab
    if symtab is not None:
        table = next(s for s in elf.sections if s.sh_type == EC.SHT_SYMTAB)
        for sym in symtab:
            if sym.st_shndx != sec.index or (sym.st_value == lo and sym.st_size == 0):
                continue
            img = starts.get(sym.st_value - lo)
            if img is None:
                return f"symbol {sym.name!r} points at {sec.name}+{sym.st_value - lo:#x}, which is no image's start"
            at = table.sh_offset + sym.index * 24  # Elf64_Sym: st_value at +8, st_size at +16
            patches[at + 8] = lo + img.new_start
            if sym.st_size == img.old_end - img.old_start:
                patches[at + 16] = img.new_end - img.new_start
    return None

