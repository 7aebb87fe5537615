"""``devbin.load``: time and bytes to the first kernel, lazy against eager, on a 10,000-kernel library.

    python3 benchmarks/bench_load.py [--repeat 5] [--files 10] [--kernels-per-file 1000] [--functions 256] [--curand]

The library: ``--files`` OpenCL files of ``--kernels-per-file`` kernels each (10 x 1,000 =
10,000 kernels), each kernel calling two of ``--functions`` shared device functions
(exported, default visibility) in a separate device-function library, which call a shared
hidden helper and read two shared variables.  Generated, compiled with ``clang-19 -O2
-mcpu=gfx90a`` and linked each alone with ``ld.lld-19 -shared --emit-relocs`` (11 code
objects; the kernels reach the library through their GOTs), in parallel, cached under
``benchmarks/.cache``.  The peer, measured in the same run: **eager** loading of the same files
(``Executable("gfx90a")``), and eager loading of the same objects linked without
``--emit-relocs`` (what ``ld.lld -shared`` gives by default; the importer reads fewer
relocations).

Each measurement is in a fresh child process (imports excluded: the loader's modules, also those it
would import on first use, are imported before the clock starts; the files read into memory
first): ``Executable(...)``, ``load_code_object`` x 11, ``freeze()``, ``symbol(kernel)`` for a
kernel in the middle of the library.  Time: the median of ``--repeat`` children.  Bytes: device
memory mapped when the kernel's address is returned.  Target: lazy <= 1/20 of eager in both.

``--curand`` adds a real library: the sm_90 cubins of ``libcurand.so.10`` from the pinned wheel
``nvidia-curand-cu12==10.3.10.19`` (``bench_curand.fetch_curand``, cached under ``benchmarks/.cache``;
11 modules, 6.8 MB, 296 kernels and 304 device functions).  As the CUDA driver does, each module
is an executable of its own (they define the same template instantiations).  Eager: every module
loaded and frozen; lazy: every module loaded and frozen lazily; then the lookup of a kernel in the
largest module.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CFLAGS = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-mcpu=gfx90a", "-c"]

#: Imported before the clock starts in both modes (the rest of the loader's modules, imported on first use).
IMPORTS = """
import devbin.formats.devsec.elf, devbin.importers, devbin.load.lazy, devbin.packaging.selection
devbin.importers.load_vendor_attribute_names()
"""

CHILD = r"""
import json, sys, time
sys.path.insert(0, {src!r})
from devbin.load import Executable
""" + IMPORTS + r"""
paths, lazy, kernel = {paths!r}, {lazy!r}, {kernel!r}
blobs = [(p, open(p, "rb").read()) for p in paths]
t0 = time.perf_counter()
e = Executable("gfx90a", lazy=lazy)
for p, b in blobs:
    e.load_code_object(b, name=p)
t1 = time.perf_counter()
e.freeze()
t2 = time.perf_counter()
k = e.symbol(kernel)
t3 = time.perf_counter()
st = e.stats()
print(json.dumps({{"total": t3 - t0, "load": t1 - t0, "freeze": t2 - t1, "lookup": t3 - t2,
                  "bytes": st["bytes_mapped"], "bytes_total": sum(len(b) for _, b in blobs),
                  "functions": st.get("functions_loaded"), "functions_total": st.get("functions_total"),
                  "address": k.address}}))
