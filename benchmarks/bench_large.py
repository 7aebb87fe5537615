"""``devbin resources`` and ``extract`` against cuobjdump on large libraries and a 10 MB one (issue 29, item 2).

    python3 benchmarks/bench_large.py [--repeat 7] [--cache DIR] [--wheels DIR] [--base SRC]

Not a test: run by hand.  Inputs, downloaded or built once into the cache folder:

* ``libcurand.so.10`` of the pinned wheel ``nvidia-curand-cu12==10.3.10.19`` (167 MB: 143 cubins, 10
  compressed PTX; the same file as ``bench_curand.py``);
* ``libcufft.so.11`` of the pinned wheel ``nvidia-cufft-cu12==11.4.1.4`` (291 MB: one fatbin in
  ``.nv_fatbin`` and 24,454 more in ``.ldata``, 7,7xx cubins in all).  cuobjdump 13.x reads only the
  ``.nv_fatbin`` one (``cuobjdump -lelf`` lists one ELF), so on this file the peer does a tiny part of
  devbin's work: its ``resources`` rows are printed for the record, the output checked against ``--base``
  (the code before the change), not against cuobjdump, and ``extract`` is not timed on it;
* a 10 MB library: libcurand's 11 sm_100 cubins (``cuobjdump -xelf all``) written uncompressed by
  ``fatbinary`` into the ``.nv_fatbin`` of a shared object (objcopy, gcc), 9.7 MB.

Each operation runs as fresh processes in turn - devbin, cuobjdump, and with ``--base`` the other
checkout's devbin - one warm-up round, then ``--repeat`` rounds; the ratio devbin / cuobjdump is taken
round by round (pairing keeps it meaningful when the machine's speed drifts) and the median printed.
**CPU** is user + system time of the process and every process it waited for (``RUSAGE_CHILDREN``:
a pool's workers included), **wall** a monotonic clock around the run; peak is the largest single
process's RSS (``/usr/bin/time``), not a sum.  devbin runs as an installed console script does: the
interpreter itself (``sys.executable``, not a version manager's shim), from cached bytecode.
``extract`` writes into an empty folder each run (both tools), so neither replaces files.

Every answer is checked, so that a fast wrong one cannot pass: ``resources --format cuobjdump``
byte-identical to ``cuobjdump -res-usage`` (curand, the 10 MB library) and to ``--base``'s (all
three), the extracted files identical to cuobjdump's and ``--base``'s name for name and byte for byte.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_curand import fetch_curand, same_files  # noqa: E402  (one cache layout, one comparison)

CUFFT = "nvidia-cufft-cu12==11.4.1.4"


def fetch_cufft(cache: Path, wheels: Path | None) -> Path:
    """libcufft.so.11 of the pinned wheel, from ``wheels`` (a folder of downloaded wheels) or downloaded once."""
    lib = cache / "libcufft.so.11"
    if lib.exists():
        return lib
    cache.mkdir(parents=True, exist_ok=True)
    pattern = "nvidia_cufft_cu12-11.4.1.4-*.whl"
    whl = next((wheels.glob(pattern) if wheels else iter(())), None) or next(cache.glob(pattern), None)
    if whl is None:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), CUFFT],
                       check=True)
        whl = next(cache.glob(pattern))
    with zipfile.ZipFile(whl) as z:
        lib.write_bytes(z.read("nvidia/cufft/lib/libcufft.so.11"))
    return lib


def build_sm100_library(cache: Path, curand: Path, cuobjdump: str) -> Path:
    """A 9.7 MB shared library: libcurand's 11 sm_100 cubins in one uncompressed fatbin in ``.nv_fatbin``."""
    lib = cache / "libcurand_sm100.so"
    if lib.exists():
        return lib
    from devbin.tools import find_tool
    fatbinary, objcopy, gcc = find_tool("fatbinary"), shutil.which("objcopy"), shutil.which("gcc")
    if fatbinary is None or objcopy is None or gcc is None:
        raise SystemExit("bench: fatbinary, objcopy and gcc are needed to build the 10 MB library")
    with tempfile.TemporaryDirectory(prefix="devbin-bench-sm100-") as tmp:
        work = Path(tmp)
        subprocess.run([cuobjdump, "-xelf", "all", str(curand)], cwd=work, check=True, capture_output=True)
        images = [f"--image3=kind=elf,sm=100,file={f.name}" for f in sorted(work.glob("*.sm_100.cubin"))]
        subprocess.run([fatbinary, "--create=sm100.fatbin", "-64", *images], cwd=work, check=True,
                       capture_output=True)
        subprocess.run([objcopy, "-I", "binary", "-O", "elf64-x86-64", "-B", "i386:x86-64", "--rename-section",
                        ".data=.nv_fatbin,alloc,load,readonly,data,contents", "--set-section-alignment",
                        ".nv_fatbin=8", "sm100.fatbin", "fatbin.o"], cwd=work, check=True, capture_output=True)
        subprocess.run([gcc, "-shared", "-Wl,-z,noexecstack", "-o", lib.name, "fatbin.o"], cwd=work, check=True,
                       capture_output=True)
        shutil.move(work / lib.name, lib)
    return lib


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class One:
    cpu: float
    wall: float
    peak_mb: float
    out: bytes


