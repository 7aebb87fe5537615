"""docs/API.md's examples, run by doctest in an empty folder (they write ``pkg.offload`` there); the README's
one-liner, run as it stands on a cubin's bytes with no tool in reach; and API.md's one-liner for a fatbin,
run as it stands on a fatbin nvcc built whose first image is PTX."""

from __future__ import annotations

import doctest
import subprocess
from pathlib import Path

import pytest

import devbin
from devbin.samples import sample_cubin_bytes

from tests.conftest import PTX_DIR, SOURCES, cubins_from_ptx, require_tool
from tests.runners import run_tool

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


def _api_md_one_liners() -> list[str]:
    """The one-line examples of API.md's "Registers and spills of a cubin without a GPU" section, in order."""
    section = API_MD.read_text().split("## Registers and spills of a cubin without a GPU", 1)[1].split("\n## ", 1)[0]
    return [ln[4:] for ln in section.splitlines() if ln.startswith(">>> [(f.name, f.resources.registers")]


def test_api_md_fatbin_one_liner_on_nvcc_fatbin(tmp_path: Path) -> None:
    """The last one-liner of API.md's first section is the one it gives for a fatbin.  On a fatbin nvcc
    builds with ``-gencode arch=compute_80,code=compute_80 -gencode arch=compute_90,code=sm_90`` the first
    image is the PTX (``images[0].code_object()`` is None: main's "the same line reads a fatbin's first
    image" raised AttributeError); the line must give the sm_90 cubin's kernels and their registers."""
    fatbin = tmp_path / "kernels.fatbin"
    if cubins_from_ptx():  # no nvcc front end (CI's PyPI ptxas): fatbinary, in the order nvcc hands it the images
        cubin = tmp_path / "kernels.sm_90.cubin"
        run_tool([require_tool("ptxas"), "-arch=sm_90", "-o", cubin, PTX_DIR / "kernels-whole.sm_90.ptx"])
        run_tool([require_tool("fatbinary"), f"--create={fatbin}", "-64",
                  f"--image3=kind=ptx,sm=80,file={PTX_DIR / 'kernels-whole.sm_80.ptx'}",
                  f"--image3=kind=elf,sm=90,file={cubin}"])
    else:
        run_tool([require_tool("nvcc"), "-fatbin", "-gencode", "arch=compute_80,code=compute_80",
                  "-gencode", "arch=compute_90,code=sm_90", "-o", fatbin, SOURCES / "kernels.cu"])
    with devbin.open(fatbin) as src:
        assert [(i.kind, i.arch) for i in src.images] == [("ptx", "compute_80"), ("cubin", "sm_90")]
    line = _api_md_one_liners()[-1]
    rows = eval(line, {"devbin": devbin, "fatbin": fatbin.read_bytes(), "cubin_bytes": fatbin.read_bytes()})
    assert sorted(name for name, *_ in rows) == ["apply_op", "block_reverse", "factorials", "saxpy_bounded",
                                                 "square_all"]  # the kernels; the device functions are inlined
    assert all(isinstance(regs, int) and regs > 0 for _, regs, _, _ in rows)
