"""Remove whole pages of unused bytes from a linked ELF file (shared library or executable).

After devbin prune has rewritten a device-code container in place (the kept images compacted
at its start, the rest zero), the freed bytes still sit inside a loaded segment.  This module
cuts the whole pages among them out of the file, with the technique AMD's rocm-kpack uses
(ROCm/rocm-kpack ``python/rocm_kpack/elf/zero_page.py``; ROCm/TheRock RFC0008):

* **Only whole pages go.**  A free range ``[a, b)`` loses ``[align_up(a), align_down(b))``; the
  partial pages at its ends stay in the file.  The page is the ABI's largest page (4 KiB on
  x86-64, 64 KiB on AArch64 and PowerPC64, else the largest ``p_align``), so every segment's
  ``p_offset`` stays congruent to its ``p_vaddr`` modulo the page, as loaders require (System V
  ABI, "Program Header": "loadable process segments must have congruent values for p_vaddr and
  p_offset, modulo the page size"); a ``p_align`` larger than the page that the congruence no longer
  meets is lowered to the largest power of two it meets (glibc checks ``(p_vaddr - p_offset) %
  p_align``).
* **Virtual addresses stay.**  The ``PT_LOAD`` holding a removed range is split: the piece before
  it keeps its file bytes up to the range and a memory size that covers the removed pages (the
  loader maps them as zero pages, as it maps ``.bss``), the piece after starts at the range's end
  address at the file offset where the range began.  Nothing that points into the image moves:
  dynamic tags, relocations, symbols and every wrapper pointer keep their values.
* **Later offsets move down**: every later segment, section, and ``e_shoff``.
* **The section holding a range is split** into pieces of the same name, type and flags, one per
  stretch of kept bytes; the first keeps its index (its symbols' ``st_shndx`` stay right), the others
  are appended to the section header table.  The bytes between a piece's end and the removed pages
  (``[a, align_up(a))`` and ``[align_down(b), b)``) are in no section.
* **The program-header table** gains one entry per split.  It stays where it is when it has spare
  ``PT_NULL`` slots or free bytes after it; otherwise it moves into the free bytes before the first
  removed range (inside the same loaded piece, so ``PT_PHDR`` still lies in a ``PT_LOAD`` and the
  kernel's ``AT_PHDR`` is right), or, when those are too few, into one page kept back for it.
* **Refused** (:class:`~devbin.errors.UsageError`, nothing returned) when a removed byte is read by
  anything the file declares: a relocation's place or a relative relocation's target
  (``SHT_REL``/``SHT_RELA``/``SHT_RELR``), a defined dynamic symbol, an address-valued dynamic tag,
  the entry point, a segment other than a ``PT_LOAD``, or a section other than the one the range
  lies in (cf. rocm-kpack's ``verify_no_fatbin_relocations``).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from devbin.binary import align_up
from devbin.errors import UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf import layout as L
from devbin.formats.elf.edit import _patch_header  # the one ELF-header patcher
from devbin.formats.elf.reader import ElfFile, Section, Segment

__all__ = ["MAX_SEGMENTS", "PHNUM_LIMIT", "RELATIVE_RELOCATION", "PageCut", "abi_page_size", "check_max_segments",
           "file_offset", "relr_places", "remove_pages"]

#: The largest page a loader of the machine may use (x86-64 psABI; AArch64 and PowerPC64 kernels run 64 KiB pages).
_ABI_PAGE = {C.EM_X86_64: 0x1000, 3: 0x1000, C.EM_AARCH64: 0x10000, 21: 0x10000}
_SHN_LORESERVE = 0xFF00
#: The most program headers :func:`remove_pages` gives a file (its docstring says why): glibc's loader then
#: needs about 230 KiB of the loading thread's stack for them, and the process 4,096 more memory maps.
MAX_SEGMENTS = 2048
#: The most program headers ``e_phnum`` (16 bits) counts: 0xffff is ``PN_XNUM`` (the count is then in
#: section 0's ``sh_info``; ELF gABI, "ELF Header"), which this writer does not use.
PHNUM_LIMIT = 0xFFFE


def check_max_segments(value: int) -> int:
    """``value`` as a limit for :func:`remove_pages`' ``max_segments``: a whole number of program headers
    from 1 to :data:`PHNUM_LIMIT`; UsageError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"max_segments={value!r}: expected a whole number of program headers (default "
                         f"{MAX_SEGMENTS:,})")
    if not 1 <= value <= PHNUM_LIMIT:
        raise UsageError(f"max_segments={value:,}: expected 1 to {PHNUM_LIMIT:,} program headers (e_phnum is 16 "
                         f"bits; default {MAX_SEGMENTS:,})")
    return value
