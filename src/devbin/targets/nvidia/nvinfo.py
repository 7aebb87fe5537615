"""NVIDIA ``.nv.info`` / ``.nv.info.<function>`` / ``.nv.compat`` records.

Layout (as the public decoders read it: VivekPanyam/cudaparsers ``src/cubin.rs``,
redplait/denvdis ``test/nvd.cc``; checked against nvcc 13.0 output): records packed back to
back to ``sh_size``, each starting with ``u8 fmt, u8 attr`` then

* ``EIFMT_NVAL`` (1): ``u16 0``, no payload (a flag);
* ``EIFMT_BVAL`` (2): the value in the next byte, then a zero byte;
* ``EIFMT_HVAL`` (3): a ``u16`` value;
* ``EIFMT_SVAL`` (4): a ``u16`` payload length, then that many bytes.

Records are not padded in the format itself, but every payload seen is a
multiple of 4, which keeps them 4-byte aligned.  Unknown codes and formats
are kept: an unknown ``fmt`` cannot be sized, so the rest of the section is
kept as one opaque record (never an error, never dropped).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from devbin.binary import ByteView
from devbin.binary.native import load_native
from devbin.targets.nvidia import eiattr as E


@dataclass(frozen=True, slots=True)
class NvInfoRecord:
    offset: int  # of the record in its section
    fmt: int
    attr: int
    value: int | None  # BVAL/HVAL value
    payload: bytes  # SVAL payload (or, for an unsizeable record, every byte from here to the end)

    @property
    def name(self) -> str:
        return E.eiattr_name(self.attr)

    @property
    def raw_size(self) -> int:
        return 4 + (len(self.payload) if self.fmt == E.EIFMT_SVAL else 0)

    def words(self, view_where: str = "") -> list[int]:
        """The payload as little-endian u32 words (a trailing partial word is ignored)."""
        n = len(self.payload) // 4
        return list(struct.unpack_from(f"<{n}I", self.payload)) if n else []

    def to_dict(self) -> dict[str, object]:
        return {"offset": self.offset, "fmt": self.fmt, "fmt_name": E.EIFMT_NAMES.get(self.fmt, f"{self.fmt:#x}"),
                "attr": self.attr, "name": self.name, "value": self.value, "payload": self.payload.hex()}


RecordTuple = tuple[int, int, int, int | None, bytes]


def records_py(buf: bytes | bytearray | memoryview) -> list[RecordTuple] | None:
    """Every record of a section (``buf``) as ``(offset, fmt, attr, value, payload)``, the fields of
    :class:`NvInfoRecord`; None when :func:`parse_nvinfo` has an error to report (an ``EIFMT_SVAL``
    payload past the end)."""
    data = bytes(buf)
    out: list[RecordTuple] = []
    end = len(data)
    at = 0
    while at < end:
        if end - at < 4:
            out.append((at, -1, -1, None, data[at:]))
            break
        fmt, attr, half = _HEAD.unpack_from(data, at)
        if fmt == E.EIFMT_SVAL:
            if half > end - at - 4:
                return None
            out.append((at, fmt, attr, None, data[at + 4:at + 4 + half]))
            at += 4 + half
        elif fmt == E.EIFMT_NVAL or fmt == E.EIFMT_HVAL:
            out.append((at, fmt, attr, half if fmt == E.EIFMT_HVAL else None, b""))
            at += 4
        elif fmt == E.EIFMT_BVAL:
            out.append((at, fmt, attr, half & 0xFF, b""))
            at += 4
        else:
            out.append((at, fmt, attr, None, data[at:]))
            break
    return out


def parse_nvinfo(view: ByteView) -> list[NvInfoRecord]:
    """All records of one section; never fails on unknown codes or formats (an ``EIFMT_SVAL`` payload
    running past the end is a TruncatedError)."""
    got = records(view.bytes_at(0, len(view)))
    if got is None:
        return _parse_nvinfo_checked(view)
    return [NvInfoRecord(*t) for t in got]


def _parse_nvinfo_checked(view: ByteView) -> list[NvInfoRecord]:
    """:func:`parse_nvinfo` read one bounds-checked field at a time: where the fast pass finds a problem,
    this one reports it."""
    out: list[NvInfoRecord] = []
    end = len(view)
    at = 0
    while at < end:
        if end - at < 4:
            out.append(NvInfoRecord(at, -1, -1, None, bytes(view.bytes_at(at, end - at))))
            break
        fmt, attr, half = view.unpack("BBH", at)  # one read per record: this runs for every cubin
        if fmt == E.EIFMT_SVAL:
            out.append(NvInfoRecord(at, fmt, attr, None, bytes(view.bytes_at(at + 4, half, "EIATTR payload"))))
            at += 4 + half
        elif fmt in (E.EIFMT_NVAL, E.EIFMT_HVAL):
            out.append(NvInfoRecord(at, fmt, attr, half if fmt == E.EIFMT_HVAL else None, b""))
            at += 4
        elif fmt == E.EIFMT_BVAL:
            out.append(NvInfoRecord(at, fmt, attr, half & 0xFF, b""))
            at += 4
        else:
            out.append(NvInfoRecord(at, fmt, attr, None, bytes(view.bytes_at(at, end - at))))
            break
    return out


_HEAD = struct.Struct("<BBH")
_TWO_WORDS = struct.Struct("<II")
_KPARAM = struct.Struct("<IHHI")
_KPARAM_INFO_V2 = E.CODES["KPARAM_INFO_V2"]
_INDEXED = tuple(sorted(E.INDEXED))


def indexed_records_py(buf: bytes | bytearray | memoryview,
                       attrs: tuple[int, ...]) -> list[tuple[int, int, int]] | None:
    """``(attr, first word, second word)`` of each record of a section (``buf``) whose attribute is in
    ``attrs`` and whose payload (as :func:`parse_nvinfo` keeps it) has two words or more, in order;
    None when :func:`parse_nvinfo` would fail (an ``EIFMT_SVAL`` payload past the end)."""
    out = []
    end = len(buf)
    at = 0
    while end - at >= 4:
        fmt, attr, half = _HEAD.unpack_from(buf, at)
        if fmt == E.EIFMT_SVAL:
            if half > end - at - 4:
                return None
            if half >= 8 and attr in attrs:
                out.append((attr, *_TWO_WORDS.unpack_from(buf, at + 4)))
            at += 4 + half
        elif fmt in (E.EIFMT_NVAL, E.EIFMT_HVAL, E.EIFMT_BVAL):
            at += 4
        else:  # unsizeable: the rest of the section is one record, its payload from its own header on
            if end - at >= 8 and attr in attrs:
                out.append((attr, *_TWO_WORDS.unpack_from(buf, at)))
            break
    return out


_native = load_native("devbin.binary._cdecode")
indexed_records: Callable[[bytes | bytearray | memoryview, tuple[int, ...]], list[tuple[int, int, int]] | None] = (
    _native.nvinfo_indexed if _native is not None else indexed_records_py)
records: Callable[[bytes | bytearray | memoryview], list[RecordTuple] | None] = (
    _native.nvinfo_records if _native is not None else records_py)


def stack_records(view: ByteView) -> list[tuple[int, int, int]]:
    """``(attr, symbol index, value)`` of the section's ``EIATTR_REGCOUNT``, ``FRAME_SIZE``,
    ``MIN_STACK_SIZE`` and ``MAX_STACK_SIZE`` records, in order, without making a record for each: what
    ``[r.attr, *r.words()[:2]]`` gives over :func:`parse_nvinfo`'s records of those attributes with 8
    payload bytes or more (and its error where it fails)."""
    got = indexed_records(view.bytes_at(0, len(view)), _INDEXED)
    if got is None:
        parse_nvinfo(view)  # raises the error the section has
        raise AssertionError("indexed_records and parse_nvinfo disagree")  # pragma: no cover
    return got


@dataclass(frozen=True, slots=True)
class KParam:
    """One kernel parameter from ``KPARAM_INFO`` (0x17) or ``KPARAM_INFO_V2`` (0x45)."""

    ordinal: int
    offset: int
    size: int
    log2_align: int
    space: int
    cbank: int
    in_cbank: bool


def decode_kparam(rec: NvInfoRecord) -> KParam | None:
    """``KPARAM_INFO``: u32 index, u16 ordinal, u16 offset, u32 packed (bits 0-7 log2 align, 8-11 space,
    12-16 cbank, bit 17 *not* in a cbank, bits 18-31 size).  ``KPARAM_INFO_V2``: u32 index, u16 ordinal,
    u16 offset, u16 size, u16 attributes."""
    if len(rec.payload) < 12:
        return None
    _, ordinal, offset, packed = _KPARAM.unpack_from(rec.payload)
    if rec.attr == _KPARAM_INFO_V2:
        return KParam(ordinal, offset, packed & 0xFFFF, 0, 0, 0, True)  # u16 size, u16 attributes
    return KParam(ordinal, offset, packed >> 18, packed & 0xFF, (packed >> 8) & 0xF, (packed >> 12) & 0x1F,
                  not packed & (1 << 17))
