"""Plain-data description of an :class:`ElfFile` for printers (text and JSON).

One function builds the facts; the CLI renders them as text or dumps them as
JSON, so both outputs always agree.  Every enum appears twice: its raw integer
and its name (``"sh_type": 1879048192, "sh_type_name": "SHT_CUDA_INFO"``).
"""

from __future__ import annotations

from typing import Any

from devbin.errors import DeviceBinaryError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile


def header_dict(elf: ElfFile) -> dict[str, Any]:
    h = elf.header
    return {
        "class": "ELF64" if h.is64 else "ELF32",
        "data": "little" if h.little else "big",
        "osabi": h.ei_osabi,
        "osabi_name": C.osabi_name(h.ei_osabi, h.e_machine),
        "abiversion": h.ei_abiversion,
        "type": h.e_type,
        "type_name": C.simple_name(C.ET_NAMES, h.e_type),
        "machine": h.e_machine,
        "machine_name": C.simple_name(C.EM_NAMES, h.e_machine),
        "flags": h.e_flags,
        "entry": h.e_entry,
        "phoff": h.e_phoff,
        "shoff": h.e_shoff,
        "phnum": h.e_phnum,
        "shnum": h.e_shnum,
        "shstrndx": h.e_shstrndx,
        "size": elf.size,
    }


def sections_list(elf: ElfFile) -> list[dict[str, Any]]:
    m = elf.header.e_machine
    return [
        {
            "index": s.index,
            "name": s.name,
            "type": s.sh_type,
            "type_name": C.sht_name(s.sh_type, m),
            "flags": s.sh_flags,
            "flags_names": C.shf_names(s.sh_flags),
            "addr": s.sh_addr,
            "offset": s.sh_offset,
            "size": s.sh_size,
            "link": s.sh_link,
            "info": s.sh_info,
            "addralign": s.sh_addralign,
            "entsize": s.sh_entsize,
        }
        for s in elf.sections
    ]


def segments_list(elf: ElfFile) -> list[dict[str, Any]]:
    return [
        {
            "index": p.index,
            "type": p.p_type,
            "type_name": C.pt_name(p.p_type),
            "flags": p.p_flags,
            "offset": p.p_offset,
            "vaddr": p.p_vaddr,
            "paddr": p.p_paddr,
            "filesz": p.p_filesz,
            "memsz": p.p_memsz,
            "align": p.p_align,
        }
        for p in elf.segments
    ]


def symbols_list(elf: ElfFile) -> list[dict[str, Any]]:
    m = elf.header.e_machine
    out = []
    for idx, table in elf.symbol_tables.items():
        for s in table:
            out.append({
                "table": elf.sections[idx].name,
                "index": s.index,
                "name": s.name,
                "value": s.st_value,
                "size": s.st_size,
                "bind": s.bind,
                "bind_name": C.simple_name(C.STB_NAMES, s.bind),
                "type": s.type,
                "type_name": C.stt_name(s.type, m),
                "other": s.st_other,
                "visibility_name": C.simple_name(C.STV_NAMES, s.visibility),
                "shndx": s.st_shndx,
                "shndx_name": C.shn_name(s.st_shndx),
            })
    return out


def relocations_list(elf: ElfFile) -> list[dict[str, Any]]:
    m = elf.header.e_machine
    out = []
    for idx, relocs in elf.relocation_tables.items():
        sec = elf.sections[idx]
        table = elf.symbol_tables.get(sec.sh_link)
        for r in relocs:
            name = table[r.r_sym].name if table is not None and r.r_sym < len(table) else ""
            out.append({
                "section": sec.name,
                "offset": r.r_offset,
                "type": r.r_type,
                "type_name": C.reloc_name(m, r.r_type),
                "symbol": r.r_sym,
                "symbol_name": name,
                "addend": r.r_addend,
            })
    return out


def notes_list(elf: ElfFile) -> list[dict[str, Any]]:
    """Every note of every ``SHT_NOTE`` section; a section whose notes do not decode gets an ``error``."""
    out: list[dict[str, Any]] = []
    for sec in elf.sections_of_type(C.SHT_NOTE):
        try:
            notes = elf.notes(sec)
        except DeviceBinaryError as e:
            out.append({"section": sec.name, "error": str(e)})
            continue
        for n in notes:
            out.append({
                "section": sec.name,
                "owner": n.name,
                "type": n.n_type,
                "type_name": C.note_type_name(n.name, n.n_type),
                "size": len(n.desc),
            })
    return out


def describe(elf: ElfFile) -> dict[str, Any]:
    """Everything ``devbin inspect`` shows about the ELF layer."""
    return {
        "header": header_dict(elf),
        "sections": sections_list(elf),
        "segments": segments_list(elf),
        "symbols": symbols_list(elf),
        "relocations": relocations_list(elf),
        "notes": notes_list(elf),
    }
