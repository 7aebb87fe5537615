"""Bytes too large for the heap: an unnamed temporary file, memory-mapped, its pages given back.

The one place devbin keeps such bytes, whoever makes them: a wheel's member inflated
(:func:`devbin.formats.zipmember.spill`, for the scan and for prune alike), a library copied to be
pruned (:func:`copy_of`), the pruned library written out (:meth:`Mapped.write`).

A :class:`Mapped` is an unnamed temporary file (:func:`tempfile.TemporaryFile`: ``O_TMPFILE`` in
``TMPDIR``, removed from its folder at once, gone with its last descriptor and map, or when the process
dies) and a read-only map of it (mmap(2) ``MAP_SHARED``, ``PROT_READ``), :attr:`Mapped.data`, a
:class:`Spilled` map.  Its pages are the kernel's page cache: they count in the process's resident set
only once read, and are given back (madvise(2) ``MADV_DONTNEED``: for a shared file mapping the bytes
stay in the file, the next read faults them in again from the page cache, never lost):

* by :func:`release` of the map (a reader that has passed over it: prune's comparison and its writer);
* for every live :class:`Spilled` map at the end of each unit of work
  (:meth:`devbin.binary.budget.MemoryBudget.unit` calls :func:`drop_pages`), so that a command reading a
  716 MB member image by image costs the pages one unit touched, not the member's size;
* every :data:`DROP_BYTES` a search passes (:func:`pages_read`, from :class:`devbin.binary.ByteView`'s
  ``find`` and the host ELF reader's fatbin walk).

:meth:`Mapped.private` maps the same file copy-on-write (``MAP_PRIVATE``): a page costs anonymous memory
only once it is written, so a rewrite that changes a few pages of a large file pays for those pages, not
for a copy of the file.  Such a map is never given back (``MADV_DONTNEED`` on a private map would discard
the pages written), so it is not a :class:`Spilled` one.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
import weakref
from typing import IO

__all__ = ["DROP_BYTES", "Mapped", "Rewritable", "Spilled", "copy_of", "drop_pages", "pages_read", "release"]

#: The bytes of a file being rewritten in place: a copy, or a copy-on-write map (:meth:`Mapped.private`).
Rewritable = bytearray | mmap.mmap


class Spilled(mmap.mmap):
    """The read-only map of a :class:`Mapped` file (its :attr:`~Mapped.data`): its pages given back at the end
    of every unit of work while it lives (module docstring)."""


#: The live spilled maps, whose pages each unit of work gives back when it ends.
_SPILLED: weakref.WeakSet[Spilled] = weakref.WeakSet()

#: Bytes of spilled maps a search may read (:func:`pages_read`) before their pages are given back.
DROP_BYTES = 32 << 20
_read = [0]


def pages_read(n: int) -> None:
    """Note that ``n`` bytes of a :class:`Spilled` map were read through (a search of a large section); every
    :data:`DROP_BYTES` of them the pages are given back (:func:`drop_pages`), so a search through a file
    larger than memory costs :data:`DROP_BYTES` of pages, not the file's size."""
    _read[0] += n
    if _read[0] >= DROP_BYTES:
        _read[0] = 0
        drop_pages()


def drop_pages() -> None:
    """Give back the pages of every live :class:`Spilled` map (the bytes stay in their file)."""
    if not _SPILLED:
        return
    for m in list(_SPILLED):
        release(m)


def release(data: object) -> None:
    """Give back the pages of ``data`` the process has read, when it is a read-only map (a :class:`Spilled`
    one, or another opened ``ACCESS_READ``; never a copy-on-write one, whose written pages would be lost):
    they are read again from the page cache if needed.  Anything else (bytes): nothing.  Nothing either
    where ``MADV_DONTNEED`` is missing (there the pages stay)."""
    dontneed = getattr(mmap, "MADV_DONTNEED", None)
    if dontneed is None or not isinstance(data, mmap.mmap):
        return
    with contextlib.suppress(ValueError, OSError):  # closed meanwhile, or empty
        data.madvise(dontneed)


class Mapped:
    """An unnamed temporary file and its read-only map :attr:`data` (module docstring).  Written with
    :meth:`write` before :meth:`map`; the map stays valid after :meth:`close` (the kernel keeps the file
    while it is mapped)."""

    def __init__(self, folder: str | None = None, *, file: IO[bytes] | None = None, size: int = 0) -> None:
        self.file: IO[bytes] = file if file is not None else tempfile.TemporaryFile(dir=folder)  # noqa: SIM115
        self.data: Spilled | bytes = b""
        self.size = size

    def twin(self) -> Mapped:
        """Another :class:`Mapped` of the same file, not mapped yet, with a descriptor of its own (closing
        either leaves the other's file open): the file kept for a later reader (devbin.formats.zipmember's
        last spilled member)."""
        self.file.flush()
        return Mapped(file=os.fdopen(os.dup(self.file.fileno()), "rb"), size=self.size)

    def write(self, piece: bytes | bytearray | memoryview) -> int:
        """Append ``piece`` to the file (before :meth:`map`)."""
        n = self.file.write(piece)
        self.size += n
        return n

    def map(self) -> Mapped:
        """Map the file read-only as :attr:`data` (an empty file: ``b""``), a :class:`Spilled` map whose pages
        every unit of work gives back; returns self."""
        self.file.flush()
        if self.size:
            m = Spilled(self.file.fileno(), 0, access=mmap.ACCESS_READ)
            _SPILLED.add(m)
            self.data = m
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
