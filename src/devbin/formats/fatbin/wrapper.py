"""The host-side ``__fatBinC_Wrapper_t`` (``fatbinary_section.h``; ``nvidia-formats.md`` §1.1).

24 bytes on 64-bit hosts, in section ``.nvFatBinSegment``::

    +0x00 u32 magic 0x466243B1 ("\\xb1CbF")
    +0x04 u32 version: 1 ordinary, 2 "link" wrapper from ``nvcc -dlink``
    +0x08 u64 data: address of the fatbin (a relocation in objects, so often 0 on disk)
    +0x10 u64 filename_or_fatbins: v1 0; v2 address of ``__cudaPrelinkedFatbins``

Other versions are kept (the field is shown raw), not rejected.

HIP uses the same 24-byte layout in ``.hipFatBinSegment`` (clang's
``CGCUDANV.cpp``: ``{i32 magic, i32 version, ptr data, ptr unused}``) with
magic 0x48495046 ("HIPF"; on disk ``46 50 49 48``), version 1, pointing at a
clang offload bundle in ``.hip_fatbin``; ``parse_wrapper(..., magic=HIP_WRAPPER_MAGIC)``
reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from devbin.binary import ByteView
from devbin.errors import NotThisFormat
from devbin.formats.fatbin import constants as C

__all__ = ["FatbinWrapper", "HIP_WRAPPER_MAGIC", "parse_wrapper"]

HIP_WRAPPER_MAGIC = 0x48495046


@dataclass(frozen=True)
class FatbinWrapper:
    magic: int
    version: int
    data_ptr: int
    filename_or_fatbins: int

    @property
    def is_link(self) -> bool:
        return self.version == C.WRAPPER_LINK_VERSION


def parse_wrapper(view: ByteView | bytes | bytearray | memoryview, *, where: str = "",
                  magic: int = C.WRAPPER_MAGIC) -> FatbinWrapper:
    """Parse a wrapper at offset 0 of ``view``; :class:`NotThisFormat` for a magic other than ``magic``."""
    if isinstance(view, ByteView):
        v = ByteView(view, fmt="fatbin-wrapper", where=where or view.where, base=view.base)
    else:
        v = ByteView(view, fmt="fatbin-wrapper", where=where)
    if len(v) < 4 or v.u32(0) != magic:
        raise v.error("not a fatbin wrapper (bad magic)", 0, v.u32(0) if len(v) >= 4 else None, cls=NotThisFormat)
    magic, version, data_ptr, other = v.unpack("IIQQ", 0, "fatbin wrapper")
    return FatbinWrapper(magic=magic, version=version, data_ptr=data_ptr, filename_or_fatbins=other)
