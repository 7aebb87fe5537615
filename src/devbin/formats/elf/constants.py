"""ELF constants and their names, generic and per machine.

Values are stored as raw ints everywhere in devbin; names come from
:func:`name`, which never fails: an unknown value inside a reserved range is
named relative to the range start (``SHT_LOPROC+0x2``), anything else prints
as hex.  Machine-specific tables (NVIDIA ``SHT_CUDA_*``, AMDGPU) are consulted
before the generic ones, as readelf does.
"""

from __future__ import annotations

from collections.abc import Mapping

# e_ident
ELFMAG = b"\x7fELF"
ELFCLASS32, ELFCLASS64 = 1, 2
ELFDATA2LSB, ELFDATA2MSB = 1, 2
EV_CURRENT = 1

# e_type
ET_NONE, ET_REL, ET_EXEC, ET_DYN, ET_CORE = 0, 1, 2, 3, 4

# e_machine (the ones devbin cares about, plus common hosts)
EM_NONE = 0
EM_386 = 3
EM_ARM = 40
EM_X86_64 = 62
EM_AARCH64 = 183
EM_CUDA = 190
EM_INTELGT = 205  # Intel GPU zebin (IGC IGC/ZEBinWriter/zebin/spec/elf.md)
EM_AMDGPU = 224
EM_RISCV = 243

# Special section indices
SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_ABS = 0xFFF1
SHN_COMMON = 0xFFF2
SHN_XINDEX = 0xFFFF
PN_XNUM = 0xFFFF

# sh_type
SHT_NULL = 0
SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_RELA = 4
SHT_HASH = 5
SHT_DYNAMIC = 6
SHT_NOTE = 7
SHT_NOBITS = 8
SHT_REL = 9
SHT_SHLIB = 10
SHT_DYNSYM = 11
SHT_INIT_ARRAY = 14
SHT_FINI_ARRAY = 15
SHT_PREINIT_ARRAY = 16
SHT_GROUP = 17
SHT_SYMTAB_SHNDX = 18
SHT_RELR = 19
SHT_LOOS = 0x60000000
SHT_HIOS = 0x6FFFFFFF
SHT_LOPROC = 0x70000000
SHT_HIPROC = 0x7FFFFFFF
SHT_LOUSER = 0x80000000
SHT_HIUSER = 0xFFFFFFFF

# sh_flags
SHF_WRITE = 0x1
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4
SHF_MERGE = 0x10
SHF_STRINGS = 0x20
SHF_INFO_LINK = 0x40
SHF_LINK_ORDER = 0x80
SHF_OS_NONCONFORMING = 0x100
SHF_GROUP = 0x200
SHF_TLS = 0x400
SHF_COMPRESSED = 0x800
SHF_MASKOS = 0x0FF00000
SHF_MASKPROC = 0xF0000000

# p_type
PT_NULL, PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_SHLIB, PT_PHDR, PT_TLS = range(8)
PT_LOOS = 0x60000000
PT_GNU_EH_FRAME = 0x6474E550
PT_GNU_STACK = 0x6474E551
PT_GNU_RELRO = 0x6474E552
PT_GNU_PROPERTY = 0x6474E553
PT_LOPROC = 0x70000000
PF_X, PF_W, PF_R = 1, 2, 4

# symbols
STB_LOCAL, STB_GLOBAL, STB_WEAK = 0, 1, 2
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE, STT_COMMON, STT_TLS = range(7)
STT_GNU_IFUNC = 10
#: Processor-specific symbol types: NVIDIA's data objects in constant/shared/local memory (cubins), an
#: AMDGPU HSA kernel (code object v2); ``STT_LOPROC`` 13 and ``STT_LOOS`` 10 mean other things elsewhere.
STT_CUDA_OBJECT, STT_AMDGPU_HSA_KERNEL = 13, 10
STV_DEFAULT, STV_INTERNAL, STV_HIDDEN, STV_PROTECTED = range(4)

