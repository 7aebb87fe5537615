"""Read view of CUDA fatbins (``nvidia-formats.md`` §1.2-1.5).

On-disk layout (little-endian throughout)::

    fatbin header, 16 bytes
      +0x00 u32 magic 0xBA55ED50   +0x04 u16 version (1)   +0x06 u16 header_size (0x10)
      +0x08 u64 fat_size: bytes of all entries after the header
    entries, back to back, each 8-aligned:
      +0x00 u16 kind (1 PTX, 2 ELF, 4 old cubin, 8 LTO-IR)
      +0x02 u16 entry version (0x0101)
      +0x04 u32 header_size: 0x40 fixed bytes + extension area
      +0x08 u64 payload_size: payload area after the header (padded to 8)
      +0x10 u32 compressed_size (0 if stored plain)
      +0x14 u32 options_offset: options descriptor (u32 string offset, u32 length), or 0
      +0x18 u16 minor, +0x1a u16 major: PTX ISA version; ELF: EI_ABIVERSION and 1
      +0x1c u32 arch (90 for sm_90/sm_90a; the a/f variant lives in the flags)
      +0x20 u32 identifier_offset, +0x24 u32 identifier_len (no NUL)
      +0x28 u64 flags (``constants.FLAG_*``)
      +0x30 u64 reserved
      +0x38 u64 uncompressed_size (0 if stored plain)
      +0x40 .. header_size: extension area (identifier, options descriptor and string,
            and for sm_100+ ELF a copy of the cubin's .nv.compat records)
      header_size .. +payload_size: payload (compressed_size bytes of it when compressed)

All offsets inside an entry header are relative to the entry.  Every size and
offset is checked against the enclosing fatbin before anything is read; a
fatbin's entries may not run past ``fat_size``, and an entry's strings may not
run past its ``header_size``.

What :meth:`FatbinEntry.data` returns matches ``cuobjdump -xelf``/``-xptx``
byte for byte (checked in ``tests/test_fatbin.py``):

* ELF: the cubin trimmed to its real end, the largest of the ELF header, the
  section and program header tables and every section that occupies file
  bytes (not ``SHT_NOBITS`` nor NVIDIA's NOBITS-like ``.nv.shared``/``.nv.local``
  types).  Segments do not count.  The payload area is padded to 8, so a cubin
  whose size is not a multiple of 8 comes back without the padding; bytes the
  cubin had after its last section are dropped too, as cuobjdump drops them.
  When a section runs past the payload (cuobjdump says "Invalid ELF") or the
  payload is no ELF, the payload comes back whole.
* PTX: the text up to its first NUL (the payload is NUL-terminated and
  zero-padded; ``uncompressed_size`` counts the NUL).
* anything else (LTO-IR, unknown kinds): the payload, decompressed when flagged.

LTO-IR from ``nvcc -dlto -dc`` (CUDA 13) starts with the magic ``ed 43 4e 7f``
when stored plain (``-Xfatbin -compress=false``).  When ``fatbinary``
compresses it (the default), the entry carries the LTO flag and the zstd (or,
with ``-compress-mode=speed``, lz4) flag, but the payload is neither a zstd
frame nor an lz4 block: a high-entropy encoding of NVIDIA's own whose first
bytes differ from file to file.  Only NVIDIA's tools decode it; asking for
such an entry's image raises :class:`FormatError` saying so, and
:attr:`FatbinEntry.raw_payload` gives the stored bytes to copy the entry as is.
"""

from __future__ import annotations

import itertools
import operator
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from devbin.binary import ByteView, align_up, format_view, join_where
from devbin.errors import FormatError, NotThisFormat, TruncatedError, UnsupportedVersion
from devbin.formats import zstdframe
from devbin.formats.elf.constants import no_file_types
from devbin.formats.fatbin import constants as C

__all__ = ["Fatbin", "FatbinEntry", "elf_image_size", "extract_name", "iter_fatbins", "parse_fatbin"]

_FMT = "fatbin"
_ENTRY_FMT = "HHIQIIHHIIIQQQ"


