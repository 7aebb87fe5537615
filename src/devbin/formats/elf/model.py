"""Editable model for writing *new* ELF files (relocatable and shared objects).

The model names things instead of indexing them: a section links to another
by name, a symbol lives in a section by name, a relocation refers to a symbol
by name.  The writer (:mod:`devbin.formats.elf.writer`) turns names into
indices when it plans the layout, so a model can be built in any order and
can never hold a dangling index.

To edit an *existing* file without moving what its loader reads, use
:class:`devbin.formats.elf.edit.ElfEditor` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devbin.formats.elf import constants as C


@dataclass(slots=True)
class SectionSpec:
    """A section to write.  ``addr=None`` lets the writer assign addresses (exec/shared objects)."""

    name: str
    sh_type: int = C.SHT_PROGBITS
    flags: int = 0
    data: bytes = b""
    size: int | None = None  # SHT_NOBITS only: memory size
    addr: int | None = None
    align: int = 1
    entsize: int = 0
    link: str = ""  # name of the linked section
    info: int | str = 0  # a section name sets a section index (with SHF_INFO_LINK unless REL/RELA)


@dataclass(slots=True)
class SymbolSpec:
    """A symbol; ``section=None`` with ``shndx=None`` is undefined."""

    name: str
    value: int = 0
    size: int = 0
    bind: int = C.STB_GLOBAL
    type: int = C.STT_NOTYPE
    other: int = 0
    section: str | None = None
    shndx: int | None = None  # SHN_ABS / SHN_COMMON when not in a section


@dataclass(slots=True)
class RelocSpec:
    offset: int
    symbol: str | int  # a symbol name, or an index into ElfModel.symbols (+1, 0 = no symbol)
    type: int
    addend: int = 0


@dataclass(slots=True)
class ElfModel:
    """Everything the writer needs to produce a file."""

    elfclass: int = C.ELFCLASS64
    little: bool = True
    osabi: int = C.ELFOSABI_NONE
    abiversion: int = 0
    e_type: int = C.ET_REL
    machine: int = C.EM_NONE
    flags: int = 0
    entry: int = 0
    sections: list[SectionSpec] = field(default_factory=list)
    symbols: list[SymbolSpec] = field(default_factory=list)
    relocations: dict[str, list[RelocSpec]] = field(default_factory=dict)
    use_rela: bool = True
    page_size: int = 0x1000

    def section(self, name: str) -> SectionSpec | None:
        return next((s for s in self.sections if s.name == name), None)
