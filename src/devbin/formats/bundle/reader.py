"""Read views of clang-offload-bundler bundles (``llvm-amdgpu-formats.md`` §2).

Binary bundle (little-endian)::

    +0x00  24  magic "__CLANG_OFFLOAD_BUNDLE__" (no NUL)
    +0x18  u64 N: number of entries
    +0x20  N entries, back to back:
             u64 offset (from the bundle start), u64 size, u64 id_len, id_len bytes of ID (no NUL)
    ...    the images at their offsets (the bundler pads each to ``-bundle-align``; HIP uses 4096)

The entry count is capped against the bytes left (each entry needs at least 24
bytes) before anything is built; every image's ``offset + size`` must lie in
the buffer.  Images are zero-copy views.  The bundler does not check that
images avoid the table or each other (an empty host entry shares its offset
with the next image), so neither does devbin.

Compressed bundle ("CCOB", all fields little-endian)::

    field                   v1       v2        v3
    magic "CCOB"            0..3     0..3      0..3
    version u16             4        4         4
    method u16              6        6         6     (0 zlib, 1 zstd: llvm::compression::Format)
    total size (w/ header)  -        u32 @8    u64 @8
    uncompressed size       u32 @8   u32 @12   u64 @16
    hash                    u64 @12  u64 @16   u64 @24  (first 8 bytes of MD5(uncompressed), LE)
    payload from            20       24        32

v1 has no total size, so its payload runs to the end of the buffer given.
LLVM 19 writes v2, LLVM 22 v3; LLVM 19 cannot read v3.

Text bundle (``-type`` s, i, ll, ...): each part is
``\\n<comment> __CLANG_OFFLOAD_BUNDLE____START__ <id>\\n<content>\\n<comment>
__CLANG_OFFLOAD_BUNDLE____END__ <id>\\n``; the bundler adds the newline before
the end marker itself, so unbundling drops exactly one.

Bundle IDs are ``<kind>-<triple>[-<target id>]`` with the triple in 4-field
form (an empty environment gives ``--``), e.g. ``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+``
and ``host-x86_64-unknown-linux-gnu-``.  :class:`BundleId` splits them without
judging the target ID (AMDGPU rules live elsewhere).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devbin.binary import ByteView, align_up, budget, format_view, join_where
from devbin.errors import FormatError, NotThisFormat, TruncatedError, UnsupportedVersion, quote
from devbin.formats.bundle import constants as C
from devbin.formats.bundle.compress import PayloadStream, decompress, truncated_md5

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile

__all__ = [
    "Bundle",
    "BundleEntry",
    "BundleId",
    "CompressedHeader",
    "CompressedPayload",
    "TextBundlePart",
    "bundles_in_elf",
    "hip_fatbin_bundles",
    "iter_hip_fatbin",
    "open_compressed_bundle",
    "parse_any_bundle",
    "parse_bundle",
    "parse_bundle_id",
    "parse_compressed_bundle",
    "parse_compressed_header",
    "parse_text_bundle",
]

_FMT = "bundle"
#: First letters of a 4th triple field that is really a processor: the old 3-field form
#: ``hip-amdgcn-amd-amdhsa-gfx906`` (no environment).  Only used to split, never to judge.
_PROCESSOR_PREFIXES = ("gfx", "sm_")

ViewLike = ByteView | bytes | bytearray | memoryview
#: Decompressed bytes read first to find a lazily opened bundle's entry table (grown 8x while it is cut).
_TABLE_PREFIX = 1 << 14


@dataclass(frozen=True, slots=True)
class BundleId:
    """A bundle entry ID split into offload kind, triple and target ID; ``raw`` is kept verbatim."""

    raw: str
    kind: str
    triple: str
    target_id: str

    @property
    def is_host(self) -> bool:
        return self.kind == "host"

    @property
    def processor(self) -> str:
        """The target ID up to its first ``:`` (``gfx90a`` for ``gfx90a:xnack+``)."""
        return self.target_id.split(":", 1)[0]

    def __str__(self) -> str:
        return self.raw


def parse_bundle_id(raw: str) -> BundleId:
    """Split ``<kind>-<arch>-<vendor>-<os>-<env>[-<target id>]``; never fails.

    The target ID may itself contain ``-`` (``gfx90a:xnack-``), so the split stops
    after the four triple fields.  An ID with fewer fields keeps what it has
    (missing parts are empty strings).
    """
    kind, _, rest = raw.partition("-")
    parts = rest.split("-", 4)
    if len(parts) == 5:
        return BundleId(raw, kind, "-".join(parts[:4]), parts[4])
    if len(parts) == 4 and (parts[3].startswith(_PROCESSOR_PREFIXES) or ":" in parts[3]):
        return BundleId(raw, kind, "-".join(parts[:3]), parts[3])
    return BundleId(raw, kind, rest, "")


@dataclass(frozen=True)
class BundleEntry:
    """One entry: its ID, where its image lies in the (uncompressed) bundle, and the image.

    ``source`` is the bundle's bytes, or for a compressed bundle opened lazily
    (:func:`open_compressed_bundle`) the payload decoded on demand: :attr:`view` and
    :attr:`data` then decode the entry anew at each use, into a buffer charged to the memory
    budget while it is alive, and :meth:`head` decodes only its first bytes.
    """

    index: int
    id: str
    offset: int
    size: int
    source: ByteView | CompressedPayload = field(repr=False, compare=False)

    @property
    def bundle_id(self) -> BundleId:
        return parse_bundle_id(self.id)

    @property
    def lazy(self) -> bool:
        """Whether the image is decoded on each use (an entry of a lazily opened compressed bundle)."""
        return isinstance(self.source, CompressedPayload)

    def _where(self, where: str) -> str:
        return join_where(where, f"entry {self.index} {quote(self.id)}")

    @property
    def view(self) -> ByteView:
        """The image as a view: a window on the bundle; decoded now for a lazy entry."""
        s = self.source
        if isinstance(s, ByteView):
            return s
        return s.read(self.offset, self.size, where=self._where(s.where))

    @property
    def data(self) -> memoryview:
        """The image bytes (a window on the bundle, not a copy; decoded now for a lazy entry)."""
        v = self.view
        return v.bytes_at(0, len(v))

    def image_data(self, max_size: int, size: int) -> memoryview:
        """The image's bytes (:meth:`devbin.images.Image.data`): :attr:`data`."""
        return self.data

    def image_head(self, n: int, size: int) -> memoryview:
        """:meth:`head`: an entry of a compressed bundle decodes only those bytes."""
        return self.head(n)

    def head(self, n: int) -> memoryview:
        """The first ``min(n, size)`` bytes of the image (for a lazy entry, only those are kept)."""
        s = self.source
        if isinstance(s, ByteView):
            return s.bytes_at(0, min(n, len(s)))
        v = s.read(self.offset, min(n, self.size), where=self._where(s.where), verify=False)
        return v.bytes_at(0, len(v))


