"""devbin list / extract / resources against cuobjdump on host objects, archives, fatbins and cubins."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SOURCES, require_tool
from tests.runners import cli_ok, run_tool


@pytest.fixture(scope="session")
def host_inputs(tmp_path_factory: pytest.TempPathFactory, cubins: dict[str, Path]) -> dict[str, Path]:
    """nvcc-built host files: object, -rdc object, compressed fatbins (size/speed), multi-arch, a static library."""
    nvcc = require_tool("nvcc")
    ar = require_tool("ar")
    out = tmp_path_factory.mktemp("hostcuda")
    src, ext = str(SOURCES / "kernels.cu"), str(SOURCES / "extfn.cu")
    files = {
        "obj": (["-c", "-arch=sm_80"], src, "k.o"),
        "rdc_obj": (["-c", "-rdc=true", "-arch=sm_90"], ext, "e.o"),
        "multi_fatbin": (["-fatbin", "-gencode=arch=compute_80,code=sm_80",
                          "-gencode=arch=compute_90,code=[sm_90,compute_90]"], src, "multi.fatbin"),
        "size_fatbin": (["-fatbin", "--compress-mode=size", "-arch=sm_86"], src, "small.fatbin"),
        "speed_fatbin": (["-fatbin", "--compress-mode=speed", "-arch=sm_120"], src, "fast.fatbin"),
        "arch_a_fatbin": (["-fatbin", "-gencode=arch=compute_90a,code=sm_90a"], src, "hopper.fatbin"),
    }
    built = {}
    for key, (flags, source, name) in files.items():
        p = run_tool([nvcc, *flags, "-o", str(out / name), source], check=False)
        assert p.returncode == 0, p.stderr
        built[key] = out / name
    lib = out / "libk.a"
    assert run_tool([ar, "rcs", str(lib), str(built["obj"]), str(built["rdc_obj"])], check=False).returncode == 0
    built["archive"] = lib
    built["cubin"] = cubins["sm_90_rdc"]
    return built


def _proc(*argv: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "devbin", *argv], capture_output=True, cwd=cwd, check=False,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})


def _cuobjdump_list(path: Path) -> list[tuple[str, str]]:
    cuobjdump = require_tool("cuobjdump")
    p = run_tool([cuobjdump, "-lelf", "-lptx", str(path)], check=False)
    out = []
    for ln in p.stdout.splitlines():
        m = re.match(r"^(ELF|PTX) file\s+\d+: (\S+)$", ln)
        if m:
            arch = re.search(r"\.(sm_\d+[af]?)\.(cubin|ptx)$", m[2])
            assert arch is not None, ln
            out.append(("cubin" if m[1] == "ELF" else "ptx", arch[1]))
    return out


def test_list_equals_cuobjdump(host_inputs: dict[str, Path]) -> None:
    for name, path in host_inputs.items():
        data = json.loads(cli_ok("list", "--json", str(path)))
        ours = [(i["kind"], i["arch"].replace("compute_", "sm_")) for i in data["images"]]
        assert sorted(ours) == sorted(_cuobjdump_list(path)), name
        assert data["warnings"] == [], name


def test_extract_equals_cuobjdump_byte_for_byte(host_inputs: dict[str, Path], tmp_path: Path) -> None:
    cuobjdump = require_tool("cuobjdump")
    for name, path in host_inputs.items():
        if path.suffix == ".a":
            continue  # cuobjdump -x on an archive writes per-member names; compared on the members instead
        theirs, ours = tmp_path / f"{name}.cuobjdump", tmp_path / f"{name}.devbin"
        theirs.mkdir()
        for opt in ("-xelf", "-xptx"):
            p = run_tool(["bash", "-c", f"cd {theirs} && {cuobjdump} {opt} all {path}"], check=False)
            assert p.returncode in (0, 255), p.stderr  # 255: "no PTX/ELF found", as for a bare cubin
        cli_ok("extract", str(path), "-o", str(ours))
        a = {p.name: p.read_bytes() for p in theirs.iterdir()}
        b = {p.name: p.read_bytes() for p in ours.iterdir()} if ours.exists() else {}
        assert sorted(a) == sorted(b), name
        for fname in a:
            assert a[fname] == b[fname], (name, fname)


def test_extract_filters(host_inputs: dict[str, Path], tmp_path: Path) -> None:
    cli_ok("extract", str(host_inputs["multi_fatbin"]), "--kind", "cubin", "--arch", "sm_90", "-o", str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["multi.1.sm_90.cubin"]  # cuobjdump -arch sm_90 -xelf all


def test_extract_arch_numbers_as_cuobjdump(host_inputs: dict[str, Path], tmp_path: Path) -> None:
    """cuobjdump -arch sm_90 -xelf all numbers the images it selects from 1 (main: multi.2.sm_90.cubin)."""
    cuobjdump, multi = require_tool("cuobjdump"), host_inputs["multi_fatbin"]
    for arch in ("sm_90", "sm_80"):
        theirs, ours = tmp_path / f"theirs-{arch}", tmp_path / f"ours-{arch}"
        theirs.mkdir()
        for x in ("-xelf", "-xptx"):
            assert subprocess.run([cuobjdump, "-arch", arch, x, "all", str(multi)], cwd=theirs, capture_output=True,
                                  check=False).returncode == 0
        cli_ok("extract", "--arch", arch, str(multi), "-o", str(ours))
        want = {p.name: p.read_bytes() for p in theirs.iterdir()}
        assert {p.name: p.read_bytes() for p in ours.iterdir()} == want
        assert all(".1." in name for name in want), want


def test_extract_to_stdout(host_inputs: dict[str, Path], tmp_path: Path) -> None:
    """-o - prints the one selected image, as cuobjdump -xptx writes it (main made a folder named -)."""
    multi, theirs = host_inputs["multi_fatbin"], tmp_path / "theirs"
    theirs.mkdir()
    run_tool([require_tool("cuobjdump"), "-arch", "sm_90", "-xptx", "all", "-xelf", "all", str(multi)], theirs)
    for kind, name in (("ptx", "multi.1.sm_90.ptx"), ("cubin", "multi.1.sm_90.cubin")):
        p = _proc("extract", "--arch", "sm_90", "--kind", kind, str(multi), "-o", "-", cwd=tmp_path)
        assert p.returncode == 0 and p.stderr == b"", p.stderr
        assert p.stdout == (theirs / name).read_bytes(), kind
    p = _proc("extract", "--arch", "sm_90", str(multi), "-o", "-", cwd=tmp_path)
    assert (p.returncode, p.stdout) == (2, b"")
    assert p.stderr.decode() == ("devbin: error: -o - writes one image to stdout, and the selection holds 2: narrow it "
                                 "with --image ADDRESS (as `devbin list --all` prints them), --arch or --kind\n")
    assert not (tmp_path / "-").exists()


def test_extract_refuses_names_that_escape(tmp_path: Path) -> None:
    from devbin.cli.extract_cmd import safe_name
    from devbin.errors import UsageError

    for bad in ("../x.cubin", "a/b.cubin", "..", "x\n.ptx", ""):
        with pytest.raises(UsageError):
            safe_name(bad)
    assert safe_name("k.1.sm_90.cubin") == "k.1.sm_90.cubin"


def test_resources_cuobjdump_format_equals_cuobjdump(host_inputs: dict[str, Path]) -> None:
    cuobjdump = require_tool("cuobjdump")
    for name, path in host_inputs.items():
        theirs = run_tool([cuobjdump, "-res-usage", str(path)], check=False).stdout
        ours = cli_ok("resources", "--format", "cuobjdump", str(path))
        if path.suffix == ".a":  # cuobjdump names members by the archive's absolute path
            theirs = theirs.replace(os.path.abspath(path), str(path))
            ours = ours.replace(os.path.abspath(path), str(path))
        assert ours == theirs, name


def test_resources_json_and_text(host_inputs: dict[str, Path]) -> None:
    data = json.loads(cli_ok("resources", "--json", str(host_inputs["multi_fatbin"])))
    assert [c["arch"] for c in data["images"]] == ["sm_80", "sm_90"]
    text = cli_ok("resources", str(host_inputs["multi_fatbin"]))
    for fn in data["images"][0]["functions"]:
        assert fn["name"] in text


def test_callgraph_formats(cubins: dict[str, Path]) -> None:
    path = str(cubins["sm_90_rdc"])
    text = cli_ok("callgraph", path)
    assert text.startswith("callgraph for sm_90:") and "^apply_op [24] ->" in text
    data = json.loads(cli_ok("callgraph", "--json", path))
    apply_op = next(n for n in data["images"][0]["nodes"] if n["name"] == "apply_op")
    assert sorted(apply_op["calls"]) == ["op_add", "op_mul", "op_sub"]
    dot = cli_ok("callgraph", "--dot", path)
    assert dot.startswith("digraph") and '"apply_op" -> "op_add" [style=dotted];' in dot


def test_list_inside_a_wheel(host_inputs: dict[str, Path], tmp_path: Path) -> None:
    import zipfile

    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.write(host_inputs["archive"], "pkg/lib/libk.a")
        z.write(host_inputs["multi_fatbin"], "pkg/kernels.fatbin")
    data = json.loads(cli_ok("list", "--json", str(whl)))
    paths = {i["address"].split("@")[0].split("#")[0] for i in data["images"]}
    assert f"{whl}!pkg/kernels.fatbin" in paths
    assert {f"{whl}!pkg/lib/libk.a!k.o", f"{whl}!pkg/lib/libk.a!e.o"} <= paths
    assert len(data["images"]) == len(_cuobjdump_list(host_inputs["archive"])) + 3
