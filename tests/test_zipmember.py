"""Zip members inflated with libdeflate (devbin.formats.zipmember) against zipfile's reading of them,
and what a scan makes of members that are cut, corrupt or lie about their size."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import devbin.samples
from devbin.binary import budget, mapped
from devbin.errors import DeviceBinaryError, FormatError, TruncatedError
from devbin.formats import zipmember
from devbin.images.scan import scan, scan_bytes
from devbin.images.scanreport import ScanReport

from tests.elfbuild import small_elf

FATBIN_HEAD = b"\x50\xed\x55\xba\x01\x00\x10\x00"  # a fatbin header's first bytes: a member worth reading


def _zip(members: list[tuple[str, bytes]], *, method: int = zipfile.ZIP_DEFLATED, level: int | None = None,
         extra: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = method
            info.extra = extra
            z.writestr(info, data, compresslevel=level)
    return buf.getvalue()


def _info(archive: bytes, name: str) -> zipfile.ZipInfo:
    return zipfile.ZipFile(io.BytesIO(archive)).getinfo(name)


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=20000) | st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=64),
                                                     st.integers(1, 3000)),
       level=st.sampled_from([0, 1, 6, 9]), extra=st.sampled_from([b"", b"\xfe\xca\x04\x00abcd"]))
def test_inflate_equals_zipfile(data: bytes, level: int, extra: bytes) -> None:
    archive = _zip([("a/x.bin", b"first"), ("b/y.bin", data)], level=level, extra=extra)
    info = _info(archive, "b/y.bin")
    assert zipmember.inflatable(info)
    assert zipmember.inflate(archive, info) == zipfile.ZipFile(io.BytesIO(archive)).read("b/y.bin")
    start, length = zipmember.data_span(archive, info)
    assert (start, length) == (info.header_offset + 30 + len("b/y.bin") + len(extra), info.compress_size)


def test_only_deflated_unencrypted_members_are_inflatable() -> None:
    for method, want in ((zipfile.ZIP_DEFLATED, True), (zipfile.ZIP_STORED, False), (zipfile.ZIP_BZIP2, False),
                         (zipfile.ZIP_LZMA, False)):
        assert zipmember.inflatable(_info(_zip([("m", b"x" * 100)], method=method), "m")) is want
    info = _info(_zip([("m", b"x" * 100)]), "m")
    info.flag_bits |= 0x1
    assert not zipmember.inflatable(info)


def test_local_header_checked() -> None:
    archive = _zip([("m", b"x" * 1000)])
    info = _info(archive, "m")
    bad = bytearray(archive)
    bad[info.header_offset] ^= 0xFF
    with pytest.raises(FormatError, match="no local header at 0"):
        zipmember.inflate(bytes(bad), info)
    with pytest.raises(TruncatedError, match="past the end of the archive"):
        zipmember.data_span(archive[:20], info)
    with pytest.raises(TruncatedError, match="run past the end of the archive"):
        zipmember.data_span(archive[:info.header_offset + 30 + 1 + info.compress_size - 1], info)
    # The name and extra-field lengths of the local header, not the central directory's, place the data.
    longer = bytearray(archive)
    struct.pack_into("<H", longer, info.header_offset + 28, 4)
    with pytest.raises(FormatError):
        zipmember.inflate(bytes(longer), info)


def test_corrupt_crc_size_and_stream_are_errors() -> None:
    data = bytes(range(256)) * 400
    archive = _zip([("m", data)])
    info = _info(archive, "m")
    start, length = zipmember.data_span(archive, info)
    info.CRC ^= 1
    with pytest.raises(FormatError, match=r"bad CRC-32 [0-9a-f]{8} \(recorded [0-9a-f]{8}\)"):
        zipmember.inflate(archive, info)
    info = _info(archive, "m")
    info.file_size -= 1  # a member that inflates to more than it says: stopped when the buffer is full
    with pytest.raises(FormatError, match="more than the recorded 102399 bytes"):
        zipmember.inflate(archive, info)
    info = _info(archive, "m")
    info.file_size += 10
    with pytest.raises(FormatError, match="inflates to 102400 bytes, not the recorded 102410"):
        zipmember.inflate(archive, info)
    broken = bytearray(archive)
    broken[start + length // 2:start + length // 2 + 16] = b"\xff" * 16
    with pytest.raises(DeviceBinaryError):
        zipmember.inflate(bytes(broken), _info(archive, "m"))


def _patched_size(archive: bytes, name: str, size: int) -> bytes:
    """``archive`` with the member's uncompressed size in the central directory set to ``size``."""
    out = bytearray(archive)
    cd = archive.find(b"PK\x01\x02")
    while cd >= 0:
        name_len = struct.unpack_from("<H", archive, cd + 28)[0]
        if archive[cd + 46:cd + 46 + name_len] == name.encode():
            struct.pack_into("<I", out, cd + 24, size)
            return bytes(out)
        cd = archive.find(b"PK\x01\x02", cd + 4)
    raise AssertionError(f"no member {name}")


