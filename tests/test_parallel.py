"""``--jobs``: files and images spread over processes (devbin.images.parallel), output as one process gives.

The helper alone (order, errors at their item's turn, warnings, the memory budget), then ``devbin
list``, ``resources`` and ``extract`` on a folder of built inputs (cubins from nvcc, fatbins compressed
with zstd and lz4, a shared library, archives, an AMDGPU object, a corrupt file): every output with
``--jobs 2`` byte for byte the same as with ``--jobs 1``, errors included.  The commands' thresholds
below which they stay in process are set to 0 here, so the pool runs even on these small inputs.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from devbin.binary import budget
from devbin.cli import extract_cmd, list_cmd
from devbin.errors import FormatError, FormatWarning, LimitExceeded
from devbin.images import parallel
from devbin.images.parallel import effective_jobs, ordered_map
from devbin.reports import resources as reports_resources
from devbin.samples import __file__ as samples_init

from tests.conftest import SOURCES, require_tool
from tests.runners import cli_err, run_tool

SAMPLES = Path(samples_init).parent
MIB = 1 << 20


# --------------------------------------------------------------------------- the helper


def _square_or_fail(x: int) -> int:
    if x == 29:
        raise FormatError("bad item", fmt="test", where=f"item {x}", offset=x)
    if x % 10 == 3:
        warnings.warn(FormatWarning(f"odd item {x}"), stacklevel=1)
    return x * x


def test_ordered_map_gives_the_order_of_one_process() -> None:
    items = list(range(100))
    assert list(ordered_map(lambda x: (x, os.getpid()), items, jobs=1)) == [(x, os.getpid()) for x in items]
    pooled = list(ordered_map(lambda x: (x, os.getpid()), items, jobs=2))
    assert [x for x, _ in pooled] == items
    # The first item in the caller (what fn imports is imported once, before the fork), the rest in 2 workers.
    assert pooled[0][1] == os.getpid() and os.getpid() not in {pid for _, pid in pooled[1:]}
    # at most 2 workers; how the items spread between them depends on the machine's load (one worker may
    # take them all before the other starts)
    assert 1 <= len({pid for _, pid in pooled[1:]}) <= 2


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_an_error_comes_at_its_turn_after_the_earlier_results(jobs: int) -> None:
    got: list[int] = []
    with warnings.catch_warnings(record=True) as caught, pytest.raises(FormatError) as err:
        warnings.simplefilter("always")
        for r in ordered_map(_square_or_fail, list(range(60)), jobs=jobs):
            got.append(r)
    assert got == [x * x for x in range(29)]
    assert str(err.value) == "test: item 29: bad item (at offset 0x1d)" and err.value.offset == 29
    # The warnings of the items before the error, in order, as in process.
    assert [str(w.message) for w in caught] == ["odd item 3", "odd item 13", "odd item 23"]
    assert all(w.category is FormatWarning for w in caught)


def test_tiny_inputs_and_one_job_stay_in_process() -> None:
    assert effective_jobs(8, 1) == 1
    assert effective_jobs(1, 100) == 1
    assert effective_jobs(8, 10, min_items=16) == 1
    assert effective_jobs(8, 3) == 3
    pids = set(ordered_map(lambda _: os.getpid(), list(range(5)), jobs=4, min_items=16))
    assert pids == {os.getpid()}


def test_workers_fit_the_memory_budget_together() -> None:
    # Each worker decodes one item at a time: no more workers than the heaviest items that fit together.
    assert effective_jobs(4, 10, [100] * 10, limit=1000) == 4
    assert effective_jobs(4, 10, [600, 500, 1, 1], limit=1000) == 1
    assert effective_jobs(4, 10, [400, 400, 300, 1], limit=1000) == 2
    with budget.limit(1000):
        assert effective_jobs(4, 10, [400, 400, 300]) == 2
        # and the workers decode under the caller's budget
        assert list(ordered_map(lambda _: budget.current().limit, [1, 2, 3], jobs=2)) == [1000] * 3


def test_a_pool_inside_a_worker_runs_in_that_worker() -> None:
    def inner(x: int) -> list[int]:
        return [os.getpid(), *ordered_map(lambda y: os.getpid(), [x, x], jobs=2)]
    rows = list(ordered_map(inner, [1, 2, 3, 4, 5], jobs=2))
    for row in rows[1:]:  # the first item runs in the caller, whose own pool may run
        assert len(set(row)) == 1 and row[0] != os.getpid()
    assert parallel._work is None


def _takes_twice(x: int, first: int, second: int, meet: Any, runs: Any) -> int:
    """Item ``x``: take ``first`` bytes, (items 1 and 2, on their first run, meet there, so both hold at
    once), then ``second`` more while holding them.  ``runs``: the runs of each item, then (last two) the
    bytes the items hold together and the most they held (counted after each allocation, before each
    release: never more than what the processes hold)."""
    with runs.get_lock():
        runs[x] += 1
        attempt = runs[x]
    b = budget.current()
    counted = 0
    try:
        held = b.allocate(first, what=f"first buffer of item {x}")
        counted = _count(runs, first)
        if meet is not None and x in (1, 2) and attempt == 1:
            meet.wait()
        more = b.allocate(second, what=f"second buffer of item {x}")
        counted += _count(runs, second)
        del held, more
    finally:
        _count(runs, -counted)  # an item that runs again gives back what it held
    return x


def _count(runs: Any, n: int) -> int:
    with runs.get_lock():
        runs[-2] += n
        runs[-1] = max(runs[-1], runs[-2])
    return n


def test_workers_share_one_budget_and_wait_instead_of_deadlocking() -> None:
    """Items 1 and 2 each hold 40 MiB and ask 40 MiB more under a 100 MiB budget shared by two workers:
    alone each fits, together they do not.  The older (item 1) waits; the younger gives back what it holds
    and runs again (wait-die), so both complete, the pool never holds more than the budget, and the
    results are those of one process.  On main each worker had a budget of its own: 160 MiB held."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    items = list(range(5))
    with budget.limit(100 * MIB):
        alone = list(ordered_map(lambda x: _takes_twice(x, 40 * MIB, 40 * MIB, None, ctx.Array("q", 7)), items,
                                 jobs=1))
        meet, runs = ctx.Barrier(2, timeout=30), ctx.Array("q", 7)
        got = list(ordered_map(lambda x: _takes_twice(x, 40 * MIB, 40 * MIB, meet, runs), items, jobs=2))
    assert got == alone == items
    assert runs[-1] <= 100 * MIB, runs[-1] // MIB
    # Item 0 ran in the caller; item 1, the oldest in the pool, never gives way; item 2 met it and ran again
    # (later items may too, as the timing falls).
    assert runs[0] == runs[1] == 1 and runs[2] >= 2, list(runs)


