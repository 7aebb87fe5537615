"""Super-archive sizes and times against fat-style files and fatbinary (not a test: run by hand).

    python3 benchmarks/bench_superarchive.py [--repeat 5] [--cache DIR] [--curand]

(a) Sizes.  Builds a per-arch library from the project's own sources: tests/sources/kernels.cu
and extfn.cu with ``nvcc -cubin -rdc=true`` for every sm_XX ``nvcc --list-gpu-code`` lists, and
amdgpu_kernels.cl and amdgpu_lib.cl with clang-19 for gfx90a, gfx942, gfx1030 and gfx1100.
Prints, side by side: the sum of per-target archives (devbin's ar writer, what ``ar rcsD``
writes), the plain and the packed super-archive (and the packed members in layout 1, the
previous default), a Mach-O-fat-style file (one page-aligned
slice per target, as ``lipo`` lays them out), and for the cubins ``fatbinary
--compress-mode=size`` (CUDA on PATH) and ``fatbinary --compress-mode=size --concat`` (from the
pinned PyPI wheel nvidia-cuda-nvcc==13.5.37, fetched with ``pip download --no-deps`` into the
cache: CUDA 13.0's fatbinary has no --concat), plus a solid ``zstd -19 --long`` of all inputs
(no random access; the floor).  ``--curand`` adds one translation unit of the pinned
nvidia-curand-cu12==10.3.10.19 wheel (13 cubins sm_50..sm_121, 40 MB).

(b) Build time of the plain and packed super-archive (median of --repeat), and the time to read
one packed member from a fresh open (median and slowest over the members).

(c) A synthetic super-archive of 20 targets x 500 small ELF objects: time to open it from
memory (``verify="lazy"`` and ``"full"``) and look up one symbol for one target
(``lib.lookup`` and ``lib.symbols``), median of --repeat, against ``nm -s``,
``llvm-nm-19 --print-armap`` and ``ar t`` on the same file (each a fresh process; devbin is
also timed as a fresh process).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

NVCC_WHEEL = "nvidia-cuda-nvcc==13.5.37"
GFX = ("gfx90a", "gfx942", "gfx1030", "gfx1100")
PAGE = 4096


def run(cmd: list[str], cwd: Path | None = None) -> str:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p.stdout


def median_time(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def fetch_fatbinary(cache: Path) -> Path | None:
    exe = cache / "nvcc-13.5.37" / "fatbinary"
    if not exe.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), NVCC_WHEEL],
                       check=False)
        wheels = list(cache.glob("nvidia_cuda_nvcc-13.5.37-*.whl"))
        if not wheels:
            return None
        with zipfile.ZipFile(wheels[0]) as z:
            exe.parent.mkdir(parents=True, exist_ok=True)
            exe.write_bytes(z.read("nvidia/cu13/bin/fatbinary"))
        exe.chmod(0o755)
    return exe if "--concat" in run([str(exe), "--help"]) else None


def build_library(out: Path) -> dict[str, list[tuple[str, Path]]]:
    """target -> [(member name, file)]: nvcc cubins for every listed sm, clang-19 objects for GFX."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.conftest import SOURCES

    sms = [a for a in run(["nvcc", "--list-gpu-code"]).split() if a.startswith("sm_")]
    jobs: list[list[str]] = []
    lib: dict[str, list[tuple[str, Path]]] = {}
    for sm in sms:
        for src in ("kernels", "extfn"):
            f = out / f"{src}.{sm}.cubin"
            jobs.append(["nvcc", f"-arch={sm}", "-cubin", "-rdc=true", "-o", str(f), str(SOURCES / f"{src}.cu")])
            lib.setdefault(sm, []).append((f"{src}.o", f))
    for gfx in GFX:
        for src in ("amdgpu_kernels", "amdgpu_lib"):
            f = out / f"{src}.{gfx}.o"
            jobs.append(["clang-19", "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-c",
                         f"-mcpu={gfx}", "-o", str(f), str(SOURCES / f"{src}.cl")])
            lib.setdefault(gfx, []).append((f"{src}.o", f))
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(run, jobs))
    return lib


