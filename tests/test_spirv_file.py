"""A SPIR-V module named on the command line (``devbin list k.spv``; :mod:`devbin.images.spirvfile`): a compute
(``Kernel``) module is one image in list/size/extract/inspect/pack, a shader module a warning, and a ``.spv``
found by walking a folder or a zip is still passed over.  Modules described structurally (SPIR-V spec §2.3) and
built by ``spirv-as`` and ``ocloc -spv_only`` (tests/intelbuild.py); oracle ``spirv-dis``."""

from __future__ import annotations

import json
import re
import struct
import zipfile
from pathlib import Path

import pytest

from devbin.images.spirvfile import SHADER_NOTE

from tests.conftest import require_tool
from tests.intelbuild import build_intel
from tests.runners import cli_err, cli_ok, run_tool

OP_CAPABILITY, OP_MEMORY_MODEL, OP_ENTRY_POINT = 17, 14, 15
KERNEL, SHADER, ADDRESSES = 6, 1, 4
GL_COMPUTE, KERNEL_MODEL = 5, 6


def _op(op: int, *operands: int | bytes) -> bytes:
    body = b"".join(o if isinstance(o, bytes) else struct.pack("<I", o) for o in operands)
    return struct.pack("<I", ((1 + len(body) // 4) << 16) | op) + body


def _name(s: str) -> bytes:
    b = s.encode() + b"\0"
    return b + b"\0" * (-len(b) % 4)


def module(caps: tuple[int, ...], addressing: int, memory: int, model: int, entry: str) -> bytes:
    """A module head: header (magic, 1.0, generator 0, bound 2, schema 0), capabilities, memory model, one
    entry point (function id 1)."""
    head = struct.pack("<5I", 0x07230203, 0x00010000, 0, 2, 0)
    return head + b"".join(_op(OP_CAPABILITY, c) for c in caps) + _op(OP_MEMORY_MODEL, addressing, memory) \
        + _op(OP_ENTRY_POINT, model, 1, _name(entry))


def kernel64() -> bytes:
    return module((ADDRESSES, KERNEL), 2, 2, KERNEL_MODEL, "k")  # Physical64, OpenCL


def shader() -> bytes:
    return module((SHADER,), 0, 1, GL_COMPUTE, "main")  # Logical, GLSL450


def _listed(path: Path) -> list[dict[str, object]]:
    images: list[dict[str, object]] = json.loads(cli_ok("list", "--json", path))["images"]
    return images


# ---------------------------------------------------------------- structural

def test_a_named_kernel_module_is_one_intel_image(tmp_path: Path) -> None:
    p = tmp_path / "k.spv"
    p.write_bytes(kernel64())
    (img,) = _listed(p)
    assert (img["address"], img["vendor"], img["kind"], img["arch"], img["container"]) == (
        str(p), "intel", "spirv", "", "file")
    assert img["size"] == img["stored_size"] == len(kernel64())
    assert img["metadata"] == {"triple": "spir64-unknown-unknown"}


def test_a_32_bit_kernel_module_is_no_vendors(tmp_path: Path) -> None:
    """``spir`` (Physical32) is no vendor's triple: listed, vendor empty."""
    p = tmp_path / "k32.spv"
    p.write_bytes(module((ADDRESSES, KERNEL), 1, 2, KERNEL_MODEL, "k"))
    (img,) = _listed(p)
    assert (img["vendor"], img["kind"], img["metadata"]) == ("", "spirv", {"triple": "spir-unknown-unknown"})


def test_a_named_shader_module_is_a_warning_not_an_image(tmp_path: Path) -> None:
    p = tmp_path / "s.spv"
    p.write_bytes(shader())
    code, out, err = cli_err("list", "--json", p)
    doc = json.loads(out)
    assert code == 1 and doc["images"] == [] and doc["warnings"] == [f"{p}: {SHADER_NOTE}"]
    assert SHADER_NOTE in err


@pytest.mark.parametrize("data", [kernel64()[:12], kernel64()[:-3] + b"\xff\xff\xff"],
                         ids=["header-cut", "instruction-cut"])
def test_a_damaged_named_module_fails_with_a_warning(tmp_path: Path, data: bytes) -> None:
    p = tmp_path / "bad.spv"
    p.write_bytes(data)
    code, out, err = cli_err("list", p)
    assert code == 1 and "0 images" in out and str(p) in err


def test_spv_files_found_in_a_folder_or_a_zip_are_passed_over(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "k.spv").write_bytes(kernel64())
    (tmp_path / "d" / "s.spv").write_bytes(shader())
    with zipfile.ZipFile(tmp_path / "w.zip", "w") as z:
        z.writestr("k.spv", kernel64())
    for where in (tmp_path / "d", tmp_path / "w.zip"):
        code, out, err = cli_err("list", where)
        assert code == 3 and "does not contain device code" in err and out == ""
    assert len(_listed(tmp_path / "d" / "k.spv")) == 1  # the same file named: read


def test_inspect_shows_a_named_modules_header(tmp_path: Path) -> None:
    p = tmp_path / "k.spv"
    p.write_bytes(kernel64())
    (entry,) = json.loads(cli_ok("inspect", "--json", p))["skipped"]
    spirv = entry["spirv"]
    assert (spirv["version"], spirv["triple"], spirv["addressing_model"]) == ("1.0", "spir64-unknown-unknown", 2)
    assert spirv["capabilities"] == [{"value": 4, "name": "Addresses"}, {"value": 6, "name": "Kernel"}]
    assert spirv["entry_points"] == [{"name": "k", "model": {"value": 6, "name": "Kernel"}}]
    text = cli_ok("inspect", p)
    assert f"=== {p}: spirv ? ===\nSPIR-V module:\n  version: 1.0\n" in text
    assert "  entry points: Kernel k\n" in text


# ---------------------------------------------------------------- spirv-as, ocloc

@pytest.fixture(scope="module")
def intel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_intel(tmp_path_factory.mktemp("intel"))


def _entry_points(path: Path) -> list[str]:
    return re.findall(r'OpEntryPoint \w+ %\w+ "(\w+)"', run_tool([require_tool("spirv-dis"), path]).stdout)


def test_spirv_as_modules(tmp_path: Path) -> None:
    """spirv-as's Kernel module is an Intel image, its Vulkan compute shader a warning."""
    spirv_as = require_tool("spirv-as")
    sources = {
        "k": "OpCapability Addresses\nOpCapability Kernel\nOpMemoryModel Physical64 OpenCL\n"
             'OpEntryPoint Kernel %f "vk"\n%v = OpTypeVoid\n%t = OpTypeFunction %v\n'
             "%f = OpFunction %v None %t\n%l = OpLabel\nOpReturn\nOpFunctionEnd\n",
        "s": 'OpCapability Shader\nOpMemoryModel Logical GLSL450\nOpEntryPoint GLCompute %f "main"\n'
             "OpExecutionMode %f LocalSize 1 1 1\n%v = OpTypeVoid\n%t = OpTypeFunction %v\n"
             "%f = OpFunction %v None %t\n%l = OpLabel\nOpReturn\nOpFunctionEnd\n",
    }
    for name, text in sources.items():
        (tmp_path / f"{name}.spvasm").write_text(text)
        run_tool([spirv_as, tmp_path / f"{name}.spvasm", "-o", tmp_path / f"{name}.spv"])
    (img,) = _listed(tmp_path / "k.spv")
    assert (img["vendor"], img["kind"]) == ("intel", "spirv")
    doc = json.loads(cli_ok("inspect", "--json", tmp_path / "k.spv"))
    assert [e["name"] for e in doc["skipped"][0]["spirv"]["entry_points"]] == _entry_points(tmp_path / "k.spv")
    code, _, err = cli_err("list", tmp_path / "s.spv")
    assert code == 1 and SHADER_NOTE in err


def test_an_ocloc_module_in_every_command(intel: dict[str, Path], tmp_path: Path) -> None:
    spv = intel["spv"]
    data = spv.read_bytes()
    (img,) = _listed(spv)
    assert (img["vendor"], img["kind"], img["size"]) == ("intel", "spirv", len(data))
    size = json.loads(cli_ok("size", "--json", spv))
    assert size["totals"]["device_bytes"] == size["totals"]["file_bytes"] == len(data)
    assert size["by_kind"] == [{"kind": "spirv", "images": 1, "stored_size": len(data), "size": len(data)}]
    cli_ok("extract", "-o", tmp_path / "x", spv)
    (written,) = (tmp_path / "x").iterdir()
    assert written.read_bytes() == data and written.suffix == ".spv"
    doc = json.loads(cli_ok("inspect", "--json", spv))
    assert [e["name"] for e in doc["skipped"][0]["spirv"]["entry_points"]] == _entry_points(spv)
    packed = tmp_path / "k.offload"
    cli_ok("pack", "--format", "offload", "-o", packed, "--image", f"file={spv}")
    (inner,) = _listed(packed)
    assert (inner["vendor"], inner["kind"], inner["size"]) == ("intel", "spirv", len(data))
    cli_ok("extract", "-o", tmp_path / "y", packed)
    (back,) = (tmp_path / "y").iterdir()
    assert back.read_bytes() == data
