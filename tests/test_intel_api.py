"""Intel images through the Python API (``devbin.open``, ``Function.resources``) and ``devbin inspect``'s SYCL
property sets, on inputs ocloc builds at test time (tests/intelbuild.py) and SYCL host binaries described
structurally (tests/test_sycl.py's ``sycl_host``).  Oracles: ``ocloc disasm -dump`` (the ``.ze_info`` the
runtime reads, parsed by PyYAML), ``llvm-readelf -s`` (function names and sizes), ``ar x`` (member bytes)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import devbin
from devbin.formats.sycl.constants import PROP_BYTE_ARRAY, PROP_UINT32
from devbin.formats.sycl.reader import Property, PropertySet, SyclImage
from devbin.images.sycl import producer_pairs
from devbin.model import StdAttr

from tests.conftest import require_tool
from tests.intelbuild import build_intel, ocloc_dump
from tests.runners import cli_ok, run_tool
from tests.test_sycl import sycl_host


@pytest.fixture(scope="module")
def intel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_intel(tmp_path_factory.mktemp("intel"))


def _readelf_funcs(data: bytes, tmp: Path) -> dict[str, int]:
    """FUNC symbols (not IGC's ``_entry`` labels) and their sizes, as llvm-readelf prints them."""
    path = tmp / "member.elf"
    path.write_bytes(data)
    rows = [line.split() for line in run_tool([require_tool("llvm-readelf"), "-sW", path]).stdout.splitlines()]
    return {r[7]: int(r[2]) for r in rows if len(r) == 8 and r[3] == "FUNC" and r[7] != "_entry"}


def _ar_x(fat: Path, tmp: Path) -> dict[str, bytes]:
    out = tmp / "ar-x"
    out.mkdir()
    run_tool(["ar", "x", fat], cwd=out)
    return {p.name: p.read_bytes() for p in out.iterdir()}


# ---------------------------------------------------------------- devbin.open

def test_open_a_zebin(intel: dict[str, Path], tmp_path: Path) -> None:
    with devbin.open(intel["zebin_pvc"]) as src:
        (image,) = src.images
        assert (image.vendor, image.kind, image.arch) == ("intel", "zebin", "pvc")
        co = image.code_object()
        assert co is not None
        got = {f.name: f.size for f in co.functions}
    assert got == _readelf_funcs(intel["zebin_pvc"].read_bytes(), tmp_path)


def test_open_a_sycl_library(intel: dict[str, Path], tmp_path: Path) -> None:
    """Each zebin of the archive in the frame is ar's member, its functions llvm-readelf's; the SPIR-V images
    (generic_ir, the spir64 image) are Intel's and have no code object."""
    fat = intel["fat"]
    host = tmp_path / "libk.so"
    host.write_bytes(sycl_host([fat.read_bytes()], [intel["spv"].read_bytes()], kernels=["vadd"]))
    members = _ar_x(fat, tmp_path)
    with devbin.open(host) as src:
        images = list(src.images)
        zebins = [i for i in images if i.kind == "zebin"]
        in_order = run_tool(["ar", "t", fat]).stdout.split()
        assert [i.address.member.name for i in zebins if i.address.member] == [m for m in in_order if m[:3] == "64."]
        for image in zebins:
            assert image.address.member is not None
            data = bytes(image.data())
            assert data == members[image.address.member.name]
            co = image.code_object()
            assert co is not None and {f.name: f.size for f in co.functions} == _readelf_funcs(data, tmp_path)
        spirv = [i for i in images if i.kind == "spirv"]
        assert len(spirv) == 2 and all(i.vendor == "intel" and i.code_object() is None for i in spirv)


# ---------------------------------------------------------------- Function.resources against ocloc disasm -dump

def _private(kernel: dict[str, Any]) -> int:
    """Private bytes per hardware thread by the runtime's reading of zebin < 1.39 (no ``private_size``):
    scratch slot 1, and a ``global``/``private_space`` buffer, per work-item when ``is_simt_thread``."""
    simd = kernel["execution_env"]["simd_size"]
    total = 0
    for b in kernel.get("per_thread_memory_buffers") or []:
        if b["type"] == "scratch" and b.get("slot", 0) == 1:
            total += b["size"]
        elif b["type"] == "global" and b["usage"] == "private_space":
            total += b["size"] * (simd if b.get("is_simt_thread") else 1)
    return total


@pytest.mark.parametrize(("key", "device"), [("zebin", "dg2"), ("zebin_pvc", "pvc"), ("spill", "dg2")])
def test_function_resources_match_ocloc_dump(intel: dict[str, Path], key: str, device: str, tmp_path: Path) -> None:
    dump = yaml.safe_load((ocloc_dump(intel[key], device, tmp_path) / ".ze_info").read_text())
    with devbin.open(intel[key]) as src:
        co = src.images[0].code_object()
    assert co is not None
    kernels = {k["name"]: k for k in dump["kernels"]}
    assert {f.name for f in co.functions if f.is_kernel} == set(kernels)
    for name, k in kernels.items():
        f = co.function(name)
        env = k["execution_env"]
        assert f is not None
        r = f.resources
        assert (r.registers, r.shared, r.local) == (env["grf_count"], env.get("slm_size", 0), _private(k)), name
        assert f.uint(StdAttr.WAVE_SIZE) == env["simd_size"]
        assert (f.uint(StdAttr.NUM_BARRIERS) or 0) == env.get("barrier_count", 0)
        slot0 = [b["size"] for b in k.get("per_thread_memory_buffers") or []
                 if b["type"] == "scratch" and b.get("slot", 0) == 0]
        assert (f.uint(StdAttr.SPILL_BYTES) or 0) == sum(slot0)
    if key == "spill":  # the input that spills: the check above compared a non-zero number
        assert any(f.uint(StdAttr.SPILL_BYTES) for f in co.functions)


# ---------------------------------------------------------------- inspect: SYCL property sets

def test_inspect_shows_the_wrappers_fields_and_property_sets(intel: dict[str, Path], tmp_path: Path) -> None:
    host = tmp_path / "libk.so"
    host.write_bytes(sycl_host([intel["fat"].read_bytes()], [intel["spv"].read_bytes()], kernels=["vadd", "priv2"]))
    doc = json.loads(cli_ok("inspect", "--json", host))
    zebins = [i for i in doc["images"] if i["kind"] == "zebin"]
    assert zebins and all(i["metadata"] == {"target": "spir64_gen", "format": "compressed", "descriptor-version": "3",
                                            "entries": "vadd priv2", "SYCL/misc properties/optLevel": "2"}
                          for i in zebins)
    text = cli_ok("inspect", host)
    block = "Metadata:\n  target: spir64_gen\n  format: compressed\n  descriptor-version: 3\n  entries: vadd priv2\n" \
            "  SYCL/misc properties/optLevel: 2\n"
    gen_ir = [s for s in doc["skipped"] if s.get("metadata", {}).get("target") == "spir64_gen"]  # generic_ir
    assert len(gen_ir) == 1 and text.count(block) == len(zebins) + 1


def test_inspect_shows_the_spir64_images_property_sets(intel: dict[str, Path], tmp_path: Path) -> None:
    """The SPIR-V images are not ELF code objects (skipped), yet their wrapper fields and property sets are
    shown as the zebins' are, with the module's header (entry points as spirv-dis gives them)."""
    host = tmp_path / "libk.so"
    host.write_bytes(sycl_host([intel["fat"].read_bytes()], [intel["spv"].read_bytes()], kernels=["vadd", "priv2"]))
    doc = json.loads(cli_ok("inspect", "--json", host))
    (jit,) = [s for s in doc["skipped"] if s["address"].endswith("@__CLANG_OFFLOAD_BUNDLE__sycl-spir64#0.0")]
    assert jit["metadata"]["target"] == "spir64" and jit["metadata"]["SYCL/misc properties/optLevel"] == "2"
    assert jit["metadata"]["entries"] == "vadd priv2"
    dis = run_tool([require_tool("spirv-dis"), intel["spv"]]).stdout
    assert [e["name"] for e in jit["spirv"]["entry_points"]] == re.findall(r'OpEntryPoint Kernel %\w+ "(\w+)"', dis)
    text = cli_ok("inspect", host)
    header = f"=== {jit['address']}: spirv ? ===\nMetadata:\n  target: spir64\n"
    assert header in text and "  SYCL/misc properties/optLevel: 2\n\nSPIR-V module:\n" in text


def test_property_values_are_shown_raw() -> None:
    """A number for UINT32, the payload's bytes in hex for BYTE_ARRAY, a type devbin does not know with its
    number and stored bytes (or the size field where no bytes are pointed at)."""
    img = SyclImage("s", 0, 0, memoryview(b""), False, 0, "spir64", property_sets=(
        PropertySet("SYCL/device requirements", (Property("aspects", PROP_BYTE_ARRAY, b"\x05\x00\x00\x00"),
                                                  Property("reqd_sub_group_size", PROP_UINT32, 32))),
        PropertySet("SYCL/new", (Property("blob", 7, b"\xab\xcd"), Property("count", 9, 12)))))
    assert producer_pairs(img) == (("target", "spir64"), ("SYCL/device requirements/aspects", "05000000"),
                                   ("SYCL/device requirements/reqd_sub_group_size", "32"),
                                   ("SYCL/new/blob", "type 7: abcd"), ("SYCL/new/count", "12"))
    assert producer_pairs(object()) == ()
