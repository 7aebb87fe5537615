"""Read a wrapped single image (layout in :mod:`devbin.formats.wrapped.layout`)."""

from __future__ import annotations

from dataclasses import dataclass

from devbin.binary import Buffer, ByteView
from devbin.errors import NotThisFormat, UnsupportedVersion, quote
from devbin.formats.wrapped.layout import FIXED_SIZE, HEADER_ALIGN, MAGIC, MAX_PAIRS, VERSION

__all__ = ["WrappedImage", "parse_wrapped"]


@dataclass(frozen=True, slots=True)
class WrappedImage:
    """The header's fields, the metadata pairs in file order, and a view of the image."""

    version: int
    flags: int
    header_size: int
    metadata: tuple[tuple[str, str], ...]
    image: memoryview

    @property
    def size(self) -> int:
        """Bytes the wrapped image occupies: header and image."""
        return self.header_size + len(self.image)

    def image_data(self, max_size: int, size: int) -> memoryview:
        """The image's bytes (:meth:`devbin.images.Image.data`): a window on the file, never a copy."""
        return self.image

    def image_head(self, n: int, size: int) -> memoryview:
        return self.image[:n]

    def get(self, key: str, default: str | None = None) -> str | None:
        return next((v for k, v in self.metadata if k == key), default)


def parse_wrapped(data: Buffer | ByteView, *, where: str = "") -> WrappedImage:
    """Parse the wrapped image at offset 0; :class:`NotThisFormat` without the magic.

    Bytes after the image are allowed (the caller decides what they mean: padding in
    a section, another image); ``WrappedImage.size`` says where the image ends.
    """
    v = data if isinstance(data, ByteView) else ByteView(data, fmt="wrapped", where=where)
    v = ByteView(v, fmt="wrapped", where=where or v.where, base=v.base)
    if not v.startswith(MAGIC, 0):
        raise v.error("not a devbin wrapped image (bad magic)", 0, cls=NotThisFormat)
    version, flags, header_size, image_size, n, _reserved = v.unpack("HHIQII", 8, "wrapped image header")
    if version != VERSION:
        raise v.error(f"wrapped image version {version} is not supported (this devbin reads {VERSION})", 8,
                      version, cls=UnsupportedVersion)
    if header_size < FIXED_SIZE or header_size % HEADER_ALIGN:
        raise v.error(f"header size must be a multiple of {HEADER_ALIGN} and at least {FIXED_SIZE}", 0xC,
                      header_size)
    if n > MAX_PAIRS:
        raise v.error(f"more than {MAX_PAIRS} metadata pairs", 0x18, n)
    v.check(0, header_size, "wrapped image header")
    header = v.sub(0, header_size)
    cur = header.cursor(FIXED_SIZE)
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for _ in range(n):
        at = cur.pos
        key = cur.str_with_len("metadata key")
        value = cur.str_with_len("metadata value")
        if not key or key in seen:
            raise header.error(f"metadata key {quote(key)} is empty or repeated", at)
        seen.add(key)
        pairs.append((key, value))
    if not header.is_zero_from(cur.pos):
        raise header.error("non-zero bytes between the metadata and the image", cur.pos)
    image = v.bytes_at(header_size, image_size, "wrapped image payload")
    return WrappedImage(version, flags, header_size, tuple(pairs), image)
