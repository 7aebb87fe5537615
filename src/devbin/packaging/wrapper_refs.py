"""Find and move the references a linked ELF file declares to the device-code containers of one of its sections.

A linked file (shared library, executable) refers to an address of its own image through:

* a relative dynamic relocation (``R_X86_64_RELATIVE``, ``R_AARCH64_RELATIVE``, ``R_386_RELATIVE``)
  whose target (``r_addend``, or the word in place for ``SHT_REL``) is that address; the linker
  also writes the target into the word at ``r_offset``;
* an ``SHT_RELR`` place whose word holds the address;
* a plain word in a device-code wrapper (``.nvFatBinSegment``'s ``__fatBinC_Wrapper_t``,
  ``.hipFatBinSegment``'s ``__CudaFatBinaryWrapper``: the pointer at +8), which a position-dependent
  executable holds with no relocation;
* a symbol's ``st_value`` (``.symtab``'s ``fatbinData``; ``.dynsym``).

:func:`retarget` moves every such reference into a section by an old -> new offset map, and
refuses (returns the reason) when one points anywhere but a mapped offset.  Code that addresses
the section PC-relatively leaves no relocation in a linked file and cannot be seen; device-code
containers are reached through their wrappers only (nvcc's ``__cudaRegisterFatBinary(&wrapper)``,
clang's ``__hipRegisterFatBinary(&__hip_fatbin_wrapper)``), and :func:`retarget` asks that every
mapped offset be the target of at least one wrapper.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from devbin.binary.mapped import Rewritable
from devbin.formats.elf import constants as C
from devbin.formats.elf import layout as L
from devbin.formats.elf.pages import RELATIVE_RELOCATION, file_offset, relr_places
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.fatbin import constants as FC
from devbin.formats.fatbin.wrapper import HIP_WRAPPER_MAGIC
from devbin.images.scanreport import HIP_WRAPPER_SECTION, WRAPPER_SECTION

__all__ = ["WRAPPER_SECTIONS", "retarget"]

#: Wrapper sections: name -> magic of their 24-byte records (formats.fatbin.wrapper).
WRAPPER_SECTIONS = {WRAPPER_SECTION: FC.WRAPPER_MAGIC, HIP_WRAPPER_SECTION: HIP_WRAPPER_MAGIC}
_WRAPPER_SIZE = FC.WRAPPER_SIZE


def retarget(elf: ElfFile, buf: Rewritable, sec: Section, moves: Mapping[int, int], *,
             write: bool = True, span: tuple[int, int] | None = None) -> tuple[str | None, set[int]]:
    """Rewrite in ``buf`` (``elf``'s bytes) every reference to ``sec`` + old offset as ``sec`` + ``moves[old]``.

    Returns (reason, the offsets in ``sec`` some reference targets).  Nothing is written and the
    reason is given when a reference targets ``sec`` at an offset ``moves`` lacks, when a dynamic
    symbol lies in ``sec``, or when an offset that moves is the target of no wrapper.  ``write=False``
    only surveys.  ``span``: the offsets ``[lo, hi)`` of ``sec`` that move (a run of containers in a data
    section such as ``.rodata``, whose other data stays where it is): references elsewhere in ``sec``
    are neither moved nor refused, and only a dynamic symbol inside the span is.  None: all of ``sec``.
    """
    reached: set[int] = set()
    reason = _retarget(elf, buf, sec, moves, reached, write, span)
    return reason, {a - sec.sh_addr for a in reached}


def _retarget(elf: ElfFile, buf: Rewritable, sec: Section, moves: Mapping[int, int], reached: set[int],
              write: bool, span: tuple[int, int] | None) -> str | None:
    h = elf.header
    if not h.is64 and h.e_machine != 3:
        return "32-bit files other than i386 are not handled"
    end = "<" if h.little else ">"
    wsize = 8 if h.is64 else 4
    wfmt = end + ("Q" if h.is64 else "I")
    lo = sec.sh_addr
    in_lo, in_hi = (lo + span[0], lo + span[1]) if span is not None else (lo, lo + sec.sh_size)
    patches: dict[int, tuple[str, int]] = {}  # file offset -> (struct format, value)

    def inside(addr: int) -> bool:
        return in_lo <= addr < in_hi

    def target(addr: int, what: str) -> int | str:
        new = moves.get(addr - lo)
        if new is None:
            return f"{what} points at {sec.name}+{addr - lo:#x}, which is not a container start"
        return lo + new

    def word(place: int, old: int, what: str) -> str | None:
        off = file_offset(elf, place, wsize)
        if off is None:
            return None
        have = struct.unpack_from(wfmt, buf, off)[0]
        if have == old:
            new = target(old, what)
            if isinstance(new, str):
                return new
            patches[off] = (wfmt, new)
        return None

    relative = RELATIVE_RELOCATION.get(h.e_machine)
    for rsec in elf.sections:
        if rsec.sh_type not in (C.SHT_REL, C.SHT_RELA) or not rsec.is_alloc:
            continue
        lay = (L.RELA if rsec.sh_type == C.SHT_RELA else L.REL)[h.ei_class]
        for i, rel in enumerate(elf.relocation_table(rsec.index)):
            if rel.r_type != relative:
                continue
            old = rel.r_addend
            if old is None:
                off = file_offset(elf, rel.r_offset, wsize)
                old = struct.unpack_from(wfmt, buf, off)[0] if off is not None else None
            if old is None or not inside(old):
                continue
            new = target(old, f"a relative relocation at {rel.r_offset:#x}")
            if isinstance(new, str):
                return new
            reached.add(old)
            if rel.r_addend is not None:
                pos = rsec.sh_offset + i * lay.size + lay.fmt.index("q") * wsize
                patches[pos] = (end + "q", new)
            bad = word(rel.r_offset, old, f"the word at {rel.r_offset:#x}")
            if bad:
                return bad
    for rsec in elf.sections:
        if rsec.sh_type != C.SHT_RELR:
            continue
        for place in relr_places(elf, rsec):
            off = file_offset(elf, place, wsize)
            old = struct.unpack_from(wfmt, buf, off)[0] if off is not None else None
            if old is not None and inside(old):
                bad = word(place, old, f"a RELR place at {place:#x}")
                if bad:
                    return bad
                reached.add(old)
    for wsec in elf.sections:
        magic = WRAPPER_SECTIONS.get(wsec.name)
        if magic is None or not wsec.file_size or not h.is64:
            continue
        for k in range(wsec.file_size // _WRAPPER_SIZE):
            at = wsec.sh_offset + k * _WRAPPER_SIZE
            if struct.unpack_from(end + "I", buf, at)[0] != magic:
                continue
            ptr = struct.unpack_from(wfmt, buf, at + 8)[0]
            if at + 8 in patches:
                reached.add(ptr)
                continue
            if inside(ptr):
                new = target(ptr, f"wrapper {wsec.name}[{k}]")
                if isinstance(new, str):
                    return new
                patches[at + 8] = (wfmt, new)
                reached.add(ptr)
    if elf.dynsym is not None:  # by the table's columns: a Symbol made only for the one named
        c = elf.dynsym.columns
        for i, (shndx, value) in enumerate(zip(c.st_shndx, c.st_value, strict=True)):
            if shndx == sec.index and shndx != C.SHN_UNDEF and (span is None or inside(value)):
                return f"dynamic symbol {elf.dynsym[i].name!r} lies in {sec.name}"
    unreached = sorted(o for o, n in moves.items() if n != o and lo + o not in reached)
    if unreached:
        return f"{sec.name}+{unreached[0]:#x} is the target of no wrapper"
    if not write:
        return None
    symtab = elf.symtab
    if symtab is not None:
        lay_s = L.SYM[h.ei_class]
        pos_v = lay_s.fields.index("st_value")
        c = symtab.columns  # no Symbol made: a library's table holds a million of them
        for i, (shndx, value) in enumerate(zip(c.st_shndx, c.st_value, strict=True)):
            if shndx == sec.index and (value - lo) in moves:
                at = symtab_offset(elf, i)
                fmt = end + lay_s.fmt
                vals = list(struct.unpack_from(fmt, buf, at))
                vals[pos_v] = lo + moves[value - lo]
                struct.pack_into(fmt, buf, at, *vals)
    for off, (fmt, value) in patches.items():
        struct.pack_into(fmt, buf, off, value)
    return None


def symtab_offset(elf: ElfFile, index: int) -> int:
    """The file offset of symbol ``index`` of ``.symtab``."""
    sec = next(s for s in elf.sections if s.sh_type == C.SHT_SYMTAB)
    return sec.sh_offset + index * L.SYM[elf.header.ei_class].size
