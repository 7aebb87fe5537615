"""An ocloc multi-device archive written again with some of its members: what ``devbin prune`` does to one.

The archive (:mod:`devbin.targets.intel.fatarchive`) is written as compute-runtime's ``ArEncoder`` writes it
(``shared/source/device_binary_format/ar/ar_encoder.cpp``, ``appendFileEntry``, with ``padTo8Bytes`` as
``ocloc`` uses it): ``!<arch>\\n``, then per member a 60-byte header and its data, a zero byte after data
of odd size; before a member whose data would not start on an 8-byte boundary, a member
``pad_<n>/`` (``n`` counting from 0) of ``8 - (offset + 120) % 8`` spaces, so that it does.  The headers
of the kept members are copied as they are (name, date, ids, mode, size); the ``pad_`` members are made
anew for the new offsets, numbered from 0 again.  Keeping every member gives the input back byte for
byte (tests/test_intel_prune.py checks that on archives ``ocloc`` and DPC++ wrote).
"""

from __future__ import annotations

from collections.abc import Callable

from devbin.binary import Buffer, ByteView
from devbin.errors import FormatError
from devbin.formats.ar import ArchiveFile
from devbin.formats.ar import constants as AC
from devbin.targets.intel.fatarchive import PAD_PREFIX

__all__ = ["prune_fat_archive", "write_fat_archive"]

_HEADER = AC.HEADER_SIZE  # 60
_ALIGN = 8


def _pad_header(n: int, size: int) -> bytes:
    """The header ArEncoder gives its ``pad_<n>`` members (date, ids 0, mode 644)."""
    fields = (f"{PAD_PREFIX}{n}/", 16), ("0", 12), ("0", 6), ("0", 6), ("644", 8), (str(size), 10)
    return b"".join(text.encode("ascii").ljust(width) for text, width in fields) + b"`\n"


def write_fat_archive(members: list[tuple[bytes, Buffer]]) -> bytes:
    """The archive of ``members`` (each its 60-byte header as written and its data), with ``pad_`` members
    put where ArEncoder puts them (module docstring)."""
    out = bytearray(AC.MAGIC)
    pads = 0
    for header, data in members:
        if (len(out) + _HEADER) % _ALIGN:
            size = _ALIGN - (len(out) + 2 * _HEADER) % _ALIGN
            out += _pad_header(pads, size) + b" " * size
            pads += 1
        out += header
        out += data
        if len(data) % 2:
            out += b"\0"
    return bytes(out)


def prune_fat_archive(data: Buffer, keeps: Callable[[str, int], bool], where: str = "") -> bytes:
    """The archive ``data`` without the members ``keeps(name, n)`` refuses (``n``: the member's number among
    those of its name, from 1, as the scan counts them) and without its old ``pad_`` members, written again
    (:func:`write_fat_archive`).  FormatError from the ``ar`` reader, or for a member whose header is not a
    plain 60-byte one (a long name: ocloc writes none)."""
    ar = ArchiveFile(ByteView(data, where=where), where=where)
    view = ByteView(data, where=where)
    kept: list[tuple[bytes, Buffer]] = []
    seen: dict[str, int] = {}
    for m in ar.files:
        if m.is_special or m.name.startswith(PAD_PREFIX):
            continue
        seen[m.name] = n = seen.get(m.name, 0) + 1
        if not keeps(m.name, n):
            continue
        if m.offset != m.header_offset + _HEADER:
            raise FormatError(f"member {m.name!r} has a long or BSD name: not an archive ocloc writes", fmt="ar",
                              where=where)
        kept.append((bytes(view.bytes_at(m.header_offset, _HEADER)), m.data))
    return write_fat_archive(kept)
