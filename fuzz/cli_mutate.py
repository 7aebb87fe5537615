"""CLI mutation harness: mutants of real seeds through ``devbin``'s console entry point.

    python3 fuzz/cli_mutate.py --runs 50000 --seed 1        # a campaign by hand
    python3 fuzz/cli_mutate.py --runs 2500 --seed 1         # what CI runs (fuzz/run_all.py --cli-runs 2500)
    python3 fuzz/cli_mutate.py --seed 1 --only 1234         # replay mutant 1234 of campaign 1
    python3 fuzz/cli_mutate.py --tampered --runs 2160       # only tampered wheels (WHEEL_TAMPERS in turn)

Seeds (fuzz/cli_seeds.py) are built at run time from the shipped samples with devbin's own
writers: cubins, AMDGPU objects and a shared object, a fatbin, OffloadBinaries v1 and v2,
plain and compressed (CCOB v2 zstd, v3 zlib) bundles, a wrapped image, an ar archive, plain
and packed super-archives, a host object with .nv_fatbin/.hip_fatbin, a zip and a wheel.
Mutants come from fuzz/cli_mutators.py (field-targeted edits of every structure, rebuilders
that keep outer checksums valid, generic flips and truncations).

Each mutant is written into a fresh folder and every command of ``COMMANDS`` is run on it by
``devbin.cli.main.main`` in a forked child with a wall-clock limit (--timeout), an
address-space limit (RLIMIT_AS, --memory-mb) and a file-size limit.  Outcomes:

  ok          exit 0
  error       exit 1 or 2 with exactly one "devbin: error:" stderr line, the last (any other
              stderr lines are one-line warnings and notes: "warning: ...", "note: ...")
  no-device   exit 3 with the one stderr line "devbin: PATH: does not contain device code"
  reported    exit 1 with no "devbin: error:" line, stderr (if any) one-line diagnostics
              ("warning: ...", "note: ...", "error: ..."): the command reported what it found
              wrong as its result (inspect/callgraph errors, link's undefined symbols), by design
  messy       exit 1, 2 or 3 with some other stderr (an error over several lines, or none)
  traceback   an exception escaped main() (or a non-devbin exit status)
  hang        still running at the time limit (killed)
  memory      MemoryError escaped, or the child died of a signal under the memory limit
  damaged     the input file's bytes changed, or it was removed; for the in-place commands
              (IN_PLACE: prune --in-place of the mutant, or of its folder, one devbin or two
              at once): an input neither as it was nor with its original in INPUT.devbin-backup,
              a single failed run that changed anything (a folder is all or nothing), or a file
              left behind (lock, journal, undo link, temporary file)

traceback/hang/memory/damaged fail the run (exit 1): the mutant is saved under
tests/crashers/cli/ as ``<format>-<command>-<sha1>.bin`` with a ``.cmd`` file holding the
command line, the outcome and the end of stderr.  ``messy`` is counted and reported, not
fatal.  Everything is deterministic given --seed: mutant i of a campaign is built from
``Random(f"{seed}:{i}")`` and the seed files, so one case replays with --only I.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "src")) if p not in sys.path]

from fuzz.cli_mutators import WHEEL_TAMPERS, mutate, tamper_wheel  # noqa: E402
from fuzz.cli_seeds import Seed, build_seeds  # noqa: E402

CRASH_DIR = ROOT / "tests" / "crashers" / "cli"
FAILURES = ("traceback", "hang", "memory", "damaged")
OUTCOMES = ("ok", "error", "no-device", "reported", "messy", *FAILURES)
_TB_RC, _MEM_RC = 70, 71  # child exit statuses for an escaped exception / MemoryError

#: name -> argv template.  {in} the input file (cwd is its folder), {dev} the seed's device,
#: {tgt} its super-archive target, {tmp} a scratch folder beside it.  "w:" marks writing commands.
COMMANDS: dict[str, list[str]] = {
    "list": ["list", "{in}"],
    "inspect": ["inspect", "{in}"],
    "extract": ["extract", "{in}", "-o", "{tmp}/x"],
    "resources": ["resources", "{in}"],
    "size": ["size", "{in}", "--keep", "{dev}"],
    "callgraph": ["callgraph", "{in}"],
    "select": ["select", "{in}", "--device", "{dev}", "--explain"],
    "ar-list": ["ar", "list", "{in}"],
    "ar-symbols": ["ar", "symbols", "{in}", "--target", "{tgt}", "--chain"],
    "link": ["link", "{in}", "--target", "{dev}"],
    "load": ["load", "{in}", "--target", "{dev}"],
    "w:prune-dry": ["prune", "{in}", "--keep", "{dev}", "--dry-run"],
    "w:prune": ["prune", "{in}", "--drop", "{dev}", "-o", "{tmp}/pruned"],
    "w:pack": ["pack", "-o", "{tmp}/p.offload", "--image", "file={in}"],
    "w:annotate": ["annotate", "{in}", "-o", "{tmp}/annotated.o"],
    "w:extract-here": ["extract", "{in}"],
    "w:link-o": ["link", "{in}", "--target", "{dev}", "-o", "{tmp}/linked.o", "--map", "{tmp}/link.map"],
    "w:ar-extract": ["ar", "extract", "{in}", "--target", "{tgt}", "-o", "{tmp}/target.a"],
    "w:prune-in-place": ["prune", "{in}", "--drop", "{dev}", "--in-place"],
    "w:prune-in-place-race": ["prune", "{in}", "--drop", "{dev}", "--in-place"],
    "w:prune-folder": ["prune", ".", "--drop", "{dev}", "--in-place"],
    "w:prune-folder-race": ["prune", ".", "--drop", "{dev}", "--in-place"],
}

#: The in-place commands (docs/PRUNE.md, "What --in-place promises"): how many devbins run at once,
#: and whether on the input's folder, which then also holds the unmutated seed and a RECORD naming
#: both (one odd line in it), so that one library of the folder can fail while the other prunes.
IN_PLACE: dict[str, tuple[int, bool]] = {"w:prune-in-place": (1, False), "w:prune-in-place-race": (2, False),
                                         "w:prune-folder": (1, True), "w:prune-folder-race": (2, True)}
_BACKUP = ".devbin-backup"


@dataclass
class Result:
    outcome: str
    rc: int
    stderr: str
    seconds: float


def _child(argv: list[str], cwd: str, err_path: str, memory: int) -> None:
    """In the forked child: limits, redirections, then the console entry point.  Never returns."""
    try:
        os.chdir(cwd)
        fd = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        # Whatever the parent had as sys.stdout/sys.stderr (pytest's capture, say), write to the fds.
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past RLIMIT_FSIZE fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        from devbin.cli.main import main

        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except MemoryError:
            sys.stderr.write("cli_mutate: MemoryError escaped\n")
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(_MEM_RC)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc if rc in (0, 1, 2, 3) else _TB_RC)
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
            sys.stderr.flush()
        os._exit(_TB_RC)


def run_one(argv: list[str], cwd: str, timeout: float, memory: int) -> Result:
    return run_many(argv, cwd, timeout, memory, 1)


def run_many(argv: list[str], cwd: str, timeout: float, memory: int, n: int) -> Result:
    """``argv`` in ``n`` children started together; the worst outcome of them (the first child's
    when all are alike)."""
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    pids = []
    for i in range(n):
        err_path = os.path.join(cwd, f".stderr{i}")
        pid = os.fork()
        if pid == 0:
            _child(argv, cwd, err_path, memory)
        pids.append((pid, err_path))
    results = [_reap(pid, err_path, timeout, t0) for pid, err_path in pids]
    return max(results, key=lambda r: OUTCOMES.index(r.outcome))


def _reap(pid: int, err_path: str, timeout: float, t0: float) -> Result:
    status = _wait(pid, max(0.1, timeout - (time.monotonic() - t0)))
    took = time.monotonic() - t0
    try:
        err = Path(err_path).read_text(errors="replace")
        os.unlink(err_path)
    except OSError:
        err = ""
    if status is None:
        return Result("hang", -1, err, took)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return Result("memory" if sig in (signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT)
                      else "traceback", -sig, err + f"\n(killed by signal {sig})", took)
    rc = os.WEXITSTATUS(status)
    return Result(classify(rc, err), rc, err, took)


def classify(rc: int, err: str) -> str:
    if rc == _MEM_RC or "MemoryError" in err:
        return "memory"
    if rc == 0:
        return "ok"
    if rc in (1, 2, 3):
        if "Traceback (most recent call last)" in err:
            return "traceback"
        lines = err.splitlines()
        if rc == 3:
            return "no-device" if len(lines) == 1 and lines[0].endswith(": does not contain device code") else "messy"
        if rc == 1 and all(line.startswith(("warning: ", "note: ", "error: ")) for line in lines):
            return "reported"
        others = [line for line in lines[:-1] if not line.startswith(("warning: ", "note: "))]
        return "error" if lines and lines[-1].startswith("devbin: error:") and not others else "messy"
    return "traceback"


def _wait(pid: int, timeout: float) -> int | None:
    """The child's wait status, or None after killing it at ``timeout`` seconds."""
    try:
        pfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pfd = -1
    if pfd >= 0:
        try:
            ready, _, _ = select.select([pfd], [], [], timeout)
        finally:
            os.close(pfd)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        return os.waitpid(pid, 0)[1]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return status
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def expand(template: Sequence[str], seed: Seed, name: str, tmp: str) -> list[str]:
    return [a.format(**{"in": name, "dev": seed.device, "tgt": seed.target, "tmp": tmp}) for a in template]


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def run_case(seed: Seed, data: bytes, cmd: str, work: Path, timeout: float, memory: int) -> Result:
    """One command on one mutant in a fresh folder ``work``; checks the input's bytes afterwards."""
    if work.exists():
        shutil.rmtree(work)
    (work / "in").mkdir(parents=True)
    (work / "tmp").mkdir()
    name = seed.name
    path = work / "in" / name
    path.write_bytes(data)
    before = hashlib.sha256(data).hexdigest()
    if cmd in IN_PLACE:
        return _run_in_place(seed, data, cmd, work, timeout, memory)
    argv = expand(COMMANDS[cmd], seed, name, str(work / "tmp"))
    res = run_one(argv, str(work / "in"), timeout, memory)
    if _digest(path) != before:
        res = Result("damaged", res.rc, res.stderr + f"\n(input {name} changed or removed; outcome was {res.outcome})",
                     res.seconds)
    return res