# OS/ABI
ELFOSABI_NONE = 0
ELFOSABI_GNU = 3
ELFOSABI_CUDA = 0x33  # CUDA <= 12 cubins (ABI version 7)
ELFOSABI_CUDA_V2 = 0x41  # CUDA 13 cubins (ABI version 8)
ELFOSABI_AMDGPU_HSA = 64
ELFOSABI_AMDGPU_PAL = 65
ELFOSABI_AMDGPU_MESA3D = 66

ET_NAMES = {0: "ET_NONE", 1: "ET_REL", 2: "ET_EXEC", 3: "ET_DYN", 4: "ET_CORE"}
EM_NAMES = {
    0: "EM_NONE", 3: "EM_386", 8: "EM_MIPS", 20: "EM_PPC", 21: "EM_PPC64", 40: "EM_ARM", 62: "EM_X86_64",
    183: "EM_AARCH64", 190: "EM_CUDA", 205: "EM_INTELGT", 224: "EM_AMDGPU", 243: "EM_RISCV", 247: "EM_BPF",
}
SHT_NAMES = {
    0: "SHT_NULL", 1: "SHT_PROGBITS", 2: "SHT_SYMTAB", 3: "SHT_STRTAB", 4: "SHT_RELA", 5: "SHT_HASH",
    6: "SHT_DYNAMIC", 7: "SHT_NOTE", 8: "SHT_NOBITS", 9: "SHT_REL", 10: "SHT_SHLIB", 11: "SHT_DYNSYM",
    14: "SHT_INIT_ARRAY", 15: "SHT_FINI_ARRAY", 16: "SHT_PREINIT_ARRAY", 17: "SHT_GROUP",
    18: "SHT_SYMTAB_SHNDX", 19: "SHT_RELR",
    0x6FFFFFF5: "SHT_GNU_ATTRIBUTES", 0x6FFFFFF6: "SHT_GNU_HASH", 0x6FFFFFF7: "SHT_GNU_LIBLIST",
    0x6FFFFFFD: "SHT_GNU_verdef", 0x6FFFFFFE: "SHT_GNU_verneed", 0x6FFFFFFF: "SHT_GNU_versym",
    0x6FFF4C00: "SHT_LLVM_ODRTAB", 0x6FFF4C01: "SHT_LLVM_LINKER_OPTIONS", 0x6FFF4C03: "SHT_LLVM_ADDRSIG",
    0x6FFF4C04: "SHT_LLVM_DEPENDENT_LIBRARIES", 0x6FFF4C05: "SHT_LLVM_SYMPART",
    0x6FFF4C08: "SHT_LLVM_BB_ADDR_MAP_V0", 0x6FFF4C09: "SHT_LLVM_CALL_GRAPH_PROFILE",
    0x6FFF4C0A: "SHT_LLVM_BB_ADDR_MAP", 0x6FFF4C0B: "SHT_LLVM_OFFLOADING", 0x6FFF4C0C: "SHT_LLVM_LTO",
    0x6FFF4C0F: "SHT_LLVM_CALL_GRAPH",
}
# NVIDIA section types (public: redplait/denvdis ``test/nvd.cc``; checked against nvcc 13.0 cubins).
SHT_CUDA_NAMES = {
    0x70000000: "SHT_CUDA_INFO", 0x70000001: "SHT_CUDA_CALLGRAPH", 0x70000002: "SHT_CUDA_PROTOTYPE",
    0x70000003: "SHT_CUDA_RESOLVED_RELA", 0x70000004: "SHT_CUDA_METADATA", 0x70000006: "SHT_CUDA_CONSTANT",
    0x70000007: "SHT_CUDA_GLOBAL", 0x70000008: "SHT_CUDA_GLOBAL_INIT", 0x70000009: "SHT_CUDA_LOCAL",
    0x7000000A: "SHT_CUDA_SHARED", 0x7000000B: "SHT_CUDA_RELOCINFO", 0x7000000E: "SHT_CUDA_UFT",
    0x70000010: "SHT_CUDA_UFT_INDEX", 0x70000011: "SHT_CUDA_UFT_ENTRY", 0x70000012: "SHT_CUDA_UDT",
    0x70000014: "SHT_CUDA_UDT_ENTRY", 0x70000015: "SHT_CUDA_RESERVED_SHARED",
    **{0x70000064 + n: f"SHT_CUDA_CONSTANT_B{n}" for n in range(18)},
}
# devbin's own sections (docs/FORMAT.md), valid on every machine.
SHT_DEVBIN_NAMES = {
    0x8DB00001: "SHT_DEVBIN_FUNC", 0x8DB00002: "SHT_DEVBIN_CALLGRAPH",
    0x8DB00003: "SHT_DEVBIN_PROTO", 0x8DB00004: "SHT_DEVBIN_META",
}
# Section types that, like SHT_NOBITS, occupy no file bytes: their sh_offset/sh_size describe
# memory only (NVIDIA's shared/global/local memory sections overlap whatever follows them in
# the file).  Readers give them empty contents; editors do not treat their range as in use.
NOBITS_LIKE_BY_MACHINE: Mapping[int, frozenset[int]] = {
    EM_CUDA: frozenset({0x70000007, 0x70000009, 0x7000000A, 0x70000015}),
}


