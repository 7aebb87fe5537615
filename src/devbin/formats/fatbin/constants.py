"""Numbers of the CUDA fatbin container (``docs`` and ``nvidia-formats.md`` §1).

Every field that holds an enumeration stays a raw ``int`` in the read view;
these tables only give names.  A value not listed here is shown as hex and
kept, never rejected.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_MAX",
    "ENTRY_HEADER_SIZE",
    "ENTRY_VERSION",
    "EXEC_SECTION",
    "FATBIN_HEADER_SIZE",
    "FATBIN_MAGIC",
    "FATBIN_MAGIC_BYTES",
    "FATBIN_VERSION",
    "FLAG_NAMES",
    "KIND_NAMES",
    "REL_SECTION",
    "SECTIONS",
    "WRAPPER_MAGIC",
    "WRAPPER_MAGIC_BYTES",
    "WRAPPER_SECTION",
    "WRAPPER_SIZE",
    "compression_name",
    "flag_names",
    "kind_name",
]

#: ``FATBIN_MAGIC`` of ``fatbinary.h``: the first u32 of every fatbin (bytes ``50 ed 55 ba``).
#: The one definition: every module that recognises a fatbin imports it from here.
FATBIN_MAGIC: Final = 0xBA55ED50
#: :data:`FATBIN_MAGIC` as it lies in a file (little-endian).
FATBIN_MAGIC_BYTES: Final = FATBIN_MAGIC.to_bytes(4, "little")
#: The only fatbin header version seen (u16 at +4).
FATBIN_VERSION: Final = 1
#: Size of the fatbin header (u16 at +6 records it; always 0x10).
FATBIN_HEADER_SIZE: Final = 0x10
#: Fixed part of an entry ("text") header; ``header_size`` adds an extension area after it.
ENTRY_HEADER_SIZE: Final = 0x40
#: The u16 at +2 of every entry header written by CUDA 11-13.
ENTRY_VERSION: Final = 0x0101

#: ``FATBINC_MAGIC`` of ``fatbinary_section.h``: the host-side ``__fatBinC_Wrapper_t``.
WRAPPER_MAGIC: Final = 0x466243B1
#: :data:`WRAPPER_MAGIC` as it lies in a file (little-endian).
WRAPPER_MAGIC_BYTES: Final = WRAPPER_MAGIC.to_bytes(4, "little")
WRAPPER_SIZE: Final = 24
WRAPPER_VERSION: Final = 1
WRAPPER_LINK_VERSION: Final = 2

#: Where a host ELF keeps fatbins (``fatbinary_section.h``, CUDA toolkit): ``.nv_fatbin`` the executable
#: images (whole-program and ``nvcc -dlink`` output), ``__nv_relfatbin`` the relocatable ones (``-rdc``
#: objects); :data:`SECTIONS` in the order ``cuobjdump -all`` reads them.  The one definition.
EXEC_SECTION: Final = ".nv_fatbin"
REL_SECTION: Final = "__nv_relfatbin"
SECTIONS: Final = (EXEC_SECTION, REL_SECTION)
#: The section of the 24-byte ``__fatBinC_Wrapper_t`` records (``fatbinary_section.h``).
WRAPPER_SECTION: Final = ".nvFatBinSegment"

#: Largest decompressed image devbin produces unless the caller raises the cap.
DEFAULT_MAX: Final = 1 << 30

# Entry kinds (``fatBinaryCodeKind``).
KIND_PTX: Final = 1
KIND_ELF: Final = 2
KIND_OLDCUBIN: Final = 4
KIND_LTOIR: Final = 8

KIND_NAMES: Final[dict[int, str]] = {KIND_PTX: "ptx", KIND_ELF: "elf", KIND_OLDCUBIN: "oldcubin", KIND_LTOIR: "ltoir"}

# Entry flags (u64 at +0x28).
FLAG_64BIT: Final = 0x1
FLAG_DEBUG: Final = 0x2
FLAG_PRODUCER_CUDA: Final = 0x4
FLAG_PRODUCER_OPENCL: Final = 0x8
FLAG_HOST_LINUX: Final = 0x10
FLAG_HOST_MAC: Final = 0x20
FLAG_HOST_WINDOWS: Final = 0x40
FLAG_LZ4: Final = 0x2000
FLAG_ZSTD: Final = 0x8000
FLAG_LTO: Final = 0x10000
FLAG_ARCH_SPECIFIC: Final = 0x100000  # the "a" variant: sm_90a, compute_100a
FLAG_FAMILY: Final = 0x200000  # the "f" variant: sm_100f
FLAG_COMPAT_BLOB: Final = 0x1000000  # sm_100+ ELF entries carrying the .nv.compat blob

FLAG_NAMES: Final[dict[int, str]] = {
    FLAG_64BIT: "64bit",
    FLAG_DEBUG: "debug",
    FLAG_PRODUCER_CUDA: "producer-cuda",
    FLAG_PRODUCER_OPENCL: "producer-opencl",
    FLAG_HOST_LINUX: "host-linux",
    FLAG_HOST_MAC: "host-mac",
    FLAG_HOST_WINDOWS: "host-windows",
    FLAG_LZ4: "lz4",
    FLAG_ZSTD: "zstd",
    FLAG_LTO: "lto",
    FLAG_ARCH_SPECIFIC: "arch-specific",
    FLAG_FAMILY: "family",
    FLAG_COMPAT_BLOB: "compat-blob",
}

COMPRESSION_MASK: Final = FLAG_LZ4 | FLAG_ZSTD


def kind_name(kind: int) -> str:
    """``"ptx"``, ``"elf"``, ``"oldcubin"``, ``"ltoir"``, or the value in hex."""
    return KIND_NAMES.get(kind, f"{kind:#x}")


def flag_names(flags: int) -> list[str]:
    """Names of the set bits, lowest first; unknown bits come out as hex (``0x1000``)."""
    out: list[str] = []
    bit = 1
    rest = flags
    while rest:
        if rest & bit:
            out.append(FLAG_NAMES.get(bit, f"{bit:#x}"))
            rest &= ~bit
        bit <<= 1
    return out


def compression_name(flags: int) -> str:
    """``"none"``, ``"lz4"``, ``"zstd"``, or the compression bits in hex when both are set."""
    bits = flags & COMPRESSION_MASK
    if bits == 0:
        return "none"
    if bits == FLAG_LZ4:
        return "lz4"
    if bits == FLAG_ZSTD:
        return "zstd"
    return f"{bits:#x}"
