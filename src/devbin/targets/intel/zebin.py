"""A zebin (Intel's "ZE binary"): an ELF with ``e_machine`` ``EM_INTELGT`` (205).

Layout (IGC ``IGC/ZEBinWriter/zebin/spec/elf.md``; the writer is
``IGC/ZEBinWriter/zebin/source/ZEELFObjectBuilder.cpp``): ``e_type`` ``ET_REL`` (IGC), or
``ET_ZEBIN_EXE`` 0xFF12 (``ocloc asm``; compute-runtime ``zebin_elf.h``); one ``.text.<kernel>``
section per kernel, ``.text`` for external functions (1.45+; formerly
``.text.Intel_Symbol_Table_Void_Program``), ``.ze_info`` (:mod:`devbin.targets.intel.zeinfo`),
``.note.intelgt.compat`` (:mod:`devbin.targets.intel.notes`), ``.spv`` (the SPIR-V the code was
built from, when not excluded), ``.rel(a).<section>`` relocations, ``.symtab`` and one ``.strtab``
shared by section and symbol names.

Code size: a kernel's ``STT_FUNC`` symbol size.  Its section is larger, zero-padded after the code
(IGC pads for instruction prefetch, ``IGC/AdaptorOCL/OCL/sp/zebin_builder.cpp``
``addKernelBinary``); the padding disassembles as ``illegal`` instructions.  The ``_entry``
symbol of each kernel marks where the code starts after the per-thread payload prolog; it is no
function.  Other defined ``STT_FUNC`` symbols are functions: stack-called subroutines inside a
kernel's section, or external functions (``functions`` in ``.ze_info``).

Call edges come from relocations (``R_SYM_ADDR*``, types 1, 2, 3, 7 of elf.md "Gen Relocation
Type") in a code section against a function symbol; code that calls within its own section needs
none (IGC resolves those), so such calls are not seen.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from devbin.errors import DeviceBinaryError, FormatError, FormatWarning, UnsupportedVersion
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Symbol
from devbin.targets.intel.devices import ip_from_gmdid, ip_text, product_acronym
from devbin.targets.intel.notes import COMPAT_SECTION, CompatNotes, read_compat_notes
from devbin.targets.intel.zeinfo import ZeInfo, read_zeinfo

__all__ = [
    "ET_ZEBIN_DYN", "ET_ZEBIN_EXE", "ET_ZEBIN_REL", "R_NAMES", "ZEINFO_SECTION", "Zebin", "ZebinFunction",
    "is_zebin", "zebin_arch",
]

Diag = Callable[[DeviceBinaryError], None]

ET_ZEBIN_REL: Final = 0xFF11
ET_ZEBIN_EXE: Final = 0xFF12
ET_ZEBIN_DYN: Final = 0xFF13
ZEINFO_SECTION: Final = ".ze_info"
SPIRV_SECTION: Final = ".spv"
SHT_ZEBIN_SPIRV: Final = 0xFF000009  # the .spv section's type (elf.md; the runtime looks for the type)
ENTRY_SYMBOL: Final = "_entry"
TEXT_PREFIX: Final = ".text."
#: Relocation types (elf.md "Gen Relocation Type"; llvm-readelf prints them "Unknown").
R_NAMES: Final[dict[int, str]] = {
    0: "R_NONE", 1: "R_SYM_ADDR", 2: "R_SYM_ADDR_32", 3: "R_SYM_ADDR_32_HI",
    4: "R_PER_THREAD_PAYLOAD_OFFSET_32", 5: "R_GLOBAL_IMM_32", 6: "R_SEND", 7: "R_SYM_ADDR_16",
}
_ADDRESS_RELOCS: Final = frozenset({1, 2, 3, 7})


def is_zebin(elf: ElfFile) -> bool:
    return elf.header.e_machine == C.EM_INTELGT


def zebin_arch(notes: CompatNotes) -> str:
    """The architecture devbin names a zebin by: the IP version of ``NT_INTELGT_PRODUCT_CONFIG``
    (``12.60.7``), else the product family's acronym (``dg2``), else ``""``."""
    if notes.product_config is not None:
        return ip_text(ip_from_gmdid(notes.product_config))
    if notes.product_family:
        return product_acronym(notes.product_family)
    return ""


