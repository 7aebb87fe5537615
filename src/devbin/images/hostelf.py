"""NVIDIA fatbins: bare fatbin files, and the fatbins of a host ELF with their wrappers.

Where a host ELF (object, shared library, executable) keeps fatbins, after
NVIDIA's public header ``include/fatbinary_section.h`` (CUDA toolkit; section names, wrapper
magic) and experiments with nvcc 13.0 (tests/test_nvidia_cli.py):

* ``.nv_fatbin`` (whole-program and ``nvcc -dlink`` output: the executable images; a linked
  program holds several fatbins back to back, each 8-aligned) and ``__nv_relfatbin``
  (``-rdc`` objects: relocatable images).  Zero bytes between or after the fatbins are
  section padding and skipped.

  **Scope, as cuobjdump has it**: when the ELF holds a fatbin in ``.nv_fatbin``,
  ``cuobjdump``'s default reads only that section and ``cuobjdump -all`` adds the
  ``__nv_relfatbin`` images *after* the ``.nv_fatbin`` ones, whatever the section order.
  The walk does the same: ``.nv_fatbin`` first, then ``__nv_relfatbin``, which is left out
  unless ``all`` when ``.nv_fatbin`` held a fatbin.  An ELF without executable images (an
  ``-rdc`` object) gives its ``__nv_relfatbin`` images either way.
* ``.nvFatBinSegment``: 24-byte ``__fatBinC_Wrapper_t`` records (version 1, or 2 for the
  ``-dlink`` "link" wrapper), each reported in :attr:`ScanReport.wrappers` with the fatbin it
  points at.  In a relocatable object the pointer on disk is 0 and the real target is a
  relocation at wrapper+8, resolved through the relocation's symbol and addend; in
  executables and libraries it is an address, resolved through the section addresses.  A
  fatbin a wrapper points at that the section walk did not find is parsed there and reported.
* every other ``SHT_PROGBITS`` section (``.rodata``, ``.data`` ...), where libraries keep
  fatbins for ``cuModuleLoadData``: the magic ``50 ed 55 ba`` is looked for at 8-aligned
  addresses, and a hit counts only when the whole fatbin parses, it has at least one entry and
  every entry has the entry version 0x0101 and a known kind (random bytes holding the magic
  are not reported).  cuobjdump does not look there.  Only in a file without
  ``.nvFatBinSegment`` wrappers: where the runtime registers fatbins, the wrappers say where
  they are (a search of a large library's data costs more than the rest of a listing), so
  the search is for files that load theirs by hand.  The sections are searched in place,
  never copied.
"""

from __future__ import annotations

from collections.abc import Iterator

from devbin.binary import ByteView, mapped
from devbin.errors import DeviceBinaryError
from devbin.formats.elf import constants as EC
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.fatbin import Fatbin, FatbinEntry, elf_image_size, parse_fatbin, parse_wrapper
from devbin.formats.fatbin import constants as FC
from devbin.images.address import Entry, SectionStep
from devbin.images.frame import Frame, Hit
from devbin.images.record import DATA, FATBIN, FATBIN_CONTAINER, OPAQUE, Image, fatbin_kind
from devbin.images.scanreport import ScanReport, WrapperInfo
from devbin.images.sniff import vendor_of

__all__ = ["HostElf", "fatbin_images", "walk_fatbins"]

#: (file offset, version, target section index, offset in it) of one wrapper.
Wrapper = tuple[int, int, int | None, int | None]


def entry_size(e: FatbinEntry) -> int:
    """The bytes ``extract`` writes for ``e`` (see :attr:`Image.size`), without decoding a compressed one."""
    if e.is_compressed:
        return e.uncompressed_size
    raw = e.raw_payload
    if e.kind == FC.KIND_ELF:
        size = elf_image_size(ByteView(raw, fmt="elf"))
        return len(raw) if size is None else size
    if e.kind == FC.KIND_PTX:
        end = ByteView(raw).find(b"\0")
        return len(raw) if end < 0 else end
    return len(raw)


def fatbin_images(fb: Fatbin, frame: Frame, section: str, index: int, offset: int,
                  wrapper_version: int | None) -> Iterator[Hit]:
    """One image per entry of the ``index``-th fatbin of ``section`` ("" for a bare fatbin file)."""
    base = frame.address.child(SectionStep(section)) if section else frame.address
    for e in fb.entries:
        kind = fatbin_kind(e.kind)
        meta: list[tuple[str, str]] = []
        if e.identifier:
            meta.append(("identifier", e.identifier))
        if e.options:
            meta.append(("ptxas-options", e.options))
        if kind == DATA:
            meta.append(("fatbin-kind", e.kind_name))
        if wrapper_version is not None:
            meta.append(("wrapper-version", str(wrapper_version)))
        image = Image(address=base.child(Entry(index, e.index)), vendor=vendor_of(FATBIN), kind=kind, arch=e.arch_name,
                      size=entry_size(e), stored_size=e.payload_size,
                      compression=OPAQUE if e.is_opaque else e.compression, container=FATBIN_CONTAINER,
                      section=section, offset=offset, metadata=tuple(meta), native=e)
        yield image, frame