@dataclass(frozen=True)
class CompressedHeader:
    """The CCOB header fields, raw."""

    version: int
    method: int
    total_size: int | None  # None for v1 (no such field)
    uncompressed_size: int
    hash: int
    header_size: int

    @property
    def method_name(self) -> str:
        return C.METHOD_NAMES.get(self.method, f"method {self.method}")


@dataclass(frozen=True)
class Bundle:
    """A binary bundle: entries in table order.

    ``offset`` is where the bundle starts in the buffer it was found in (non-zero
    in a ``.hip_fatbin`` with several bundles); ``size`` the bytes it occupies
    there (the CCOB total size for a compressed bundle; else the end of the
    table or of the last image, whichever is later).  ``compressed`` holds the
    CCOB header when the bundle was compressed; the entries then view the
    decompressed bytes, ``raw``.
    """

    entries: tuple[BundleEntry, ...]
    size: int
    offset: int = 0
    compressed: CompressedHeader | None = None
    raw: ByteView | None = field(default=None, repr=False, compare=False)

    def ids(self) -> list[str]:
        """The entry IDs in table order (what ``clang-offload-bundler --list`` prints)."""
        return [e.id for e in self.entries]

    def entry(self, bundle_id: str) -> BundleEntry | None:
        """The first entry whose ID is exactly ``bundle_id``, or None."""
        for e in self.entries:
            if e.id == bundle_id:
                return e
        return None

    @property
    def host(self) -> BundleEntry | None:
        for e in self.entries:
            if e.bundle_id.is_host:
                return e
        return None




