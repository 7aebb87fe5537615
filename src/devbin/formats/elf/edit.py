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
   header table, are zeroed so no stale data is left behind, except where
   something kept lies: the ELF header, the program header table, a
   segment's file bytes or a kept section.  A valid file may overlap its
   tables (the gABI asks only that each lie in the file), so the freed ranges
   are cut around every kept one.  The one change an edit makes to bytes it
   keeps is the ELF header's ``e_shoff``/``e_shnum``/``e_shstrndx``: a file
   whose program header table or a kept section overlaps those fields is
   refused (:class:`~devbin.errors.FormatError`) rather than edited.
4. New sections take the next indices, so existing indices do not move.
   Removing a section renumbers the ones after it; every reference by
   section index is rewritten to match: ``sh_link``, ``sh_info`` where it is a
   section index (``SHT_REL``/``SHT_RELA`` or ``SHF_INFO_LINK``), symbol
   ``st_shndx`` (in place: tables keep their size), ``SHT_SYMTAB_SHNDX`` words
   and ``SHT_GROUP`` members.  A section still referenced cannot be removed.
   Allocated sections can be neither removed nor replaced, with one exception:
5. :meth:`ElfEditor.replace_relocatable_section` replaces an allocated section of
   a *relocatable object* (``ET_REL`` with no program headers).  Such a file has
   no segments and no addresses yet: the linker places every section, so an
   allocated section may move and change size like any other (nvcc's
   ``.nv_fatbin``/``__nv_relfatbin``, clang's ``.hip_fatbin`` are ``SHF_ALLOC``
   in objects; ``devbin prune`` rewrites them).  What refers to offsets *inside*
   the section is fixed up through an offset map the caller gives (old offset ->
   new offset, for the offsets that stay meaningful, typically the start and end of
   each container in the section): the ``st_value``/``st_size`` of every symbol
   defined in the section (nvcc's ``fatbinData``), and the addend of every
   ``SHT_RELA`` relocation whose symbol is defined in the section (the
   ``.nvFatBinSegment`` wrapper's ``R_X86_64_64 .nv_fatbin + 0``).  A symbol or a
   relocation target at an offset the map does not name, an ``SHT_REL``
   relocation whose in-place addend would have to change, and a relocation
   section that applies *to* the replaced section (its offsets would be stale)
   are errors: the edit is refused rather than leaving a dangling reference.
6. :meth:`ElfEditor.compact_relocatable` asks for the *compact* layout of an
   ``ET_REL`` object instead of (3): every section with file bytes is placed
   again, in its original file order, at ``align_up(end of the previous one,
   sh_addralign)`` right after the ELF header (an empty or ``NOBITS`` section
   takes no bytes but moves the position to its alignment, as the assembler and
   ``nvprune`` lay objects out), and the section header table follows.
   Nothing in a relocatable object refers to file offsets except
   ``sh_offset`` and ``e_shoff``, so this is safe, and a section that shrank
   makes the file smaller (rule 3 would leave a zeroed hole and append).

Why not rebuild the file from a model, as LIEF does?  Vendor ELF carries
semantics no generic writer knows (NVIDIA keeps the register count in the top
byte of ``.text`` ``sh_info``; string tables are shared with symbols), and a
rebuild changes bytes the driver reads: LIEF's no-op rewrite of a cubin
changes 420 bytes and cuobjdump then reports REG:0.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from devbin.binary import Emitter, align_up
from devbin.binary.spans import merge_ranges, subtract_ranges
from devbin.errors import FormatError, UsageError, quote
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
        self._compact = False

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

    def replace_relocatable_section(self, key: str | int, data: bytes, offset_map: Mapping[int, int]) -> None:
        """Give a section of an ``ET_REL`` object new contents even when it is allocated (rule 5 above).

        ``offset_map`` maps old offsets in the section to new ones; every symbol defined in the
        section and every relocation target in it must sit at a mapped offset (and a sized symbol
        must end at one).  The section's symbols and ``SHT_RELA`` addends are rewritten to match.
        """
        h = self.elf.header
        if h.e_type != C.ET_REL or self.elf.segments:
            raise UsageError("only a relocatable object (ET_REL, no program headers) can have allocated "
                             "sections replaced; linked files keep their layout")
        i = self._find(key)
        e = self._entries[i]
        if e.sh_type == C.SHT_NOBITS:
            raise UsageError(f"cannot give SHT_NOBITS section {e.name!r} contents")
        for j, other in enumerate(self._entries):
            if not other.removed and other.sh_type in (C.SHT_REL, C.SHT_RELA) and other.sh_info == i and j:
                raise UsageError(f"cannot rewrite section {e.name!r}: relocation section [{j}] {other.name!r} "
                                 "applies to it, and its offsets would no longer fit")

        def moved(offset: int, what: str) -> int:
            if offset not in offset_map:
                raise UsageError(f"cannot rewrite section {e.name!r}: {what} points at offset {offset:#x}, "
                                 "which is no container boundary")
            return offset_map[offset]

        ec = h.ei_class
        sym_lay = L.SYM[ec]
        order = "<" if h.little else ">"
        in_section: dict[int, dict[int, int]] = {}  # symtab index -> symbol index -> new st_value
        for t_index, table in self.elf.symbol_tables.items():
            if self._entries[t_index].removed:
                continue
            raw: bytearray | None = None
            values: dict[int, int] = {}
            for sym in table:
                if sym.index == 0 or sym.st_shndx != i:
                    continue
                new_value = moved(sym.st_value, f"symbol {sym.name or sym.index!r}")
                new_size = sym.st_size
                if sym.st_size:
                    new_size = moved(sym.st_value + sym.st_size, f"the end of symbol {sym.name or sym.index!r}")
                    new_size -= new_value
                values[sym.index] = new_value
                if (new_value, new_size) != (sym.st_value, sym.st_size):
                    if raw is None:
                        cur = self._entries[t_index]
                        raw = bytearray(cur.data if cur.data is not None else bytes(table.section.data))
                    fields = dict(zip(sym_lay.fields, struct.unpack_from(order + sym_lay.fmt, raw,
                                                                         sym.index * sym_lay.size), strict=True))
                    fields["st_value"], fields["st_size"] = new_value, new_size
                    struct.pack_into(order + sym_lay.fmt, raw, sym.index * sym_lay.size,
                                     *(fields[f] for f in sym_lay.fields))
            in_section[t_index] = values
            if raw is not None:
                self._entries[t_index].data = bytes(raw)
        for r_index, relocs in self.elf.relocation_tables.items():
            rsec = self._entries[r_index]
            if rsec.removed:
                continue
            values = in_section.get(rsec.sh_link, {})
            sym_table = self.elf.symbol_tables.get(rsec.sh_link)
            if not values or sym_table is None:
                continue
            rel_raw: bytearray | None = None
            lay = L.RELA[ec]
            for row, r in enumerate(relocs):
                if r.r_sym not in values:
                    continue
                old_value = sym_table[r.r_sym].st_value
                addend = r.r_addend
                if addend is None:
                    if values[r.r_sym] != old_value:
                        raise UsageError(f"cannot rewrite section {e.name!r}: SHT_REL relocation in "
                                         f"{rsec.name!r} has its addend in place and the target moved")
                    continue
                target = moved(old_value + addend, f"relocation {row} of {rsec.name!r}")
                new_addend = target - values[r.r_sym]
                if new_addend == addend:
                    continue
                if rel_raw is None:
                    rel_raw = bytearray(rsec.data if rsec.data is not None
                                        else bytes(self.elf.sections[r_index].data))
                r_offset, r_info, _ = struct.unpack_from(order + lay.fmt, rel_raw, row * lay.size)
                struct.pack_into(order + lay.fmt, rel_raw, row * lay.size, r_offset, r_info, new_addend)
            if rel_raw is not None:
                rsec.data = bytes(rel_raw)
        e.data = bytes(data)
        e.sh_size = len(data)
        self._changed = True

    def compact_relocatable(self) -> None:
        """Write with the compact layout of rule 6 (``ET_REL`` without program headers only)."""
        if self.elf.header.e_type != C.ET_REL or self.elf.segments:
            raise UsageError("the compact layout is only for relocatable objects without program headers")
        self._compact = True

    def set_or_add(self, new: NewSection) -> None:
        """Replace the section named ``new.name`` if it exists, else add it.  A replaced section takes
        ``new.link`` too where it names one: a linker copies a non-allocated section it does not know
        with ``sh_link`` 0 (ld.lld does, for devbin's sections), and new contents citing symbols by
        index are read through the symbol table their ``sh_link`` names."""
        if not self.has_section(new.name):
            self.add_section(new)
            return
        self.replace_section(new.name, new.data)
        if new.link:
            i = self._find(new.name)
            if isinstance(new.link, str):
                self._pending_links[i] = new.link
                self._changed = True
            elif self._entries[i].sh_link != new.link:
                self._entries[i].sh_link = new.link
                self._changed = True

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
        if self._compact:
            return self._write_compact(entries, kept, index_map, shstr_i)
        # 4. fixed ranges: everything the loader may read keeps its place and its bytes.  What is
        #    freed (the old section header table, removed and replaced sections) is zeroed only
        #    where no kept range lies: tables and sections may overlap in a valid file.
        kept_ranges: list[tuple[int, int]] = [(0, L.EHDR_SIZE[ec])]
        tables: list[tuple[str, int, int]] = []  # kept tables and sections whose bytes must survive
        if h.e_phnum:
            phdrs = h.e_phnum * L.PHDR[ec].size
            kept_ranges.append((h.e_phoff, h.e_phoff + phdrs))
            tables.append(("the program header table", h.e_phoff, h.e_phoff + phdrs))
        kept_ranges += [(s.p_offset, s.p_offset + s.p_filesz) for s in self.elf.segments if s.p_filesz]
        freed: list[tuple[int, int]] = []
        if h.e_shnum:
            freed.append((h.e_shoff, h.e_shoff + h.e_shnum * L.SHDR[ec].size))
        for e in entries:
            o = e.orig
            if o is None or not o.file_size:
                continue
            if e.removed or e.data is not None:
                freed.append((o.sh_offset, o.sh_offset + o.sh_size))
            else:
                kept_ranges.append((o.sh_offset, o.sh_offset + o.sh_size))
                tables.append((f"section [{o.index}] {quote(o.name)}", o.sh_offset, o.sh_offset + o.sh_size))
        fixed_end = max(hi for _, hi in kept_ranges)
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
        for lo, hi in subtract_ranges(merge_ranges((lo, min(hi, fixed_end)) for lo, hi in freed),
                                      merge_ranges(kept_ranges)):
            out.buf[lo:hi] = bytes(hi - lo)
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
        _check_kept(data, original, tables, L.EHDR_SIZE[ec])
        return bytes(data)

    def _write_compact(self, entries: list[_Entry], kept: list[int], index_map: dict[int, int],
                       shstr_i: int) -> bytes:
        """Rule 6: every section placed again in original file order, then the section header table."""
        h = self.elf.header
        ec = h.ei_class
        original = self.elf.bytes()

        def file_order(i: int) -> tuple[int, int]:
            o = entries[i].orig
            return (0, o.sh_offset) if o is not None else (1, i)

        pos = L.EHDR_SIZE[ec]
        placed: list[tuple[int, bytes]] = []
        for i in sorted(kept[1:], key=file_order):
            e = entries[i]
            if e.sh_type == C.SHT_NOBITS or (e.data is None and (e.orig is None or not e.orig.file_size)):
                if e.orig is not None:
                    # an empty or NOBITS section takes no bytes but moves the next one to its alignment,
                    # as the assembler and nvprune lay objects out (nvprune's output, byte for byte)
                    pos = align_up(pos, _placement_alignment(e))
                    e.sh_offset = pos
                continue
            data = e.data if e.data is not None else bytes(e.orig.data)  # type: ignore[union-attr]
            pos = align_up(pos, _placement_alignment(e))
            e.sh_offset = pos
            e.sh_size = len(data) if e.data is not None else e.sh_size
            placed.append((i, data))
            pos += len(data)
        shoff = align_up(pos, 8 if ec == C.ELFCLASS64 else 4)
        out = Emitter(h.little)
        out.write(original[:L.EHDR_SIZE[ec]])
        for i, data in placed:
            out.pad_to(entries[i].sh_offset, entries[i].name)
            out.write(data)
        out.pad_to(shoff, "section header table")
        self._emit_headers(out, entries, kept, index_map, shstr_i)
        return self._finish(out, kept, index_map, shstr_i, shoff)

    def _emit_headers(self, out: Emitter, entries: list[_Entry], kept: list[int], index_map: dict[int, int],
                      shstr_i: int) -> None:
        count = len(kept)
        lay = L.SHDR[self.elf.header.ei_class]
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

    def _finish(self, out: Emitter, kept: list[int], index_map: dict[int, int], shstr_i: int, shoff: int) -> bytes:
        h = self.elf.header
        lay = L.SHDR[h.ei_class]
        count = len(kept)
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


def _check_kept(data: bytearray, original: bytes, tables: list[tuple[str, int, int]], header_end: int) -> None:
    """Refuse the edit when it changed a kept table or section.

    Only the ELF header fields the edit rewrites (``e_shoff``, ``e_shnum``, ``e_shstrndx``,
    ``e_shentsize``) can do that: everything else in a kept range is copied and never zeroed.  A
    program header table or a section that overlaps those fields would change under the loader's
    eyes, so such a file is not edited.
    """
    for what, lo, hi in tables:
        if lo < header_end and data[lo:hi] != original[lo:hi]:
            raise FormatError(f"{what} [{lo:#x}, {hi:#x}) overlaps the ELF header fields an edit rewrites "
                              "(e_shoff, e_shnum, e_shstrndx); refusing to edit", fmt="elf")


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

