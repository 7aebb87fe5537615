"""Link units: one relocatable device object each, with its symbols and who refers to what.

A *unit* is a device ELF relocatable object (``ET_REL``; NVIDIA ``EM_CUDA`` cubins from
``nvcc -rdc``/``ptxas -c``, AMDGPU objects from ``clang -c``) that takes part in a link,
either named on the command line or offered by an archive member.  What resolution and
the passes need is read from the object's own tables, through the ELF core:

* **symbols**: every global or weak symbol of ``SHT_SYMTAB`` as a :class:`SymbolEntry`,
  in symbol-table order: defined (``STB_GLOBAL``), weak (``STB_WEAK``, defined), common
  (``SHN_COMMON``; its size), or undefined (strong or weak);
* **references**: for each relocation, the function (or data object) the relocated
  place lies in -> the symbol it refers to.  The containing symbol is the ``STT_FUNC`` /
  ``STT_OBJECT`` symbol of that section whose ``[st_value, st_value + st_size)`` holds the
  offset; NVIDIA keeps one function per ``.text.<name>`` section, AMDGPU may keep several
  in one ``.text``.  References give "undefined symbol, referred to by functions ..." and
  the data edges of dead-code elimination.

The vendor model (:class:`devbin.model.CodeObject`: functions, resources, call graph,
prototypes) is imported on first use, from the devbin sections when the object carries
them and from the vendor's metadata otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from devbin.binary.spans import SpanIndex
from devbin.errors import UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Symbol
from devbin.importers import model_of
from devbin.model import CodeObject
from devbin.targets.registry import vendor_for_machine
from devbin.targets.vendor import Vendor

__all__ = ["SymbolEntry", "Unit"]

SymKind = Literal["defined", "weak", "common", "undefined", "weak-undefined"]

_DATA_TYPES = frozenset({C.STT_OBJECT, C.STT_CUDA_OBJECT})  # (NVIDIA's constant/shared/local variables)
_SIZED_TYPES = _DATA_TYPES | {C.STT_FUNC}


@dataclass(frozen=True, slots=True)
class SymbolEntry:
    """A global symbol of a unit: name, kind, ELF type (``STT_*``), size and its section index."""

    name: str
    kind: SymKind
    type: int
    size: int
    shndx: int
    local: bool = False

    @property
    def is_definition(self) -> bool:
        return self.kind in ("defined", "weak", "common")

    @property
    def is_function(self) -> bool:
        return self.type == C.STT_FUNC


@dataclass
class Unit:
    """One relocatable device object: ``name`` as diagnostics print it (``k.o``, ``lib.a(m.o)``),
    its bytes, ``order`` (command-line position: ties are broken by it) and the archive it came
    from (None for an object named directly)."""

    name: str
    data: bytes
    order: int
    archive: str | None = None
    elf: ElfFile = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.elf = ElfFile(self.data, where=self.name)
        if self.elf.header.e_type != C.ET_REL:
            raise UsageError(f"{self.name}: not a relocatable object (e_type {self.elf.header.e_type}); devbin link "
                             "takes relocatable device objects (nvcc -rdc, ptxas -c, clang -c)", fmt="link")

    @cached_property
    def vendor(self) -> Vendor | None:
        """The vendor of the object (its descriptor: the link and output passes ask it and its link back
        end, :mod:`devbin.link.backend`), None for an ELF of no vendor devbin knows."""
        return vendor_for_machine(self.elf.header.e_machine)

    @cached_property
    def _symtab(self) -> list[Symbol]:
        """Every entry of the ``SHT_SYMTAB`` tables, in order (decoded once; the properties below filter it)."""
        return [s for t in self.elf.symbol_tables.values() if t.section.sh_type == C.SHT_SYMTAB for s in t]

    @cached_property
    def symbols(self) -> tuple[SymbolEntry, ...]:
        """Global and weak symbols, in symbol-table order (locals are not resolved across units)."""
        out: list[SymbolEntry] = []
        for s in self.elf.global_symbols(bindings=None):
            weak = s.bind == C.STB_WEAK
            kind: SymKind
            if s.st_shndx == C.SHN_UNDEF:
                kind = "weak-undefined" if weak else "undefined"
            elif s.st_shndx == C.SHN_COMMON:
                kind = "common"
            else:
                kind = "weak" if weak else "defined"
            out.append(SymbolEntry(s.name, kind, s.type, s.st_size, s.st_shndx))
        return tuple(out)

    @cached_property
    def local_functions(self) -> frozenset[str]:
        """Names of ``STB_LOCAL`` functions (kept per unit: two units may both have a static ``f``)."""
        return frozenset(s.name for s in self._symtab if s.bind == C.STB_LOCAL and s.type == C.STT_FUNC and s.name)

    @cached_property
    def sizes(self) -> dict[str, int]:
        """``st_size`` of every named function and data object (globals win over a local of the same name)."""
        out: dict[str, int] = {}
        for s in self._symtab:
            if (s.name and s.type in _SIZED_TYPES and s.st_shndx != C.SHN_UNDEF
                    and (s.bind != C.STB_LOCAL or s.name not in out)):
                out[s.name] = s.st_size
        return out

    @cached_property
    def data_objects(self) -> frozenset[str]:
        return frozenset(s.name for s in self._symtab if s.type in _DATA_TYPES and s.name and s.st_shndx != C.SHN_UNDEF)

    @cached_property
    def references(self) -> tuple[tuple[str, str], ...]:
        """``(from, to)``: the function or data object holding a relocated place -> the symbol it
        names, for every relocation with a named symbol, without duplicates, in file order.
        ``from`` is the section name when no sized symbol covers the place."""
        out: dict[tuple[str, str], None] = {}
        symtabs = {t.section.index: t for t in self.elf.symbol_tables.values()}
        covering: dict[int, list[tuple[int, int, tuple[int, str]]]] = {}
        order = 0  # symbol-table order: among symbols holding a place, the first one names it
        for tab in symtabs.values():
            if tab.section.sh_type != C.SHT_SYMTAB:
                continue
            for s in tab:
                if s.name and s.type in _SIZED_TYPES and 0 < s.st_shndx < C.SHN_LORESERVE:
                    covering.setdefault(s.st_shndx, []).append(
                        (s.st_value, s.st_value + max(s.st_size, 1), (order, s.name)))
                    order += 1
        holders = {shndx: SpanIndex(spans) for shndx, spans in covering.items()}
        for rindex, relocs in self.elf.relocation_tables.items():
            sec = self.elf.sections[rindex]
            table = symtabs.get(sec.sh_link)
            if table is None or not 0 < sec.sh_info < len(self.elf.sections):
                continue
            target = self.elf.sections[sec.sh_info]
            spans = holders.get(target.index)
            for r in relocs:
                if r.r_sym == 0 or r.r_sym >= len(table):
                    continue
                sym = table[r.r_sym]
                name = sym.name
                if sym.type == C.STT_SECTION or not name:
                    continue
                # the first sized symbol in table order that holds the place (the section if none)
                hits = spans.containing(r.r_offset) if spans is not None else []
                holder = min(v for _, _, v in hits)[1] if hits else target.name
                out[(holder, name)] = None
        return tuple(out)

    @cached_property
    def model(self) -> CodeObject:
        """The unified model of this object (devbin sections if present, else the vendor's metadata)."""
        return model_of(self.elf)