def no_file_types(machine: int) -> frozenset[int]:
    """The section types that occupy no file bytes on ``machine``: SHT_NULL, SHT_NOBITS and its NOBITS-like types."""
    return frozenset({SHT_NULL, SHT_NOBITS, *NOBITS_LIKE_BY_MACHINE.get(machine, ())})


def occupies_file(sh_type: int, machine: int) -> bool:
    """False for SHT_NULL, SHT_NOBITS and the machine's NOBITS-like types (:func:`no_file_types`)."""
    return sh_type not in (SHT_NULL, SHT_NOBITS) and sh_type not in NOBITS_LIKE_BY_MACHINE.get(machine, ())


SHT_X86_64_NAMES = {0x70000001: "SHT_X86_64_UNWIND"}
# Intel zebin section types (IGC IGC/ZEBinWriter/zebin/spec/elf.md; compute-runtime
# shared/source/device_binary_format/zebin/zebin_elf.h for SHT_ZEBIN_PISA).
SHT_ZEBIN_NAMES = {
    0xFF000009: "SHT_ZEBIN_SPIRV", 0xFF000011: "SHT_ZEBIN_ZEINFO", 0xFF000012: "SHT_ZEBIN_GTPIN_INFO",
    0xFF000013: "SHT_ZEBIN_VISAASM", 0xFF000014: "SHT_ZEBIN_MISC", 0xFF000015: "SHT_ZEBIN_PISA",
}
SHT_BY_MACHINE: Mapping[int, Mapping[int, str]] = {EM_CUDA: SHT_CUDA_NAMES, EM_X86_64: SHT_X86_64_NAMES,
                                                   EM_INTELGT: SHT_ZEBIN_NAMES}

