"""The ELF core: read views (:mod:`.reader`), an editable model (:mod:`.model`), new-file
writer (:mod:`.writer`) and in-place editor (:mod:`.edit`)."""

from devbin.formats.elf.reader import ElfFile, ElfHeader, Note, Relocation, Section, Segment, Symbol, SymbolTable

__all__ = ["ElfFile", "ElfHeader", "Note", "Relocation", "Section", "Segment", "Symbol", "SymbolTable"]
