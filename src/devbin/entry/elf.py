"""The ELF-level entry points: ``parse_elf`` bytes, ``open_elf`` a path (memory-mapped).

They read one ELF file (also inside a devbin wrapped single image); ``devbin.open``
(:mod:`devbin.entry.source`) reads every other container.  ``devbin.parse`` and
``devbin.open_file``, their names in devbin 0.1, work for one more release and warn
(``DeprecationWarning``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager

from devbin.binary import Buffer
from devbin.errors import FormatError, NotThisFormat
from devbin.formats.elf.reader import Diag, ElfFile
from devbin.formats.magic import ELF, SNIFF, UNKNOWN, WRAPPED, detect
from devbin.formats.wrapped import parse_wrapped


def parse_elf(data: Buffer, *, where: str = "", diag: Diag | None = None) -> ElfFile:
    """Parse a device binary held in memory.

    Reads ELF (cubins, AMDGPU code objects, any ELF), also inside a devbin
    wrapped single image (the metadata is read by :func:`wrapped_metadata`);
    other recognised formats raise a clear error naming the format (the
    container commands read them through :mod:`devbin.images`).
    """
    kind = detect(data)
    if kind == ELF:
        return ElfFile(data, where=where, diag=diag)
    if kind == WRAPPED:
        w = parse_wrapped(data, where=where)
        if detect(w.image) != ELF:
            raise FormatError("the wrapped image is not an ELF code object", fmt="wrapped", where=where)
        return ElfFile(w.image, where=f"{where} (wrapped)" if where else "", diag=diag)
    if kind == UNKNOWN:
        raise NotThisFormat("not a recognised device binary (unknown magic)", fmt="detect", where=where, offset=0)
    raise FormatError(f"{kind} files are recognised but not readable by this version of devbin", fmt=kind,
                      where=where)


def wrapped_metadata(data: Buffer | str | os.PathLike[str]) -> tuple[tuple[str, str], ...] | None:
    """The key/value pairs of a devbin wrapped image (its bytes, or the file at a path: read whole only when
    its header says wrapped), in file order; None for any other file."""
    where = ""
    if isinstance(data, (str, os.PathLike)):
        where = os.fspath(data)
        with open(data, "rb") as f:
            if detect(f.read(SNIFF)) != WRAPPED:
                return None
            f.seek(0)
            data = f.read()
    if detect(data) != WRAPPED:
        return None
    return parse_wrapped(data, where=where).metadata


@contextmanager
def open_elf(path: str | os.PathLike[str], *, diag: Diag | None = None) -> Iterator[ElfFile]:
    """Open and parse ``path``; the file is memory-mapped for the duration of the ``with`` block."""
    where = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            yield parse_elf(b"", where=where, diag=diag)
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield parse_elf(mm, where=where, diag=diag)
        finally:
            # Views into the map may still be alive (the caller kept section data); then the
            # map is released when they are garbage-collected.
            with contextlib.suppress(BufferError):
                mm.close()
