"""The memory budget per command (issue 18, defect 7): decompression bombs give one clean line.

Measured on main before the budget (tests/bombs.py inputs, peak RSS): a 33 KB fatbin whose zstd
entry decodes to 1 GiB took 2.1 GB in inspect, extract and resources (two full copies); a
33 KB compressed bundle of 1 GiB took 2.1 GB in `list` and `select`; under a 2 GB (and an
800 MB) address-space limit each raised a MemoryError traceback.
"""

from __future__ import annotations

import gc
import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devbin.binary import budget, mapped
from devbin.errors import FormatError, LimitExceeded, UsageError
from devbin.formats.bundle import open_compressed_bundle, parse_compressed_bundle, write_compressed_bundle
from devbin.formats.fatbin import parse_fatbin

from tests.bombs import GIB, ccob_bomb, fatbin_bomb
from tests.runners import TOOL_TIMEOUT

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20

# Runs the console entry point in a child under an optional RLIMIT_AS (argv[1], bytes; 0: none).
# The child's peak RSS is read from its own /proc/self/status (VmHWM: the high-water mark of the
# address space exec gave it) and its pool workers' rusage: wait4's ru_maxrss would also count the
# pages of the pytest process the child was forked from (Linux keeps the pre-exec high-water mark),
# so a test would measure how much the suite had loaded before it.
_RUNNER = """
import resource, sys
limit = int(sys.argv[1])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["devbin", *sys.argv[2:]]
try:
    from devbin.cli.main import main
    code = main()
finally:
    with open("/proc/self/status") as f:
        own = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(".peak", "w") as f:
        f.write(str(max(own, workers) * 1024))
sys.exit(code)
"""