def _decode_id(raw: memoryview) -> str:
    # IDs are ASCII in practice; a corrupt byte is shown as \\xNN, never fatal.
    return bytes(raw).decode("utf-8", "backslashreplace")


def _read_table(v: ByteView, total: int) -> tuple[list[tuple[int, int, int, str]], int]:
    """The entry table at offset 0 of ``v`` (which may be a prefix of a bundle of ``total`` bytes):
    ``(table offset, image offset, size, id)`` per entry, and where the table ends.  Each image
    is checked to lie within ``total`` bytes."""
    if not v.startswith(C.BUNDLE_MAGIC):
        raise v.error("not a clang offload bundle (bad magic)", 0, cls=NotThisFormat)
    count = v.u64(len(C.BUNDLE_MAGIC))
    # Each entry needs at least its 24 fixed bytes: a lying count fails here, before any list.
    if count * C.ENTRY_FIXED_SIZE > total - C.HEADER_SIZE:
        raise v.error(f"{count} entries cannot fit in the {total - C.HEADER_SIZE} bytes left", 24, count)
    cur = v.cursor(C.HEADER_SIZE)
    raw: list[tuple[int, int, int, str]] = []
    for i in range(count):
        at = cur.pos
        offset, size, id_len = cur.u64(), cur.u64(), cur.u64()
        ident = _decode_id(cur.bytes(id_len, f"entry {i} id"))
        raw.append((at, offset, size, ident))
    for i, (at, offset, size, ident) in enumerate(raw):
        if offset > total or size > total - offset:
            raise v.error(f"entry {i} {quote(ident)}: image at {offset:#x} + size {size:#x} runs past the end "
                          f"({v.base + total:#x})", at, offset, cls=TruncatedError)
    return raw, cur.pos


def parse_bundle(view: ViewLike, *, where: str = "") -> Bundle:
    """Parse the binary bundle at offset 0 of ``view`` (bytes after it are ignored).

    Raises :class:`NotThisFormat` for a wrong magic, :class:`TruncatedError` when
    the table or an image runs past the buffer, :class:`FormatError` otherwise.
    """
    v = format_view(view, _FMT, where)
    raw, end = _read_table(v, len(v))
    entries = []
    for i, (_, offset, size, ident) in enumerate(raw):
        loc = join_where(v.where, f"entry {i} {quote(ident)}")
        entries.append(BundleEntry(i, ident, offset, size, v.sub(offset, size, where=loc)))
        end = max(end, offset + size)
    return Bundle(entries=tuple(entries), size=end, raw=v)


def parse_compressed_header(view: ViewLike, *, where: str = "") -> CompressedHeader:
    """Read and check a CCOB header (magic, version, total size against the buffer)."""
    v = format_view(view, _FMT, where)
    if not v.startswith(C.CCOB_MAGIC):
        raise v.error("not a compressed offload bundle (bad magic)", 0, cls=NotThisFormat)
    version, method = v.unpack("HH", 4, "CCOB header")
    total: int | None
    if version == 1:
        uncompressed, hsh = v.unpack("IQ", 8, "CCOB v1 header")
        total = None
    elif version == 2:
        total, uncompressed, hsh = v.unpack("IIQ", 8, "CCOB v2 header")
    elif version == 3:
        total, uncompressed, hsh = v.unpack("QQQ", 8, "CCOB v3 header")
    else:
        raise v.error("unsupported compressed bundle version", 4, version, cls=UnsupportedVersion)
    hsize = C.CCOB_HEADER_SIZE[version]
    if total is not None:
        if total < hsize:
            raise v.error(f"total size smaller than the v{version} header ({hsize} bytes)", 8, total)
        v.check(0, total, "CCOB total size")
    if method not in C.METHOD_NAMES:
        raise v.error("unknown compression method", 6, method)
    return CompressedHeader(version, method, total, uncompressed, hsh, hsize)


