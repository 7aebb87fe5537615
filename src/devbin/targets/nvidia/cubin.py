"""A read view of an NVIDIA cubin: functions and their resources, call graph, prototypes.

What comes from where (the public decoders redplait/denvdis and VivekPanyam/cudaparsers, checked against
``cuobjdump -res-usage`` and ``ptxas -v`` in tests/test_nvidia_cubin.py):

* SM and the ``a`` variant: read by the one NVIDIA architecture module,
  :mod:`devbin.targets.nvidia.archs` (``e_flags`` bits 8..15 in the CUDA 13 ABI,
  the low byte in the old one; ``a`` is ``.nv.compat`` attribute 0x09 = 1, or the
  old header's 0x800); the virtual architecture is in ``.note.nv.cuinfo``.
* Functions: one per ``.text.<name>`` section, in section order (the order
  cuobjdump prints).  The section's ``sh_info`` holds the function's symbol
  index in its low 24 bits and, on sm_7x/8x, the register count in the top
  byte.  Kernels have ``STO_CUDA_ENTRY`` (0x10) in ``st_other``.
* Registers: for a kernel, ``EIATTR_REGCOUNT`` (global ``.nv.info``); for a
  device function, the ``sh_info`` top byte (0 on sm_90+, where cuobjdump also
  prints ``REG:0``), and ``EIATTR_REGCOUNT`` is kept as ``regcount``.
* Stack: ``EIATTR_MIN_STACK_SIZE`` (linked/executable cubins, per kernel;
  0xFFFFFFFF = not statically known) else ``EIATTR_MAX_STACK_SIZE``
  (relocatable cubins); the frame is ``EIATTR_FRAME_SIZE``.
* Shared / local / constant memory: the sizes of ``.nv.shared.<f>``,
  ``.nv.local.<f>`` and ``.nv.constant<N>.<f>`` (tied to the function by
  ``sh_info`` = its text section, else by name); module-wide: ``.nv.global`` +
  ``.nv.global.init`` (GLOBAL) and ``.nv.constant<N>`` without a function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from devbin.binary import ByteView
from devbin.errors import FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Symbol
from devbin.formats.elf.tables import SH_FLAGS, SH_INFO, SH_SIZE, SH_TYPE
from devbin.targets.nvidia import archs
from devbin.targets.nvidia import eiattr as E
from devbin.targets.nvidia.archs import sm_from_e_flags
from devbin.targets.nvidia.nvcallgraph import NvCallGraph, parse_callgraph, parse_prototype_section
from devbin.targets.nvidia.nvinfo import KParam, NvInfoRecord, decode_kparam, parse_nvinfo, stack_records

STO_CUDA_ENTRY = 0x10
SHT_CUDA_INFO = 0x70000000
SHT_CUDA_CALLGRAPH = 0x70000001
SHT_CUDA_PROTOTYPE = 0x70000002
SHT_CUDA_COMPAT = 0x70000086
# sm_100+ "Mercury" copies (CUDA 12.8+): section types as redplait/denvdis test/nvd.cc names them and ptxas
# 13.0 writes them.  ``.nv.merc.symtab`` has the same layout as ``.symtab`` (same string table; its first
# symbols mirror ``.symtab``'s, index for index), ``.nv.merc.rela.*`` are Elf64_Rela against it, and
# ``.nv.merc.nv.info*`` are EIATTR records whose symbol words index it.
SHT_CUDA_CAPMERC_TEXT = 0x70000016  # .nv.capmerc.text.<f>: sh_info = the function's .nv.merc.symtab index
SHT_CUDA_MERC_RELA = 0x70000082
SHT_CUDA_MERC_INFO = 0x70000083
SHT_CUDA_MERC_SYMTAB = 0x70000085
STACK_UNKNOWN = 0xFFFFFFFF
NT_NV_CUINFO = 1000

#: ``.nv.constant<N>`` (module-wide bank N) and ``.nv.constant<N>.<f>`` (function f's): group 1 the bank,
#: group 2 the function (None for a module-wide bank).
CONST_SECTION_RE = re.compile(r"^\.nv\.constant(\d+)(?:\.(.+))?$")
_APPLIED = frozenset(E.CODES[n] for n in (
    "CBANK_PARAM_SIZE", "PARAM_CBANK", "KPARAM_INFO", "KPARAM_INFO_V2", "MAX_THREADS", "REQNTID", "CTA_PER_CLUSTER",
    "MAXREG_COUNT", "NUM_BARRIERS", "EXIT_INSTR_OFFSETS", "EXTERNS", "CRS_STACK_SIZE", "CUDA_API_VERSION",
    "ANNOTATIONS",
))
#: ``EIATTR_ANNOTATIONS`` entries are (kind, instruction offset) u32 pairs; kind 1 marks a spill or
#: refill instruction (``cuobjdump -elf`` prints it ``SpillRefill : Offset : 0x...``).
ANNOTATION_SPILL_REFILL = 1
#: ``EIATTR_CUDA_API_VERSION`` from which ptxas writes ``EIATTR_ANNOTATIONS`` whenever it spills (checked
#: with CUDA 13.0's ptxas: a function without the record spills nothing); for older producers a missing
#: record says nothing.
ANNOTATIONS_SINCE_API = 130
_REGCOUNT, _FRAME_SIZE, _MIN_STACK_SIZE = E.CODES["REGCOUNT"], E.CODES["FRAME_SIZE"], E.CODES["MIN_STACK_SIZE"]
_OWNED_PREFIXES = (".nv.info.", ".nv.shared.", ".nv.local.", ".nv.constant")


@dataclass(slots=True)
class CubinFunction:
    name: str
    symbol: int
    text_section: int
    is_entry: bool
    size: int
    registers: int = 0
    regcount: int | None = None
    frame_size: int | None = None
    min_stack_size: int | None = None
    max_stack_size: int | None = None
    crs_stack_size: int | None = None
    shared: int = 0
    local: int = 0
    constant_banks: dict[int, int] = field(default_factory=dict)
    param_size: int | None = None
    param_cbank: tuple[int, int, int] | None = None  # (section symbol, offset in bank, size)
    params: list[KParam] = field(default_factory=list)
    max_threads: tuple[int, int, int] | None = None
    reqntid: tuple[int, int, int] | None = None
    cluster_dims: tuple[int, int, int] | None = None
    max_registers: int | None = None
    num_barriers: int | None = None
    exit_offsets: list[int] = field(default_factory=list)
    externs: list[str] = field(default_factory=list)
    cuda_api_version: int | None = None
    spill_instructions: int | None = None  # EIATTR_ANNOTATIONS SpillRefill entries (None: not recorded)
    records: list[NvInfoRecord] = field(default_factory=list)  # its .nv.info.<f> records, all of them

    @property
    def register_count(self) -> int:
        """The registers the function uses: ``EIATTR_REGCOUNT``, else the ``sh_info`` byte (a device
        function's count, where cuobjdump's ``REG`` is 0 on sm_90+); ``Function.resources.registers``."""
        return self.regcount if self.regcount is not None else self.registers

    @property
    def stack(self) -> int:
        """What cuobjdump prints as STACK."""
        if self.min_stack_size is not None:
            return self.min_stack_size
        return self.max_stack_size or 0


@dataclass(frozen=True, slots=True)
class CubinCallGraph:
    """``.nv.callgraph`` with symbol indices resolved to names."""

    direct: tuple[tuple[str, str], ...]
    address_taken: tuple[tuple[str, str], ...]  # (function, prototype string)
    indirect: tuple[tuple[str, str], ...]  # (caller, call-site prototype string)
    address_refs: tuple[tuple[str, str], ...]
    unknown_blocks: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]


def _check_cubin(elf: ElfFile) -> None:
    if elf.header.e_machine != C.EM_CUDA:
        raise FormatError(f"not a cubin: e_machine is {elf.header.e_machine}, not EM_CUDA (190)", fmt="cubin",
                          where=elf.where)
    if elf.symtab is None:
        raise FormatError("cubin has no symbol table", fmt="cubin", where=elf.where)


def cubin_sm(elf: ElfFile) -> int:
    """The SM number from ``e_flags`` (bits 8..15 in the CUDA 13 ABI, the low byte in the old one)."""
    h = elf.header
    return sm_from_e_flags(h.ei_osabi, h.ei_abiversion, h.e_flags)


def compat_records(elf: ElfFile) -> list[NvInfoRecord]:
    sec = elf.section(".nv.compat")
    return parse_nvinfo(sec.view) if sec is not None else []


def is_arch_specific(elf: ElfFile, compat: list[NvInfoRecord] | None = None) -> bool:
    """The ``a`` variant (sm_90a, sm_100a), by :func:`devbin.targets.nvidia.archs.is_arch_specific`:
    ``.nv.compat`` attribute 0x09 = 1, or the old header's ``e_flags`` 0x800."""
    h = elf.header
    records = compat_records(elf) if compat is None else compat
    return archs.is_arch_specific(h.ei_osabi, h.ei_abiversion, h.e_flags, ((r.attr, r.value) for r in records))