def _run_in_place(seed: Seed, data: bytes, cmd: str, work: Path, timeout: float, memory: int) -> Result:
    """An in-place prune (or two at once) of the mutant, or of its folder.  Damaged unless: every input
    is as it was or its ``.devbin-backup`` holds its original bytes; a failed single run changed nothing
    at all (a folder all or nothing); nothing else is left (no lock, journal, undo link, temporary file)."""
    n, folder = IN_PLACE[cmd]
    d = work / "in"
    originals = {seed.name: data}
    if folder:
        originals["seed-" + seed.name] = seed.data
        (d / ("seed-" + seed.name)).write_bytes(seed.data)
        rows = "".join(f"{k},sha256={hashlib.sha256(v).hexdigest()},{len(v)}\n" for k, v in originals.items())
        record = rows.encode() + b"odd\xff\x00line\npkg-1.0.dist-info/RECORD,,\n"
        (d / "pkg-1.0.dist-info").mkdir()
        (d / "pkg-1.0.dist-info" / "RECORD").write_bytes(record)
    argv = expand(COMMANDS[cmd], seed, seed.name, str(work / "tmp"))
    res = run_many(argv, str(d), timeout, memory, n)
    wrong: list[str] = []
    for name, old in originals.items():
        now = (d / name).read_bytes() if (d / name).is_file() else None
        backup = (d / (name + _BACKUP)).read_bytes() if (d / (name + _BACKUP)).is_file() else None
        if backup is not None and backup != old:
            wrong.append(f"{name}{_BACKUP} is not the original")
        elif now != old and backup is None:
            wrong.append(f"{name} changed and its original is nowhere")
        elif n == 1 and res.rc != 0 and (now != old or backup is not None):
            wrong.append(f"{name} changed by a run that failed")
    if res.outcome != "hang":
        known = {*originals, *(k + _BACKUP for k in originals), "pkg-1.0.dist-info"}
        wrong += [f"{p.name} left behind" for p in d.iterdir() if p.name not in known]
    if wrong:
        return Result("damaged", res.rc, res.stderr + f"\n({'; '.join(wrong)}; outcome was {res.outcome})",
                      res.seconds)
    return res


