"""devbin's zip writer (:mod:`devbin.formats.zipwrite`): the members it makes have the bytes zipfile gave
them (up to CHUNK bytes; larger ones deflated in chunks on threads, the same bytes on any number), the
members it copies keep their compressed bytes, zip64 records where zipfile puts them."""

from __future__ import annotations

import io
import itertools
import random
import zipfile
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devbin.errors import FormatError, TruncatedError
from devbin.formats import zipmember, zipwrite

DATE = (2024, 1, 2, 3, 4, 6)


def _text(n: int, seed: int = 0) -> bytes:
    """Words in a random order: deflate levels 1 and 6 give different bytes."""
    rng = random.Random(seed)
    words = [bytes(rng.choices(b"abcdefghij", k=rng.randrange(2, 9))) for _ in range(300)]
    return b" ".join(rng.choices(words, k=n // 5))[:n]


def _members() -> list[tuple[zipfile.ZipInfo, bytes]]:
    """Fresh descriptions (zipfile changes those it writes): every method, a folder, a name not in ASCII,
    a comment, attributes left 0 (zipfile makes them rw-------)."""
    out = []
    for name, method, data, attr in [("pkg/", zipfile.ZIP_STORED, b"", 0o40755 << 16 | 0x10),
                                     ("pkg/a.txt", zipfile.ZIP_DEFLATED, _text(5000), 0o644 << 16),
                                     ("pkg/stored.bin", zipfile.ZIP_STORED, bytes(range(256)) * 8, 0o755 << 16),
                                     ("pkg/dätä.txt", zipfile.ZIP_DEFLATED, _text(3000, 1), 0),
                                     ("pkg/empty", zipfile.ZIP_DEFLATED, b"", 0o644 << 16),
                                     ("pkg/b.bz2", zipfile.ZIP_BZIP2, _text(2000, 2), 0o644 << 16),
                                     ("pkg/c.xz", zipfile.ZIP_LZMA, _text(2000, 3), 0o644 << 16)]:
        info = zipfile.ZipInfo(name, date_time=DATE)
        info.compress_type = method
        info.external_attr = attr
        info.create_system = 0 if name.endswith("bin") else 3
        info.comment = b"a comment" if name.endswith("a.txt") else b""
        out.append((info, data))
    return out


def _by_zipfile(members: list[tuple[zipfile.ZipInfo, bytes]], level: int | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for info, data in members:
            z.writestr(info, data, compresslevel=level)
    return buf.getvalue()


@pytest.fixture(params=[False, True], ids=["small", "zip64"])
def zip64(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """With zip64: both writers' 4-byte limit lowered to 1000 bytes, so that sizes, offsets and the central
    directory all pass it (the records a wheel over 2 GiB has, without writing 2 GiB)."""
    if request.param:
        monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1000)
        monkeypatch.setattr(zipwrite, "ZIP64_LIMIT", 1000)
    return bool(request.param)


def test_added_members_are_what_zipfile_writes(zip64: bool) -> None:
    buf = io.BytesIO()
    zw = zipwrite.ZipWriter(buf)
    for info, data in _members():
        zw.add(info, data)
    zw.close()
    assert buf.getvalue() == _by_zipfile(_members())
    assert (b"PK\x06\x06" in buf.getvalue()) == zip64
    with zipfile.ZipFile(buf) as z:
        assert z.testzip() is None
        assert [(i.filename, z.read(i)) for i in z.infolist()] == [(i.filename, d) for i, d in _members()]


def test_members_streamed_in_pieces_are_what_zipfile_writes(zip64: bool) -> None:
    """add_pieces (a pruned library read back from its temporary file a piece at a time) gives the bytes add
    and zipfile give, whatever the pieces' sizes; pieces that do not hold the size given are refused."""
    buf = io.BytesIO()
    zw = zipwrite.ZipWriter(buf)
    for info, data in _members():
        cuts = [0, *sorted(random.Random(len(data)).sample(range(len(data) + 1), min(len(data), 5))), len(data)]
        zw.add_pieces(info, (data[a:b] for a, b in itertools.pairwise(cuts)), len(data))
    zw.close()
    assert buf.getvalue() == _by_zipfile(_members())
    info, data = _members()[1]
    with pytest.raises(FormatError, match="bytes given for a member of"):
        zipwrite.ZipWriter(io.BytesIO()).add_pieces(info, [data[:-1]], len(data))


def test_copied_members_keep_their_compressed_bytes(zip64: bool, tmp_path: Path) -> None:
    """Members deflated at level 1 (zipfile's writestr would deflate them at 6, other bytes) are copied as
    they are: the copy of a whole zip that zipfile wrote is that zip, byte for byte."""
    src = tmp_path / "in.zip"
    src.write_bytes(_by_zipfile(_members(), level=1))
    assert src.read_bytes() != _by_zipfile(_members())  # the test means something: level 1 is not 6
    buf = io.BytesIO()
    zw = zipwrite.ZipWriter(buf)
    with zipfile.ZipFile(src) as z, src.open("rb") as f:
        for info in z.infolist():
            zw.copy(info, f, str(src))
        zw.close()
    assert buf.getvalue() == src.read_bytes()
    with zipfile.ZipFile(buf) as z:
        assert z.testzip() is None


def test_copy_of_a_cut_zip_is_an_error(tmp_path: Path) -> None:
    whole = _by_zipfile(_members())
    with zipfile.ZipFile(io.BytesIO(whole)) as z:
        info = z.getinfo("pkg/a.txt")
    start, length = zipmember.data_span(whole, info)
    cut = tmp_path / "cut.zip"
    cut.write_bytes(whole[:start + length // 2])
    zw = zipwrite.ZipWriter(io.BytesIO())
    with cut.open("rb") as f, pytest.raises(TruncatedError, match="run past the end"):
        zw.copy(info, f, str(cut))


class _Stream(io.RawIOBase):
    """A file zipfile cannot seek in: it writes each member's sizes in a data descriptor after its bytes."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        return self.buf.write(data)


def test_copy_of_members_with_data_descriptors(tmp_path: Path) -> None:
    """A member whose local header leaves the sizes 0 (flag bit 3, a data descriptor after its bytes) is
    copied with its sizes in the local header and no descriptor: what zipfile writes to a seekable file."""
    stream = _Stream()
    with zipfile.ZipFile(stream, "w") as z:
        for info, data in _members():
            z.writestr(info, data)
    src = tmp_path / "streamed.zip"
    src.write_bytes(stream.buf.getvalue())
    buf = io.BytesIO()
    zw = zipwrite.ZipWriter(buf)
    with zipfile.ZipFile(src) as z, src.open("rb") as f:
        assert all(i.flag_bits & 0x8 for i in z.infolist())
        for info in z.infolist():
            zw.copy(info, f, str(src))
    zw.close()
    assert buf.getvalue() == _by_zipfile(_members())


def _inflated(data: bytes) -> bytes:
    d = zlib.decompressobj(-15)
    out = d.decompress(data) + d.flush()
    assert d.eof and not d.unused_data  # one stream, ended by its final block
    return out


@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 5 * 3000 + 17), seed=st.integers(0, 3), threads=st.integers(2, 5))
def test_chunked_deflate_is_the_same_on_any_number_of_threads(size: int, seed: int, threads: int) -> None:
    """deflate_chunks (a member over CHUNK bytes, here 3000 so that back-references cross chunks): one raw
    deflate stream of the input, the same bytes on 1 thread as on several, each chunk's output a sync-flushed
    piece (not final) but the last."""
    data = (_text(size, seed) if seed % 2 else random.Random(seed).randbytes(size // 3) * 3)[:size]
    chunks = [data[at:at + 3000] for at in range(0, len(data), 3000)] or [b""]
    one = list(zipwrite.deflate_chunks(chunks, 1))
    many = list(zipwrite.deflate_chunks(chunks, threads))
    assert one == many
    assert [c for c, _ in one] == chunks
    stream = b"".join(out for _, out in one)
    assert _inflated(stream) == data
    for _, out in one[:-1]:
        assert out.endswith(b"\x00\x00\xff\xff")  # the sync flush's empty stored block (RFC 1951 3.2.4)


@pytest.mark.parametrize("size", [3000, 3001, 9000, 9001, 20000])
def test_members_over_a_chunk_are_deflated_in_chunks(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A member of more than CHUNK bytes (3000 here): the same zip on 1 and 4 threads, read back by zipfile
    (CRC-32 checked) as the bytes given; up to CHUNK bytes, still zipfile's bytes; over it, the chunks'
    dictionaries make the member smaller than chunks deflated alone would be."""
    monkeypatch.setattr(zipwrite, "CHUNK", 3000)
    data = _text(size, 7)
    info = zipfile.ZipInfo("lib/libx.so", date_time=DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    made = []
    for threads in (1, 4):
        buf = io.BytesIO()
        zw = zipwrite.ZipWriter(buf, threads=threads)
        zw.add_pieces(info, (data[at:at + 700] for at in range(0, size, 700)), size)
        zw.close()
        made.append(buf.getvalue())
    assert made[0] == made[1]
    with zipfile.ZipFile(io.BytesIO(made[0])) as z:
        assert z.testzip() is None
        assert z.read("lib/libx.so") == data
        compressed = z.getinfo("lib/libx.so").compress_size
    if size <= 3000:
        assert made[0] == _by_zipfile([(info, data)])
    elif size % 3000 == 0 or size > 3000 * 5:  # no one-byte last chunk, whose flush costs more than it saves
        alone = sum(len(zlib.compress(data[at:at + 3000], 6, -15)) for at in range(0, size, 3000))
        assert compressed < alone


def test_a_member_over_the_real_chunk_size() -> None:
    """With the real CHUNK (4 MiB): a 9 MiB member (three chunks) read back whole, the same on 1 and 3 threads."""
    data = _text(9 << 20, 5)
    info = zipfile.ZipInfo("big.so", date_time=DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    made = []
    for threads in (1, 3):
        buf = io.BytesIO()
        zw = zipwrite.ZipWriter(buf, threads=threads)
        zw.add(info, data)
        zw.close()
        made.append(buf.getvalue())
    assert made[0] == made[1]
    with zipfile.ZipFile(io.BytesIO(made[0])) as z:
        assert z.read("big.so") == data


@pytest.mark.parametrize("size", [0, 2999, 3000, 3001, 12345])
def test_deflated_size_is_what_the_writer_writes(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """deflated_size (what size --keep predicts of a pruned library in a wheel) is the compressed size of the
    member the writer makes, on either side of CHUNK (3000 here)."""
    monkeypatch.setattr(zipwrite, "CHUNK", 3000)
    data = _text(size, 9)
    info = zipfile.ZipInfo("lib/libx.so", date_time=DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    buf = io.BytesIO()
    zw = zipwrite.ZipWriter(buf, threads=2)
    zw.add(info, data)
    zw.close()
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as z:
        assert zipwrite.deflated_size(data) == z.getinfo("lib/libx.so").compress_size
