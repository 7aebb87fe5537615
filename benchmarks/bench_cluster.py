"""A folder of wheels scanned by this machine's pool and by a Dask cluster on localhost (not a test: run by hand).

    python3 benchmarks/bench_cluster.py [--repeat 3] [--cache DIR] [--wheels DIR] [--workers 2] [--generated 24]
                                        [--commands list,size,resources] [--no-http]

Inputs: the pinned wheels of :data:`WHEELS` (downloaded with pip into ``--wheels`` when not there; on the
development machine the shared /work/cache/wheels), hard-linked (copied across file systems) into one
folder with ``--generated`` small wheels written here (each: two of the package's sample code objects,
deflated, an ar archive stored, and 2 MB of random data without device code).

Started here and torn down after: a real ``dask scheduler`` and ``--workers`` ``dask worker`` processes
(``--nthreads 1``, no nanny) on localhost, importing this checkout's devbin; and, unless ``--no-http`` or no
nginx is found, a real nginx serving the folder on localhost.

Each command runs, in one session, alternately (one warm-up each, ``--repeat`` timed runs, median):

* ``devbin CMD --jobs 1 DIR``: one process;
* ``devbin CMD DIR``: the local process pool (``--jobs`` default: one per processor), except for the
  commands of ``--no-pool``;
* ``devbin CMD --scheduler ADDR DIR``: the cluster's workers;
* ``devbin CMD --scheduler ADDR URL...``: the cluster's workers reading the wheels from nginx (range requests);
  the bytes nginx sent are printed beside the folder's bytes.

Every output is checked byte for byte against ``--jobs 1`` (the URL run's with the folder's path put for the
server's address in ``--json``).  Wall time is the command's; **peak MB** is the largest sum of resident
memory over the command's process tree and, for a run on the cluster, the cluster's worker processes
(what they hold between runs too: Python keeps its heap), sampled every 20 ms (psutil).  The cluster's
workers are started once: their start-up is not in the times (a cluster is started once for many scans),
the client's connection is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "src" / "devbin" / "samples"

#: The held-in wheels (pip download --no-deps NAME==VERSION), the ones the other benchmarks use too.
#: (cuFFT's wheel, 24,455 images, is left out: `size` of it alone takes minutes in one process.)
WHEELS = ("nvidia-curand-cu12==10.3.10.19", "onemkl-sycl-blas==2026.2.0", "bitsandbytes==0.50.2")


def fetch_wheels(where: Path) -> list[Path]:
    """The pinned wheels, downloaded into ``where`` when not there."""
    where.mkdir(parents=True, exist_ok=True)
    out = []
    for spec in WHEELS:
        name, version = spec.split("==")
        pattern = f"{name.replace('-', '_')}-{version}-*.whl"
        found = sorted(where.glob(pattern))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(where), spec],
                           check=True)
            found = sorted(where.glob(pattern))
        out.append(found[0])
    return out


def generated_wheel(path: Path, k: int) -> None:
    """A small wheel of device code beside data without any (reproducible: seeded by ``k``)."""
    rng = random.Random(k)
    names = ["sample_sm90.cubin", "sample_gfx90a.o", "sample_load_lib.so", "sample_sm90_rdc.cubin",
             "sample_link_kern.o"]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"gen{k}/__init__.py", "")
        z.writestr(f"gen{k}/data.bin", rng.randbytes(2 << 20))
        for n in rng.sample(names, 2):
            z.write(SAMPLES / n, f"gen{k}/lib/{n}", compress_type=zipfile.ZIP_DEFLATED)
        z.write(SAMPLES / "sample_layer_base.a", f"gen{k}/lib/libbase.a")
        z.writestr(f"gen{k}-1.0.dist-info/RECORD", "")


def build_folder(cache: Path, wheels: list[Path], generated: int) -> Path:
    import hashlib
    key = hashlib.sha256("\n".join(w.name for w in wheels).encode()).hexdigest()[:8]
    folder = cache / f"cluster-{key}-{generated}g"
    if folder.is_dir():
        return folder
    tmp = cache / (folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for w in wheels:
        try:
            os.link(w, tmp / w.name)
        except OSError:
            shutil.copy(w, tmp / w.name)
    for k in range(generated):
        generated_wheel(tmp / f"gen{k}-1.0-py3-none-any.whl", k)
    tmp.rename(folder)
    return folder


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
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@contextlib.contextmanager
def cluster(workers: int, scratch: Path) -> Iterator[tuple[str, list[int]]]:
    """A scheduler and ``workers`` worker processes on localhost: (the address, the workers' pids)."""
    from distributed import Client
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    info = scratch / "scheduler.json"
    log = (scratch / "cluster.log").open("wb")
    procs = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(info)], env=env, stdout=log,
                              stderr=subprocess.STDOUT)]
    try:
        for _ in range(workers):
            procs.append(subprocess.Popen([sys.executable, "-m", "dask", "worker", "--scheduler-file", str(info),
                                           "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
                                           "--local-directory", str(scratch), "--memory-limit", "0"],
                                          env=env, stdout=log, stderr=subprocess.STDOUT))
        while not info.exists() or not info.read_text().strip():
            time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        with Client(address) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address, [p.pid for p in procs[1:]]
    finally:
        _stop(procs[1:])
        _stop(procs[:1])
        log.close()


