"""On-disk record layouts of ELF, per class, as ``struct`` formats with field names.

The decoded records are class-independent (every address and size is a Python
int), so reader and writer share one set of field names, which are the
spec's (``sh_offset``, ``st_info`` ...).  Byte order is applied by the reader
(:class:`devbin.binary.ByteView`) or writer (:class:`devbin.binary.Emitter`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Layout:
    fmt: str
    fields: tuple[str, ...]
    size: int


def _layout(fmt: str, fields: str) -> Layout:
    import struct

    names = tuple(fields.split())
    return Layout(fmt, names, struct.calcsize("<" + fmt))


EI_NIDENT = 16

EHDR = {
    1: _layout("HHIIIIIHHHHHH", "e_type e_machine e_version e_entry e_phoff e_shoff e_flags e_ehsize e_phentsize "
               "e_phnum e_shentsize e_shnum e_shstrndx"),
    2: _layout("HHIQQQIHHHHHH", "e_type e_machine e_version e_entry e_phoff e_shoff e_flags e_ehsize e_phentsize "
               "e_phnum e_shentsize e_shnum e_shstrndx"),
}
SHDR = {
    1: _layout("IIIIIIIIII", "sh_name sh_type sh_flags sh_addr sh_offset sh_size sh_link sh_info sh_addralign "
               "sh_entsize"),
    2: _layout("IIQQQQIIQQ", "sh_name sh_type sh_flags sh_addr sh_offset sh_size sh_link sh_info sh_addralign "
               "sh_entsize"),
}
PHDR = {
    1: _layout("IIIIIIII", "p_type p_offset p_vaddr p_paddr p_filesz p_memsz p_flags p_align"),
    2: _layout("IIQQQQQQ", "p_type p_flags p_offset p_vaddr p_paddr p_filesz p_memsz p_align"),
}
SYM = {
    1: _layout("IIIBBH", "st_name st_value st_size st_info st_other st_shndx"),
    2: _layout("IBBHQQ", "st_name st_info st_other st_shndx st_value st_size"),
}
REL = {1: _layout("II", "r_offset r_info"), 2: _layout("QQ", "r_offset r_info")}
RELA = {1: _layout("IIi", "r_offset r_info r_addend"), 2: _layout("QQq", "r_offset r_info r_addend")}
NHDR = _layout("III", "n_namesz n_descsz n_type")

EHDR_SIZE = {c: EI_NIDENT + EHDR[c].size for c in (1, 2)}


def r_sym(elfclass: int, info: int) -> int:
    """Symbol index of ``r_info``: the high 24 bits (ELF32) or 32 bits (ELF64)."""
    return info >> 8 if elfclass == 1 else info >> 32


def r_type(elfclass: int, info: int) -> int:
    return info & 0xFF if elfclass == 1 else info & 0xFFFFFFFF


def r_info(elfclass: int, sym: int, rtype: int) -> int:
    return (sym << 8) | (rtype & 0xFF) if elfclass == 1 else (sym << 32) | (rtype & 0xFFFFFFFF)
