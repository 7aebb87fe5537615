"""The ELF editor on files whose tables and sections overlap (issue 24, defect 11).

A valid ELF may let its program header table, its section header table and its sections share
bytes; the editor zeroes what an edit frees (the old section header table, removed and replaced
sections) and must then keep every byte a kept table, section or segment still occupies, or
refuse the file in one line.  The fuzzer's crasher ``tests/crashers/elf-editor-overlapping-phdrs.bin``
is the first shape below as fuzz_elf found it.
"""

from __future__ import annotations

from dataclasses import astuple

import pytest

from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.edit import ElfEditor, NewSection
from devbin.formats.elf.reader import ElfFile

from tests.elfbuild import patch_header, patch_section, small_elf

PHDR = 56  # ELF64 sizes
SHDR = 64


def _exec() -> tuple[bytes, bytes, bytes]:
    """A small ET_EXEC (two PT_LOADs, ten sections), its program and section header tables."""
    base = small_elf(e_type=C.ET_EXEC)
    h = ElfFile(base).header
    assert (h.e_phnum, h.e_shnum) == (2, 10)
    return base, base[h.e_phoff:h.e_phoff + 2 * PHDR], base[h.e_shoff:h.e_shoff + 10 * SHDR]


def _read(data: bytes) -> ElfFile:
    seen: list[DeviceBinaryError] = []
    return ElfFile(data, diag=seen.append)


def _add_section(data: bytes) -> bytes:
    ed = ElfEditor(_read(data))
    ed.add_section(NewSection(".devbin.meta", b"\x01" * 9, 0x8DB00004))
    return ed.write()


def test_phdr_table_overlapping_the_end_of_the_section_headers_is_kept() -> None:
    """The crasher's shape: the program header table starts 8 bytes into the last section header (whose
    last 56 bytes are the first segment's header).  Writing the new section header table zeroed the old
    one and with it PT_GNU_STACK's type, offset and addresses."""
    base, ph, sht = _exec()
    stack = bytes.fromhex("51e57464") + (6).to_bytes(4, "little") + bytes(40) + (16).to_bytes(8, "little")
    last = (0).to_bytes(4, "little") + C.SHT_PROGBITS.to_bytes(4, "little") + stack  # sh_flags..sh_entsize
    at = len(base)
    data = patch_header(base + sht + last + ph, e_shoff=at, e_shnum=11, e_phoff=at + 10 * SHDR + 8, e_phnum=3)
    elf = _read(data)
    assert elf.segments[0].p_type == 0x6474E551
    assert [astuple(s)[1:] for s in elf.segments[1:]] == [astuple(s)[1:] for s in ElfFile(base).segments]
    out = _add_section(data)
    again = _read(out)
    assert again.section(".devbin.meta") is not None
    assert again.segments == elf.segments
    lo = elf.header.e_phoff
    assert out[lo:lo + 3 * PHDR] == data[lo:lo + 3 * PHDR]


def test_section_headers_starting_inside_the_phdr_table_keep_it() -> None:
    """The other side: the section header table starts 8 bytes before the program header table ends
    (section 0's sh_name and sh_type are the last segment's p_align)."""
    base, ph, sht = _exec()
    at = len(base)
    data = patch_header(base + ph + sht[8:], e_phoff=at, e_shoff=at + 2 * PHDR - 8)
    elf = _read(data)
    assert elf.segments == ElfFile(base).segments
    out = _add_section(data)
    assert _read(out).segments == elf.segments
    assert out[at:at + 2 * PHDR] == ph


def test_replaced_section_overlapping_the_phdr_table_keeps_it() -> None:
    """A replaced section moves and its old bytes are zeroed, but not the program headers they share."""
    base, ph, _ = _exec()
    h = ElfFile(base).header
    comment = ElfFile(base).section(".comment")
    assert comment is not None
    data = patch_section(base, comment.index, sh_offset=h.e_phoff + 4, sh_size=12)
    ed = ElfEditor(_read(data))
    ed.replace_section(".comment", b"moved away")
    out = ed.write()
    assert _read(out).segments == ElfFile(base).segments
    assert out[h.e_phoff:h.e_phoff + 2 * PHDR] == ph
    assert _read(out).section(".comment").data.tobytes() == b"moved away"  # type: ignore[union-attr]


def test_removed_section_overlapping_a_kept_section_keeps_its_bytes() -> None:
    """``.nv.weird`` made to lie on ``.note.test``: removing it zeroed the note, a section still in the file."""
    base, _, _ = _exec()
    elf = ElfFile(base)
    note, weird = elf.section(".note.test"), elf.section(".nv.weird")
    assert note is not None and weird is not None
    data = patch_section(base, weird.index, sh_offset=note.sh_offset + 4)
    ed = ElfEditor(_read(data))
    ed.remove_section(".nv.weird")
    out = ed.write()
    kept = _read(out).section(".note.test")
    assert kept is not None and bytes(kept.data) == bytes(note.data)
    assert _read(out).section(".nv.weird") is None


def test_phdr_table_over_the_rewritten_header_fields_is_refused() -> None:
    """``e_phoff`` 40: the first program header's type and flags *are* ``e_shoff``, which every edit
    rewrites; the editor refuses rather than change a segment under the loader."""
    base, _, _ = _exec()
    data = bytearray(patch_header(base, e_phoff=40, e_phnum=1))
    data[64:96] = bytes(32)  # the rest of that header: p_paddr, p_filesz, p_memsz, p_align all 0
    elf = _read(bytes(data))
    assert elf.segments[0].p_type == elf.header.e_shoff
    ed = ElfEditor(elf)
    ed.add_section(NewSection(".devbin.meta", b"x"))
    with pytest.raises(FormatError, match=r"^elf: the program header table \[0x28, 0x60\) overlaps the ELF "
                                          r"header fields an edit rewrites .*; refusing to edit$"):
        ed.write()
    assert ElfEditor(elf).write() == data  # no change asked: the input as it is


def test_kept_section_over_the_rewritten_header_fields_is_refused() -> None:
    """A kept section whose bytes include ``e_shoff`` would change under the edit: refused, naming it."""
    base, _, _ = _exec()
    comment = ElfFile(base).section(".comment")
    assert comment is not None
    data = patch_section(base, comment.index, sh_offset=36, sh_size=12)
    ed = ElfEditor(_read(data))
    ed.add_section(NewSection(".devbin.meta", b"x"))
    with pytest.raises(FormatError, match=rf"^elf: section \[{comment.index}\] '\.comment' \[0x24, 0x30\) overlaps "
                                          r"the ELF header fields an edit rewrites .*; refusing to edit$"):
        ed.write()
    ed = ElfEditor(_read(data))  # replaced, the section moves away: nothing kept there, the edit is made
    ed.replace_section(".comment", b"moved")
    assert _read(ed.write()).section(".comment").data.tobytes() == b"moved"  # type: ignore[union-attr]


def test_kept_section_inside_the_old_section_headers_keeps_its_bytes() -> None:
    """``.nv.weird`` made to lie on section header 1: the old table is freed and zeroed, but not there."""
    base, _, sht = _exec()
    h = ElfFile(base).header
    weird = ElfFile(base).section(".nv.weird")
    assert weird is not None
    data = patch_section(base, weird.index, sh_offset=h.e_shoff + SHDR, sh_size=8)
    assert sht[SHDR:SHDR + 8] != bytes(8)
    out = _add_section(data)
    kept = _read(out).section(".nv.weird")
    assert kept is not None and bytes(kept.data) == sht[SHDR:SHDR + 8]