@contextlib.contextmanager
def nginx(folder: Path, scratch: Path) -> Iterator[tuple[str, Path] | None]:
    """nginx serving ``folder`` on localhost: (its base URL, its access log), or None where none is installed."""
    exe = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if exe is None:
        yield None
        return
    port = _free_port()
    log = scratch / "access.log"
    user = "user root root;\n" if os.geteuid() == 0 else ""
    (scratch / "nginx.conf").write_text(
        f"{user}daemon off;\nworker_processes 2;\npid {scratch}/nginx.pid;\nerror_log {scratch}/error.log;\n"
        "events { worker_connections 256; }\nhttp {\n"
        f"  client_body_temp_path {scratch}/body; proxy_temp_path {scratch}/proxy; fastcgi_temp_path {scratch}/f;\n"
        f"  uwsgi_temp_path {scratch}/u; scgi_temp_path {scratch}/s;\n"
        "  log_format bytes '$status $body_bytes_sent $request_uri';\n"
        f"  access_log {log} bytes;\n  server {{ listen 127.0.0.1:{port}; root {folder}; }}\n}}\n")
    proc = subprocess.Popen([exe, "-c", str(scratch / "nginx.conf"), "-p", str(scratch)])
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", log
    finally:
        _stop([proc])


def _tree_rss(pid: int, extra: list[int]) -> int:
    import psutil
    total = 0
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        procs = []
    for p in [*procs, *(psutil.Process(x) for x in extra)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def run(argv: list[str], workers: list[int]) -> tuple[float, int, bytes]:
    """Wall seconds, peak summed RSS (the command's tree and ``workers``) and stdout of one run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss(proc.pid, workers))
            time.sleep(0.02)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out, _ = proc.communicate()
    except BaseException:  # interrupted (SIGTERM): the command goes too
        proc.kill()
        proc.wait()
        raise
    wall = time.monotonic() - start
    done.set()
    t.join()
    if proc.returncode != 0:
        raise SystemExit(f"bench: {' '.join(argv)} exited {proc.returncode}")
    return wall, peak[0], out


def main() -> None:
    import signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the cluster and nginx are torn down (finally)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "devbin-bench"))
    ap.add_argument("--wheels", default=None, help="where the pinned wheels are (default: CACHE/wheels)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--generated", type=int, default=24)
    ap.add_argument("--commands", default="list,size,resources")
    ap.add_argument("--no-http", action="store_true")
    ap.add_argument("--no-pool", default="", metavar="CMDS",
                    help="commands whose local-pool run is left out (default: none)")
    args = ap.parse_args()
    cache = Path(args.cache)
    wheels = fetch_wheels(Path(args.wheels) if args.wheels else cache / "wheels")
    folder = build_folder(cache, wheels, args.generated)
    files = sorted(p for p in folder.iterdir() if p.is_file())
    total = sum(p.stat().st_size for p in files)
    print(f"folder: {len(files)} wheels, {total / 1e6:.0f} MB ({', '.join(w.name.split('-')[0] for w in wheels)} "
          f"and {args.generated} generated); {os.cpu_count()} processors; load {os.getloadavg()[0]:.1f}")
    devbin = [sys.executable, "-m", "devbin"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="devbin-cluster-") as scratch_s:
        scratch = Path(scratch_s)
        with cluster(args.workers, scratch) as (address, pids), \
                nginx(folder, scratch) if not args.no_http else contextlib.nullcontext() as served:
            for command in args.commands.split(","):
                json_flag = ["--json"] if command != "list" else []
                ways = {
                    "--jobs 1": [*devbin, command, *json_flag, "--jobs", "1", str(folder)],
                    **({} if command in args.no_pool.split(",") else
                       {"pool (default --jobs)": [*devbin, command, *json_flag, str(folder)]}),
                    f"--scheduler ({args.workers} workers)": [*devbin, command, *json_flag, "--scheduler", address,
                                                             str(folder)],
                }
                if served is not None:
                    base, _ = served
                    ways["--scheduler, URLs (nginx)"] = [*devbin, command, "--json", "--scheduler", address,
                                                        *(f"{base}/{p.name}" for p in files)]
                times: dict[str, list[float]] = {w: [] for w in ways}
                peaks: dict[str, int] = dict.fromkeys(ways, 0)
                outs: dict[str, bytes] = {}
                sent = 0
                for i in range(args.repeat + 1):  # the first round is the warm-up
                    for way, argv in ways.items():
                        if served is not None and way.endswith("(nginx)"):
                            served[1].write_text("")
                        wall, peak, out = run(argv, pids if "--scheduler" in argv else [])
                        if served is not None and way.endswith("(nginx)"):
                            sent = sum(int(line.split()[1]) for line in served[1].read_text().splitlines())
                        outs.setdefault(way, out)
                        if i:
                            times[way].append(wall)
                            peaks[way] = max(peaks[way], peak)
                ref = outs["--jobs 1"]
                for way, out in outs.items():
                    if way.endswith("(nginx)"):
                        local = subprocess.run([*devbin, command, "--json", "--jobs", "1", *map(str, files)],
                                               capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                                               check=True).stdout
                        same = out == local.replace(str(folder).encode(), served[0].encode())  # type: ignore[index]
                    else:
                        same = out == ref
                    if not same:
                        raise SystemExit(f"bench: {command} {way}: output differs from --jobs 1")
                for way in ways:
                    note = f"; nginx sent {sent / 1e6:.0f} of {total / 1e6:.0f} MB" if way.endswith("(nginx)") else ""
                    rows.append((command, way, statistics.median(times[way]), peaks[way] / 1e6, note))
    print("\n| command | how | wall s (median) | vs --jobs 1 | peak MB, summed | same output |")
    print("|---|---|---|---|---|---|")
    base_t = {c: t for c, w, t, _, _ in rows if w == "--jobs 1"}
    for c, w, t, m, note in rows:
        print(f"| `{c}` | {w} | {t:.2f} | {t / base_t[c]:.2f} | {m:.0f} | yes{note} |")


if __name__ == "__main__":
    main()
