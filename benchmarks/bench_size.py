"""devbin size against cubloaty --format json on libcurand and on a whole wheel (not a test: run by hand).

    python3 benchmarks/bench_size.py [--repeat 5] [--cache DIR]

Uses the pinned wheel nvidia-curand-cu12==10.3.10.19 and cubloaty==0.2.0b1, downloaded into the
cache folder when not there (bench_curand's fetch_curand and fetch_cubloaty).  Times, in one run, each pair
(--repeat fresh processes each, run alternately, one warm-up each; wall and CPU time, children included):

    devbin size --json libcurand.so.10      vs  cubloaty libcurand.so.10 --format json
    devbin size --json the wheel            vs  the wheel's device libraries unzipped to a scratch
                                                folder, then cubloaty --format json on each (cubloaty
                                                reads no wheels), in one process

and prints the ratios (devbin / cubloaty; target <= 0.5).  Before timing it checks that both tools
state the same facts: the device bytes (cubloaty's device_file_size), the images and uncompressed bytes
per architecture (a PTX file's size is what cuobjdump -xptx writes, which ends at the PTX's NUL, where
cubloaty counts the decoded entry: one byte more per PTX image), and the kernels per architecture.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_curand import ROOT, fetch_cubloaty, fetch_curand  # noqa: E402  (one download and cache for both)


def fetch(cache: Path) -> tuple[Path, list[str]]:
    """libcurand.so.10 and the cubloaty command, downloaded once into ``cache``; cubloaty's folder is put on
    PYTHONPATH for the wheel script below, which imports it."""
    lib, _ = fetch_curand(cache)
    cubloaty = fetch_cubloaty(cache)
    site = cache / "cubloaty-site"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return lib, cubloaty

#: cubloaty over every device library of a wheel, in one process: unzip, then its CLI per library.
CUBLOATY_WHEEL = """
import io, json, sys, tempfile, zipfile, contextlib
from pathlib import Path
from cubloaty.cli import main
out = []
with tempfile.TemporaryDirectory() as d, zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if ".so" in name.rsplit("/", 1)[-1] or name.endswith((".a", ".o", ".cubin", ".fatbin")):
            path = Path(z.extract(name, d))
            buf = io.StringIO()
            sys.argv = ["cubloaty", str(path), "--format", "json"]
            with contextlib.redirect_stdout(buf):
                main()
            out.append({"member": name, **json.loads(buf.getvalue())})
print(json.dumps(out))
"""


def run_once(cmd: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system of the process and every process it waited for) of one
    fresh run of ``cmd``, and what it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, p.stdout


def paired(a: list[str], b: list[str], repeat: int) -> tuple[tuple[float, float, str], tuple[float, float, str]]:
    """``a`` and ``b`` run alternately (one warm-up each, then ``repeat`` pairs), so that a machine
    whose load changes during the run weighs on both alike: (median wall, median CPU, output) of each."""
    runs: tuple[list[tuple[float, float, str]], list[tuple[float, float, str]]] = ([], [])
    for k in range(repeat + 1):
        for cmd, out in zip((a, b), runs, strict=True):
            r = run_once(cmd)
            if k:
                out.append(r)
    a_runs, b_runs = runs
    return ((statistics.median(r[0] for r in a_runs), statistics.median(r[1] for r in a_runs), a_runs[-1][2]),
            (statistics.median(r[0] for r in b_runs), statistics.median(r[1] for r in b_runs), b_runs[-1][2]))


def facts_devbin(doc: dict[str, Any]) -> dict[str, Any]:
    kernels: dict[str, set[str]] = {}
    for f in doc["files"]:
        for i in f["images"]:
            kernels.setdefault(i["arch"], set()).update(fn["name"] for fn in i["functions"] if fn["kind"] == "kernel")
    return {"device_bytes": doc["totals"]["device_bytes"],
            "archs": {a["arch"]: (a["images"], a["size"]) for a in doc["by_arch"]},
            "kernels": {a: len(k) for a, k in kernels.items() if k}}


def facts_cubloaty(docs: list[dict[str, Any]]) -> dict[str, Any]:
    archs: dict[str, tuple[int, int]] = {}
    kernels: dict[str, int] = {}
    for d in docs:
        for c in d["components"]:
            n, size = archs.get(c["arch"], (0, 0))
            nul = c["images"] if c["kind"] == "ptx" else 0  # cubloaty counts the PTX's final NUL
            archs[c["arch"]] = (n + c["images"], size + c["size"] - nul)
            if c["kind"] == "sass":
                kernels[c["arch"]] = kernels.get(c["arch"], 0) + c["kernels"]
    return {"device_bytes": sum(d["device_file_size"] for d in docs), "archs": archs, "kernels": kernels}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "devbin-bench"))
    args = ap.parse_args()
    cache = Path(args.cache)
    lib, cubloaty = fetch(cache)
    wheel = next(cache.glob("nvidia_curand_cu12-10.3.10.19-*.whl"))
    devbin = [sys.executable, "-m", "devbin"]
    # as installed: byte-compiled once (under PYTHONDONTWRITEBYTECODE every run would compile every module)
    compileall.compile_dir(ROOT / "src" / "devbin", quiet=1)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), os.environ["PYTHONPATH"]])
    rows = []
    for label, target, peer, peer_label in (
            ("libcurand.so.10", lib, [*cubloaty, str(lib), "--format", "json"], "cubloaty --format json"),
            (wheel.name, wheel, [sys.executable, "-c", CUBLOATY_WHEEL, str(wheel)],
             "unzip + cubloaty --format json per library")):
        (t_d, c_d, out_d), (t_c, c_c, out_c) = paired([*devbin, "size", "--json", str(target)], peer, args.repeat)
        peer_docs = json.loads(out_c)
        ours, theirs = facts_devbin(json.loads(out_d)), facts_cubloaty(
            peer_docs if isinstance(peer_docs, list) else [peer_docs])
        for key in ("device_bytes", "archs", "kernels"):
            assert ours[key] == theirs[key], f"{label}: {key} differ:\n devbin   {ours[key]}\n cubloaty {theirs[key]}"
        rows.append((label, t_d, t_c, c_d, c_c, peer_label))
    print(f"median of {args.repeat} fresh processes, run in pairs (devbin, peer, devbin, ...), seconds of wall time "
          "and of CPU (user + system, child processes included); same facts checked (device bytes, images and "
          "bytes per architecture, kernels per architecture)")
    print(f"{'input':58} {'devbin':>7} {'peer':>7} {'ratio':>6} {'CPU d':>7} {'CPU p':>7} {'ratio':>6}  peer")
    for label, td, tc, cd, cc, peer in rows:
        print(f"{label:58} {td:7.3f} {tc:7.3f} {td / tc:6.2f} {cd:7.3f} {cc:7.3f} {cd / cc:6.2f}  {peer}  "
              f"[target <= 0.5: {'ok' if td / tc <= 0.5 else 'MISSED'}]")


if __name__ == "__main__":
    main()
