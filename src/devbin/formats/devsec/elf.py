"""The devbin sections inside an ELF file: find, decode, add.

Bridges the codec (which knows only bytes and a symbol mapping) and the ELF
core.  ``.devbin.func`` and ``.devbin.callgraph`` cite functions by index in
the symbol table their ``sh_link`` names (``.symtab``); the staleness check
compares the count recorded in each section header with that table's real
size.
"""

from __future__ import annotations

from dataclasses import replace

from devbin.binary import ByteView
from devbin.errors import FormatError, UnsupportedVersion, UsageError
from devbin.formats.devsec import constants as C
from devbin.formats.devsec.reader import decode, read_header
from devbin.formats.devsec.writer import encode
from devbin.formats.elf import constants as EC
from devbin.formats.elf.edit import ElfEditor, NewSection
from devbin.formats.elf.model import ElfModel, SectionSpec
from devbin.formats.elf.reader import ElfFile, Section, SymbolTable
from devbin.formats.elf.writer import symbol_indices
from devbin.model import CodeObject, Target

__all__ = ["annotate", "devbin_sections", "read_code_object", "with_devbin_sections"]


def devbin_sections(elf: ElfFile) -> dict[str, Section]:
    """The devbin sections of ``elf`` by name (matched by name and sh_type)."""
    out: dict[str, Section] = {}
    for s in elf.sections:
        if s.name in C.SH_TYPES and s.sh_type == C.SH_TYPES[s.name] and s.name not in out:
            out[s.name] = s
    return out


def _symbols_for(elf: ElfFile, secs: dict[str, Section]) -> SymbolTable | None:
    for name in (C.SEC_FUNC, C.SEC_CALLGRAPH):
        s = secs.get(name)
        if s is not None:
            table = elf.symbol_tables.get(s.sh_link)
            if table is None:
                raise FormatError(f"sh_link {s.sh_link} is not a symbol table", fmt=C.FMT,
                                  where=f"section [{s.index}] {s.name!r}")
            return table
    return elf.symtab


def read_code_object(elf: ElfFile, *, target: Target | None = None) -> CodeObject | None:
    """Decode the devbin sections of ``elf``; None when it has none."""
    secs = devbin_sections(elf)
    if not secs:
        return None
    table = _symbols_for(elf, secs)

    def symbol_name(i: int) -> str:
        if table is None or not 0 <= i < len(table):
            raise FormatError("symbol index outside the symbol table", fmt=C.FMT, value=i)
        return table[i].name

    views = {name: ByteView(s.data, fmt=C.FMT, where=s.where, base=s.sh_offset) for name, s in secs.items()}
    obj = decode(views, symbol_name, len(table) if table is not None else None, target=target)
    return _with_symbol_facts(elf, table, obj) if table is not None else obj


def _with_symbol_facts(elf: ElfFile, table: SymbolTable, obj: CodeObject) -> CodeObject:
    """Fill what the symbol table knows (section, offset, size, binding, visibility) into each function.

    The devbin sections do not repeat these facts: the ELF file already holds them.
    """
    index = _index_in(table)
    funcs = []
    for f in obj.functions:
        i = index.get(f.name)
        if i is None:
            funcs.append(f)
            continue
        s = table[i]
        sec = elf.sections[s.st_shndx].name if 0 < s.st_shndx < len(elf.sections) else ""
        funcs.append(replace(f, section=sec, offset=s.st_value, size=s.st_size, binding=EC.binding_word(s.bind),
                             visibility=EC.visibility_word(s.visibility)))
    return replace(obj, functions=tuple(funcs))


def _index_in(table: SymbolTable) -> dict[str, int]:
    """Name -> symbol index; a defined function symbol wins over other symbols of the name."""
    best: dict[str, tuple[int, int]] = {}
    for s in table:
        if not s.name:
            continue
        rank = (2 if s.defined else 0) + (1 if s.type == EC.STT_FUNC else 0)
        if s.name not in best or rank > best[s.name][0]:
            best[s.name] = (rank, s.index)
    return {n: i for n, (_, i) in best.items()}


def annotate(elf: ElfFile, obj: CodeObject) -> bytes:
    """``elf`` with its devbin sections set to describe ``obj``; nothing a loader reads moves."""
    table = elf.symtab
    index = _index_in(table) if table is not None else {}

    def symbol_index(name: str) -> int:
        if name not in index:
            raise UsageError(f"function {name!r} has no symbol in the file")
        return index[name]

    for name, s in devbin_sections(elf).items():
        hdr = read_header(ByteView(s.data, fmt=C.FMT, where=s.where, base=s.sh_offset))
        if hdr.major != C.VERSION_MAJOR:
            raise UnsupportedVersion(f"will not overwrite {name} of format major {hdr.major} (this devbin writes "
                                     f"{C.VERSION_MAJOR})", fmt=C.FMT, where=s.where, value=hdr.major)
    encoded = encode(obj, symbol_index, len(table) if table is not None else 0)
    ed = ElfEditor(elf)
    wanted = {e.name for e in encoded}
    for name in C.SECTION_NAMES:
        if name not in wanted and ed.has_section(name):
            ed.remove_section(name)
    for e in encoded:
        if e.links_symtab and table is None:
            raise UsageError(f"cannot add {e.name}: the file has no symbol table")
        ed.set_or_add(NewSection(e.name, e.data, e.sh_type, link=table.section.index if e.links_symtab and table
                                 else 0))
    return ed.write()


def with_devbin_sections(model: ElfModel, obj: CodeObject) -> ElfModel:
    """Add the devbin sections describing ``obj`` to a new-file ``model`` (in place; returned)."""
    index = symbol_indices(model)

    def symbol_index(name: str) -> int:
        if name not in index:
            raise UsageError(f"function {name!r} has no symbol in the model")
        return index[name]

    model.sections = [s for s in model.sections if s.name not in C.SH_TYPES]
    for e in encode(obj, symbol_index, len(model.symbols) + 1):
        model.sections.append(SectionSpec(e.name, e.sh_type, 0, e.data, link=".symtab" if e.links_symtab else ""))
    return model