@dataclass(frozen=True)
class FatbinEntry:
    """One device image of a fatbin: its header fields, kept raw, and windows on its bytes."""

    index: int
    offset: int  # absolute offset of the entry header
    kind: int
    version: int
    header_size: int
    payload_size: int
    compressed_size: int
    options_offset: int
    minor: int
    major: int
    arch: int
    identifier_offset: int
    identifier_len: int
    identifier: str
    options: str
    options_raw: bytes  # exactly the recorded length; for sm_100+ ELF a 0x00 and the .nv.compat records
    flags: int
    reserved: int
    uncompressed_size: int
    extension: bytes
    raw_payload: memoryview = field(repr=False, compare=False)
    payload_area: memoryview = field(repr=False, compare=False)
    where: str = field(default="", repr=False, compare=False)
    options_string_offset: int = 0  # the descriptor's string offset; 0: no options string (see has_options)

    @property
    def has_options(self) -> bool:
        """Whether the entry records an options string, even an empty one.

        An options descriptor whose string offset is 0 records none: older toolchains
        (CUDA 11) wrote PTX entries with a 0x48-byte header holding only the descriptor
        ``{0, 0}``, where ``cuobjdump -res-usage`` prints no ``ptxasOptions =`` line, while
        CUDA 12-13 point the descriptor at a string, empty or not, and cuobjdump prints
        the line (checked with cuobjdump 13 on patched entries: tests/test_nvidia_fidelity.py).
        """
        return self.options_string_offset != 0

    @property
    def kind_name(self) -> str:
        return C.kind_name(self.kind)

    @property
    def variant(self) -> str:
        """``"a"`` (arch-specific), ``"f"`` (family) or ``""``, from the flags."""
        if self.flags & C.FLAG_ARCH_SPECIFIC:
            return "a"
        if self.flags & C.FLAG_FAMILY:
            return "f"
        return ""

    @property
    def arch_name(self) -> str:
        """``sm_90a`` for ELF (and old cubins), ``compute_90`` for PTX and LTO-IR."""
        prefix = "compute_" if self.kind in (C.KIND_PTX, C.KIND_LTOIR) else "sm_"
        return f"{prefix}{self.arch}{self.variant}"

    @property
    def compression(self) -> str:
        return C.compression_name(self.flags)

    @property
    def is_compressed(self) -> bool:
        return bool(self.flags & C.COMPRESSION_MASK)

    @property
    def is_opaque(self) -> bool:
        """Compressed LTO-IR in NVIDIA's own encoding (module docstring): what ``fatbinary``
        writes for compressed LTO-IR, zstd- or lz4-flagged, whose payload is no zstd frame
        (nor, for lz4, an lz4 block; which has no magic to tell, so every lz4-flagged LTO-IR
        entry counts).  Only NVIDIA's tools decode it; devbin copies it as stored."""
        if self.kind != C.KIND_LTOIR or not self.is_compressed:
            return False
        return not (self.flags & C.FLAG_ZSTD and bytes(self.raw_payload[:4]) == zstdframe.MAGIC)

    @property
    def is_64bit(self) -> bool:
        return bool(self.flags & C.FLAG_64BIT)

    @property
    def is_debug(self) -> bool:
        return bool(self.flags & C.FLAG_DEBUG)

    @property
    def flag_names(self) -> list[str]:
        return C.flag_names(self.flags)

    @property
    def payload_offset(self) -> int:
        """Absolute offset of the payload."""
        return self.offset + self.header_size

    def image_data(self, max_size: int, size: int) -> memoryview | bytes:
        """The image's bytes as ``devbin extract`` writes them (:meth:`devbin.images.Image.data`; ``size``:
        the scan's :attr:`Image.size`): :meth:`extract_view`, or for LTO-IR in NVIDIA's own encoding the
        entry as stored, in a one-entry fatbin (:func:`devbin.formats.fatbin.writer.stored_entry`)."""
        if self.is_opaque:
            from devbin.formats.fatbin.writer import stored_entry, write_fatbin  # the writer only here
            return write_fatbin([stored_entry(self)])
        return self.extract_view(max_size, plain_size=size)

    def image_head(self, n: int, size: int) -> memoryview | bytes:
        """The first ``n`` bytes of :meth:`image_data` (a compressed entry is decoded whole for them)."""
        return self.image_data(C.DEFAULT_MAX, size)[:n]

    def image_view(self, max_size: int = C.DEFAULT_MAX) -> memoryview | bytes:
        """The image without a copy when it is stored plain (a window of the fatbin), else decompressed.

        Unlike :meth:`data` it is not trimmed to cuobjdump's extent: for parsing, not for writing out.
        """
        if self.is_compressed:
            from devbin.formats.fatbin.compress import decompress as _decompress  # zstd/lz4 only when decoding
            try:
                return memoryview(_decompress(self.compression, self.raw_payload, self.uncompressed_size,
                                              max_size=max_size, where=self.where, offset=self.payload_offset))
            except FormatError as e:
                if self.kind != C.KIND_LTOIR:
                    raise
                raise FormatError(
                    f"LTO-IR stored in NVIDIA's own encoding: the flags say {self.compression} but the payload is "
                    f"no {self.compression} data ({e.message}); nvcc -dlto writes it so when fatbinary compresses. "
                    "devbin can copy the entry as stored but not decode it (build with -Xfatbin -compress=false "
                    "for plain LTO-IR)", fmt=_FMT, where=self.where, offset=self.payload_offset) from None
        return self.raw_payload

    def data(self, max_size: int = C.DEFAULT_MAX) -> bytes:
        """The image as ``cuobjdump -xelf``/``-xptx`` writes it (see the module docstring).

        Compressed payloads are decompressed, refusing an ``uncompressed_size``
        above ``max_size``; corrupt data raises :class:`FormatError`.
        """
        return bytes(self.extract_view(max_size))

    def extract_view(self, max_size: int = C.DEFAULT_MAX, *, plain_size: int | None = None) -> memoryview | bytes:
        """:meth:`data` without a copy when the image is stored plain (a window of the fatbin).

        ``plain_size``: the extent of a plain image when the caller has it already (a scan's
        :attr:`Image.size`, which is :func:`entry_size`): not measured a second time."""
        if plain_size is not None and not self.is_compressed and plain_size <= len(self.raw_payload):
            return self.raw_payload[:plain_size]
        image = self.image_view(max_size)
        view = ByteView(image, where=self.where)
        if self.kind == C.KIND_PTX:
            end = view.find(b"\0")
            return image if end < 0 else image[:end]
        if self.kind == C.KIND_ELF:
            size = elf_image_size(view)
            return image if size is None else image[:size]
        return image


