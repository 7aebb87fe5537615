"""The suite runs devbin and external tools through tests/runners.py (issue 25 item 6): no test file
holds its own in-process CLI runner, ``python -m devbin`` child or time-out, and one import style.

The exceptions are the runs the shared runners cannot make, each named with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# devbin's main called with an ``out`` of the test's own: a StringIO that says it is a terminal.
OWN_MAIN = {"test_cli_scan.py"}
# ``python -m devbin`` children the runners cannot make: held mid-write or on a pseudo-terminal
# (Popen), stdout to a file or bytes on stdout, an encoding forced by the environment.
OWN_CHILD = {"test_write_safety.py", "test_write_safety_in_place.py", "test_write_leftovers.py",
             "test_progress.py", "test_cli.py", "test_escape.py", "test_nvidia_cli.py"}
# Time-outs of their own: runs of the suite or the setup script (not one tool), and quick probes.
OWN_TIMEOUT = {"test_tiers.py", "test_readme_setup.py", "conftest.py", "test_tools_and_fixtures.py",
               "test_cli_mutate.py", "test_parallel.py"}


def _is_devbin_child(call: ast.Call) -> bool:
    if not call.args or not isinstance(call.args[0], ast.List):
        return False
    text = ast.unparse(call.args[0])
    return "'-m', 'devbin'" in text


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom):
            if node.module == "runners":
                found.append(f"{where}: import tests.runners as 'tests.runners'")
            if node.module == "devbin.cli.main" and any(a.name == "main" for a in node.names) \
                    and path.name not in OWN_MAIN:
                found.append(f"{where}: devbin's main imported: use cli/cli_ok/cli_err")
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        if (func.startswith("subprocess.") or func == "run_tool") and _is_devbin_child(node) \
                and path.name not in OWN_CHILD:
            found.append(f"{where}: python -m devbin in a child: use run_devbin")
        if path.name not in OWN_TIMEOUT and any(k.arg == "timeout" and isinstance(k.value, ast.Constant)
                                                 for k in node.keywords):
            found.append(f"{where}: a time-out of its own: use runners.TOOL_TIMEOUT")
    return found


def test_no_test_file_has_a_runner_of_its_own() -> None:
    files = [p for p in sorted(TESTS.glob("*.py")) if p.name not in ("runners.py", "test_runners.py")]
    assert len(files) > 50
    found = [o for p in files for o in _offences(p)]
    assert found == [], "\n".join(found)


def test_the_check_sees_a_copy(tmp_path: Path) -> None:
    copy = tmp_path / "test_copy.py"
    copy.write_text("import subprocess, sys\nfrom runners import cli\nfrom devbin.cli.main import main\n"
                    "def _run(*argv):\n"
                    "    return subprocess.run([sys.executable, '-m', 'devbin', *argv], timeout=120)\n")
    assert [o.split(": ", 1)[1] for o in _offences(copy)] == [
        "import tests.runners as 'tests.runners'", "devbin's main imported: use cli/cli_ok/cli_err",
        "python -m devbin in a child: use run_devbin", "a time-out of its own: use runners.TOOL_TIMEOUT"]
