"""The ELF core: read views (:mod:`.reader`), an editable model (:mod:`.model`), new-file
writer (:mod:`.writer`) and in-place editor (:mod:`.edit`).

The names are imported on first use (:mod:`devbin._lazy`): the vendor descriptors read
:mod:`.constants` for every image the scanner lists, and must not pay for the reader to do so."""

from typing import TYPE_CHECKING

from devbin._lazy import lazy_attributes

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile, ElfHeader, Note, Relocation, Section, Segment, Symbol, SymbolTable

__all__ = ["ElfFile", "ElfHeader", "Note", "Relocation", "Section", "Segment", "Symbol", "SymbolTable"]

__getattr__ = lazy_attributes(__name__, dict.fromkeys(__all__, "reader"))