SHF_NAMES = {
    SHF_WRITE: "SHF_WRITE", SHF_ALLOC: "SHF_ALLOC", SHF_EXECINSTR: "SHF_EXECINSTR", SHF_MERGE: "SHF_MERGE",
    SHF_STRINGS: "SHF_STRINGS", SHF_INFO_LINK: "SHF_INFO_LINK", SHF_LINK_ORDER: "SHF_LINK_ORDER",
    SHF_OS_NONCONFORMING: "SHF_OS_NONCONFORMING", SHF_GROUP: "SHF_GROUP", SHF_TLS: "SHF_TLS",
    SHF_COMPRESSED: "SHF_COMPRESSED", 0x80000000: "SHF_EXCLUDE",
}
PT_NAMES = {
    0: "PT_NULL", 1: "PT_LOAD", 2: "PT_DYNAMIC", 3: "PT_INTERP", 4: "PT_NOTE", 5: "PT_SHLIB", 6: "PT_PHDR",
    7: "PT_TLS", PT_GNU_EH_FRAME: "PT_GNU_EH_FRAME", PT_GNU_STACK: "PT_GNU_STACK", PT_GNU_RELRO: "PT_GNU_RELRO",
    PT_GNU_PROPERTY: "PT_GNU_PROPERTY",
}
STB_NAMES = {0: "STB_LOCAL", 1: "STB_GLOBAL", 2: "STB_WEAK", 10: "STB_GNU_UNIQUE"}
STT_NAMES = {
    0: "STT_NOTYPE", 1: "STT_OBJECT", 2: "STT_FUNC", 3: "STT_SECTION", 4: "STT_FILE", 5: "STT_COMMON",
    6: "STT_TLS", 10: "STT_GNU_IFUNC",
}
STT_BY_MACHINE: Mapping[int, Mapping[int, str]] = {
    EM_CUDA: {STT_CUDA_OBJECT: "STT_CUDA_OBJECT"},
    EM_AMDGPU: {STT_AMDGPU_HSA_KERNEL: "STT_AMDGPU_HSA_KERNEL"},
}
STV_NAMES = {0: "STV_DEFAULT", 1: "STV_INTERNAL", 2: "STV_HIDDEN", 3: "STV_PROTECTED"}
OSABI_NAMES = {
    0: "ELFOSABI_NONE", 1: "ELFOSABI_HPUX", 2: "ELFOSABI_NETBSD", 3: "ELFOSABI_GNU", 6: "ELFOSABI_SOLARIS",
    9: "ELFOSABI_FREEBSD", 97: "ELFOSABI_ARM", 255: "ELFOSABI_STANDALONE",
}
# OS/ABI values are reused by different machines (0x41 is CUDA's v2 ABI and AMDGPU's PAL).
OSABI_BY_MACHINE: Mapping[int, Mapping[int, str]] = {
    EM_CUDA: {0x33: "ELFOSABI_CUDA", 0x41: "ELFOSABI_CUDA_V2"},
    EM_AMDGPU: {64: "ELFOSABI_AMDGPU_HSA", 65: "ELFOSABI_AMDGPU_PAL", 66: "ELFOSABI_AMDGPU_MESA3D"},
}


def osabi_name(value: int, machine: int = EM_NONE) -> str:
    return OSABI_BY_MACHINE.get(machine, {}).get(value) or OSABI_NAMES.get(value) or f"{value:#x}"
SHN_NAMES = {0: "SHN_UNDEF", 0xFFF1: "SHN_ABS", 0xFFF2: "SHN_COMMON", 0xFFFF: "SHN_XINDEX"}