def parse_compressed_bundle(
    view: ViewLike, *, where: str = "", max_size: int = C.DEFAULT_MAX, check_hash: bool = True,
) -> Bundle:
    """Decompress a CCOB bundle (v1, v2, v3; zlib or zstd) and parse the binary bundle inside.

    The decompressed size is capped by ``max_size``; the truncated-MD5 hash is
    checked unless ``check_hash`` is false.  Entry offsets refer to the
    decompressed bundle (``Bundle.raw``).
    """
    v = format_view(view, _FMT, where)
    h = parse_compressed_header(v)
    end = len(v) if h.total_size is None else h.total_size
    payload = v.bytes_at(h.header_size, end - h.header_size, "CCOB payload")
    data = decompress(h.method, payload, h.uncompressed_size, max_size=max_size, where=v.where,
                      offset=v.base + h.header_size)
    if check_hash:
        got = truncated_md5(data)
        if got != h.hash:
            raise v.error(f"hash mismatch: the decompressed bundle hashes to {got:#018x}", 12 if h.version == 1
                          else 16 if h.version == 2 else 24, h.hash)
    inner = ByteView(data, fmt=_FMT, where=join_where(v.where, "decompressed"))
    b = parse_bundle(inner)
    return Bundle(entries=b.entries, size=end, compressed=h, raw=inner)


class CompressedPayload:
    """The payload of a CCOB bundle, decoded only as far as a reader asks (:func:`open_compressed_bundle`).

    :meth:`read` decodes one range into a buffer taken from the memory budget
    (:mod:`devbin.binary.budget`), skipping what comes before it through a small scratch
    buffer.  The first range read with ``verify`` decodes the whole stream once (still
    holding only the range): its length and truncated-MD5 hash are checked before any image
    byte is given out, as :func:`parse_compressed_bundle` checks them.
    """

    def __init__(self, header: CompressedHeader, payload: memoryview, max_size: int, *, where: str,
                 offset: int, check_hash: bool = True) -> None:
        self.header = header
        self.where = where
        self._payload = payload
        self._max = max_size
        self._offset = offset
        self._verified = not check_hash

    def _stream(self) -> PayloadStream:
        return PayloadStream(self.header.method, self._payload, self.header.uncompressed_size, self._max,
                             where=self.where, offset=self._offset)

    def read(self, start: int, size: int, *, where: str = "", verify: bool = True, exact: bool = True) -> ByteView:
        """Bytes ``[start, start + size)`` of the decompressed bundle, as a view of a new buffer
        (``exact=False``: fewer when the stream ends sooner than recorded)."""
        h = self.header
        if start < 0 or size < 0 or start + size > h.uncompressed_size:
            raise FormatError(f"range {start:#x} + {size:#x} lies outside the decompressed bundle",
                              fmt=_FMT, where=where or self.where, value=h.uncompressed_size)
        out = budget.current().allocate(size, what="bundle entry", fmt=_FMT, where=where or self.where,
                                        offset=self._offset)
        stream = self._stream()
        check = verify and not self._verified
        md5 = hashlib.md5() if check else None
        got = stream.feed(start, md5)
        with memoryview(out) as mv:
            got += stream.readinto(mv)
        if md5 is not None:
            md5.update(out)
            self._finish(stream, got, md5)
        elif got != start + size and not exact:
            del out[max(0, got - start):]
        elif got != start + size:
            raise FormatError(f"{h.method_name} data decompresses to {got:#x} bytes, not the recorded "
                              "uncompressed size", fmt=_FMT, where=self.where, offset=self._offset,
                              value=h.uncompressed_size)
        return ByteView(out, fmt=_FMT, where=where or self.where)

    def verify(self) -> None:
        """Decode the whole stream once, holding nothing, and check its length and hash."""
        if not self._verified:
            md5 = hashlib.md5()
            stream = self._stream()
            self._finish(stream, stream.feed(self.header.uncompressed_size, md5), md5)

    def _finish(self, stream: PayloadStream, got: int, md5: hashlib._Hash) -> None:
        """Decode the rest of ``stream`` (``got`` bytes read so far) into ``md5``; check length and hash."""
        h = self.header
        got += stream.feed(h.uncompressed_size - got, md5)
        extra = stream.readinto(memoryview(bytearray(1)))
        if got != h.uncompressed_size or extra:
            more = "more than" if extra else f"{got:#x} bytes, not"
            raise FormatError(f"{h.method_name} data decompresses to {more} the recorded uncompressed size",
                              fmt=_FMT, where=self.where, offset=self._offset, value=h.uncompressed_size)
        digest = int.from_bytes(md5.digest()[:8], "little")
        if digest != h.hash:
            raise FormatError(f"hash mismatch: the decompressed bundle hashes to {digest:#018x}", fmt=_FMT,
                              where=self.where, value=h.hash)
        self._verified = True


