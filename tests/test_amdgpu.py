"""AMDGPU code objects built with clang-19 at test time, checked against llvm-readelf-19."""

from __future__ import annotations

import dataclasses
import re
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest
import yaml

from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.edit import ElfEditor, NewSection
from devbin.formats.elf.reader import ElfFile
from devbin.model import FunctionKind, StdAttr
from devbin.targets.amdgpu import compatible, import_amdgpu, parse_offload_id, parse_target_id
from devbin.targets.amdgpu.importer import code_object_facts, usage
from devbin.targets.amdgpu.mach import decode_flags, readelf_flag_names
from devbin.targets.amdgpu.metadata import NT_AMDGPU_METADATA, KernelArg, KernelMeta, decode_metadata, metadata_notes

from tests.conftest import SOURCES, require_tool
from tests.expect import assert_located, outcome
from tests.runners import run_tool

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
                              ("gfx90a_xnack+", "gfx90a:xnack+", []), ("gfx90a_xnack-", "gfx90a:sramecc-:xnack-", []),
                              ("gfx90a_v4", "gfx90a", ["-mcode-object-version=4"])):
        p = out / f"{name}.o"
        run_tool([clang, "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-c",
                  f"-mcpu={mcpu}", *extra, "-o", str(p), str(SOURCES / "amdgpu_kernels.cl")])
        built[name] = p
    return built


def _readelf(*args: str) -> str:
    return run_tool([require_tool("llvm-readelf-19"), *args]).stdout


def _note_yaml(p: Path) -> list[dict[str, Any]]:
    text = _readelf("--notes", str(p))
    docs = re.findall(r"^\s*---\n(.*?)^\s*\.\.\.\s*$", text, re.S | re.M)
    return [yaml.safe_load(d) for d in docs]


def _all_objects(amdgpu_objects: dict[str, Path], extra: dict[str, Path]) -> list[Path]:
    return [amdgpu_objects[f"{g}_{k}"] for g in ARCHS for k in ("obj", "lib_obj", "so")] + list(extra.values())


def _note_map(item: KernelMeta | KernelArg) -> dict[str, Any]:
    """A decoded kernel (or argument) as the map the note holds: every field under its ``.key``, absent ones
    left out, lists as lists, arguments as maps, and the unknown keys devbin kept raw."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(item):
        v = getattr(item, f.name)
        if f.name == "extra" or v is None:
            continue
        if f.name == "args":
            v = [_note_map(a) for a in v]
        elif isinstance(v, tuple):
            v = list(v)
        out[f".{f.name}"] = v
    return {**out, **item.extra}


def _check_metadata(p: Path) -> None:
    """devbin's decoded kernels are, map for map and key for key, what llvm-readelf-19 --notes prints."""
    docs = _note_yaml(p)
    facts = code_object_facts(_elf(p))
    assert facts.metadata is not None
    want = [k for d in docs for k in (d.get("amdhsa.kernels") or [])]
    got = [_note_map(k) for k in facts.metadata.kernels]
    assert [k.get(".name") for k in got] == [k[".name"] for k in want], p
    for g, w in zip(got, want, strict=True):
        assert g == w, (p, w[".name"])
    d0 = docs[0]
    assert facts.metadata.target == d0["amdhsa.target"]
    assert facts.metadata.version == tuple(d0["amdhsa.version"])
    assert list(facts.metadata.printf) == [x for d in docs for x in d.get("amdhsa.printf", [])]
    extra = {k: v for d in docs for k, v in d.items() if k not in ("amdhsa.version", "amdhsa.target",
                                                                     "amdhsa.kernels", "amdhsa.printf")}
    assert facts.metadata.extra == extra


def test_metadata_matches_readelf(amdgpu_objects: dict[str, Path], extra_objects: dict[str, Path]) -> None:
    for p in _all_objects(amdgpu_objects, extra_objects):
        _check_metadata(p)


