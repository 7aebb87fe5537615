"""Listing and unbundling a bundle of many code objects: devbin against clang-offload-bundler-19.

    python3 benchmarks/bench_bundles.py [--repeat 5]

Compiles tests/fixtures/sample.cl with clang-19 for every processor in PROCESSORS, bundles the
objects with clang-offload-bundler-19 (binary, HIP layout: 4 KiB alignment, empty host entry),
and times (median wall time of fresh processes) `clang-offload-bundler-19 --list` against
`devbin list`, and unbundling every target (one bundler run per target, as the bundler
requires) against one `devbin extract`.  The extracted files are compared byte for byte.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

PROCESSORS = ("gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c", "gfx940", "gfx941",
              "gfx942", "gfx1010", "gfx1011", "gfx1012", "gfx1013", "gfx1030", "gfx1031", "gfx1032", "gfx1033",
              "gfx1034", "gfx1035", "gfx1036", "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151",
              "gfx1200", "gfx1201")


def timed(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from devbin.tools import find_tool

    clang, bundler = find_tool("clang-19"), find_tool("clang-offload-bundler-19")
    if clang is None or bundler is None:
        raise SystemExit("bench: clang-19 and clang-offload-bundler-19 are needed")
    work = Path(tempfile.mkdtemp(prefix="devbin-bundles-"))
    objs = []
    for gfx in PROCESSORS:
        o = work / f"k.{gfx}.o"
        subprocess.run([clang, "-target", "amdgcn-amd-amdhsa", f"-mcpu={gfx}", "-nogpulib", "-O2", "-c", "-o", str(o),
                        str(ROOT / "tests" / "fixtures" / "sample.cl")], check=True)
        objs.append((gfx, o))
    host = "host-x86_64-unknown-linux-gnu"
    targets = [f"hipv4-amdgcn-amd-amdhsa--{g}" for g, _ in objs]
    bundle = work / "many.hipfb"
    subprocess.run([bundler, "-type=o", "-bundle-align=4096", f"-targets={host}," + ",".join(targets),
                    "-input=/dev/null", *[f"-input={o}" for _, o in objs], f"-output={bundle}"], check=True)
    env_devbin = [sys.executable, "-m", "devbin"]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    t_b = timed([bundler, "--list", "-type=o", f"-input={bundle}"], args.repeat)
    t_d = timed([*env_devbin, "list", str(bundle)], args.repeat)
    unb = work / "bundler"
    unb.mkdir()
    script = "; ".join(f"{bundler} --unbundle -type=o -input={bundle} -targets={t} -output={unb}/{g}.o"
                       for (g, _), t in zip(objs, targets, strict=True))
    t_bu = timed(["bash", "-c", script], args.repeat)
    ext = work / "devbin"
    t_du = timed([*env_devbin, "extract", str(bundle), "-o", str(ext)], args.repeat)
    written = {p.name: p.read_bytes() for p in ext.iterdir()}
    for gfx, _ in objs:
        mine = next(v for k, v in written.items() if f".{gfx}." in k)
        assert mine == (unb / f"{gfx}.o").read_bytes(), gfx
    print(f"bundle: {bundle.stat().st_size} bytes, {len(objs)} code objects + host entry; median of {args.repeat}")
    print(f"{'operation':10} {'devbin':>8} {'bundler':>8} {'ratio':>6}")
    print(f"{'list':10} {t_d:8.3f} {t_b:8.3f} {t_d / t_b:6.2f}")
    print(f"{'unbundle':10} {t_du:8.3f} {t_bu:8.3f} {t_du / t_bu:6.2f}   (bundler: one run per target)")


if __name__ == "__main__":
    main()
