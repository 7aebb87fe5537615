"""The examples of docs/PRUNE.md and docs/PACKAGING.md, run as the documents write them.

Each fenced block is read out of the document (``blocks``): the ``devbin ...`` lines of a plain block
run through the CLI (``python -m devbin``, the same argv), the ``python`` blocks run as scripts, in a
folder holding the files they name, built here: ``libx.so`` (nvcc, sm_80 and sm_90), a wheel
``pkg.whl`` and a folder ``site-packages/`` holding it, ``k.sm_80.cubin``/``k.sm_90.cubin``/``k.ptx``
(ptxas, from tests/sources/ptx) and ``k.gfx90a.o`` (the shipped sample).  Each line must exit 0 and
write what it says; the checks are on what it wrote.  docs/API.md's examples run as doctests
(tests/test_api_docs.py); docs/PRUNE.md's figures for a real wheel from PyPI are a measurement, not run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

import devbin
from devbin.packaging.pruning import prune_file
from devbin.samples import sample_path

from tests.conftest import PTX_DIR, require_tool
from tests.test_prune_linked import LIB_CU, _wheel

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def blocks(doc: str, lang: str = "") -> list[str]:
    """The fenced blocks of docs/``doc`` whose info string is ``lang`` (``""``: a plain fence), in order."""
    found: list[str] = []
    body: list[str] | None = None
    info = ""
    for line in (ROOT / "docs" / doc).read_text().splitlines():
        if body is None and line.startswith("```"):
            body, info = [], line[3:].strip()
        elif body is not None and line == "```":
            if info == lang:
                found.append("\n".join(body) + "\n")
            body = None
        elif body is not None:
            body.append(line)
    return found


def devbin_lines(block: str) -> list[list[str]]:
    """The argv (after ``devbin``) of each command of a shell block; ``\\`` continues a line, ``#`` starts
    a comment."""
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(ln, comments=True)[1:] for ln in lines if ln.startswith("devbin ")]


def run_devbin(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    r = subprocess.run([sys.executable, "-m", "devbin", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, (argv, r.stderr)
    return r


@pytest.fixture(scope="module")
def libx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CUDA shared library with sm_80 and sm_90 cubins in its .nv_fatbin."""
    out = tmp_path_factory.mktemp("docs-libx")
    (out / "lib.cu").write_text(LIB_CU)
    subprocess.run([require_tool("nvcc"), "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                    "arch=compute_90,code=sm_90", "-shared", "-Xcompiler", "-fPIC", "lib.cu", "-o", "libx.so"],
                   cwd=out, check=True, capture_output=True)
    return out / "libx.so"


def _prune_folder(libx: Path, where: Path) -> Path:
    """A folder with what PRUNE.md's examples name: libx.so, pkg.whl, site-packages/, slim/."""
    where.mkdir()
    shutil.copy(libx, where / "libx.so")
    _wheel(where / "pkg.whl", {"pkg/lib/libx.so": libx.read_bytes()})
    with zipfile.ZipFile(where / "pkg.whl") as z:
        z.extractall(where / "site-packages")
    (where / "slim").mkdir()
    return where


def _archs(path: Path) -> list[str]:
    with devbin.open(path) as src:
        return sorted({i.arch for i in src.images})


def test_prune_md_commands(libx: Path, tmp_path: Path) -> None:
    (block, *_) = blocks("PRUNE.md")
    commands = devbin_lines(block)
    assert [c[:1] for c in commands] == [["prune"]] * 5
    work = _prune_folder(libx, tmp_path / "work")
    assert _archs(work / "libx.so") == ["sm_80", "sm_90"]
    wheel_before = (work / "pkg.whl").read_bytes()
    outputs = [run_devbin(argv, work).stdout for argv in commands]
    # 1: a new file, the input untouched
    assert _archs(work / "libx.sm90.so") == ["sm_90"] and _archs(work / "libx.so") == ["sm_80", "sm_90"]
    assert (work / "libx.sm90.so").stat().st_size < (work / "libx.so").stat().st_size
    # 2 and 5: a new wheel (the same bytes with --jobs 4), the input untouched
    assert (work / "pkg.whl").read_bytes() == wheel_before
    assert _archs(work / "slim" / "pkg.whl") == ["sm_90"]
    # 3: every library in place, a backup kept
    lib = work / "site-packages" / "pkg" / "lib" / "libx.so"
    assert _archs(lib) == ["sm_90"]
    assert [p.name for p in lib.parent.iterdir() if p.name != "libx.so"], "no backup kept"
    # 4: what would go, as JSON, nothing written
    doc = json.loads(outputs[3])
    assert doc["schema"].startswith("devbin.prune/")
    assert _archs(work / "libx.so") == ["sm_80", "sm_90"]


def test_prune_md_python(libx: Path, tmp_path: Path) -> None:
    (block,) = blocks("PRUNE.md", "python")
    work = _prune_folder(libx, tmp_path / "work")
    cwd = os.getcwd()
    os.chdir(work)
    try:
        scope: dict[str, Any] = {}
        exec(compile(block, "docs/PRUNE.md", "exec"), scope)
    finally:
        os.chdir(cwd)
    r, w, t = scope["r"], scope["w"], scope["t"]
    written = prune_file(work / "libx.so", tmp_path / "out.so", keep="sm_90")
    assert r.data == written.data == (tmp_path / "out.so").read_bytes()
    assert r.file_bytes_saved == (work / "libx.so").stat().st_size - len(r.data) > 0
    assert set(r.bytes_by_arch()) >= {"sm_80"}
    assert _archs(work / "slim" / "pkg.whl") == ["sm_90"]
    assert w.output_size == (work / "slim" / "pkg.whl").stat().st_size < w.input_size
    assert _archs(work / "site-packages" / "pkg" / "lib" / "libx.so") == ["sm_90"]
    assert t is not None


def test_packaging_md_command(cubins: dict[str, Path], tmp_path: Path) -> None:
    (block, *_) = blocks("PACKAGING.md")
    (argv,) = devbin_lines(block)
    assert argv[:3] == ["pack", "-o", "app.offload"]
    shutil.copy(cubins["sm_80_exec"], tmp_path / "k.sm_80.cubin")
    shutil.copy(cubins["sm_90_exec"], tmp_path / "k.sm_90.cubin")
    shutil.copy(PTX_DIR / "kernels-whole.sm_80.ptx", tmp_path / "k.ptx")
    shutil.copy(sample_path("sample_gfx90a.o"), tmp_path / "k.gfx90a.o")
    run_devbin(argv, tmp_path)
    with devbin.open(tmp_path / "app.offload") as src:
        got = [(i.kind, i.arch, i.get("Team")) for i in src.images]
    assert got == [("cubin", "sm_80", ""), ("cubin", "sm_90", ""), ("ptx", "compute_80", ""),
                   ("amdgpu", "gfx90a", "kernels")]


def test_prune_md_refusal_and_force_note(libx: Path, tmp_path: Path) -> None:
    """PRUNE.md's refusal line (a RECORD hash that is not the member's: exit 1, nothing written) and the
    note ``--force`` gives for a member without a row, each as the document shows it (``…``: elided)."""
    (line,) = blocks("PRUNE.md")[1].splitlines()
    lib = libx.read_bytes()
    wheel = _wheel(tmp_path / "pkg.whl", {"pkg/lib/libk.so": lib})
    with zipfile.ZipFile(wheel) as z:
        members = {n: z.read(n) for n in z.namelist()}
    record = "pkg-1.0.dist-info/RECORD"
    rows = members[record].decode().splitlines()
    bad = [re.sub(r"^(pkg/lib/libk\.so),sha256=[^,]+,", r"\1,sha256=" + "A" * 43 + ",", r) for r in rows]
    unrowed = [r for r in rows if not r.startswith("pkg/lib/libk.so,")]
    for name, new_rows in (("bad.whl", bad), ("unrowed.whl", unrowed)):
        with zipfile.ZipFile(tmp_path / name, "w", zipfile.ZIP_DEFLATED) as z:
            for n, d in members.items():
                z.writestr(n, "\n".join(new_rows) + "\n" if n == record else d)
    shutil.move(tmp_path / "bad.whl", tmp_path / "pkg.whl")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    r = subprocess.run([sys.executable, "-m", "devbin", "prune", "pkg.whl", "--keep", "sm_90", "-o", "slim/pkg.whl"],
                       cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 1 and not (tmp_path / "slim").exists(), r.stderr
    pattern = re.sub(r"sha256=\w*…", lambda _: r"sha256=[\w-]{43}", re.escape(line))  # a digest, elided in the doc
    assert re.fullmatch(pattern, r.stderr.strip()), (line, r.stderr)
    prose = " ".join((ROOT / "docs" / "PRUNE.md").read_text().split())
    note = re.search(r"`(pkg\.whl!pkg/lib/libk\.so: no row in RECORD; --force: [^`]*)`", prose)
    assert note, "PRUNE.md no longer shows the --force note"
    shutil.move(tmp_path / "unrowed.whl", tmp_path / "pkg.whl")
    (tmp_path / "slim").mkdir()
    r = run_devbin(["prune", "pkg.whl", "--keep", "sm_90", "-o", "slim/pkg.whl", "--force"], tmp_path)
    assert note[1] in r.stderr, (note[1], r.stderr)
    assert _archs(tmp_path / "slim" / "pkg.whl") == ["sm_90"]
