"""Names and numbers of the devbin device-ELF sections, format v1 (docs/FORMAT.md)."""

from __future__ import annotations

from typing import Final

FMT: Final = "devsec"

SEC_FUNC: Final = ".devbin.func"
SEC_CALLGRAPH: Final = ".devbin.callgraph"
SEC_PROTO: Final = ".devbin.proto"
SEC_META: Final = ".devbin.meta"
SECTION_NAMES: Final = (SEC_FUNC, SEC_CALLGRAPH, SEC_PROTO, SEC_META)

# sh_type values, in SHT_LOUSER (0x80000000..0xffffffff) so that no vendor's
# SHT_LOPROC..SHT_HIPROC type (0x70000000..0x7fffffff) can collide.
SHT_DEVBIN_FUNC: Final = 0x8DB00001
SHT_DEVBIN_CALLGRAPH: Final = 0x8DB00002
SHT_DEVBIN_PROTO: Final = 0x8DB00003
SHT_DEVBIN_META: Final = 0x8DB00004
SH_TYPES: Final = {
    SEC_FUNC: SHT_DEVBIN_FUNC,
    SEC_CALLGRAPH: SHT_DEVBIN_CALLGRAPH,
    SEC_PROTO: SHT_DEVBIN_PROTO,
    SEC_META: SHT_DEVBIN_META,
}
LINKS_SYMTAB: Final = frozenset({SEC_FUNC, SEC_CALLGRAPH})

VERSION_MAJOR: Final = 1
VERSION_MINOR: Final = 0
HEADER_SIZE: Final = 8

# .devbin.callgraph block tags
BLOCK_DIRECT: Final = 1
BLOCK_INDIRECT: Final = 2
BLOCK_ADDRESS_TAKEN: Final = 3
BLOCK_EXTERNAL: Final = 4

# .devbin.meta value types
META_STRING: Final = 0
META_UINT: Final = 1
META_BYTES: Final = 2

# key = (attribute id << FORM_BITS) | form
FORM_BITS: Final = 3
FORM_MASK: Final = 7
