"""LLVM's ``.llvm.callgraph`` section (``SHT_LLVM_CALL_GRAPH``, 0x6fff4c0f).

Emitted by clang 22+ with ``-fexperimental-call-graph-section``; the section
has ``SHF_LINK_ORDER`` to the code it describes.  It is a sequence of
records, one per function, read to the end of the section::

    u8   format version         0 (any other value: the rest cannot be read)
    u8   flags                  bit 0: indirect target (type id known when non-zero)
                                bit 1: a direct-callee list follows
                                bit 2: an indirect-callee type-id list follows
    ptr  function address       ELF class size (8 bytes for ELF64, 4 for ELF32)
    u64  type id                of the function's generalized signature (an MD5-based hash)
    [uleb n, n x ptr]           direct callees, when flag bit 1
    [uleb n, n x u64]           type ids the function calls indirectly, when flag bit 2

All integers are in the file's byte order.  In a relocatable object every
``ptr`` is 0 on disk and carries a relocation (``R_AMDGPU_ABS64``,
``R_X86_64_64`` ...) against the function symbol or a section symbol plus an
addend; in a linked file it is the address.  :func:`read_llvm_callgraph`
resolves either to the defined ``STT_FUNC`` symbol at that address.

Measured on AMDGPU (clang-22 22.1 with
-fexperimental-call-graph-section): every record is 18 bytes, flags 1: LLVM calls every function without
local linkage an "indirect target" (its address could be taken in another
object), so the flag says "may be called indirectly", not "is address-taken";
no direct- or indirect-callee lists were emitted even for real indirect calls.
The callee lists are decoded anyway, for other targets and later releases.
The clang documentation (``CallGraphSection.rst``) describes an older layout
with 32-bit fields, which no release tested here writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Section, Symbol

__all__ = ["CallGraphRecord", "FLAG_DIRECT_CALLEES", "FLAG_INDIRECT_CALLEES", "FLAG_INDIRECT_TARGET",
           "SHT_LLVM_CALL_GRAPH", "read_llvm_callgraph"]

SHT_LLVM_CALL_GRAPH = 0x6FFF4C0F
FLAG_INDIRECT_TARGET = 1
FLAG_DIRECT_CALLEES = 2
FLAG_INDIRECT_CALLEES = 4
_KNOWN_FLAGS = FLAG_INDIRECT_TARGET | FLAG_DIRECT_CALLEES | FLAG_INDIRECT_CALLEES


@dataclass(frozen=True, slots=True)
class CallGraphRecord:
    """One function's record; names are ``None`` where no defined function is at the address."""

    offset: int  # of the record in the section
    version: int
    flags: int
    function: str | None
    address: int  # as resolved (symbol value + addend in a .o, the address in a linked file)
    type_id: int
    direct_callees: tuple[str | None, ...] = ()
    indirect_type_ids: tuple[int, ...] = ()

    @property
    def indirect_target(self) -> bool:
        return bool(self.flags & FLAG_INDIRECT_TARGET)


class _Resolver:
    """Turns a pointer field into a function name: through its relocation, or by address."""

    def __init__(self, elf: ElfFile, sec: Section) -> None:
        self.elf = elf
        self.funcs: dict[tuple[int, int], str] = {}
        symtab = elf.symtab or elf.dynsym
        for s in symtab or ():
            if s.type == C.STT_FUNC and s.defined and s.name:
                self.funcs.setdefault((s.st_shndx if elf.header.e_type == C.ET_REL else 0, s.st_value), s.name)
        self.relocs: dict[int, tuple[Symbol | None, int]] = {}
        for idx, relocs in elf.relocation_tables.items():
            rsec = elf.sections[idx]
            if rsec.sh_info != sec.index:
                continue
            table = elf.symbol_tables.get(rsec.sh_link)
            for r in relocs:
                sym = table[r.r_sym] if table is not None and 0 < r.r_sym < len(table) else None
                self.relocs[r.r_offset] = (sym, r.r_addend or 0)

    def __call__(self, offset: int, value: int) -> tuple[str | None, int]:
        rel = self.relocs.get(offset)
        if rel is None:
            return self.funcs.get((0, value)), value
        sym, addend = rel
        if sym is None:
            return None, addend
        if sym.type == C.STT_FUNC and sym.name and addend == 0:
            return sym.name, sym.st_value
        if self.elf.header.e_type == C.ET_REL:
            return self.funcs.get((sym.st_shndx, sym.st_value + addend)), sym.st_value + addend
        return self.funcs.get((0, sym.st_value + addend)), sym.st_value + addend


def read_llvm_callgraph(elf: ElfFile) -> tuple[CallGraphRecord, ...]:
    """Every record of every ``.llvm.callgraph`` section, in file order.

    A record of an unknown format version ends the reading of its section
    (its length is unknown); a record cut short is a :class:`FormatError`.
    """
    out: list[CallGraphRecord] = []
    for sec in elf.sections:
        if sec.sh_type != SHT_LLVM_CALL_GRAPH:
            continue
        cur = sec.view.cursor(0)
        ptr = cur.u64 if elf.header.is64 else cur.u32
        resolve = _Resolver(elf, sec)
        while not cur.at_end():
            start = cur.pos
            version = cur.u8()
            if version != 0:
                break
            flags = cur.u8()
            if flags & ~_KNOWN_FLAGS:
                raise cur.error("unknown .llvm.callgraph record flags", flags, offset=start + 1)
            at = cur.pos
            name, resolved = resolve(at, ptr())
            type_id = cur.u64()
            callees: list[str | None] = []
            if flags & FLAG_DIRECT_CALLEES:
                for _ in range(cur.count(4, "direct callees")):
                    at = cur.pos
                    callees.append(resolve(at, ptr())[0])
            type_ids = [cur.u64() for _ in range(cur.count(8, "indirect callee type ids"))] \
                if flags & FLAG_INDIRECT_CALLEES else []
            out.append(CallGraphRecord(start, version, flags, name, resolved, type_id, tuple(callees),
                                       tuple(type_ids)))
    return tuple(out)
