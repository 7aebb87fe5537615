"""An OffloadBinary written again with some of its images (what ``devbin prune`` does to one).

A version-1 blob holds one image and is kept or dropped whole; a version-2 blob with several images
is written again by :func:`devbin.formats.offload.writer.write_offload_binary` with the kept ones (layout:
:mod:`devbin.formats.offload.reader`).
"""

from __future__ import annotations

from collections.abc import Callable

from devbin.binary import ByteView
from devbin.formats.offload.reader import parse_offload_binary
from devbin.formats.offload.writer import OffloadImage, write_offload_binary

__all__ = ["prune_offload_binary"]


def prune_offload_binary(view: ByteView, keeps: Callable[[int], bool], where: str) -> tuple[int, bytes]:
    """(size, bytes) of the OffloadBinary at offset 0 of ``view``, kept whole, dropped whole (b""), or
    written again with the kept images."""
    ob = parse_offload_binary(view, where=where)
    keep = [e for e in ob.entries if keeps(e.index)]
    if len(keep) == len(ob.entries):
        return ob.size, bytes(view.bytes_at(0, ob.size))
    if not keep:
        return ob.size, b""
    imgs = [OffloadImage(bytes(e.image), e.image_kind, e.offload_kind, e.flags, e.strings) for e in keep]
    return ob.size, write_offload_binary(imgs, version=ob.version)