def open_compressed_bundle(
    view: ViewLike, *, where: str = "", max_size: int = C.DEFAULT_MAX, check_hash: bool = True,
    verify_limit: int = C.VERIFY_AT_OPEN,
) -> Bundle:
    """A CCOB bundle read lazily: only the prefix holding the entry table is kept.

    The entries' images are decoded when asked for (:attr:`BundleEntry.view`, ``data``,
    ``head``).  The stream's length and hash are checked at open when it decompresses to at
    most ``verify_limit`` bytes (one pass through a scratch buffer: nothing is held), else
    the first time an image is asked for.  ``Bundle.raw`` is None.  Listing a bundle that
    claims gigabytes therefore costs its table, not its size.
    """
    v = format_view(view, _FMT, where)
    h = parse_compressed_header(v)
    end = len(v) if h.total_size is None else h.total_size
    if h.uncompressed_size > max_size:
        raise v.error(f"uncompressed size exceeds the limit of {max_size:#x} bytes (decompression bomb?)",
                      h.header_size, h.uncompressed_size)
    payload = v.bytes_at(h.header_size, end - h.header_size, "CCOB payload")
    lazy = CompressedPayload(h, payload, max_size, where=join_where(v.where, "decompressed"),
                             offset=v.base + h.header_size, check_hash=check_hash)
    want = min(h.uncompressed_size, _TABLE_PREFIX)
    while True:
        head = lazy.read(0, want, verify=False, exact=False)
        try:
            raw, _ = _read_table(head, h.uncompressed_size)
            break
        except TruncatedError:
            if want >= h.uncompressed_size or len(head) < want:
                raise
            want = min(h.uncompressed_size, want * 8)
    if check_hash and h.uncompressed_size <= verify_limit:
        lazy.verify()
    entries = tuple(BundleEntry(i, ident, offset, size, lazy) for i, (_, offset, size, ident) in enumerate(raw))
    return Bundle(entries=entries, size=end, compressed=h, raw=None)


def parse_any_bundle(view: ViewLike, *, where: str = "", max_size: int = C.DEFAULT_MAX, lazy: bool = False) -> Bundle:
    """A binary or compressed bundle, by magic; anything else is :class:`NotThisFormat`.
    ``lazy``: a compressed one is opened with :func:`open_compressed_bundle`."""
    v = format_view(view, _FMT, where)
    if v.startswith(C.CCOB_MAGIC):
        return (open_compressed_bundle if lazy else parse_compressed_bundle)(v, max_size=max_size)
    return parse_bundle(v)



def iter_hip_fatbin(
    view: ViewLike, *, where: str = "", max_size: int = C.DEFAULT_MAX, align: int = C.HIP_FATBIN_ALIGN,
    lazy: bool = False,
) -> Iterator[Bundle]:
    """Bundles back to back in a ``.hip_fatbin`` section, each starting on an ``align`` boundary.

    A linked HIP program concatenates the ``.hip_fatbin`` sections of its objects
    (each 4096-aligned), so several bundles, plain or compressed, follow each
    other with zero padding.  The walk stops at the end or where only zero bytes
    remain; whole zero ``align`` blocks between bundles are skipped (``devbin prune``
    leaves them when it shrinks a bundle in a linked file, whose layout cannot move);
    anything else between bundles is a :class:`FormatError`.  A CCOB v1
    bundle has no total size, so it takes the rest of the section.
    ``Bundle.offset`` is the offset in ``view``.  ``lazy``: compressed bundles are opened with
    :func:`open_compressed_bundle` (their images decoded when asked for).
    """
    v = format_view(view, _FMT, where)
    pos = 0
    index = 0
    n = len(v)
    while pos < n:
        if v.is_zero_from(pos):
            return
        block = min(align, n - pos)
        if not any(v.bytes_at(pos, block)):  # a zero block: padding left where a bundle shrank in place
            pos += block
            continue
        sub = v.sub(pos, n - pos, where=join_where(v.where, f"bundle #{index}"))
        if not (sub.startswith(C.CCOB_MAGIC) or sub.startswith(C.BUNDLE_MAGIC)):
            cls = NotThisFormat if index == 0 else FormatError
            raise sub.error("no clang offload bundle here (bad magic)", 0, cls=cls)
        b = parse_any_bundle(sub, max_size=max_size, lazy=lazy)
        yield Bundle(entries=b.entries, size=b.size, offset=pos, compressed=b.compressed, raw=b.raw)
        pos = align_up(pos + max(b.size, 1), align)
        index += 1


