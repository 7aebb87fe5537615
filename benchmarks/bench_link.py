"""``devbin link`` at scale, and against the vendor linkers on real multi-object programs.

    python3 benchmarks/bench_link.py [--repeat 3] [--series 10000,30000,100000,300000,1000000]
                                     [--tracemalloc] [--profile] [--no-real]

1. **Big program** (``gen_link_program.py``): 1,000 relocatable AMDGPU objects, 100,000
   functions, 1,000,000 direct call edges (plus indirect sites, address-taken functions,
   recursion), written by devbin's ELF writer with devbin's sections and cached under
   ``benchmarks/.cache``.  ``devbin.link.core.link(paths, with_reach=False)`` in a fresh child
   process: the time of each pass (``LinkResult.passes``) and the child's peak RSS
   (``ru_maxrss``; with ``--tracemalloc`` also a second child's tracemalloc peak of Python
   allocations, a slower run).  The vendor linker step is excluded (nothing to link: the code
   bytes are zeros).
2. **Growth**: the same generator at 10k ... 1M edges, *functions and objects scaled with the
   edges* (10 edges per function, 100 functions per object: 10 objects / 1,000 functions at
   10k edges, 1,000 / 100,000 at 1M), median of ``--repeat`` children each; time per edge and
   the ratio of time per edge at the largest size to the smallest (1.0 = linear).
3. **Real programs**: generated CUDA and OpenCL sources (8 files x 250 ``noinline`` device
   functions in chains of 10, each chain's head also calling a chain tail in the next file; one
   kernel per file calling every chain head), compiled once
   (cached): ``nvcc -rdc=true -cubin -arch=sm_90`` then ``nvlink -arch=sm_90``; ``clang-19 -c
   -mcpu=gfx90a`` then ``ld.lld-19 -shared``.  The vendor linker's wall time (median of
   fresh processes) against devbin's passes on the same inputs (in process, median of
   ``--repeat`` links after one warm-up) and a fresh ``devbin``-importing process doing the
   same link (Python start-up and imports included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

from gen_link_program import CACHE, generate  # noqa: E402

PASSES = ("load", "resolve", "import", "graph", "dce", "resources")

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {src!r})
from pathlib import Path
trace = {trace!r}
if trace:
    import tracemalloc
from devbin.link.core import link
paths = [Path(p) for p in Path({listing!r}).read_text().split()]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if trace:
    tracemalloc.start()
t = time.perf_counter()
r = link(paths, with_reach=False)
wall = time.perf_counter() - t
peak = tracemalloc.get_traced_memory()[1] if trace else None
funcs = sum(1 for n in r.graph.nodes.values() if n.is_function)
edges = sum(len(n.calls) for n in r.graph.nodes.values())
print(json.dumps({{"passes": {{p.name: p.seconds for p in r.passes}}, "wall": wall, "rss_kib": resource.getrusage(
    resource.RUSAGE_SELF).ru_maxrss, "rss_before_kib": base, "traced_peak": peak, "units": len(r.resolution.units),
    "functions": funcs, "edges": edges, "kept": len(r.dce.kept), "removed": len(r.dce.removed),
    "kernels": len(r.usage), "dynamic": sum(u.dynamic for u in r.usage), "errors": len(r.errors)}}))
"""


def child_link(paths: list[Path], *, trace: bool = False, profile: Path | None = None) -> dict[str, object]:
    """Link ``paths`` in a fresh Python process; its passes, wall time and memory."""
    listing = paths[0].parent / "inputs.txt"
    listing.write_text("\n".join(str(p) for p in paths))
    code = _CHILD.format(src=str(ROOT / "src"), trace=trace, listing=str(listing))
    cmd = [sys.executable, "-c", code]
    if profile is not None:
        code = code.replace("r = link(paths, with_reach=False)",
                            f"import cProfile\ncProfile.run('r = link(paths, with_reach=False)', {str(profile)!r})")
        cmd = [sys.executable, "-c", code]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def _passes(r: dict[str, object]) -> dict[str, float]:
    p = r["passes"]
    assert isinstance(p, dict)
    return {k: float(v) for k, v in p.items()}