def cubin_arch(elf: ElfFile) -> str:
    """``sm_90``, ``sm_90a``: what :attr:`Cubin.arch` says, from the header and ``.nv.compat`` alone (no
    function is read); FormatError for an ELF that is no cubin (wrong machine, no symbol table)."""
    _check_cubin(elf)
    return f"sm_{cubin_sm(elf)}{'a' if is_arch_specific(elf) else ''}"


class Cubin:
    """An ELF file with ``e_machine == EM_CUDA`` seen as a cubin."""

    def __init__(self, elf: ElfFile, *, records: bool = True, only: frozenset[str] | None = None) -> None:
        """``records=False`` skips the per-function ``.nv.info.<f>`` records (parameters, launch
        bounds ...): what resource usage needs comes from the global ``.nv.info`` and the sections.
        ``only``: the records of just these functions are read (the others' stay empty)."""
        _check_cubin(elf)
        self.elf = elf
        symtab = elf.symtab
        assert symtab is not None
        self.symtab = symtab
        self._records = records
        self._only = only
        self.functions: list[CubinFunction] = self._functions()

    # -- header facts -----------------------------------------------------------------
    @property
    def abi_version(self) -> int:
        return self.elf.header.ei_abiversion

    @property
    def sm(self) -> int:
        return cubin_sm(self.elf)

    @cached_property
    def global_records(self) -> list[NvInfoRecord]:
        """The records of the global ``.nv.info`` (decoded on first use: the functions' stack and register
        facts are read from it without making a record each)."""
        info = self.elf.section(".nv.info")
        return parse_nvinfo(info.view) if info is not None and info.sh_type == SHT_CUDA_INFO else []

    @cached_property
    def compat_records(self) -> list[NvInfoRecord]:
        return compat_records(self.elf)

    @property
    def arch_specific(self) -> bool:
        """The ``a`` variant (sm_90a, sm_100a): ``.nv.compat`` attribute 0x09 = 1 in CUDA 13."""
        return is_arch_specific(self.elf, self.compat_records)

    @property
    def arch(self) -> str:
        return f"sm_{self.sm}{'a' if self.arch_specific else ''}"

    @cached_property
    def cuinfo(self) -> tuple[int, int] | None:
        """(virtual SM, tool version x10) from ``.note.nv.cuinfo``, if present."""
        sec = self.elf.section(".note.nv.cuinfo")
        if sec is None:
            return None
        for n in self.elf.notes(sec):
            if n.n_type == NT_NV_CUINFO and len(n.desc) >= 8:
                _, virt, tool = ByteView(n.desc, fmt="cubin", where=".note.nv.cuinfo").unpack("HHI", 0)
                return virt, tool
        return None

    @property
    def virtual_arch(self) -> str | None:
        info = self.cuinfo
        return f"compute_{info[0]}" if info else None

    @property
    def is_relocatable(self) -> bool:
        return self.elf.header.e_type == C.ET_REL

    # -- functions ----------------------------------------------------------------------
    def _symbol(self, i: int) -> Symbol | None:
        return self.symtab[i] if 0 <= i < len(self.symtab) else None

    def _functions(self) -> list[CubinFunction]:
        # one pass over the section headers as tuples: a Section is made only for the .nv.info.<f> sections
        # whose records are read
        elf = self.elf
        rows, names = elf.section_rows, elf.section_names
        info = elf.section(".nv.info")
        stack = stack_records(info.view) if info is not None and info.sh_type == SHT_CUDA_INFO else []
        symtab = self.symtab
        nsyms = len(symtab)
        stored = symtab.stored
        funcs: list[CubinFunction] = []
        by_section: dict[int, CubinFunction] = {}
        for i in [i for i, name in enumerate(names) if name.startswith(".text.")]:
            r = rows[i]
            if r[SH_TYPE] != C.SHT_PROGBITS:
                continue
            name = names[i]
            si = r[SH_INFO] & 0xFFFFFF
            if si < nsyms:  # the symbol's fields as stored and its name, no Symbol made
                fname = symtab.name_of(si) or name[len(".text."):]
                f = CubinFunction(fname, si, i, bool(stored.st_other[si] & STO_CUDA_ENTRY), stored.st_size[si])
            else:
                f = CubinFunction(name[len(".text."):], si, i, False, r[SH_SIZE])
            f.registers = r[SH_INFO] >> 24
            funcs.append(f)
            by_section[i] = f
        by_symbol = {f.symbol: f for f in funcs}
        by_name = {f.name: f for f in funcs}
        for attr, sym_i, value in stack:
            g = by_symbol.get(sym_i)
            if g is None:
                continue
            if attr == _REGCOUNT:
                g.regcount = value
            elif attr == _FRAME_SIZE:
                g.frame_size = value
            elif attr == _MIN_STACK_SIZE:
                g.min_stack_size = value
            else:
                g.max_stack_size = value
        for f in funcs:
            if f.is_entry and f.regcount is not None:
                f.registers = f.regcount
        for i in [i for i, name in enumerate(names) if name.startswith(_OWNED_PREFIXES)]:
            name, r = names[i], rows[i]
            owner = self._owner(name, r[SH_FLAGS], r[SH_INFO], by_section, by_name)
            if owner is None:
                continue
            if r[SH_TYPE] == SHT_CUDA_INFO:
                if self._records and (self._only is None or owner.name in self._only):
                    self._apply_records(owner, parse_nvinfo(elf.sections[i].view))
            elif name.startswith(".nv.shared.") and not name.startswith(".nv.shared.reserved"):
                owner.shared += r[SH_SIZE]
            elif name.startswith(".nv.local."):
                owner.local += r[SH_SIZE]
            else:
                m = CONST_SECTION_RE.match(name)
                if m and m[2] is not None:
                    owner.constant_banks[int(m[1])] = owner.constant_banks.get(int(m[1]), 0) + r[SH_SIZE]
        return funcs

    @staticmethod
    def _owner(name: str, flags: int, info: int, by_section: dict[int, CubinFunction],
               by_name: dict[str, CubinFunction]) -> CubinFunction | None:
        """The function a ``.nv.info.``/``.nv.shared.``/``.nv.local.``/``.nv.constant`` section belongs to:
        by ``sh_info`` (with ``SHF_INFO_LINK``), else by the name after its third dot."""
        if flags & C.SHF_INFO_LINK and info in by_section:
            return by_section[info]
        suffix = name.split(".", 3)[-1] if name.count(".") >= 3 else ""
        return by_name.get(suffix)

    def _apply_records(self, f: CubinFunction, records: list[NvInfoRecord]) -> None:
        f.records = records
        codes = E.CODES
        for r in records:
            if r.attr not in _APPLIED:
                continue
            words = r.words() if r.payload else []
            if r.attr == codes["CBANK_PARAM_SIZE"]:
                f.param_size = r.value
            elif r.attr == codes["PARAM_CBANK"] and len(words) >= 2:
                f.param_cbank = (words[0], words[1] & 0xFFFF, words[1] >> 16)
            elif r.attr in (codes["KPARAM_INFO"], codes["KPARAM_INFO_V2"]):
                p = decode_kparam(r)
                if p is not None:
                    f.params.append(p)
            elif r.attr in E.DIM3 and len(words) >= 3:
                dims = (words[0], words[1], words[2])
                if r.attr == codes["MAX_THREADS"]:
                    f.max_threads = dims
                elif r.attr == codes["REQNTID"]:
                    f.reqntid = dims
                else:
                    f.cluster_dims = dims
            elif r.attr == codes["MAXREG_COUNT"]:
                f.max_registers = r.value
            elif r.attr == codes["NUM_BARRIERS"]:
                f.num_barriers = r.value
            elif r.attr == codes["EXIT_INSTR_OFFSETS"]:
                f.exit_offsets = words
            elif r.attr == codes["EXTERNS"]:
                f.externs = [s.name for w in words if (s := self._symbol(w)) is not None]
            elif r.attr == codes["CRS_STACK_SIZE"] and words:
                f.crs_stack_size = words[0]
            elif r.attr == codes["CUDA_API_VERSION"] and words:
                f.cuda_api_version = words[0]
            elif r.attr == codes["ANNOTATIONS"] and len(r.payload) % 8 == 0:
                f.spill_instructions = (f.spill_instructions or 0) + sum(
                    1 for kind in words[0::2] if kind == ANNOTATION_SPILL_REFILL)
        if f.spill_instructions is None and (f.cuda_api_version or 0) >= ANNOTATIONS_SINCE_API:
            f.spill_instructions = 0
        f.params.sort(key=lambda p: p.ordinal)

    # -- module-wide ----------------------------------------------------------------------
    @property
    def global_bytes(self) -> int:
        rows = self.elf.section_rows
        return sum(rows[i][SH_SIZE] for i, name in enumerate(self.elf.section_names)
                   if name in (".nv.global", ".nv.global.init"))

    @property
    def common_constant_banks(self) -> dict[int, int]:
        out: dict[int, int] = {}
        rows = self.elf.section_rows
        for i, name in enumerate(self.elf.section_names):
            m = CONST_SECTION_RE.match(name) if name.startswith(".nv.constant") else None
            if m and m[2] is None:
                out[int(m[1])] = out.get(int(m[1]), 0) + rows[i][SH_SIZE]
        return out

    def function(self, name: str) -> CubinFunction | None:
        return next((f for f in self.functions if f.name == name), None)

    # -- call graph and prototypes ---------------------------------------------------------
    def string_at(self, offset: int) -> str:
        """The string at ``offset`` in the symbol table's string table (where prototype strings live)."""
        link = self.symtab.section.sh_link
        if not 0 < link < len(self.elf.sections):
            raise FormatError("the symbol table links to no string table", fmt="cubin", where=self.elf.where,
                              value=link)
        return self.elf.sections[link].view.cstr(offset, "prototype string")

    def _name(self, i: int) -> str:
        s = self._symbol(i)
        if s is None:
            raise FormatError("call graph names a symbol outside the symbol table", fmt="cubin", value=i)
        return s.name

    @cached_property
    def raw_callgraph(self) -> NvCallGraph | None:
        sec = next((s for s in self.elf.sections if s.sh_type == SHT_CUDA_CALLGRAPH), None)
        return parse_callgraph(sec.view) if sec is not None else None

    @cached_property
    def callgraph(self) -> CubinCallGraph | None:
        cg = self.raw_callgraph
        if cg is None:
            return None
        return CubinCallGraph(
            direct=tuple((self._name(a), self._name(b)) for a, b in cg.direct),
            address_taken=tuple((self._name(a), self.string_at(b)) for a, b in cg.address_taken),
            indirect=tuple((self._name(a), self.string_at(b)) for a, b in cg.indirect),
            address_refs=tuple((self._name(a), self._name(b)) for a, b in cg.address_refs),
            unknown_blocks=tuple((m, tuple(p)) for m, p in cg.unknown),
        )

    @cached_property
    def prototypes(self) -> dict[str, str]:
        """Function name -> prototype string, from ``.nv.prototype``."""
        sec = next((s for s in self.elf.sections if s.sh_type == SHT_CUDA_PROTOTYPE), None)
        if sec is None:
            return {}
        return {self._name(s): self.string_at(o) for s, o in parse_prototype_section(sec.view)}
