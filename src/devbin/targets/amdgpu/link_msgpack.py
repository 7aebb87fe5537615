"""A MessagePack document as a tree of byte spans, for editing values in place.

:mod:`devbin.targets.amdgpu.metadata` decodes the ``NT_AMDGPU_METADATA`` desc into values;
patching a linked code object needs more: *where* each value's bytes are, so one value can be
re-encoded and spliced in while every other byte stays as LLVM wrote it.  Every read goes
through :class:`~devbin.binary.ByteView` (bounds and counts checked, nesting capped); bad
input is a :class:`~devbin.errors.FormatError`.

Integers are re-encoded no narrower than they were (:func:`encode_uint`): a fixint stays a
fixint while the value fits, and a ``uint8`` written for a small value stays a ``uint8``.
MessagePack allows a wider encoding than needed, and both LLVM's reader and ``msgpack``
accept it, so widening a fixint (+1 byte each) is how a document is padded to an exact size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devbin.binary import ByteView
from devbin.errors import FormatError

__all__ = ["MsgpackValue", "encode_key", "encode_uint", "parse", "remove_elements", "splice"]

_FMT = "amdgpu-metadata"
_MAX_DEPTH = 32
_UINT_WIDTHS = ((1, 0x7F, b""), (2, 0xFF, b"\xcc"), (3, 0xFFFF, b"\xcd"), (5, 0xFFFFFFFF, b"\xce"),
                (9, (1 << 64) - 1, b"\xcf"))
# Fixed-size scalars: type byte -> payload bytes.
_FIXED = {0xC0: 0, 0xC2: 0, 0xC3: 0, 0xCA: 4, 0xCB: 8, 0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2,
          0xD2: 4, 0xD3: 8, 0xD4: 2, 0xD5: 3, 0xD6: 5, 0xD7: 9, 0xD8: 17}
_LEN = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC7: 1, 0xC8: 2, 0xC9: 4}  # bin, str, ext


@dataclass(slots=True)
class MsgpackValue:
    """One value: ``kind`` is map, array, str, uint, int, bool, nil or other; ``[off, end)`` its
    bytes; ``value`` for scalars; ``items`` (key, value) pairs for maps, values for arrays."""

    kind: str
    off: int
    end: int
    value: object = None
    items: list[tuple[MsgpackValue, MsgpackValue]] = field(default_factory=list)
    elements: list[MsgpackValue] = field(default_factory=list)

    def get(self, key: str) -> MsgpackValue | None:
        for k, v in self.items:
            if k.value == key:
                return v
        return None

    @property
    def width(self) -> int:
        return self.end - self.off


def _count(v: ByteView, off: int) -> tuple[int, int]:
    """(element count, header size) of a map or array at ``off``."""
    t = v.u8(off)
    if 0x80 <= t <= 0x9F:
        return t & 0x0F, 1
    if t in (0xDC, 0xDE):
        return v.u16(off + 1), 3
    return v.u32(off + 1), 5


def _node(v: ByteView, off: int, depth: int) -> MsgpackValue:
    if depth > _MAX_DEPTH:
        raise v.error("MessagePack nesting too deep", off, depth)
    t = v.u8(off)
    if t <= 0x7F:
        return MsgpackValue("uint", off, off + 1, t)
    if t >= 0xE0:
        return MsgpackValue("int", off, off + 1, t - 0x100)
    if 0xA0 <= t <= 0xBF or t in (0xD9, 0xDA, 0xDB):
        n, hdr = (t & 0x1F, 1) if t <= 0xBF else (int.from_bytes(v.bytes_at(off + 1, _LEN[t]), "big"), 1 + _LEN[t])
        raw = v.bytes_at(off + hdr, n, "string")
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise v.error("MessagePack string is not UTF-8", off) from None
        return MsgpackValue("str", off, off + hdr + n, text)
    if 0x80 <= t <= 0x9F or t in (0xDC, 0xDD, 0xDE, 0xDF):
        is_map = 0x80 <= t <= 0x8F or t in (0xDE, 0xDF)
        n, hdr = _count(v, off)
        v.check_count(n, 2 if is_map else 1, off + hdr, "MessagePack container")
        node = MsgpackValue("map" if is_map else "array", off, off + hdr)
        pos = off + hdr
        for _ in range(n):
            a = _node(v, pos, depth + 1)
            if is_map:
                b = _node(v, a.end, depth + 1)
                node.items.append((a, b))
                pos = b.end
            else:
                node.elements.append(a)
                pos = a.end
        node.end = pos
        return node
    if t in _FIXED:
        size = _FIXED[t]
        v.check(off + 1, size, "MessagePack scalar")
        if t in (0xC2, 0xC3):
            return MsgpackValue("bool", off, off + 1, t == 0xC3)
        if t == 0xC0:
            return MsgpackValue("nil", off, off + 1)
        if 0xCC <= t <= 0xCF:
            return MsgpackValue("uint", off, off + 1 + size, int.from_bytes(v.bytes_at(off + 1, size), "big"))
        return MsgpackValue("other", off, off + 1 + size)
    if t in _LEN:
        n = int.from_bytes(v.bytes_at(off + 1, _LEN[t]), "big")
        extra = 1 if t in (0xC7, 0xC8, 0xC9) else 0  # ext: a type byte after the length
        v.check(off + 1 + _LEN[t], n + extra, "MessagePack blob")
        return MsgpackValue("other", off, off + 1 + _LEN[t] + extra + n)
    raise v.error("MessagePack type byte 0xc1 is never used", off, t)


def parse(desc: bytes) -> MsgpackValue:
    """The document in ``desc`` as a tree of spans; trailing bytes are an error."""
    v = ByteView(desc, fmt=_FMT, where="NT_AMDGPU_METADATA", little=False)  # MessagePack is big-endian
    root = _node(v, 0, 0)
    if root.end != len(desc):
        raise FormatError("bytes after the MessagePack document", fmt=_FMT, offset=root.end)
    return root


def encode_uint(value: int, min_width: int = 1) -> bytes:
    """``value`` as a MessagePack unsigned integer at least ``min_width`` bytes long (1, 2, 3, 5, 9)."""
    if value < 0:
        raise ValueError("negative")
    for width, top, prefix in _UINT_WIDTHS:
        if width >= min_width and value <= top:
            return prefix + value.to_bytes(width - len(prefix), "big") if prefix else bytes([value])
    raise ValueError("too large")


def encode_key(key: str) -> bytes:
    raw = key.encode("utf-8")
    if len(raw) <= 31:
        return bytes([0xA0 | len(raw)]) + raw
    return b"\xd9" + bytes([len(raw)]) + raw


def splice(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    """``data`` with each ``[off, end)`` replaced by new bytes (edits must not overlap)."""
    out = bytearray()
    pos = 0
    for off, end, new in sorted(edits, key=lambda e: (e[0], e[1])):
        if off < pos:
            raise ValueError("overlapping edits")
        out += data[pos:off] + new
        pos = end
    return bytes(out + data[pos:])


def remove_elements(doc: bytes, array: MsgpackValue, drop: set[int]) -> bytes:
    """``doc`` without the elements numbered ``drop`` of ``array`` (an array node of ``doc``): their
    bytes are cut and the array's count rewritten in its header's own width (a fixarray stays one)."""
    if array.kind != "array":
        raise ValueError("not an array")
    if not drop:
        return doc
    left = len(array.elements) - len(drop & set(range(len(array.elements))))
    hdr = doc[array.off]
    if 0x90 <= hdr <= 0x9F:
        header = bytes([0x90 | left])
    elif hdr == 0xDC:
        header = b"\xdc" + left.to_bytes(2, "big")
    else:
        header = b"\xdd" + left.to_bytes(4, "big")
    first = array.elements[0].off if array.elements else array.end
    edits = [(array.off, first, header)]
    edits += [(e.off, e.end, b"") for i, e in enumerate(array.elements) if i in drop]
    return splice(doc, edits)
