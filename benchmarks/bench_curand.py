"""devbin against cuobjdump (and cubloaty) on a large real fat library, a small zstd library and a folder.

    python3 benchmarks/bench_curand.py [--repeat 5] [--cache DIR] [--base SRC] [--jobs N] [--profile]

Not a test: run by hand.  Every pair of commands runs in the same session, alternately, each run a
fresh process; the figures are medians of --repeat runs (after one warm-up run each): CPU time of
the whole process (user + system, its worker processes included), wall time and peak RSS (of the
largest single process, from /usr/bin/time; cuobjdump's on the same file beside devbin's).  The
ratio is devbin / peer: below 1, devbin is faster.

Inputs, built or downloaded once into the cache folder:

* ``libcurand.so.10`` of the pinned wheel ``nvidia-curand-cu12==10.3.10.19`` (167 MB, 143 cubins
  sm_50-sm_121, 10 compressed PTX) against ``cuobjdump -lelf -lptx``, ``-res-usage`` and ``-xelf all``;
  ``devbin list --json`` against ``cubloaty --format json``;
* two zstd-compressed libraries against ``cuobjdump -all ...``: a small one built with nvcc
  ``--compress-mode=size`` from the test sources (4 translation units x 12 SM architectures +
  compute_75 PTX: 52 images of 4-20 KB, 1.1 MB), and one of 55 of libcurand's cubins (its 11
  translation units for sm_75/80/90/100/120, 0.4-2 MB each) compressed by ``fatbinary
  --compress-mode=size`` into the ``.nv_fatbin`` of a shared object (6.8 MB);
* a folder of libraries (hard links to the three above, --copies times each: 9 files, 522 MB)
  against a shell loop of cuobjdump over the same files: ``devbin list DIR`` and ``devbin resources
  --format cuobjdump --all DIR`` with ``--jobs N`` (default: every processor), on wall time.

Every answer is checked, so a fast wrong one cannot pass: the ELF count of the listing, ``devbin
resources --format cuobjdump`` byte-identical to ``cuobjdump -res-usage`` (the folder's to the loop's
output), the extracted files identical name for name and byte for byte.  ``--base SRC`` also times
another devbin checkout's ``src`` (the code before a change) on the same commands.  ``--profile``
prints, for each devbin command on libcurand, where its CPU time goes (cProfile in one process,
by module and by function).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
sys.path.insert(0, str(SRC))

CURAND = "nvidia-curand-cu12==10.3.10.19"
CUBLOATY = "cubloaty==0.2.0b1"
ARCHS = ("75", "80", "86", "87", "88", "89", "90", "100", "110", "103", "120", "121")
ZSTD_SOURCES = ("kernels.cu", "spill.cu", "extfn.cu", "link_nv/lib.cu")


def fetch_curand(cache: Path) -> tuple[Path, Path]:
    """libcurand.so.10 and its wheel, downloaded once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    lib = cache / "libcurand.so.10"
    whl = next(cache.glob("nvidia_curand_cu12-10.3.10.19-*.whl"), None)
    if whl is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), CURAND],
                       check=True)
        whl = next(cache.glob("nvidia_curand_cu12-10.3.10.19-*.whl"))
    if not lib.exists():
        with zipfile.ZipFile(whl) as z:
            lib.write_bytes(z.read("nvidia/curand/lib/libcurand.so.10"))
    return lib, whl


def fetch_cubloaty(cache: Path) -> list[str]:
    site = cache / "cubloaty-site"
    if not (site / "cubloaty").exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(site), CUBLOATY], check=True)
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(site)!r}); sys.argv[0] = 'cubloaty'; "
            "from cubloaty.cli import main; main()"]