def warm_up(seeds: list[Seed], work: Path) -> None:
    """Import every command's library modules in this process, so each fork starts warm: run each
    command once on each seed, in-process, output discarded."""
    from devbin.cli.main import main

    for seed in seeds:
        for cmd in COMMANDS:
            d = work / "warm"
            if d.exists():
                shutil.rmtree(d)
            (d / "tmp").mkdir(parents=True)
            (d / seed.name).write_bytes(seed.data)
            cwd = os.getcwd()
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
                try:
                    os.chdir(d)
                    main(expand(COMMANDS[cmd], seed, seed.name, str(d / "tmp")))
                except BaseException:
                    pass
                finally:
                    os.chdir(cwd)


def save(seed: Seed, cmd: str, data: bytes, res: Result, what: str, index: int, args: argparse.Namespace) -> Path:
    CRASH_DIR.mkdir(parents=True, exist_ok=True)
    stem = f"{seed.fmt}-{cmd.removeprefix('w:')}-{hashlib.sha1(data).hexdigest()[:12]}"
    (CRASH_DIR / f"{stem}.bin").write_bytes(data)
    argv = ["devbin", *expand(COMMANDS[cmd], seed, f"{stem}.bin", "OUTDIR")]
    (CRASH_DIR / f"{stem}.cmd").write_text(json.dumps({
        "argv": argv, "input_name": seed.name, "format": seed.fmt, "command": cmd, "outcome": res.outcome,
        "rc": res.rc, "mutation": what, "campaign": {"seed": args.seed, "index": index},
        "stderr_tail": res.stderr[-3000:]}, indent=1) + "\n")
    return CRASH_DIR / f"{stem}.bin"