def hip_fatbin_bundles(elf: ElfFile, *, max_size: int = C.DEFAULT_MAX) -> list[Bundle]:
    """Every bundle in the ``.hip_fatbin`` section of a host ELF; [] without one."""
    sec = elf.section(C.HIP_FATBIN_SECTION)
    if sec is None or not sec.file_size:
        return []
    return list(iter_hip_fatbin(sec.view.sub(0, sec.file_size, fmt=_FMT), max_size=max_size))


def bundles_in_elf(elf: ElfFile) -> Bundle:
    """The entries of an object-type bundle: one ``__CLANG_OFFLOAD_BUNDLE__<id>`` section each.

    ``clang-offload-bundler -type=o`` with a real host object copies it and adds
    one ``SHF_EXCLUDE`` section per entry; the host entry's section is a 1-byte
    placeholder (unbundling the host gives back the host object itself).
    Entries come in section order; ``offset`` is the section's file offset.
    An ELF without such sections gives a bundle with no entries.
    """
    entries: list[BundleEntry] = []
    for sec in elf.sections:
        if sec.name.startswith(C.SECTION_PREFIX) and len(sec.name) > len(C.SECTION_PREFIX):
            ident = sec.name[len(C.SECTION_PREFIX):]
            off = sec.sh_offset if sec.file_size else 0
            entries.append(BundleEntry(len(entries), ident, off, sec.file_size, sec.view))
    return Bundle(entries=tuple(entries), size=elf.size, raw=elf.view)


@dataclass(frozen=True)
class TextBundlePart:
    """One part of a text bundle: its ID, comment leader and content (without the added newline)."""

    id: str
    comment: str
    content: str

    @property
    def bundle_id(self) -> BundleId:
        return parse_bundle_id(self.id)


def parse_text_bundle(text: str | bytes, *, where: str = "") -> list[TextBundlePart]:
    """Split a text bundle into its parts (see the module docstring for the layout).

    Bytes are decoded as UTF-8 with ``surrogateescape`` (encode the content the same
    way to get the original bytes back).  Text outside the markers is ignored, as
    the bundler ignores it.  No start marker at all is :class:`NotThisFormat`; an
    unterminated part or an end marker for another ID is a :class:`FormatError`.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    parts: list[TextBundlePart] = []
    pos = 0
    start_tag = f" {C.TEXT_START} "
    end_tag = f" {C.TEXT_END} "
    while True:
        i = text.find(start_tag, pos)
        if i < 0:
            break
        line_start = text.rfind("\n", 0, i) + 1
        comment = text[line_start:i]
        line_end = text.find("\n", i)
        if line_end < 0:
            raise FormatError("start marker line has no end", fmt=_FMT, where=where, offset=i)
        ident = text[i + len(start_tag):line_end]
        marker = f"\n{comment}{end_tag}{ident}"
        j = text.find(marker, line_end)
        # The end marker must be a whole line: followed by a newline or the end of the text.
        while j >= 0 and j + len(marker) < len(text) and text[j + len(marker)] != "\n":
            j = text.find(marker, j + 1)
        if j < 0:
            other = text.find(end_tag, line_end)
            msg = (f"part {quote(ident)} has no end marker" if other < 0
                   else f"part {quote(ident)} ends with another ID")
            raise FormatError(msg, fmt=_FMT, where=where, offset=i)
        parts.append(TextBundlePart(ident, comment, text[line_end + 1:j]))
        pos = j + len(marker)
    if not parts:
        if end_tag in text:
            raise FormatError("end marker without a start marker", fmt=_FMT, where=where,
                              offset=text.find(end_tag))
        raise NotThisFormat("not a text offload bundle (no start marker)", fmt=_FMT, where=where)
    return parts