def run_once(cmd: list[str], env: dict[str, str] | None, cwd: Path | None, metrics: Path) -> One:
    """One fresh process (through /usr/bin/time, for its own peak RSS): CPU of it and what it waited for."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(metrics), *cmd], env=env, cwd=cwd,
                       capture_output=True, check=False)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.decode(errors='replace')[-2000:]}")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return One(cpu, wall, int(metrics.read_text().split()[-1]) / 1024, p.stdout)


@dataclass(frozen=True)
class Result:
    runs: dict[str, list[One]]  # "new", "peer", "base"

    def med(self, who: str, key: str) -> float:
        return statistics.median(getattr(r, key) for r in self.runs[who])

    def ratio(self, who: str, key: str) -> float:
        """The median of the round-by-round ratios ``who`` / peer."""
        return statistics.median(getattr(a, key) / getattr(b, key)
                                 for a, b in zip(self.runs[who], self.runs["peer"], strict=True))

    def peak(self, who: str) -> float:
        return max(r.peak_mb for r in self.runs[who])


def rounds(cmds: dict[str, tuple[list[str], dict[str, str] | None]], repeat: int, fresh: Path | None) -> Result:
    """Each command in turn per round (one warm-up round); ``fresh``: each runs in a new empty folder
    under it (kept for the checks: the last round's)."""
    runs: dict[str, list[One]] = {k: [] for k in cmds}
    with tempfile.TemporaryDirectory(prefix="devbin-bench-time-") as tmp:
        metrics = Path(tmp) / "time"
        for i in range(repeat + 1):
            for who, (cmd, env) in cmds.items():
                cwd = None
                if fresh is not None:
                    cwd = fresh / who
                    shutil.rmtree(cwd, ignore_errors=True)
                    cwd.mkdir(parents=True)
                one = run_once(cmd, env, cwd, metrics)
                if i:
                    runs[who].append(one)
    return Result(runs)


def need(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"bench: wrong answer: {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "devbin-bench"))
    ap.add_argument("--wheels", help="a folder of already downloaded wheels to take the pinned cuFFT wheel from")
    ap.add_argument("--base", help="another devbin checkout's src folder (the code before a change), timed alike")
    ap.add_argument("--only", help="comma-separated inputs to run: curand, cufft, 10mb (default: all)")
    ap.add_argument("--pass", dest="pass_", action="store_true",
                    help="instead: in one process, the compiled pass against the readers, copy_file_range against "
                         "write, and -X importtime's top entries (pass_mode)")
    args = ap.parse_args()
    from devbin.tools import find_tool

    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        raise SystemExit("bench: cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    cache = Path(args.cache)
    curand, _ = fetch_curand(cache)
    inputs = {"curand": curand, "cufft": fetch_cufft(cache, Path(args.wheels) if args.wheels else None),
              "10mb": build_sm100_library(cache, curand, cuobjdump)}
    if args.only:
        inputs = {k: v for k, v in inputs.items() if k in args.only.split(",")}
    if args.pass_:
        pass_mode(inputs, args.repeat)
        return
    with tempfile.TemporaryDirectory(prefix="devbin-bench-pyc-") as pyc, \
            tempfile.TemporaryDirectory(prefix="devbin-bench-") as tmp:
        compare(args, cuobjdump, inputs, Path(pyc), Path(tmp))


def compare(args: argparse.Namespace, cuobjdump: str, inputs: dict[str, Path], pycache: Path, scratch: Path) -> None:
    """The timed rounds of every operation on ``inputs`` and the table (bytecode cached in ``pycache``, the
    extracted files in ``scratch``: both temporary folders of the caller, removed whatever happens)."""
    srcs = {"new": SRC} | ({"base": Path(args.base).resolve()} if args.base else {})
    envs = {}
    for who, src in srcs.items():
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "DEVBIN_PURE_PYTHON")}
        envs[who] = env | {"PYTHONPATH": str(src), "PYTHONPYCACHEPREFIX": str(pycache)}
        subprocess.run([sys.executable, "-m", "devbin", "--version"], env=envs[who], check=True, capture_output=True)
    rows: list[tuple[str, str, str, Result]] = []

    def op(name: str, lib: str, argv: list[str], peer: list[str], key: str, fresh: bool,
           check: Callable[[Result, Path], None]) -> None:
        cmds = {who: ([sys.executable, "-m", "devbin", *argv], envs[who]) for who in srcs}
        cmds = {"new": cmds["new"], "peer": (peer, None), **({"base": cmds["base"]} if "base" in cmds else {})}
        res = rounds(cmds, args.repeat, scratch if fresh else None)
        check(res, scratch)
        rows.append((lib, name, key, res))
        line = f"  {lib:7} {name:34} devbin {res.med('new', key):.3f} s, cuobjdump {res.med('peer', key):.3f} s " \
               f"({key}): {res.ratio('new', key):.2f}"
        if "base" in res.runs:
            line += f"; before {res.med('base', key):.3f} s ({res.ratio('base', key):.2f})"
        print(line, file=sys.stderr, flush=True)

    def same_out(vs_peer: bool) -> Callable[[Result, Path], None]:
        def check(res: Result, _: Path) -> None:
            new = res.runs["new"][-1].out
            if vs_peer:
                need(new == res.runs["peer"][-1].out, "resources --format cuobjdump differs from cuobjdump -res-usage")
            if "base" in res.runs:
                need(new == res.runs["base"][-1].out, "resources --format cuobjdump differs from --base's")
        return check

    def same_tree(vs_peer: bool) -> Callable[[Result, Path], None]:
        def check(res: Result, where: Path) -> None:
            if vs_peer:
                need(same_files(where / "peer", where / "new"), "extracted files differ from cuobjdump's")
            if "base" in res.runs:
                need(same_files(where / "base", where / "new"), "extracted files differ from --base's")
        return check

    op("--version (start-up)", "-", ["--version"], [sys.executable, "-c", "pass"], "cpu", False, lambda r, w: None)
    for name, lib in inputs.items():
        L = str(lib)
        exact = name != "cufft"  # cuobjdump reads cuFFT's .nv_fatbin only (module docstring)
        op("resources --format cuobjdump -j1", name, ["resources", "--format", "cuobjdump", "--jobs", "1", L],
           [cuobjdump, "-res-usage", L], "cpu", False, same_out(exact))
        op("resources --format cuobjdump", name, ["resources", "--format", "cuobjdump", L],
           [cuobjdump, "-res-usage", L], "wall", False, same_out(exact))
        if not exact:
            continue  # cuobjdump -xelf all writes cuFFT's one .nv_fatbin cubin: nothing to compare with
        op("extract --kind cubin -j1", name, ["extract", "--kind", "cubin", "--jobs", "1", L],
           [cuobjdump, "-xelf", "all", L], "cpu", True, same_tree(exact))
        op("extract --kind cubin", name, ["extract", "--kind", "cubin", L],
           [cuobjdump, "-xelf", "all", L], "wall", True, same_tree(exact))
    print("\n| input | operation | devbin CPU s (wall) | before CPU s (wall) | cuobjdump CPU s (wall) | ratio | "
          "before ratio | peak MB devbin / cuobjdump |")
    print("|---|---|---|---|---|---|---|---|")
    for lib, name, key, res in rows:
        before = (f"{res.med('base', 'cpu'):.3f} ({res.med('base', 'wall'):.3f})" if "base" in res.runs else "-")
        bratio = f"{res.ratio('base', key):.2f}" if "base" in res.runs else "-"
        print(f"| {lib} | `{name}` | {res.med('new', 'cpu'):.3f} ({res.med('new', 'wall'):.3f}) | {before} | "
              f"{res.med('peer', 'cpu'):.3f} ({res.med('peer', 'wall'):.3f}) | {res.ratio('new', key):.2f} ({key}) | "
              f"{bratio} | {res.peak('new'):.0f} / {res.peak('peer'):.0f} |")


def pass_mode(inputs: dict[str, Path], repeat: int) -> None:
    """``--pass``: what the README's analysis quotes, measured in this one process (medians of ``repeat``,
    after one warm-up, the files' pages already mapped and read):

    * each library's cubins (those stored compressed decoded first) through ``resources --format cuobjdump``'s
      two paths:
      the compiled pass (:func:`devbin.targets.nvidia.resources.usage_lines`) and the readers
      (``format_cuobjdump(usage(Cubin(ElfFile(data), records=False)))``), their lines checked equal;
    * libcurand's cubins written as ``extract`` writes them, 143 files: ``os.write`` from the mapping against
      ``os.copy_file_range`` from the input file (into a temporary folder, each round a fresh one);
    * ``python -X importtime -m devbin resources --format cuobjdump`` on libcurand: the ten largest
      cumulative import times (one run; the interpreter's own start is not in them)."""
    from devbin.formats.elf.reader import ElfFile
    from devbin.images.scan import Scanner
    from devbin.targets.nvidia.cubin import Cubin
    from devbin.targets.nvidia.resources import format_cuobjdump, usage, usage_lines

    def med(fn: Callable[[], object]) -> float:
        fn()
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    for name, lib in inputs.items():
        found = [f for f, _ in Scanner().paths([lib]) if f.kind == "cubin"]
        # compressed ones decoded before the clock starts (cuFFT's all are): the two paths read the same bytes
        views = [f.data() if f.compression == "none" else bytes(f.data()) for f in found]
        plain = sum(f.compression == "none" for f in found)
        compiled = [usage_lines(v) for v in views]
        need(all(c is not None for c in compiled), f"{name}: the compiled pass is not built or declined a cubin")
        readers = [format_cuobjdump(usage(Cubin(ElfFile(v), records=False))) for v in views]
        need(compiled == readers, f"{name}: the compiled pass and the readers differ")
        fast = med(lambda views=views: [usage_lines(v) for v in views])
        slow = med(lambda views=views: [format_cuobjdump(usage(Cubin(ElfFile(v), records=False))) for v in views])
        print(f"{name}: {len(views)} cubins ({plain} stored plain), readers {slow:.3f} s, compiled pass "
              f"{fast:.4f} s ({slow / max(fast, 1e-9):.0f}x)", flush=True)
    if "curand" in inputs:
        lib = inputs["curand"]
        views = [f.data() for f, _ in Scanner().paths([lib]) if f.kind == "cubin" and f.compression == "none"]
        places, at = [], 0
        with open(lib, "rb") as src:
            import mmap
            mm = mmap.mmap(src.fileno(), 0, access=mmap.ACCESS_READ)
            for v in views:  # each cubin's offset in the file (they lie in file order)
                at = mm.find(bytes(v), at)
                need(at >= 0, "a cubin not found in its file")
                places.append((at, len(v)))
                at += len(v)
            mm.close()
            with tempfile.TemporaryDirectory(prefix="devbin-bench-pass-") as tmp:
                rounds_done = [0]

                def written(copy: bool) -> None:
                    rounds_done[0] += 1
                    d = Path(tmp) / str(rounds_done[0])
                    d.mkdir()
                    for i, ((off, n), v) in enumerate(zip(places, views, strict=True)):
                        fd = os.open(d / f"{i}.cubin", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                        try:
                            if copy:
                                done = 0
                                while done < n:
                                    done += os.copy_file_range(src.fileno(), fd, n - done, off + done)
                            else:
                                os.write(fd, v)
                        finally:
                            os.close(fd)
                    shutil.rmtree(d)
                w = med(lambda: written(False))
                c = med(lambda: written(True))
        print(f"curand: {len(views)} cubins ({sum(n for _, n in places) >> 20} MB) written: os.write from the "
              f"mapping {w:.3f} s, copy_file_range {c:.3f} s", flush=True)
        env = {k: v for k, v in os.environ.items() if k != "DEVBIN_PURE_PYTHON"} | {"PYTHONPATH": str(SRC)}
        p = subprocess.run([sys.executable, "-X", "importtime", "-m", "devbin", "resources", "--format", "cuobjdump",
                            "--jobs", "1", str(lib)], env=env, capture_output=True, text=True, check=True)
        rows = []
        for line in p.stderr.splitlines():
            if line.startswith("import time:") and "|" in line and "cumulative" not in line:
                _, cum, pkg = line.removeprefix("import time:").split("|")
                rows.append((int(cum), pkg.rstrip()))
        total = sum(c for c, pkg in rows if not pkg.startswith("  "))  # " name": top level; nested are indented
        print(f"-X importtime (resources --format cuobjdump, libcurand): top-level imports {total / 1e6:.3f} s; "
              "largest cumulative:", flush=True)
        for cum, pkg in sorted(rows, reverse=True)[:10]:
            print(f"  {cum / 1e3:7.1f} ms  {pkg.strip()}")


if __name__ == "__main__":
    main()
