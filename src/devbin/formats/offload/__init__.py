"""LLVM OffloadBinary (magic ``10 FF 10 AD``): read view, writer and host-object lookup.

``parse_offload_binary``/``iter_offload_binaries`` read (``reader.py``),
``find_in_elf`` reads the ``.llvm.offloading`` sections of host objects,
``write_offload_binary`` lays out new blobs as LLVM does (``writer.py``), and
``constants.py`` names image kinds and both offload-kind numberings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin._lazy import lazy_attributes

if TYPE_CHECKING:
    from devbin.formats.offload import constants
    from devbin.formats.offload.reader import (
        OffloadBinary,
        OffloadEntry,
        find_in_elf,
        is_offload_binary,
        iter_offload_binaries,
        offloading_sections,
        parse_offload_binary,
    )
    from devbin.formats.offload.writer import OffloadImage, build_string_table, write_offload_binary

__all__ = [
    "OffloadBinary",
    "OffloadEntry",
    "OffloadImage",
    "build_string_table",
    "constants",
    "find_in_elf",
    "is_offload_binary",
    "iter_offload_binaries",
    "offloading_sections",
    "parse_offload_binary",
    "write_offload_binary",
]

__getattr__ = lazy_attributes(__name__, {
    "constants": None,
    "OffloadBinary": "reader",
    "OffloadEntry": "reader",
    "find_in_elf": "reader",
    "is_offload_binary": "reader",
    "iter_offload_binaries": "reader",
    "offloading_sections": "reader",
    "parse_offload_binary": "reader",
    "OffloadImage": "writer",
    "build_string_table": "writer",
    "write_offload_binary": "writer",
})
