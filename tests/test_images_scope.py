"""cuobjdump's scope: a host ELF holding executable images in ``.nv_fatbin`` and relocatable ones in
``__nv_relfatbin`` (an ``nvcc -rdc=true`` shared library or executable), checked against the real
``cuobjdump`` on files built at test time.

cuobjdump's default reads only ``.nv_fatbin``; ``-all`` adds the ``__nv_relfatbin`` images after
the ``.nv_fatbin`` ones, whatever the section order in the file.  ``devbin list``, ``resources``
(``--format cuobjdump``) and ``extract`` follow the default, and ``--all`` equals ``-all``: the
same images, resource blocks in the same order, files under the same names with the same bytes.
Three files: nvcc's own ``-rdc`` link of a shared library (``.nv_fatbin`` first in the section
table), the same objects linked by g++ after ``nvcc -dlink`` (``__nv_relfatbin`` first), and a
two-architecture ``-rdc`` executable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devbin.images import scan

from tests.conftest import SOURCES, require_tool
from tests.runners import cli_ok, run_tool


@pytest.fixture(scope="module")
def rdc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = require_tool("nvcc")
    gxx = require_tool("g++")
    out = tmp_path_factory.mktemp("scope")
    k, ext = SOURCES / "kernels.cu", SOURCES / "extfn.cu"
    (out / "main.cu").write_text("__global__ void mainkern(int *p) { p[threadIdx.x] = 1; }\n"
                                 "int main() { return 0; }\n")
    run_tool([nvcc, "-arch=sm_80", "-rdc=true", "-Xcompiler", "-fPIC", "-shared", "-o", "libnv.so", k, ext], out)
    run_tool([nvcc, "-arch=sm_80", "-dc", "-Xcompiler", "-fPIC", k, ext], out)
    run_tool([nvcc, "-arch=sm_80", "-dlink", "-Xcompiler", "-fPIC", "kernels.o", "extfn.o", "-o", "dlink.o"], out)
    run_tool([gxx, "-shared", "-o", "libgxx.so", "kernels.o", "extfn.o", "dlink.o"], out)
    run_tool([nvcc, "-rdc=true", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
              "arch=compute_90,code=[sm_90,compute_90]", "-o", "app", "main.cu", k, ext], out)
    return {p: out / p for p in ("libnv.so", "libgxx.so", "app")}


FILES = ["libnv.so", "libgxx.so", "app"]


def _section_order(path: Path) -> list[str]:
    """The two fatbin sections in section-table order (both must be there)."""
    out = run_tool([require_tool("readelf"), "-SW", path], path.parent).stdout
    return sorted((".nv_fatbin", "__nv_relfatbin"), key=out.index)


def test_inputs_hold_both_sections_in_both_orders(rdc: dict[str, Path]) -> None:
    assert _section_order(rdc["libnv.so"]) == [".nv_fatbin", "__nv_relfatbin"]
    assert _section_order(rdc["libgxx.so"]) == ["__nv_relfatbin", ".nv_fatbin"]
    assert _section_order(rdc["app"]) == [".nv_fatbin", "__nv_relfatbin"]


def _cuobjdump(path: Path, *opts: str, cwd: Path | None = None) -> str:
    proc = run_tool([require_tool("cuobjdump"), *opts, str(path)], cwd or path.parent, check=False)
    assert proc.returncode in (0, 255), proc.stderr  # 255: "no PTX file found" for -xptx in the default scope
    return proc.stdout


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("all_", [False, True], ids=["default", "all"])
def test_resources_equal_cuobjdump_res_usage(rdc: dict[str, Path], name: str, all_: bool) -> None:
    path = rdc[name]
    flag = ["--all"] if all_ else []
    theirs = _cuobjdump(path, *(["-all"] if all_ else []), "-res-usage")
    assert cli_ok("resources", "--format", "cuobjdump", *flag, str(path)) == theirs
    blocks = theirs.count("Fatbin elf code:") + theirs.count("Fatbin ptx code:")
    assert blocks > 1 if all_ else blocks == theirs.count("Fatbin elf code:") >= 1


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("all_", [False, True], ids=["default", "all"])
def test_extract_equals_cuobjdump_x(rdc: dict[str, Path], name: str, all_: bool, tmp_path: Path) -> None:
    path = rdc[name]
    theirs, ours = tmp_path / "cuobjdump", tmp_path / "devbin"
    theirs.mkdir()
    for opt in ("-xelf", "-xptx"):
        _cuobjdump(path, *(["-all"] if all_ else []), opt, "all", cwd=theirs)
    cli_ok("extract", *(["--all"] if all_ else []), str(path), "-o", str(ours))
    a = {p.name: p.read_bytes() for p in theirs.iterdir()}
    b = {p.name: p.read_bytes() for p in ours.iterdir()}
    assert sorted(a) == sorted(b)
    assert a == b
    assert any(n.endswith(".ptx") for n in a) == all_  # PTX lives only in the relocatable fatbins here


@pytest.mark.parametrize("name", FILES)
def test_list_follows_the_scope(rdc: dict[str, Path], name: str) -> None:
    path = rdc[name]
    default = json.loads(cli_ok("list", "--json", str(path)))["images"]
    every = json.loads(cli_ok("list", "--json", "--all", str(path)))["images"]
    assert {i["address"].split("@")[1].split("#")[0] for i in default} == {".nv_fatbin"}
    sections = [i["address"].split("@")[1].split("#")[0] for i in every]
    assert sections == sorted(sections, key=lambda s: s != ".nv_fatbin") and "__nv_relfatbin" in sections
    assert every[:len(default)] == default
    # cuobjdump -lelf -lptx counts the same images in each scope.
    for images, opts in ((default, []), (every, ["-all"])):
        listed = _cuobjdump(path, *opts, "-lelf", "-lptx").splitlines()
        assert len(listed) == len(images)
        assert [ln.split()[0] for ln in listed] == ["ELF" if i["kind"] == "cubin" else "PTX" for i in images]
    # Byte counts cover every image whatever the scope: the library's scan with all=True.
    assert [str(i.address) for i in scan([path], all=True)] == [i["address"] for i in every]