_AT_END = -1  # _place_phdrs: the program-header table goes after everything else
_PHDR_FIELDS = ("p_type", "p_flags", "p_offset", "p_vaddr", "p_paddr", "p_filesz", "p_memsz", "p_align")
# dynamic tags whose value is an address in the image (ELF gABI "Dynamic Section"; GNU extensions)
_DT_ADDRESS = frozenset({3, 4, 5, 6, 7, 12, 13, 17, 21, 23, 25, 26, 32, 34, 36,
                         0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE})
#: The relocation type whose target is the load base plus ``r_addend``, per machine (the psABIs:
#: R_X86_64_RELATIVE, R_386_RELATIVE, R_AARCH64_RELATIVE, R_PPC64_RELATIVE, R_RISCV_RELATIVE).
RELATIVE_RELOCATION = {C.EM_X86_64: 8, 3: 8, C.EM_AARCH64: 1027, 21: 22, 243: 3}


def abi_page_size(elf: ElfFile) -> int:
    """The page size whole pages are removed in (module docstring)."""
    page = _ABI_PAGE.get(elf.header.e_machine)
    if page is None:
        page = max([s.p_align for s in elf.segments if s.p_type == C.PT_LOAD] + [0x1000])
    return page


@dataclass
class PageCut:
    """What :func:`remove_pages` did; ``parts`` is the new file, laid end to end: views of the input's bytes,
    zeros and the rewritten tables, nothing copied (:meth:`write_to` writes them; :attr:`data` joins them)."""

    parts: list[memoryview]
    page: int
    #: (old file offset, size) of each removed run of pages
    removed: list[tuple[int, int]] = field(default_factory=list)
    #: the new ``e_phoff`` when the program-header table moved, else None
    phdr_moved_to: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def bytes_removed(self) -> int:
        return sum(n for _, n in self.removed)

    @property
    def size(self) -> int:
        """The new file's length."""
        return sum(len(p) for p in self.parts)

    @property
    def data(self) -> bytes:
        """The new file's bytes, joined (a copy: :meth:`write_to` writes them without one)."""
        return b"".join(self.parts)

    def write_to(self, out: _Writable) -> int:
        """Write the new file to ``out`` piece by piece; returns its length."""
        for part in self.parts:
            out.write(part)
        return self.size


class _Writable(Protocol):
    def write(self, data: memoryview, /) -> object: ...


#: Zeros that zero-filled pieces of the new file are views of.
_ZEROS = memoryview(bytes(1 << 20))


