"""Writers of binary, compressed and text bundles, laid out as clang-offload-bundler 19 lays them out.

Binary layout (see ``reader.py``): the 32-byte header, then the entry table in
the order given, then each image at ``align_up(previous end, align)``, zero
padding in between; the first image starts at ``align_up(end of table, align)``.
An empty image (the host entry of a HIP fat binary) takes the aligned offset
and occupies nothing, so the next image shares its offset.  No padding follows
the last image.  Verified byte for byte against ``clang-offload-bundler-19
-type=o [-bundle-align=N]`` with ``-input=/dev/null`` for the host.

The bundler insists on exactly one host entry (LLVM 19 crashes without one),
so :func:`write_bundle` puts an empty ``host-x86_64-unknown-linux-gnu-`` entry
first when none of the entries is a host entry (``host=None`` turns that off).

Compressed bundles compress the whole binary bundle (``compress.py``) behind a
CCOB header of version 2 (LLVM 19's) or 3 (LLVM 22's); v1 is read only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from devbin.binary import Emitter, align_up
from devbin.errors import UsageError
from devbin.formats.bundle import constants as C
from devbin.formats.bundle.compress import compress, truncated_md5
from devbin.formats.bundle.reader import parse_bundle_id

__all__ = ["BundleImage", "BundlePlan", "plan_bundle", "write_bundle", "write_compressed_bundle",
           "write_text_bundle"]



@dataclass(frozen=True)
class BundleImage:
    """An entry to write: its ID and its bytes."""

    id: str
    data: bytes


@dataclass(frozen=True)
class BundlePlan:
    """Where each entry's image goes; ``size`` is the bundle's size."""

    images: tuple[BundleImage, ...]
    offsets: tuple[int, ...]
    table_end: int
    size: int


def _images(entries: Sequence[BundleImage | tuple[str, bytes | bytearray | memoryview]],
            host: str | None) -> tuple[BundleImage, ...]:
    out = [e if isinstance(e, BundleImage) else BundleImage(e[0], bytes(e[1])) for e in entries]
    for e in out:
        if not e.id:
            raise UsageError("bundle: an entry ID may not be empty")
    if host is not None and not any(parse_bundle_id(e.id).is_host for e in out):
        out.insert(0, BundleImage(host, b""))
    return tuple(out)


def plan_bundle(entries: Sequence[BundleImage | tuple[str, bytes | bytearray | memoryview]], *, align: int = 1,
                host: str | None = C.DEFAULT_HOST_ID) -> BundlePlan:
    """Lay out a binary bundle (nothing is written)."""
    if align < 1:
        raise UsageError(f"bundle: alignment must be at least 1, not {align}")
    images = _images(entries, host)
    pos = C.HEADER_SIZE + sum(C.ENTRY_FIXED_SIZE + len(e.id.encode()) for e in images)
    table_end = pos
    offsets = []
    for e in images:
        pos = align_up(pos, align)
        offsets.append(pos)
        pos += len(e.data)
    return BundlePlan(images, tuple(offsets), table_end, pos)


def write_bundle(entries: Sequence[BundleImage | tuple[str, bytes | bytearray | memoryview]], *, align: int = 1,
                 host: str | None = C.DEFAULT_HOST_ID) -> bytes:
    """A binary bundle of ``entries`` (``BundleImage`` or ``(id, bytes)``), in the order given.

    ``align`` is the bundler's ``-bundle-align`` (HIP uses 4096); see the module
    docstring for the host entry.
    """
    plan = plan_bundle(entries, align=align, host=host)
    em = Emitter()
    em.write(C.BUNDLE_MAGIC)
    em.pack("Q", len(plan.images))
    for e, off in zip(plan.images, plan.offsets, strict=True):
        ident = e.id.encode()
        em.pack("QQQ", off, len(e.data), len(ident))
        em.write(ident)
    em.at(plan.table_end, "end of entry table")
    for e, off in zip(plan.images, plan.offsets, strict=True):
        em.pad_to(off, f"image {e.id!r}")
        em.write(e.data)
    em.at(plan.size, "end of bundle")
    return em.getvalue()


def write_compressed_bundle(
    entries: Sequence[BundleImage | tuple[str, bytes | bytearray | memoryview]] | bytes, *, method: str = "zstd",
    version: int = 2, level: int | None = None, align: int = 1, host: str | None = C.DEFAULT_HOST_ID,
) -> bytes:
    """A CCOB bundle (``version`` 2 or 3) of ``entries``, or of an already written binary bundle (bytes).

    ``method`` is ``"zstd"`` (what the bundler writes when LLVM has zstd) or
    ``"zlib"``; ``level`` is ``-compression-level`` (default: zstd 3, zlib 6).
    """
    if version not in (2, 3):
        raise UsageError(f"bundle: can write compressed bundle versions 2 and 3, not {version}")
    if method not in C.METHOD_BY_NAME:
        raise UsageError(f"bundle: unknown compression method {method!r} (expected 'zstd' or 'zlib')")
    raw = entries if isinstance(entries, bytes) else write_bundle(entries, align=align, host=host)
    payload = compress(method, raw, level)
    hsize = C.CCOB_HEADER_SIZE[version]
    total = hsize + len(payload)
    em = Emitter()
    em.write(C.CCOB_MAGIC)
    em.pack("HH", version, C.METHOD_BY_NAME[method])
    if version == 2:
        if total >> 32 or len(raw) >> 32:
            raise UsageError("bundle: too large for a v2 compressed bundle (32-bit sizes); use version=3")
        em.pack("IIQ", total, len(raw), truncated_md5(raw))
    else:
        em.pack("QQQ", total, len(raw), truncated_md5(raw))
    em.at(hsize, "compressed payload")
    em.write(payload)
    return em.getvalue()


def write_text_bundle(parts: Sequence[tuple[str, str]], *, comment: str = "#") -> str:
    """A text bundle of ``(id, content)`` parts, as the bundler writes ``-type=s`` (``#``),
    ``-type=ll`` (``;``) or C-like types (``//``)."""
    out = []
    for ident, content in parts:
        out.append(f"\n{comment} {C.TEXT_START} {ident}\n{content}\n{comment} {C.TEXT_END} {ident}\n")
    return "".join(out)
