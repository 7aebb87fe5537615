"""The progress bar (issue 27, item 9): it counts bytes, moves inside a wheel, covers prune, is drawn on
stderr only when stderr is a terminal, and never changes what is printed on stdout.

The inputs are what ``devbin tour`` writes (``app.offload``: sm_90, compute_90 and gfx90a images) in a
wheel built here with a large member beside the library, as a package's data files are.
"""

from __future__ import annotations

import itertools
import os
import pty
import random
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from devbin.images.scan import Scanner
from devbin.packaging.prune_packages import prune_wheel, record_hash
from devbin.size import measure

from tests.runners import TOOL_TIMEOUT, cli, run_devbin

SRC = Path(__file__).parents[1] / "src"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pkg-1.0-py3-none-any.whl: a data member of 300,000 random bytes (stored as they are: deflate cannot
    shrink them), the library app.offload, a module, and the dist-info a wheel verifies with."""
    tmp = tmp_path_factory.mktemp("progress")
    assert cli("tour", "-o", str(tmp / "tour"))[0] == 0
    members = {"pkg/data.bin": random.Random(27).randbytes(300_000),
               "pkg/lib/app.offload": (tmp / "tour" / "app.offload").read_bytes(),
               "pkg/__init__.py": b"",
               "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
               "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                          b"Tag: py3-none-any\n"}
    record = "pkg-1.0.dist-info/RECORD"
    rows = "".join(f"{n},{record_hash(b)},{len(b)}\n" for n, b in members.items()) + f"{record},,\n"
    path = tmp / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in {**members, record: rows.encode()}.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6)), data, zipfile.ZIP_DEFLATED)
    return path


def _check_bytes(calls: list[tuple[int, int]], total: int) -> None:
    """``calls`` count bytes up to ``total``: from 0, never back, to the end, and between the two at least
    once (the bar moved during the run: a count of files read 0/1, then 1/1)."""
    assert calls[0] == (0, total) and calls[-1] == (total, total) and {t for _, t in calls} == {total}
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(calls))
    assert any(0 < d < total for d, _ in calls), calls


def test_a_scan_of_one_wheel_counts_its_bytes_member_by_member(wheel: Path) -> None:
    calls: list[tuple[int, int]] = []
    assert measure([wheel], progress=lambda d, t: calls.append((d, t)))
    _check_bytes(calls, wheel.stat().st_size)
    calls.clear()
    assert Scanner(all=True).listing([wheel], lambda d, t: calls.append((d, t)))
    _check_bytes(calls, wheel.stat().st_size)
    calls.clear()
    assert list(Scanner().paths([wheel, wheel], lambda d, t: calls.append((d, t))))
    _check_bytes(calls, 2 * wheel.stat().st_size)
    assert (wheel.stat().st_size, 2 * wheel.stat().st_size) in calls  # the first file done


def test_prune_reports_the_bytes_of_the_libraries_it_prunes(wheel: Path) -> None:
    """A wheel's prune had no progress at all."""
    calls: list[tuple[int, int]] = []
    result = prune_wheel(wheel, None, keep="sm_90", progress=lambda d, t: calls.append((d, t)))
    (lib,) = [f for f in result.files if f.result is not None]
    assert calls == [(0, lib.size), (lib.size, lib.size)] and result.bytes_saved > 0


def _stderr_on_a_terminal(argv: list[str]) -> tuple[bytes, bytes]:
    """devbin's stdout (a pipe) and what it drew on stderr, a pseudo-terminal."""
    main_fd, term = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "devbin", *argv], stdout=subprocess.PIPE, stderr=term,
                         env={**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "100"})
    os.close(term)
    drawn = b""
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main_fd)
    assert p.stdout is not None
    out = p.stdout.read()
    assert p.wait(timeout=TOOL_TIMEOUT) == 0, drawn[-2000:]
    return out, drawn


@pytest.mark.parametrize("argv", [["size"], ["prune", "--keep", "sm_90", "--dry-run"]], ids=["size", "prune"])
def test_the_bar_is_drawn_on_stderr_and_stdout_is_unchanged(wheel: Path, argv: list[str]) -> None:
    """With stderr a terminal and stdout a pipe, the bar went to stdout (rich's default console): it was
    never drawn and left a stray newline at the start of the report; prune drew no bar at all."""
    args = [*argv[:1], str(wheel), *argv[1:]]
    piped = run_devbin(*args, env={"COLUMNS": "100"})
    assert piped.returncode == 0 and piped.stderr == ""  # not a terminal: no bar
    out, drawn = _stderr_on_a_terminal(args)
    assert out.decode() == piped.stdout
    label = b"measuring" if argv[0] == "size" else b"pruning"
    assert re.search(label + rb" [^\n]*\xe2\x94\x81[^\n]*KiB", drawn), drawn  # the bar, in bytes (not files)
