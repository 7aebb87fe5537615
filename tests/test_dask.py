"""``--scheduler``: the work on a real Dask cluster, and inputs named by URL (devbin.images.units, .remote).

A real ``dask scheduler`` and two ``dask worker`` processes on localhost (random ports; started once
for the session, torn down after), and a real nginx serving a temporary folder on localhost (it honours
``Range``; its access log counts the bytes it sent).  Every output with ``--scheduler`` is compared byte
for byte with ``--jobs 1``: ``list``, ``resources``, ``size`` (text and ``--json``), ``extract``'s files and
``--json``; on the package's samples and a generated wheel, on paths and on URLs.  The inputs are small,
so the thresholds below which a large file's images stay one unit are set to 0 here: the images of one
file are cut into several units, each scanned again on a worker.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devbin.cli import list_cmd
from devbin.errors import FormatError, FormatWarning, UsageError
from devbin.images import parallel, units
from devbin.images.parallel import ordered_map
from devbin.images.scan import Scanner
from devbin.samples import __file__ as samples_init

from tests.conftest import in_ci, require_tool
from tests.runners import ROOT, cli_err, run_devbin

SAMPLES = Path(samples_init).parent
#: The samples every comparison reads: cubins, an AMDGPU object, archives of objects, shared libraries.
SAMPLE_NAMES = ("sample_sm90.cubin", "sample_sm90_rdc.cubin", "sample_gfx90a.o", "sample_layer_base.a",
                "sample_layer_top.a", "sample_link_kern.o", "sample_load_lib.so", "sample_load_user.so")
#: Bytes of the wheel's member without device code: what a reader with range requests leaves unread.
FILLER = 24 << 20
#: Waits of the cluster and the web server (not tool runs, which take runners.TOOL_TIMEOUT): a process's exit
#: once terminated, the client's connection, the two workers' start on a loaded machine, one poll of a port.
STOP_S = 20
CONNECT_S = 30
START_S = 90
POLL_S = 1

def _needs(module: str) -> Any:
    """``module`` imported; the test skipped when it is missing, failed in CI (every package a test
    imports is in the test extra, pyproject.toml)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        msg = f"python package {module!r} not installed (pip install '.[test]')"
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# --------------------------------------------------------------------------- the cluster and the server


@pytest.fixture(scope="session")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of a real Dask scheduler with two worker processes on localhost (``python -m dask
    scheduler`` / ``worker``: the ``dask`` command of the interpreter running the tests), which import this
    checkout's devbin (and this module, for the helper's own test functions: pytest imports it as ``test_dask``