@dataclass(frozen=True)
class Fatbin:
    """One fatbin: the 16-byte header and its entries."""

    offset: int  # offset in the view it was read from
    size: int  # header_size + fat_size
    version: int
    header_size: int
    fat_size: int
    entries: tuple[FatbinEntry, ...]

    def entries_of_kind(self, kind: int) -> list[FatbinEntry]:
        return [e for e in self.entries if e.kind == kind]




def parse_fatbin(view: ByteView | bytes | bytearray | memoryview, *, where: str = "") -> Fatbin:
    """Parse the fatbin at offset 0 of ``view`` (bytes after it are ignored).

    Raises :class:`NotThisFormat` for a wrong magic, :class:`UnsupportedVersion`
    for a header version other than 1, :class:`TruncatedError` or
    :class:`FormatError` for sizes and offsets that do not fit.
    """
    v = format_view(view, _FMT, where)
    where = v.where
    if len(v) < 4 or v.u32(0) != C.FATBIN_MAGIC:
        got = v.u32(0) if len(v) >= 4 else None
        raise v.error("not a fatbin (bad magic)", 0, got, cls=NotThisFormat)
    version, header_size, fat_size = v.unpack("HHQ", 4, "fatbin header")
    if version != C.FATBIN_VERSION:
        raise v.error("unsupported fatbin version", 4, version, cls=UnsupportedVersion)
    if header_size < C.FATBIN_HEADER_SIZE:
        raise v.error(f"fatbin header_size below {C.FATBIN_HEADER_SIZE:#x}", 6, header_size)
    v.check(0, header_size, "fatbin header")
    if fat_size > len(v) - header_size:
        raise v.error(
            f"fat_size runs past the end of the data ({v.base + len(v):#x})", 8, fat_size, cls=TruncatedError
        )
    size = header_size + fat_size
    fv = v.sub(0, size, where=where)
    entries: list[FatbinEntry] = []
    pos = header_size
    while pos < size:
        entries.append(_parse_entry(fv, pos, len(entries), where))
        e = entries[-1]
        pos += e.header_size + e.payload_size
    return Fatbin(offset=0, size=size, version=version, header_size=header_size, fat_size=fat_size,
                  entries=tuple(entries))


