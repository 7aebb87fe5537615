"""Write fatbins laid out byte for byte as NVIDIA's ``fatbinary`` (CUDA 13) lays them out.

``fatbinary --create=x.fatbin -64 --image3=kind=elf,sm=90,file=a.cubin
--image3=kind=ptx,sm=90,file=a.ptx`` (with ``--compress-mode=none``) and
``write_fatbin([FatbinImage(2, 90, cubin), FatbinImage(1, 90, ptx)])`` give the
same bytes; ``tests/test_fatbin.py`` checks it.  The rules, found by comparing
with the tool:

* the 16-byte header, then the entries in the order given, each 8-aligned;
* the entry extension area (from +0x40) holds, each NUL-terminated and
  zero-padded to 8: the identifier (``--ident``; on every entry), then for
  PTX and LTO-IR always, for ELF only when there is something to store, the
  options descriptor (u32 string offset, u32 length, both entry-relative)
  followed by the options string (``--cmdline``; PTX only in ``fatbinary``);
  ``header_size`` is where the last item ends;
* sm_100 and newer ELF entries store the cubin's ``.nv.compat`` section as
  their "options string", behind one extra ``0x00`` byte (the recorded length
  is the section's size), and set flag 0x1000000;
* flags: 0x1 (64-bit) | 0x10 (Linux host), plus 0x2 for debug, 0x100000 for
  ``a`` and 0x200000 for ``f`` variants, 0x10000 on LTO-IR, and the
  compression bit;
* versions: ELF major 1, minor = the cubin's ``EI_ABIVERSION`` byte; PTX
  major.minor from the first ``.version`` in the text, where ``fatbinary``
  reads only the first digit of the minor (``10.12`` gives minor 1) and
  finds the word even inside a comment;
* PTX is squeezed (:func:`squeeze_ptx`) and stored with a terminating NUL,
  zero-padded to 8; ``uncompressed_size`` counts the NUL;
* ELF is stored verbatim, zero-padded to 8;
* compressed entries store the compressed bytes (``compressed_size``) padded
  to 8 (``payload_size``) and the original length in ``uncompressed_size``.

Entries are planned first (:func:`plan_fatbin`) and emitted with
:class:`~devbin.binary.Emitter`, which checks every piece lands where planned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from devbin.binary import ByteView, Emitter, align_up
from devbin.errors import DeviceBinaryError, UsageError
from devbin.formats.fatbin import constants as C
from devbin.formats.fatbin.compress import compress as _compress_payload

__all__ = ["FatbinImage", "PlannedEntry", "plan_fatbin", "ptx_version", "squeeze_ptx", "stored_entry", "write_fatbin"]

_VERSION_RE = re.compile(rb"\.version[ \t]*([0-9]+)\.([0-9])")
_U16 = 0xFFFF
_U32 = 0xFFFFFFFF


@dataclass(frozen=True)
class FatbinImage:
    """One device image to write.

    ``data`` is the cubin, the PTX text (without a NUL; the writer adds it) or
    the LTO-IR.  ``variant`` is ``"a"`` or ``"f"``.  ``flags`` replaces the
    computed flags entirely (the compression bit is still set from
    ``compression``); ``major``/``minor`` replace the computed versions.
    ``squeeze=False`` stores PTX as given instead of the way ``fatbinary``
    squeezes it.  ``compat`` overrides the sm_100+ ``.nv.compat`` blob of an
    ELF image (``b""`` for none).  ``stored_size`` says ``data`` is already
    compressed with ``compression`` (to be stored as is) and is the size it
    decompresses to: for entries copied from another fatbin, such as LTO-IR in
    NVIDIA's own encoding, which devbin cannot decode.  ``reserved`` is the header word
    at +0x30: 0 as ``fatbinary`` writes it, except on LTO-IR in that encoding, where it
    holds a value nvJitLink needs to decode the payload (:func:`stored_entry` copies it).
    """

    kind: int
    arch: int
    data: bytes
    identifier: str = ""
    options: str = ""
    variant: str = ""
    debug: bool = False
    compression: str = "none"
    flags: int | None = None
    major: int | None = None
    minor: int | None = None
    squeeze: bool = True
    compat: bytes | None = None
    stored_size: int | None = None
    reserved: int = 0


@dataclass(frozen=True)
class PlannedEntry:
    """Where each piece of one entry goes (offsets relative to the entry) and its header values."""

    offset: int  # in the fatbin
    header_size: int
    identifier: bytes
    identifier_offset: int
    options: bytes | None  # None: no descriptor
    options_len: int
    options_offset: int
    payload: bytes  # stored bytes, unpadded
    payload_size: int  # padded to 8
    compressed_size: int
    uncompressed_size: int
    kind: int
    minor: int
    major: int
    arch: int
    flags: int
    reserved: int = 0


def ptx_version(text: bytes) -> tuple[int, int] | None:
    """``(major, minor)`` the way ``fatbinary`` reads it: the first ``.version N.D`` anywhere, one minor digit."""
    m = _VERSION_RE.search(text)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2))


_BREAKS = frozenset(b"\n\r\v\f")
_BLANKS = frozenset(b" \t")


def squeeze_ptx(text: bytes) -> bytes:
    """Squeeze PTX text as ``fatbinary`` does before storing it.

    Comments go: ``//`` up to (not including) the next ``\\r`` or ``\\n``,
    ``/* ... */`` whole (an unterminated one runs to the end; the closing
    ``*/`` may share the opening's ``*``, so ``/*/`` is a whole comment).  Each run of
    white space (space, tab, ``\\n \\r \\v \\f``) between other text becomes
    its first character when that is a space or tab, followed by the run's line
    breaks in order; so indentation disappears and ``a \\t b`` becomes ``a b``.
    A comment ends a run.  String literals are copied unchanged: a ``"`` opens
    or closes one unless the byte before it is a backslash (fatbinary looks
    only at that byte, so ``"a\\\\"`` does not close), and an unterminated one
    runs to the end.  NVIDIA does this to save space; the JIT does not care.
    """
    out = bytearray()
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c == 0x2F and i + 1 < n and text[i + 1] == 0x2F:  # //
            i += 2
            while i < n and text[i] not in (0x0A, 0x0D):
                i += 1
        elif c == 0x2F and i + 1 < n and text[i + 1] == 0x2A:  # /*
            end = text.find(b"*/", i + 1)  # "/*/" is a whole comment to fatbinary
            i = n if end < 0 else end + 2
        elif c == 0x22 and (i == 0 or text[i - 1] != 0x5C):  # " not preceded by a backslash
            j = i + 1
            while j < n and (text[j] != 0x22 or text[j - 1] == 0x5C):
                j += 1
            j = min(j + 1, n)
            out += text[i:j]
            i = j
        elif c in _BLANKS or c in _BREAKS:
            j = i
            while j < n and (text[j] in _BLANKS or text[j] in _BREAKS):
                j += 1
            if c in _BLANKS:
                out.append(c)
            out += bytes(b for b in text[i:j] if b in _BREAKS)
            i = j
        else:
            out.append(c)
            i += 1
    return bytes(out)


def _nv_compat(cubin: bytes) -> bytes:
    """The ``.nv.compat`` section of a cubin, or ``b""`` (not an ELF, no such section)."""
    from devbin.formats.elf.reader import ElfFile

    try:
        sec = ElfFile(ByteView(cubin)).section(".nv.compat")
    except DeviceBinaryError:
        return b""
    return b"" if sec is None else bytes(sec.data)


def _entry_flags(img: FatbinImage) -> int:
    if img.flags is not None:
        flags = img.flags & ~C.COMPRESSION_MASK
    else:
        flags = C.FLAG_64BIT | C.FLAG_HOST_LINUX
        if img.debug:
            flags |= C.FLAG_DEBUG
        if img.variant == "a":
            flags |= C.FLAG_ARCH_SPECIFIC
        elif img.variant == "f":
            flags |= C.FLAG_FAMILY
        elif img.variant:
            raise UsageError(f"fatbin: unknown arch variant {img.variant!r} (expected '', 'a' or 'f')")
        if img.kind == C.KIND_LTOIR:
            flags |= C.FLAG_LTO
        if img.kind == C.KIND_ELF and img.arch >= 100:
            flags |= C.FLAG_COMPAT_BLOB
    if img.compression == "lz4":
        flags |= C.FLAG_LZ4
    elif img.compression == "zstd":
        flags |= C.FLAG_ZSTD
    elif img.compression != "none":
        raise UsageError(f"fatbin: unknown compression {img.compression!r} (expected 'none', 'lz4' or 'zstd')")
    return flags


def _plan_entry(img: FatbinImage, at: int) -> PlannedEntry:
    if not 0 <= img.kind <= _U16 or not 0 <= img.arch <= _U32:
        raise UsageError(f"fatbin: kind {img.kind} or arch {img.arch} out of range")
    flags = _entry_flags(img)
    data = bytes(img.data)
    # Versions.
    if img.kind == C.KIND_PTX:
        found = ptx_version(data)
        major, minor = found if found is not None else (None, None)
        if img.squeeze:
            data = squeeze_ptx(data)
        data += b"\0"
    elif img.kind == C.KIND_ELF:
        major, minor = 1, (data[8] if len(data) > 8 and data[:4] == b"\x7fELF" else None)
    else:
        major, minor = 1, 0
    major = img.major if img.major is not None else major
    minor = img.minor if img.minor is not None else minor
    if major is None or minor is None:
        raise UsageError(f"fatbin: cannot find the version of {C.kind_name(img.kind)} image for arch {img.arch}; "
                         "pass major= and minor=")
    if not (0 <= major <= _U16 and 0 <= minor <= _U16):
        raise UsageError(f"fatbin: version {major}.{minor} out of range")
    # Extension area.
    pos = C.ENTRY_HEADER_SIZE
    ident = img.identifier.encode()
    ident_off = 0
    if ident:
        ident_off = pos
        pos = align_up(pos + len(ident) + 1, 8)
    options: bytes | None = None
    options_len = 0
    opts_off = 0
    compat = img.compat
    if img.kind == C.KIND_ELF and compat is None:
        compat = _nv_compat(data) if img.arch >= 100 else b""
    if compat:
        options, options_len = b"\0" + compat, len(compat)
    elif img.options or img.kind in (C.KIND_PTX, C.KIND_LTOIR):
        options = img.options.encode()
        options_len = len(options)
    if options is not None:
        opts_off = pos
        pos = align_up(pos + 8 + options_len + 1, 8)
    # Payload.
    if img.compression == "none":
        stored, csize, usize = data, 0, 0
    elif img.stored_size is not None:
        if img.kind == C.KIND_PTX or not 0 <= img.stored_size <= _U32 or len(data) > _U32:
            raise UsageError("fatbin: a pre-compressed image must be ELF or LTO-IR, with sizes below 4 GiB")
        stored, csize, usize = data, len(data), img.stored_size
    else:
        stored = _compress_payload(img.compression, data)
        csize, usize = len(stored), len(data)
        if csize > _U32:
            raise UsageError("fatbin: compressed image too large")
    return PlannedEntry(
        offset=at, header_size=pos, identifier=ident, identifier_offset=ident_off, options=options,
        options_len=options_len, options_offset=opts_off, payload=stored, payload_size=align_up(len(stored), 8),
        compressed_size=csize, uncompressed_size=usize, kind=img.kind, minor=minor, major=major, arch=img.arch,
        flags=flags, reserved=img.reserved,
    )


def plan_fatbin(images: Sequence[FatbinImage]) -> list[PlannedEntry]:
    """Lay out every entry (offsets from the start of the fatbin)."""
    plans: list[PlannedEntry] = []
    at = C.FATBIN_HEADER_SIZE
    for img in images:
        p = _plan_entry(img, at)
        plans.append(p)
        at += p.header_size + p.payload_size
    return plans


def write_fatbin(images: Sequence[FatbinImage]) -> bytes:
    """A fatbin holding ``images`` in order."""
    plans = plan_fatbin(images)
    end = plans[-1].offset + plans[-1].header_size + plans[-1].payload_size if plans else C.FATBIN_HEADER_SIZE
    out = Emitter()
    out.pack("IHHQ", C.FATBIN_MAGIC, C.FATBIN_VERSION, C.FATBIN_HEADER_SIZE, end - C.FATBIN_HEADER_SIZE)
    for p in plans:
        out.at(p.offset, "entry header")
        out.pack(
            "HHIQIIHHIIIQQQ", p.kind, C.ENTRY_VERSION, p.header_size, p.payload_size, p.compressed_size,
            p.options_offset, p.minor, p.major, p.arch, p.identifier_offset, len(p.identifier), p.flags, p.reserved,
            p.uncompressed_size,
        )
        if p.identifier:
            out.at(p.offset + p.identifier_offset, "identifier")
            out.write(p.identifier)
        if p.options is not None:
            out.pad_to(p.offset + p.options_offset, "options descriptor")
            out.pack("II", p.options_offset + 8, p.options_len)
            out.write(p.options)
        out.pad_to(p.offset + p.header_size, "payload")
        out.write(p.payload)
        out.pad_to(p.offset + p.header_size + p.payload_size, "next entry")
    out.at(end, "end of fatbin")
    return out.getvalue()


class StoredEntry(Protocol):
    """What :func:`stored_entry` reads of a read entry (:class:`devbin.formats.fatbin.reader.FatbinEntry`;
    named by its fields so that the reader can write a one-entry fatbin without an import cycle)."""

    @property
    def kind(self) -> int: ...
    @property
    def kind_name(self) -> str: ...
    @property
    def arch(self) -> int: ...
    @property
    def raw_payload(self) -> memoryview: ...
    @property
    def identifier(self) -> str: ...
    @property
    def options(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def compression(self) -> str: ...
    @property
    def is_compressed(self) -> bool: ...
    @property
    def flags(self) -> int: ...
    @property
    def major(self) -> int: ...
    @property
    def minor(self) -> int: ...
    @property
    def uncompressed_size(self) -> int: ...
    @property
    def reserved(self) -> int: ...


def stored_entry(entry: StoredEntry) -> FatbinImage:
    """An LTO-IR ``entry`` to be written back as it is stored: payload (compressed or not), header
    values and options string unchanged.  ``write_fatbin([stored_entry(e)])`` is the one-entry
    fatbin devbin writes for LTO-IR in NVIDIA's own encoding (``nvcc -dlto``'s default), which
    only NVIDIA's tools decode and nvJitLink accepts as a fatbin input; for an entry
    ``fatbinary`` laid out, its entry bytes equal the original's."""
    if entry.kind != C.KIND_LTOIR:
        raise UsageError(f"fatbin: only LTO-IR entries are copied as stored, not {entry.kind_name}")
    compressed = entry.is_compressed
    return FatbinImage(entry.kind, entry.arch, bytes(entry.raw_payload), identifier=entry.identifier,
                       options=entry.options, variant=entry.variant,
                       compression=entry.compression if compressed else "none", flags=entry.flags,
                       major=entry.major, minor=entry.minor,
                       stored_size=entry.uncompressed_size if compressed else None, reserved=entry.reserved)