or ``tests.test_dask``)."""
    _needs("distributed")
    from distributed import Client
    d = tmp_path_factory.mktemp("dask")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), str(ROOT / "tests")]),
           "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    info = d / "scheduler.json"
    log = (d / "cluster.log").open("wb")
    procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(info)], env=env, cwd=d, stdout=log,
                              stderr=subprocess.STDOUT)]
    try:
        for _ in range(2):  # two worker processes, each its own `dask worker`
            procs.append(subprocess.Popen([sys.executable, "-m", "dask", "worker", "--scheduler-file", str(info),
                                           "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                                           "--local-directory", str(d), "--memory-limit", "0"],
                                          env=env, cwd=d, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 90
        while not info.exists() or not info.read_text().strip():
            if time.monotonic() > deadline or procs[0].poll() is not None:
                pytest.fail(f"the Dask scheduler did not start: {(d / 'cluster.log').read_text()[-2000:]}")
            time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        with Client(address, timeout=f"{CONNECT_S}s") as client:
            client.wait_for_workers(2, timeout=START_S)
        yield address
    finally:
        _stop(procs[1:])
        _stop(procs[:1])
        log.close()


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """A real nginx serving a temporary folder on localhost: (its base URL, the folder, its access log,
    one line per request: the status, the bytes of the body sent and the Range asked for)."""
    nginx = require_tool("nginx")
    _needs("aiohttp")
    base = tmp_path_factory.mktemp("nginx")
    root = base / "www"
    root.mkdir()
    port = _free_port()
    log = base / "access.log"
    user = "user root root;\n" if os.geteuid() == 0 else ""  # the workers read the test's private temp folder
    (base / "nginx.conf").write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {base}/nginx.pid;\nerror_log {base}/error.log;\n"
        "events { worker_connections 64; }\n"
        "http {\n"
        f"  client_body_temp_path {base}/body; proxy_temp_path {base}/proxy; fastcgi_temp_path {base}/fcgi;\n"
        f"  uwsgi_temp_path {base}/uwsgi; scgi_temp_path {base}/scgi;\n"
        "  log_format bytes '$status $body_bytes_sent \"$http_range\" $request_uri';\n"
        f"  access_log {log} bytes;\n"
        f"  server {{ listen 127.0.0.1:{port}; root {root}; }}\n"
        "}\n")
    proc = subprocess.Popen([nginx, "-c", str(base / "nginx.conf"), "-p", str(base)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=POLL_S):
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"nginx did not start: {(base / 'error.log').read_text(errors='replace')}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", root, log
    finally:
        _stop([proc])  # type: ignore[list-item]


def _wheel(path: Path) -> Path:
    """A wheel of device code beside a large member without any: a cubin and an AMDGPU library deflated,
    an archive stored, and :data:`FILLER` random bytes stored."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg/__init__.py", "")
        z.writestr("pkg/data.bin", os.urandom(FILLER))
        z.write(SAMPLES / "sample_sm90.cubin", "pkg/k.cubin", compress_type=zipfile.ZIP_DEFLATED)
        z.write(SAMPLES / "sample_load_lib.so", "pkg/lib/libk.so", compress_type=zipfile.ZIP_DEFLATED)
        z.write(SAMPLES / "sample_layer_base.a", "pkg/lib/libbase.a")
        z.writestr("pkg-1.0.dist-info/RECORD", "")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the samples and the wheel."""
    d = tmp_path_factory.mktemp("dask-inputs") / "inputs"
    d.mkdir()
    for name in SAMPLE_NAMES:
        shutil.copy(SAMPLES / name, d / name)
    _wheel(d / "pkg-1.0-py3-none-any.whl")
    return d


@pytest.fixture
def cut(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """Any file's images cut into several units, and every pool run, on these small inputs; yields the items
    of each run on a cluster (:func:`devbin.images.parallel.ordered_map` with a client)."""
    monkeypatch.setattr(units, "MIN_SPLIT_BYTES", 0)
    monkeypatch.setattr(list_cmd, "MIN_PARALLEL_BYTES", 0)
    runs: list[list[Any]] = []
    real = parallel._distributed

    def spy(fn, items, client):  # type: ignore[no-untyped-def]
        runs.append(list(items))
        return real(fn, items, client)
    monkeypatch.setattr(parallel, "_distributed", spy)
    return runs


# --------------------------------------------------------------------------- the helper on the cluster


def _square_or_fail(x: int) -> int:
    if x == 29:
        raise FormatError("bad item", fmt="test", where=f"item {x}", offset=x)
    if x % 10 == 3:
        warnings.warn(FormatWarning(f"odd item {x}"), stacklevel=1)
    return x * x


def _pid(x: int) -> tuple[int, int]:
    return x, os.getpid()


def test_ordered_map_on_the_cluster_keeps_order_errors_and_warnings(scheduler: str) -> None:
    from distributed import Client
    with Client(scheduler) as client:
        ran = list(ordered_map(_pid, list(range(40)), client=client))
        assert [x for x, _ in ran] == list(range(40))
        assert os.getpid() not in {pid for _, pid in ran} and len({pid for _, pid in ran}) == 2  # both workers
        got: list[int] = []
        with warnings.catch_warnings(record=True) as caught, pytest.raises(FormatError) as err:
            warnings.simplefilter("always")
            got.extend(ordered_map(_square_or_fail, list(range(60)), client=client))
        assert got == [x * x for x in range(29)]
        assert str(err.value) == "test: item 29: bad item (at offset 0x1d)" and err.value.offset == 29
        assert [str(w.message) for w in caught] == ["odd item 3", "odd item 13", "odd item 23"]


def test_an_image_unit_scanned_again_finds_the_same_images(inputs: Path, cut: list[list[Any]]) -> None:
    import pickle
    found = [f for f, _ in Scanner(all=True).paths([inputs])]
    chosen = [f for f in found if f.kind in ("cubin", "amdgpu")]
    whole = units.image_units(found, chosen, all=True, parts=0)
    assert len(whole) == len(chosen)  # the local pool: one unit per image
    split = units.image_units(found, chosen, all=True, parts=3)
    assert len(split) > len({f.address.path for f in chosen})  # some file's images are cut into several units
    assert {u.member.name for u in split if u.member is not None} >= {"pkg/k.cubin", "pkg/lib/libbase.a"}
    sent = [pickle.loads(pickle.dumps(u)) for u in split]
    assert all(u.held is None for u in sent) and sent == split
    again = [f for u in sent for f in u.images()]
    assert [f.to_dict() for f in again] == [f.to_dict() for f in chosen]
    assert [bytes(f.data()) for f in again] == [bytes(f.data()) for f in chosen]


def test_a_changed_file_is_an_error_not_another_image(tmp_path: Path) -> None:
    lib = tmp_path / "lib.a"
    shutil.copy(SAMPLES / "sample_layer_base.a", lib)
    found = [f for f, _ in Scanner().paths([lib])]
    (unit,) = units.image_units(found, found[-1:], all=False, parts=1)
    shutil.copy(SAMPLES / "sample_sm90.cubin", lib)
    with pytest.raises(FormatError, match="changed since it was scanned"):
        list(units.ImageUnit(unit.file, unit.all, unit.places).images())


def _twice(inputs: Path) -> list[list[Path]]:
    """Inputs that scan a file twice, one scan after the other: a library without members named twice, and
    the folder with its last file named again after it."""
    last = Scanner().expand([inputs])[-1][1]
    assert isinstance(last, Path)
    return [[inputs / "sample_load_lib.so"] * 2, [inputs, last]]


def test_a_file_scanned_twice_is_two_runs_of_units(inputs: Path, cut: list[list[Any]]) -> None:
    import pickle
    for paths in _twice(inputs):
        found = [f for f, _ in Scanner().paths(paths)]
        assert len({str(f.address) for f in found}) < len(found)  # some image found twice, at one address
        split = units.image_units(found, found, all=False, parts=4)
        assert all(u.places[0][0] == 0 for u in split if str(u.file[1]) == str(paths[-1]))  # each scan from 0
        again = [f for u in split for f in pickle.loads(pickle.dumps(u)).images()]
        assert [f.to_dict() for f in again] == [f.to_dict() for f in found]


# --------------------------------------------------------------------------- the commands


@pytest.mark.parametrize("command", [
    ["list"], ["list", "--json"], ["list", "--all"], ["resources"], ["resources", "--json"],
    ["resources", "--format", "cuobjdump", "--all"], ["size"], ["size", "--json"],
])
def test_the_output_on_the_cluster_is_that_of_one_process(command: list[str], inputs: Path, scheduler: str,
                                                          cut: list[list[Any]]) -> None:
    one = cli_err(*command, "--jobs", "1", str(inputs))
    assert one[0] == 0 and one[1] and not cut
    assert cli_err(*command, "--scheduler", scheduler, str(inputs)) == one
    (items,) = cut  # the work went to the cluster: one file a task (list, size), or images of a file a task
    files = len(SAMPLE_NAMES) + 1
    if command[0] == "resources":
        assert all(isinstance(u, units.ImageUnit) and u.held is not None for u in items) and len(items) > files
    else:
        assert [Path(t[1]).name for t in items] == sorted([*SAMPLE_NAMES, "pkg-1.0-py3-none-any.whl"])


def test_a_file_named_twice_on_the_cluster_is_that_of_one_process(inputs: Path, scheduler: str,
                                                                  cut: list[list[Any]]) -> None:
    # (extract takes one PATH: a file is scanned twice only by the commands that take several)
    for paths in _twice(inputs):
        for command in (["resources"], ["resources", "--json"], ["resources", "--format", "cuobjdump"]):
            one = cli_err(*command, "--jobs", "1", *paths)
            assert one[0] == 0 and (one[1] or command[-1] == "cuobjdump")  # cuobjdump's lines: NVIDIA's only
            assert cli_err(*command, "--scheduler", scheduler, *paths) == one, (command, paths)


def test_extract_on_the_cluster_writes_the_same_files(inputs: Path, scheduler: str, cut: list[list[Any]],
                                                      tmp_path: Path) -> None:
    runs = []
    for how in (["--jobs", "1"], ["--scheduler", scheduler]):
        out = tmp_path / how[0].strip("-")
        for source in (inputs / "pkg-1.0-py3-none-any.whl", inputs / "sample_layer_top.a"):
            runs.append(cli_err("extract", *how, str(source), "--all", "-o", str(out / source.name), "--json"))
    half = len(runs) // 2
    assert [(c, o.replace("/scheduler/", "/jobs/"), e) for c, o, e in runs[half:]] == runs[:half]
    a, b = tmp_path / "jobs", tmp_path / "scheduler"
    assert len(cut) == 2 and len(cut[0]) > 1  # the wheel's images in several units, each scanning it again
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def test_urls_over_http_read_only_what_holds_device_code(inputs: Path, scheduler: str, cut: list[list[Any]],
                                                         served: tuple[str, Path, Path]) -> None:
    url, root, log = served
    wheel = inputs / "pkg-1.0-py3-none-any.whl"
    shutil.copy(wheel, root / wheel.name)
    shutil.copy(inputs / "sample_load_user.so", root / "sample_load_user.so")
    whl_url, so_url = f"{url}/{wheel.name}", f"{url}/sample_load_user.so"
    for command in (["list", "--json"], ["resources", "--json"], ["size", "--json"], ["list"], ["resources"]):
        log.write_text("")
        remote = cli_err(*command, "--jobs", "1", whl_url, so_url)
        if "--json" in command:  # the report of the files on disk, the files named by their URLs
            local = cli_err(*command, "--jobs", "1", str(wheel), str(inputs / "sample_load_user.so"))
            assert local[0] == 0 and local[1]
            assert remote == tuple(x.replace(str(inputs), url) if isinstance(x, str) else x for x in local)
        sent = _sent(log, wheel.name)
        assert 0 < sent < wheel.stat().st_size - FILLER // 2, (command, sent)  # the filler member left unread
        log.write_text("")
        assert cli_err(*command, "--scheduler", scheduler, whl_url, so_url) == remote
        # resources: the caller's scan, then each unit (one per member of a URL) its member and the blocks of
        # the zip's head and central directory, never the filler
        assert _sent(log, wheel.name) < wheel.stat().st_size - FILLER // 2, command


def _sent(log: Path, name: str) -> int:
    """The body bytes nginx sent for ``name``, every request a range (206) or a HEAD/size probe."""
    total = 0
    for line in log.read_text().splitlines():
        status, sent, _rest = line.split(" ", 2)
        if line.endswith(f"/{name}"):
            assert status in ("200", "206"), line
            total += int(sent)
    return total


def test_memory_urls_go_through_fsspec(inputs: Path) -> None:
    fsspec = _needs("fsspec")
    fs = fsspec.filesystem("memory")
    wheel = inputs / "pkg-1.0-py3-none-any.whl"
    fs.pipe("/devbin-test/pkg-1.0-py3-none-any.whl", wheel.read_bytes())
    try:
        local = cli_err("list", "--json", "--jobs", "1", str(wheel))
        remote = cli_err("list", "--json", "--jobs", "1", "memory://devbin-test/pkg-1.0-py3-none-any.whl")
        assert remote == (local[0], local[1].replace(str(wheel), "memory://devbin-test/pkg-1.0-py3-none-any.whl"),
                          local[2])
        missing = "memory://devbin-test/missing.whl"
        assert cli_err("list", missing) == (1, "", f"devbin: error: cannot open {missing}: no such file\n")
    finally:
        fs.rm("/devbin-test", recursive=True)


def test_size_keep_takes_no_url() -> None:
    code, out, err = cli_err("size", "--keep", "sm_90", "https://127.0.0.1:1/pkg.whl")
    assert (code, out) == (2, "") and "URL" in err


def test_a_scheme_without_its_package_is_one_line() -> None:
    _needs("fsspec")
    if importlib.util.find_spec("s3fs") is not None:
        pytest.skip("s3fs is installed: s3:// would be read (no S3 in reach here)")
    code, out, err = cli_err("list", "s3://devbin-test/pkg.whl")
    assert (code, out) == (1, "") and "s3fs" in err and len(err.strip().splitlines()) == 1


def test_the_scheduler_option_without_dask_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    for command in ("list", "resources", "size", "extract"):
        code, out, err = cli_err(command, "--scheduler", "tcp://127.0.0.1:1", str(SAMPLES / "sample_sm90.cubin"))
        assert (code, out) == (1, "") and "devbin[dask]" in err and len(err.strip().splitlines()) == 1, command


def test_a_scheduler_out_of_reach_is_one_line() -> None:
    _needs("distributed")
    code, out, err = cli_err("list", "--scheduler", f"tcp://127.0.0.1:{_free_port()}",
                             str(SAMPLES / "sample_sm90.cubin"))
    assert (code, out) == (1, "") and "cannot reach the Dask scheduler" in err


@pytest.mark.parametrize("address", ["garbage", "tcp://127.0.0.1", "tcp://:8786", "tcp://127.0.0.1:99999",
                                     "nope://127.0.0.1:8786"])
def test_a_malformed_scheduler_address_is_one_line_and_exit_2(address: str) -> None:
    _needs("distributed")
    cubin = str(SAMPLES / "sample_sm90.cubin")
    for command in ("list", "resources", "size", "extract"):
        code, out, err = cli_err(command, "--scheduler", address, cubin)
        assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1, (command, err)
        assert err.startswith(f"devbin: error: --scheduler {address!r}: not a Dask scheduler address"), err
    with pytest.raises(UsageError, match="not a Dask scheduler address"):
        units.check_address(address)
    # in a process of its own: no client was made, none hangs at exit (a half-made one waited ~20 s there)
    start = time.monotonic()
    proc = run_devbin("list", "--scheduler", address, cubin)
    assert (proc.returncode, proc.stdout, len(proc.stderr.splitlines())) == (2, "", 1), proc.stderr
    assert time.monotonic() - start < 10


def test_the_library_takes_a_client(inputs: Path, scheduler: str, cut: list[list[Any]]) -> None:
    from distributed import Client

    import devbin
    from devbin.size import measure
    with Client(scheduler) as client:
        assert devbin.resources_report([inputs], all=True, client=client) == devbin.resources_report([inputs],
                                                                                                     all=True)
        assert [f.to_dict() for f in measure([inputs], client=client)] == [f.to_dict() for f in measure([inputs])]
        assert Scanner().listing([inputs], client=client) == Scanner().listing([inputs])
    assert len(cut) == 3