def _note(desc: bytes) -> bytes:
    name = b"AMDGPU\0"
    return (struct.pack("<III", len(name), len(desc), NT_AMDGPU_METADATA) + name.ljust(8, b"\0")
            + desc.ljust(-(-len(desc) // 4) * 4, b"\0"))


def test_unknown_metadata_keys_kept_raw_as_readelf_reads_them(amdgpu_objects: dict[str, Path],
                                                             tmp_path: Path) -> None:
    """A second metadata note with keys LLVM 19 does not write (kernel, argument and root level): devbin keeps
    them raw, and the decoded maps still equal llvm-readelf-19's, unknown keys included."""
    src = amdgpu_objects["gfx90a_obj"]
    elf = _elf(src)
    root = msgpack.unpackb(bytes(metadata_notes(elf)[0].desc), raw=False)
    kernel = dict(root["amdhsa.kernels"][0], **{".name": "future_kernel", ".future_map": {"a": 1, "b": [2, 3]},
                                                ".future_str": "x", ".future_int": 7})
    kernel[".args"] = [dict(kernel[".args"][0], **{".future_arg_key": 5, ".future_arg_list": [1, 2]})]
    extra_root = {"amdhsa.version": root["amdhsa.version"], "amdhsa.target": root["amdhsa.target"],
                  "amdhsa.kernels": [kernel], "amdhsa.future_root": ["r"]}
    ed = ElfEditor(elf)
    ed.add_section(NewSection(".note.future", _note(msgpack.packb(extra_root)), sh_type=C.SHT_NOTE, align=4))
    out = tmp_path / "future.o"
    out.write_bytes(ed.write())
    facts = code_object_facts(_elf(out), diag=lambda e: None)  # no descriptor for the made-up kernel
    assert facts.metadata is not None
    k = facts.metadata.kernels[-1]
    assert k.extra == {".future_map": {"a": 1, "b": [2, 3]}, ".future_str": "x", ".future_int": 7}
    assert k.args[0].extra == {".future_arg_key": 5, ".future_arg_list": [1, 2]}
    assert facts.metadata.extra == {"amdhsa.future_root": ["r"]}
    _check_metadata(out)


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
            if k.uses_dynamic_stack is not None:  # code object v4 notes have no .uses_dynamic_stack (v5+)
                assert kd.uses_dynamic_stack == k.uses_dynamic_stack


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
    h = _elf(extra_objects["gfx90a_v4"]).header
    f = decode_flags(h.e_flags, h.ei_osabi, h.ei_abiversion)
    assert (f.processor, f.code_object_version, f.target_id) == ("gfx90a", 4, "gfx90a")
    assert "ABI Version:                       2" in _readelf("-h", str(extra_objects["gfx90a_v4"]))  # v4 = ABI 2


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
    outcomes: Counter[str] = Counter()

    def read(buf: bytearray) -> None:
        elf = ElfFile(buf)
        obj = import_amdgpu(elf, diag=lambda e: None)
        got = usage(elf)
        assert isinstance(got, dict) and obj.functions is not None

    for _ in range(300):
        b = bytearray(data)
        for _ in range(rng.randint(1, 16)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        err = outcome(read, bytes(b))
        outcomes[type(err).__name__ if err else "read"] += 1
        if err is not None:
            # Known to carry neither offset nor where: metadata errors (their path, amdhsa.kernels[1]...,
            # is in the message), kernel descriptor problems (the kernel or symbol named in the message), ELF
            # header sizes (e_phentsize: listed for issue 18).
            assert_located(err, fmts={"elf", "amdgpu", "amdgpu-metadata"}, size=len(b),
                           unlocated_ok=r"^amdgpu-metadata: |^amdgpu: (kernel|symbol) |^elf: e_\w+ ")
    assert outcomes["read"] and outcomes["FormatError"] + outcomes["TruncatedError"], outcomes