"""


def _library(n_files: int, per_file: int, n_funcs: int) -> str:
    out = ["#define EXPORT __attribute__((visibility(\"default\")))",
           "EXPORT __global float lib_bias = 0.5f;", "EXPORT __global int lib_calls = 0;",
           "__attribute__((noinline)) static float lib_helper(float x) { return x * x + lib_bias; }"]
    for i in range(n_funcs):
        out.append(f"__attribute__((noinline)) EXPORT float lib_f{i}(float x) "
                   f"{{ __atomic_fetch_add(&lib_calls, 1, __ATOMIC_RELAXED); return lib_helper(x) * {i + 1}.0f; }}")
    return "\n".join(out) + "\n"


def _kernels(file_no: int, per_file: int, n_funcs: int) -> str:
    out = ["#define EXPORT __attribute__((visibility(\"default\")))"]
    out += [f"extern EXPORT float lib_f{i}(float);" for i in range(n_funcs)]
    for j in range(per_file):
        k = file_no * per_file + j
        a, b = k % n_funcs, (k * 7 + 3) % n_funcs
        out.append(f"__kernel void k{k}(__global float *v) {{ int t = __builtin_amdgcn_workitem_id_x(); "
                   f"v[t] = lib_f{a}(v[t]) + lib_f{b}(v[t] + {j}.0f); }}")
    return "\n".join(out) + "\n"


def _run(argv: list[str]) -> None:
    p = subprocess.run(argv, capture_output=True, text=True, check=False)
    if p.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{p.stderr}")


def build(n_files: int, per_file: int, n_funcs: int) -> tuple[list[Path], list[Path]]:
    """(the --emit-relocs .so files, the same without), library first; built once, cached."""
    from devbin.tools import find_tool

    clang, lld = find_tool("clang-19", versions=()), find_tool("ld.lld-19", versions=())
    if clang is None or lld is None:
        raise SystemExit("bench_load needs clang-19 and ld.lld-19")
    cache = HERE / ".cache" / f"load-v1-{n_files}x{per_file}-{n_funcs}"
    cache.mkdir(parents=True, exist_ok=True)
    names = ["lib"] + [f"k{i}" for i in range(n_files)]
    jobs = []
    for n in names:
        if (cache / f"{n}.so").exists() and (cache / f"{n}.plain.so").exists():
            continue
        src = cache / f"{n}.cl"
        src.write_text(_library(n_files, per_file, n_funcs) if n == "lib" else
                       _kernels(int(n[1:]), per_file, n_funcs))
        jobs.append(n)

    def one(n: str) -> None:
        _run([clang, *CFLAGS, "-o", str(cache / f"{n}.o"), str(cache / f"{n}.cl")])
        _run([lld, "-shared", "--emit-relocs", "-o", str(cache / f"{n}.so"), str(cache / f"{n}.o")])
        _run([lld, "-shared", "-o", str(cache / f"{n}.plain.so"), str(cache / f"{n}.o")])

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        list(pool.map(one, jobs))
    return [cache / f"{n}.so" for n in names], [cache / f"{n}.plain.so" for n in names]


def measure(paths: list[Path], lazy: bool, kernel: str, repeat: int) -> dict[str, float]:
    code = CHILD.format(src=str(ROOT / "src"), paths=[str(p) for p in paths], lazy=lazy, kernel=kernel)
    runs = []
    for _ in range(repeat):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        runs.append(json.loads(p.stdout))
    out = {k: statistics.median(r[k] for r in runs) for k in ("total", "load", "freeze", "lookup")}
    out.update({k: runs[0][k] for k in ("bytes", "bytes_total", "functions", "functions_total", "address")})
    return out


CURAND_CHILD = r"""
import json, sys, time
sys.path.insert(0, {src!r})
from devbin.load import Executable
""" + IMPORTS + r"""
from devbin.packaging.selection import select
sel = select(open({lib!r}, "rb").read(), "sm_90", name="libcurand.so.10")
mods = [(c.name, bytes(c.image.data())) for c in sel.choices]
big = max(range(len(mods)), key=lambda i: len(mods[i][1]))
lazy, kernel = {lazy!r}, {kernel!r}
t0 = time.perf_counter()
exes = []
for name, blob in mods:
    e = Executable("sm_90", lazy=lazy)
    e.load_code_object(blob, name=name)
    exes.append(e)
t1 = time.perf_counter()
for e in exes:
    e.freeze()
t2 = time.perf_counter()
k = exes[big].symbol(kernel) if kernel else None
t3 = time.perf_counter()
stats = [e.stats() for e in exes]
kernels = [s.name for s in exes[big].symbols() if s.kind.word == "kernel"] if not kernel else []
print(json.dumps({{"total": t3 - t0, "load": t1 - t0, "freeze": t2 - t1, "lookup": t3 - t2,
                  "bytes": sum(s["bytes_mapped"] for s in stats), "bytes_total": sum(len(b) for _, b in mods),
                  "functions": sum(s.get("functions_loaded", 0) for s in stats) if lazy else None,
                  "functions_total": sum(s.get("functions_total", 0) for s in stats) if lazy else None,
                  "address": k.address if k else None, "modules": len(mods), "kernels": kernels,
                  "big": mods[big][0], "big_size": len(mods[big][1])}}))