def walk_fatbins(view: ByteView, rep: ScanReport, where: str, label: str) -> Iterator[tuple[int, int, Fatbin]]:
    """Fatbins stored back to back from offset 0 of ``view``; zero padding between them is
    skipped.  Yields ``(index, offset in view, fatbin)``; a corrupt fatbin ends the walk with a
    warning (its size is unknown, so nothing after it can be trusted)."""
    pos = 0
    index = 0
    n = len(view)
    while pos + 4 <= n:
        if not view.startswith(FC.FATBIN_MAGIC_BYTES, pos):
            nxt = view.find(FC.FATBIN_MAGIC_BYTES, pos)
            gap_end = n if nxt < 0 else nxt
            if any(view.bytes_at(pos, gap_end - pos)):
                rep.warn(where, f"{label}: bytes that are no fatbin at offset {view.base + pos:#x}; "
                                "the rest is not read")
                return
            if nxt < 0:
                return
            pos = nxt
        try:
            fb = parse_fatbin(view.sub(pos, n - pos), where=f"{label} fatbin #{index}")
        except DeviceBinaryError as e:
            rep.warn(where, str(e))
            return
        yield index, pos, fb
        index += 1
        pos += max(fb.size, 8)
        pos += -pos % 8


def strict_fatbin(view: ByteView, offset: int, where: str) -> Fatbin | None:
    """The fatbin at ``offset`` when everything in it validates, else None (a scan hit in data)."""
    try:
        fb = parse_fatbin(view.sub(offset, len(view) - offset), where=where)
    except DeviceBinaryError:
        return None
    if fb.header_size != FC.FATBIN_HEADER_SIZE or not fb.entries:
        return None
    for e in fb.entries:
        if e.version != FC.ENTRY_VERSION or e.kind not in FC.KIND_NAMES or (e.offset - view.base - offset) % 8:
            return None
    return fb


