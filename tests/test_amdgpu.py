"""AMDGPU code objects built with clang-19 at test time, checked against llvm-readelf-19."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats.elf.reader import ElfFile
from devbin.model import FunctionKind, StdAttr
from devbin.targets.amdgpu import compatible, import_amdgpu, parse_offload_id, parse_target_id
from devbin.targets.amdgpu.importer import code_object_facts
from devbin.targets.amdgpu.mach import decode_flags, readelf_flag_names
from devbin.targets.amdgpu.metadata import decode_metadata
from devbin.targets.amdgpu.resources import usage

from tests.conftest import SOURCES, require_tool

ARCHS = ("gfx90a", "gfx1030", "gfx942")
KERNELS = {"saxpy", "square_all", "scale_ext", "block_reverse"}


def _elf(p: Path) -> ElfFile:
    return ElfFile(p.read_bytes())


@pytest.fixture(scope="module")
def extra_objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    clang = require_tool("clang-19")
    out = tmp_path_factory.mktemp("amdgpu_extra")
    built = {}
    for name, mcpu, extra in (("gfx1100", "gfx1100", []), ("gfx9-generic", "gfx9-generic", ["-mcode-object-version=6"]),
                              ("gfx11-generic", "gfx11-generic", ["-mcode-object-version=6"]),
                              ("gfx90a_xnack+", "gfx90a:xnack+", []), ("gfx90a_xnack-", "gfx90a:sramecc-:xnack-", [])):
        p = out / f"{name}.o"
        subprocess.run([clang, "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-c",
                        f"-mcpu={mcpu}", *extra, "-o", str(p), str(SOURCES / "amdgpu_kernels.cl")],
                       check=True, capture_output=True)
        built[name] = p
    return built


def _readelf(*args: str) -> str:
    return subprocess.run([require_tool("llvm-readelf-19"), *args], check=True, capture_output=True, text=True).stdout


def _note_yaml(p: Path) -> list[dict[str, Any]]:
    text = _readelf("--notes", str(p))
    docs = re.findall(r"^\s*---\n(.*?)^\s*\.\.\.\s*$", text, re.S | re.M)
    return [yaml.safe_load(d) for d in docs]


def _all_objects(amdgpu_objects: dict[str, Path], extra: dict[str, Path]) -> list[Path]:
    return [amdgpu_objects[f"{g}_{k}"] for g in ARCHS for k in ("obj", "lib_obj", "so")] + list(extra.values())


def test_metadata_matches_readelf(amdgpu_objects: dict[str, Path], extra_objects: dict[str, Path]) -> None:
    for p in _all_objects(amdgpu_objects, extra_objects):
        facts = code_object_facts(_elf(p))
        want = [k for d in _note_yaml(p) for k in (d.get("amdhsa.kernels") or [])]
        assert facts.metadata is not None
        got = facts.metadata.kernels
        assert [k.name for k in got] == [k[".name"] for k in want], p
        for g, w in zip(got, want, strict=True):
            for key in (".symbol", ".kernarg_segment_size", ".kernarg_segment_align", ".group_segment_fixed_size",
                        ".private_segment_fixed_size", ".wavefront_size", ".sgpr_count", ".vgpr_count",
                        ".agpr_count", ".sgpr_spill_count", ".vgpr_spill_count", ".max_flat_workgroup_size",
                        ".uses_dynamic_stack", ".language"):
                assert getattr(g, key[1:]) == w.get(key), (p, g.name, key)
            assert g.reqd_workgroup_size == (tuple(w[".reqd_workgroup_size"]) if ".reqd_workgroup_size" in w else None)
            assert len(g.args) == len(w.get(".args", []))
            for a, wa in zip(g.args, w.get(".args", []), strict=True):
                assert (a.offset, a.size, a.value_kind, a.type_name, a.address_space, a.is_const) == (
                    wa[".offset"], wa[".size"], wa[".value_kind"], wa.get(".type_name"), wa.get(".address_space"),
                    wa.get(".is_const"))
        d0 = _note_yaml(p)[0]
        assert facts.metadata.target == d0["amdhsa.target"]
        assert facts.metadata.version == tuple(d0["amdhsa.version"])


def test_descriptor_agrees_with_note(amdgpu_objects: dict[str, Path], extra_objects: dict[str, Path]) -> None:
    for p in _all_objects(amdgpu_objects, extra_objects):
        elf = _elf(p)
        facts = code_object_facts(elf)  # diag raises on any note/descriptor disagreement
        assert facts.metadata is not None
        kernels = {k.name: k for k in facts.metadata.kernels}
        assert set(facts.descriptors) == set(kernels)
        assert elf.symtab is not None
        for name, kd in facts.descriptors.items():
            k = kernels[name]
            assert kd.wave32 == (k.wavefront_size == 32)
            assert kd.group_segment_fixed_size == k.group_segment_fixed_size
            assert kd.kernarg_size == k.kernarg_segment_size
            sym = elf.symtab.get(name)
            assert sym is not None and kd.entry == sym.st_value, (p, name)
            assert k.vgpr_count is not None and kd.vgpr_blocks >= k.vgpr_count
            if kd.sgpr_blocks is not None:
                assert k.sgpr_count is not None and kd.sgpr_blocks >= k.sgpr_count
            assert kd.uses_dynamic_stack == bool(k.uses_dynamic_stack)


def test_eflags_match_readelf(amdgpu_objects: dict[str, Path], extra_objects: dict[str, Path]) -> None:
    for p in _all_objects(amdgpu_objects, extra_objects):
        line = next(x for x in _readelf("-h", str(p)).splitlines() if "Flags:" in x)
        names = [s.strip() for s in line.split(":", 1)[1].split(",")][1:]
        h = _elf(p).header
        assert readelf_flag_names(decode_flags(h.e_flags, h.ei_osabi, h.ei_abiversion)) == names, p
    h = _elf(extra_objects["gfx9-generic"]).header
    f = decode_flags(h.e_flags, h.ei_osabi, h.ei_abiversion)
    assert (f.processor, f.generic_version, f.code_object_version, f.is_generic) == ("gfx9-generic", 1, 6, True)
    h = _elf(extra_objects["gfx90a_xnack-"]).header
    assert decode_flags(h.e_flags, h.ei_osabi, h.ei_abiversion).target_id == "gfx90a:sramecc-:xnack-"


def test_import_and_callgraph(amdgpu_objects: dict[str, Path], extra_objects: dict[str, Path]) -> None:
    # From the sources: square_all -> helper_square; scale_ext -> lib_scale (defined in amdgpu_lib.cl).
    for p in [amdgpu_objects[f"{g}_obj"] for g in ARCHS] + list(extra_objects.values()):
        co = import_amdgpu(_elf(p))
        assert co.callgraph.direct == (("scale_ext", "lib_scale"), ("square_all", "helper_square"))
        assert co.callgraph.external == ("lib_scale",)
        assert {f.name for f in co.kernels} == KERNELS
        helper = co.function("helper_square")
        assert helper is not None and helper.kind == FunctionKind.DEVICE
        assert helper.uint(StdAttr.REGS_GENERAL) is None  # LLVM 19: unknown, not guessed
        assert co.metadata["vendor"] == "amd"
        saxpy = co.function("saxpy")
        assert saxpy is not None and saxpy.attr(StdAttr.REQD_BLOCK_SIZE) == (64, 1, 1)
    lib = import_amdgpu(_elf(amdgpu_objects["gfx90a_lib_obj"]))
    assert not lib.callgraph.direct and lib.function("lib_scale") is not None
    so = _elf(amdgpu_objects["gfx1030_so"])
    co = import_amdgpu(so)
    assert co.target is not None and co.target.target_id == "gfx1030"
    assert {f.name for f in co.functions} == KERNELS | {"helper_square", "lib_scale"}
    u = usage(so)
    dev = [f for f in u["functions"] if f["kind"] == "device"]
    assert dev and all(f["source"] == "unknown" and f["vgpr"] is None for f in dev)
    assert import_amdgpu(_elf(extra_objects["gfx90a_xnack+"])).metadata["target-id"] == "gfx90a:xnack+"


def test_target_ids() -> None:
    t = parse_target_id("gfx90a:xnack-:sramecc+")
    assert str(t) == "gfx90a:sramecc+:xnack-" and t.xnack is False and t.sramecc is True
    o = parse_offload_id("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+")
    assert (o.kind, o.triple, str(o.target)) == ("hipv4", "amdgcn-amd-amdhsa-", "gfx90a:xnack+")
    assert str(o) == "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"
    assert str(parse_offload_id("hip-amdgcn-amd-amdhsa--gfx9-generic").target) == "gfx9-generic"
    assert compatible("gfx90a", "gfx90a:sramecc+:xnack-")
    assert compatible("gfx90a:xnack+", "gfx90a:xnack+:sramecc-")
    assert not compatible("gfx90a:xnack+", "gfx90a:xnack-")
    assert not compatible("gfx90a:xnack+", "gfx90a")
    assert not compatible("gfx90a", "gfx942")
    assert compatible("gfx9-generic", "gfx906:xnack-")
    assert not compatible("gfx9-generic", "gfx90a")
    assert not compatible("gfx9-generic", "gfx906", generic_version=0)
    assert compatible("gfx11-generic", "gfx1151") and not compatible("gfx11-generic", "gfx1030")
    assert compatible("gfx10-3-generic", "gfx1036")
    assert parse_target_id("gfx1030:xnack-").unsupported_features() == ("xnack",)
    for bad in ("", "gfx90a:xnack", "gfx90a:xnack+:xnack-", "gfx90a:foo+"):
        with pytest.raises(FormatError):
            parse_target_id(bad)
    with pytest.raises(FormatError):
        parse_offload_id("hip-amdgcn")


def test_bad_metadata_is_format_error() -> None:
    for blob in (b"", b"\xc1", b"\x91\x01", b"\x81\xa1a", b"\x81\x91\x01\x01", b"\x81\xaeamdhsa.kernels\x01",
                 b"\xdd\xff\xff\xff\xff"):
        with pytest.raises(DeviceBinaryError):
            decode_metadata(blob)


def test_corrupt_objects_raise_only_device_errors(amdgpu_objects: dict[str, Path]) -> None:
    import random

    data = amdgpu_objects["gfx90a_obj"].read_bytes()
    rng = random.Random(7)
    for _ in range(300):
        b = bytearray(data)
        for _ in range(rng.randint(1, 16)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        try:
            elf = ElfFile(bytes(b))
            import_amdgpu(elf, diag=lambda e: None)
            usage(elf)
        except DeviceBinaryError:
            pass