# Relocation type names for the device machines: R_CUDA_* as in redplait/denvdis ``test/nv_rend.cc``;
# R_AMDGPU_* from LLVM's ``llvm/include/llvm/BinaryFormat/ELFRelocs/AMDGPU.def`` (AMDGPUUsage "Relocation Records").
_CUDA_RELOCS = (
    "NONE 32 64 G32 G64 ABS32_26 TEX_HEADER_INDEX SAMP_HEADER_INDEX SURF_HW_DESC SURF_HW_SW_DESC ABS32_LO_26 "
    "ABS32_HI_26 ABS32_23 ABS32_LO_23 ABS32_HI_23 ABS24_26 ABS24_23 ABS16_26 ABS16_23 TEX_SLOT SAMP_SLOT SURF_SLOT "
    "TEX_BINDLESSOFF13_32 TEX_BINDLESSOFF13_47 CONST_FIELD19_28 CONST_FIELD19_23 TEX_SLOT9_49 6_31 2_47 "
    "TEX_BINDLESSOFF13_41 TEX_BINDLESSOFF13_45 FUNC_DESC32_23 FUNC_DESC32_LO_23 FUNC_DESC32_HI_23 FUNC_DESC_32 "
    "FUNC_DESC_64 CONST_FIELD21_26 QUERY_DESC21_37 CONST_FIELD19_26 CONST_FIELD21_23 PCREL_IMM24_26 PCREL_IMM24_23 "
    "ABS32_20 ABS32_LO_20 ABS32_HI_20 ABS24_20 ABS16_20 FUNC_DESC32_20 FUNC_DESC32_LO_20 FUNC_DESC32_HI_20 "
    "CONST_FIELD19_20 BINDLESSOFF13_36 SURF_HEADER_INDEX INSTRUCTION64 CONST_FIELD21_20 ABS32_32 ABS32_LO_32 "
    "ABS32_HI_32 ABS47_34 ABS16_32 ABS24_32 FUNC_DESC32_32 FUNC_DESC32_LO_32 FUNC_DESC32_HI_32 CONST_FIELD19_40 "
    "BINDLESSOFF14_40 CONST_FIELD21_38 INSTRUCTION128 YIELD_OPCODE9_0 YIELD_CLEAR_PRED4_87 32_LO 32_HI "
    "UNUSED_CLEAR32 UNUSED_CLEAR64 ABS24_40 ABS55_16_34 8_0 8_8 8_16 8_24 8_32 8_40 8_48 8_56 G8_0 G8_8 G8_16 "
    "G8_24 G8_32 G8_40 G8_48 G8_56 FUNC_DESC_8_0 FUNC_DESC_8_8 FUNC_DESC_8_16 FUNC_DESC_8_24 FUNC_DESC_8_32 "
    "FUNC_DESC_8_40 FUNC_DESC_8_48 FUNC_DESC_8_56 ABS20_44 SAMP_HEADER_INDEX_0 UNIFIED UNIFIED_32 UNIFIED_8_0 "
    "UNIFIED_8_8 UNIFIED_8_16 UNIFIED_8_24 UNIFIED_8_32 UNIFIED_8_40 UNIFIED_8_48 UNIFIED_8_56 UNIFIED32_LO_32 "
    "UNIFIED32_HI_32 ABS56_16_34 CONST_FIELD22_37"
).split()
_AMDGPU_RELOCS = (
    "NONE ABS32_LO ABS32_HI ABS64 REL32 REL64 ABS32 GOTPCREL GOTPCREL32_LO GOTPCREL32_HI REL32_LO REL32_HI "
    "12 RELATIVE64 REL16"
).split()
#: The AMDGPU relocation types devbin names in code (the HSA loader's five dynamic ones, and NONE).
R_AMDGPU_NONE, R_AMDGPU_ABS32_LO, R_AMDGPU_ABS32_HI, R_AMDGPU_ABS64, R_AMDGPU_ABS32, R_AMDGPU_RELATIVE64 = (
    _AMDGPU_RELOCS.index(n) for n in ("NONE", "ABS32_LO", "ABS32_HI", "ABS64", "ABS32", "RELATIVE64"))
_X86_64_RELOCS = (
    "NONE 64 PC32 GOT32 PLT32 COPY GLOB_DAT JUMP_SLOT RELATIVE GOTPCREL 32 32S 16 PC16 8 PC8 DTPMOD64 DTPOFF64 "
    "TPOFF64 TLSGD TLSLD DTPOFF32 GOTTPOFF TPOFF32 PC64 GOTOFF64 GOTPC32 GOT64 GOTPCREL64 GOTPC64 GOTPLT64 "
    "PLTOFF64 SIZE32 SIZE64 GOTPC32_TLSDESC TLSDESC_CALL TLSDESC IRELATIVE RELATIVE64 39 40 GOTPCRELX REX_GOTPCRELX"
).split()
RELOC_NAMES: Mapping[int, Mapping[int, str]] = {
    EM_CUDA: {i: "R_CUDA_" + n for i, n in enumerate(_CUDA_RELOCS)},
    EM_AMDGPU: {i: "R_AMDGPU_" + n for i, n in enumerate(_AMDGPU_RELOCS) if not n.isdigit()},
    EM_X86_64: {i: "R_X86_64_" + n for i, n in enumerate(_X86_64_RELOCS) if not n.isdigit()},
}