@dataclass(frozen=True, slots=True)
class ZebinFunction:
    """A kernel or function: its symbol's section, offset and size (the code size), and its section's size."""

    name: str
    is_kernel: bool
    section: str
    section_index: int
    offset: int
    size: int
    section_size: int


class Zebin:
    """The facts of one zebin: notes, ``.ze_info``, kernels and functions, call edges."""

    def __init__(self, elf: ElfFile, *, diag: Diag | None = None) -> None:
        if not is_zebin(elf):
            raise FormatError(f"not a zebin (e_machine {elf.header.e_machine}, not EM_INTELGT 205)", fmt="zebin",
                              where=elf.where)
        self.elf = elf
        self._diag = diag
        sec = elf.section(COMPAT_SECTION)
        self.notes = read_compat_notes(elf.notes(sec)) if sec is not None else CompatNotes()
        zs = elf.section(ZEINFO_SECTION)
        self.zeinfo: ZeInfo | None = None
        if zs is not None:
            self.zeinfo = read_zeinfo(zs.data, where=f"{elf.where} {ZEINFO_SECTION}".strip())
            if self.zeinfo.version[0] != 1:
                self._note(UnsupportedVersion(
                    f"zeinfo version {self.zeinfo.version_text!r}: major version 1 expected (read as 1.x)",
                    fmt="ze_info", where=elf.where))
        self.functions = self._functions()

    def _note(self, e: DeviceBinaryError) -> None:
        """A problem read past: to ``diag``, else a :class:`~devbin.errors.FormatWarning` (the data kept)."""
        if self._diag is not None:
            self._diag(e)
        else:
            warnings.warn(FormatWarning(str(e)), stacklevel=4)

    @property
    def arch(self) -> str:
        return zebin_arch(self.notes)

    @property
    def has_spirv(self) -> bool:
        return self.elf.section(SPIRV_SECTION) is not None

    def _functions(self) -> tuple[ZebinFunction, ...]:
        kernels = {e.name for e in self.zeinfo.kernels} if self.zeinfo is not None else set()
        symtab = self.elf.symtab
        out: dict[str, ZebinFunction] = {}
        for sym in symtab or ():
            if sym.type != C.STT_FUNC or not sym.defined or sym.name in ("", ENTRY_SYMBOL) or sym.name in out:
                continue
            if not 0 < sym.st_shndx < len(self.elf.sections):
                continue
            s = self.elf.sections[sym.st_shndx]
            is_kernel = sym.name in kernels or (not kernels and s.name == TEXT_PREFIX + sym.name)
            out[sym.name] = ZebinFunction(sym.name, is_kernel, s.name, s.index, sym.st_value, sym.st_size, s.sh_size)
        # a kernel .ze_info names whose symbol is missing still has its section
        for name in sorted(kernels - out.keys()):
            ks = self.elf.section(TEXT_PREFIX + name)
            if ks is not None:
                out[name] = ZebinFunction(name, True, ks.name, ks.index, 0, ks.sh_size, ks.sh_size)
        return tuple(out.values())

    def function(self, name: str) -> ZebinFunction | None:
        return next((f for f in self.functions if f.name == name), None)

    def call_edges(self) -> list[tuple[str, str]]:
        """``(caller, callee)``: relocations of an address type in a code section against a function
        symbol, the caller being the function whose range holds the relocated place."""
        symtab = self.elf.symtab
        if symtab is None:
            return []
        by_section: dict[int, list[ZebinFunction]] = {}
        for f in self.functions:
            by_section.setdefault(f.section_index, []).append(f)
        edges: list[tuple[str, str]] = []
        for index, relocs in self.elf.relocation_tables.items():
            target = self.elf.sections[index].sh_info
            holders = by_section.get(target, [])
            for r in relocs:
                if r.r_type not in _ADDRESS_RELOCS or not 0 < r.r_sym < len(symtab):
                    continue
                callee: Symbol = symtab[r.r_sym]
                if callee.type != C.STT_FUNC or callee.name == ENTRY_SYMBOL:
                    continue
                inside = [f for f in holders if f.offset <= r.r_offset < f.offset + max(f.size, 1)]
                caller = min(inside, key=lambda f: f.size) if inside else None  # the innermost function
                if caller is not None and (caller.name, callee.name) not in edges:
                    edges.append((caller.name, callee.name))
        return edges