def test_a_scan_reports_a_bad_member_and_reads_the_others(tmp_path: Path) -> None:
    """A member whose CRC is wrong, and one that inflates to 64 MiB but says 1 MiB (a bomb): each one
    warning naming it, the scan goes on, and the bomb costs no more than the size it records."""
    good = small_elf(elfclass=2, little=True)
    archive = _zip([("a/bad.fatbin", FATBIN_HEAD + bytes(1 << 20)), ("b/bomb.fatbin", FATBIN_HEAD + bytes(64 << 20)),
                    ("c/good.o", good)])
    info = _info(archive, "a/bad.fatbin")
    raw = bytearray(_patched_size(archive, "b/bomb.fatbin", 1 << 20))
    cd = raw.find(b"PK\x01\x02")  # a/bad.fatbin's central entry is the first: its CRC at 16
    struct.pack_into("<I", raw, cd + 16, info.CRC ^ 0xFFFF)
    path = tmp_path / "w.whl"
    path.write_bytes(bytes(raw))
    with budget.limit(8 << 20) as b:
        rep = ScanReport()
        found = list(scan([path], report=rep))
    assert b.peak == (1 << 20) + len(FATBIN_HEAD)  # the largest recorded size; the bomb asked 1 MiB
    assert rep.warnings == [f"{path}!a/bad.fatbin: cannot read zip member: bad CRC-32 {info.CRC:08x} (recorded "
                            f"{info.CRC ^ 0xFFFF:08x})",
                            f"{path}!b/bomb.fatbin: cannot read zip member: corrupt deflate data, or more than the "
                            "recorded 1048576 bytes once inflated"]
    assert found == list(scan_bytes(bytes(raw), str(path)))  # the same from memory


def test_every_compression_method_gives_the_same_images(tmp_path: Path) -> None:
    """Deflated members go through libdeflate, the others through zipfile: the same images either way."""
    samples = Path(devbin.samples.__file__).parent
    members = [(p.name, p.read_bytes()) for p in (samples / "sample_sm90.cubin", samples / "sample_gfx90a.o")]
    want = None
    for method in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        path = tmp_path / f"m{method}.zip"
        path.write_bytes(_zip(members, method=method))
        rep = ScanReport()
        got = [(f.path.removeprefix(str(path)), f.kind, f.arch, f.size) for f in scan([path], report=rep)]
        assert rep.warnings == []
        assert got == (want := want or got)
    assert want == [("!sample_sm90.cubin", "cubin", "sm_90", len(members[0][1])),
                    ("!sample_gfx90a.o", "amdgpu", "gfx90a", len(members[1][1]))]