class HostElf:
    """The fatbin search in one host ELF (see the module docstring)."""

    def __init__(self, rep: ScanReport, elf: ElfFile, frame: Frame) -> None:
        self.rep = rep
        self.elf = elf
        self.frame = frame
        # (section index, offset in section) of every fatbin found, with its wrapper version.
        self.seen: dict[tuple[int, int], int | None] = {}
        # fatbins found so far per section name: the pieces of a section devbin prune cut pages from
        # (devbin.formats.elf.pages) share its name and number its fatbins on from one another
        self.counts: dict[str, int] = {}

    def scan(self, *, all: bool = False) -> Iterator[Hit]:
        elf = self.elf
        wrappers = self.wrappers()
        pointed = {(sec, off): ver for (_, ver, sec, off) in wrappers if sec is not None and off is not None}
        results: list[Hit] = []
        executable = False
        for name in FC.SECTIONS:  # in the order cuobjdump -all reads them
            for sec in elf.sections:
                if sec.name != name or not sec.file_size:
                    continue
                skip = name == FC.REL_SECTION and executable and not all
                rep = ScanReport() if skip else self.rep  # a part cuobjdump does not read: no warnings from it
                for index, offset, fb in walk_fatbins(sec.view, rep, self.frame.where, sec.name):
                    found = self._found(sec, index, offset, fb, pointed)
                    if not skip:
                        results.extend(found)
                    executable = executable or name == FC.EXEC_SECTION
        if not wrappers:  # registered fatbins are the ones the wrappers point at: no search then
            first: dict[str, int] = {}
            for sec in elf.sections:
                first.setdefault(sec.name, sec.index)
            # in section order, the pieces of one name together in file order (their fatbins numbered on)
            for sec in sorted(elf.sections, key=lambda s: (first[s.name], s.sh_offset)):
                if self._scannable(sec):
                    results.extend(self._scan_section(sec, pointed))
        for key, ver in pointed.items():
            if key not in self.seen:
                results.extend(self._at_pointer(key, ver))
        for i, (off, ver, w_sec, w_off) in enumerate(wrappers):
            target = elf.sections[w_sec].name if w_sec is not None else ""
            t_off = elf.sections[w_sec].sh_offset + w_off if w_sec is not None and w_off is not None else None
            self.rep.wrappers.append(WrapperInfo(self.frame.where, i, off, ver, target, t_off,
                                                 (w_sec, w_off) in self.seen if w_sec is not None else False))
        yield from results

    def _found(self, sec: Section, index: int, offset: int, fb: Fatbin,
               pointed: dict[tuple[int, int], int]) -> list[Hit]:
        ver = pointed.get((sec.index, offset))
        self.seen[(sec.index, offset)] = ver
        self.counts[sec.name] = index + 1
        found = list(fatbin_images(fb, self.frame, sec.name, index, sec.sh_offset + offset, ver))
        mapped.pages_read(fb.size)  # a spilled zip member's pages given back as its fatbins are passed
        return found

    @staticmethod
    def _scannable(sec: Section) -> bool:
        return (sec.sh_type == EC.SHT_PROGBITS and sec.file_size >= FC.FATBIN_HEADER_SIZE + FC.ENTRY_HEADER_SIZE
                and sec.name not in (*FC.SECTIONS, FC.WRAPPER_SECTION))

    def _scan_section(self, sec: Section, pointed: dict[tuple[int, int], int]) -> Iterator[Hit]:
        """Fatbins at 8-aligned addresses of a data section, accepted only when they validate."""
        view = sec.view
        n = len(view)
        pos = 0
        while pos < n:
            hit = view.find(FC.FATBIN_MAGIC_BYTES, pos)
            if hit < 0:
                return
            if (sec.sh_addr + hit) % 8:
                pos = hit + 1
                continue
            fb = strict_fatbin(view, hit, f"{sec.name}+{hit:#x}")
            if fb is None:
                pos = hit + 8
                continue
            yield from self._found(sec, self.counts.get(sec.name, 0), hit, fb, pointed)
            pos = hit + max(fb.size, 8)

    def _at_pointer(self, key: tuple[int, int], ver: int) -> list[Hit]:
        """A wrapper points at a fatbin outside the sections walked: parse it there."""
        sec_index, off = key
        sec = self.elf.sections[sec_index]
        try:
            fb = parse_fatbin(sec.view.sub(off, len(sec.view) - off), where=f"{sec.name}+{off:#x}")
        except DeviceBinaryError as e:
            self.rep.warn(self.frame.where, f"fatbin wrapper points at {sec.name}+{off:#x}, which holds no fatbin: {e}")
            return []
        return self._found(sec, self.counts.get(sec.name, 0), off, fb, {key: ver})

    # -- wrappers -----------------------------------------------------------------
    def wrappers(self, section: str = FC.WRAPPER_SECTION, magic: int = FC.WRAPPER_MAGIC) -> list[Wrapper]:
        """``(file offset, version, target section index, offset in it)`` per wrapper of ``section``."""
        out: list[Wrapper] = []
        if not self.elf.header.is64:  # the 24-byte layout is the 64-bit host's; 32-bit hosts are long gone
            return out
        for sec in self.elf.sections:
            if sec.name != section or not sec.file_size:
                continue
            size = FC.WRAPPER_SIZE
            if sec.file_size % size:
                self.rep.warn(self.frame.where, f"{section} size {sec.file_size:#x} is not a multiple of {size}")
            relocs = self._relocations_for(sec)
            for i in range(sec.file_size // size):
                try:
                    w = parse_wrapper(sec.view.sub(i * size, size), where=f"{section}[{i}]", magic=magic)
                except DeviceBinaryError as e:
                    self.rep.warn(self.frame.where, str(e))
                    continue
                target = self._resolve(i * size + 8, w.data_ptr, relocs)
                out.append((sec.sh_offset + i * size, w.version, *target))
        return out

    def _relocations_for(self, sec: Section) -> dict[int, tuple[int, int]]:
        """Relocations applying to ``sec``: offset -> (target section index, offset in it)."""
        elf = self.elf
        out: dict[int, tuple[int, int]] = {}
        for rsec in elf.sections:  # only the tables applying to `sec` are decoded (not a library's .rela.dyn)
            if rsec.sh_type not in (EC.SHT_REL, EC.SHT_RELA) or rsec.sh_info != sec.index:
                continue
            relocs = elf.relocation_table(rsec.index)
            table = elf.symbol_tables.get(rsec.sh_link)
            for r in relocs:
                if table is None or r.r_sym >= len(table):
                    continue
                sym = table[r.r_sym]
                if not 0 < sym.st_shndx < len(elf.sections):
                    continue
                addend = r.r_addend
                if addend is None:  # SHT_REL: the addend is stored in place
                    try:
                        addend = sec.view.u64(r.r_offset) if elf.header.is64 else sec.view.u32(r.r_offset)
                    except DeviceBinaryError:
                        continue
                out[r.r_offset] = (sym.st_shndx, sym.st_value + addend)
        return out

    def _resolve(self, field_off: int, data_ptr: int,
                 relocs: dict[int, tuple[int, int]]) -> tuple[int | None, int | None]:
        if field_off in relocs:
            return relocs[field_off]
        if self.elf.header.e_type == EC.ET_REL or data_ptr == 0:
            return None, None
        for s in self.elf.sections:
            if s.is_alloc and s.file_size and s.sh_addr <= data_ptr < s.sh_addr + s.file_size:
                return s.index, data_ptr - s.sh_addr
        return None, None
