"""A file's bytes mapped into memory rather than read into it, for the inputs and outputs too large to hold twice.

A :class:`Mapped` is an unnamed temporary file (:func:`tempfile.TemporaryFile`: removed from its folder
at once, gone when closed or when the process dies) and a read-only map of it (mmap(2) ``MAP_SHARED``,
``PROT_READ``).  Its pages are the kernel's page cache: they cost the process memory only while it reads
them, and :meth:`Mapped.release` gives those back (madvise(2) ``MADV_DONTNEED``: for a shared map, pages
dropped from the process and read again from the page cache, never lost).  :meth:`Mapped.private` maps the
same file copy-on-write (``MAP_PRIVATE``): a page costs anonymous memory only once it is written, so a
rewrite that changes a few pages of a large file pays for those pages, not for a copy of the file.

devbin prune uses it for a wheel's member (:func:`spill` of its inflated pieces) and for the pruned
library it writes (:meth:`Mapped.write`): one library of a 500 MB wheel is then never held whole in the
process's own memory (docs/PRUNE.md).
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Iterable
from typing import IO

from devbin.binary.view import Buffer

__all__ = ["Mapped", "Rewritable", "copy_of", "release", "spill"]

#: The bytes of a file being rewritten in place: a copy, or a copy-on-write map (:meth:`Mapped.private`).
Rewritable = bytearray | mmap.mmap


def release(data: Buffer) -> None:
    """Give back the pages of ``data`` the process has read, when it is a read-only map (:class:`Mapped`'s
    :attr:`~Mapped.data`): they are read again from the page cache if needed.  Anything else: nothing."""
    if isinstance(data, mmap.mmap) and len(data) and hasattr(mmap, "MADV_DONTNEED"):
        data.madvise(mmap.MADV_DONTNEED)


class Mapped:
    """An unnamed temporary file and its read-only map :attr:`data` (module docstring).  Written with
    :meth:`write` before :meth:`map`; the map stays valid after :meth:`close` (the kernel keeps the file
    while it is mapped)."""

    def __init__(self, folder: str | None = None) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (closed by close())
        self.data: mmap.mmap | bytes = b""
        self.size = 0

    def write(self, piece: Buffer) -> int:
        """Append ``piece`` to the file (before :meth:`map`)."""
        n = self.file.write(piece)
        self.size += n
        return n

    def map(self) -> Mapped:
        """Map the file read-only as :attr:`data` (an empty file: ``b""``); returns self."""
        self.file.flush()
        if self.size:
            self.data = mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_READ)
        return self

    def private(self) -> Rewritable:
        """A copy-on-write map of the file: writable, its unwritten pages shared with the page cache (an
        empty file: an empty bytearray)."""
        if not self.size:
            return bytearray()
        return mmap.mmap(self.file.fileno(), 0, access=mmap.ACCESS_COPY)

    def release(self) -> None:
        """:func:`release` of :attr:`data`."""
        release(self.data)

    def close(self) -> None:
        """Close the file (a map of it stays valid until it is dropped)."""
        self.file.close()


def copy_of(path: str | os.PathLike[str], folder: str | None = None) -> Mapped:
    """The file ``path`` copied into a new :class:`Mapped` (by the kernel, sendfile(2), where it can), mapped:
    its bytes as they were, whatever happens to the file afterwards (a map of the file itself would show
    another writer's changes, or fault once it is cut short)."""
    out = Mapped(folder)
    try:
        with open(path, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            try:
                while out.size < size:
                    n = os.sendfile(out.file.fileno(), src.fileno(), out.size, size - out.size)
                    if not n:
                        break
                    out.size += n
                out.file.seek(out.size)
            except (OSError, AttributeError):  # no sendfile (between these files, or at all): read and write
                out.file.seek(0)
                out.file.truncate()
                out.size = 0
                src.seek(0)
                while piece := src.read(1 << 20):
                    out.write(piece)
            src.seek(out.size)
            while piece := src.read(1 << 20):  # grown since: as read now
                out.write(piece)
        return out.map()
    except BaseException:
        out.close()
        raise


def spill(pieces: Iterable[Buffer], folder: str | None = None) -> Mapped:
    """``pieces`` written one after another into a new :class:`Mapped`, mapped: a stream of any length held
    in the page cache, not in the process."""
    out = Mapped(folder)
    try:
        for piece in pieces:
            out.write(piece)
        return out.map()
    except BaseException:
        out.close()
        raise