def test_size_holds_one_inflated_member_at_a_time(tmp_path: Path) -> None:
    """devbin size digests an inflated member's bytes at once and lets them go, as its workers do (issue 24:
    keeping them to the end, up to a quarter of the budget, left a later image less room under --jobs 1
    than in a pool): one member charged at a time, and the twins still found."""
    from devbin.size.account import measure

    cubin = (Path(devbin.samples.__file__).parent / "sample_sm90.cubin").read_bytes()
    path = tmp_path / "twins.whl"
    path.write_bytes(_zip([("a/k.cubin", cubin), ("b/k.cubin", cubin)]))
    with budget.limit(1 << 20) as b:
        files = measure([path], jobs=1)
        assert b.in_use == 0
    assert b.peak == len(cubin)
    first, second = (i.digest for f in files for i in f.images)
    assert first == second != b""  # the twins found


def test_a_recorded_size_no_member_can_reach_costs_nothing(tmp_path: Path) -> None:
    """A stored member that says 1 GB and holds 64 bytes, and a deflated one that says more than 1032 times
    its deflated bytes: each is read for what it holds (or refused at once), never allocated at its
    recorded size (the fuzz_zip target's out-of-memory input: a 7 KB file that made 4 GB of zeros)."""
    import resource

    archive = _zip([("pkg/k.fatbin", FATBIN_HEAD + bytes(7000)), ("pkg/n.fatbin", FATBIN_HEAD + bytes(56))])
    stored = bytearray(_zip([("pkg/n.fatbin", FATBIN_HEAD + bytes(56))], method=zipfile.ZIP_STORED))
    lying = _patched_size(bytes(stored), "pkg/n.fatbin", 0x40000040)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rep = ScanReport()
    list(scan_bytes(lying, "lying.zip", report=rep))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB: under 64 MiB more
    info = _info(archive, "pkg/k.fatbin")
    info.file_size = info.compress_size * zipmember.MAX_RATIO + 65
    with pytest.raises(FormatError, match=r"records \d+ bytes once inflated, more than \d+ deflated bytes can hold"):
        zipmember.inflate(archive, info)
    info.file_size -= 1  # possible for deflate: libdeflate is asked, and the output is short
    with pytest.raises(FormatError, match=r"inflates to 7008 bytes, not the recorded \d+"):
        zipmember.inflate(archive, info)
    assert len(rep.warnings) == 0 and rep.members == 1  # the stored member: read for its 64 bytes


def test_a_member_with_an_empty_name_is_scanned() -> None:
    """zipfile's is_dir indexes a member's last character (IndexError on an empty name): devbin tells
    folder entries by the trailing slash, and the member is read like any other."""
    cubin = (Path(devbin.samples.__file__).parent / "sample_sm90.cubin").read_bytes()
    rep = ScanReport()
    found = list(scan_bytes(_zip([("", cubin), ("dir/", b"")]), "e.zip", report=rep))
    assert [(str(f.address), f.kind, f.arch) for f in found] == [("e.zip!", "cubin", "sm_90")]
    assert rep.warnings == [] and rep.members == 1


def test_the_budget_is_charged_what_a_member_can_hold() -> None:
    """A member is charged its recorded size or, when less, what its method can make of its compressed
    bytes: a stored member that says 4 GB and holds 64 bytes is no LimitExceeded under a 1 MiB budget
    (fuzz_zip's second input); one that really holds more than the budget still is."""
    from devbin.errors import LimitExceeded

    stored = _zip([("n.fatbin", FATBIN_HEAD + bytes(56))], method=zipfile.ZIP_STORED)
    lying = _patched_size(stored, "n.fatbin", 0xFFFFFF40)
    assert zipmember.most_bytes(_info(lying, "n.fatbin")) == 64
    deflated = _zip([("n.fatbin", FATBIN_HEAD + bytes(2 << 20))])
    info = _info(deflated, "n.fatbin")
    assert zipmember.most_bytes(info) == info.file_size  # 2 MiB from 2 KB: within deflate's 1032:1
    with budget.limit(1 << 20):
        rep = ScanReport()
        list(scan_bytes(lying, "lying.zip", report=rep))
        with pytest.raises(LimitExceeded, match="zip member needs 2097160 bytes once decoded"):
            list(scan_bytes(deflated, "big.zip"))


