"""A fatbin written again with some of its entries (what ``devbin prune`` does to a fatbin).

The kept entries are copied byte for byte behind the original 16-byte header, whose ``fat_size``
(u64 at +8) is updated; nothing is re-encoded, so keeping every entry gives the input back byte for
byte, and a fatbin whose entries all go keeps its header (``fat_size`` 0) so that a
``__fatBinC_Wrapper_t`` pointing at it stays valid (layout: :mod:`devbin.formats.fatbin.reader`).
"""

from __future__ import annotations

from collections.abc import Callable

from devbin.binary import ByteView, Emitter
from devbin.formats.fatbin.reader import parse_fatbin

__all__ = ["prune_fatbin"]


def prune_fatbin(view: ByteView, keeps: Callable[[int], bool], where: str) -> tuple[int, bytes]:
    """(size, bytes) of the fatbin at offset 0 of ``view`` with the entries ``keeps`` refuses left out;
    the kept entries and the header copied verbatim."""
    fb = parse_fatbin(view, where=where)
    view = view.sub(0, fb.size)
    kept = []
    for e in fb.entries:
        if keeps(e.index):
            kept.append(view.bytes_at(e.offset - view.base, e.header_size + e.payload_size, "fatbin entry"))
    if len(kept) == len(fb.entries):
        return fb.size, bytes(view.bytes_at(0, fb.size))
    em = Emitter()
    em.write(view.bytes_at(0, 8, "fatbin header"))
    em.pack("Q", sum(len(k) for k in kept))
    em.write(view.bytes_at(16, fb.header_size - 16, "fatbin header"))
    for k in kept:
        em.write(k)
    em.at(fb.header_size + sum(len(k) for k in kept), "end of fatbin")
    return fb.size, em.getvalue()