"""


def measure_curand(lib: Path, lazy: bool, kernel: str, repeat: int) -> dict[str, float]:
    code = CURAND_CHILD.format(src=str(ROOT / "src"), lib=str(lib), lazy=lazy, kernel=kernel)
    runs = []
    for _ in range(repeat):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        runs.append(json.loads(p.stdout))
    out = {k: statistics.median(r[k] for r in runs) for k in ("total", "load", "freeze", "lookup")}
    out.update({k: runs[0][k] for k in ("bytes", "bytes_total", "functions", "functions_total", "address",
                                        "modules", "kernels", "big", "big_size")})
    return out


def curand(repeat: int) -> None:
    sys.path.insert(0, str(HERE))
    from bench_curand import fetch_curand

    lib = fetch_curand(HERE / ".cache" / "curand")
    probe = measure_curand(lib, False, "", 1)
    kernels = probe["kernels"]
    kernel = kernels[len(kernels) // 2]
    lazy = measure_curand(lib, True, kernel, repeat)
    eager = measure_curand(lib, False, kernel, repeat)
    assert lazy["address"] == eager["address"], "lazy and eager must give the same address"
    print(f"\nlibcurand.so.10 (nvidia-curand-cu12==10.3.10.19), sm_90: {eager['modules']} modules, "
          f"{eager['bytes_total']:,} bytes of cubins, one executable each; first kernel {kernel[:60]}... "
          f"in {eager['big']} ({eager['big_size']:,} bytes, {len(kernels)} kernels); median of {repeat}\n")
    print("| mode | time to first kernel | load / freeze / lookup | bytes mapped | functions loaded |")
    print("|---|---|---|---|---|")
    for name, m in (("lazy", lazy), ("eager", eager)):
        f = f"{m['functions']} of {m['functions_total']}" if m["functions"] is not None else "all"
        print(f"| {name} | {m['total'] * 1e3:.1f} ms | {m['load'] * 1e3:.1f} / {m['freeze'] * 1e3:.1f} / "
              f"{m['lookup'] * 1e3:.1f} ms | {m['bytes']:,} | {f} |")
    print(f"\nlazy/eager: time {lazy['total'] / eager['total']:.4f} (1/{eager['total'] / lazy['total']:.1f}), "
          f"bytes {lazy['bytes'] / eager['bytes']:.5f} (1/{eager['bytes'] / max(lazy['bytes'], 1):.0f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--kernels-per-file", type=int, default=1000)
    ap.add_argument("--functions", type=int, default=256)
    ap.add_argument("--curand", action="store_true", help="also the sm_90 cubins of libcurand (pinned wheel)")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    er, plain = build(a.files, a.kernels_per_file, a.functions)
    kernel = f"k{a.files * a.kernels_per_file // 2 + 7}"
    lazy = measure(er, True, kernel, a.repeat)
    eager = measure(er, False, kernel, a.repeat)
    eager_plain = measure(plain, False, kernel, a.repeat)
    assert lazy["address"] == eager["address"], "lazy and eager must give the same address"
    n = a.files * a.kernels_per_file
    print(f"library: {n} kernels in {a.files} code objects + a library of {a.functions} device functions; "
          f"first kernel {kernel}; median of {a.repeat} fresh processes\n")
    print("| mode | time to first kernel | load / freeze / lookup | bytes mapped | functions loaded |")
    print("|---|---|---|---|---|")
    for name, m in (("lazy (--emit-relocs)", lazy), ("eager (same files)", eager),
                    ("eager (plain ld.lld -shared)", eager_plain)):
        f = f"{m['functions']} of {m['functions_total']}" if m["functions"] is not None else "all"
        print(f"| {name} | {m['total'] * 1e3:.1f} ms | {m['load'] * 1e3:.1f} / {m['freeze'] * 1e3:.1f} / "
              f"{m['lookup'] * 1e3:.1f} ms | {m['bytes']:,} | {f} |")
    best = min(eager["total"], eager_plain["total"])
    bbest = min(eager["bytes"], eager_plain["bytes"])
    print(f"\nlazy/eager: time {lazy['total'] / best:.4f} (1/{best / lazy['total']:.0f}), "
          f"bytes {lazy['bytes'] / bbest:.5f} (1/{bbest / max(lazy['bytes'], 1):.0f}); target <= 1/20 in both "
          f"(against the faster eager run)")
    if a.curand:
        curand(a.repeat)


if __name__ == "__main__":
    main()