def build_zstd_library(cache: Path) -> Path:
    """A small shared library whose fatbins are zstd-compressed (nvcc --compress-mode=size), built once."""
    lib = cache / "libzstd_kernels.so"
    if lib.exists():
        return lib
    from devbin.tools import find_tool
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise SystemExit("bench: nvcc not found (needed to build the zstd-compressed library)")
    work = Path(tempfile.mkdtemp(prefix="devbin-bench-zstd-"))
    gencode = [a for sm in ARCHS for a in ("-gencode", f"arch=compute_{sm},code=sm_{sm}")]
    gencode += ["-gencode", "arch=compute_75,code=compute_75"]
    objects = []
    for i, src in enumerate(ZSTD_SOURCES):
        obj = work / f"tu{i}.o"
        subprocess.run([nvcc, *gencode, "--compress-mode=size", "-Xcompiler", "-fPIC", "-c", "-o", str(obj),
                        str(ROOT / "tests" / "sources" / src)], check=True, capture_output=True)
        objects.append(str(obj))
    subprocess.run([nvcc, "-shared", "-o", str(work / lib.name), *objects], check=True, capture_output=True)
    shutil.move(work / lib.name, lib)
    shutil.rmtree(work, ignore_errors=True)
    return lib


def build_zstd_curand(cache: Path, curand: Path, cuobjdump: str) -> Path:
    """A shared library of 55 zstd-compressed cubins (libcurand's 11 translation units for sm_75, sm_80,
    sm_90, sm_100, sm_120, written by ``fatbinary --compress-mode=size`` into ``.nv_fatbin``), built once."""
    lib = cache / "libcurand_zstd55.so"
    if lib.exists():
        return lib
    from devbin.tools import find_tool
    fatbinary, objcopy, gcc = find_tool("fatbinary"), shutil.which("objcopy"), shutil.which("gcc")
    if fatbinary is None or objcopy is None or gcc is None:
        raise SystemExit("bench: fatbinary, objcopy and gcc are needed to build the zstd library of 55 images")
    work = Path(tempfile.mkdtemp(prefix="devbin-bench-zstd55-"))
    subprocess.run([cuobjdump, "-xelf", "all", str(curand)], cwd=work, check=True, capture_output=True)
    images = [f"--image3=kind=elf,sm={sm},file={f}" for sm in ("75", "80", "90", "100", "120")
              for f in sorted(work.glob(f"*.sm_{sm}.cubin"))]
    subprocess.run([fatbinary, "--create=curand55.fatbin", "-64", "--compress-mode=size", *images], cwd=work,
                   check=True, capture_output=True)
    subprocess.run([objcopy, "-I", "binary", "-O", "elf64-x86-64", "-B", "i386:x86-64", "--rename-section",
                    ".data=.nv_fatbin,alloc,load,readonly,data,contents", "--set-section-alignment", ".nv_fatbin=8",
                    "curand55.fatbin", "fatbin.o"], cwd=work, check=True, capture_output=True)
    subprocess.run([gcc, "-shared", "-Wl,-z,noexecstack", "-o", lib.name, "fatbin.o"], cwd=work, check=True,
                   capture_output=True)
    shutil.move(work / lib.name, lib)
    shutil.rmtree(work, ignore_errors=True)
    return lib


def build_folder(cache: Path, libs: list[Path], copies: int) -> Path:
    """A folder of libraries: ``copies`` hard links to each of ``libs`` (no copy of the bytes)."""
    folder = cache / f"folder-{copies}x{len(libs)}"
    if not folder.exists():
        part = folder.with_suffix(".part")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir()
        for i in range(copies):
            for lib in libs:
                os.link(lib, part / f"{lib.stem}.{i}.so")
        part.rename(folder)
    return folder


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Run:
    """Medians of one command's runs: CPU (user + system, children included), wall; the largest peak RSS."""

    cpu: float
    wall: float
    peak_mb: float
    out: str


