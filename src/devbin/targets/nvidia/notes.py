"""NVIDIA's ELF notes (owner ``NVIDIA Corp``).

``.note.nv.tkinfo`` (type 2000): ``u32 version`` then five ``u32`` offsets
(object file name, tool name, tool version, tool branch, tool options) into a
string blob that follows them; the blob starts with a NUL, so offset 0 is "".
"""

from __future__ import annotations

from dataclasses import dataclass

from devbin.binary import ByteView
from devbin.formats.elf.reader import ElfFile

NT_NV_TKINFO = 2000


@dataclass(frozen=True, slots=True)
class ToolkitInfo:
    version: int
    object_name: str
    tool_name: str
    tool_version: str
    tool_branch: str
    tool_options: str


def tkinfo(elf: ElfFile) -> ToolkitInfo | None:
    sec = elf.section(".note.nv.tkinfo")
    if sec is None:
        return None
    for n in elf.notes(sec):
        if n.n_type != NT_NV_TKINFO or len(n.desc) < 24:
            continue
        v = ByteView(n.desc, fmt="cubin", where=".note.nv.tkinfo")
        version, *offs = v.unpack("IIIIII", 0)
        blob = v.sub(24, len(v) - 24)
        strings = [blob.cstr(o, "tkinfo string") if o < len(blob) else "" for o in offs]
        return ToolkitInfo(version, *strings)
    return None
