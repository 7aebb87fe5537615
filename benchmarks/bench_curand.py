"""devbin against cuobjdump and cubloaty on a large real fat library (not a test: run by hand).

    python3 benchmarks/bench_curand.py [--repeat 5] [--cache DIR]

Downloads the pinned wheel nvidia-curand-cu12==10.3.10.19 (68 MB; libcurand.so.10: 167 MB,
143 cubins sm_50-sm_121, 10 compressed PTX) and cubloaty (PyPI) into the cache folder, then
times, in one run, each pair of commands (median wall time of --repeat runs, each a fresh
process, output to /dev/null or a scratch folder):

    devbin list                      vs  cuobjdump -lelf
    devbin resources                 vs  cuobjdump -res-usage
    devbin extract --kind cubin      vs  cuobjdump -xelf all
    devbin list --json               vs  cubloaty --format json

and prints the ratios (devbin / peer; below 1 means devbin is faster).  It also checks that the
outputs agree (image counts, resource lines, extracted bytes) so a fast wrong answer cannot pass.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

CURAND = "nvidia-curand-cu12==10.3.10.19"
CUBLOATY = "cubloaty==0.2.0b1"


def fetch_curand(cache: Path) -> Path:
    """libcurand.so.10 from the pinned wheel, downloaded once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    lib = cache / "libcurand.so.10"
    if not lib.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), CURAND],
                       check=True)
        whl = next(cache.glob("nvidia_curand_cu12-10.3.10.19-*.whl"))
        with zipfile.ZipFile(whl) as z:
            lib.write_bytes(z.read("nvidia/curand/lib/libcurand.so.10"))
    return lib


def fetch(cache: Path) -> tuple[Path, list[str]]:
    lib = fetch_curand(cache)
    site = cache / "cubloaty-site"
    if not (site / "cubloaty").exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(site), CUBLOATY], check=True)
    cubloaty = [sys.executable, "-c", "import sys; sys.argv[0] = 'cubloaty'; from cubloaty.cli import main; main()"]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return lib, cubloaty


def timed(cmd: list[str], repeat: int, cwd: Path | None = None, fresh: Path | None = None) -> tuple[float, str]:
    times = []
    out = ""
    for _ in range(repeat):
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)
            fresh.mkdir(parents=True)
        t = time.perf_counter()
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t)
        if p.returncode != 0:
            raise SystemExit(f"bench: {' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
        out = p.stdout
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "devbin-bench"))
    args = ap.parse_args()
    from devbin.tools import find_tool

    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        raise SystemExit("bench: cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    lib, cubloaty = fetch(Path(args.cache))
    devbin = [sys.executable, "-m", "devbin"]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), os.environ["PYTHONPATH"]])
    scratch = Path(tempfile.mkdtemp(prefix="devbin-bench-"))
    base, _ = timed([sys.executable, "-c", "pass"], args.repeat)
    rows = []

    t_d, out_d = timed([*devbin, "list", "--json", str(lib)], args.repeat)
    images = json.loads(out_d)["images"]
    t_c, out_c = timed([cuobjdump, "-lelf", str(lib)], args.repeat)
    assert sum(i["kind"] == "cubin" for i in images) == len(out_c.splitlines()), "ELF counts differ"
    t_d, _ = timed([*devbin, "list", str(lib)], args.repeat)
    rows.append(("list", "devbin list", t_d, "cuobjdump -lelf", t_c, 0.5))

    t_d, out_d = timed([*devbin, "resources", "--format", "cuobjdump", str(lib)], args.repeat)
    t_c, out_c = timed([cuobjdump, "-res-usage", str(lib)], args.repeat)
    assert out_d == out_c, "resource usage differs from cuobjdump"
    rows.append(("resources", "devbin resources", t_d, "cuobjdump -res-usage", t_c, 0.5))

    a, b = scratch / "cuobjdump", scratch / "devbin"
    t_c, _ = timed(["bash", "-c", f"cd {a} && {cuobjdump} -xelf all {lib} >/dev/null"], args.repeat, fresh=a)
    t_d, _ = timed([*devbin, "extract", "--kind", "cubin", str(lib), "-o", str(b)], args.repeat, fresh=b)
    cmp = filecmp.dircmp(a, b)
    assert not cmp.left_only and not cmp.right_only and not cmp.diff_files, "extracted files differ"
    assert all(filecmp.cmp(a / n, b / n, shallow=False) for n in os.listdir(a)), "extracted bytes differ"
    rows.append(("extract", "devbin extract --kind cubin", t_d, "cuobjdump -xelf all", t_c, 1.0))

    t_d, _ = timed([*devbin, "list", "--json", str(lib)], args.repeat)
    t_c, _ = timed([*cubloaty, str(lib), "--format", "json"], args.repeat)
    rows.append(("list --json", "devbin list --json", t_d, "cubloaty --format json", t_c, 1.0))

    print(f"libcurand.so.10: {lib.stat().st_size} bytes, {len(images)} images; median of {args.repeat} runs")
    print(f"python start-up alone (python -c pass): {base:.3f} s")
    print(f"{'operation':12} {'devbin':>8} {'peer':>8} {'ratio':>6} {'target':>7}  peer command")
    for op, _, td, peer, tc, target in rows:
        ok = "ok" if td / tc <= target else "MISSED"
        print(f"{op:12} {td:8.3f} {tc:8.3f} {td / tc:6.2f} {'<=' + str(target):>7}  {peer}  [{ok}]")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
