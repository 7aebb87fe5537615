"""Run every fuzz target for a time budget; save and report any crash.  Or replay, for CI.

    python3 fuzz/run_all.py --replay --cli-runs 2000          # what CI runs (scripts/test.sh)
    python3 fuzz/run_all.py --seconds 60                      # exploring: all targets share 60 s
    python3 fuzz/run_all.py --target fuzz_elf --seconds 600 --runs 1000000
    python3 fuzz/run_all.py --seconds 60 --cli-seconds 45     # then fuzz/cli_mutate.py for 45 s

``--replay`` runs every target once on every seed below, in process, and nothing else: no
mutation, no time budget, the same inputs and the same result every run, so a CI failure is a
regression on a known input (the crasher or seed it names), never an old bug a random run
happened upon.  ``--cli-runs N`` runs fuzz/cli_mutate.py for exactly N command runs of campaign
``--seed`` (mutant i is built from ``Random(f"{seed}:{i}")`` and the seeds alone): deterministic
too.  Exploring (``--seconds``, ``--cli-seconds``) is for by hand or a schedule; what it finds
becomes a crasher with a test (fuzz/README.md, "From a finding to a crasher").

Seeds: synthetic files from the test builders, the committed fixtures and the
committed crashers (tests/crashers/).  With atheris installed each target runs
coverage-guided in its own process; otherwise a deterministic mutation loop
(seeded PRNG: bit flips, byte sets to boundary values, truncation, splices,
integer fields set to 0/0xffff/0xffffffff) runs in process.  A crash is
written to fuzz/crashes/ and the run exits 1: commit the input under
tests/crashers/ with a test saying what went wrong.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

TARGETS = ["fuzz_elf", "fuzz_devsec", "fuzz_fatbin", "fuzz_ar", "fuzz_offload", "fuzz_amdgpu", "fuzz_bundle",
           "fuzz_wrapped", "fuzz_superarchive", "fuzz_macho_fat", "fuzz_link", "fuzz_load", "fuzz_native", "fuzz_zip",
           "fuzz_intel", "fuzz_sycl"]


def available_targets() -> list[str]:
    return [n for n in TARGETS if (ROOT / "fuzz" / f"{n}.py").exists()]


def seeds() -> Iterator[bytes]:
    return (data for _, data in named_seeds())


def named_seeds() -> Iterator[tuple[str, bytes]]:
    """The seeds with a name for reports: the file's path under the repository, or what built it."""
    from tests.elfbuild import small_elf

    for ec in (1, 2):
        for little in (True, False):
            yield f"small_elf(elfclass={ec}, little={little})", small_elf(elfclass=ec, little=little)
    for folder in (ROOT / "tests" / "fixtures", ROOT / "tests" / "crashers", ROOT / "src" / "devbin" / "samples"):
        if folder.is_dir():
            for p in sorted(folder.iterdir()):
                if p.is_file() and p.suffix not in (".py", ".sh", ".md", ".cu", ".ptx", ".c", ".cl"):
                    yield str(p.relative_to(ROOT)), p.read_bytes()
    from devbin.samples import sample_elf_bytes

    yield "sample_elf_bytes()", sample_elf_bytes()
    from devbin.superarchive import InputMember, TargetInput, create

    # A packed super-archive (zstd frames, shared sections, deltas) for the archive targets.
    packed = create([TargetInput(f"t{i}", (InputMember("k.o", small_elf(elfclass=2, little=i == 0)),
                                           InputMember("n.bc", b"neutral" * 20))) for i in range(2)], storage="packed")
    yield "packed super-archive", packed
    from tests.test_sycl import sycl_host

    # SYCL host libraries (fuzz_sycl): both descriptor versions, a frame and a raw image per section,
    # and the layouts without descriptors or without .tgtimg.
    big, small = bytes(range(256)) * 4, b"\x03\x02\x23\x07" + bytes(16)
    for version in (2, 3):
        yield f"sycl_host(version={version})", sycl_host([big], [big, small], kernels=["k0", "k1"], version=version)
    yield "sycl_host(descriptors=False)", sycl_host([big, small], [big], kernels=["k"], descriptors=False)
    yield "sycl_host(tgtimg=False)", sycl_host([big], [small], kernels=["k"], tgtimg=False, descriptors=False)


def named_real_seeds(folder: Path) -> Iterator[tuple[str, bytes]]:
    """Real cubins, AMDGPU code objects and host objects, built as the tests build them.

    A missing compiler only drops those seeds (the run says so); the committed
    fixtures above always seed.
    """
    from tests import conftest, intelbuild

    for build in (conftest.build_host_objects, conftest.build_amdgpu_objects,
                  lambda out: conftest.build_cubins(out, from_ptx=conftest.cubins_from_ptx()), intelbuild.build_intel):
        sub = Path(tempfile.mkdtemp(dir=folder))
        try:
            files = build(sub)
        except BaseException as e:  # pytest.skip/fail outcomes are BaseExceptions
            if isinstance(e, KeyboardInterrupt):
                raise
            print(f"run_all: some real seeds not built: {e}")
            continue
        for key, p in files.items():
            data = p.read_bytes()
            if len(data) <= 1 << 20:
                yield f"built {key}", data


_BOUNDARY = (0, 1, 0x7F, 0x80, 0xFF)