# --------------------------------------------------------------------------- members spilled to a mapped file


def _spy_spill(monkeypatch: pytest.MonkeyPatch, threshold: int) -> list[object]:
    """Members over ``threshold`` bytes spilled (the test-set threshold); what each spill returned, recorded."""
    made: list[object] = []
    spill = zipmember.spill

    def spy(*args: object, **kwargs: object) -> object:
        out = spill(*args, **kwargs)  # type: ignore[arg-type]
        made.append(type(out.data))
        return out

    monkeypatch.setattr(zipmember, "SPILL_BYTES", threshold)
    monkeypatch.setattr(zipmember, "spill", spy)
    return made


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED, zipfile.ZIP_LZMA])
def test_a_member_over_the_threshold_is_scanned_through_a_mapped_file(tmp_path: Path, method: int,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A member larger than SPILL_BYTES is inflated into a temporary file and memory-mapped (a Spilled map,
    never a bytes object in the heap), then scanned as a file is: the same images, bytes and reports
    (list --json, size --json) as from a member read into memory."""
    from tests.runners import cli_ok

    samples = Path(devbin.samples.__file__).parent
    big = (samples / "sample_gfx90a.o").read_bytes()
    small = (samples / "sample_sm90.cubin").read_bytes()
    assert len(big) > len(small)
    path = tmp_path / "pkg-1.0-py3-none-any.whl"
    path.write_bytes(_zip([("pkg/k.o", big), ("pkg/small.cubin", small), ("pkg/twin.o", big)], method=method))

    def images() -> list[tuple[str, str, str, bytes]]:
        rep = ScanReport()
        out = [(str(i.address), i.kind, i.arch, bytes(i.data())) for i in scan([path], report=rep)]
        assert rep.warnings == []
        return out

    def reports() -> tuple[str, str]:
        return cli_ok("list", "--json", path), cli_ok("size", "--json", "--jobs", "1", path)

    in_memory, in_memory_reports = images(), reports()
    made = _spy_spill(monkeypatch, len(small) + 1)  # the code objects over it, the cubin under it
    assert images() == in_memory
    assert made == [mapped.Spilled, mapped.Spilled]
    assert reports() == in_memory_reports
    assert len(made) == 6  # list and size each spilled both code objects again
    import gc

    gc.collect()  # a parsed image is a graph with cycles (the budget's units collect them likewise)
    assert not mapped._SPILLED  # every map let go


def test_a_spilled_member_is_checked_as_an_inflated_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the temporary file, a member that inflates to more than it records (a bomb: never written
    past its recorded size), one cut short, one with a bad CRC and one whose deflate data is corrupt are each
    one warning naming it (no traceback), and the other members are read."""
    good = (Path(devbin.samples.__file__).parent / "sample_sm90.cubin").read_bytes()
    bomb_data = FATBIN_HEAD + bytes(8 << 20)
    archive = _zip([("a/bomb.fatbin", bomb_data), ("b/crc.fatbin", FATBIN_HEAD + bytes(1 << 16)),
                    ("c/cut.fatbin", FATBIN_HEAD + bytes(range(256)) * 512), ("d/good.cubin", good)])
    raw = bytearray(_patched_size(archive, "a/bomb.fatbin", 1 << 16))
    crc = _info(archive, "b/crc.fatbin")
    cd = raw.find(b"PK\x01\x02", raw.find(b"PK\x01\x02") + 4)  # b/crc.fatbin's central entry: the second
    struct.pack_into("<I", raw, cd + 16, crc.CRC ^ 0xFFFF)
    cut = _info(archive, "c/cut.fatbin")
    start, length = zipmember.data_span(archive, cut)
    raw[start + length - 8:start + length] = bytes(8)  # the last block's bytes zeroed: corrupt or cut short
    path = tmp_path / "w.whl"
    path.write_bytes(bytes(raw))
    made = _spy_spill(monkeypatch, 1024)
    rep = ScanReport()
    found = [str(i.address) for i in scan([path], report=rep)]
    assert found == [f"{path}!d/good.cubin"]
    assert made == [mapped.Spilled]  # the good member; the others raised
    assert len(rep.warnings) == 3
    bomb, bad_crc, cut_short = rep.warnings
    assert bomb == f"{path}!a/bomb.fatbin: cannot read zip member: inflates to more than the recorded 65536 bytes"
    assert bad_crc == (f"{path}!b/crc.fatbin: cannot read zip member: bad CRC-32 {crc.CRC:08x} (recorded "
                       f"{crc.CRC ^ 0xFFFF:08x})")
    assert cut_short.startswith(f"{path}!c/cut.fatbin: cannot read zip member: ")
    assert "\n" not in "".join(rep.warnings)


def test_a_wheel_of_lying_members_is_one_line_each_from_the_command(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """devbin list on a wheel whose only device member lies about its size: one line on stderr for it (a
    warning: a zip is a folder of files, whose damaged ones a listing skips), no traceback, the same
    status and output above and below the threshold."""
    from tests.runners import cli_err

    archive = _zip([("a/bomb.fatbin", FATBIN_HEAD + bytes(4 << 20))])
    path = tmp_path / "w.whl"
    path.write_bytes(_patched_size(archive, "a/bomb.fatbin", 1 << 16))
    heap = cli_err("list", path)
    _spy_spill(monkeypatch, 1024)
    spilled = cli_err("list", path)
    for _status, _out, err in (heap, spilled):
        assert "Traceback" not in err
        lines = [line for line in err.splitlines() if "a/bomb.fatbin" in line]
        assert len(lines) == 1 and "cannot read zip member" in lines[0]
    assert heap[:2] == spilled[:2]


def test_the_last_spilled_member_is_given_again_not_inflated_again(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A second spill of the member spilled last (prune reads a wheel's library three times) gives its kept
    file, not a second inflate; the same member name in a rewritten archive, or another member, is inflated
    anew; the kept file is no live map (its pages are no one's)."""
    inflated: list[str] = []
    inflate_into = zipmember._inflate_into

    def spy(out: mapped.Mapped, zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> None:
        inflated.append(info.filename)
        inflate_into(out, zf, info, where)

    monkeypatch.setattr(zipmember, "_inflate_into", spy)
    monkeypatch.setattr(zipmember, "_LAST", [])
    first, second = bytes(range(256)) * 4096, bytes(reversed(range(256))) * 4096
    path = tmp_path / "w.whl"
    path.write_bytes(_zip([("a.so", first), ("b.so", second)]))

    def spilled(name: str) -> bytes:
        with zipfile.ZipFile(path) as zf:
            out = zipmember.spill(zf, zf.getinfo(name), name)
        try:
            return bytes(out.data)
        finally:
            out.close()

    assert spilled("a.so") == first and spilled("a.so") == first
    with zipfile.ZipFile(path) as zf:  # read in pieces, as the RECORD check does: from the kept file too
        monkeypatch.setattr(zf, "open", None)
        assert b"".join(zipmember.pieces(zf, zf.getinfo("a.so"))) == first
    assert inflated == ["a.so"]
    import gc

    gc.collect()
    assert not mapped._SPILLED  # the kept file is not mapped
    monkeypatch.setattr(zipmember, "KEEP_SPILLED", 1)
    assert spilled("b.so") == second and spilled("a.so") == first  # one kept: b.so put a.so's away
    assert inflated == ["a.so", "b.so", "a.so"]
    monkeypatch.setattr(zipmember, "KEEP_SPILLED", 2)
    assert spilled("b.so") == second and spilled("a.so") == first and spilled("b.so") == second
    assert inflated == ["a.so", "b.so", "a.so", "b.so"]
    path.write_bytes(_zip([("a.so", second)]))  # a new file of the same name: its member inflated again
    assert spilled("a.so") == second
    assert inflated == ["a.so", "b.so", "a.so", "b.so", "a.so"]