_RANGES = {
    "sht": ((SHT_LOUSER, "SHT_LOUSER"), (SHT_LOPROC, "SHT_LOPROC"), (SHT_LOOS, "SHT_LOOS")),
    "pt": ((0x70000000, "PT_LOPROC"), (0x60000000, "PT_LOOS")),
    "shn": ((0xFF20, "SHN_LOOS"), (0xFF00, "SHN_LOPROC")),
}


def _ranged(kind: str, value: int, prefix: str) -> str:
    for start, label in _RANGES.get(kind, ()):
        if value >= start:
            return label if value == start else f"{label}+{value - start:#x}"
    return f"{prefix}{value:#x}" if prefix else f"{value:#x}"


def sht_name(value: int, machine: int = EM_NONE) -> str:
    """``SHT_*`` name of a section type; machine-specific names first."""
    name = SHT_BY_MACHINE.get(machine, {}).get(value) or SHT_NAMES.get(value) or SHT_DEVBIN_NAMES.get(value)
    return name or _ranged("sht", value, "")


def pt_name(value: int) -> str:
    return PT_NAMES.get(value) or _ranged("pt", value, "")


def flag_names(value: int, table: Mapping[int, str]) -> list[str]:
    """Names of the set bits of ``value``; leftover bits as one hex item."""
    names = []
    rest = value
    for bit, name in table.items():
        if value & bit == bit and bit:
            names.append(name)
            rest &= ~bit
    if rest:
        names.append(f"{rest:#x}")
    return names


def shf_names(value: int) -> list[str]:
    return flag_names(value, SHF_NAMES)


def simple_name(table: Mapping[int, str], value: int) -> str:
    return table.get(value, f"{value:#x}")


_BINDING_WORDS = {STB_LOCAL: "local", STB_GLOBAL: "global", STB_WEAK: "weak"}
_VISIBILITY_WORDS = {STV_DEFAULT: "default", STV_INTERNAL: "internal", STV_HIDDEN: "hidden", STV_PROTECTED: "protected"}


def binding_word(bind: int) -> str:
    """The model's word for a symbol binding: ``local``/``global``/``weak``, else the number."""
    return _BINDING_WORDS.get(bind, str(bind))


def visibility_word(vis: int) -> str:
    return _VISIBILITY_WORDS.get(vis, str(vis))


def stt_name(value: int, machine: int = EM_NONE) -> str:
    return STT_BY_MACHINE.get(machine, {}).get(value) or STT_NAMES.get(value) or f"{value:#x}"


def shn_name(value: int) -> str:
    if value in SHN_NAMES:
        return SHN_NAMES[value]
    return _ranged("shn", value, "") if value >= SHN_LORESERVE else str(value)


# Note types are named per owner (the note's name field).
NOTE_NAMES: Mapping[str, Mapping[int, str]] = {
    "GNU": {1: "NT_GNU_ABI_TAG", 2: "NT_GNU_HWCAP", 3: "NT_GNU_BUILD_ID", 4: "NT_GNU_GOLD_VERSION",
            5: "NT_GNU_PROPERTY_TYPE_0"},
    "AMDGPU": {32: "NT_AMDGPU_METADATA"},
    "AMD": {1: "NT_AMD_HSA_CODE_OBJECT_VERSION", 3: "NT_AMD_HSA_ISA_VERSION", 4: "NT_AMD_HSA_METADATA"},
    "NVIDIA Corp": {1000: "NT_NV_CUINFO", 2000: "NT_NV_TKINFO"},
}


def note_type_name(owner: str, n_type: int) -> str:
    return NOTE_NAMES.get(owner, {}).get(n_type) or f"{n_type:#x}"


def reloc_name(machine: int, rtype: int) -> str:
    return RELOC_NAMES.get(machine, {}).get(rtype) or f"{rtype:#x}"