def big(repeat: int, trace: bool, profile: bool) -> None:
    paths = generate(1000, 100_000, 1_000_000)
    runs = [child_link(paths) for _ in range(repeat)]
    r = min(runs, key=lambda x: sum(_passes(x).values()))
    passes = {k: statistics.median(_passes(x)[k] for x in runs) for k in PASSES}
    total = sum(passes.values())
    print(f"## big program: {r['units']} objects, {r['functions']} functions, {r['edges']} call edges "
          f"(median of {repeat} fresh processes)\n")
    print(f"kernels {r['kernels']} ({r['dynamic']} with a dynamic stack), kept {r['kept']}, removed {r['removed']}, "
          f"errors {r['errors']}\n")
    print("| pass | seconds | share |\n|---|---|---|")
    for k in PASSES:
        print(f"| {k} | {passes[k]:.2f} | {passes[k] / total:.0%} |")
    print(f"| **all passes** | **{total:.2f}** | |\n")
    print(f"peak RSS of the child {int(r['rss_kib']) / 1024:.0f} MiB (after imports, before linking: "  # type: ignore[call-overload]
          f"{int(r['rss_before_kib']) / 1024:.0f} MiB); "  # type: ignore[call-overload]
          f"input bytes {sum(p.stat().st_size for p in paths) / 2**20:.1f} MiB")
    if trace:
        t = child_link(paths, trace=True)
        print(f"tracemalloc peak (Python allocations during link()): {int(t['traced_peak']) / 2**20:.0f} MiB "  # type: ignore[call-overload]
              f"(that run: {sum(_passes(t).values()):.1f} s under tracing)")
    if profile:
        import pstats

        prof = CACHE / "bench_link.prof"
        child_link(paths, profile=prof)
        print("\ncProfile of one link (tottime, top 20):\n```")
        pstats.Stats(str(prof)).sort_stats("tottime").print_stats(20)
        print("```")
    print()


