"""Unix ``ar`` archives (GNU/System V, BSD/Darwin, GNU thin): a read view, :class:`ArchiveFile`;
the writer is :mod:`devbin.formats.ar.writer`, and :func:`safe_member_path` guards extraction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin._lazy import lazy_attributes

if TYPE_CHECKING:
    from devbin.formats.ar.paths import safe_member_path
    from devbin.formats.ar.reader import ArchiveFile, ArchiveSymbol, Member, is_archive, member_number, numbered

__all__ = ["ArchiveFile", "ArchiveSymbol", "Member", "is_archive", "member_number", "numbered", "safe_member_path"]

__getattr__ = lazy_attributes(__name__, {
    "safe_member_path": "paths",
    "ArchiveFile": "reader",
    "ArchiveSymbol": "reader",
    "Member": "reader",
    "is_archive": "reader",
    "member_number": "reader",
    "numbered": "reader",
})
