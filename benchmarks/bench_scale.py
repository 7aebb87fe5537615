"""Scale: devbin's commands on host ELFs holding thousands of fatbins in a data section.

    python3 benchmarks/bench_scale.py [--sizes 1000,2000,5000,10000,20000] [--repeat 3]
                                      [--profile COMMAND] [--no-bytecode] [--keep]

A large NVIDIA math library keeps about 24,000 images in as many fatbins in `.ldata`
(issue 19).  This generates shared objects of the same shape with devbin's own writers: N
fatbins back to back in a `.ldata` section (SHF_X86_64_LARGE), each holding one sm_90 cubin
(src/devbin/samples/sample_sm90.cubin); every even-numbered one carries an identifier
(`gen_<i>.cu`), the odd ones none, so both of extract's naming rules run.  devbin finds
them by scanning the data section for the fatbin magic (src/devbin/images/hostelf.py).

For each N it times, as whole fresh processes (median wall time of --repeat runs, and the
largest peak RSS), `devbin list`, `list --json`, `resources`, `extract -o DIR` and `prune
--keep sm_90 --dry-run`, and the same commands on a one-fatbin file of the same shape (the
fixed cost: starting Python, importing, parsing the host ELF).  It prints the time per
image, raw (t/N) and net of the fixed cost ((t_N - t_1)/(N - 1)), and the ratio of the net
time per image at the largest N to that at the smallest: a linear command gives about 1.0;
above 1.5 is flagged as superlinear.

cuobjdump does not look into `.ldata` ("does not contain device code"), so the peer runs on
a twin file of the same name holding the same fatbins in `.nv_fatbin`, which it reads:
`cuobjdump -lelf`, `-res-usage` and `-xelf all`.  Every answer is checked (a fast wrong one
cannot pass): list names the N addresses `<file>@.ldata#<i>.0` in order, the JSON holds N
images with the right identifiers, resources reports the kernel of each of the N images,
prune keeps N images, and `devbin extract` writes the same N files, name for name and byte
for byte, as `cuobjdump -xelf all` on the twin; cuobjdump lists N ELFs.  `--profile COMMAND`
(one of the devbin commands above) prints where that command spends its time on the
largest N, in one process under cProfile.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from devbin.formats.elf import constants as EC  # noqa: E402
from devbin.formats.elf.model import ElfModel, SectionSpec  # noqa: E402
from devbin.formats.elf.writer import write  # noqa: E402
from devbin.formats.fatbin import constants as FC  # noqa: E402
from devbin.formats.fatbin.writer import FatbinImage, write_fatbin  # noqa: E402

CUBIN = (ROOT / "src" / "devbin" / "samples" / "sample_sm90.cubin").read_bytes()
SHF_X86_64_LARGE = 0x10000000  # the `l` flag of .ldata (x86-64 psABI, large code model)
NAME = "libscale.so"
SUPERLINEAR = 1.5

#: devbin command name -> arguments after `devbin` (FILE and OUT replaced per run).
COMMANDS: dict[str, list[str]] = {
    "list": ["list", "FILE"],
    "list --json": ["list", "--json", "FILE"],
    "resources": ["resources", "FILE"],
    "extract": ["extract", "FILE", "-o", "OUT"],
    "prune --dry-run": ["prune", "--keep", "sm_90", "--dry-run", "FILE"],
}
#: cuobjdump's command for the same job on the `.nv_fatbin` twin.
PEERS: dict[str, list[str]] = {
    "list": ["-lelf"],
    "resources": ["-res-usage"],
    "extract": ["-xelf", "all"],
}


def identifier(i: int) -> str:
    return f"gen_{i}.cu" if i % 2 == 0 else ""


def host_elf(n: int, section: str) -> bytes:
    """A shared object with ``n`` one-cubin fatbins back to back (8-aligned) in ``section``."""
    parts = []
    for i in range(n):
        fb = write_fatbin([FatbinImage(FC.KIND_ELF, 90, CUBIN, identifier=identifier(i))])
        parts.append(fb + bytes(-len(fb) % 8))
    m = ElfModel(e_type=EC.ET_DYN, machine=EC.EM_X86_64)
    m.sections = [SectionSpec(".text", flags=EC.SHF_ALLOC | EC.SHF_EXECINSTR, data=b"\xc3" * 16, align=16),
                  SectionSpec(section, flags=EC.SHF_ALLOC | EC.SHF_WRITE | (SHF_X86_64_LARGE if section == ".ldata"
                                                                           else 0), data=b"".join(parts), align=64)]
    return write(m)


def expected_names(n: int) -> list[str]:
    """The files `cuobjdump -xelf all` writes: <identifier stem>.sm_90.cubin, else <file stem>.<n>.sm_90.cubin."""
    stem = NAME.rsplit(".", 1)[0]
    return [f"gen_{i}.sm_90.cubin" if identifier(i) else f"{stem}.{i + 1}.sm_90.cubin" for i in range(n)]


@dataclass(frozen=True)
class Run:
    """One command's figures: median wall, user and system seconds, largest peak RSS (0: not measured)."""

    wall: float
    user: float
    sys: float
    peak: int