def growth(sizes: list[int], repeat: int) -> None:
    print(f"## growth: functions = edges / 10, objects = edges / 1,000 (median of {repeat} fresh processes)\n")
    print("| edges | objects | functions | " + " | ".join(PASSES) + " | all passes (s) | µs per edge | peak RSS MiB |")
    print("|---" * (len(PASSES) + 7) + "|")
    per_edge: list[float] = []
    for e in sizes:
        paths = generate(e // 1000, e // 10, e)
        runs = [child_link(paths) for _ in range(repeat)]
        passes = {k: statistics.median(_passes(x)[k] for x in runs) for k in PASSES}
        total = sum(passes.values())
        per_edge.append(total / e)
        rss = statistics.median(int(x["rss_kib"]) for x in runs) / 1024  # type: ignore[call-overload]
        print(f"| {e:,} | {e // 1000:,} | {e // 10:,} | " + " | ".join(f"{passes[k]:.3f}" for k in PASSES)
              + f" | {total:.2f} | {total / e * 1e6:.1f} | {rss:.0f} |")
    print(f"\ntime per edge at {sizes[-1]:,} / at {sizes[0]:,}: {per_edge[-1] / per_edge[0]:.2f} (1.0 = linear)\n")


# --------------------------------------------------------------------------- real programs

FILES, FUNCS = 8, 250


def _source(f: int, cuda: bool) -> str:
    """File ``f`` of the real program: CUDA C++ or OpenCL C, the same call structure in both."""
    declare = 'extern "C" {' if cuda else None
    device = "__device__ __noinline__ int" if cuda else "__attribute__((noinline)) int"
    lines = [declare] if declare else []
    if f + 1 < FILES:
        lines += [f"{'extern __device__ ' if cuda else ''}int g{f + 1}_{i}(int x);" for i in range(FUNCS)]
    for i in reversed(range(FUNCS)):
        body = f"x * {i + 3} + {i}"
        if i % 10 != 9:  # chains of 10 functions; the head of each also calls a chain tail in the next file
            body += f" + g{f}_{i + 1}(x ^ {i})"
        if f + 1 < FILES and i % 10 == 0:
            body += f" + g{f + 1}_{i + 9}(x + 1)"
        lines.append(f"{device} g{f}_{i}(int x) {{ volatile int a[{1 + i % 4}]; a[0] = x; return {body} + a[0]; }}")
    arg = "o[threadIdx.x]" if cuda else "o[0]"
    calls = " + ".join(f"g{f}_{i}({arg})" for i in range(0, FUNCS, 10))
    if cuda:
        lines += [f"__global__ void k{f}(int *o) {{ o[threadIdx.x] = {calls}; }}", "}"]
    else:
        lines.append(f"__kernel void k{f}(__global int *o) {{ o[0] = {calls}; }}")
    return "\n".join(lines) + "\n"


def _build(kind: str) -> list[Path] | None:
    from devbin.tools import find_tool

    out = CACHE / f"real-v2-{kind}-{FILES}x{FUNCS}"
    ext = "cubin" if kind == "nvidia" else "o"
    objs = [out / f"m{f}.{ext}" for f in range(FILES)]
    if (out / "done").exists():
        return objs
    out.mkdir(parents=True, exist_ok=True)
    for f, obj in enumerate(objs):
        if kind == "nvidia":
            nvcc = find_tool("nvcc", versions=())
            if nvcc is None:
                return None
            src = out / f"m{f}.cu"
            src.write_text(_source(f, cuda=True))
            subprocess.run([nvcc, "-rdc=true", "-cubin", "-arch=sm_90", "-O3", "-o", str(obj), str(src)], check=True)
        else:
            clang = find_tool("clang-19")
            if clang is None:
                return None
            src = out / f"m{f}.cl"
            src.write_text(_source(f, cuda=False))
            subprocess.run([clang, "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-mcpu=gfx90a",
                            "-c", "-o", str(obj), str(src)], check=True)
    (out / "done").write_text("built\n")
    return objs


def _median_wall(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def real(repeat: int) -> None:
    from devbin.link.core import link
    from devbin.tools import find_tool

    print(f"## real programs: {FILES} objects x {FUNCS} device functions + 1 kernel each\n")
    print("| target | vendor linker | vendor (s) | devbin passes (s) | passes / vendor | devbin fresh process (s) "
          "| process / vendor | biggest pass |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, tool, args in (("nvidia", "nvlink", ["-arch=sm_90"]), ("amdgpu", "ld.lld-19", ["-shared"])):
        exe = find_tool(tool, versions=()) if kind == "nvidia" else find_tool(tool)
        objs = _build(kind)
        if exe is None or objs is None:
            print(f"| {kind} | {tool}: not installed, skipped | | | | | | |")
            continue
        out = objs[0].parent / ("linked.cubin" if kind == "nvidia" else "linked.so")
        vendor = _median_wall([exe, *args, "-o", str(out), *map(str, objs)], repeat)
        link(objs)  # warm-up (imports)
        runs = [link(objs) for _ in range(repeat)]
        passes = {k: statistics.median(next(p.seconds for p in r.passes if p.name == k) for r in runs) for k in PASSES}
        total = sum(passes.values())
        code = (f"import sys; sys.path.insert(0, {str(ROOT / 'src')!r}); from devbin.link.core import link; "
                f"link({[str(o) for o in objs]!r})")
        fresh = _median_wall([sys.executable, "-c", code], repeat)
        top = max(passes, key=lambda k: passes[k])
        r = runs[0]
        print(f"| {kind} ({len(r.graph.nodes)} nodes, {sum(len(n.calls) for n in r.graph.nodes.values())} edges) "
              f"| `{tool} {' '.join(args)}` | {vendor:.3f} | {total:.3f} | {total / vendor:.2f} | {fresh:.3f} "
              f"| {fresh / vendor:.2f} | {top} {passes[top]:.3f} |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--series", default="10000,30000,100000,300000,1000000")
    ap.add_argument("--tracemalloc", action="store_true", help="also measure the tracemalloc peak (a slower run)")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the big link")
    ap.add_argument("--no-big", action="store_true")
    ap.add_argument("--no-real", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}\n")
    if not args.no_big:
        big(args.repeat, args.tracemalloc, args.profile)
    growth([int(x) for x in args.series.split(",")], args.repeat)
    if not args.no_real:
        real(max(args.repeat, 5))


if __name__ == "__main__":
    main()