class _Splice:
    """A file laid out as pieces end to end (views of the old bytes, zeros, new bytes), none copied; a write
    over it (:meth:`write_at`) splits the pieces it covers, as a slice assignment to a bytearray replaces
    their bytes."""

    def __init__(self) -> None:
        self.parts: list[memoryview] = []
        self.size = 0

    def add(self, piece: bytes | memoryview) -> None:
        if len(piece):
            self.parts.append(piece if isinstance(piece, memoryview) else memoryview(piece))
            self.size += len(piece)

    def zeros(self, n: int) -> None:
        while n > 0:
            k = min(n, len(_ZEROS))
            self.add(_ZEROS[:k])
            n -= k

    def old(self, old: memoryview, lo: int, hi: int, zero: Sequence[tuple[int, int]]) -> None:
        """``old[lo:hi]``, the bytes of the sorted, disjoint ranges ``zero`` given as zeros."""
        i = max(bisect.bisect_right(zero, (lo, lo)) - 1, 0)
        pos = lo
        while i < len(zero) and zero[i][0] < hi:
            a, b = max(zero[i][0], pos), min(zero[i][1], hi)
            if a < b:
                self.add(old[pos:a])
                self.zeros(b - a)
                pos = b
            i += 1
        if hi > pos:
            self.add(old[pos:hi])

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` bytes."""
        out: list[memoryview] = []
        pos = 0
        for p in self.parts:
            if pos >= n:
                break
            out.append(p[:n - pos] if pos + len(p) > n else p)
            pos += len(out[-1])
        self.parts, self.size = out, pos

    def write_at(self, off: int, data: bytes) -> None:
        """``data`` over the bytes at ``off``; past the end the file grows (as ``buf[off:off + n] = data``)."""
        if off > self.size:
            raise ValueError(f"a write at {off:#x}, past the end {self.size:#x}")
        end = off + len(data)
        out: list[memoryview] = []
        pos = 0
        placed = False
        for p in self.parts:
            stop = pos + len(p)
            if stop <= off:
                out.append(p)
            elif pos >= end:
                if not placed:
                    out.append(memoryview(data))
                    placed = True
                out.append(p)
            else:
                if pos < off:
                    out.append(p[:off - pos])
                if not placed:
                    out.append(memoryview(data))
                    placed = True
                if stop > end:
                    out.append(p[end - pos:])
            pos = stop
        if not placed:
            out.append(memoryview(data))
        self.parts = out
        self.size = sum(len(p) for p in out)

    def head(self, n: int) -> bytearray:
        """A copy of the first ``n`` bytes."""
        buf = bytearray()
        for p in self.parts:
            if len(buf) >= n:
                break
            buf += p[:n - len(buf)]
        return buf


@dataclass
class _Range:
    free_lo: int  # the free bytes the caller named
    free_hi: int
    lo: int  # the whole pages among them: removed
    hi: int
    seg: Segment
    sec: Section

    def vaddr(self, off: int) -> int:
        return self.seg.p_vaddr + off - self.seg.p_offset


def remove_pages(elf: ElfFile, free: Iterable[tuple[int, int]], *,
                 max_segments: int | None = None, zero_free: bool = False) -> PageCut:
    """``elf`` (``ET_DYN``/``ET_EXEC``) without the whole pages of the ``free`` file ranges ``[lo, hi)``
    (bytes the caller knows nothing reads); see the module docstring.  Free ranges holding no whole
    page are left alone; when none holds one the file comes back unchanged.

    ``max_segments`` (default :data:`MAX_SEGMENTS`): the most program headers the result may have.  Each
    range cut splits a ``PT_LOAD`` in two, and the loader pays for every segment: glibc keeps one
    ``struct loadcmd`` per program header and (past its first 832 bytes read) the table itself on the
    stack of the thread that calls ``dlopen`` (``elf/dl-load.c``, ``_dl_map_object_from_fd``: about 112
    bytes a header), and maps each piece twice (its file bytes, then its zero pages), two of the 65,530
    maps a Linux process may hold by default (``vm.max_map_count``).  Past the limit only the largest
    ranges are cut; the others stay as zeros (a note says how many bytes).

    ``zero_free``: the ``free`` bytes that stay in the file are given as zeros (the caller has not zeroed
    them in ``elf``'s bytes: prune leaves a rewritten container's freed tail as it was in its copy-on-write
    map of the input rather than touch each of its pages)."""
    free = sorted(free)
    zero = _merged(free) if zero_free else []
    h = elf.header
    if h.e_type not in (C.ET_DYN, C.ET_EXEC) or not elf.segments:
        raise UsageError(f"{elf.where}: pages can only be removed from a linked file (shared library or executable)")
    page = abi_page_size(elf)
    ranges = _page_ranges(elf, free, page)
    if not ranges:
        return PageCut(_whole(elf, zero), page)
    ranges, notes = _largest(elf, ranges, MAX_SEGMENTS if max_segments is None else check_max_segments(max_segments))
    _check_unread(elf, ranges)
    phdr_at, ranges, more = _place_phdrs(elf, ranges, page)
    if all(r.hi <= r.lo for r in ranges):  # the table took every page there was to cut: nothing moves
        return PageCut(_whole(elf, zero), page, notes=[
            *notes, "no page removed: the program headers of the split segments would fill the only free pages"])
    return _rebuild(elf, ranges, page, phdr_at, notes + more, zero)


def _merged(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted ranges with those that overlap or touch joined."""
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


def _whole(elf: ElfFile, zero: Sequence[tuple[int, int]]) -> list[memoryview]:
    """The file as it is, the ranges ``zero`` as zeros."""
    body = _Splice()
    body.old(elf.view.bytes_at(0, elf.size), 0, elf.size, zero)
    return body.parts


def _largest(elf: ElfFile, ranges: list[_Range], limit: int) -> tuple[list[_Range], list[str]]:
    """The largest of ``ranges`` whose cuts keep the program headers within ``limit`` (each cut adds one), in
    file order, and the note on the others."""
    room = max(0, limit - len(_segments(elf, [])) - 1)  # one kept back: the table may take a range's first pages
    if len(ranges) <= room:
        return ranges, []
    keep = sorted(sorted(ranges, key=lambda r: r.lo - r.hi)[:room], key=lambda r: r.lo)
    left = sum(r.hi - r.lo for r in ranges) - sum(r.hi - r.lo for r in keep)
    return keep, [f"{len(ranges) - len(keep):,} of the {len(ranges):,} ranges of whole free pages ({left:,} bytes) "
                  f"stay as zeros: cutting each adds a segment, and the program headers are kept to {limit:,} "
                  "(the loader holds them on the stack of the thread that loads the file)"]


# --------------------------------------------------------------------------- ranges and checks


def _page_ranges(elf: ElfFile, free: Iterable[tuple[int, int]], page: int) -> list[_Range]:
    loads = [s for s in elf.segments if s.p_type == C.PT_LOAD and s.p_filesz]
    out: list[_Range] = []
    for a, b in sorted(free):
        lo, hi = align_up(a, page), b - b % page
        if hi <= lo:
            continue
        seg = next((s for s in loads if s.p_offset <= lo and hi <= s.p_offset + s.p_filesz), None)
        if seg is None:
            continue  # not in a loaded segment: not pages the loader maps (the caller's bytes stay)
        secs = [s for s in elf.sections if s.file_size and s.sh_offset < hi and lo < s.sh_offset + s.file_size]
        if len(secs) != 1 or not (secs[0].sh_offset <= a and b <= secs[0].sh_offset + secs[0].file_size):
            names = ", ".join(s.name for s in secs) or "no section"
            raise UsageError(f"{elf.where}: free bytes [{a:#x}, {b:#x}) lie in {names}, not within one section; "
                             "refusing to remove them")
        if out and lo < out[-1].free_hi:
            raise UsageError(f"{elf.where}: free ranges overlap at {a:#x}")
        out.append(_Range(a, b, lo, hi, seg, secs[0]))
    return out


def _check_unread(elf: ElfFile, ranges: Sequence[_Range]) -> None:
    """UsageError when anything the file declares reads a byte of a range (module docstring)."""
    spans = sorted((r.vaddr(r.lo), r.vaddr(r.hi)) for r in ranges)
    starts = [s for s, _ in spans]

    def hit(addr: int) -> bool:
        i = bisect.bisect_right(starts, addr) - 1
        return i >= 0 and addr < spans[i][1]

    def refuse(what: str, addr: int) -> UsageError:
        return UsageError(f"{elf.where}: {what} at {addr:#x} reads bytes that would be removed; the file is left as is")

    h = elf.header
    if h.e_entry and hit(h.e_entry):
        raise refuse("the entry point", h.e_entry)
    for seg in elf.segments:
        if seg.p_type in (C.PT_LOAD, C.PT_NULL) or not (seg.p_filesz or seg.p_memsz):
            continue
        for r in ranges:
            if seg.p_offset < r.hi and r.lo < seg.p_offset + seg.p_filesz:
                raise refuse(f"segment [{seg.index}] ({C.pt_name(seg.p_type)})", r.vaddr(r.lo))
    relative = RELATIVE_RELOCATION.get(h.e_machine)
    for sec in elf.sections:
        if sec.sh_type in (C.SHT_REL, C.SHT_RELA):
            symbols = elf.symbol_tables.get(sec.sh_link)
            for rel in elf.relocation_table(sec.index):
                if hit(rel.r_offset):
                    raise refuse(f"a relocation in {sec.name}", rel.r_offset)
                if not sec.is_alloc:
                    continue
                addend = rel.r_addend if rel.r_addend is not None else _word(elf, rel.r_offset)
                if addend is None:
                    continue
                if rel.r_type == relative:
                    if hit(addend):
                        raise refuse(f"the target of a relative relocation in {sec.name} (at {rel.r_offset:#x})",
                                     addend)
                elif symbols is not None and 0 < rel.r_sym < len(symbols):
                    sym = symbols[rel.r_sym]
                    if sym.defined and sym.st_shndx != C.SHN_ABS and hit(sym.st_value + addend):
                        raise refuse(f"the target of a relocation in {sec.name} against {sym.name!r} "
                                     f"(at {rel.r_offset:#x})", sym.st_value + addend)
        elif sec.sh_type == C.SHT_RELR:
            for place in relr_places(elf, sec):
                target = _word(elf, place)
                if hit(place) or (target is not None and hit(target)):
                    raise refuse(f"a relative relocation in {sec.name}", place)
    if elf.dynsym is not None:  # by the table's columns: a Symbol made only for the one named
        c = elf.dynsym.columns
        for i, (shndx, value) in enumerate(zip(c.st_shndx, c.st_value, strict=True)):
            if shndx not in (C.SHN_UNDEF, C.SHN_ABS) and hit(value):
                raise refuse(f"dynamic symbol {elf.dynsym[i].name!r}", value)
    for tag, value in _dynamic(elf):
        if tag in _DT_ADDRESS and hit(value):
            raise refuse(f"dynamic tag {tag:#x}", value)


def file_offset(elf: ElfFile, vaddr: int, size: int) -> int | None:
    """The file offset of the ``size`` bytes at ``vaddr``, or None when no loaded segment holds them
    in its file bytes (``p_filesz``)."""
    for s in elf.segments:
        if s.p_type == C.PT_LOAD and s.p_vaddr <= vaddr and vaddr + size <= s.p_vaddr + s.p_filesz:
            return s.p_offset + vaddr - s.p_vaddr
    return None


def _word(elf: ElfFile, vaddr: int) -> int | None:
    """The address-sized word at ``vaddr`` in the file, or None when no loaded segment holds it."""
    size = 8 if elf.header.is64 else 4
    off = file_offset(elf, vaddr, size)
    if off is None:
        return None
    return elf.view.u64(off) if size == 8 else elf.view.u32(off)


def relr_places(elf: ElfFile, sec: Section) -> list[int]:
    """The places of a ``SHT_RELR`` table (gABI proposal "RELR relative relocation format")."""
    size = 8 if elf.header.is64 else 4
    fmt = "Q" if size == 8 else "I"
    places: list[int] = []
    where = 0
    for (word,) in sec.view.iter_unpack(fmt, 0, sec.sh_size // size, "RELR table"):
        if word & 1 == 0:
            places.append(word)
            where = word + size
        else:
            bits, i = word >> 1, 0
            while bits:
                if bits & 1:
                    places.append(where + i * size)
                bits >>= 1
                i += 1
            where += (8 * size - 1) * size
    return places


def _dynamic(elf: ElfFile) -> list[tuple[int, int]]:
    sec = next((s for s in elf.sections if s.sh_type == C.SHT_DYNAMIC), None)
    if sec is None:
        return []
    fmt = "qQ" if elf.header.is64 else "iI"
    n = sec.file_size // struct.calcsize("<" + fmt)
    out = []
    for tag, value in sec.view.iter_unpack(fmt, 0, n, "dynamic section"):
        if tag == 0:
            break
        out.append((tag, value))
    return out


# --------------------------------------------------------------------------- the program-header table


def _place_phdrs(elf: ElfFile, ranges: list[_Range], page: int) -> tuple[int, list[_Range], list[str]]:
    """Where the new program-header table goes (old file offset), and the ranges to remove."""
    h = elf.header
    need = len(_segments(elf, ranges)) * L.PHDR[h.ei_class].size
    if need <= h.e_phnum * L.PHDR[h.ei_class].size or _free_after_table(elf, need):
        return h.e_phoff, ranges, []
    for r in ranges:
        at = align_up(r.free_lo, 8)
        if at + need <= r.lo:
            return at, ranges, [f"the program headers (what the loader reads first) moved into freed bytes of "
                                f"{r.sec.name} (file offset {at:#x})"]
    # keep the first pages of a range back for the table (a range holds one page at least; a table of many
    # splits, one per range, needs as many pages as it fills: the first range that holds them)
    pages = -(-need // page)
    i = next((i for i, r in enumerate(ranges) if r.hi - r.lo >= pages * page), None)
    if i is None:
        if h.e_type == C.ET_DYN and not any(s.p_type in (C.PT_PHDR, C.PT_INTERP) for s in elf.segments):
            # a shared library without PT_PHDR: the loader reads the table from the file and keeps its own
            # copy of one no PT_LOAD holds (glibc elf/dl-load.c, _dl_map_object_from_fd); it goes at the end
            return _AT_END, ranges, [f"the program headers ({need:,} bytes, one per split segment) moved to the "
                                     "end of the file (a shared library's loader reads them from the file)"]
        raise UsageError(f"{elf.where}: no room for a program-header table of {need} bytes")
    r = ranges[i]
    kept = "one page is" if pages == 1 else f"{pages} pages are"
    return r.lo, [*ranges[:i], replace(r, lo=r.lo + pages * page), *ranges[i + 1:]], [
        f"the program headers (what the loader reads first) moved into freed bytes of {r.sec.name} "
        f"(file offset {r.lo:#x}); {kept} kept for them"]


def _free_after_table(elf: ElfFile, need: int) -> bool:
    """Whether the ``need`` bytes at ``e_phoff`` are the table's own or unused (in its PT_LOAD, in no section)."""
    h = elf.header
    lo, hi = h.e_phoff + h.e_phnum * L.PHDR[h.ei_class].size, h.e_phoff + need
    if not any(s.p_type == C.PT_LOAD and s.p_offset <= h.e_phoff and hi <= s.p_offset + s.p_filesz
               for s in elf.segments):
        return False
    if any(s.file_size and s.sh_offset < hi and lo < s.sh_offset + s.file_size for s in elf.sections):
        return False
    return not any(elf.view.bytes_at(lo, hi - lo)) if hi <= elf.size else False


# --------------------------------------------------------------------------- the new layout


def _segments(elf: ElfFile, ranges: Sequence[_Range]) -> list[dict[str, int]]:
    """The new program headers, old file offsets (mapped later): each PT_LOAD holding ranges split."""
    out: list[dict[str, int]] = []
    for seg in elf.segments:
        mine = [r for r in ranges if r.seg.index == seg.index]
        base = _fields(seg)
        if seg.p_type == C.PT_NULL:
            continue  # a spare slot: the split pieces take them (padded back below)
        if not mine:
            out.append(base)
            continue
        off = seg.p_offset
        end_file, end_mem = seg.p_offset + seg.p_filesz, seg.p_vaddr + seg.p_memsz
        for r in mine:
            delta = off - seg.p_offset
            out.append({**base, "p_offset": off, "p_vaddr": seg.p_vaddr + delta, "p_paddr": seg.p_paddr + delta,
                        "p_filesz": r.lo - off, "p_memsz": r.hi - off})
            off = r.hi
        delta = off - seg.p_offset
        if end_file > off or end_mem > seg.p_vaddr + delta:
            out.append({**base, "p_offset": off, "p_vaddr": seg.p_vaddr + delta, "p_paddr": seg.p_paddr + delta,
                        "p_filesz": end_file - off, "p_memsz": end_mem - (seg.p_vaddr + delta)})
    spare = dict.fromkeys(_PHDR_FIELDS, 0)
    out += [dict(spare) for _ in range(elf.header.e_phnum - len(out))]
    return out


def _fields(seg: Segment) -> dict[str, int]:
    return {f: getattr(seg, f) for f in _PHDR_FIELDS}


def _rebuild(elf: ElfFile, ranges: list[_Range], page: int, phdr_at: int, notes: list[str],
             zero: Sequence[tuple[int, int]]) -> PageCut:
    h = elf.header
    cls, little = h.ei_class, h.little
    end = "<" if little else ">"
    cuts = [(r.lo, r.hi) for r in ranges]
    cut_starts = [lo for lo, _ in cuts]
    prefix = [0]
    for lo, hi in cuts:
        prefix.append(prefix[-1] + hi - lo)

    def moved(off: int) -> int:
        """The new offset of old offset ``off`` (an offset inside a removed range goes to its start)."""
        i = bisect.bisect_right(cut_starts, off) - 1
        if i < 0:
            return off
        lo, hi = cuts[i]
        if off < hi:
            return lo - prefix[i]
        return off - prefix[i + 1]

    old = elf.view.bytes_at(0, elf.size)
    body = _Splice()
    pos = 0
    for lo, hi in cuts:
        body.old(old, pos, lo, zero)
        pos = hi
    body.old(old, pos, elf.size, zero)

    # program headers
    phdrs = _segments(elf, ranges)
    for p in phdrs:
        if p["p_type"] == C.PT_LOAD:
            p["p_offset"] = moved(p["p_offset"])
            p["p_align"] = _align_for(p, page)
        elif p["p_type"] != C.PT_PHDR:
            p["p_offset"] = moved(p["p_offset"])
    phsize = L.PHDR[cls].size
    table_vaddr = _vaddr_of(elf, phdr_at)
    for p in phdrs:
        if p["p_type"] == C.PT_PHDR:
            p["p_offset"] = moved(phdr_at)
            if table_vaddr is not None:
                p["p_paddr"] += table_vaddr - p["p_vaddr"]
                p["p_vaddr"] = table_vaddr
            p["p_filesz"] = p["p_memsz"] = len(phdrs) * phsize
    pfmt = end + L.PHDR[cls].fmt
    table = b"".join(struct.pack(pfmt, *(p[f] for f in L.PHDR[cls].fields)) for p in phdrs)
    if phdr_at != _AT_END:
        new_phoff = moved(phdr_at)
        body.write_at(new_phoff, table)

    # section headers: the sections holding ranges split, the rest moved
    shdrs, extra = _section_headers(elf, ranges, moved)
    shlay = L.SHDR[cls]
    sfmt = end + shlay.fmt
    count = len(shdrs) + len(extra)
    if count >= _SHN_LORESERVE or h.raw_e_shnum == 0:
        shdrs[0]["sh_size"] = count if count >= _SHN_LORESERVE else 0
    table_s = b"".join(struct.pack(sfmt, *(s[f] for f in shlay.fields)) for s in [*shdrs, *extra])
    shoff = h.e_shoff
    if shoff:
        old_end = shoff + h.e_shnum * shlay.size
        new_shoff = moved(shoff)
        if extra:
            if old_end == elf.size:
                body.truncate(new_shoff)
            new_shoff = align_up(body.size, 8)
            body.zeros(new_shoff - body.size)
            body.add(table_s)
        else:
            body.write_at(new_shoff, table_s)
    else:
        new_shoff = 0
    if phdr_at == _AT_END:
        new_phoff = align_up(body.size, 8)
        body.zeros(new_phoff - body.size)
        body.add(table)
    header = body.head(L.EHDR_SIZE[cls])
    _patch_header(header, h, {"e_phoff": new_phoff, "e_phnum": len(phdrs), "e_shoff": new_shoff,
                              "e_shnum": count if count < _SHN_LORESERVE else 0})
    body.write_at(0, bytes(header))
    return PageCut(body.parts, page, [(lo, hi - lo) for lo, hi in cuts if hi > lo],
                   new_phoff if phdr_at != h.e_phoff else None, notes)


def _align_for(p: dict[str, int], page: int) -> int:
    """``p_align`` kept when the congruence still holds, else the largest power of two (>= page) it holds for."""
    align = p["p_align"]
    diff = p["p_vaddr"] - p["p_offset"]
    while align > page and diff % align:
        align //= 2
    return align


def _vaddr_of(elf: ElfFile, off: int) -> int | None:
    for s in elf.segments:
        if s.p_type == C.PT_LOAD and s.p_offset <= off < s.p_offset + s.p_filesz:
            return s.p_vaddr + off - s.p_offset
    return None


def _section_headers(elf: ElfFile, ranges: Sequence[_Range],
                     moved: Callable[[int], int]) -> tuple[list[dict[str, int]], list[dict[str, int]]]:
    lay = L.SHDR[elf.header.ei_class]
    view = elf.view
    rows = [dict(zip(lay.fields, r, strict=True))
            for r in view.iter_unpack(lay.fmt, elf.header.e_shoff, len(elf.sections), "section header table")]
    extra: list[dict[str, int]] = []
    for sec, row in zip(elf.sections, rows, strict=True):
        mine = [r for r in ranges if r.sec.index == sec.index]
        if sec.index == 0:
            continue
        if not mine:
            if row["sh_offset"]:
                row["sh_offset"] = moved(row["sh_offset"])
            continue
        start, stop = sec.sh_offset, sec.sh_offset + sec.sh_size
        pieces = []
        for r in mine:
            pieces.append((start, r.free_lo))
            start = r.free_hi
        if start < stop:
            pieces.append((start, stop))
        first = True
        for lo, hi in pieces:
            addr = sec.sh_addr + lo - sec.sh_offset
            if first:
                row.update(sh_offset=moved(lo), sh_size=hi - lo)
                first = False
                continue
            align = max(1, sec.sh_addralign)
            while align > 1 and addr % align:
                align //= 2
            extra.append({**row, "sh_offset": moved(lo), "sh_addr": addr, "sh_size": hi - lo,
                          "sh_addralign": align})
    return rows, extra