_kept: list[budget.Decoded] = []


def _keeps_or_takes(x: int) -> int:
    """Item 1 keeps 60 MiB past its end (a leak: nothing ever gives it back); items 2 and 3, a moment later,
    ask 50 MiB, which fits beside what their own process holds unless it is item 1's."""
    if x == 1:
        _kept.append(budget.current().allocate(60 * MIB, what="kept"))
    elif x > 1:
        time.sleep(0.3)
        budget.current().allocate(50 * MIB, what=f"item {x}")
    return x


def test_what_an_idle_worker_keeps_is_refused_not_waited_for() -> None:
    """A buffer kept past its item by a worker that has no item left never comes back: a request that
    would wait for it is refused (LimitExceeded) rather than waiting for ever."""
    signal.alarm(60)  # a hang fails the test
    try:
        with budget.limit(100 * MIB), pytest.raises(LimitExceeded, match="needs 52428800 bytes once decoded"):
            list(ordered_map(_keeps_or_takes, [0, 1, 2, 3], jobs=2))
    finally:
        signal.alarm(0)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_refusal_is_the_same_whatever_jobs(jobs: int) -> None:
    """Item 3 asks 70 MiB beside the 40 MiB it holds, over a 100 MiB budget: refused with the same message
    (the bytes in use: its own) in one process or in a pool, whatever the other items hold."""
    import multiprocessing

    runs = multiprocessing.get_context("fork").Array("q", 8)
    with budget.limit(100 * MIB), pytest.raises(LimitExceeded) as err:
        list(ordered_map(lambda x: _takes_twice(x, 40 * MIB, 70 * MIB if x == 3 else 10 * MIB, None, runs),
                         list(range(6)), jobs=jobs))
    assert str(err.value) == ("second buffer of item 3 needs 73400320 bytes once decoded, over the memory budget "
                              "of 100 MiB (41943040 bytes in use; raise it with --max-memory) (value 0x4600000)")


