"""devbin resources against cuobjdump and ptxas -v on cubins with frames, spills and recursion.

Inputs are built here: tests/sources/frames.cu (`nvcc -cubin -rdc=true -maxrregcount=32 -Xptxas -v`,
then nvlink), an ar archive of host-only objects around an nvcc object, and `nvcc -ptx` output.
cuobjdump is the oracle of `--format cuobjdump` and of STACK; ptxas -v of FRAME and SPILL in the
text table.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import SOURCES, require_tool
from tests.runners import cli_ok, run_devbin, run_tool


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    nvcc, nvlink = require_tool("nvcc"), require_tool("nvlink")
    out = tmp_path_factory.mktemp("frames")
    rdc, linked, ptx = out / "frames.cubin", out / "frames_linked.cubin", out / "frames.ptx"
    p = run_tool([nvcc, "-arch=sm_90", "-cubin", "-rdc=true", "-maxrregcount=32", "-Xptxas", "-v", "-o", str(rdc),
                  str(SOURCES / "frames.cu")], check=False)
    assert p.returncode == 0, p.stderr
    q = run_tool([nvlink, "-arch=sm_90", "-o", str(linked), str(rdc)], check=False)
    assert q.returncode == 0 and "cannot be statically determined" in q.stderr, q.stderr
    run_tool([nvcc, "-arch=sm_90", "-ptx", "-o", str(ptx), str(SOURCES / "frames.cu")])
    return {"rdc": rdc, "linked": linked, "ptx": ptx, "ptxas": p.stdout + p.stderr}


def _ptxas_facts(verbose: str) -> dict[str, tuple[int, int]]:
    """function -> (bytes stack frame, bytes spill stores) as ptxas -v prints them."""
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(
        r"Function properties for (\S+)\n\s+(\d+) bytes stack frame, (\d+) bytes spill stores", verbose)}


def _table(text: str) -> dict[str, dict[str, str]]:
    """The NVIDIA text table's rows by (demangled) function name: the name starts where the header's
    "function" starts (the columns stay aligned, however long the name)."""
    rows: dict[str, dict[str, str]] = {}
    header: list[str] = []
    at = 0
    for line in text.splitlines():
        if line.startswith("  kind "):
            header, at = line.split()[:7], line.index("function")
        elif line.startswith("  ") and header:
            cells = line[:at].split()
            rows[line[at:]] = dict(zip(header, cells[:7], strict=True))
    return rows


def test_text_table_frame_spill_and_stack(frames: dict[str, Path | str]) -> None:
    """FRAME = ptxas -v's stack frame; SPILL non-zero exactly where ptxas spills; STACK: `-` in a relocatable
    cubin (not known before nvlink: main printed 0 beside a 392-byte frame), cuobjdump's number once
    linked, `unknown` for 0xffffffff (main: 4294967295); demangled names last, columns aligned."""
    from devbin.size.account import demangle
    ptxas = _ptxas_facts(str(frames["ptxas"]))
    assert ptxas["_ZN12devbin_tests6frames9big_frameILi96EEEfPKfi"][0] == 392
    rows = _table(cli_ok("resources", str(frames["rdc"])))
    assert set(rows) == {demangle(n) for n in ptxas}
    for name, (frame, spill_bytes) in ptxas.items():
        r = rows[demangle(name)]
        assert r["FRAME"] == str(frame), name
        assert r["SPILL"] == "0" or spill_bytes > 0, name
        assert r["STACK"] == "-", name
    assert int(rows["devbin_tests::frames::pressure(float*, float const*, int)"]["SPILL"]) > 0
    assert int(rows["_ZN12devbin_tests6frames8deep_sumEiPVi$1"]["SPILL"]) > 0
    # ptxas -v counts deep_sum's 5 callee-saved register saves of its prologue (STL, 20 bytes) as spill
    # stores, but marks no SpillRefill: SPILL counts the allocator's spills only (docs/API.md)
    assert ptxas["_ZN12devbin_tests6frames8deep_sumEiPVi"][1] == 20
    assert rows["devbin_tests::frames::deep_sum(int, int volatile*)"]["SPILL"] == "0"
    linked = _table(cli_ok("resources", str(frames["linked"])))
    theirs = run_tool([require_tool("cuobjdump"), "-res-usage", str(frames["linked"])], check=False).stdout
    stacks = dict(re.findall(r" Function (\S+):\n  REG:\d+ STACK:(\S+)", theirs))
    kernels = {n: s for n, s in stacks.items() if linked[demangle(n)]["kind"] == "kernel"}
    assert kernels["_ZN12devbin_tests6frames13recursive_sumEiPi"] == "UNKNOWN"
    assert kernels["_ZN12devbin_tests6frames14uses_big_frameEPfPKfi"] == "392"
    for name, stack in kernels.items():
        assert linked[demangle(name)]["STACK"] == stack.lower(), name


def test_stack_unknown_equals_cuobjdump(frames: dict[str, Path | str]) -> None:
    theirs = run_tool([require_tool("cuobjdump"), "-res-usage", str(frames["linked"])], check=False).stdout
    assert "STACK:UNKNOWN" in theirs
    assert cli_ok("resources", "--format", "cuobjdump", str(frames["linked"])) == theirs
    data = json.loads(cli_ok("resources", "--json", str(frames["linked"])))
    r = next(f["resources"] for f in data["images"][0]["functions"] if "recursive_sum" in f["name"])
    assert r["dynamic_stack"] is True and r["stack"] is None


def test_function_filter_and_sort(frames: dict[str, Path | str], capsys: pytest.CaptureFixture[str]) -> None:
    cuobjdump, path = require_tool("cuobjdump"), str(frames["linked"])
    mangled = "_ZN12devbin_tests6frames8pressureEPfPKfi"
    theirs = run_tool([cuobjdump, "-res-usage", "-fun", mangled, path], check=False).stdout
    assert cli_ok("resources", "--format", "cuobjdump", "--function", mangled, path) == theirs
    # a demangled glob selects the same, in the text and the JSON
    demangled = "devbin_tests::frames::pressure(*"
    assert cli_ok("resources", "--format", "cuobjdump", "--function", demangled, path) == theirs
    assert list(_table(cli_ok("resources", "--function", "*::pressure(*", path))) == [
        "devbin_tests::frames::pressure(float*, float const*, int)"]
    data = json.loads(cli_ok("resources", "--json", "--function", "*big_frame*", path))
    assert [f["name"] for f in data["images"][0]["functions"]] == [
        "_ZN12devbin_tests6frames9big_frameILi96EEEfPKfi", "_ZN12devbin_tests6frames14uses_big_frameEPfPKfi"]
    capsys.readouterr()
    cli_ok("resources", "--function", "no_such_function", path)
    assert capsys.readouterr().err == "warning: --function 'no_such_function' matched no function\n"
    by_frame = list(_table(cli_ok("resources", "--sort", "frame", path)).values())
    assert [int(r["FRAME"]) for r in by_frame] == sorted((int(r["FRAME"]) for r in by_frame), reverse=True)
    by_stack = list(_table(cli_ok("resources", "--sort", "stack", path)).values())
    assert [r["STACK"] for r in by_stack][:3] == ["unknown", "640", "392"]
    assert list(_table(cli_ok("resources", "--sort", "name", path))) == sorted(_table(cli_ok("resources", path)))


def test_archive_members_without_device_code_equal_cuobjdump(tmp_path: Path) -> None:
    """cuobjdump heads every member of an archive, also one without device code (main left those out)."""
    cuobjdump, nvcc, gcc, ar = (require_tool(t) for t in ("cuobjdump", "nvcc", "gcc", "ar"))
    run_tool([gcc, "-c", "-o", str(tmp_path / "host.o"), str(SOURCES / "host.c")])
    shutil.copy(tmp_path / "host.o", tmp_path / "tail.o")
    p = run_tool([nvcc, "-c", "-arch=sm_90", "-o", str(tmp_path / "k.o"), str(SOURCES / "kernels.cu")], check=False)
    assert p.returncode == 0, p.stderr
    lib = tmp_path / "libmixed.a"
    run_tool([ar, "rcs", str(lib), *(str(tmp_path / m) for m in ("host.o", "k.o", "tail.o"))])
    for arch in ([], ["-arch", "sm_90"], ["-arch", "sm_80"]):
        theirs = run_tool([cuobjdump, *arch, "-res-usage", str(lib)], check=False).stdout
        assert theirs.count("\nmember ") == 3, arch
        ours = cli_ok("resources", "--format", "cuobjdump", *[a.replace("-arch", "--arch") for a in arch], str(lib))
        assert ours.replace(str(lib), os.path.abspath(lib)) == theirs, arch


def test_resources_on_ptx_names_it(frames: dict[str, Path | str]) -> None:
    p = run_devbin("resources", frames["ptx"])
    assert p.returncode == 3 and p.stdout == ""
    assert p.stderr == (f"devbin: {frames['ptx']}: PTX text, no resource usage until ptxas compiles it "
                                 "(`ptxas -v`, or devbin resources on the cubin ptxas writes)\n")


def test_a_damaged_amdgpu_object_is_not_taken_for_ptx(tmp_path: Path) -> None:
    """Its metadata holds the key ``amdhsa.target``: only a line opening with ``.version``/``.target`` is PTX
    (the CLI mutation harness found a damaged AMDGPU object reported as "PTX text")."""
    from devbin.packaging.facts import is_ptx_text
    from devbin.samples import sample_path

    data = bytearray(sample_path("sample_gfx90a.o").read_bytes())
    assert b"amdhsa.target" in data[:4096] and not is_ptx_text(bytes(data[:4096]))
    assert is_ptx_text(sample_path("sample.ptx").read_bytes()[:4096])
    data[:4] = b"\0ELF"  # no longer an ELF: no device code in it
    (tmp_path / "kern.o").write_bytes(data)
    p = run_devbin("resources", "kern.o", cwd=tmp_path)
    assert p.returncode == 3 and p.stderr == "devbin: kern.o: does not contain device code\n", p.stderr
