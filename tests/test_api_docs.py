"""docs/API.md's examples, run by doctest in an empty folder (they write ``pkg.offload`` there), and the
README's one-liner, run as it stands on a cubin's bytes with no tool in reach."""

from __future__ import annotations

import doctest
import subprocess
from pathlib import Path

import pytest

import devbin
from devbin.samples import sample_cubin_bytes

ROOT = Path(__file__).resolve().parent.parent
API_MD = ROOT / "docs" / "API.md"


def test_api_md_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(str(API_MD), module_relative=False, optionflags=doctest.ELLIPSIS, verbose=False,
                              raise_on_error=False)
    assert result.attempted >= 12
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in docs/API.md failed (see above)"


def test_readme_one_liner_on_cubin_bytes_calls_no_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's "registers and spills of a cubin without a GPU" is one line, and true, on ``bytes``
    (as numba and cuda.core hold a cubin), with no process started and nothing on PATH."""
    lines = [ln for ln in (ROOT / "README.md").read_text().splitlines() if "devbin.open(cubin_bytes)" in ln]
    assert len(lines) == 1
    (line,) = lines

    def no_tool(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a tool was run: {args!r}")

    monkeypatch.setattr(subprocess, "run", no_tool)
    monkeypatch.setattr(subprocess, "Popen", no_tool)
    monkeypatch.setenv("PATH", "")
    rows = eval(line, {"devbin": devbin, "cubin_bytes": sample_cubin_bytes()})
    assert rows == [("saxpy", 10, 0, 0)]
