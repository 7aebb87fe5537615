"""The one way tests run devbin's CLI and external tools.

Why one place: the suite had a private copy of these in most test files (an in-process CLI runner,
subprocess runners with time-outs of 120, 300, 600 s or none), so a hung tool could stall the run
for ten minutes in one file and forever in another.  Here there is one of each, with one time-out.

``cli(*argv)``          devbin's ``main`` in this process: ``(exit status, stdout)``.
``cli_ok(*argv)``       the same, asserting status 0; returns stdout.
``cli_err(*argv)``      ``(exit status, stdout, stderr)``: for what a command says on stderr, and for
                        argparse's own exits (a usage error, ``--help``, ``--version``).
``run_tool(argv, ...)`` an external program (nvcc, clang-19, ar, ...), ``TOOL_TIMEOUT`` seconds;
                        fails the test with its output when it exits non-zero (``check=False`` to
                        look at the status yourself).  A test that calls it needs external tools:
                        ``conftest.py`` marks it ``tool`` (the quick tier leaves it out).
``run_devbin(*argv)``   ``python -m devbin`` in a child process with a bare environment (only
                        ``PYTHONPATH=src``, ``PATH=/usr/bin:/bin`` and ``PYTHONDONTWRITEBYTECODE=1``,
                        plus ``env=``): for what only a real process shows (the exit, the streams,
                        the files it leaves, a resource limit or another user: ``preexec_fn=``,
                        ``user=``).

Import them as ``from tests.runners import cli, run_tool`` (pyproject.toml's ``pythonpath`` puts the
repository root on ``sys.path`` for ``pytest``, ``python3 -m pytest`` and CI alike).  What stays outside:
a devbin held mid-write or on a terminal (``subprocess.Popen``: test_write_safety*, test_progress), the
peak-memory runner of test_budget, bytes on stdout (test_nvidia_cli), the suite itself (test_tiers,
test_readme_setup) and Python children that are no external tool (``sys.executable -c``).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from devbin.cli.main import main

ROOT = Path(__file__).resolve().parent.parent

# One time-out for every child process: long enough for nvcc on a loaded 2-core machine, short
# enough that a hung tool fails its test instead of the whole run's time limit.
TOOL_TIMEOUT = 300


def cli(*argv: str | os.PathLike[str]) -> tuple[int, str]:
    """Run ``devbin *argv`` in this process; return its exit status and what it wrote to stdout."""
    out = io.StringIO()
    code = main([os.fspath(a) for a in argv], out)
    return code, out.getvalue()


def cli_ok(*argv: str | os.PathLike[str]) -> str:
    """Run ``devbin *argv`` in this process, assert it succeeded; return stdout (stderr is left to capsys)."""
    code, out = cli(*argv)
    assert code == 0
    return out


def cli_err(*argv: str | os.PathLike[str]) -> tuple[int, str, str]:
    """Run ``devbin *argv`` in this process; return its exit status (argparse's own exits included: 2
    for a usage error, 0 for ``--help``/``--version``), stdout (argparse's help and version too) and
    stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main([os.fspath(a) for a in argv], out)
        except SystemExit as e:  # argparse's own exits; a message instead of a status is 1, as for Python
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    return code, out.getvalue(), err.getvalue()


def run_tool(argv: Sequence[str | os.PathLike[str]], cwd: Path | None = None, *,
             env: Mapping[str, str] | None = None, check: bool = True,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run an external program with ``TOOL_TIMEOUT``; ``env`` is added to this process's environment.

    With ``check`` (the default) a non-zero exit fails the test with the command line and its output; a
    program that cannot start or runs past the time-out fails it whatever ``check`` says.
    """
    args = [os.fspath(a) for a in argv]
    try:
        proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False,
                              env=None if env is None else {**os.environ, **env}, input=input)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"{' '.join(args)} could not run: {e}", pytrace=False)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}", pytrace=False)
    return proc


def run_devbin(*argv: str | os.PathLike[str], cwd: Path | None = None, env: Mapping[str, str] | None = None,
               preexec_fn: Callable[[], None] | None = None,
               user: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m devbin *argv`` in a child process with a bare environment (``env`` added to it);
    ``preexec_fn``/``user`` as :func:`subprocess.run`'s (a resource limit, another user); never raises on
    exit status."""
    bare = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "devbin", *map(os.fspath, argv)], cwd=cwd, capture_output=True,
                          text=True, env={**bare, **(env or {})}, check=False, timeout=TOOL_TIMEOUT,
                          preexec_fn=preexec_fn, user=user)
