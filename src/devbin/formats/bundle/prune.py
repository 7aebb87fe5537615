"""A clang offload bundle written again with some of its entries (what ``devbin prune`` does to one).

The kept entries (the host entry always stays: clang-offload-bundler needs one) are written by
:func:`devbin.formats.bundle.writer.write_bundle` at the alignment the original layout shows (the largest
power of two up to 4096 that reproduces its offsets); a compressed bundle is decompressed, pruned and
recompressed with the same method and CCOB version (v1 cannot be written and is refused).  The
compression level is the writer's default, so the compressed bytes may differ from the original tool's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from devbin.binary import ByteView
from devbin.errors import UsageError
from devbin.formats.bundle.reader import Bundle, BundleEntry, parse_any_bundle
from devbin.formats.bundle.writer import BundleImage, plan_bundle, write_bundle, write_compressed_bundle

__all__ = ["MAX_BUNDLE", "prune_bundle", "rewrite_bundle"]

#: Cap on a compressed bundle once decompressed, for a prune.
MAX_BUNDLE = 1 << 30


def prune_bundle(view: ByteView, keeps: Callable[[int], bool], where: str) -> tuple[int, bytes]:
    """(size, bytes) of the bundle (plain or compressed) at offset 0 of ``view``; the host entry stays."""
    b = parse_any_bundle(ByteView(view, fmt="bundle", where=where), max_size=MAX_BUNDLE)
    keep = [e for e in b.entries if e.bundle_id.is_host or keeps(e.index)]
    if len(keep) == len(b.entries):
        return b.size, bytes(view.bytes_at(0, b.size))
    return b.size, rewrite_bundle(b, keep)


def _bundle_align(b: Bundle) -> int:
    """The ``-bundle-align`` that reproduces ``b``'s entry offsets (largest power of two up to 4096)."""
    images = [BundleImage(e.id, bytes(e.data)) for e in b.entries]
    offsets = tuple(e.offset for e in b.entries)
    align = 4096
    while align >= 1:
        plan = plan_bundle(images, align=align, host=None)
        if plan.offsets == offsets:
            return align
        align //= 2
    raise UsageError("bundle: its entry offsets follow no alignment the bundler uses; cannot rewrite it faithfully")


def rewrite_bundle(b: Bundle, keep: Sequence[BundleEntry]) -> bytes:
    """``b`` written again with the entries ``keep`` (same alignment, compression method and CCOB version)."""
    align = _bundle_align(b)
    raw = write_bundle([BundleImage(e.id, bytes(e.data)) for e in keep], align=align, host=None)
    if b.compressed is None:
        return raw
    h = b.compressed
    if h.version not in (2, 3):
        raise UsageError(f"bundle: compressed bundle version {h.version} cannot be written (2 or 3 only)")
    return write_compressed_bundle(raw, method=h.method_name, version=h.version)
