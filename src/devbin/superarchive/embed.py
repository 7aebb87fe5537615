"""Carry a super-archive inside a host ELF (a runtime's shared library) and find it there.

The archive is stored unchanged as the contents of one non-allocated section,
``.devbin.superarchive`` (``SHT_PROGBITS``, no flags, alignment 8), appended by
:class:`devbin.formats.elf.edit.ElfEditor`: nothing the dynamic loader maps moves, and the
bytes can be read back from the file or from an mmap of it with no copy.  Non-allocated
means the loader does not map it; a runtime that wants it in memory maps its own file (or a
packer copies it into an allocated section at link time, which is outside devbin).
"""

from __future__ import annotations

from typing import Final

from devbin.binary import Buffer, ByteView
from devbin.errors import NotThisFormat, UsageError
from devbin.formats.ar import is_archive
from devbin.formats.elf.edit import ElfEditor, NewSection
from devbin.formats.elf.reader import ElfFile

__all__ = ["SECTION", "embed", "find_embedded"]

SECTION: Final = ".devbin.superarchive"


def embed(host: Buffer, archive: Buffer, *, section: str = SECTION, where: str = "") -> bytes:
    """``host`` (an ELF) with ``archive`` in section ``section`` (replaced when already there)."""
    if not is_archive(archive):
        raise UsageError("the data to embed is not an ar archive", fmt="superarchive")
    editor = ElfEditor(ElfFile(host, where=where))
    new = NewSection(section, bytes(archive), align=8)
    editor.set_or_add(new)
    return editor.write()


def find_embedded(buf: Buffer | ByteView, *, section: str = SECTION, where: str = "") -> ByteView:
    """A zero-copy view of the archive in section ``section`` of the ELF in ``buf``."""
    elf = ElfFile(buf, where=where)
    sec = elf.section(section)
    if sec is None:
        raise elf.view.error(f"no {section!r} section: no super-archive is embedded here", cls=NotThisFormat)
    return sec.view