def mutate(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if not buf:
            buf += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
            continue
        i = rng.randrange(len(buf))
        if op == 0:
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[i] = rng.choice(_BOUNDARY)
        elif op == 2:
            del buf[rng.randrange(len(buf)):]
        elif op == 3:
            width = rng.choice((2, 4, 8))
            val = rng.choice((0, (1 << (8 * width)) - 1, 1 << (8 * width - 1), rng.randrange(1 << 16)))
            buf[i:i + width] = val.to_bytes(width, "little")
        elif op == 4:
            other = rng.choice(pool)
            j = rng.randrange(len(other) or 1)
            buf[i:] = other[j:j + rng.randint(1, 256)]
        else:
            buf.insert(i, rng.randrange(256))
    return bytes(buf)


def run_python(name: str, fn: Callable[[bytes], None], pool: list[bytes], seconds: float, seed: int) -> int:
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    runs = 0
    for s in pool:
        check(name, fn, s)
    while time.monotonic() < deadline:
        check(name, fn, mutate(rng, rng.choice(pool), pool))
        runs += 1
    return runs


def check(name: str, fn: Callable[[bytes], None], data: bytes, what: str = "") -> None:
    try:
        fn(data)
    except Exception:
        crash_dir = ROOT / "fuzz" / "crashes"
        crash_dir.mkdir(exist_ok=True)
        path = crash_dir / f"{name}-{hashlib.sha1(data).hexdigest()[:16]}"
        path.write_bytes(data)
        traceback.print_exc()
        print(f"run_all: CRASH in {name}{f' on {what}' if what else ''}; input saved to {path}", file=sys.stderr)
        sys.exit(1)


def replay(names: list[str], pool: list[tuple[str, bytes]]) -> None:
    """Every target once on every seed, in process (``--replay``): the first failure stops the run."""
    for name in names:
        mod = importlib.import_module(f"fuzz.{name}")
        t0 = time.monotonic()
        for what, data in pool:
            check(name, mod.TestOneInput, data, what)
        print(f"  {name}: {len(pool)} inputs replayed, {time.monotonic() - t0:.1f} s, no crash", flush=True)


def run_atheris(name: str, pool: list[bytes], seconds: int, runs: int = 0) -> None:
    with tempfile.TemporaryDirectory() as corpus:
        for i, s in enumerate(pool):
            Path(corpus, f"seed{i}").write_bytes(s)
        crash_dir = ROOT / "fuzz" / "crashes"
        crash_dir.mkdir(exist_ok=True)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
        cmd = [sys.executable, str(ROOT / "fuzz" / f"{name}.py"), corpus, f"-max_total_time={seconds}",
               f"-artifact_prefix={crash_dir}/{name}-", "-print_final_stats=1", "-rss_limit_mb=4096",
               "-max_len=65536"] + ([f"-runs={runs}"] if runs else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        stats = [ln for ln in proc.stderr.splitlines()
                 if ln.startswith(("stat::number_of_executed_units", "stat::average_exec_per_sec"))]
        print(f"  {name}: atheris exit {proc.returncode}; {'; '.join(stats)}", flush=True)
        if proc.returncode != 0 and "libFuzzer: run interrupted" in proc.stderr:
            # SIGINT (exit 72): the figures above are the run's, nothing crashed
            print(f"run_all: {name} interrupted; no crash", file=sys.stderr)
            sys.exit(130)
        if proc.returncode != 0:
            print(proc.stderr[-6000:], file=sys.stderr)
            print(f"run_all: CRASH in {name}; see {crash_dir}", file=sys.stderr)
            sys.exit(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=60, help="total budget, shared by the targets")
    ap.add_argument("--engine", choices=("auto", "atheris", "python"), default="auto")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", action="append", choices=TARGETS, metavar="NAME",
                    help="run only this target (repeatable; default: all); --seconds is then per target")
    ap.add_argument("--runs", type=int, default=0,
                    help="atheris: stop a target after this many executions (or its time, whichever first)")
    ap.add_argument("--cli-seconds", type=int, default=0,
                    help="also run fuzz/cli_mutate.py for this many seconds after the targets")
    ap.add_argument("--replay", action="store_true",
                    help="run every target once on every seed and kept crasher, nothing else (deterministic: CI)")
    ap.add_argument("--cli-runs", type=int, default=0,
                    help="also run fuzz/cli_mutate.py for exactly this many command runs of campaign --seed")
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="devbin-fuzz-")
    named = list(named_seeds()) + list(named_real_seeds(Path(scratch)))
    pool = [data for _, data in named]
    names = [n for n in available_targets() if not args.target or n in args.target]
    if args.replay:
        t0 = time.monotonic()
        print(f"run_all: replay: {len(names)} targets, {len(pool)} seeds and crashers each")
        replay(names, named)
        print(f"run_all: replay: no crash ({time.monotonic() - t0:.0f} s)", flush=True)
        cli(args)
        print("run_all: no crashes")
        return
    per = args.seconds if args.target else max(args.seconds // max(len(names), 1), 1)
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "python"
    print(f"run_all: {len(names)} targets, {per} s each, engine {engine}, {len(pool)} seeds")
    for name in names:
        mod = importlib.import_module(f"fuzz.{name}")
        replay([name], named)  # the seeds in process first: cheap, and it catches regressions directly
        if engine == "atheris":
            run_atheris(name, pool, per, args.runs)
        else:
            runs = run_python(name, mod.TestOneInput, pool, per, args.seed)
            print(f"  {name}: {runs} inputs, no crash", flush=True)
    cli(args)
    print("run_all: no crashes")


def cli(args: argparse.Namespace) -> None:
    """fuzz/cli_mutate.py for ``--cli-runs`` command runs (deterministic) or ``--cli-seconds``, if asked."""
    budget = (["--runs", str(args.cli_runs)] if args.cli_runs else
              ["--seconds", str(args.cli_seconds)] if args.cli_seconds else [])
    if not budget:
        return
    rc = subprocess.run([sys.executable, str(ROOT / "fuzz" / "cli_mutate.py"), *budget, "--seed", str(args.seed)],
                        check=False).returncode
    if rc != 0:
        print("run_all: fuzz/cli_mutate.py found a failure (saved under tests/crashers/cli/)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
