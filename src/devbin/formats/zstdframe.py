"""The Zstandard frame's constants (RFC 8878, https://www.rfc-editor.org/rfc/rfc8878): one module that
imports nothing, so that the magic table (:mod:`devbin.formats.magic`) and the readers that test payloads
for a bare frame (the fatbin's compressed entries, SYCL's compressed images) share one definition."""

from __future__ import annotations

from typing import Final

#: A frame's magic number 0xFD2FB528, little-endian (RFC 8878 §3.1.1).
MAGIC: Final = b"\x28\xb5\x2f\xfd"