def _devbin(cwd: Path, *args: str, as_limit: int = 0) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr, peak RSS in bytes) of one devbin command in a child process."""
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    (cwd / ".peak").unlink(missing_ok=True)  # a child that dies before writing it fails the read below
    with open(cwd / ".stdout", "w+") as so, open(cwd / ".stderr", "w+") as se:
        p = subprocess.Popen([sys.executable, "-c", _RUNNER, str(as_limit), *args], cwd=cwd, stdout=so, stderr=se,
                             env=env)
        p.wait(timeout=TOOL_TIMEOUT)
        so.seek(0)
        se.seek(0)
        return p.returncode, so.read(), se.read(), int((cwd / ".peak").read_text())


def _one_error_line(stderr: str, *needles: str) -> None:
    assert "Traceback" not in stderr and "MemoryError" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("devbin: error: "), stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bombs")
    (d / "fb1.fatbin").write_bytes(fatbin_bomb(1, GIB))
    (d / "fb6.fatbin").write_bytes(fatbin_bomb(6, 256 * MIB))
    (d / "ccob.hipfb").write_bytes(ccob_bomb(GIB))
    assert (d / "fb1.fatbin").stat().st_size < 40_000 and (d / "ccob.hipfb").stat().st_size < 40_000
    return d


# --------------------------------------------------------------------------- the budget itself


def test_parse_and_format_sizes() -> None:
    assert [budget.parse_size(s) for s in ("2G", "512M", "64KiB", "1000", "1.5g", "3 TB")] == [
        2 * GIB, 512 * MIB, 64 << 10, 1000, 3 * GIB // 2, 3 << 40]
    for bad in ("", "G", "-1M", "2X", "1e9"):
        with pytest.raises(UsageError, match="not a size"):
            budget.parse_size(bad)
    assert budget.format_size(4 * GIB) == "4 GiB" and budget.format_size(1000) == "1000 bytes"


def test_buffers_are_charged_while_alive() -> None:
    with budget.limit(10 * MIB) as b:
        assert budget.current() is b
        first = b.allocate(6 * MIB, what="x")
        view = memoryview(first)[10:20]  # a view keeps the buffer, and its charge, alive
        with pytest.raises(LimitExceeded, match=r"x needs 5242880 bytes once decoded, over the memory budget of "
                                                r"10 MiB \(6291456 bytes in use"):
            b.allocate(5 * MIB, what="x")
        del first
        assert b.in_use == 6 * MIB
        view.release()
        del view
        gc.collect()
        assert b.in_use == 0
        b.allocate(5 * MIB)  # freed, so it fits now (and is freed again at once)
        assert b.in_use == 0 and b.peak == 6 * MIB
    assert budget.current() is not b


def test_a_refused_allocation_is_a_limit_error_not_memoryerror() -> None:
    with budget.limit(1 << 62) as b:
        with pytest.raises(LimitExceeded, match="the system has not that much memory free"):
            b.allocate(1 << 61)
        assert b.in_use == 0


def test_decoded_images_are_released_once_used() -> None:
    """Six 32 MiB entries decode one after another under a 40 MiB budget; held together they do not fit."""
    fb = parse_fatbin(fatbin_bomb(6, 32 * MIB))
    with budget.limit(40 * MIB) as b:
        for e in fb.entries:
            assert len(e.image_view()) == 32 * MIB
        assert b.peak == 32 * MIB
        held = [fb.entries[0].image_view()]
        with pytest.raises(LimitExceeded, match=r"fatbin\[1\] sm_90: zstd data needs 33554432 bytes"):
            held.append(fb.entries[1].image_view())


def test_garbage_is_collected_before_a_refusal() -> None:
    """A parsed image is a graph with cycles (an ELF file and its sections), which keeps its buffer charged
    until the cycle collector runs; a request collects them before it refuses (main: refused with the
    dead buffer's 6 MiB counted as in use)."""
    class Node:
        def __init__(self, buf: budget.Decoded) -> None:
            self.view = memoryview(buf)
            self.me = self

    gc.disable()
    try:
        with budget.limit(10 * MIB) as b:
            Node(b.allocate(6 * MIB))  # garbage at once, but only the collector can free it
            assert b.in_use == 6 * MIB
            b.allocate(6 * MIB)
            assert b.peak == 6 * MIB
    finally:
        gc.enable()


# --------------------------------------------------------------------------- lazy compressed bundles


def test_lazy_bundle_lists_without_decoding() -> None:
    data = ccob_bomb(GIB)
    with budget.limit(1 * MIB) as b:
        bundle = open_compressed_bundle(data)
        assert bundle.ids() == ["hipv4-amdgcn-amd-amdhsa--gfx90a"] and bundle.raw is None
        e = bundle.entries[0]
        assert e.size == GIB - 4096 and e.lazy
        assert bytes(e.head(4)) == b"\x7fELF"
        assert b.peak <= 64 << 10
        with pytest.raises(LimitExceeded, match="bundle entry needs 1073737728 bytes once decoded, over the memory "
                                                "budget of 1 MiB"):
            e.data  # noqa: B018
    with pytest.raises(FormatError, match="bomb"):
        open_compressed_bundle(data, max_size=GIB - 1)


@pytest.mark.parametrize("method", ["zstd", "zlib"])
def test_lazy_bundle_gives_what_the_eager_reader_gives(method: str) -> None:
    # 300 entries with long IDs: the table (about 46 KB) is longer than the first prefix read.
    entries = [(f"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+:id{i:04}" + "x" * 100, bytes([i % 251]) * (i * 37))
               for i in range(300)]
    data = write_compressed_bundle(entries, method=method, version=3)
    eager = parse_compressed_bundle(data)
    lazy = open_compressed_bundle(data)
    assert lazy.ids() == eager.ids() and lazy.size == eager.size
    for a, b in zip(eager.entries, lazy.entries, strict=True):
        assert (a.offset, a.size) == (b.offset, b.size)
        assert bytes(b.data) == bytes(a.data) and bytes(b.head(8)) == bytes(a.data[:8])


def test_lazy_bundle_checks_the_hash_before_giving_an_image() -> None:
    gfx = "hipv4-amdgcn-amd-amdhsa--gfx90a"
    data = bytearray(write_compressed_bundle([(gfx, b"\x7fELF" + bytes(5000))], version=3))
    data[24] ^= 1  # the truncated MD5
    with pytest.raises(FormatError, match="hash mismatch"):
        open_compressed_bundle(bytes(data))  # small: checked at open by a pass that holds nothing
    lazy = open_compressed_bundle(bytes(data), verify_limit=0)  # as a large one: checked when an image is read
    entry = lazy.entry(gfx)
    assert entry is not None and bytes(entry.head(4)) == b"\x7fELF"
    with pytest.raises(FormatError, match="hash mismatch"):
        entry.data  # noqa: B018
    unchecked = open_compressed_bundle(bytes(data), check_hash=False).entry(gfx)
    assert unchecked is not None and bytes(unchecked.data)[:4] == b"\x7fELF"


def test_lazy_bundle_that_is_shorter_than_recorded() -> None:
    good = write_compressed_bundle([("hipv4-amdgcn-amd-amdhsa--gfx90a", bytes(5000))], version=3)
    bad = bytearray(good)
    bad[16:24] = (int.from_bytes(good[16:24], "little") + 4096).to_bytes(8, "little")
    with pytest.raises(FormatError, match=r"decompresses to 0x.* bytes, not the recorded uncompressed size"):
        open_compressed_bundle(bytes(bad))
    lazy = open_compressed_bundle(bytes(bad), verify_limit=0)
    with pytest.raises(FormatError, match=r"decompresses to 0x.* bytes, not the recorded uncompressed size"):
        lazy.entries[-1].data  # noqa: B018


# --------------------------------------------------------------------------- the commands


@pytest.mark.parametrize("command", [["inspect", "fb1.fatbin"], ["extract", "fb1.fatbin", "-o", "out"],
                                     ["resources", "fb1.fatbin"], ["extract", "ccob.hipfb", "-o", "out"],
                                     ["inspect", "ccob.hipfb"]])
def test_over_the_budget_is_one_clean_line(bombs: Path, command: list[str]) -> None:
    rc, _, err, rss = _devbin(bombs, "--max-memory", "64M", *command)
    assert rc == 1
    _one_error_line(err, "needs", "once decoded, over the memory budget of 64 MiB")
    assert rss < 200 * MIB  # nothing was decoded
    assert not (bombs / "out").exists()
    rc2, _, err2, _ = _devbin(bombs, *command[:1], "--max-memory=64M", *command[1:])  # after the command too
    assert rc2 == 1 and err2 == err


@pytest.mark.parametrize("limit", [800 * MIB, 2000 * MIB])
@pytest.mark.parametrize("command", [["inspect", "fb1.fatbin"], ["extract", "fb1.fatbin", "-o", "out"],
                                     ["resources", "fb1.fatbin"], ["extract", "ccob.hipfb", "-o", "out"]])
def test_under_an_address_space_limit_no_memoryerror(bombs: Path, tmp_path: Path, command: list[str],
                                                     limit: int) -> None:
    """800 MB cannot hold the 1 GiB image: a clean error; 2000 MB can hold it once (main made two copies)."""
    for name in ("fb1.fatbin", "ccob.hipfb"):
        (tmp_path / name).symlink_to(bombs / name)
    rc, _, err, _ = _devbin(tmp_path, *command, as_limit=limit)
    assert "Traceback" not in err and "MemoryError" not in err, err
    if limit < GIB:
        assert rc == 1
        _one_error_line(err, "needs", "the system has not that much memory free")
    elif command[0] == "extract":
        assert rc == 0 and err == ""
        (written,) = (tmp_path / "out").iterdir()
        assert written.stat().st_size == (GIB if "fatbin" in command[1] else GIB - 4096)


def test_one_copy_and_one_image_at_a_time(bombs: Path) -> None:
    """resources/inspect/extract hold one decoded image at a time, in one copy: six 256 MiB entries
    peak at about one entry (main: 2.1 GB for one 1 GiB entry)."""
    for command in (["resources", "fb6.fatbin"], ["inspect", "fb6.fatbin"], ["extract", "fb6.fatbin", "-o", "out6"]):
        _, _, err, rss = _devbin(bombs, *command)
        assert "Traceback" not in err
        assert rss < 256 * MIB + 160 * MIB, (command, rss)
    rc, _, err, rss = _devbin(bombs, "resources", "fb1.fatbin")
    assert rc == 0 and "not an ELF file" in err  # decoded (one copy): the zeros are no ELF (a warning, on stderr)
    assert rss < GIB + 160 * MIB, rss


@pytest.fixture(scope="module")
def cubin_bombs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Bombs whose entries are real cubins (the committed sample, then zeros), which every command parses:
    a fatbin of six 100 MiB entries (the issue's 200 KB fatbin of six 1 GiB entries, scaled down), a
    folder of six one-entry ones, and a fatbin of four 64 MiB entries."""
    d = tmp_path_factory.mktemp("cubin_bombs")
    cubin = (ROOT / "tests" / "fixtures" / "sample_sm90.cubin").read_bytes()
    (d / "six.fatbin").write_bytes(fatbin_bomb(6, 100 * MIB, cubin))
    (d / "folder").mkdir()
    one = fatbin_bomb(1, 100 * MIB, cubin)
    for i in range(6):
        (d / "folder" / f"bomb{i}.fatbin").write_bytes(one)
    (d / "four.fatbin").write_bytes(fatbin_bomb(4, 64 * MIB, cubin))
    return d


@pytest.mark.parametrize("command", ["resources", "size", "list"])
@pytest.mark.parametrize("path", ["six.fatbin", "folder"])
def test_the_outcome_is_the_same_whatever_jobs(cubin_bombs: Path, command: str, path: str) -> None:
    """Issue 24, defect 7: the budget is the command's, across its processes, and each image is given back
    before the next: six 100 MiB images under 256 MiB give the same output and status with --jobs 1 and 2
    (main: `resources --jobs 1` failed, holding two images when the third came; --jobs 2 passed, each
    worker with a budget of its own)."""
    runs = [_devbin(cubin_bombs, "--max-memory", "256M", command, "--jobs", jobs, path) for jobs in ("1", "2")]
    for rc, _, err, _ in runs:
        assert rc == 0 and "memory budget" not in err, err
    assert runs[0][:3] == runs[1][:3]


@pytest.mark.parametrize("command", ["inspect", "resources", "size", "callgraph"])
def test_one_decoded_image_at_a_time(cubin_bombs: Path, command: str) -> None:
    """Four 64 MiB images under a 100 MiB budget: each is given back once its facts are taken (main held
    them until Python's cycle collector ran: the second one was refused)."""
    rc, out, err, _ = _devbin(cubin_bombs, "--max-memory", "100M", command, "four.fatbin")
    assert rc == 0 and err == "", err
    if command == "size":
        assert "device code 13,520 (100.0%) in 4 images" in out, out
    else:
        assert all(f"four.fatbin#0.{i}" in out for i in range(4)), out


@pytest.mark.parametrize("command", [["list", "ccob.hipfb"], ["select", "--device", "gfx90a", "ccob.hipfb"]])
def test_listing_a_compressed_bundle_decodes_its_table_only(bombs: Path, command: list[str]) -> None:
    rc, out, err, rss = _devbin(bombs, "--max-memory", "1M", *command)
    assert rc == 0 and all(line.startswith("note: ") for line in err.splitlines()), err
    assert "gfx90a" in out
    assert rss < 160 * MIB, rss  # the interpreter and devbin's modules; main: 2.1 GB


def test_a_zip_member_is_inflated_within_the_budget(tmp_path: Path) -> None:
    """A 256 MiB member (a fatbin header, then zeros) deflated into a wheel of about 250 KB."""
    import zipfile

    with zipfile.ZipFile(tmp_path / "bomb.whl", "w", compression=zipfile.ZIP_DEFLATED) as zf, \
            zf.open("pkg/lib/bomb.fatbin", "w", force_zip64=True) as fh:
        fh.write(b"\x50\xed\x55\xba\x01\x00\x10\x00")
        for _ in range(256):
            fh.write(bytes(MIB))
    assert (tmp_path / "bomb.whl").stat().st_size < 1 * MIB
    rc, _, err, rss = _devbin(tmp_path, "--max-memory", "64M", "list", "bomb.whl")
    assert rc == 1
    _one_error_line(err, "zip member needs 268435464 bytes once decoded, over the memory budget of 64 MiB")
    assert rss < 200 * MIB


def _rss_file_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


@pytest.mark.skipif(not os.path.exists("/proc/self/status") or not hasattr(mmap, "MADV_DONTNEED"),
                    reason="needs Linux's /proc and madvise")
def test_the_pages_of_a_spilled_map_are_given_back_after_a_unit_and_a_long_search() -> None:
    """A Spilled map (a wheel member in a temporary file) costs the pages a unit touched: at the end of a unit,
    and every DROP_BYTES a search passes, its resident pages are dropped (the bytes stay readable)."""

    from devbin.binary import ByteView

    size = mapped.DROP_BYTES + (8 << 20)
    spilled = mapped.Mapped()
    spilled.write(bytes(size - 4) + b"NEED")
    spilled.map().close()
    m = spilled.data
    assert isinstance(m, mapped.Spilled)
    try:
        base = _rss_file_kb()
        assert not any(m[i] for i in range(0, size, 4096))  # every page touched (zeros up to the last 4 bytes)
        assert _rss_file_kb() - base > (size >> 10) // 2
        with budget.current().unit():
            pass
        assert _rss_file_kb() - base < 4 << 10  # KiB: given back
        assert m[size - 4:] == b"NEED"  # and still readable
        assert ByteView(m).find(b"NEED") == size - 4  # a search through it: its pages dropped as it passes
        assert _rss_file_kb() - base < (mapped.DROP_BYTES >> 10) + (12 << 10)
    finally:
        m.close()


def test_a_pool_collects_all_generations_only_where_it_can_matter(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a pool an image's unit that keeps live bytes (a buffer a hashing thread holds) runs no full collection
    (it did after every image: minutes for `size` of a folder of wheels); the item's unit, one over
    COLLECT_BYTES, and one while another process waits for room do."""
    calls: list[int] = []
    real = gc.collect

    def counting(generation: int = 2) -> int:
        calls.append(generation)
        return real(generation)

    monkeypatch.setattr(gc, "collect", counting)
    b = budget.MemoryBudget(1 << 30)
    kept = []
    with budget.limit(b), b.share(2) as shared:
        with b.unit():  # an item
            for _ in range(50):
                with b.unit():  # an image: 1 KiB of it stays alive past the unit
                    kept.append(b.allocate(1024))
            assert calls.count(2) == 0 and calls.count(1) == 50
        assert calls.count(2) == 1  # the item's end: the worker may stay idle after it
        calls.clear()
        with b.unit():
            with b.unit():
                kept.append(b.allocate(budget.COLLECT_BYTES))
            assert calls.count(2) == 1  # kept bytes over COLLECT_BYTES
            calls.clear()
            shared._waiting[1] = 1  # another process waits for room
            with b.unit():
                kept.append(b.allocate(1024))
            assert calls.count(2) == 1
            shared._waiting[1] = 0
    calls.clear()
    with budget.limit(b), b.unit():  # one process: the outermost unit under COLLECT_BYTES runs none
        kept.append(b.allocate(1024))
    assert calls == [1]
