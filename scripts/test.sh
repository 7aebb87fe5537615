#!/usr/bin/env bash
# The whole test suite: environment setup, lint, tests, and a deterministic fuzz replay.
#
#   bash scripts/test.sh            everything (CI runs this: .ci/run)
#   bash scripts/test.sh --quick    the inner loop, a minute or two: ruff, mypy, then
#                                   pytest --quick -x (no test marked `tool` or `slow`, see
#                                   tests/conftest.py; fewer property examples); no setup,
#                                   no pure-Python rerun, no fuzz
#
# Steps (stops at the first failure):
#   0. scripts/pep668-venv.sh      where python3 is externally managed (PEP 668: Debian 12's system
#      Python), .venv made and put first on PATH; nothing otherwise
#   1. scripts/setup-test-env.sh   Debian tools + pip install -e '.[test]' (fast when done)
#   2. ruff check src tests
#   3. python3 -m pytest -q        "no tests collected" (exit 5) counts as a failure; then the ELF and
#      cubin tests again with DEVBIN_PURE_PYTHON=1 (the pure-Python twins of the C fast path)
#   4. python3 fuzz/run_all.py --replay --cli-runs $DEVBIN_CLI_FUZZ_RUNS (default 2500), if present:
#      every fuzz target once on every seed and kept crasher, then the CLI mutation harness
#      (fuzz/cli_mutate.py) for exactly that many runs of campaign 1.  Deterministic: the same
#      inputs and the same result every run.  Exploratory fuzzing (run_all.py --seconds N) is not
#      part of this gate: it runs by hand or on a schedule (.ci/fuzz), and what it finds becomes a
#      crasher with a test (fuzz/README.md).
# With CI set (CI=true), tests that need a missing oracle tool fail instead of skipping.
# Sized for ~15 minutes on 2 cores; each step has a hard time limit.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

quick=0
case "${1:-}" in
    "") ;;
    --quick) quick=1 ;;
    *) echo "usage: bash scripts/test.sh [--quick]" >&2; exit 2 ;;
esac

cli_fuzz_runs="${DEVBIN_CLI_FUZZ_RUNS:-2500}"
t0=$SECONDS
step() { printf '\n== %s  [%ds]\n' "$*" "$((SECONDS - t0))"; }
fail() { printf '\ntest.sh: FAILED: %s  [%ds]\n' "$*" "$((SECONDS - t0))" >&2; exit 1; }

# Debian 12's system python3 refuses pip (PEP 668): then the steps below run .venv's python3.
source scripts/pep668-venv.sh

if [[ $quick == 0 ]]; then
    step "setup: scripts/setup-test-env.sh"
    bash scripts/setup-test-env.sh || fail "scripts/setup-test-env.sh"
fi

step "lint: ruff check src tests"
python3 -m ruff check src tests || fail "ruff check src tests"

step "types: python3 -m mypy (strict, src/devbin)"
python3 -m mypy || fail "mypy"

if [[ $quick == 1 ]]; then
    step "tests (quick): python3 -m pytest -q -x --quick"
    rc=0
    timeout --kill-after=30 600 python3 -m pytest -q -x --quick || rc=$?
    case "$rc" in
        0) ;;
        5) fail "pytest collected no tests (exit 5)" ;;
        124 | 137) fail "pytest --quick ran past its 600 s limit" ;;
        *) fail "pytest --quick (exit $rc)" ;;
    esac
    printf '\ntest.sh --quick: passed (tests marked tool/slow, the pure-Python rerun and fuzz not run)  [%ds]\n' \
        "$((SECONDS - t0))"
    exit 0
fi

step "tests: python3 -m pytest -q"
rc=0
timeout --kill-after=30 1200 python3 -m pytest -q || rc=$?
case "$rc" in
    0) ;;
    5) fail "pytest collected no tests (exit 5)" ;;
    124 | 137) fail "pytest ran past its 1200 s limit" ;;
    *) fail "pytest (exit $rc)" ;;
esac

# The C fast path (built by pip install -e in step 1) ran above; its pure-Python twins again here
# on the tests of the code they serve (tests/test_native_fastpath.py compares the two on every input).
step "tests (pure Python): DEVBIN_PURE_PYTHON=1 python3 -m pytest -q (ELF, cubin, crashers)"
DEVBIN_PURE_PYTHON=1 timeout --kill-after=30 300 python3 -m pytest -q tests/test_elf_core.py tests/test_elf_real.py \
    tests/test_nvidia_cubin.py tests/test_crashers.py tests/test_native_fastpath.py \
    || fail "pytest with DEVBIN_PURE_PYTHON=1"

if [[ -f fuzz/run_all.py ]]; then
    step "fuzz (replay): python3 fuzz/run_all.py --replay --cli-runs $cli_fuzz_runs"
    rc=0
    # About 2 minutes on 2 shared cores (fuzz/README.md); the limit leaves room for a slow machine.
    fuzz_limit=600
    timeout --kill-after=30 "$fuzz_limit" python3 fuzz/run_all.py --replay --cli-runs "$cli_fuzz_runs" || rc=$?
    case "$rc" in
        0) ;;
        124 | 137) fail "fuzz/run_all.py ran past its ${fuzz_limit} s limit" ;;
        *) fail "fuzz/run_all.py (exit $rc)" ;;
    esac
else
    step "fuzz: skipped (fuzz/run_all.py not found)"
fi

printf '\ntest.sh: all steps passed  [%ds]\n' "$((SECONDS - t0))"
