"""Listing and unbundling a bundle of many code objects: devbin against clang-offload-bundler-19.

    python3 benchmarks/bench_bundles.py [--repeat 11] [--profile] [--no-bytecode]

Compiles tests/fixtures/sample.cl with clang-19 for every processor in PROCESSORS, bundles the
objects with clang-offload-bundler-19 (binary, HIP layout: 4 KiB alignment, empty host entry),
and times (median wall time of fresh processes) `clang-offload-bundler-19 --list` against
`devbin list`, and unbundling every target (one bundler run naming all targets, one
`-output=` each) against one `devbin extract`.  The extracted files are compared byte for
byte.  `--profile` also prints where one `devbin extract` (a fresh process) spends its time.
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
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep the environment's PYTHONDONTWRITEBYTECODE (devbin's sources compiled on every run)")
    ap.add_argument("--profile", action="store_true", help="also profile one devbin extract in this process")
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
    if not args.no_bytecode:
        # As an installed package runs: from cached bytecode (kept out of the source tree), not recompiled
        # on every start, which PYTHONDONTWRITEBYTECODE=1 would otherwise cause (about 0.04 s a run).
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        subprocess.run([*env_devbin, "list", str(bundle)], check=True, capture_output=True)
    t_py = timed([sys.executable, "-c", "pass"], args.repeat)
    t_b = timed([bundler, "--list", "-type=o", f"-input={bundle}"], args.repeat)
    t_d = timed([*env_devbin, "list", str(bundle)], args.repeat)
    unb = work / "bundler"
    unb.mkdir()
    t_bu = timed([bundler, "--unbundle", "-type=o", f"-input={bundle}", "-targets=" + ",".join(targets),
                  *[f"-output={unb}/{g}.o" for g, _ in objs]], args.repeat)
    ext = work / "devbin"
    t_du = timed([*env_devbin, "extract", str(bundle), "-o", str(ext)], args.repeat)
    written = {p.name: p.read_bytes() for p in ext.iterdir()}
    for gfx, _ in objs:
        mine = next(v for k, v in written.items() if f".{gfx}." in k)
        assert mine == (unb / f"{gfx}.o").read_bytes(), gfx
    print(f"bundle: {bundle.stat().st_size} bytes, {len(objs)} code objects + host entry; median of {args.repeat}")
    print(f"{'operation':10} {'devbin':>8} {'bundler':>8} {'ratio':>6}")
    print(f"{'list':10} {t_d:8.3f} {t_b:8.3f} {t_d / t_b:6.2f}")
    print(f"{'unbundle':10} {t_du:8.3f} {t_bu:8.3f} {t_du / t_bu:6.2f}   (bundler: one run, all targets)")
    cached = "compiled on every run" if args.no_bytecode else "cached"
    print(f"python start-up (python -c pass): {t_py:.3f}; devbin's bytecode {cached}")
    if args.profile:
        profile(bundle, work / "profiled")


_PROFILE = """
import cProfile, io, pstats, sys, time
t = time.perf_counter()
from devbin.cli.main import command_module, main
command_module("extract")
import devbin.images.scan, devbin.formats.fatbin  # what extract imports inside run()
t_imp = time.perf_counter() - t
prof = cProfile.Profile()
t = time.perf_counter()
prof.runcall(main, ["extract", sys.argv[1], "-o", sys.argv[2]], io.StringIO())
t_run = time.perf_counter() - t
print(f"one process: imports {t_imp:.3f} s, extract itself {t_run:.3f} s (profiled; top 8 by own time)")
pstats.Stats(prof).sort_stats("tottime").print_stats(8)
"""


def profile(bundle: Path, out: Path) -> None:
    """Where one `devbin extract` spends its time, in a fresh process: imports, then the work itself."""
    subprocess.run([sys.executable, "-c", _PROFILE, str(bundle), str(out)], check=True)

if __name__ == "__main__":
    main()
