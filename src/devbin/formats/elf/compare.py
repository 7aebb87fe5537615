"""Compare two ELF files as a loader sees them.

Used to prove that an in-place edit disturbed nothing a vendor loader reads:
segments and the bytes they cover, allocated sections, symbols and
relocations.  The three section-table fields of the ELF header
(``e_shoff``, ``e_shnum``, ``e_shstrndx``) are allowed to differ: an edit
that adds a section must change them, and in a shared object the first
segment maps the header.
"""

from __future__ import annotations

import struct

from devbin.formats.elf import layout as L
from devbin.formats.elf.reader import ElfFile

_SECTION_TABLE_FIELDS = ("e_shoff", "e_shnum", "e_shstrndx")


def _blank_section_table_fields(elf: ElfFile) -> bytes:
    lay = L.EHDR[elf.header.ei_class]
    out = bytearray(elf.bytes())
    pos = L.EI_NIDENT
    for f, code in zip(lay.fields, lay.fmt, strict=True):
        size = struct.calcsize("<" + code)
        if f in _SECTION_TABLE_FIELDS:
            out[pos:pos + size] = bytes(size)
        pos += size
    return bytes(out)


def loader_differences(before: ElfFile, after: ElfFile) -> list[str]:
    """What differs between two files in what a loader reads; empty when nothing does."""
    diffs: list[str] = []
    if before.segments != after.segments:
        diffs.append("program headers differ")
    a, b = _blank_section_table_fields(before), _blank_section_table_fields(after)
    for p in before.segments:
        if a[p.p_offset:p.p_offset + p.p_filesz] != b[p.p_offset:p.p_offset + p.p_filesz]:
            diffs.append(f"bytes of segment [{p.index}] differ")
    after_by_name = {s.name: s for s in after.sections}
    for s in before.sections:
        if not s.is_alloc:
            continue
        t = after_by_name.get(s.name)
        if t is None:
            diffs.append(f"allocated section {s.name!r} is gone")
        elif (t.sh_type, t.sh_flags, t.sh_addr, t.sh_offset, t.sh_size, bytes(t.data)) != (
                s.sh_type, s.sh_flags, s.sh_addr, s.sh_offset, s.sh_size, bytes(s.data)):
            diffs.append(f"allocated section {s.name!r} differs")
    sa = [(x.name, x.st_value, x.st_size, x.st_info, x.st_other) for x in (before.symtab or ())]
    sb = [(x.name, x.st_value, x.st_size, x.st_info, x.st_other) for x in (after.symtab or ())]
    if sa != sb:
        diffs.append("symbols differ")
    ra = {before.sections[i].name: r for i, r in before.relocation_tables.items()}
    rb = {after.sections[i].name: r for i, r in after.relocation_tables.items()}
    if ra != rb:
        diffs.append("relocations differ")
    return diffs
