"""Codec of the devbin device-ELF sections, format v1 (spec: ``docs/FORMAT.md``).

Four non-allocated sections carry the unified model inside any vendor's ELF:
``.devbin.func`` (per-function kind and attributes), ``.devbin.callgraph``,
``.devbin.proto`` (prototype table) and ``.devbin.meta`` (key/value).  This
package depends only on :mod:`devbin.binary` and :mod:`devbin.model`; the ELF
layer hands it section bytes and a symbol-name/index mapping.
"""

from __future__ import annotations

from devbin.formats.devsec import constants
from devbin.formats.devsec.reader import (
    SectionHeader,
    StaleSection,
    decode,
    decode_callgraph,
    decode_func,
    decode_meta,
    decode_proto,
    decode_section,
    read_header,
)
from devbin.formats.devsec.writer import EncodedSection, encode, encode_attribute

__all__ = [
    "EncodedSection",
    "SectionHeader",
    "StaleSection",
    "constants",
    "decode",
    "decode_callgraph",
    "decode_func",
    "decode_meta",
    "decode_proto",
    "decode_section",
    "encode",
    "encode_attribute",
    "read_header",
]
