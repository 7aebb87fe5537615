"""``ocloc``'s multi-device output ("fat binary"): an ``ar`` archive of zebins named by device.

Layout (compute-runtime ``shared/source/device_binary_format/ar/ar.h``, ``ar_encoder.cpp``; the
names are made in ``shared/offline_compiler/source/ocloc_fatbinary.cpp``, ``buildFatBinaryForTarget``
and ``appendGenericIr``): a GNU/System V ``ar`` (read with :mod:`devbin.formats.ar`) whose members
are

* ``<pointer bits>.<architecture>.<release>.<revision>`` (``64.12.60.7``): a zebin for the device of
  that IP version (ocloc since 2022-03); ``<bits>.<acronym>`` (``64.dg2``) for a generic acronym;
  ``<bits>.<acronym>.<stepping>`` (``64.tgllp.0``) from older ocloc;
* ``generic_ir``: an OpenCL ELF (``e_type`` 0xFF02) with the SPIR-V the archive was built from,
  written when the input was SPIR-V and IR was not excluded (the device zebins then carry no
  ``.spv``): the runtime's fallback when no member fits the device;
* ``pad_<n>``: filler the encoder puts before a member so that the member's data starts on an
  8-byte boundary (its bytes are spaces); no device code.

The runtime picks a member by prefix match of its name (compute-runtime
``device_binary_format_ar.cpp``); :func:`member_target` gives what a name says.

:func:`write_fat_archive` writes one as ``ocloc`` does (``devbin pack --format ocloc``): compute-runtime's
``ArEncoder`` (``ar_encoder.cpp``: no symbol table, names of at most 15 bytes, a ``pad_<n>`` member of
spaces before a member whose data would not start 8-aligned, odd sizes padded with a NUL) and
``generic_ir`` as its ``ElfEncoder`` lays it out (``shared/source/device_binary_format/elf/elf_encoder.cpp``:
header, section headers, then the section data 8-aligned, ``.shstrtab`` last and named first), with
a ``BuildOptions`` section when there are options (current ``ocloc_fatbinary.cpp``, ``appendGenericIr``; the
2022 ocloc wrote none).  :func:`prune_fat_archive` writes one again with some of its members (``devbin prune``):
the ``pad_`` members made anew for the new offsets; keeping every member gives the input back byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from devbin.binary import Buffer, ByteView, Emitter
from devbin.errors import UsageError, quote
from devbin.formats.ar import ArchiveFile, Member
from devbin.formats.ar import constants as AR
from devbin.targets.intel.devices import device_named, ip_text, parse_ip

__all__ = ["GENERIC_IR", "PAD_PREFIX", "FatMember", "fat_member_name", "generic_ir", "member_target",
           "prune_fat_archive", "read_fat_archive", "write_fat_archive"]

GENERIC_IR: Final = "generic_ir"
PAD_PREFIX: Final = "pad_"
#: ``generic_ir``'s ELF: ``e_type`` ``ET_OPENCL_OBJECTS``, its sections ``SPIRV Object`` of type
#: ``SHT_OPENCL_SPIRV`` and ``BuildOptions`` of type ``SHT_OPENCL_OPTIONS`` (compute-runtime
#: ``shared/source/device_binary_format/elf/ocl_elf.h``).
ET_OPENCL_OBJECTS: Final = 0xFF02
SHT_OPENCL_SPIRV: Final = 0xFF000009
SHT_OPENCL_OPTIONS: Final = 0xFF000006
SPIRV_OBJECT: Final = "SPIRV Object"
BUILD_OPTIONS: Final = "BuildOptions"
_SHSTRTAB = ".shstrtab"
_SHT_STRTAB = 3
_ELF64_HEADER = 64
_ELF64_SECTION_HEADER = 64
_ELF64_PROGRAM_HEADER = 56
_ALIGN = 8  # ArEncoder's member data and ElfEncoder's section data alignment
_PAD = b" "  # what ArEncoder fills a pad_ member with


@dataclass(frozen=True, slots=True)
class FatMember:
    """A member and what its name says: ``role`` is ``zebin`` (a device's code), ``generic_ir`` or
    ``pad``, or ``other`` for names ocloc does not write; ``arch`` the IP version or acronym; ``bits``
    the pointer size (0 when the name gives none)."""

    member: Member
    role: str
    arch: str
    bits: int


def member_target(name: str) -> tuple[str, str, int]:
    """``(role, arch, pointer bits)`` of a member name (module docstring)."""
    if name == GENERIC_IR:
        return GENERIC_IR, "", 0
    if name.startswith(PAD_PREFIX):
        return "pad", "", 0
    bits, dot, rest = name.partition(".")
    if not dot or bits not in ("32", "64") or not rest:
        return "other", "", 0
    ip = parse_ip(rest)
    if ip is not None:
        return "zebin", ip_text(ip), int(bits)
    acronym = rest.partition(".")[0].lower()  # "dg2", or "tgllp" of the old "tgllp.0"
    return ("zebin", acronym, int(bits)) if acronym else ("other", "", 0)


def read_fat_archive(data: Buffer | ByteView, *, where: str = "") -> tuple[FatMember, ...]:
    """Every regular member of an ocloc archive with its role and arch (FormatError from the ar reader)."""
    ar = ArchiveFile(data, where=where)
    out = []
    for m in ar.files:
        if m.is_special:
            continue
        role, arch, bits = member_target(m.name)
        out.append(FatMember(m, role, arch, bits))
    return tuple(out)


def fat_member_name(arch: str, bits: int) -> str:
    """The member name ``ocloc`` gives the zebin of ``arch`` (an IP version, an acronym of one device: its IP
    version; a generic or family acronym as it is: ``64.dg2``) built for ``bits``-bit pointers."""
    ip = parse_ip(arch)
    d = device_named(arch) if ip is None else None
    return f"{bits}.{ip_text(ip) if ip is not None else d.ip_version if d is not None else arch.lower()}"


def generic_ir(spirv: bytes, options: bytes = b"") -> bytes:
    """The ``generic_ir`` member of a SPIR-V module, as ocloc writes it (ELF64, ``ET_OPENCL_OBJECTS``,
    sections: the null one, ``SPIRV Object``, ``BuildOptions`` when there are ``options``, ``.shstrtab``; see the
    module docstring)."""
    sections = [(SPIRV_OBJECT, SHT_OPENCL_SPIRV, spirv)] + ([(BUILD_OPTIONS, SHT_OPENCL_OPTIONS, options)]
                                                          if options else [])
    names = b"\0" + _SHSTRTAB.encode() + b"\0"
    name_at = []
    for name, _, _ in sections:
        name_at.append(len(names))
        names += name.encode() + b"\0"
    count = len(sections) + 2
    data_off = _ELF64_HEADER + count * _ELF64_SECTION_HEADER
    em = Emitter()
    em.write(b"\x7fELF\x02\x01\x01" + bytes(9))
    em.pack("HHIQQQIHHHHHH", ET_OPENCL_OBJECTS, 0, 1, 0, 0, _ELF64_HEADER, 0, _ELF64_HEADER, _ELF64_PROGRAM_HEADER,
            0, _ELF64_SECTION_HEADER, count, count - 1)
    em.write(bytes(_ELF64_SECTION_HEADER))
    at = data_off
    for (_, sh_type, data), name_offset in zip(sections, name_at, strict=True):
        em.pack("IIQQQQIIQQ", name_offset, sh_type, 0, 0, at, len(data), 0, 0, _ALIGN, 0)
        at += len(data) + -len(data) % _ALIGN
    em.pack("IIQQQQIIQQ", 1, _SHT_STRTAB, 0, 0, at, len(names), 0, 0, _ALIGN, 0)
    for _, _, data in sections:
        em.write(data)
        em.write(bytes(-len(data) % _ALIGN))
    em.write(names)
    em.write(bytes(-len(names) % _ALIGN))
    return em.getvalue()


def write_fat_archive(members: Sequence[tuple[str, bytes]]) -> bytes:
    """An ``ocloc`` fat archive of ``(name, data)`` members in order, with ``pad_<n>`` members where ArEncoder
    puts them (module docstring).  A name longer than 15 bytes, or given twice, is a UsageError."""
    from devbin.formats.ar.writer import ArMember, write_archive  # a scan imports no writer (tests/test_lean.py)

    out: list[ArMember] = []
    seen: set[str] = set()
    written = 0  # bytes after the magic, as ArEncoder counts them
    pads = 0
    for name, data in members:
        if not name or len(name.encode()) >= 16 or name in seen or name.startswith(PAD_PREFIX):
            raise UsageError(f"an ocloc fat archive cannot hold a member named {quote(name)} (one per device, at "
                             "most 15 bytes)")
        seen.add(name)
        if (written + AR.HEADER_SIZE) % _ALIGN:
            pad = _ALIGN - (written + 2 * AR.HEADER_SIZE) % _ALIGN
            out.append(ArMember(f"{PAD_PREFIX}{pads}", _PAD * pad, ()))
            pads += 1
            written += AR.HEADER_SIZE + pad
        out.append(ArMember(name, data, ()))
        written += AR.HEADER_SIZE + len(data) + len(data) % 2
    return write_archive(out, symtab=False, pad_byte=b"\0")


def prune_fat_archive(data: Buffer, keeps: Callable[[str, int], bool], where: str = "") -> bytes:
    """The archive ``data`` without the members ``keeps(name, n)`` refuses (``n``: the member's number among
    those of its name, from 1, as the scan counts them) and without its ``pad_`` members, written again by
    :func:`write_fat_archive` (which makes the pads for the new offsets).  FormatError from the ``ar`` reader."""
    kept = [(m.name, bytes(m.data)) for m in _numbered(ArchiveFile(data, where=where).files) if keeps(m.name, m.n)]
    return write_fat_archive(kept)


@dataclass(frozen=True, slots=True)
class _Numbered:
    name: str
    n: int
    data: memoryview


def _numbered(members: Sequence[Member]) -> list[_Numbered]:
    """The members but the ``pad_`` ones, each with its number among those of its name."""
    seen: dict[str, int] = {}
    out = []
    for m in members:
        if m.name.startswith(PAD_PREFIX):
            continue
        seen[m.name] = n = seen.get(m.name, 0) + 1
        out.append(_Numbered(m.name, n, m.data))
    return out
