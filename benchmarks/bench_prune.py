"""devbin prune of a deep-learning framework wheel: time, peak memory and bytes (not a test: run by hand).

    python3 benchmarks/bench_prune.py [--repeat 3] [--cache DIR] [--src SRC_DIR] [--keep sm_90] [--check]

Uses the pinned wheel torch==2.14.1 (cp311, manylinux_2_28 x86_64: 554,581,699 bytes, 13,043 members; its
torch/lib/libtorch_cuda.so is 502,842,281 bytes), downloaded into the cache folder with
``pip download --no-deps`` when not there.  Times, in fresh processes, one after another (--repeat each,
the median and the largest peak shown):

    devbin prune torch.whl --keep sm_90 -o out.whl            the whole wheel (issue 28 item 2: goal under
                                                              1 GB and 12 s)
    devbin prune libtorch_cuda.so --keep sm_90 -o out.so      its CUDA library alone (unzipped once into
                                                              the cache folder)

Wall time is the run's; peak memory is the process's largest resident set (``ru_maxrss`` of the one
process, from wait4(2): devbin prunes with --jobs 1, so the command is that one process; file pages
mapped and read count as resident there too).  Each output's size and sha256 are printed: the same
sha256 run to run (and before and after a change of the writer: ``--src`` runs another checkout's
``src`` folder, e.g. the commit before, for the before column).  ``--check`` also runs
``python -m zipfile -t`` on the pruned wheel and installs it with ``pip install --no-deps --target``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEEL = "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"
PIN = "torch==2.14.1"
LIBRARY = "torch/lib/libtorch_cuda.so"


def fetch(cache: Path) -> tuple[Path, Path]:
    """The pinned wheel and its CUDA library (unzipped beside it), downloaded once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    wheel = cache / WHEEL
    if not wheel.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                        "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "-d", str(cache), PIN],
                       check=True)
    lib = cache / "torch-2.14.1" / LIBRARY
    if not lib.exists():
        with zipfile.ZipFile(wheel) as z:
            z.extract(LIBRARY, cache / "torch-2.14.1")
    return wheel, lib


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak resident bytes of one fresh run of ``cmd`` (wait4's rusage of that process)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    if p.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({p.returncode}): {err[-2000:]}")
    return wall, usage.ru_maxrss * 1024


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def measure(name: str, src: Path, out: Path, keep: str, repeat: int, env: dict[str, str]) -> None:
    runs = []
    digests = set()
    for _ in range(repeat):
        out.unlink(missing_ok=True)
        runs.append(run_once([sys.executable, "-m", "devbin", "prune", str(src), "--keep", keep, "-o", str(out)],
                             env))
        digests.add(sha256(out))
    walls = [w for w, _ in runs]
    peak = max(m for _, m in runs)
    print(f"{name}: {src.stat().st_size:,} -> {out.stat().st_size:,} bytes; "
          f"wall median {statistics.median(walls):.2f} s "
          f"(runs {', '.join(f'{w:.2f}' for w in walls)}); peak RSS {peak / 2**20:,.0f} MiB; "
          f"sha256 {', '.join(sorted(digests))}{' (differs run to run!)' if len(digests) > 1 else ''}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=ROOT / ".bench-cache")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the devbin source folder to run")
    ap.add_argument("--keep", default="sm_90")
    ap.add_argument("--check", action="store_true", help="zipfile -t and pip install the pruned wheel")
    args = ap.parse_args()
    wheel, lib = fetch(args.cache)
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve())}
    with tempfile.TemporaryDirectory(dir=args.cache) as tmp:
        out_whl, out_lib = Path(tmp) / WHEEL, Path(tmp) / "libtorch_cuda.so"
        measure("wheel", wheel, out_whl, args.keep, args.repeat, env)
        measure("libtorch_cuda.so", lib, out_lib, args.keep, args.repeat, env)
        if args.check:
            subprocess.run([sys.executable, "-m", "zipfile", "-t", str(out_whl)], check=True, stdout=subprocess.DEVNULL)
            target = Path(tmp) / "site"
            subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--quiet",
                            "--target", str(target), str(out_whl)], check=True)
            print(f"check: zipfile -t clean; pip install --no-deps --target: "
                  f"{sum(f.stat().st_size for f in target.rglob('*') if f.is_file()):,} bytes installed")


if __name__ == "__main__":
    main()
