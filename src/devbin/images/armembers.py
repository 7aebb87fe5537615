"""The one walk over the members of an ``ar`` archive: the scan's (an archive file or member) and the one
of the archive a SYCL image's zstd frame decodes to (:mod:`devbin.images.sycl`), so that what an archive's
members are is decided here only.

The members are the archive's files (:attr:`devbin.formats.ar.reader.ArchiveFile.files`: not the symbol
tables ``/``, ``/SYM64/``, ``__.SYMDEF``, nor the long-name table ``//``), in archive order, each at
``name;N`` (the N-th member of that name, every member counted: :func:`devbin.formats.ar.member_number`);
a ``pad_<n>`` filler of an ``ocloc`` archive is a member like any other (what its bytes are is for the
caller to judge).  What the reader reports of the archive itself (a missing or odd padding byte after a
member) is a warning at the archive.  A thin member's data is outside the archive: it is read from the
file its name gives relative to the archive's folder (binutils ``ar --thin``), only inside that folder
unless the caller lifts that, and where there is no folder (bytes in memory) or the path is refused, the
member is a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from devbin.binary import Buffer, ByteView
from devbin.errors import DeviceBinaryError
from devbin.images.address import Address, Member
from devbin.images.scanreport import ScanReport

if TYPE_CHECKING:
    from devbin.formats.ar.reader import Member as ArMember

__all__ = ["ar_members"]


def ar_members(rep: ScanReport, data: Buffer | ByteView, at: Address, disk: Path | None = None, *,
               outside: bool = False) -> Iterator[tuple[Address, ArMember, memoryview | Path | None]]:
    """Each member of the archive ``data`` (at address ``at``; on disk at ``disk`` where it is a file) with its
    address and where its bytes are (module docstring): a window on them in ``data``, the path of a thin
    member's file (followed out of the archive's folder only when ``outside``), or None for a thin member
    that cannot be read (a warning, given here).  Raises the reader's error for an archive whose headers
    cannot be walked."""
    from devbin.formats.ar.reader import ArchiveFile, numbered
    where = str(at)
    ar = ArchiveFile(data, where=where, diag=lambda e: rep.warn(where, str(e)))
    for m, n in numbered(ar.files):
        sub = at.child(Member(m.name, n))
        source: memoryview | Path | None = None
        if not m.thin:
            source = m.data
        elif disk is None:
            rep.warn(str(sub), "thin archive member: its data is outside the archive and cannot be read here")
        else:
            try:
                source = ar.thin_member_path(m, disk, allow_outside=outside)
            except DeviceBinaryError as e:
                rep.warn(str(sub), f"{e}; not followed")
        yield sub, m, source