def _parse_entry(fv: ByteView, pos: int, index: int, where: str) -> FatbinEntry:
    loc = join_where(where, f"fatbin[{index}]")
    remaining = len(fv) - pos
    if remaining < C.ENTRY_HEADER_SIZE:
        raise fv.error(
            f"entry header ({C.ENTRY_HEADER_SIZE:#x} bytes) runs past the end of the fatbin ({fv.base + len(fv):#x})",
            pos, remaining, cls=TruncatedError, where=loc,
        )
    (kind, version, header_size, payload_size, compressed_size, options_offset, minor, major, arch,
     ident_off, ident_len, flags, reserved, uncompressed_size) = fv.unpack(_ENTRY_FMT, pos, "entry header")
    prefix = "compute_" if kind in (C.KIND_PTX, C.KIND_LTOIR) else "sm_"
    variant = "a" if flags & C.FLAG_ARCH_SPECIFIC else "f" if flags & C.FLAG_FAMILY else ""
    loc = join_where(where, f"fatbin[{index}] {prefix}{arch}{variant}")
    if header_size < C.ENTRY_HEADER_SIZE:
        raise fv.error(f"entry header_size below {C.ENTRY_HEADER_SIZE:#x}", pos + 4, header_size, where=loc)
    if header_size > remaining:
        raise fv.error(
            f"entry header_size runs past the end of the fatbin ({fv.base + len(fv):#x})", pos + 4, header_size,
            cls=TruncatedError, where=loc,
        )
    if payload_size > remaining - header_size:
        raise fv.error(
            f"payload_size runs past the end of the fatbin ({fv.base + len(fv):#x})", pos + 8, payload_size,
            cls=TruncatedError, where=loc,
        )
    hv = fv.sub(pos, header_size, where=loc)
    identifier = ""
    if ident_off or ident_len:
        if ident_off > header_size or ident_len > header_size - ident_off:
            raise hv.error("identifier runs past the entry header", 0x20, ident_off)
        identifier = _text(hv.bytes_at(ident_off, ident_len, "identifier"))
    options = ""
    options_raw = b""
    str_off = 0
    if options_offset:
        if options_offset > header_size or header_size - options_offset < 8:
            raise hv.error("options descriptor runs past the entry header", 0x14, options_offset)
        str_off, str_len = hv.unpack("II", options_offset, "options descriptor")
        if str_off > header_size or (str_off and str_len > header_size - str_off):
            raise hv.error("options string runs past the entry header", options_offset, str_off)
        if str_off:  # 0: a descriptor without a string (CUDA 11's 0x48-byte PTX header), no options
            options_raw = hv.bytes_at(str_off, str_len, "options").tobytes()
            options = _text(memoryview(options_raw))
    payload_area = fv.bytes_at(pos + header_size, payload_size, "payload")
    raw = payload_area
    if flags & C.COMPRESSION_MASK:
        if compressed_size > payload_size:
            raise hv.error("compressed_size exceeds payload_size", 0x10, compressed_size)
        raw = payload_area[:compressed_size]
    return FatbinEntry(
        index=index, offset=fv.base + pos, kind=kind, version=version, header_size=header_size,
        payload_size=payload_size, compressed_size=compressed_size, options_offset=options_offset, minor=minor,
        major=major, arch=arch, identifier_offset=ident_off, identifier_len=ident_len, identifier=identifier,
        options=options, options_raw=options_raw, flags=flags, reserved=reserved, uncompressed_size=uncompressed_size,
        extension=hv.bytes_at(C.ENTRY_HEADER_SIZE, header_size - C.ENTRY_HEADER_SIZE, "extension").tobytes(),
        raw_payload=raw, payload_area=payload_area, where=loc, options_string_offset=str_off,
    )


def _text(raw: memoryview) -> str:
    """Header strings: a NUL ends them early; bad UTF-8 is kept as escapes, never fatal."""
    data = bytes(raw)
    end = data.find(b"\0")
    return (data if end < 0 else data[:end]).decode("utf-8", "backslashreplace")


def iter_fatbins(view: ByteView | bytes | bytearray | memoryview, *, where: str = "") -> Iterator[Fatbin]:
    """Fatbins stored back to back (a linked program's ``.nv_fatbin``), each 8-aligned.

    Walks ``header_size + fat_size`` from one to the next and stops cleanly at
    the end or where only zero bytes remain (section padding).  ``Fatbin.offset``
    is the offset in ``view``.
    """
    v = format_view(view, _FMT, where)
    pos = 0
    index = 0
    n = len(v)
    while pos < n:
        if v.is_zero_from(pos):
            return
        sub = v.sub(pos, n - pos, where=join_where(v.where, f"fatbin #{index}"))
        fb = parse_fatbin(sub)
        yield Fatbin(offset=pos, size=fb.size, version=fb.version, header_size=fb.header_size,
                     fat_size=fb.fat_size, entries=fb.entries)
        pos = align_up(pos + fb.size, 8)
        index += 1



