"""The quick tier's marker: conftest.py marks ``tool`` what reaches an external tool, and only that."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import QUICK_MAX_EXAMPLES, _cap_examples, _tool_functions

HERE = Path(__file__).parent


def test_the_scan_follows_calls_through_a_modules_own_functions(tmp_path: Path) -> None:
    src = tmp_path / "test_x.py"
    src.write_text(
        "def _bundler():\n    return require_tool('clang-offload-bundler-19')\n\n"
        "def _pack(x):\n    return run_tool([_bundler(), x])\n\n"
        "def test_uses_it():\n    _pack('a')\n\n"
        "def test_fixture_tool(tool):\n    tool('nvcc')\n\n"
        "def test_pure():\n    assert sorted([2, 1]) == [1, 2]\n"
    )
    found = _tool_functions(src, frozenset({"require_tool", "tool", "run_tool"}))
    assert found == {"_bundler", "_pack", "test_uses_it", "test_fixture_tool"}


def test_quick_fails_a_test_that_reaches_a_tool_unmarked(tmp_path: Path) -> None:
    """A test whose tool use the scan cannot see (the name comes from elsewhere) fails under --quick."""
    test = tmp_path / "test_hidden.py"
    test.write_text("import conftest\n\nget = getattr(conftest, 'require_' + 'tool')\n\n"
                    "def test_hidden():\n    get('sh')\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    # The project's conftest.py loaded as a plugin into a run of only this file.
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"),
            "-p", "conftest", str(test)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent / "src")]), "CI": ""}
    full = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False, env=env)
    quick = subprocess.run([*args, "--quick"], capture_output=True, text=True, timeout=300, check=False, env=env)
    assert full.returncode == 0, full.stdout
    assert quick.returncode == 1 and "is not marked 'tool'" in quick.stdout, quick.stdout


def test_quick_caps_a_property_tests_own_max_examples() -> None:
    @settings(max_examples=400, deadline=None)
    @given(st.integers())
    def prop(x: int) -> None:
        assert isinstance(x, int)

    item = SimpleNamespace(obj=prop)
    _cap_examples([item])  # type: ignore[list-item]
    capped = prop._hypothesis_internal_use_settings  # type: ignore[attr-defined]
    assert capped.max_examples == QUICK_MAX_EXAMPLES and capped.deadline is None
