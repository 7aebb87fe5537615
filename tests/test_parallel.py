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
import subprocess
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from devbin.binary import budget
from devbin.cli import extract_cmd, list_cmd, resources_cmd
from devbin.cli.main import main
from devbin.errors import FormatError, FormatWarning, LimitExceeded
from devbin.images import parallel
from devbin.images.parallel import effective_jobs, ordered_map
from devbin.samples import __file__ as samples_init

from tests.conftest import SOURCES, require_tool

SAMPLES = Path(samples_init).parent


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


# --------------------------------------------------------------------------- the commands


def _nvcc(args: list[str | os.PathLike[str]], cwd: Path) -> None:
    p = subprocess.run([os.fspath(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600,
                       check=False)
    assert p.returncode == 0, p.stderr


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
        list(pool.map(lambda c: _nvcc(c, out), commands))
    _nvcc([ar, "rcs", d / "sub" / "libke.a", out / "k.o", out / "e.o"], out)
    for name in ("sample_sm90.cubin", "sample_gfx90a.o", "sample_layer_base.a", "sample_load_lib.so"):
        shutil.copy(SAMPLES / name, d / name)
    (d / "truncated.fatbin").write_bytes((d / "k.zstd.fatbin").read_bytes()[:300])
    return d


@pytest.fixture
def pooled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The commands' pools run on any files and images (not only from 8 MB of them on)."""
    monkeypatch.setattr(list_cmd, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(resources_cmd, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(extract_cmd, "MIN_PARALLEL_BYTES", 0)
    yield


def _devbin(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(argv, out)
    return code, out.getvalue(), capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["list"], ["list", "--json"], ["list", "--all"],
    ["resources"], ["resources", "--json"], ["resources", "--format", "cuobjdump", "--all"],
])
def test_the_output_is_the_same_with_two_jobs(command: list[str], folder: Path, pooled: None,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    one = _devbin([*command, "--jobs", "1", str(folder)], capsys)
    two = _devbin([*command, "--jobs", "2", str(folder)], capsys)
    assert one == two
    code, out, err = one
    assert code == 0 and out
    assert "truncated.fatbin" in err  # the corrupt file's warning, once, from the scan
    if command == ["list"]:
        assert out.count("zstd") >= 4 and out.count("lz4") >= 1 and "sample_gfx90a.o" in out


def test_extract_writes_the_same_files_with_two_jobs(folder: Path, pooled: None, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    results, written = [], []
    for jobs in ("1", "2"):
        dest = tmp_path / f"jobs{jobs}"
        code, out, err = _devbin(["extract", "--jobs", jobs, str(folder), "-o", str(dest)], capsys)
        results.append((code, out, err.replace(str(dest), "DEST")))
        written.append({p.name: p.read_bytes() for p in dest.iterdir()})
    assert results[0] == results[1] and results[0][0] == 0
    assert written[0] == written[1] and len(written[0]) >= 20
    assert "k.zstd.1.sm_80.cubin" in written[0] and "k.lz4.1.sm_80.ptx" in written[0]


def test_list_of_many_files_uses_the_pool_and_keeps_the_order(folder: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch, pooled: None) -> None:
    seen: list[int] = []
    real = parallel._pooled

    def spy(fn, items, jobs):  # type: ignore[no-untyped-def]
        seen.append(jobs)
        return real(fn, items, jobs)
    monkeypatch.setattr(parallel, "_pooled", spy)
    files = sorted(str(p) for p in folder.rglob("*") if p.is_file())
    code, out, _ = _devbin(["list", "--jobs", "2", *files], capsys)
    assert seen == [2] and code == 1  # truncated.fatbin is named: exit 1, as with --jobs 1
    assert _devbin(["list", "--jobs", "1", *files], capsys)[:2] == (code, out)
    # Without the fixture's threshold of 0, these few megabytes are listed in this process.
    monkeypatch.setattr(list_cmd, "MIN_PARALLEL_BYTES", 8 << 20)
    assert _devbin(["list", "--jobs", "2", *files], capsys)[:2] == (code, out) and seen == [2]


def test_an_error_in_a_worker_is_reported_as_in_process(folder: Path, pooled: None, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # Over the memory budget while decoding a zstd image in a worker: one line, exit 1, as with --jobs 1.
    runs = [_devbin(["--max-memory", "4K", "resources", "--jobs", jobs, str(folder / "k.zstd.fatbin")], capsys)
            for jobs in ("1", "2")]
    assert runs[0] == runs[1]
    code, out, err = runs[0]
    assert code == 1 and out == "" and err.startswith("devbin: error: ") and "memory budget" in err
    runs = [_devbin(["--max-memory", "4K", "extract", "--jobs", jobs, str(folder / "k.zstd.fatbin"), "-o",
                     str(tmp_path / jobs)], capsys) for jobs in ("1", "2")]
    assert runs[0][0] == runs[1][0] == 1 and runs[0][2] == runs[1][2]


def test_the_jobs_option_takes_a_positive_number(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "-1", "x"):
        with pytest.raises(SystemExit) as e:
            main(["list", "--jobs", bad, "."], io.StringIO())
        assert e.value.code == 2
    assert "--jobs" in capsys.readouterr().err


def test_limit_exceeded_survives_the_trip() -> None:
    def over(x: int) -> int:
        raise LimitExceeded("zstd data needs 9 bytes", fmt="fatbin", where=f"x#{x}", value=9)
    with pytest.raises(LimitExceeded) as err:
        list(ordered_map(over, [1, 2, 3, 4], jobs=2))
    assert str(err.value) == "fatbin: x#1: zstd data needs 9 bytes (value 0x9)"
