"""Peak memory of ``devbin list`` and ``devbin size`` on whole wheels (issue 29, item 1; run by hand).

    python3 benchmarks/bench_memory.py [--cache DIR] [--src SRC] [--record] [--only NAME] [--keep ARCH]

Inputs: pinned wheels downloaded into the cache folder when not there (``pip download --no-deps``):

* ``nvidia-cufft-cu12==11.4.1.4`` (201 MB; ``libcufft.so.11`` 290 MB, 24 k images in ``.ldata`` fatbins),
* ``nvidia-curand-cu12==10.3.10.19`` (68 MB; ``libcurand.so.10`` 167 MB),
* ``nvidia-cublas-cu12==12.8.4.1`` (594 MB; ``libcublasLt.so.12`` and ``libcublas.so.12``, 0.9 GB together),
* ``torch==2.14.1`` (554 MB, the CPython 3.11 manylinux_2_28 wheel; ``size --json`` prints 200 MB: every
  function of ``libtorch_cuda.so``).

Each of ``devbin list WHEEL``, ``devbin list --json WHEEL``, ``devbin size WHEEL`` and ``devbin size --json
WHEEL`` (``--keep ARCH`` adds ``devbin size --keep ARCH --json WHEEL``) runs once, a fresh
``python3 -m devbin`` with the default ``--jobs`` (every processor), with ``PYTHONPATH`` set to ``--src``
(default: this checkout's ``src``).

**Memory** is the peak of the resident set summed over the command's whole process tree: this script
samples ``/proc/PID/status`` (``VmRSS``) of the command and of every descendant (``/proc/PID/task/*/children``)
every 5 ms and keeps the largest sum.  A spike shorter than the interval can be missed, so the largest
``VmHWM`` of one process (the kernel's own high-water mark, as of that process's last sample) is printed
beside it: a floor of the true peak.  RSS counts the pages of
memory-mapped files that were touched (the wheel, a member's temporary file) as well as the heap.

**Output** is checked: ``--record`` stores each command's stdout in the cache folder
(``memory-reference/``), and a later run compares its stdout with the recorded one byte for byte (run
``--record`` with the code before a change, then the bench with the code after).  The goals are the
issue's: ``list`` at most 300 MB, ``size`` at most 600 MB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (pip requirement, the wheel's file-name prefix)
WHEELS = (
    ("nvidia-cufft-cu12==11.4.1.4", "nvidia_cufft_cu12-11.4.1.4-"),
    ("nvidia-curand-cu12==10.3.10.19", "nvidia_curand_cu12-10.3.10.19-"),
    ("nvidia-cublas-cu12==12.8.4.1", "nvidia_cublas_cu12-12.8.4.1-"),
    ("torch==2.14.1", "torch-2.14.1-cp311-"),
)
GOAL_MB = {"list": 300, "size": 600}
INTERVAL = 0.005


def fetch(cache: Path, requirement: str, prefix: str) -> Path:
    """The wheel of ``requirement``, downloaded once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(prefix + "*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), requirement],
                       check=True)
        found = sorted(cache.glob(prefix + "*.whl"))
    return found[0]


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return out


def _status_kb(pid: int, keys: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in keys:
                    out[k] = int(v.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


@dataclass
class Run:
    peak_mb: float  # the largest sampled sum of VmRSS over the tree
    hwm_mb: float  # the largest VmHWM of one process, as last sampled
    processes: int  # the most processes seen at once
    wall: float
    stdout: bytes
    rc: int


def measure(cmd: list[str], env: dict[str, str]) -> Run:
    """Run ``cmd`` and sample its process tree's summed RSS until it ends."""
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        peak = hwm = 0
        most = 0
        while p.poll() is None:
            pids = _tree(p.pid)
            total = 0
            for pid in pids:
                s = _status_kb(pid, ("VmRSS", "VmHWM"))
                total += s.get("VmRSS", 0)
                hwm = max(hwm, s.get("VmHWM", 0))
            peak = max(peak, total)
            most = max(most, len(pids))
            time.sleep(INTERVAL)
        wall = time.perf_counter() - t
        out.seek(0)
        data = out.read()
    return Run(peak / 1024, hwm / 1024, most, wall, data, p.returncode)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "devbin-bench"),
                    help="where the wheels are downloaded and the reference outputs kept")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the devbin src folder to run (default: this checkout's)")
    ap.add_argument("--record", action="store_true", help="store the outputs as the reference (the code before)")
    ap.add_argument("--only", action="append", default=[], help="only wheels whose requirement contains this")
    ap.add_argument("--keep", help="also run size --keep ARCH")
    args = ap.parse_args()
    cache = Path(args.cache)
    refs = cache / "memory-reference"
    refs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": args.src}
    commands: list[tuple[str, list[str]]] = [("list", ["list"]), ("list", ["list", "--json"]), ("size", ["size"]),
                                             ("size", ["size", "--json"])]
    if args.keep:
        commands.append(("size", ["size", "--keep", args.keep, "--json"]))
    rows = []
    for requirement, prefix in WHEELS:
        if args.only and not any(o in requirement for o in args.only):
            continue
        whl = fetch(cache, requirement, prefix)
        mb = whl.stat().st_size / 1e6
        for goal_key, argv in commands:
            r = measure([sys.executable, "-m", "devbin", *argv, str(whl)], env)
            ref = refs / f"{prefix}{'_'.join(a.strip('-') for a in argv)}.out"
            if args.record:
                ref.write_bytes(r.stdout)
                same = "recorded"
            else:
                same = ("same" if ref.read_bytes() == r.stdout else "DIFFERS") if ref.exists() else "no reference"
            goal = GOAL_MB[goal_key]
            rows.append((requirement, f"{mb:.0f}", "devbin " + " ".join(argv), f"{r.peak_mb:.0f}", f"{r.hwm_mb:.0f}",
                         str(r.processes), f"{r.wall:.1f}", f"<= {goal}", "met" if r.peak_mb <= goal else "not met",
                         same if r.rc == 0 else f"exit {r.rc}"))
            print(" | ".join(rows[-1]), flush=True)
    print()
    print("| wheel | MB | command | peak RSS MB (sum) | max VmHWM MB (1 process) | processes | wall s | goal MB "
          "| met? | output |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