def run_once(cmd: list[str], cwd: Path | None, metrics: Path) -> tuple[float, float, float, str]:
    """CPU and wall seconds and peak MB of one fresh process, and its stdout.  The CPU time is what this
    process's reaped children used meanwhile (the command and every process it waited for: a pool's
    workers); /usr/bin/time starts the command so that the peak is its own (a child vfork'ed from
    this benchmark would report the benchmark's peak)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(metrics), *cmd], cwd=cwd, capture_output=True,
                       check=False)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({p.returncode}): "
                         f"{p.stderr.decode(errors='replace')[-2000:]}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu, wall, int(metrics.read_text().split()[-1]) / 1024, p.stdout.decode(errors="replace")


def timed_pair(a: list[str], b: list[str], repeat: int, fresh_a: Path | None = None,
               fresh_b: Path | None = None) -> tuple[Run, Run]:
    """``a`` and ``b`` in turn, one warm-up each, then ``repeat`` times each; ``fresh_*`` (the command's
    working folder) is emptied before each of its runs."""
    metrics = Path(tempfile.mkstemp(prefix="devbin-bench-time-")[1])
    runs: dict[int, list[tuple[float, float, float, str]]] = {0: [], 1: []}
    for i in range(repeat + 1):
        for k, (cmd, fresh) in enumerate(((a, fresh_a), (b, fresh_b))):
            if fresh is not None:
                shutil.rmtree(fresh, ignore_errors=True)
                fresh.mkdir(parents=True)
            cpu, wall, peak, out = run_once(cmd, fresh, metrics)
            if i:
                runs[k].append((cpu, wall, peak, out))
    metrics.unlink()
    res = tuple(Run(statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs),
                    max(r[2] for r in rs), rs[-1][3]) for rs in (runs[0], runs[1]))
    return res[0], res[1]


def need(ok: bool, what: str) -> None:
    """A wrong answer stops the benchmark (not an assert: it must hold under python -O too)."""
    if not ok:
        raise SystemExit(f"bench: wrong answer: {what}")


def same_files(a: Path, b: Path) -> bool:
    cmp = filecmp.dircmp(a, b)
    return (not cmp.left_only and not cmp.right_only
            and all(filecmp.cmp(a / n, b / n, shallow=False) for n in os.listdir(a)))


# --------------------------------------------------------------------------- the benchmark


@dataclass(frozen=True)
class Row:
    group: str
    op: str
    devbin: Run
    peer: Run
    peer_cmd: str
    target: float
    by: str  # "cpu" or "wall": what the target is on
    base: Run | None = None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "devbin-bench"))
    ap.add_argument("--base", help="another devbin checkout's src folder, timed on the same commands")
    ap.add_argument("--jobs", type=int, default=None, help="devbin --jobs for the folder (default: every processor)")
    ap.add_argument("--copies", type=int, default=3, help="copies of each library in the folder (default 3)")
    ap.add_argument("--profile", action="store_true", help="where devbin's time goes on libcurand (cProfile)")
    args = ap.parse_args()
    from devbin.tools import find_tool

    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        raise SystemExit("bench: cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    cache = Path(args.cache)
    lib, _ = fetch_curand(cache)
    cubloaty = fetch_cubloaty(cache)
    small = build_zstd_library(cache)
    zstd55 = build_zstd_curand(cache, lib, cuobjdump)
    folder = build_folder(cache, [lib, zstd55, small], args.copies)
    if args.profile:
        profile(lib)
        return
    # devbin runs from cached bytecode, as an installed package does (this machine may set
    # PYTHONDONTWRITEBYTECODE=1, which would recompile devbin on every start).
    pycache = Path(tempfile.mkdtemp(prefix="devbin-bench-pyc-"))
    os.environ["PYTHONPYCACHEPREFIX"] = str(pycache)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

    def devbin(src: Path) -> list[str]:
        return ["env", f"PYTHONPATH={src}", sys.executable, "-m", "devbin"]

    srcs = [SRC] + ([Path(args.base).resolve()] if args.base else [])
    for src in srcs:  # compile once
        subprocess.run([*devbin(src), "--version"], check=True, capture_output=True)
    scratch = Path(tempfile.mkdtemp(prefix="devbin-bench-"))
    rows: list[Row] = []
    jobs = [] if args.jobs is None else ["--jobs", str(args.jobs)]

    def pair(group: str, op: str, argv: list[str], peer: list[str], target: float, by: str = "cpu",
             fresh: bool = False, check: object = None) -> Row:
        fa, fb = (scratch / "devbin", scratch / "peer") if fresh else (None, None)
        mine, theirs = timed_pair([*devbin(SRC), *argv], peer, args.repeat, fa, fb)
        if callable(check):
            check(mine, theirs, fa, fb)
        base = None
        if args.base:  # older code may have no --jobs: it runs in one process anyway
            old = [w for i, w in enumerate(argv) if w != "--jobs" and (i == 0 or argv[i - 1] != "--jobs")]
            base, _ = timed_pair([*devbin(srcs[1]), *old], ["true"], args.repeat, fa, None)
        row = Row(group, op, mine, theirs, " ".join(Path(peer[0]).name if i == 0 else w for i, w in enumerate(peer)),
                  target, by, base)
        rows.append(row)
        key = "cpu" if by == "cpu-diff" else by
        print(f"  {group:10} {op:15} devbin {getattr(mine, key):.3f} s, peer {getattr(theirs, key):.3f} s "
              f"({key}): {getattr(mine, key) / getattr(theirs, key):.2f}", file=sys.stderr)
        return row

    # -- start-up
    for op, argv in (("--version", ["--version"]), ("--help", ["--help"])):
        pair("start-up", op, argv, [sys.executable, "-c", "pass"], 0.030, by="cpu-diff")
    # -- libcurand
    L = str(lib)

    def same_res(m: Run, t: Run, *_: object) -> None:
        need(m.out == t.out, "devbin resources --format cuobjdump differs from cuobjdump -res-usage")

    def same_x(m: Run, t: Run, fa: Path, fb: Path) -> None:
        need(same_files(fb, fa), "extracted files differ from cuobjdump's")

    def same_count(m: Run, t: Run, *_: object) -> None:
        need(sum(line.split()[2] == "cubin" for line in m.out.splitlines()[1:-1]) ==
             sum(line.startswith("ELF file") for line in t.out.splitlines()), "ELF counts differ")

    # One file: CPU time, one process (--jobs 1; a pool spends more CPU, to save wall time).
    pair("curand", "list", ["list", L], [cuobjdump, "-lelf", "-lptx", L], 0.3, check=same_count)
    pair("curand", "resources", ["resources", "--jobs", "1", "--format", "cuobjdump", L],
         [cuobjdump, "-res-usage", L], 0.3, check=same_res)
    pair("curand", "extract", ["extract", "--jobs", "1", "--kind", "cubin", L, "-o", "."],
         [cuobjdump, "-xelf", "all", L], 0.9, fresh=True, check=same_x)
    pair("curand", "resources, pool", ["resources", *jobs, "--format", "cuobjdump", L],
         [cuobjdump, "-res-usage", L], 1.0, by="wall", check=same_res)
    pair("curand", "list --json", ["list", "--json", L], [*cubloaty, L, "--format", "json"], 1.0)
    # -- the zstd libraries, against cuobjdump -all
    for group, path in (("zstd small", small), ("zstd 55", zstd55)):
        S = str(path)
        pair(group, "list", ["list", "--all", S], [cuobjdump, "-all", "-lelf", "-lptx", S], 0.5, check=same_count)
        pair(group, "resources", ["resources", "--jobs", "1", "--all", "--format", "cuobjdump", S],
             [cuobjdump, "-all", "-res-usage", S], 0.8, check=same_res)
        pair(group, "extract", ["extract", "--jobs", "1", "--all", S, "-o", "."],
             [cuobjdump, "-all", "-xelf", "all", "-xptx", "all", S], 1.0, fresh=True, check=same_x)
    # -- the folder, against a shell loop of cuobjdump: wall time (devbin uses every processor)
    D = str(folder)
    loop = f'for f in "{D}"/*; do "{cuobjdump}" -all '
    pair("folder", "list", ["list", "--all", *jobs, D], ["sh", "-c", loop + '-lelf -lptx "$f"; done'], 0.5,
         by="wall")
    pair("folder", "resources", ["resources", "--all", "--format", "cuobjdump", *jobs, D],
         ["sh", "-c", loop + '-res-usage "$f"; done'], 0.5, by="wall", check=same_res)
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(pycache, ignore_errors=True)
    report(rows, [lib, small, zstd55], folder, args)


def report(rows: list[Row], libs: list[Path], folder: Path, args: argparse.Namespace) -> None:
    n_folder = len(list(folder.iterdir()))
    size = sum(p.stat().st_size for p in folder.iterdir())
    print("; ".join(f"{p.name} {p.stat().st_size:,} bytes" for p in libs)
          + f"; folder {n_folder} files, {size:,} bytes; {os.cpu_count()} processors; median of {args.repeat} runs")
    base = " | base cpu | base/now" if args.base else ""
    print(f"| input | operation | devbin cpu | devbin wall | devbin MB | peer cpu | peer wall | peer MB | ratio | "
          f"target | peer command{base} |")
    print("|---" * (11 + (2 if args.base else 0)) + "|")
    for r in rows:
        if r.by == "cpu-diff":
            diff = r.devbin.cpu - r.peer.cpu
            ratio, target, ok = f"+{diff * 1000:.0f} ms", f"<= +{r.target * 1000:.0f} ms", diff <= r.target
        else:
            value = getattr(r.devbin, r.by) / getattr(r.peer, r.by)
            ratio, target, ok = f"{value:.2f} ({r.by})", f"<= {r.target}", value <= r.target
        extra = f" | {r.base.cpu:.3f} | {r.base.cpu / r.devbin.cpu:.2f}" if r.base else ""
        print(f"| {r.group} | {r.op} | {r.devbin.cpu:.3f} | {r.devbin.wall:.3f} | {r.devbin.peak_mb:.0f} | "
              f"{r.peer.cpu:.3f} | {r.peer.wall:.3f} | {r.peer.peak_mb:.0f} | {ratio} {'met' if ok else 'MISSED'} | "
              f"{target} | `{r.peer_cmd[:60]}`{extra} |")
    print(json.dumps([{"input": r.group, "op": r.op, "cpu": r.devbin.cpu, "wall": r.devbin.wall,
                       "peer_cpu": r.peer.cpu, "peer_wall": r.peer.wall} for r in rows]), file=sys.stderr)


def profile(lib: Path) -> None:
    """cProfile of each command in this process (imports included, the first run): by module, then function."""
    import cProfile
    import io
    import pstats
    from collections import defaultdict

    from devbin.cli.main import main as devbin_main
    out_dir = Path(tempfile.mkdtemp(prefix="devbin-bench-prof-"))
    for argv in (["list", str(lib)], ["resources", "--format", "cuobjdump", "--jobs", "1", str(lib)],
                 ["extract", "--kind", "cubin", "--jobs", "1", str(lib), "-o", str(out_dir)]):
        prof = cProfile.Profile()
        prof.enable()
        devbin_main(argv, io.StringIO())
        prof.disable()
        stats = pstats.Stats(prof)
        total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
        by_module: dict[str, float] = defaultdict(float)
        for (path, _, _), v in stats.stats.items():  # type: ignore[attr-defined]
            mod = path.split("/src/devbin/")[-1] if "/src/devbin/" in path else (
                "<builtin>" if path == "~" else "python:" + Path(path).name)
            by_module[mod] += v[2]
        words = [w for w in argv if w not in (str(lib), str(out_dir), "-o")]
        print(f"\n### devbin {' '.join(words)} libcurand.so.10: {total:.3f} s (own time, profiled)")
        for mod, t in sorted(by_module.items(), key=lambda kv: -kv[1])[:12]:
            print(f"  {t:7.3f} s {100 * t / total:5.1f} %  {mod}")
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
        print("\n".join(line for line in s.getvalue().splitlines() if line.strip().startswith(tuple("0123456789"))))
    shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
