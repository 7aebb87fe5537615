"""The byte reader: bounds, counts and LEB128, including hostile values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devbin.binary import ByteView, sleb, uleb
from devbin.errors import FormatError, TruncatedError


def test_reads_in_bounds_and_little_big_endian() -> None:
    v = ByteView(b"\x01\x02\x03\x04\x05\x06\x07\x08")
    assert v.u16(0) == 0x0201
    assert v.with_order(False).u16(0) == 0x0102
    assert v.u64(0) == 0x0807060504030201
    assert bytes(v.bytes_at(6, 2)) == b"\x07\x08"
    assert bytes(v.bytes_at(8, 0)) == b""


@pytest.mark.parametrize("off,size", [(7, 2), (8, 1), (-1, 1), (0, -1), (2**63, 1), (1, 2**64)])
def test_out_of_bounds_is_truncated_error(off: int, size: int) -> None:
    v = ByteView(bytes(8), fmt="t", where="here")
    with pytest.raises(TruncatedError) as e:
        v.bytes_at(off, size)
    assert "t: here:" in str(e.value)


def test_sub_view_reports_absolute_offsets() -> None:
    v = ByteView(bytes(32), fmt="t").sub(16, 8, where="member")
    with pytest.raises(TruncatedError) as e:
        v.u32(6)
    assert e.value.offset == 16 + 6
    assert "member" in str(e.value)


def test_count_cap_rejects_lying_counts() -> None:
    v = ByteView(bytes(16))
    with pytest.raises(FormatError):
        v.check_count(10**12, 8, 0)
    with pytest.raises(FormatError):
        list(v.iter_unpack("I", 0, 5))
    assert list(v.iter_unpack("I", 0, 4)) == [(0,)] * 4
    c = ByteView(uleb(10**9) + bytes(4)).cursor()
    with pytest.raises(FormatError):
        c.count(1)


def test_cstr_requires_terminator_and_never_raises_on_bad_utf8() -> None:
    v = ByteView(b"ab\0\xff\xfe\0cd")
    assert v.cstr(0) == "ab"
    assert v.cstr(3) == "\\xff\\xfe"
    with pytest.raises(TruncatedError):
        v.cstr(6)
    with pytest.raises(FormatError):
        v.cstr(100)


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_uleb_round_trip(n: int) -> None:
    c = ByteView(uleb(n)).cursor()
    assert c.uleb() == n and c.at_end()


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_sleb_round_trip(n: int) -> None:
    c = ByteView(sleb(n)).cursor()
    assert c.sleb() == n and c.at_end()


@given(st.binary(max_size=16))
def test_leb_on_arbitrary_bytes_only_raises_format_errors(data: bytes) -> None:
    """A LEB128 is read when a byte without the top bit ends it within 10 bytes, its value being that of
    the bytes before; otherwise a FormatError at the LEB's offset (TruncatedError when the bytes end)."""
    end = next((i for i, b in enumerate(data) if not b & 0x80), None)
    for method in ("uleb", "sleb"):
        buf = bytearray(data)
        c = ByteView(buf).cursor()
        try:
            value = getattr(c, method)()
        except FormatError as e:
            assert e.offset == 0 or isinstance(e, TruncatedError), e
            assert end is None or end >= 9, (e, end)
            if end is None:
                assert isinstance(e, TruncatedError), e
        else:
            assert end is not None and c.pos == end + 1, (end, c.pos)
            raw = sum((b & 0x7F) << (7 * i) for i, b in enumerate(data[:end + 1]))
            if method == "sleb" and data[end] & 0x40:
                raw -= 1 << (7 * (end + 1))
            assert value == raw, (method, value, raw)
        assert bytes(buf) == data


def test_overlong_leb_rejected() -> None:
    with pytest.raises(FormatError):
        ByteView(b"\x80" * 11 + b"\x00").cursor().uleb()
    with pytest.raises(FormatError):
        ByteView(b"\xff" * 9 + b"\x7f").cursor().uleb()  # 70 bits


def test_span_index_finds_the_nearest_holding_span() -> None:
    from devbin.binary.spans import SpanIndex

    idx = SpanIndex([(0, 16, "a"), (16, 32, "b"), (16, 17, "alias"), (40, 41, "z"), (64, 64 + 8, "c")])
    assert idx.at(3) == (0, 16, "a")
    assert [v for _, _, v in idx.containing(16)] == ["alias", "b"]  # equal starts: the later one first
    assert idx.at(20) == (16, 32, "b")
    assert idx.at(35) is None and idx.at(-1) is None and idx.at(100) is None
    assert SpanIndex([]).at(0) is None
