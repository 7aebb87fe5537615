"""CUDA fatbin containers: read view, writer, compression and the host-side wrapper.

``parse_fatbin``/``iter_fatbins`` read (``reader.py``), ``write_fatbin`` lays
out new fatbins the way NVIDIA's ``fatbinary`` does (``writer.py``),
``compress.py`` handles the LZ4-block and zstd payloads, and ``wrapper.py``
reads the 24-byte ``__fatBinC_Wrapper_t`` that host objects register.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin._lazy import lazy_attributes

if TYPE_CHECKING:
    from devbin.formats.fatbin import compress, constants
    from devbin.formats.fatbin.compress import DEFAULT_MAX, decompress
    from devbin.formats.fatbin.reader import (
        Fatbin,
        FatbinEntry,
        elf_image_size,
        extract_name,
        iter_fatbins,
        parse_fatbin,
    )
    from devbin.formats.fatbin.wrapper import FatbinWrapper, parse_wrapper
    from devbin.formats.fatbin.writer import FatbinImage, plan_fatbin, ptx_version, squeeze_ptx, write_fatbin

__all__ = [
    "DEFAULT_MAX",
    "Fatbin",
    "FatbinEntry",
    "FatbinImage",
    "FatbinWrapper",
    "compress",
    "constants",
    "decompress",
    "elf_image_size",
    "extract_name",
    "iter_fatbins",
    "parse_fatbin",
    "parse_wrapper",
    "plan_fatbin",
    "ptx_version",
    "squeeze_ptx",
    "write_fatbin",
]

__getattr__ = lazy_attributes(__name__, {
    "compress": None,
    "constants": None,
    "DEFAULT_MAX": "constants",
    "decompress": "compress",
    "Fatbin": "reader",
    "FatbinEntry": "reader",
    "elf_image_size": "reader",
    "extract_name": "reader",
    "iter_fatbins": "reader",
    "parse_fatbin": "reader",
    "FatbinWrapper": "wrapper",
    "parse_wrapper": "wrapper",
    "FatbinImage": "writer",
    "plan_fatbin": "writer",
    "ptx_version": "writer",
    "squeeze_ptx": "writer",
    "write_fatbin": "writer",
})
