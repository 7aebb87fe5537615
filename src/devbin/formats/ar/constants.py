"""Constants of the Unix ``ar`` family (binutils ``include/aout/ar.h``; LLVM
``llvm/lib/Object/ArchiveWriter.cpp``).

The member header is 60 ASCII bytes, every field space-padded on the right::

    off  size  field     encoding
      0    16  ar_name   see below
     16    12  ar_date   decimal mtime
     28     6  ar_uid    decimal
     34     6  ar_gid    decimal
     40     8  ar_mode   octal
     48    10  ar_size   decimal byte count of the data (BSD ``#1/N``: includes the N name bytes)
     58     2  ar_fmag   "`\\n"

Member data is padded with one ``\\n`` to an even offset.
"""

from __future__ import annotations

from typing import Final

MAGIC: Final = b"!<arch>\n"
THIN_MAGIC: Final = b"!<thin>\n"
MAGIC_SIZE: Final = 8

HEADER_SIZE: Final = 60
FMAG: Final = b"`\n"

# (offset, size) of each header field.
NAME: Final = (0, 16)
DATE: Final = (16, 12)
UID: Final = (28, 6)
GID: Final = (34, 6)
MODE: Final = (40, 8)
SIZE: Final = (48, 10)
FMAG_FIELD: Final = (58, 2)

PAD_BYTE: Final = b"\n"
#: Intel's ``ocloc`` pads its fat archives' odd-sized members with a NUL instead: its encoder grows the
#: buffer to the even size, zero-filled (intel/compute-runtime,
#: shared/source/device_binary_format/ar/ar_encoder.cpp, ``ArEncoder::appendFileEntry``); GNU ar and the
#: runtime's decoder read such archives, so the reader takes it without a warning.
PAD_BYTES_READ: Final = (PAD_BYTE, b"\0")

# GNU / System V special names (as they appear in ar_name, trailing spaces removed).
GNU_SYMTAB: Final = "/"  # u32 BE count, u32 BE header offsets, NUL-terminated names
GNU_SYMTAB64: Final = "/SYM64/"  # the same with u64 BE fields
GNU_STRTAB: Final = "//"  # long names, each ended by "/\n"
PSEUDO_BSD_STRTAB: Final = "ARFILENAMES/"  # old binutils spelling of "//"
COFF_SPECIAL: Final = ("/<ECSYMBOLS>/", "/<XFGHASHMAP>/")

# BSD / Darwin.
BSD_LONG_NAME_PREFIX: Final = "#1/"  # the name (N bytes, NUL-padded) comes first in the data
BSD_SYMTABS: Final = ("__.SYMDEF", "__.SYMDEF SORTED")  # u32 LE fields
BSD_SYMTABS64: Final = ("__.SYMDEF_64", "__.SYMDEF_64 SORTED")  # u64 LE fields

# Member kinds.
KIND_FILE: Final = "file"
KIND_SYMTAB: Final = "symtab"
KIND_STRTAB: Final = "strtab"
KIND_SPECIAL: Final = "special"