def table(counts: dict[tuple[str, str], Counter[str]], rows: list[str], title: str) -> str:
    cols = [c for c in OUTCOMES if any(v[c] for v in counts.values())] or ["ok"]
    lines = [title, f"{'':22} {'runs':>7} " + " ".join(f"{c:>9}" for c in cols)]
    for r in rows:
        tot: Counter[str] = Counter()
        for (a, b), v in counts.items():
            if r in (a, b):
                tot += v
        if tot:
            lines.append(f"{r:22} {sum(tot.values()):7} " + " ".join(f"{tot[c]:9}" for c in cols))
    tot = sum(counts.values(), Counter())
    lines.append(f"{'total':22} {sum(tot.values()):7} " + " ".join(f"{tot[c]:9}" for c in cols))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=0, help="stop after this many command runs")
    ap.add_argument("--seconds", type=float, default=0, help="stop after this long (default: 60 when no --runs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds a command may take (hang beyond)")
    ap.add_argument("--memory-mb", type=int, default=2048, help="RLIMIT_AS of each child, MiB")
    ap.add_argument("--format", action="append", help="only these seed formats (repeatable)")
    ap.add_argument("--command", action="append", choices=list(COMMANDS), help="only these commands (repeatable)")
    ap.add_argument("--only", type=int, help="run mutant number ONLY alone (replay one case)")
    ap.add_argument("--tampered", action="store_true",
                    help="mutants are the wheel seed tampered (fuzz/cli_mutators.WHEEL_TAMPERS, each in turn)")
    ap.add_argument("--save-limit", type=int, default=40, help="save at most this many failing inputs")
    ap.add_argument("--json", metavar="FILE", help="also write the counts here as JSON")
    ap.add_argument("--show-messy", type=int, default=3, metavar="N", help="print the stderr of N messy errors")
    args = ap.parse_args(argv)
    if not args.runs and not args.seconds:
        args.seconds = 60
    seeds = [s for s in build_seeds() if (not args.format or s.fmt in args.format)
             and (not args.tampered or s.fmt == "wheel")]
    if not seeds:
        ap.error("no seed of the formats given")
    cmds = [c for c in COMMANDS if not args.command or c in args.command]
    pool = [s.data for s in seeds]
    memory = args.memory_mb << 20
    scratch = Path(tempfile.mkdtemp(prefix="devbin-cli-mutate-"))
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    failures: list[str] = []
    messy: list[str] = []
    slow: list[tuple[float, str]] = []
    saved = 0
    t0 = time.monotonic()
    runs = 0
    try:
        warm_up(seeds, scratch)
        vm = next((int(ln.split()[1]) >> 10 for ln in Path("/proc/self/status").read_text().splitlines()
                   if ln.startswith("VmSize:")), 0)
        print(f"cli_mutate: {len(seeds)} seeds, {len(cmds)} commands, seed {args.seed}, timeout {args.timeout:g} s, "
              f"address space {args.memory_mb} MiB per run (the harness itself: {vm} MiB); "
              f"warm-up {time.monotonic() - t0:.1f} s", flush=True)
        t0 = time.monotonic()
        index = args.only if args.only is not None else 0
        seen: set[tuple[str, str, str]] = set()
        while True:
            if (args.runs and runs >= args.runs) or (args.seconds and time.monotonic() - t0 >= args.seconds):
                break
            rng = random.Random(f"{args.seed}:{index}")
            seed = seeds[index % len(seeds)]
            if args.tampered:
                tampered = tamper_wheel(rng, seed.data, WHEEL_TAMPERS[index % len(WHEEL_TAMPERS)])
                assert tampered is not None
                data, what = tampered
            elif index < len(seeds) and args.only is None:
                data, what = seed.data, "seed (unmutated)"
            else:
                data, what = mutate(rng, seed.data, pool)
            for cmd in cmds:
                if args.runs and runs >= args.runs:
                    break
                res = run_case(seed, data, cmd, scratch / "case", args.timeout, memory)
                counts[(seed.fmt, cmd)][res.outcome] += 1
                runs += 1
                slow.append((res.seconds, f"{seed.fmt} {cmd} mutant {index} ({res.outcome})"))
                if len(slow) > 50:
                    slow = sorted(slow, reverse=True)[:5]
                if res.outcome == "messy" and len(messy) < args.show_messy:
                    messy.append(f"  {seed.fmt} {cmd} mutant {index}, exit {res.rc}: {res.stderr.strip()[:400]!r}")
                if res.outcome in FAILURES:
                    last = (res.stderr.strip().splitlines() or [""])[-1][:200]
                    key = (seed.fmt, cmd, last if res.outcome == "traceback" else res.outcome)
                    line = f"  {res.outcome}: {seed.fmt} {cmd} mutant {index} ({what[:120]}): {last}"
                    if key not in seen:
                        seen.add(key)
                        if saved < args.save_limit:
                            line += f"\n    saved {save(seed, cmd, data, res, what, index, args).relative_to(ROOT)}"
                            saved += 1
                        print(line, flush=True)
                    failures.append(line)
            if args.only is not None:
                break
            index += 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    took = time.monotonic() - t0
    print(table(counts, [s.fmt for s in seeds], f"\nper format ({runs} runs, {index + 1} mutants, {took:.0f} s, "
                                                 f"{runs / max(took, 1e-9):.1f} runs/s):"))
    print(table(counts, cmds, "\nper command:"))
    print("\nslowest runs: " + "; ".join(f"{t:.2f} s {w}" for t, w in sorted(slow, reverse=True)[:5]))
    if messy:
        print("\nmessy errors (not one 'devbin: error:' line), first ones:\n" + "\n".join(messy))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "seed": args.seed, "runs": runs, "mutants": index + 1, "seconds": round(took, 1),
            "counts": {f"{f} {c}": dict(v) for (f, c), v in sorted(counts.items())}}, indent=1) + "\n")
    if failures:
        print(f"\ncli_mutate: {len(failures)} failing runs (traceback/hang/memory/damaged); "
              f"inputs under {CRASH_DIR.relative_to(ROOT)}", file=sys.stderr)
        return 1
    print("\ncli_mutate: no traceback, hang, memory failure or damaged input")
    return 0


if __name__ == "__main__":
    sys.exit(main())