#: Runs devbin as `python -m devbin` does, then writes the process's own high-water RSS (VmHWM) to the file
#: named by DEVBIN_BENCH_PEAK.  The operating system's ru_maxrss cannot serve: a child started by
#: vfork+exec inherits its parent's (this benchmark's) peak.
_PEAK = """
import os, runpy, sys
sys.argv[0] = "devbin"
try:
    runpy.run_module("devbin", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as f:
        kb = next((int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")), 0)
    with open(os.environ["DEVBIN_BENCH_PEAK"], "w") as f:
        f.write(str(kb * 1024))
"""


def run_once(cmd: list[str], out: Path, cwd: Path | None = None) -> tuple[float, float, float]:
    """Wall, user and system seconds of one fresh process; its stdout goes to ``out``."""
    with open(out, "wb") as f:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.PIPE, cwd=cwd)
        assert p.stderr is not None
        err = p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({p.returncode}): {err.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime, usage.ru_stime


def timed(cmd: list[str], repeat: int, out: Path, fresh: Path | None = None, peak: Path | None = None) -> Run:
    """Medians of ``repeat`` runs; ``fresh`` is emptied before each run; ``peak`` is where the
    :data:`_PEAK` wrapper writes the process's peak RSS."""
    runs, rss = [], 0
    for _ in range(repeat):
        if fresh is not None:
            shutil.rmtree(fresh, ignore_errors=True)
            fresh.mkdir()
        runs.append(run_once(cmd, out, cwd=fresh))
        if peak is not None:
            rss = max(rss, int(peak.read_text()))
    wall, user, sys_ = (statistics.median(r[i] for r in runs) for i in range(3))
    return Run(wall, user, sys_, rss)


# -- the checks: one per command, on the output of the last timed run ------------------------------

def need(ok: bool, what: object) -> None:
    """A wrong answer stops the benchmark (not an assert: it must hold under python -O too)."""
    if not ok:
        raise SystemExit(f"bench: wrong answer: {what}")


def check_list(n: int, text: str) -> None:
    lines = text.splitlines()
    addrs = [ln.split()[0].rsplit("/", 1)[-1] for ln in lines[1:-1]]
    need(lines[-1] == f"{n} images", lines[-1])
    need(addrs == [f"{NAME}@.ldata#{i}.0" for i in range(n)], "list: wrong addresses")
    need(all(" sm_90 " in ln and " cubin " in ln for ln in lines[1:-1]), "list: wrong kind or arch")


def check_json(n: int, text: str) -> None:
    images = json.loads(text)["images"]
    need(len(images) == n, len(images))
    for i, im in enumerate(images):
        need(im["address"].endswith(f"{NAME}@.ldata#{i}.0") and im["arch"] == "sm_90" and im["size"] == len(CUBIN), im)
        need(im["metadata"].get("identifier", "") == identifier(i), im)


def check_resources(n: int, text: str) -> None:
    heads = [ln for ln in text.splitlines() if ln.startswith(NAME) or f"/{NAME}@" in ln]
    need([h.split()[0].rsplit("/", 1)[-1] for h in heads] == [f"{NAME}@.ldata#{i}.0" for i in range(n)], heads[:3])
    need(sum(1 for ln in text.splitlines() if ln.split()[:2] == ["saxpy", "kernel"]) == n, "resources: kernels")


def check_prune(n: int, text: str) -> None:
    keeps = [ln for ln in text.splitlines() if ln.rstrip().endswith(" keep")]
    need(len(keeps) == n and "dry run: nothing written" in text, (len(keeps), text[-300:]))


def check_extract(n: int, out: Path) -> None:
    names = sorted(p.name for p in out.iterdir())
    need(names == sorted(expected_names(n)), "extract: wrong names")
    need(all(p.read_bytes() == CUBIN for p in out.iterdir()), "extract: wrong bytes")


CHECKS: dict[str, Callable[[int, str], None]] = {
    "list": check_list, "list --json": check_json, "resources": check_resources, "prune --dry-run": check_prune,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,2000,5000,10000,20000", help="comma-separated image counts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", choices=sorted(COMMANDS), help="profile this devbin command on the largest N")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep the environment's PYTHONDONTWRITEBYTECODE (devbin's sources compiled on every run)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files (the folder is printed)")
    args = ap.parse_args()
    from devbin.tools import find_tool

    sizes = sorted(int(s) for s in args.sizes.split(","))
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump is None:
        raise SystemExit("bench: cuobjdump is needed (the CUDA toolkit, or the nvidia-cuda-cuobjdump wheel)")
    # In memory where there is a tmpfs: 2 x 85 MB of inputs and 85 MB extracted at N = 20,000, and the
    # disk of a shared machine is the noisiest thing in it.
    shm = Path("/dev/shm")
    work = Path(tempfile.mkdtemp(prefix="devbin-scale-", dir=shm if shm.is_dir() and os.access(shm, os.W_OK) else None))
    devbin = [sys.executable, "-c", _PEAK]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    if not args.no_bytecode:  # as an installed package runs: from cached bytecode (see bench_bundles.py)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    try:
        run(args, sizes, work, devbin, cuobjdump)
    finally:
        if args.keep:
            print(f"files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, sizes: list[int], work: Path, devbin: list[str], cuobjdump: str) -> None:
    out, ext, peak = work / "stdout", work / "extracted", work / "peak"
    os.environ["DEVBIN_BENCH_PEAK"] = str(peak)
    # (command, N) -> figures; N = 1 is the fixed cost.
    mine: dict[tuple[str, int], Run] = {}
    peer: dict[tuple[str, int], Run] = {}
    for n in [1, *sizes]:
        d = work / str(n)
        (d / "ldata").mkdir(parents=True)
        (d / "nv_fatbin").mkdir()
        t = time.perf_counter()
        host, twin = d / "ldata" / NAME, d / "nv_fatbin" / NAME
        host.write_bytes(host_elf(n, ".ldata"))
        twin.write_bytes(host_elf(n, ".nv_fatbin"))
        gen = time.perf_counter() - t
        if n == 1:
            run_once([*devbin, "list", str(host)], out)  # compiles the bytecode once, untimed
        for name, argv in COMMANDS.items():
            cmd = [*devbin, *(str(host) if a == "FILE" else str(ext) if a == "OUT" else a for a in argv)]
            mine[name, n] = timed(cmd, reps(args.repeat, n), out, fresh=ext if name == "extract" else None, peak=peak)
            if name == "extract":
                check_extract(n, ext)
            else:
                CHECKS[name](n, out.read_text())
        for name, flags in PEERS.items():
            cmd = [cuobjdump, *flags, str(twin)]
            peer[name, n] = timed(cmd, reps(args.repeat, n), out, fresh=ext if name == "extract" else None)
            if name == "list":
                need(out.read_text().count("ELF file") == n, "cuobjdump -lelf: wrong count")
            elif name == "resources":
                need(out.read_text().count("Function saxpy:") == n, "cuobjdump -res-usage: wrong count")
            elif name == "extract":
                cu = {p.name: p.read_bytes() for p in ext.iterdir()}
                need(sorted(cu) == sorted(expected_names(n)) and all(b == CUBIN for b in cu.values()),
                     "cuobjdump -xelf all: not the files devbin writes")
        if n > 1:
            print(f"N = {n}: {host.stat().st_size:,} bytes; generated in {gen:.2f} s; all answers checked", flush=True)
        for p in (host, twin):
            p.unlink()
    report(args.repeat, sizes, mine, peer)
    if args.profile:
        host = work / "profiled" / NAME
        host.parent.mkdir()
        host.write_bytes(host_elf(sizes[-1], ".ldata"))
        argv = [str(host) if a == "FILE" else str(work / "profiled" / "out") if a == "OUT" else a
                for a in COMMANDS[args.profile]]
        subprocess.run([sys.executable, "-c", _PROFILE, *argv], check=True)


def reps(repeat: int, n: int) -> int:
    """More runs of the small files: there the work is a few tens of ms against a noisy 0.15-0.3 s start-up."""
    return repeat * max(1, min(5, 5000 // n))


def net(figs: dict[tuple[str, int], Run], name: str, n: int, what: str) -> float:
    """Seconds per image of ``what`` (wall, user) net of the one-fatbin run."""
    return float(getattr(figs[name, n], what) - getattr(figs[name, 1], what)) / (n - 1)


def per_mb(figs: dict[tuple[str, int], Run], name: str, n: int) -> float:
    """Peak memory per image, net of the one-fatbin run."""
    return (figs[name, n].peak - figs[name, 1].peak) / (n - 1)


def report(repeat: int, sizes: list[int], mine: dict[tuple[str, int], Run], peer: dict[tuple[str, int], Run]) -> None:
    print(f"\nmedian of {repeat} fresh processes ({reps(repeat, 1)} for N < 2000); N = 1 is the fixed cost "
          "(start-up, imports, the host ELF); net = (t_N - t_1) / (N - 1)")
    print(f"{'command':16} {'N':>6} {'wall s':>7} {'user s':>7} {'sys s':>6} {'peak MB':>8} {'ms/img':>7} "
          f"{'net ms/img':>10} {'net user':>9} {'cuobjdump s':>11} {'devbin/cuobjdump':>16}")
    for name in COMMANDS:
        r = mine[name, 1]
        print(f"{name:16} {1:>6} {r.wall:7.3f} {r.user:7.3f} {r.sys:6.3f} {r.peak / 2**20:8.1f}")
        for n in sizes:
            r = mine[name, n]
            line = (f"{name:16} {n:>6} {r.wall:7.3f} {r.user:7.3f} {r.sys:6.3f} {r.peak / 2**20:8.1f} "
                    f"{r.wall / n * 1e3:7.4f} {net(mine, name, n, 'wall') * 1e3:10.4f} "
                    f"{net(mine, name, n, 'user') * 1e3:9.4f}")
            if name in PEERS:
                line += f" {peer[name, n].wall:11.3f} {r.wall / peer[name, n].wall:16.2f}"
            print(line)
    lo, hi = sizes[0], sizes[-1]
    mid = next((n for n in sizes if n * 4 >= hi), lo)
    print(f"\nper image at N = {hi} against N = {lo} (and against N = {mid}, less moved by the noise of the small "
          f"runs), net of the fixed cost: linear is about 1.0; the verdict is on user CPU, which a busy machine or "
          f"disk moves least, and on peak memory: above {SUPERLINEAR} at {hi} against {lo} is superlinear")
    print(f"{'command':22} {'wall':>5} {'user':>5} {'memory':>6}   {'wall':>5} {'user':>5} {'memory':>6}  verdict")
    for figs, names in ((mine, {k: k for k in COMMANDS}), (peer, {k: "cuobjdump " + " ".join(v) for k, v in
                                                                  PEERS.items()})):
        for name, label in names.items():
            cols = []
            for ref in (lo, mid):
                w, u = (net(figs, name, hi, k) / net(figs, name, ref, k) for k in ("wall", "user"))
                mem = (per_mb(figs, name, hi) / per_mb(figs, name, ref)) if figs is mine else float("nan")
                cols.append((w, u, mem))
            (w, u, mem), (w2, u2, mem2) = cols
            flag = "" if figs is peer else "SUPERLINEAR" if u > SUPERLINEAR or mem > SUPERLINEAR else "linear"
            print(f"{label:22} {w:5.2f} {u:5.2f} {mem:6.2f}   {w2:5.2f} {u2:5.2f} {mem2:6.2f}  {flag}")


_PROFILE = """
import cProfile, io, pstats, sys, time
from devbin.cli.main import command_module, main
command_module(sys.argv[1])
import devbin.images.scan, devbin.formats.fatbin
prof = cProfile.Profile()
t = time.perf_counter()
prof.runcall(main, sys.argv[1:], io.StringIO())
took = time.perf_counter() - t
print(f"devbin {' '.join(sys.argv[1:])}: {took:.3f} s profiled (imports excluded); top 15 by own time")
pstats.Stats(prof).sort_stats("tottime").print_stats(15)
"""

if __name__ == "__main__":
    main()
