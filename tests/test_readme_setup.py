"""The README's two set-up commands, as the README writes them (parsed out of README.md).

Command 1 (install devbin and run the tour) runs literally, in a copy of the tree, with the
``python3`` on PATH and, where the machine has one, with Debian's system Python, which refuses
``pip install`` outside a virtual environment (PEP 668, "externally-managed-environment": what
main's ``python3 -m pip install . && python3 -m devbin tour`` hit on a fresh Debian 12).  It needs
the package index pip is configured with (devbin's dependencies are installed).  Command 2 runs
the whole suite, so it is not run here; the test checks it is what CI runs (``.ci/run``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = Path("/usr/bin/python3")


def setup_commands() -> list[str]:
    """The one-line ``sh`` blocks of the README's "Set up and run" section, in order."""
    section = (ROOT / "README.md").read_text().split("\n## Set up and run\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```sh\n([^\n]+)\n```$", section, re.M)


def test_readme_has_two_setup_commands_and_ci_runs_the_second() -> None:
    commands = setup_commands()
    assert len(commands) == 2, commands
    assert commands[1] == "bash scripts/test.sh"
    ci = (ROOT / ".ci" / "run").read_text()
    assert "exec bash scripts/test.sh" in ci.splitlines()


def _externally_managed(python: Path) -> bool:
    """True for a Python outside a venv whose stdlib holds PEP 668's marker (and that has pip)."""
    code = ("import os, sys, sysconfig; m = os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED'); "
            "import pip; sys.exit(0 if sys.prefix == sys.base_prefix and os.path.isfile(m) else 1)")
    return python.is_file() and subprocess.run([python, "-c", code], capture_output=True).returncode == 0


@pytest.mark.parametrize("python", ["path", "system"])
def test_readme_command_1_installs_and_runs_the_tour(tmp_path: Path, python: str) -> None:
    """README command 1, literally, in a copy of the tree: it exits 0, devbin runs from ``.venv`` and the
    tour's checks hold.  ``system``: ``python3`` is Debian's ``/usr/bin/python3`` under PEP 668."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("DEVBIN_")}
    if python == "system":
        if not _externally_managed(SYSTEM_PYTHON):
            pytest.skip("no externally-managed /usr/bin/python3 with pip here")
        env["PATH"] = "/usr/bin:/bin"
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".git", "__pycache__", "_cdecode*", "build", "*.egg-info",
                                                               ".venv", "devbin-tour", ".hypothesis", "fuzz", "tests",
                                                               "benchmarks", ".*_cache"))
    command = setup_commands()[0]
    r = subprocess.run(["bash", "-c", command], cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{command}\n{r.stderr[-3000:]}"
    assert "externally-managed-environment" not in r.stderr
    assert re.search(r"(?m)^devbin tour\n1\. sample device library in the unified model", r.stdout), r.stdout[-3000:]
    assert "3. read back: decoded model equals the original" in r.stdout
    assert "--keep sm_90 saves 4616 bytes of devbin-tour/app.offload: what step 10's prune saved" in r.stdout
    # the figures the README's account of the tour gives
    readme = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"private segment (\d+) -> (\d+) bytes, VGPRs (\d+) -> (\d+)", readme)
    assert m and f"stack {m[1]}->{m[2]}; registers general {m[3]}->{m[4]}," in r.stdout
    m = re.search(r"\((\d+) of (\d+) functions, (\d+) of ([\d,]+) bytes mapped\)", readme)
    assert m and f"lazy: {m[1]} of {m[2]} functions," in r.stdout
    assert f" {m[3]} of {m[4].replace(',', '')} bytes mapped," in r.stdout
    where = subprocess.run([tree / ".venv" / "bin" / "python", "-c", "import devbin; print(devbin.__file__)"],
                           env=env, capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
    assert Path(where).is_relative_to(tree / ".venv"), where
    assert (tree / ".venv" / "bin" / "devbin").is_file()


@pytest.mark.parametrize("python", ["path", "system"])
def test_test_script_gets_a_venv_only_for_an_externally_managed_python(tmp_path: Path, python: str) -> None:
    """README command 2 (scripts/test.sh, and scripts/setup-test-env.sh) installs with pip: where python3 is
    Debian's system Python under PEP 668 (main: "externally-managed-environment"), scripts/pep668-venv.sh
    makes ``.venv`` with pip in it and puts it first on PATH; with any other python3 it does nothing."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if python == "system":
        if not _externally_managed(SYSTEM_PYTHON):
            pytest.skip("no externally-managed /usr/bin/python3 with pip here")
        env["PATH"] = "/usr/bin:/bin"
    elif _externally_managed(Path(shutil.which("python3") or "python3")):
        pytest.skip("the python3 on PATH is externally managed")
    for script in ("test.sh", "setup-test-env.sh"):
        assert "source scripts/pep668-venv.sh" in (ROOT / "scripts" / script).read_text().replace('"$root/', "")
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "pep668-venv.sh", tmp_path / "scripts")
    script = ('set -euo pipefail; root="$PWD"; source scripts/pep668-venv.sh; '
              'python3 -c "import sys; print(sys.executable)"; python3 -m pip --version')
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    executable = Path(r.stdout.splitlines()[-2])
    if python == "system":
        assert executable.parent == tmp_path / ".venv" / "bin", r.stdout
        assert str(tmp_path / ".venv") in r.stdout.splitlines()[-1]  # pip runs in the venv
    else:
        assert not (tmp_path / ".venv").exists() and not executable.is_relative_to(tmp_path), r.stdout