def fat_style(slices: list[bytes]) -> int:
    """Bytes of a Mach-O universal file holding ``slices``: 8-byte header, 20-byte fat_arch each,
    every slice at a page-aligned offset (what ``lipo -create`` does for 2^12 alignment)."""
    off = 8 + 20 * len(slices)
    for s in slices:
        off = -(-off // PAGE) * PAGE + len(s)
    return off


def sizes(title: str, lib: dict[str, list[tuple[str, bytes]]], fatbin_size: Path | None, fatbin_concat: Path | None,
          scratch: Path, repeat: int) -> list[str]:
    import devbin.superarchive as sa
    from devbin.formats.ar.writer import ArMember, elf_global_symbols, write_archive

    def syms(d: bytes) -> tuple[str, ...]:
        try:
            return elf_global_symbols(d)
        except Exception:
            return ()

    per_target = [write_archive([ArMember(n, d, syms(d)) for n, d in ms]) for ms in lib.values()]
    targets = [sa.TargetInput(t, tuple(sa.InputMember(n, d, syms(d)) for n, d in ms)) for t, ms in lib.items()]
    t_plain = median_time(lambda: sa.create(targets), repeat)
    built: list[bytes] = []
    t_packed = median_time(lambda: built.append(sa.create(targets, storage="packed")), max(1, repeat // 2))
    plain = sa.create(targets)
    packed = built[-1]
    sections = sa.create(targets, storage="packed", layout=1, max_depth=2)  # the previous default
    lp = sa.open(packed)
    for t in targets:  # the packed archive gives every input back
        for m, tm in zip(t.members, lp.members(t.name), strict=True):
            assert bytes(lp.member_data(tm.ordinal)) == m.data
    reads = []  # random access: one member from a fresh open (its bases decoded too)
    for r in lp.records():
        t0 = time.perf_counter()
        sa.open(packed, verify="lazy").member_data(r.ordinal)
        reads.append(time.perf_counter() - t0)
    most_deps = max(len(r.storage.params["deps"]) for r in lp.records())
    inputs = b"".join(d for ms in lib.values() for _, d in ms)
    (scratch / "all.bin").write_bytes(inputs)
    solid = int(run(["bash", "-c", f"zstd -19 --long=27 -q -c {scratch / 'all.bin'} | wc -c"]).strip())
    rows = [
        ("inputs (member bytes, all targets)", len(inputs)),
        ("sum of per-target archives (ar rcsD layout)", sum(map(len, per_target))),
        ("fat-style concatenation (page-aligned slices)", fat_style(per_target)),
        ("super-archive, plain", len(plain)),
        ("super-archive, packed (whole file)", len(packed)),
        ("  of which packed members", lp.stored_bytes),
        ("  of which manifest (names, symbols, hashes)", len(lp.files[0].data)),
        ("packed members, layout 1 (per-section frames, depth <= 2)", sa.open(sections).stored_bytes),
    ]
    cubins = [(t, n, d) for t, ms in lib.items() if t.startswith("sm_") for n, d in ms]
    if cubins and all(d.startswith(b"\x7fELF") for _, _, d in cubins):
        images = []
        for i, (t, _n, d) in enumerate(cubins):
            f = scratch / f"c{i}.cubin"
            f.write_bytes(d)
            images.append(f"--image3=kind=elf,sm={t[3:]},file={f}")
        if fatbin_size is not None:
            run([str(fatbin_size), f"--create={scratch / 's.fatbin'}", "--compress-mode=size", *images])
            rows.append(("fatbinary --compress-mode=size (CUDA 13.0)", (scratch / "s.fatbin").stat().st_size))
        if fatbin_concat is not None:
            run([str(fatbin_concat), f"--create={scratch / 'c.fatbin'}", "--compress-mode=size", "--concat", *images])
            rows.append(("fatbinary --compress-mode=size --concat (13.5)", (scratch / "c.fatbin").stat().st_size))
        else:
            rows.append(("fatbinary --concat: not available (no wheel has it)", 0))
    rows.append(("solid zstd -19 --long of all inputs (no random access)", solid))
    out = [f"### {title}", "", f"{len(lib)} targets, {sum(len(m) for m in lib.values())} members; "
           f"build time plain {t_plain:.3f} s, packed {t_packed:.3f} s; reading one packed member from a fresh "
           f"open: median {statistics.median(reads) * 1e3:.1f} ms, slowest {max(reads) * 1e3:.1f} ms "
           f"(at most {most_deps} base members decoded)", "",
           "| what | bytes | vs packed whole file |", "|---|---|---|"]
    for name, n in rows:
        out.append(f"| {name} | {n:,} | {n / len(packed):.2f} |" if n else f"| {name} | - | - |")
    return out


def synthetic(scratch: Path, repeat: int) -> list[str]:
    import devbin.superarchive as sa
    from devbin.formats.elf import constants as C
    from devbin.formats.elf.model import SectionSpec, SymbolSpec
    from devbin.formats.elf.writer import write

    from tests.elfbuild import small_model

    def obj(t: int, m: int) -> bytes:
        model = small_model()
        model.relocations = {}
        text = (f"t{t % 5} m{m} ".encode() * 8)[:96]
        model.sections = [SectionSpec(".text", flags=C.SHF_ALLOC | C.SHF_EXECINSTR, data=text, align=16)]
        model.symbols = [SymbolSpec(f"fn_{m}", 0, 16, type=C.STT_FUNC, section=".text"),
                         SymbolSpec(f"fn_{m}_aux", 16, 16, type=C.STT_FUNC, section=".text")]
        return write(model)

    targets = [sa.TargetInput(f"gpu{t:02}", tuple(sa.member_from_object(f"m{m:03}.o", obj(t, m)) for m in range(500)))
               for t in range(20)]
    data = sa.create(targets)
    path = scratch / "synthetic.sa"
    path.write_bytes(data)
    target, symbol = "gpu13", "fn_417"
    lib = sa.open(data, verify="lazy")
    assert lib.lookup(target, symbol) is not None if hasattr(lib, "lookup") else True

    def by_symbols() -> object:
        return next(s for s in sa.open(data, verify="lazy").symbols(target) if s.name == symbol)

    rows = [
        ("open, verify=lazy", median_time(lambda: sa.open(data, verify="lazy"), repeat)),
        ("open, verify=full", median_time(lambda: sa.open(data, verify="full"), repeat)),
        ("open lazy + symbols(target) scan", median_time(by_symbols, repeat)),
    ]
    if hasattr(lib, "lookup"):
        rows.append(("open lazy + lookup(target, symbol)",
                     median_time(lambda: sa.open(data, verify="lazy").lookup(target, symbol), repeat)))
    code = ("import sys; import devbin.superarchive as sa; d=open(sys.argv[1],'rb').read(); "
            f"print(sa.open(d, verify='lazy').lookup({target!r}, {symbol!r}))")
    env_py = [sys.executable, "-c", code, str(path)]
    procs = [("devbin, fresh process (python start + import + open + lookup)", env_py),
             ("nm -s (armap of the index target + every member)", ["nm", "-s", str(path)]),
             ("llvm-nm-19 --print-armap", ["llvm-nm-19", "--print-armap", str(path)]),
             ("ar t", ["ar", "t", str(path)])]
    import os

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for name, cmd in procs:
        if shutil.which(cmd[0]) is None:
            continue
        rows.append((name, median_time(lambda cmd=cmd: subprocess.run(cmd, capture_output=True, env=env,
                                                                       check=False), repeat)))
    out = ["### 20 targets x 500 members (synthetic ELF objects)", "",
           f"archive {len(data):,} bytes, {len(lib.records())} unique members, manifest "
           f"{len(lib.files[0].data):,} bytes; median of {repeat}", "", "| operation | seconds |", "|---|---|"]
    out += [f"| {n} | {t:.4f} |" for n, t in rows]
    return out


def curand_tu(cache: Path) -> dict[str, list[tuple[str, bytes]]]:
    """Cubins 14..26 of libcurand.so.10 (one translation unit, sm_50..sm_121) by devbin extract."""
    from benchmarks.bench_curand import fetch_curand

    lib = fetch_curand(cache)
    folder = cache / "curand-elf"
    if not folder.is_dir():
        folder.mkdir()
        run([sys.executable, "-m", "devbin", "extract", "--kind", "cubin", str(lib), "-o", str(folder)])
    out: dict[str, list[tuple[str, bytes]]] = {}
    for i in range(14, 27):  # cuobjdump's numbering: images 14..26 are one translation unit, sm_50..sm_121
        f = next(folder.glob(f"libcurand.so.{i}.sm_*.cubin"))
        out[f.name.split(".")[-2]] = [("curand_tu.o", f.read_bytes())]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "devbin-bench"))
    ap.add_argument("--curand", action="store_true", help="also the libcurand translation unit (40 MB, slow)")
    args = ap.parse_args()
    cache = Path(args.cache)
    scratch = Path(tempfile.mkdtemp(prefix="devbin-bench-sa-"))
    concat = fetch_fatbinary(cache)
    size_tool = shutil.which("fatbinary")
    lib = build_library(scratch)
    data = {t: [(n, p.read_bytes()) for n, p in ms] for t, ms in lib.items()}
    lines = sizes("project sources: CUDA cubins and AMDGPU objects", data,
                  Path(size_tool) if size_tool else None, concat, scratch, args.repeat)
    only_sm = {t: m for t, m in data.items() if t.startswith("sm_")}
    lines += ["", *sizes("project sources: CUDA cubins only", only_sm, Path(size_tool) if size_tool else None,
                         concat, scratch, args.repeat)]
    if args.curand:
        lines += ["", *sizes("libcurand.so.10: one translation unit, 13 archs", curand_tu(cache),
                             Path(size_tool) if size_tool else None, concat, scratch, 1)]
    import os

    os.environ["PYTHONPATH"] = str(ROOT / "src")
    lines += ["", *synthetic(scratch, args.repeat)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
