"""The test environment itself: oracle tools are found, fixture binaries build and look right.

Oracle tools are required through ``require_tool``: missing ones skip locally and
fail in CI.  The fixture checks read the built files with pyelftools and the
tools' own listings, never with devbin, so they hold whatever state the library is in.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from devbin.errors import UsageError
from devbin.targets.registry import vendor_named
from devbin.tools import find_tool, install_hint, run_tool

from tests.conftest import (
    AMDGPU_ARCHS,
    BUNDLE_ARCHS,
    CUBIN_ARCHS,
    FIXTURES,
    PTX_DIR,
    SOURCES,
    build_cubins,
    in_ci,
    require_tool,
)

ORACLE_TOOLS = [
    "cuobjdump",
    "nvdisasm",
    "readelf",
    "llvm-readelf-19",
    "llvm-readelf-22",
    "clang-offload-bundler-19",
    "clang-offload-packager-19",
    "ar",
    "nm",
]

EM_386, EM_X86_64, EM_CUDA, EM_AMDGPU = 3, 62, 190, 224
ELFOSABI_AMDGPU_HSA = 64
# e_flags & EF_AMDGPU_MACH for the processors the fixtures target (LLVM AMDGPUUsage).
AMDGPU_MACH = {"gfx90a": 0x3F, "gfx1030": 0x36, "gfx942": 0x4C}

CUDA_KERNELS = {"saxpy_bounded", "square_all", "block_reverse", "apply_op", "factorials"}
CUDA_DEVICE_FUNCS = {"helper_square", "fact", "op_add", "op_mul", "op_sub"}
AMDGPU_KERNELS = {"saxpy", "square_all", "scale_ext", "block_reverse"}


def _symbols(path: Path) -> dict[str, tuple[str, str, int]]:
    """name -> (type, bind, shndx as int, SHN_UNDEF = 0) for every named symbol in .symtab."""
    out: dict[str, tuple[str, str, int]] = {}
    with path.open("rb") as f:
        elf = ELFFile(f)
        for sec in elf.iter_sections():
            if isinstance(sec, SymbolTableSection) and sec.name == ".symtab":
                for sym in sec.iter_symbols():
                    if sym.name:
                        ndx = sym["st_shndx"]
                        out[sym.name] = (sym["st_info"]["type"], sym["st_info"]["bind"], 0 if ndx == "SHN_UNDEF" else 1)
    return out


def _header(path: Path) -> dict[str, object]:
    with path.open("rb") as f:
        elf = ELFFile(f)
        h = elf.header
        return {
            "class": elf.elfclass,
            "type": h["e_type"],
            "machine": int.from_bytes(path.read_bytes()[18:20], "little"),
            "osabi": h["e_ident"]["EI_OSABI"],
            "flags": h["e_flags"],
            "sections": [s.name for s in elf.iter_sections()],
        }


def _machine_number(path: Path) -> int:
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF", path
    return int.from_bytes(data[18:20], "little")


def _osabi_number(path: Path) -> int:
    return path.read_bytes()[7]


def _defined(syms: dict[str, tuple[str, str, int]], name: str) -> bool:
    return name in syms and syms[name][2] != 0


def _undefined(syms: dict[str, tuple[str, str, int]], name: str) -> bool:
    return name in syms and syms[name][2] == 0


# ----------------------------------------------------------------------------- tools


@pytest.mark.parametrize("name", ORACLE_TOOLS)
def test_oracle_tool_found(name: str) -> None:
    path = require_tool(name)
    proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, f"{path} --version: {proc.stderr.strip()}"
    assert re.search(r"\d+\.\d+", proc.stdout + proc.stderr), "no version number in --version output"


def test_cuda_wheel_tools_found_off_path() -> None:
    # cuobjdump/nvdisasm come from PyPI wheels that do not touch PATH; find_tool must still see them.
    for name in ("cuobjdump", "nvdisasm"):
        assert require_tool(name) == find_tool(name)
    nvidia = vendor_named("nvidia")
    assert nvidia is not None
    assert {"cuobjdump", "nvdisasm", "ptxas", "nvlink", "fatbinary", "nvcc"} == set(nvidia.toolkit)


def test_find_tool_versions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert find_tool("devbin-no-such-tool") is None
    assert find_tool("devbin-no-such-tool-19") is None
    # A versioned name is tried before the bare name, in the order given.
    for n in ("mytool", "mytool-19", "mytool-22"):
        p = tmp_path / n
        p.write_text("#!/bin/sh\necho " + n + "\n")
        p.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_tool("mytool") == str(tmp_path / "mytool-19")
    assert find_tool("mytool", versions=("22", "19")) == str(tmp_path / "mytool-22")
    assert find_tool("mytool", versions=()) == str(tmp_path / "mytool")
    assert find_tool("mytool-22") == str(tmp_path / "mytool-22")
    # The environment override wins, and a bad override means "missing".
    monkeypatch.setenv("DEVBIN_MYTOOL", str(tmp_path / "mytool"))
    assert find_tool("mytool") == str(tmp_path / "mytool")
    monkeypatch.setenv("DEVBIN_MYTOOL", str(tmp_path / "nope"))
    assert find_tool("mytool") is None


def test_install_hint() -> None:
    assert "nvidia-cuda-cuobjdump" in install_hint("cuobjdump")
    assert install_hint("clang-offload-bundler-22").endswith("clang-tools-22")
    assert install_hint("devbin-no-such-tool") == ""


def test_run_tool() -> None:
    readelf = require_tool("readelf")
    proc = run_tool(["readelf", "--version"])
    assert proc.returncode == 0 and b"readelf" in proc.stdout.lower()
    assert run_tool([readelf, "--version"]).stdout == proc.stdout  # a path is used as is
    assert run_tool(["cat"], input=b"abc").stdout == b"abc"

    with pytest.raises(UsageError, match=r"^tools: devbin-no-such-tool: not found"):
        run_tool(["devbin-no-such-tool", "x"])
    with pytest.raises(UsageError, match=r"^tools: readelf: failed with exit status \d+: .*") as ei:
        run_tool(["readelf", "-h", "/devbin/no/such/file"])
    assert "\n" not in str(ei.value)
    assert run_tool(["readelf", "-h", "/devbin/no/such/file"], check=False).returncode != 0
    with pytest.raises(UsageError, match="timed out"):
        run_tool(["sleep", "5"], timeout=0.2)
    with pytest.raises(UsageError, match="no command"):
        run_tool([])


def test_require_tool_skips_locally_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception):
        require_tool("devbin-no-such-tool")
    for value in ("true", "1", "yes"):
        monkeypatch.setenv("CI", value)
        assert in_ci()
        with pytest.raises(pytest.fail.Exception, match="must not skip in CI"):
            require_tool("devbin-no-such-tool")
    monkeypatch.setenv("CI", "false")
    assert not in_ci()


# ----------------------------------------------------------------------------- cubins


def _check_cubin_set(cubins: dict[str, Path]) -> None:
    cuobjdump = require_tool("cuobjdump")
    for a in CUBIN_ARCHS:
        for kind, etype in (("rdc", "ET_REL"), ("exec", "ET_EXEC"), ("extfn_rdc", "ET_REL"), ("linked", "ET_EXEC")):
            path = cubins[f"sm_{a}_{kind}"]
            h = _header(path)
            assert (h["machine"], h["class"], h["type"]) == (EM_CUDA, 64, etype), (path, h)
            listing = run_tool([cuobjdump, "-elf", path]).stdout.decode()
            assert f"sm={a}" in listing, listing[:200]

        rdc = _symbols(cubins[f"sm_{a}_rdc"])
        for k in CUDA_KERNELS | {"scale_ext"}:
            assert _defined(rdc, k) and rdc[k][0] == "STT_FUNC", k
        for fn in CUDA_DEVICE_FUNCS:
            assert _defined(rdc, fn), fn
        assert _undefined(rdc, "ext_scale")
        assert _defined(rdc, "op_table") and _defined(rdc, "launch_counter")
        secs = _header(cubins[f"sm_{a}_rdc"])["sections"]
        assert isinstance(secs, list)
        assert ".nv.shared.block_reverse" in secs
        assert ".nv.callgraph" in secs

        exe = _symbols(cubins[f"sm_{a}_exec"])
        assert {n for n, (t, _, d) in exe.items() if d and t == "STT_FUNC"} >= CUDA_KERNELS
        assert "scale_ext" not in exe and "ext_scale" not in exe

        ext = _symbols(cubins[f"sm_{a}_extfn_rdc"])
        assert _defined(ext, "ext_scale") and _defined(ext, "ext_scale_factor")

        linked = _symbols(cubins[f"sm_{a}_linked"])
        for n in CUDA_KERNELS | {"scale_ext", "ext_scale"}:
            assert _defined(linked, n), n
        for n in [n for n, (_, bind, d) in rdc.items() if not d and bind == "STB_GLOBAL"]:
            assert _defined(linked, n), f"{n} still undefined after nvlink"


def test_cubins_built(cubins: dict[str, Path]) -> None:
    assert set(cubins) == {f"sm_{a}_{k}" for a in CUBIN_ARCHS for k in ("rdc", "exec", "extfn_rdc", "linked")}
    _check_cubin_set(cubins)


def test_cubins_from_committed_ptx(tmp_path: Path) -> None:
    # The fallback for machines without nvcc: the committed PTX must assemble with ptxas.
    for a in CUBIN_ARCHS:
        for stem in ("kernels", "kernels-whole", "extfn"):
            assert (PTX_DIR / f"{stem}.sm_{a}.ptx").is_file()
    _check_cubin_set(build_cubins(tmp_path, from_ptx=True))


def test_committed_ptx_matches_sources(tmp_path: Path) -> None:
    # Stale-PTX check, only meaningful with the same nvcc release that wrote the files.
    nvcc = find_tool("nvcc", versions=())
    if nvcc is None:
        pytest.skip("nvcc not available")
    lines = run_tool([nvcc, "--version"]).stdout.decode().splitlines()
    release = next((ln.strip() for ln in lines if ln.startswith("Cuda compilation tools")), "?")
    committed = PTX_DIR / "kernels.sm_90.ptx"
    if release not in committed.read_text():
        pytest.skip(f"committed PTX written by another nvcc release than {release!r}")
    regenerated = tmp_path / "k.ptx"
    run_tool([nvcc, "-arch=sm_90", "-ptx", "-rdc=true", "-o", regenerated, SOURCES / "kernels.cu"])
    assert regenerated.read_text() == committed.read_text(), "run scripts/make-ptx-fixtures.sh"


def test_committed_sample_cubin(sample_cubin: Path) -> None:
    data = sample_cubin.read_bytes()
    assert len(data) <= 8192
    h = _header(sample_cubin)
    assert (h["machine"], h["type"]) == (EM_CUDA, "ET_EXEC")
    syms = _symbols(sample_cubin)
    assert _defined(syms, "saxpy") and syms["saxpy"][0] == "STT_FUNC"
    assert any("axpy_one" in n for n in syms), sorted(syms)
    listing = run_tool([require_tool("cuobjdump"), "-elf", sample_cubin]).stdout.decode()
    assert "sm=90" in listing
    shipped = Path(__file__).parents[1] / "src" / "devbin" / "samples"
    assert (shipped / "sample_sm90.cubin").read_bytes() == data
    assert (shipped / "sample.ptx").read_bytes() == (FIXTURES / "sample.ptx").read_bytes()


# ----------------------------------------------------------------------------- AMDGPU


def test_amdgpu_objects_built(amdgpu_objects: dict[str, Path]) -> None:
    for gfx in AMDGPU_ARCHS:
        for key, etype in ((f"{gfx}_obj", "ET_REL"), (f"{gfx}_lib_obj", "ET_REL"), (f"{gfx}_so", "ET_DYN")):
            h = _header(amdgpu_objects[key])
            assert _machine_number(amdgpu_objects[key]) == EM_AMDGPU
            assert (h["class"], h["type"]) == (64, etype), (key, h)
            assert _osabi_number(amdgpu_objects[key]) == ELFOSABI_AMDGPU_HSA
            assert int(h["flags"]) & 0xFF == AMDGPU_MACH[gfx], (key, hex(int(h["flags"])))
        obj = _symbols(amdgpu_objects[f"{gfx}_obj"])
        for k in AMDGPU_KERNELS:
            assert _defined(obj, k) and _defined(obj, k + ".kd"), k
        assert _defined(obj, "helper_square") and _defined(obj, "call_count")
        assert _undefined(obj, "lib_scale")
        assert _defined(_symbols(amdgpu_objects[f"{gfx}_lib_obj"]), "lib_scale")
        so = _symbols(amdgpu_objects[f"{gfx}_so"])
        assert _defined(so, "lib_scale") and all(_defined(so, k + ".kd") for k in AMDGPU_KERNELS)
        notes = run_tool([require_tool("llvm-readelf-19"), "--notes", amdgpu_objects[f"{gfx}_obj"]]).stdout.decode()
        assert "amdhsa.kernels" in notes and f"amdgcn-amd-amdhsa--{gfx}" in notes


def test_amdgpu_bundles_built(amdgpu_objects: dict[str, Path]) -> None:
    bundler = require_tool("clang-offload-bundler-19")
    hipfb = amdgpu_objects["hipfb"]
    assert hipfb.read_bytes().startswith(b"__CLANG_OFFLOAD_BUNDLE__")
    for key in ("hipfb", "bundled_obj"):
        listed = run_tool([bundler, "-list", "-type=o", f"-input={amdgpu_objects[key]}"]).stdout.decode().split()
        assert {f"hipv4-amdgcn-amd-amdhsa--{gfx}" for gfx in BUNDLE_ARCHS} <= set(listed), listed
    h = _header(amdgpu_objects["bundled_obj"])
    assert h["machine"] == EM_X86_64
    sections = h["sections"]
    assert isinstance(sections, list)
    for gfx in BUNDLE_ARCHS:
        assert f"__CLANG_OFFLOAD_BUNDLE__hipv4-amdgcn-amd-amdhsa--{gfx}" in sections
    assert amdgpu_objects["offload_package"].read_bytes()[:4] == b"\x10\xff\x10\xad"


# ----------------------------------------------------------------------------- host


def test_host_objects_built(host_objects: dict[str, Path]) -> None:
    assert _machine_number(host_objects["x86_64_obj"]) == EM_X86_64
    assert _header(host_objects["x86_64_obj"])["type"] == "ET_REL"
    assert _header(host_objects["x86_64_so"])["type"] == "ET_DYN"
    assert host_objects["x86_64_archive"].read_bytes().startswith(b"!<arch>\n")
    listing = run_tool([require_tool("nm"), host_objects["x86_64_archive"]]).stdout.decode()
    assert "host_sum_squares" in listing and "U host_external" in listing
    members = run_tool([require_tool("ar"), "t", host_objects["x86_64_archive"]]).stdout.decode().split()
    assert members == ["host.o"]
    if "i386_obj" in host_objects:
        assert _machine_number(host_objects["i386_obj"]) == EM_386
        assert _header(host_objects["i386_obj"])["class"] == 32


def test_sources_documented() -> None:
    readme = (SOURCES / "README.md").read_text()
    for src in sorted(SOURCES.iterdir()):
        if src.is_file() and src.name != "README.md":
            assert src.name in readme, f"{src.name} is not described in tests/sources/README.md"
