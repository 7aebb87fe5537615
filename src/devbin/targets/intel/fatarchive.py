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
``shared/source/device_binary_format/device_binary_format_ar.cpp``, ``unpackSingleDeviceBinary``):
it looks for the first member whose name starts with, in this order,

1. ``<bits>.<major>.<minor>.<revision>``, the device's IP version (``64.12.60.7``);
2. ``<bits>.<product>.<stepping>``, the device's product abbreviation and stepping (``64.dg2.0``);
3. ``<bits>.<major>.<minor>`` (``64.12.55``: a member for another revision of the same IP);
4. ``<bits>.<product>`` (``64.dg2``, also ``64.dg2.<any stepping>``);
5. ``generic_ir``,

and takes the first of these whose device code the zebin decoder accepts for the device
(``device_binary_format_zebin.cpp``: ``validateTargetDevice`` on the zebin's notes); ``generic_ir``
(or the ``.spv`` of a member the decoder refused) is then compiled for the device.  ``<bits>`` is 64 on
every device ocloc names (``maxPointerSizeInBytes`` 8).  A member no filter names is never looked at.
:func:`member_target` gives what a name says, :func:`member_filters` the names the runtime looks for on a
device and :func:`member_match` which of them a member answers.  devbin does not know a device's
stepping (the revision ID the driver reads from the GPU): filter 2 is not applied, and a
``<bits>.<product>.<stepping>`` member is taken by filter 4, which its name also answers.

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
from devbin.formats.ar import ArchiveFile, Member, numbered
from devbin.formats.ar import constants as AR
from devbin.formats.elf import constants as EC
from devbin.formats.elf import layout as EL
from devbin.formats.oclelf import BUILD_OPTIONS, ET_OPENCL_OBJECTS, SHT_OPENCL_OPTIONS, SHT_OPENCL_SPIRV, SPIRV_OBJECT
from devbin.targets.intel.devices import PRODUCT_FAMILIES, IntelDevice, device_named, ip_text, parse_ip

__all__ = ["GENERIC_IR", "PAD_PREFIX", "FatMember", "fat_member_name", "generic_ir", "member_filters", "member_match",
           "member_target", "product_abbreviation", "prune_fat_archive", "read_fat_archive", "unique_member_names",
           "write_fat_archive"]

GENERIC_IR: Final = "generic_ir"
PAD_PREFIX: Final = "pad_"
#: ``generic_ir``'s ELF: ``e_type`` ``ET_OPENCL_OBJECTS``, its sections ``SPIRV Object`` of type
#: ``SHT_OPENCL_SPIRV`` and ``BuildOptions`` of type ``SHT_OPENCL_OPTIONS`` (the OpenCL ELF's constants:
#: :mod:`devbin.formats.oclelf`, which the scan reads it with).
_SHSTRTAB = ".shstrtab"
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


def product_abbreviation(device: IntelDevice) -> str:
    """The product abbreviation the runtime names ``device``'s members by (compute-runtime ``hardwarePrefix``:
    ``dg2`` for every DG2 device, ``pvc``, ``mtl``): its product family's acronym, else its acronym's stem
    (``bmg-g21`` -> ``bmg``)."""
    pf = device.product_family
    return PRODUCT_FAMILIES[pf] if pf is not None and pf in PRODUCT_FAMILIES else device.name.split("-")[0]


def member_filters(device: IntelDevice, bits: int = 64) -> tuple[tuple[int, str, str], ...]:
    """The name prefixes the runtime looks for on ``device``, in its order (module docstring): ``(filter
    number 1-5, prefix, what it is)``; filter 2 (the stepping) is left out: devbin does not know it."""
    a, r, v = device.ip
    product = product_abbreviation(device)
    return ((1, f"{bits}.{a}.{r}.{v}", "the device's IP version"),
            (3, f"{bits}.{a}.{r}", "the device's IP major.minor"),
            (4, f"{bits}.{product}", "the device's product"),
            (5, GENERIC_IR, "the SPIR-V fallback"))


def member_match(name: str, device: IntelDevice) -> tuple[int, str, str] | None:
    """The first filter of :func:`member_filters` whose prefix ``name`` starts with (the runtime's
    ``startsWith``, so ``64.12.55`` answers for ``64.12.55.8``), or None: the runtime never looks at it."""
    return next((f for f in member_filters(device) if name.startswith(f[1])), None)


def fat_member_name(arch: str, bits: int) -> str:
    """The member name ``ocloc`` gives the zebin of ``arch`` (an IP version, an acronym of one device: its IP
    version; a generic or family acronym as it is: ``64.dg2``) built for ``bits``-bit pointers."""
    ip = parse_ip(arch)
    d = device_named(arch) if ip is None else None
    return f"{bits}.{ip_text(ip) if ip is not None else d.ip_version if d is not None else arch.lower()}"


def generic_ir(spirv: bytes, options: bytes = b"") -> bytes:
    """The ``generic_ir`` member of a SPIR-V module, as ocloc writes it (ELF64, ``ET_OPENCL_OBJECTS``,
    sections: the null one, ``SPIRV Object``, ``BuildOptions`` when there are ``options``, ``.shstrtab``; see the
    module docstring).  ElfEncoder's order (section headers before the data, ``e_phentsize`` set with no program
    header) is not :mod:`devbin.formats.elf.writer`'s, so the records are packed here, by its layouts."""
    sections = [(SPIRV_OBJECT, SHT_OPENCL_SPIRV, spirv)] + ([(BUILD_OPTIONS, SHT_OPENCL_OPTIONS, options)]
                                                          if options else [])
    names = b"\0" + _SHSTRTAB.encode() + b"\0"
    rows = []
    count = len(sections) + 2
    at = EL.EHDR_SIZE[EC.ELFCLASS64] + count * EL.SHDR[EC.ELFCLASS64].size
    for name, sh_type, data in [*sections, (_SHSTRTAB, EC.SHT_STRTAB, b"")]:
        size = len(data)
        if name == _SHSTRTAB:
            sh_name, size = 1, len(names)
        else:
            sh_name = len(names)
            names += name.encode() + b"\0"
        rows.append(dict(sh_name=sh_name, sh_type=sh_type, sh_flags=0, sh_addr=0, sh_offset=at, sh_size=size,
                         sh_link=0, sh_info=0, sh_addralign=_ALIGN, sh_entsize=0))
        at += size + -size % _ALIGN
    ehdr, shdr = EL.EHDR[EC.ELFCLASS64], EL.SHDR[EC.ELFCLASS64]
    header = dict(e_type=ET_OPENCL_OBJECTS, e_machine=0, e_version=EC.EV_CURRENT, e_entry=0, e_phoff=0,
                  e_shoff=EL.EHDR_SIZE[EC.ELFCLASS64], e_flags=0, e_ehsize=EL.EHDR_SIZE[EC.ELFCLASS64],
                  e_phentsize=EL.PHDR[EC.ELFCLASS64].size, e_phnum=0, e_shentsize=shdr.size, e_shnum=count,
                  e_shstrndx=count - 1)
    em = Emitter()
    em.write(EC.ELFMAG + bytes([EC.ELFCLASS64, EC.ELFDATA2LSB, EC.EV_CURRENT]) + bytes(EL.EI_NIDENT - 7))
    em.pack(ehdr.fmt, *(header[f] for f in ehdr.fields))
    em.write(bytes(shdr.size))
    for row in rows:
        em.pack(shdr.fmt, *(row[f] for f in shdr.fields))
    for data in [*(d for _, _, d in sections), names]:
        em.write(data)
        em.write(bytes(-len(data) % _ALIGN))
    return em.getvalue()


def write_fat_archive(members: Sequence[tuple[str, bytes]]) -> bytes:
    """An ``ocloc`` fat archive of ``(name, data)`` members in order, with ``pad_<n>`` members where ArEncoder
    puts them (module docstring).  A name longer than 15 bytes or starting ``pad_`` is a UsageError; a name may
    repeat (ocloc's runtime takes the first that fits), so that a pruned archive keeping every member is its input
    again; ``pack`` refuses a repeated name in its input (:func:`unique_member_names`)."""
    from devbin.formats.ar.writer import ArMember, write_archive  # a scan imports no writer (tests/test_lean.py)

    out: list[ArMember] = []
    written = 0  # bytes after the magic, as ArEncoder counts them
    pads = 0
    for name, data in members:
        if not name or len(name.encode()) >= 16 or name.startswith(PAD_PREFIX):
            raise UsageError(f"an ocloc fat archive cannot hold a member named {quote(name)} (at most 15 bytes, "
                             f"not {PAD_PREFIX}<n>)")
        if (written + AR.HEADER_SIZE) % _ALIGN:
            pad = _ALIGN - (written + 2 * AR.HEADER_SIZE) % _ALIGN
            out.append(ArMember(f"{PAD_PREFIX}{pads}", _PAD * pad, ()))
            pads += 1
            written += AR.HEADER_SIZE + pad
        out.append(ArMember(name, data, ()))
        written += AR.HEADER_SIZE + len(data) + len(data) % 2
    return write_archive(out, symtab=False, pad_byte=b"\0")


def unique_member_names(names: Sequence[str]) -> None:
    """UsageError when ``pack``'s input gives a member name twice (two images for one device: ocloc writes one)."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UsageError(f"an ocloc fat archive holds one member per device; {quote(name)} is given twice")
        seen.add(name)


def prune_fat_archive(data: Buffer, keeps: Callable[[str, int], bool], where: str = "") -> bytes:
    """The archive ``data`` without the members ``keeps(name, n)`` refuses (``n``: the member's number among
    those of its name, from 1, as the scan counts them) and without its ``pad_`` members, written again by
    :func:`write_fat_archive` (which makes the pads for the new offsets).  FormatError from the ``ar`` reader."""
    kept = [(m.name, bytes(m.data)) for m, n in numbered(ArchiveFile(data, where=where).files)
            if not m.name.startswith(PAD_PREFIX) and keeps(m.name, n)]
    return write_fat_archive(kept)
