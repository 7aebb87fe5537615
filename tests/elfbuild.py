"""Structural ELF builders for tests: describe a file, let the writer lay it out,
then override single derived fields to make malformed inputs (as yaml2obj does)."""

from __future__ import annotations

import struct

from devbin.formats.elf import constants as C
from devbin.formats.elf import layout as L
from devbin.formats.elf.model import ElfModel, RelocSpec, SectionSpec, SymbolSpec
from devbin.formats.elf.writer import write


def small_model(elfclass: int = 2, little: bool = True, e_type: int = C.ET_REL) -> ElfModel:
    m = ElfModel(elfclass=elfclass, little=little, e_type=e_type, machine=C.EM_X86_64 if elfclass == 2 else C.EM_386)
    m.sections = [
        SectionSpec(".text", flags=C.SHF_ALLOC | C.SHF_EXECINSTR, data=bytes(range(32)), align=16),
        SectionSpec(".data", flags=C.SHF_ALLOC | C.SHF_WRITE, data=b"\x01\x02\x03\x04", align=4),
        SectionSpec(".bss", sh_type=C.SHT_NOBITS, flags=C.SHF_ALLOC | C.SHF_WRITE, size=64, align=8),
        SectionSpec(".comment", data=b"devbin test\0", flags=C.SHF_MERGE | C.SHF_STRINGS, entsize=1),
        SectionSpec(".note.test", sh_type=C.SHT_NOTE, data=_note("devbin", 1, b"\xaa\xbb\xcc", little), align=4),
        SectionSpec(".nv.weird", sh_type=C.SHT_LOPROC + 2, data=b"\xff" * 8),
    ]
    m.symbols = [
        SymbolSpec("kernel", 0, 16, type=C.STT_FUNC, section=".text"),
        SymbolSpec("helper", 16, 16, bind=C.STB_LOCAL, type=C.STT_FUNC, section=".text"),
        SymbolSpec("table", 0, 4, type=C.STT_OBJECT, section=".data"),
        SymbolSpec("external"),
        SymbolSpec("absolute", 0x1234, shndx=C.SHN_ABS),
    ]
    if e_type == C.ET_REL:
        m.relocations = {".text": [RelocSpec(4, "external", 2, -4), RelocSpec(8, "helper", 2, 0)],
                         ".data": [RelocSpec(0, "kernel", 1, 0)]}
        m.use_rela = elfclass == 2
    return m


def _note(name: str, ntype: int, desc: bytes, little: bool = True) -> bytes:
    raw = name.encode() + b"\0"
    return (struct.pack("<III" if little else ">III", len(raw), len(desc), ntype) + raw + bytes(-len(raw) % 4) + desc
            + bytes(-len(desc) % 4))


def small_elf(**kw: object) -> bytes:
    return write(small_model(**kw))  # type: ignore[arg-type]


def patch_header(data: bytes, **fields: int) -> bytes:
    ec = data[4]
    little = data[5] == 1
    lay = L.EHDR[ec]
    fmt = ("<" if little else ">") + lay.fmt
    vals = dict(zip(lay.fields, struct.unpack_from(fmt, data, 16), strict=True))
    vals.update(fields)
    out = bytearray(data)
    struct.pack_into(fmt, out, 16, *(vals[f] for f in lay.fields))
    return bytes(out)


def patch_section(data: bytes, index: int, **fields: int) -> bytes:
    ec = data[4]
    little = data[5] == 1
    hl = L.EHDR[ec]
    fmt_h = ("<" if little else ">") + hl.fmt
    hdr = dict(zip(hl.fields, struct.unpack_from(fmt_h, data, 16), strict=True))
    lay = L.SHDR[ec]
    fmt = ("<" if little else ">") + lay.fmt
    at = hdr["e_shoff"] + index * lay.size
    vals = dict(zip(lay.fields, struct.unpack_from(fmt, data, at), strict=True))
    vals.update(fields)
    out = bytearray(data)
    struct.pack_into(fmt, out, at, *(vals[f] for f in lay.fields))
    return bytes(out)
