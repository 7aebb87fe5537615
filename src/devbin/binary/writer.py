"""Helpers for emitting bytes: LEB128 encoders and a checked output buffer.

Writers plan a layout first and then emit; :class:`Emitter` asserts that each
piece lands at the offset the plan gave it, so a planning bug is caught at
write time instead of producing a subtly wrong file.
"""

from __future__ import annotations

import struct

from devbin.errors import UsageError

__all__ = ["Emitter", "uleb", "sleb", "align_up"]


def align_up(value: int, alignment: int) -> int:
    """Round ``value`` up to a multiple of ``alignment`` (0 and 1 mean no alignment)."""
    if alignment <= 1:
        return value
    return (value + alignment - 1) // alignment * alignment


def uleb(value: int) -> bytes:
    """Unsigned LEB128 encoding of ``value`` (0 <= value < 2**64)."""
    if value < 0 or value >> 64:
        raise UsageError(f"ULEB128 value out of range: {value}")
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def sleb(value: int) -> bytes:
    """Signed LEB128 encoding of ``value`` (-2**63 <= value < 2**63)."""
    if not -(1 << 63) <= value < (1 << 63):
        raise UsageError(f"SLEB128 value out of range: {value}")
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        done = (value == 0 and not b & 0x40) or (value == -1 and b & 0x40)
        out.append(b if done else b | 0x80)
        if done:
            return bytes(out)


class Emitter:
    """An output buffer that checks writes against a planned layout."""

    __slots__ = ("buf", "little")

    def __init__(self, little: bool = True) -> None:
        self.buf = bytearray()
        self.little = little

    def __len__(self) -> int:
        return len(self.buf)

    def pack(self, fmt: str, *values: int) -> None:
        self.buf += struct.pack(("<" if self.little else ">") + fmt, *values)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    def pad_to(self, offset: int, what: str = "padding") -> None:
        """Zero-fill up to ``offset``; fail if the buffer is already past it."""
        if len(self.buf) > offset:
            raise UsageError(f"layout error: {what} planned at {offset:#x} but output is already at {len(self.buf):#x}")
        self.buf += bytes(offset - len(self.buf))

    def at(self, offset: int, what: str) -> None:
        """Assert the next write starts at the planned ``offset``."""
        if len(self.buf) != offset:
            raise UsageError(f"layout error: {what} planned at {offset:#x} but written at {len(self.buf):#x}")

    def getvalue(self) -> bytes:
        return bytes(self.buf)
