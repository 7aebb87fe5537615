"""A writer killed between naming its file and the rename (issue 24, defect 10).

:mod:`devbin.binary.output` gives its new file a temporary name ``.NAME.<16 hex>.tmp`` only when
it must: a new destination is linked straight at its name; a replacement is named just before the
rename.  A writer killed (``SIGKILL``) in that moment leaves the whole new file under the temporary
name; the next write of the same destination removes it, because the dead writer's ``flock`` is
gone, and leaves alone the file of a writer still alive.  The rename is delayed here the way the
issue reproduced it: a forked writer whose ``os.replace`` blocks, and (through the CLI) the test
hook's ``rename`` hold point.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import devbin.samples
from devbin.binary import output as output_mod
from devbin.binary.output import HOLD_ENV, HOLD_POINT_ENV, write_file

from tests.runners import TOOL_TIMEOUT

SRC = Path(__file__).resolve().parent.parent / "src"
SAMPLES = Path(devbin.samples.__file__).resolve().parent
OLD, NEW = b"old output\n" * 100, b"new output, whole\n" * 5000
TEMP = re.compile(r"\.a\.bin\.[0-9a-f]{16}\.tmp")




def _writer_stopped_at_rename(out: Path, data: bytes, marker: Path, release: Path | None = None) -> int:
    """A forked child writing ``data`` to ``out`` whose ``os.replace`` stops (creating ``marker``) until
    ``release`` exists (or for a minute).  Returns its pid once it stopped there, or once it ended."""
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            real_replace = os.replace

            def stopped(src: str, dst: str) -> None:
                marker.write_text(src)
                deadline = time.monotonic() + 60
                while not (release and release.exists()) and time.monotonic() < deadline:
                    time.sleep(0.01)
                real_replace(src, dst)

            os.replace = stopped  # type: ignore[assignment]  # this process only: it is a fork
            write_file(out, data)
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return -pid  # ended without reaching a rename
        time.sleep(0.01)
    return pid


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def _leftovers(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if TEMP.fullmatch(p.name))


def test_killed_before_the_rename_the_next_write_removes_the_leftover(flavour: str, tmp_path: Path) -> None:
    out = tmp_path / "a.bin"
    out.write_bytes(OLD)
    pid = _writer_stopped_at_rename(out, NEW, tmp_path.parent / f"{tmp_path.name}-marker")
    assert pid > 0, "the writer ended without a rename"
    _kill(pid)
    assert out.read_bytes() == OLD  # the destination as it was
    (left,) = _leftovers(tmp_path)  # the leftover: the whole new file under its temporary name
    assert left.read_bytes() == NEW
    write_file(out, b"the next write")
    assert out.read_bytes() == b"the next write"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_a_new_destination_never_has_a_temporary_name(tmp_path: Path) -> None:
    """O_TMPFILE: the file is linked at its own name, so there is no rename to be killed before."""
    if not output_mod.USE_O_TMPFILE:
        pytest.skip("no O_TMPFILE on this platform")
    out = tmp_path / "a.bin"
    pid = _writer_stopped_at_rename(out, NEW, tmp_path.parent / f"{tmp_path.name}-marker")
    if pid > 0:
        _kill(pid)
        pytest.fail(f"a new destination was renamed into place (left: {sorted(os.listdir(tmp_path))})")
    assert out.read_bytes() == NEW
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_a_live_writers_file_is_not_taken_for_a_leftover(flavour: str, tmp_path: Path) -> None:
    """Writer A stops before its rename; writer B writes the same file and sweeps: A's file stays (A
    holds its lock), A then renames it: the output is A's, whole, and nothing else is left."""
    out = tmp_path / "a.bin"
    out.write_bytes(OLD)
    release = tmp_path.parent / f"{tmp_path.name}-release"
    pid = _writer_stopped_at_rename(out, NEW, tmp_path.parent / f"{tmp_path.name}-marker", release)
    assert pid > 0
    try:
        write_file(out, b"writer B")
        assert out.read_bytes() == b"writer B" and len(_leftovers(tmp_path)) == 1
    finally:
        release.touch()
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert out.read_bytes() == NEW
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_sweep_leaves_what_is_not_a_leftover(tmp_path: Path) -> None:
    """Only ``.a.bin.<16 lowercase hex>.tmp`` regular files go: other names and a planted symbolic link stay."""
    precious = tmp_path.parent / f"{tmp_path.name}-precious"
    precious.write_bytes(b"precious")
    keep = [".a.bin.0123.tmp", ".a.bin.0123456789ABCDEF.tmp", "a.bin.0123456789abcdef.tmp",
            ".b.bin.0123456789abcdef.tmp", ".a.bin.0123456789abcdef.tmp.x"]
    for name in keep:
        (tmp_path / name).write_bytes(b"not a leftover of a.bin")
    os.symlink(precious, tmp_path / ".a.bin.fedcba9876543210.tmp")
    (tmp_path / ".a.bin.0123456789abcdef.tmp").write_bytes(b"a leftover")
    write_file(tmp_path / "a.bin", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*keep, ".a.bin.fedcba9876543210.tmp", "a.bin"])
    assert precious.read_bytes() == b"precious"


def _devbin(argv: list[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
    e = {k: v for k, v in os.environ.items() if k not in (HOLD_ENV, HOLD_POINT_ENV)}
    e.update(PYTHONPATH=str(SRC), PYTHONDONTWRITEBYTECODE="1", **env)
    return subprocess.Popen([sys.executable, "-m", "devbin", *argv], cwd=cwd, env=e, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _held(hold: Path) -> Iterator[Path]:
    return (p for p in hold.iterdir() if p.name.startswith("held-") and not p.name.endswith(".part"))


def test_cli_killed_at_the_rename_hold_point(tmp_path: Path) -> None:
    """``devbin annotate -o a.cubin`` over an old a.cubin, stopped by the test hook between naming its
    file and the rename, killed: a.cubin is the old one and the whole output waits under its temporary
    name; the same command again: a.cubin is the output and nothing else is left."""
    (tmp_path / "work").mkdir()
    (tmp_path / "clean").mkdir()
    for d in ("work", "clean"):
        (tmp_path / d / "k.cubin").write_bytes((SAMPLES / "sample_sm90.cubin").read_bytes())
    argv = ["annotate", "k.cubin", "-o", "a.cubin"]
    clean = _devbin(argv, tmp_path / "clean")
    assert clean.wait(timeout=TOOL_TIMEOUT) == 0, clean.communicate()[1]
    want = (tmp_path / "clean" / "a.cubin").read_bytes()
    work = tmp_path / "work"
    (work / "a.cubin").write_bytes(OLD)
    hold = tmp_path / "hold"
    hold.mkdir()
    proc = _devbin(argv, work, **{HOLD_ENV: str(hold), HOLD_POINT_ENV: "rename"})
    deadline = time.monotonic() + 120
    while not any(_held(hold)) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.kill()
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL, "devbin did not stop at its rename"
    assert (work / "a.cubin").read_bytes() == OLD
    left = [p for p in work.iterdir() if re.fullmatch(r"\.a\.cubin\.[0-9a-f]{16}\.tmp", p.name)]
    assert len(left) == 1 and left[0].read_bytes() == want
    again = _devbin(argv, work)
    assert again.wait(timeout=TOOL_TIMEOUT) == 0, again.communicate()[1]
    assert (work / "a.cubin").read_bytes() == want
    assert sorted(p.name for p in work.iterdir()) == ["a.cubin", "k.cubin"]
