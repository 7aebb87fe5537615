"""Write a wrapped single image (layout in :mod:`devbin.formats.wrapped.layout`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from devbin.binary import Buffer, Emitter, align_up
from devbin.binary.writer import uleb
from devbin.errors import UsageError, quote
from devbin.formats.wrapped.layout import FIXED_SIZE, HEADER_ALIGN, MAGIC, MAX_PAIRS, VERSION

__all__ = ["write_wrapped"]


def write_wrapped(image: Buffer, metadata: Mapping[str, str] | Iterable[tuple[str, str]] = (), *,
                  flags: int = 0) -> bytes:
    """The wrapped image: the header with ``metadata`` in the order given, then ``image`` unchanged."""
    pairs = list(metadata.items()) if isinstance(metadata, Mapping) else list(metadata)
    if len(pairs) > MAX_PAIRS:
        raise UsageError(f"at most {MAX_PAIRS} metadata pairs")
    body = bytearray()
    seen: set[str] = set()
    for key, value in pairs:
        if not isinstance(key, str) or not isinstance(value, str) or not key or key in seen:
            raise UsageError(f"metadata: keys must be unique non-empty strings and values strings, got {quote(key)}")
        seen.add(key)
        for s in (key, value):
            raw = s.encode("utf-8")
            body += uleb(len(raw)) + raw
    if not 0 <= flags <= 0xFFFF:
        raise UsageError("wrapped image flags must fit in 16 bits")
    header_size = align_up(FIXED_SIZE + len(body), HEADER_ALIGN)
    data = bytes(image)
    e = Emitter()
    e.write(MAGIC)
    e.pack("HHIQII", VERSION, flags, header_size, len(data), len(pairs), 0)
    e.write(body)
    e.pad_to(header_size)
    e.write(data)
    return e.getvalue()
