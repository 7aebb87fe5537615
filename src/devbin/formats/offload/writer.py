"""Write OffloadBinaries laid out as LLVM's writer lays them out (``llvm-amdgpu-formats.md`` §1.6).

Version 1 (the default; what LLVM 15-22 write): one blob per image, the blobs
concatenated (each is a multiple of 8 long, so each starts 8-aligned)::

    header (32) | entry (40) at 32 | string entries (16 each) at 72 | string table
    | zero pad to 8 | image | zero pad to 8  (= size)

Version 2 (LLVM main after 22; on request): one blob for all images::

    header (32) | N entries (40 each) at 32 | every entry's string entries (24 each),
    entry by entry | one string table | zero pad to 8 | images, each 8-aligned | pad to 8

The string table is built as LLVM's ``StringTableBuilder`` builds an ELF
string table: a NUL at offset 0 (the empty string lives there), then the
distinct strings sorted by their reversed bytes, largest first, each one that
is a suffix of the string before it merged into that string's tail.  String
entries keep the caller's order (the packager gives them sorted by key).  The
output depends only on the input: the same images give the same bytes.

Checked against ``clang-offload-packager-19`` byte for byte for version 1
(``tests/test_offload.py``).  The version 2 layout follows the reference notes
and is not checked against a tool: no installed LLVM writes or reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from devbin.binary import Emitter, align_up
from devbin.errors import UsageError
from devbin.formats.offload import constants as C

__all__ = ["OffloadImage", "build_string_table", "write_offload_binary"]


@dataclass(frozen=True)
class OffloadImage:
    """One image to write: kinds kept raw (pick the offload-kind numbering with the value)."""

    image: bytes
    image_kind: int = C.IMG_OBJECT
    offload_kind: int = C.OFK_NONE
    flags: int = 0
    strings: tuple[tuple[str, str], ...] = field(default=())

    @classmethod
    def of(cls, image: bytes, *, image_kind: int = C.IMG_OBJECT, offload_kind: int = C.OFK_NONE, flags: int = 0,
           strings: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> OffloadImage:
        pairs = tuple(strings.items()) if isinstance(strings, Mapping) else tuple(strings)
        return cls(bytes(image), image_kind, offload_kind, flags, pairs)


def build_string_table(strings: Iterable[bytes]) -> tuple[bytes, dict[bytes, int]]:
    """An ELF-style suffix-merged string table and the offset of each string (see the module docstring)."""
    unique = sorted({s for s in strings if s}, key=lambda s: s[::-1], reverse=True)
    table = bytearray(b"\0")
    offsets: dict[bytes, int] = {b"": 0}
    prev = b""
    prev_off = 0
    for s in unique:
        if prev.endswith(s):
            offsets[s] = prev_off + len(prev) - len(s)
            continue
        prev, prev_off = s, len(table)
        offsets[s] = prev_off
        table += s + b"\0"
    return bytes(table), offsets


def _encode(images: Sequence[OffloadImage], version: int) -> list[list[tuple[bytes, bytes]]]:
    out: list[list[tuple[bytes, bytes]]] = []
    for i, img in enumerate(images):
        if not 0 <= img.image_kind <= 0xFFFF or not 0 <= img.offload_kind <= 0xFFFF:
            raise UsageError(f"offload image {i}: image/offload kind must fit in 16 bits")
        if not 0 <= img.flags <= 0xFFFFFFFF:
            raise UsageError(f"offload image {i}: flags must fit in 32 bits")
        pairs = [(k.encode("utf-8"), v.encode("utf-8")) for k, v in img.strings]
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise UsageError(f"offload image {i}: duplicate string key")
        for k, v in pairs:
            if b"\0" in k or (version == C.VERSION_1 and b"\0" in v):
                raise UsageError(f"offload image {i}: NUL inside string {k!r}")
        out.append(pairs)
    return out


def _write_blob(images: Sequence[OffloadImage], pairs: list[list[tuple[bytes, bytes]]], version: int) -> bytes:
    n = len(images)
    str_entry = C.STRING_ENTRY_SIZE_V1 if version == C.VERSION_1 else C.STRING_ENTRY_SIZE_V2
    # Plan.
    entries_at = C.HEADER_SIZE
    strings_at: list[int] = []
    pos = entries_at + n * C.ENTRY_SIZE
    for p in pairs:
        strings_at.append(pos)
        pos += len(p) * str_entry
    table, offsets = build_string_table(s for p in pairs for kv in p for s in kv)
    table_at = pos
    pos = table_at + len(table)
    images_at: list[int] = []
    for img in images:
        pos = align_up(pos, C.ALIGNMENT)
        images_at.append(pos)
        pos += len(img.image)
    size = align_up(pos, C.ALIGNMENT)
    # Emit.
    e = Emitter()
    e.write(C.MAGIC)
    e.pack("IQQQ", version, size, entries_at, C.ENTRY_SIZE if version == C.VERSION_1 else n)
    e.at(entries_at, "entries")
    for img, p, s_at, i_at in zip(images, pairs, strings_at, images_at, strict=True):
        e.pack("HHIQQQQ", img.image_kind, img.offload_kind, img.flags, s_at, len(p), i_at, len(img.image))
    for p, s_at in zip(pairs, strings_at, strict=True):
        e.at(s_at, "string entries")
        for k, v in p:
            if version == C.VERSION_1:
                e.pack("QQ", table_at + offsets[k], table_at + offsets[v])
            else:
                e.pack("QQQ", table_at + offsets[k], table_at + offsets[v], len(v))
    e.at(table_at, "string table")
    e.write(table)
    for img, i_at in zip(images, images_at, strict=True):
        e.pad_to(i_at, "image")
        e.write(img.image)
    e.pad_to(size, "end padding")
    return e.getvalue()


def write_offload_binary(images: Iterable[OffloadImage], *, version: int = C.VERSION_1) -> bytes:
    """Bytes of the images as OffloadBinary: v1 blobs back to back (default), or one v2 blob.

    Values are raw: pass ``offload_kind=constants.OFK_HIP_LEGACY`` (3) for
    LLVM <= 20 consumers, ``constants.OFK_HIP`` (4) for LLVM 21+.
    """
    imgs = list(images)
    if version not in (C.VERSION_1, C.VERSION_2):
        raise UsageError(f"OffloadBinary version {version} cannot be written (1 or 2)")
    pairs = _encode(imgs, version)
    if version == C.VERSION_2:
        return _write_blob(imgs, pairs, version)
    return b"".join(_write_blob([img], [p], version) for img, p in zip(imgs, pairs, strict=True))
