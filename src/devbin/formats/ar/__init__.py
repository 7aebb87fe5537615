"""Unix ``ar`` archives (GNU/System V, BSD/Darwin, GNU thin): a read view, :class:`ArchiveFile`;
the writer is :mod:`devbin.formats.ar.writer`, and :func:`safe_member_path` guards extraction."""

from devbin.formats.ar.paths import safe_member_path
from devbin.formats.ar.reader import ArchiveFile, ArchiveSymbol, Member, is_archive

__all__ = ["ArchiveFile", "ArchiveSymbol", "Member", "is_archive", "safe_member_path"]