# --------------------------------------------------------------------------- the commands


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Several inputs: nvcc objects and fatbins (zstd, lz4, plain), a shared library, an archive of
    objects, the package's sample cubins, AMDGPU object and archives, and a truncated fatbin."""
    nvcc, ar = require_tool("nvcc"), require_tool("ar")
    out = tmp_path_factory.mktemp("parallel")
    d = out / "inputs"
    (d / "sub").mkdir(parents=True)
    k, ext = SOURCES / "kernels.cu", SOURCES / "extfn.cu"
    gencode = [a for g in ("arch=compute_80,code=[sm_80,compute_80]", "arch=compute_90,code=sm_90",
                           "arch=compute_100,code=sm_100") for a in ("-gencode", g)]
    commands: list[list[str | os.PathLike[str]]] = [
        [nvcc, *gencode, "--compress-mode=size", "-fatbin", "-o", d / "k.zstd.fatbin", k],
        [nvcc, *gencode, "--compress-mode=speed", "-fatbin", "-o", d / "k.lz4.fatbin", k],
        [nvcc, *gencode, "--no-compress", "-Xcompiler", "-fPIC", "-shared", "-o", d / "sub" / "libk.so", k],
        [nvcc, *gencode, "-rdc=true", "-c", "-o", out / "k.o", k],
        [nvcc, *gencode, "-rdc=true", "-c", "-o", out / "e.o", ext],
    ]
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda c: run_tool(c, out), commands))
    run_tool([ar, "rcs", d / "sub" / "libke.a", out / "k.o", out / "e.o"], out)
    for name in ("sample_sm90.cubin", "sample_gfx90a.o", "sample_layer_base.a", "sample_load_lib.so"):
        shutil.copy(SAMPLES / name, d / name)
    (d / "truncated.fatbin").write_bytes((d / "k.zstd.fatbin").read_bytes()[:300])
    return d


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The commands' pools run on any files and images (not only from 8 MB of them on)."""
    monkeypatch.setattr(list_cmd, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(reports_resources, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(extract_cmd, "MIN_PARALLEL_BYTES", 0)
    yield


@pytest.mark.parametrize("command", [
    ["list"], ["list", "--json"], ["list", "--all"],
    ["resources"], ["resources", "--json"], ["resources", "--format", "cuobjdump", "--all"],
])
def test_the_output_is_the_same_with_two_jobs(command: list[str], folder: Path, pooled: None) -> None:
    one = cli_err(*command, "--jobs", "1", str(folder))
    two = cli_err(*command, "--jobs", "2", str(folder))
    assert one == two
    code, out, err = one
    assert code == 0 and out
    assert "truncated.fatbin" in err  # the corrupt file's warning, once, from the scan
    if command == ["list"]:
        assert out.count("zstd") >= 4 and out.count("lz4") >= 1 and "sample_gfx90a.o" in out


def test_extract_writes_the_same_files_with_two_jobs(folder: Path, pooled: None, tmp_path: Path) -> None:
    results, written = [], []
    for jobs in ("1", "2"):
        dest = tmp_path / f"jobs{jobs}"
        code, out, err = cli_err("extract", "--jobs", jobs, str(folder), "-o", str(dest))
        results.append((code, out, err.replace(str(dest), "DEST")))
        written.append({p.name: p.read_bytes() for p in dest.iterdir()})
    assert results[0] == results[1] and results[0][0] == 0
    assert written[0] == written[1] and len(written[0]) >= 20
    assert "k.zstd.1.sm_80.cubin" in written[0] and "k.lz4.1.sm_80.ptx" in written[0]


def test_list_of_many_files_uses_the_pool_and_keeps_the_order(folder: Path, monkeypatch: pytest.MonkeyPatch,
                                                              pooled: None) -> None:
    seen: list[int] = []
    real = parallel._pooled

    def spy(fn, items, jobs):  # type: ignore[no-untyped-def]
        seen.append(jobs)
        return real(fn, items, jobs)
    monkeypatch.setattr(parallel, "_pooled", spy)
    files = sorted(str(p) for p in folder.rglob("*") if p.is_file())
    code, out, _ = cli_err("list", "--jobs", "2", *files)
    assert seen == [2] and code == 1  # truncated.fatbin is named: exit 1, as with --jobs 1
    assert cli_err("list", "--jobs", "1", *files)[:2] == (code, out)
    # Without the fixture's threshold of 0, these few megabytes are listed in this process.
    monkeypatch.setattr(list_cmd, "MIN_PARALLEL_BYTES", 8 << 20)
    assert cli_err("list", "--jobs", "2", *files)[:2] == (code, out) and seen == [2]


def test_an_error_in_a_worker_is_reported_as_in_process(folder: Path, pooled: None, tmp_path: Path) -> None:
    # Over the memory budget while decoding a zstd image in a worker: one line, exit 1, as with --jobs 1.
    runs = [cli_err("--max-memory", "4K", "resources", "--jobs", jobs, str(folder / "k.zstd.fatbin"))
            for jobs in ("1", "2")]
    assert runs[0] == runs[1]
    code, out, err = runs[0]
    assert code == 1 and out == "" and err.startswith("devbin: error: ") and "memory budget" in err
    runs = [cli_err("--max-memory", "4K", "extract", "--jobs", jobs, str(folder / "k.zstd.fatbin"), "-o",
                    str(tmp_path / jobs)) for jobs in ("1", "2")]
    assert runs[0][0] == runs[1][0] == 1 and runs[0][2] == runs[1][2]


def test_the_jobs_option_takes_a_positive_number() -> None:
    for bad in ("0", "-1", "x"):
        code, out, err = cli_err("list", "--jobs", bad, ".")
        assert (code, out) == (2, "") and "--jobs" in err


def test_limit_exceeded_survives_the_trip() -> None:
    def over(x: int) -> int:
        raise LimitExceeded("zstd data needs 9 bytes", fmt="fatbin", where=f"x#{x}", value=9)
    with pytest.raises(LimitExceeded) as err:
        list(ordered_map(over, [1, 2, 3, 4], jobs=2))
    assert str(err.value) == "fatbin: x#1: zstd data needs 9 bytes (value 0x9)"


# --------------------------------------------------------------------------- size and prune


@pytest.fixture(scope="module")
def libraries(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """nvcc-built shared libraries of several architecture sets (libk_c.so: sm_80 only, which
    ``--keep sm_90`` cannot prune), the folder's archive of objects and an AMDGPU object."""
    nvcc = require_tool("nvcc")
    d = tmp_path_factory.mktemp("libraries")
    k = SOURCES / "kernels.cu"
    builds = {"libk_a.so": ["-gencode", "arch=compute_80,code=[sm_80,compute_80]", "-gencode",
                            "arch=compute_90,code=sm_90", "--no-compress"],
              "libk_b.so": ["-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_100,code=sm_100"],
              "libk_c.so": ["-gencode", "arch=compute_80,code=sm_80"]}
    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(lambda kv: run_tool([nvcc, *kv[1], "-Xcompiler", "-fPIC", "-shared", "-o", d / kv[0], k], d),
                      builds.items()))
    shutil.copy(folder / "sub" / "libke.a", d / "libke.a")
    shutil.copy(SAMPLES / "sample_gfx90a.o", d / "sample_gfx90a.o")
    return d


#: The members of the test packages besides their libraries.
_PACKAGE_FILES = {"pkg/__init__.py": b"", "pkg/data.txt": b"not device code\n"}


def _package_members(libraries: Path, with_bad: bool) -> dict[str, bytes]:
    names = ["libk_a.so", "libke.a", "sample_gfx90a.o", "libk_b.so", *(["libk_c.so"] if with_bad else [])]
    return {**_PACKAGE_FILES, **{f"pkg/lib/{n}": (libraries / n).read_bytes() for n in names}}


def _make_wheel(path: Path, members: dict[str, bytes]) -> Path:
    import zipfile

    from devbin.packaging.prune_packages import record_hash
    record = "pkg-1.0.dist-info/RECORD"
    rows = "".join(f"{n},{record_hash(b)},{len(b)}\n" for n, b in members.items()) + f"{record},,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in {**members, record: rows.encode()}.items():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))  # the same bytes each time
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return path


def _make_site(root: Path, members: dict[str, bytes]) -> Path:
    """An installed package: the members under ``root`` and a RECORD naming them."""
    from devbin.packaging.prune_packages import record_hash
    for name, data in members.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "pkg-1.0.dist-info").mkdir()
    (root / "pkg-1.0.dist-info" / "RECORD").write_text(
        "".join(f"{n},{record_hash(b)},{len(b)}\n" for n, b in members.items()) + "pkg-1.0.dist-info/RECORD,,\n")
    return root


@pytest.fixture
def pooled_packages(monkeypatch: pytest.MonkeyPatch, pooled: None) -> Iterator[list[int]]:
    """The pools of size and prune run on these small inputs; yields the worker counts of the pools run."""
    from devbin.cli import size_cmd
    from devbin.packaging import prune_packages
    monkeypatch.setattr(size_cmd, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(prune_packages, "MIN_PARALLEL_BYTES", 0)
    seen: list[int] = []
    real = parallel._pooled

    def spy(fn, items, jobs):  # type: ignore[no-untyped-def]
        seen.append(jobs)
        return real(fn, items, jobs)
    monkeypatch.setattr(parallel, "_pooled", spy)
    yield seen


@pytest.mark.parametrize("options", [[], ["--json"], ["--csv"], ["--keep", "sm_90"], ["--keep", "sm_90", "--json"],
                                     ["--arch", "sm_90", "--csv"]])
def test_size_is_the_same_with_two_jobs(options: list[str], folder: Path, libraries: Path, tmp_path: Path,
                                        pooled_packages: list[int]) -> None:
    wheel = _make_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", _package_members(libraries, with_bad=True))
    argv = ["size", *options, str(folder), str(libraries), str(wheel)]
    one = cli_err(*argv, "--jobs", "1")
    assert pooled_packages == []
    two = cli_err(*argv, "--jobs", "2")
    assert pooled_packages and set(pooled_packages) == {2}  # the files (and --keep's libraries) in 2 workers
    assert one == two
    code, out, err = one
    assert code == 0 and out
    assert "truncated.fatbin" in err  # the corrupt file's warning, as in process
    if options == []:
        assert "pkg-1.0-py3-none-any.whl!pkg/lib/libk_b.so" in out and "DUPLICATES" in out
        assert "identical images" in out and "0 identical images" not in out  # libk_a.so in the wheel and outside
    if options[:2] == ["--keep", "sm_90"] and "--json" not in options:
        # the wheel's libraries pruned one by one (the archive's members inside one), libk_c.so refused
        assert "whl!pkg/lib/libke.a!k.o" in out
        assert "libk_c.so" in out and "refused: " in out and "leaves no device image" in out


def test_size_over_the_memory_budget_in_a_worker_warns_as_in_process(folder: Path, libraries: Path,
                                                                    pooled_packages: list[int]) -> None:
    # No compressed entry can be decoded under 256 bytes (the smallest, a PTX of e.o, needs 370): in a
    # worker as in process, a warning per entry.  (Under a budget some of them fit, whether one does may
    # depend on when the collector frees the buffers decoded before it, in one process as in several.)
    runs = [cli_err("--max-memory", "256", "size", "--jobs", jobs, str(folder), str(libraries))
            for jobs in ("1", "2")]
    assert pooled_packages == [2]
    assert runs[0] == runs[1]
    code, out, err = runs[0]
    assert code == 0 and out and "k.zstd.fatbin#0.1: " in err and "over the memory budget of 256 bytes" in err


def test_size_measures_in_workers_and_the_progress_advances(folder: Path, libraries: Path, tmp_path: Path) -> None:
    from devbin.images.scanreport import ScanReport
    from devbin.size.account import measure
    from devbin.size.report import duplicates
    calls: dict[int, list[tuple[int, int]]] = {}
    results = {}
    for jobs in (1, 2):
        calls[jobs] = []
        rep = ScanReport()
        results[jobs] = (measure([folder, libraries], progress=lambda d, t, j=jobs: calls[j].append((d, t)),
                                 report=rep, jobs=jobs), rep.warnings, rep.files)
    # bytes, from 0 to the files' sum, never back; a worker draws nothing, so with --jobs 2 the bar moves
    # file by file, in process also member by member inside a zip: every step of jobs 2 is one of jobs 1
    total = calls[1][0][1]
    assert calls[1][0] == calls[2][0] == (0, total) and calls[1][-1] == calls[2][-1] == (total, total)
    assert all(c == sorted(c) for c in calls.values())
    assert set(calls[2]) <= set(calls[1]) and len(calls[2]) > 10
    files1, files2 = results[1][0], results[2][0]
    assert [f.to_dict() for f in files1] == [f.to_dict() for f in files2] and results[1][1:] == results[2][1:]
    # In a worker every image and function is digested; in process only where a twin turned up: the
    # duplicates are the same.
    assert duplicates(files1) == duplicates(files2) and duplicates(files1)["images"]
    assert all(i.digest for f in files2 for i in f.images)
    assert not all(i.digest for f in files1 for i in f.images)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_prune_of_a_wheel_writes_the_same_wheel_with_two_jobs(libraries: Path, tmp_path: Path,
                                                              pooled_packages: list[int],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile
    runs, written = [], []
    for jobs in ("1", "2"):
        work = tmp_path / f"jobs{jobs}"
        work.mkdir()
        _make_wheel(work / "pkg-1.0-py3-none-any.whl", _package_members(libraries, with_bad=False))
        before = _tree(work)
        monkeypatch.chdir(work)  # the same relative names in both outputs
        runs.append([cli_err("prune", "pkg-1.0-py3-none-any.whl", "--keep", "sm_90", *extra, "--jobs", jobs)
                     for extra in (["-o", "out.whl"], ["--dry-run", "--json"])])
        assert _tree(work).keys() == {*before, "out.whl"} and all(_tree(work)[k] == v for k, v in before.items())
        written.append((work / "out.whl").read_bytes())
    assert pooled_packages == [2, 2]
    assert runs[0] == runs[1] and written[0] == written[1]
    (code, out, _), (dry_code, _, _) = runs[0]
    assert code == dry_code == 0 and "drop" in out and "sample_gfx90a.o" in out
    with zipfile.ZipFile(io.BytesIO(written[0])) as z:
        names = z.namelist()
        assert names == [*_PACKAGE_FILES, "pkg/lib/libk_a.so", "pkg/lib/libke.a", "pkg/lib/sample_gfx90a.o",
                         "pkg/lib/libk_b.so", "pkg-1.0.dist-info/RECORD"]
        assert len(z.read("pkg/lib/libk_a.so")) < (libraries / "libk_a.so").stat().st_size
        assert z.read("pkg/lib/sample_gfx90a.o") == (libraries / "sample_gfx90a.o").read_bytes()


def test_prune_of_a_folder_writes_the_same_files_with_two_jobs(libraries: Path, tmp_path: Path,
                                                               pooled_packages: list[int],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    runs, trees = [], []
    for jobs in ("1", "2"):
        work = tmp_path / f"jobs{jobs}"
        _make_site(work / "site", _package_members(libraries, with_bad=False))
        monkeypatch.chdir(work)
        runs.append([cli_err("prune", "site", "--keep", "sm_90", *extra, "--jobs", jobs)
                     for extra in (["--dry-run", "--json"], ["--in-place"])])
        trees.append(_tree(work))
    assert pooled_packages == [2, 2]
    assert runs[0] == runs[1] and trees[0] == trees[1]
    (dry, _, _), (code, out, _) = runs[0]
    assert dry == code == 0 and "wrote site" in out
    tree = trees[0]
    assert len(tree["site/pkg/lib/libk_b.so"]) < (libraries / "libk_b.so").stat().st_size
    assert tree["site/pkg/lib/libk_a.so.devbin-backup"] == (libraries / "libk_a.so").read_bytes()
    assert "sample_gfx90a.o.devbin-backup" not in "".join(tree)  # another vendor's: untouched


@pytest.mark.parametrize("kind", ["wheel", "folder"])
def test_a_library_prune_refuses_is_reported_as_in_process(kind: str, libraries: Path, tmp_path: Path,
                                                            pooled_packages: list[int],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # libk_c.so (sm_80 only) cannot keep sm_90: with --missing fail the same error whatever --jobs, found
    # before any library is pruned (no pool started), nothing written, the input untouched.  (Without it
    # the library stays as it is: issue 27, test_cli_forgiving.)
    runs, trees = [], []
    for jobs in ("1", "2"):
        work = tmp_path / f"jobs{jobs}"
        work.mkdir()
        members = _package_members(libraries, with_bad=True)
        if kind == "wheel":
            _make_wheel(work / "pkg.whl", members)
            argv = ["prune", "pkg.whl", "--keep", "sm_90", "--missing", "fail", "-o", "out.whl"]
        else:
            _make_site(work / "site", members)
            argv = ["prune", "site", "--keep", "sm_90", "--missing", "fail", "--in-place"]
        before = _tree(work)
        monkeypatch.chdir(work)
        runs.append(cli_err(*argv, "--jobs", jobs))
        trees.append(_tree(work))
        assert trees[-1] == before
    assert pooled_packages == []
    assert runs[0] == runs[1]
    code, out, err = runs[0]
    assert code == 1 and out == "" and "libk_c.so" in err and "leaves no device image" in err


def test_the_library_prunes_in_process_unless_asked(libraries: Path, tmp_path: Path,
                                                    pooled_packages: list[int]) -> None:
    from devbin.packaging.prune_packages import prune_tree, prune_wheel
    wheel = _make_wheel(tmp_path / "pkg.whl", _package_members(libraries, with_bad=False))
    site = _make_site(tmp_path / "site", _package_members(libraries, with_bad=False))
    one = prune_wheel(wheel, None, keep="sm_90", keep_data=True)
    tree = prune_tree(site, keep="sm_90", dry_run=True)
    assert pooled_packages == []  # jobs=1 by default
    two = prune_wheel(wheel, None, keep="sm_90", jobs=2, keep_data=True)
    tree2 = prune_tree(site, keep="sm_90", dry_run=True, jobs=2)
    assert pooled_packages == [2, 2]
    assert one.data == two.data and one.to_dict() == two.to_dict() and one.rows() == two.rows()
    assert tree.to_dict() == tree2.to_dict()
