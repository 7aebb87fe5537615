"""Edit an existing ELF in place: add, replace or remove non-allocated sections.

This is how devbin annotates a vendor's file (a cubin, an AMDGPU code object)
without disturbing anything the vendor's loader reads.  The rules, in order:

1. No change requested -> the output *is* the input, byte for byte.
2. Everything the loader can see keeps its offset and its bytes: the ELF
   header (apart from ``e_shoff``/``e_shnum``/``e_shstrndx``), the program
   header table, every byte covered by a segment, and every section that was
   not replaced or removed.  Symbol values, relocations and loadable bytes are
   therefore unchanged.
3. New and replaced section contents are appended after the last byte of
   (2), each at its alignment, in section-index order; then comes a new
   section header table.  When a new section name is needed, the vendor's
   name table stays where it is, untouched: a new ``.shstrtab`` holding the
   old names plus the new ones is appended as the last section and
   ``e_shstrndx`` points at it (a later edit replaces that one), so
   every original section header keeps its bytes and ``cuobjdump -elf``
   lists the original sections exactly as before.  Bytes that
   belonged only to a removed or replaced section, or to the old section
   header table, and that no segment covers, are zeroed so no stale data is
   left behind.
4. New sections take the next indices, so existing indices do not move.
   Removing a section renumbers the ones after it; every reference by
   section index is rewritten to match: ``sh_link``, ``sh_info`` where it is a
   section index (``SHT_REL``/``SHT_RELA`` or ``SHF_INFO_LINK``), symbol
   ``st_shndx`` (in place: tables keep their size), ``SHT_SYMTAB_SHNDX`` words
   and ``SHT_GROUP`` members.  A section still referenced cannot be removed.
   Allocated sections can be neither removed nor replaced.

Why not rebuild the file from a model, as LIEF does?  Vendor ELF carries
semantics no generic writer knows (NVIDIA keeps the register count in the top
byte of ``.text`` ``sh_info``; string tables are shared with symbols), and a
rebuild changes bytes the driver reads: LIEF's no-op rewrite of a cubin
changes 420 bytes and cuobjdump then reports REG:0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from devbin.binary import Emitter, align_up
from devbin.errors import FormatError, UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf import layout as L
from devbin.formats.elf.reader import ElfFile, ElfHeader, Section

__all__ = ["APPENDED_NAME_TABLE", "ElfEditor", "NewSection"]

APPENDED_NAME_TABLE = ".shstrtab"


@dataclass(slots=True)
class _Entry:
    """A section in the edited file: original header fields, plus new data if changed."""

    orig: Section | None
    name: str
    sh_type: int
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_info: int
    sh_addralign: int
    sh_entsize: int
    sh_name: int = 0
    data: bytes | None = None  # None: keep original bytes at the original offset
    removed: bool = False


@dataclass(frozen=True, slots=True)
class NewSection:
    """What to add: ``link`` may be a section name (resolved at write time) or index."""

    name: str
    data: bytes
    sh_type: int = C.SHT_PROGBITS
    sh_flags: int = 0
    link: str | int = 0
    info: int = 0
    align: int = 1
    entsize: int = 0


class ElfEditor:
    """An editable model of an existing ELF that writes back with minimal change."""

    def __init__(self, elf: ElfFile) -> None:
        self.elf = elf
        self._entries: list[_Entry] = [
            _Entry(
                orig=s, name=s.name, sh_type=s.sh_type, sh_flags=s.sh_flags, sh_addr=s.sh_addr,
                sh_offset=s.sh_offset, sh_size=s.sh_size, sh_link=s.sh_link, sh_info=s.sh_info,
                sh_addralign=s.sh_addralign, sh_entsize=s.sh_entsize, sh_name=s.sh_name,
            )
            for s in elf.sections
        ]
        self._pending_links: dict[int, str] = {}
        self._changed = False

    # -- queries ------------------------------------------------------------------
    def _find(self, key: str | int) -> int:
        if isinstance(key, int):
            if 0 < key < len(self._entries) and not self._entries[key].removed:
                return key
            raise UsageError(f"no section with index {key}")
        for i, e in enumerate(self._entries):
            if e.name == key and not e.removed and i:
                return i
        raise UsageError(f"no section named {key!r}")

    def has_section(self, name: str) -> bool:
        return any(e.name == name and not e.removed for e in self._entries[1:])

    # -- edits ----------------------------------------------------------------------
    def add_section(self, new: NewSection) -> None:
        """Append a non-allocated section; its index is the next free one."""
        if new.sh_flags & C.SHF_ALLOC:
            raise UsageError(f"cannot add allocated section {new.name!r} in place: it would need a segment")
        if not self._entries:
            self._entries.append(_Entry(None, "", 0, 0, 0, 0, 0, 0, 0, 0, 0))
            self._entries.append(_Entry(None, ".shstrtab", C.SHT_STRTAB, 0, 0, 0, 0, 0, 0, 1, 0, data=b"\0"))
        idx = len(self._entries)
        link = 0
        if isinstance(new.link, str):
            self._pending_links[idx] = new.link
        else:
            link = new.link
        self._entries.append(_Entry(
            orig=None, name=new.name, sh_type=new.sh_type, sh_flags=new.sh_flags, sh_addr=0, sh_offset=0,
            sh_size=len(new.data), sh_link=link, sh_info=new.info, sh_addralign=new.align,
            sh_entsize=new.entsize, data=bytes(new.data),
        ))
        self._changed = True

    def replace_section(self, key: str | int, data: bytes) -> None:
        """Give a non-allocated section new contents (it moves to the end of the file)."""
        i = self._find(key)
        e = self._entries[i]
        if e.sh_flags & C.SHF_ALLOC:
            raise UsageError(f"cannot replace allocated section {e.name!r} in place")
        if e.sh_type == C.SHT_NOBITS:
            raise UsageError(f"cannot give SHT_NOBITS section {e.name!r} contents")
        if e.orig is not None and e.data is None and bytes(e.orig.data) == bytes(data):
            return
        e.data = bytes(data)
        e.sh_size = len(data)
        self._changed = True

    def set_or_add(self, new: NewSection) -> None:
        """Replace the section named ``new.name`` if it exists, else add it."""
        if self.has_section(new.name):
            self.replace_section(new.name, new.data)
        else:
            self.add_section(new)

    def remove_section(self, key: str | int) -> None:
        """Remove a non-allocated section that no other section or symbol refers to."""
        i = self._find(key)
        e = self._entries[i]
        if e.sh_flags & C.SHF_ALLOC:
            raise UsageError(f"cannot remove allocated section {e.name!r} in place")
        if i == self._shstrndx():
            raise UsageError("cannot remove the section name string table")
        for j, other in enumerate(self._entries):
            if other.removed or j == i:
                continue
            if other.sh_link == i or (_info_is_index(other) and other.sh_info == i):
                raise UsageError(f"cannot remove section {e.name!r}: section [{j}] {other.name!r} refers to it")
        for table in self.elf.symbol_tables.values():
            if self._entries[table.section.index].removed:
                continue
            for s in table:
                if s.st_shndx == i:
                    raise UsageError(f"cannot remove section {e.name!r}: symbol {s.name or s.index!r} is defined in it")
        e.removed = True
        self._changed = True

    # -- writing ------------------------------------------------------------------------
    def _shstrndx(self) -> int:
        return self.elf.header.e_shstrndx if self.elf.sections else 1

    def _is_appended_name_table(self, i: int) -> bool:
        """True when section ``i`` is a name table an earlier edit appended.

        Such a table is named ``.shstrtab`` and starts with the whole of an earlier string
        table (the one it extended); replacing it then loses nothing of the vendor's.
        """
        e = self._entries[i]
        if e.name != APPENDED_NAME_TABLE or e.orig is None:
            return False
        mine = bytes(e.orig.data)
        return any(o.orig is not None and o.sh_type == C.SHT_STRTAB and 1 < len(o.orig.data) < len(mine)
                   and mine.startswith(bytes(o.orig.data)) for o in self._entries[1:i])

    def write(self) -> bytes:
        """Plan the new layout, then emit it.  Unchanged input gives identical bytes."""
        if not self._changed:
            return self.elf.bytes()
        h = self.elf.header
        ec = h.ei_class
        entries = list(self._entries)  # write() may append a name table; keep the editor reusable
        # 1. index map (old -> new) for removals; reject dangling references.
        index_map: dict[int, int] = {}
        kept: list[int] = []
        for i, e in enumerate(entries):
            if not e.removed:
                index_map[i] = len(kept)
                kept.append(i)
        for i, name in self._pending_links.items():
            entries[i].sh_link = self._find(name)
        # 2. section names: reuse strings of the existing table, append the rest.
        shstr_i = self._shstrndx()
        if not 0 < shstr_i < len(entries) or entries[shstr_i].sh_type != C.SHT_STRTAB:
            raise FormatError("cannot rewrite section names: e_shstrndx does not point at a string table",
                              fmt="elf", value=shstr_i)
        shstr = entries[shstr_i]
        table = bytearray(shstr.data if shstr.data is not None else bytes(shstr.orig.data))  # type: ignore[union-attr]
        for i in kept:
            e = entries[i]
            if e.orig is None or e.name != e.orig.name:
                e.sh_name = _intern(table, e.name)
        if bytes(table) != (bytes(shstr.orig.data) if shstr.orig is not None and shstr.data is None else shstr.data):
            if shstr.orig is not None and not self._is_appended_name_table(shstr_i):
                # Leave the vendor's name table (and its section header) exactly as it was: the new
                # names go into a new table appended as the last section, and e_shstrndx points there.
                sh_name = _intern(table, APPENDED_NAME_TABLE)
                new = _Entry(None, APPENDED_NAME_TABLE, C.SHT_STRTAB, 0, 0, 0, len(table), 0, 0, 1, 0,
                             sh_name=sh_name, data=bytes(table))
                entries.append(new)
                index_map[len(entries) - 1] = len(kept)
                kept.append(len(entries) - 1)
                shstr_i = len(entries) - 1
            else:
                shstr.data = bytes(table)
                shstr.sh_size = len(table)
        # 3. symbol tables, SHT_SYMTAB_SHNDX and groups: patch section indices in place (same size).
        if any(index_map[i] != i for i in kept):
            self._renumber_contents(index_map)
        # 4. fixed ranges: everything the loader may read keeps its place.
        fixed_end = L.EHDR_SIZE[ec]
        if h.e_phnum:
            fixed_end = max(fixed_end, h.e_phoff + h.e_phnum * L.PHDR[ec].size)
        for seg in self.elf.segments:
            if seg.p_filesz:
                fixed_end = max(fixed_end, seg.p_offset + seg.p_filesz)
        freed: list[tuple[int, int]] = []
        if h.e_shnum:
            freed.append((h.e_shoff, h.e_shnum * L.SHDR[ec].size))
        for e in entries:
            o = e.orig
            if o is None or not o.file_size:
                continue
            if e.removed or e.data is not None:
                freed.append((o.sh_offset, o.sh_size))
            else:
                fixed_end = max(fixed_end, o.sh_offset + o.sh_size)
        # 5. place moved/new contents after the fixed region.
        pos = fixed_end
        placed: list[int] = []
        for i in kept:
            e = entries[i]
            if e.data is not None and e.sh_type != C.SHT_NOBITS:
                pos = align_up(pos, _placement_alignment(e))
                e.sh_offset = pos
                pos += len(e.data)
                placed.append(i)
        shoff = align_up(pos, 8 if ec == C.ELFCLASS64 else 4)
        # 6. emit.
        original = self.elf.bytes()
        out = Emitter(h.little)
        out.write(original[:min(fixed_end, len(original))])
        covered = [(s.p_offset, s.p_filesz) for s in self.elf.segments if s.p_filesz]
        for off, size in freed:
            _zero_uncovered(out.buf, off, size, covered, fixed_end)
        for i in placed:
            e = entries[i]
            out.pad_to(e.sh_offset, e.name)
            out.write(e.data)  # type: ignore[arg-type]
        out.pad_to(shoff, "section header table")
        count = len(kept)
        lay = L.SHDR[ec]
        for new_i, i in enumerate(kept):
            e = entries[i]
            link = index_map.get(e.sh_link, e.sh_link) if e.sh_link else 0
            info = index_map.get(e.sh_info, e.sh_info) if _info_is_index(e) and e.sh_info else e.sh_info
            size = e.sh_size
            if new_i == 0:  # extended numbering lives in section 0
                size = count if count >= C.SHN_LORESERVE else (e.sh_size if e.orig is not None else 0)
                new_str = index_map[shstr_i]
                link = new_str if new_str >= C.SHN_LORESERVE else (e.sh_link if e.orig is not None else 0)
            values = {
                "sh_name": e.sh_name, "sh_type": e.sh_type, "sh_flags": e.sh_flags, "sh_addr": e.sh_addr,
                "sh_offset": e.sh_offset, "sh_size": size, "sh_link": link, "sh_info": info,
                "sh_addralign": e.sh_addralign, "sh_entsize": e.sh_entsize,
            }
            out.pack(lay.fmt, *(values[f] for f in lay.fields))
        data = bytearray(out.getvalue())
        new_str = index_map[shstr_i]
        hdr = {
            "e_shoff": shoff,
            "e_shnum": 0 if count >= C.SHN_LORESERVE else count,
            "e_shstrndx": C.SHN_XINDEX if new_str >= C.SHN_LORESERVE else new_str,
            "e_shentsize": lay.size,
        }
        _patch_header(data, h, hdr)
        return bytes(data)

    def _renumber_contents(self, index_map: dict[int, int]) -> None:
        ec = self.elf.header.ei_class
        little = self.elf.header.little
        for table in self.elf.symbol_tables.values():
            e = self._entries[table.section.index]
            if e.removed:
                continue
            raw = bytearray(e.data if e.data is not None else bytes(table.section.data))
            lay = L.SYM[ec]
            shndx_pos = lay.fields.index("st_shndx")
            changed = False
            for s in table:
                old = _raw_shndx(raw, s.index, lay, shndx_pos, little)
                if 0 < old < C.SHN_LORESERVE and index_map.get(old, old) != old:
                    _set_raw_shndx(raw, s.index, lay, shndx_pos, little, index_map[old])
                    changed = True
            if changed:
                e.data = bytes(raw)
        for e in self._entries:
            if e.removed or e.sh_type not in (C.SHT_SYMTAB_SHNDX, C.SHT_GROUP):
                continue
            raw = bytearray(e.data if e.data is not None else bytes(e.orig.data))  # type: ignore[union-attr]
            fmt = ("<" if little else ">") + "I"
            start = 4 if e.sh_type == C.SHT_GROUP else 0  # a group starts with its flag word
            for off in range(start, len(raw) - 3, 4):
                (w,) = struct.unpack_from(fmt, raw, off)
                if 0 < w < C.SHN_LORESERVE or (e.sh_type == C.SHT_GROUP and w):
                    struct.pack_into(fmt, raw, off, index_map.get(w, w))
            if e.orig is None or bytes(raw) != bytes(e.orig.data):
                e.data = bytes(raw)


_MAX_ALIGN = 1 << 16


def _placement_alignment(e: _Entry) -> int:
    """The alignment to place a moved section at.

    ``sh_addralign`` is kept as read, whatever it holds; but to *place* the
    section it must be a power of two of sane size.  A corrupt value is an
    error rather than a file padded to exabytes.
    """
    a = max(e.sh_addralign, 1)
    if a & (a - 1) or a > _MAX_ALIGN:
        raise FormatError(f"cannot place section {e.name!r}: sh_addralign is not a power of two up to "
                          f"{_MAX_ALIGN:#x}", fmt="elf", value=e.sh_addralign)
    return a


def _info_is_index(e: _Entry) -> bool:
    """``sh_info`` holds a section index for relocation sections and SHF_INFO_LINK sections."""
    return e.sh_type in (C.SHT_REL, C.SHT_RELA) or bool(e.sh_flags & C.SHF_INFO_LINK)


def _intern(table: bytearray, name: str) -> int:
    raw = name.encode("utf-8") + b"\0"
    at = table.find(raw)  # any occurrence works: a suffix of another name is a valid name
    if at >= 0:
        return at
    if not table or table[-1] != 0:
        table += b"\0"
    at = len(table)
    table += raw
    return at


def _zero_uncovered(buf: bytearray, off: int, size: int, covered: list[tuple[int, int]], limit: int) -> None:
    """Zero ``[off, off+size)`` below ``limit`` except where a segment covers it."""
    end = min(off + size, limit)
    for p in range(off, end):
        if not any(s <= p < s + n for s, n in covered):
            buf[p] = 0


def _raw_shndx(raw: bytearray, i: int, lay: L.Layout, pos: int, little: bool) -> int:
    return struct.unpack_from(("<" if little else ">") + lay.fmt, raw, i * lay.size)[pos]  # type: ignore[no-any-return]


def _set_raw_shndx(raw: bytearray, i: int, lay: L.Layout, pos: int, little: bool, value: int) -> None:
    fmt = ("<" if little else ">") + lay.fmt
    vals = list(struct.unpack_from(fmt, raw, i * lay.size))
    vals[pos] = value
    struct.pack_into(fmt, raw, i * lay.size, *vals)


def _patch_header(data: bytearray, h: ElfHeader, values: dict[str, int]) -> None:
    lay = L.EHDR[h.ei_class]
    fmt = ("<" if h.little else ">") + lay.fmt
    vals = dict(zip(lay.fields, struct.unpack_from(fmt, data, L.EI_NIDENT), strict=True))
    vals.update(values)
    struct.pack_into(fmt, data, L.EI_NIDENT, *(vals[f] for f in lay.fields))

