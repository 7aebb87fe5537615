"""The ELF section header table in one pass: rows as tuples, file sizes, names.

:func:`section_table` is the fast path :class:`devbin.formats.elf.reader.ElfFile` takes at open,
in pure Python here and in C in the optional extension ``devbin.binary._cdecode`` (same
signature, same results; :data:`section_table` is the one in use, see
:mod:`devbin.binary.native`).  It answers only the well-formed case: on anything it would have
to report (a table or section past the end of the file, a bad ``e_shstrndx``, a name that is
not NUL-terminated ASCII inside the string table) it returns None, and the reader takes its
careful path, which reports it as it always has.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from devbin.binary.native import load_native

#: One section header as stored: sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info,
#: sh_addralign, sh_entsize (the field order of both classes).
SectionRow = tuple[int, int, int, int, int, int, int, int, int, int]
SectionTable = tuple[list[SectionRow], list[int], list[str]]
SH_NAME, SH_TYPE, SH_FLAGS, SH_ADDR, SH_OFFSET, SH_SIZE, SH_LINK, SH_INFO, SH_ADDRALIGN, SH_ENTSIZE = range(10)

_FORMATS = {(False, False): ">IIIIIIIIII", (False, True): "<IIIIIIIIII",
            (True, False): ">IIQQQQIIQQ", (True, True): "<IIQQQQIIQQ"}
_STRUCTS = {k: struct.Struct(f) for k, f in _FORMATS.items()}


def section_table_py(buf: bytes | bytearray | memoryview, shoff: int, shnum: int, is64: bool, little: bool,
                     no_file: tuple[int, ...], shstrndx: int) -> SectionTable | None:
    """``shnum`` section headers at ``shoff`` in ``buf`` (the whole file): each row as stored, the bytes
    each takes in the file (0 for the types in ``no_file``), and its name from section ``shstrndx``
    (every name "" when it is 0); None when any of that is not well formed."""
    st = _STRUCTS[is64, little]
    n = len(buf)
    if shoff < 0 or shnum < 0 or shoff > n or shnum * st.size > n - shoff:
        return None
    rows: list[SectionRow] = list(st.iter_unpack(buf[shoff:shoff + shnum * st.size]))
    sizes = []
    for r in rows:
        size = 0 if r[1] in no_file else r[5]
        if size and (r[4] > n or size > n - r[4]):
            return None
        sizes.append(size)
    if shstrndx == 0:
        return rows, sizes, [""] * shnum
    if shstrndx >= shnum:
        return None
    size = sizes[shstrndx]
    off = rows[shstrndx][4]
    raw = bytes(buf[off:off + size]) if size else b""
    if not raw.isascii():
        return None
    text = raw.decode("ascii")
    find = text.find
    names = [""]
    for r in rows[1:] if rows[0][0] == 0 else rows:
        o = r[0]
        end = find("\0", o) if o < size else -1
        if end < 0:
            return None
        names.append(text[o:end])
    if rows[0][0] != 0:
        del names[0]
    return rows, sizes, names


_native = load_native("devbin.binary._cdecode")
section_table: Callable[[bytes | bytearray | memoryview, int, int, bool, bool, tuple[int, ...], int],
                        SectionTable | None] = (
    _native.section_table if _native is not None else section_table_py)
NATIVE = _native is not None