def elf_image_size(view: ByteView) -> int | None:
    """The end of the ELF image at the start of ``view`` as ``cuobjdump -xelf`` computes it.

    The maximum of the ELF header size, the ends of the section and program
    header tables and the ends of the sections that occupy file bytes.  Returns
    ``None`` when the bytes are no ELF or a table or section runs past the view.
    """
    try:
        if not view.startswith(b"\x7fELF"):
            return None
        ei_class, ei_data = view.u8(4), view.u8(5)
        if ei_class not in (1, 2) or ei_data not in (1, 2):
            return None
        v = view.with_order(ei_data == 1)
        if ei_class == 2:
            machine = v.u16(0x12)
            phoff, shoff = v.u64(0x20), v.u64(0x28)
            ehsize, phentsize, phnum, shentsize, shnum = v.unpack("HHHHH", 0x34)
            sh_fmt = "IIQQQQ"  # name, type, flags, addr, offset, size
        else:
            machine = v.u16(0x12)
            phoff, shoff = v.u32(0x1C), v.u32(0x20)
            ehsize, phentsize, phnum, shentsize, shnum = v.unpack("HHHHH", 0x28)
            sh_fmt = "IIIIII"
        end = ehsize
        if phnum:
            v.check(phoff, phnum * phentsize, "program headers")
            end = max(end, phoff + phnum * phentsize)
        if shoff:
            if shnum == 0:  # extended numbering: the count is section 0's sh_size
                shnum = v.unpack(sh_fmt, shoff)[5]
            if shentsize < (64 if ei_class == 2 else 40):
                return None
            v.check_count(shnum, shentsize, shoff, "section headers")
            end = max(end, shoff + shnum * shentsize)
            # One struct pass over the whole table (every plain fatbin cubin is measured at scan time).
            full = struct.Struct(("<" if ei_data == 1 else ">") + sh_fmt + ("IIQQ" if ei_class == 2 else "IIII"))
            table = v.bytes_at(shoff, shnum * shentsize, "section headers")
            recs = (list(full.iter_unpack(table)) if shentsize == full.size
                    else [full.unpack_from(table, i * shentsize) for i in range(shnum)])
            if recs:
                no_file = no_file_types(machine)
                # max(offset + size) over the sections with file bytes, column-wise (map/compress run in
                # C: this is on every scan's path, once per plain fatbin cubin).  A section running past
                # the view makes ``end`` run past it too: None below.
                _, sh_type, _, _, offset, size, *_ = zip(*recs, strict=True)
                has_bytes = map(operator.and_, map(bool, size), map(operator.not_, map(no_file.__contains__, sh_type)))
                end = max(end, max(itertools.compress(map(operator.add, offset, size), has_bytes), default=0))
        return end if end <= len(v) else None
    except FormatError:
        return None


def extract_name(entry: FatbinEntry, stem: str, number: int) -> str:
    """The file name ``cuobjdump -xelf all``/``-xptx all`` gives ``entry``.

    ``number`` counts the entries of the same kind from 1 in file order and
    ``stem`` is the input file name without its last extension.  With an
    identifier the name is the identifier's base name without its extension
    and no number: ``kern.sm_90.cubin`` for ``--ident=dir/kern.cu``.  PTX uses
    the ``sm_`` prefix too (``x.1.sm_90.ptx``).  For ELF cuobjdump takes the
    arch from the cubin itself, not from the entry header, so an sm_90 cubin
    filed as arch 80 (or as ``sm_90a``) is still named ``sm_90``; this
    function uses the entry header, which agrees for every real fatbin but
    one way: a cubin's ``e_flags`` record the ``a`` variant but not the
    family, so a family-specific cubin (``-arch=sm_100f``: the entry says
    ``sm_100f``) is named ``x.1.sm_100.cubin``, while family PTX keeps it
    (``x.1.sm_120f.ptx``), as ``cuobjdump -lelf -lptx`` lists them (CUDA 13).

    cuobjdump neither lists nor extracts LTO-IR; devbin names it the same way with the arch
    ``-res-usage`` prints for it: ``x.1.sm_90.ltoir`` (the entry's bytes, stored plain), or
    ``x.1.sm_90.ltoir.fatbin`` for LTO-IR in NVIDIA's own encoding (:attr:`FatbinEntry.is_opaque`),
    written as a one-entry fatbin holding the entry as stored.
    """
    ext = {C.KIND_PTX: "ptx", C.KIND_LTOIR: "ltoir.fatbin" if entry.is_opaque else "ltoir"}.get(entry.kind, "cubin")
    variant = "" if entry.kind != C.KIND_PTX and entry.variant == "f" else entry.variant
    arch = f"sm_{entry.arch}{variant}"
    if entry.identifier:
        base = os.path.splitext(os.path.basename(entry.identifier))[0]
        return f"{base}.{arch}.{ext}"
    return f"{stem}.{number}.{arch}.{ext}"
