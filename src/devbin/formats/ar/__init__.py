"""Unix ``ar`` archives (GNU/System V, BSD/Darwin, GNU thin): a read view, :class:`ArchiveFile`."""

from devbin.formats.ar.reader import ArchiveFile, ArchiveSymbol, Member, is_archive

__all__ = ["ArchiveFile", "ArchiveSymbol", "Member", "is_archive"]
