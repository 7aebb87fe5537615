"""Intel GPU readers (devbin.targets.intel, devbin.formats.spirv) against Debian's ocloc, llvm-readelf,
spirv-dis and ar on inputs compiled at test time (tests/intelbuild.py), and their rules on their own."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest
import yaml

from devbin.errors import DeviceBinaryError, FormatError, UsageError
from devbin.formats.elf.reader import open_elf
from devbin.formats.spirv import read_spirv
from devbin.model import StdAttr
from devbin.targets.intel.devices import (
    DEVICES,
    canonical_device,
    gmdid_of,
    ip_from_gmdid,
    names_overlap,
    runs_on,
)
from devbin.targets.intel.fatarchive import read_fat_archive
from devbin.targets.intel.importer import INTEL_GRF_BYTES, INTEL_HAS_STACK_CALLS, INTEL_REQD_SUB_GROUP, import_zebin
from devbin.targets.intel.patchtoken import is_patch_token_elf, read_patch_token_program
from devbin.targets.intel.yamlsubset import parse_yaml
from devbin.targets.intel.zebin import Zebin
from devbin.targets.registry import guess_vendor, vendor_for_machine

from tests.intelbuild import build_intel, ocloc_dump
from tests.runners import cli_ok, run_tool


@pytest.fixture(scope="module")
def intel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_intel(tmp_path_factory.mktemp("intel"))


def _elf(path: Path):  # type: ignore[no-untyped-def]
    return open_elf(path.read_bytes(), where=str(path))


def _readelf_funcs(path: Path) -> dict[str, int]:
    """FUNC symbols (not ``_entry``) and their sizes, as llvm-readelf prints them."""
    out = run_tool(["llvm-readelf-19", "-sW", path]).stdout
    funcs = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 8 and f[3] == "FUNC" and f[7] != "_entry":
            funcs[f[7]] = int(f[2])
    return funcs


@pytest.mark.parametrize("key", ["zebin", "zebin_pvc", "spill", "calls"])
def test_functions_and_code_sizes_match_readelf(intel: dict[str, Path], key: str) -> None:
    co = import_zebin(_elf(intel[key]))
    assert {f.name: f.size for f in co.functions} == _readelf_funcs(intel[key])
    assert co.target is not None and co.target.vendor == "intel"


def test_kernel_section_is_padded_past_the_code(intel: dict[str, Path]) -> None:
    z = Zebin(_elf(intel["zebin"]))
    vadd = z.function("vadd")
    assert vadd is not None and vadd.is_kernel and vadd.size < vadd.section_size
    assert bytes(z.elf.section(".text.vadd").data[vadd.size:]) == bytes(vadd.section_size - vadd.size)  # type: ignore[union-attr]


@pytest.mark.parametrize(("key", "device"), [("zebin", "dg2"), ("zebin_pvc", "pvc"), ("spill", "dg2")])
def test_zeinfo_matches_ocloc_disasm_dump(intel: dict[str, Path], key: str, device: str, tmp_path: Path) -> None:
    """The .ze_info ocloc dumps is the section's bytes; every kernel's numbers read as PyYAML reads them."""
    dump = ocloc_dump(intel[key], device, tmp_path)
    text = (dump / ".ze_info").read_bytes()
    elf = _elf(intel[key])
    assert bytes(elf.section(".ze_info").data) == text  # type: ignore[union-attr]
    oracle = yaml.safe_load(text)
    z = Zebin(elf)
    assert z.zeinfo is not None and z.zeinfo.version_text == oracle["version"]
    for k in oracle["kernels"]:
        e = z.zeinfo.entry(k["name"])
        env = k["execution_env"]
        assert e is not None and (e.grf_count, e.simd_size) == (env["grf_count"], env["simd_size"])
        assert (e.slm_size, e.barrier_count) == (env.get("slm_size", 0), env.get("barrier_count", 0))
    names = {line.split(",")[1].strip() for line in (dump / ".symtab").read_text().splitlines()[1:]}
    assert {f.name for f in z.functions} <= names


def test_resources_of_the_test_kernels(intel: dict[str, Path]) -> None:
    co = import_zebin(_elf(intel["zebin"]))
    r = co.function("reduce_slm")
    assert r is not None and r.resources.shared == 256 and r.uint(StdAttr.NUM_BARRIERS) == 1
    assert r.attr(StdAttr.REQD_BLOCK_SIZE) == (64, 1, 1) and r.uint(INTEL_REQD_SUB_GROUP) == 16
    assert r.uint(StdAttr.WAVE_SIZE) == 16 and r.resources.registers == 128 and r.uint(INTEL_GRF_BYTES) == 32
    p = co.function("priv2")
    assert p is not None
    z = Zebin(_elf(intel["zebin"]))
    e = z.zeinfo.entry("priv2")  # type: ignore[union-attr]
    (buf,) = [b for b in e.buffers if b.type == "global"]  # type: ignore[union-attr]
    assert buf.is_simt_thread and p.resources.local == buf.size * (e.simd_size or 0) > 0  # type: ignore[union-attr]
    pvc = import_zebin(_elf(intel["zebin_pvc"])).function("vadd")
    assert pvc is not None and pvc.uint(INTEL_GRF_BYTES) == 64  # Xe-HPC: 64-byte GRFs


def test_spills_are_scratch_slot_zero(intel: dict[str, Path]) -> None:
    """zebin 1.20 has no spill_size: spill is scratch slot 0, as the runtime reads it."""
    f = import_zebin(_elf(intel["spill"])).function("spill")
    z = Zebin(_elf(intel["spill"]))
    (buf,) = z.zeinfo.entry("spill").buffers  # type: ignore[union-attr]
    assert buf.type == "scratch" and f is not None and f.uint(StdAttr.SPILL_BYTES) == buf.size > 0


def test_stack_called_functions(intel: dict[str, Path]) -> None:
    co = import_zebin(_elf(intel["calls"]))
    k = co.function("calls")
    assert k is not None and k.is_kernel and k.attr(INTEL_HAS_STACK_CALLS) is True
    helpers = [f for f in co.functions if not f.is_kernel]
    assert {f.name for f in helpers} == {"helper", "helper2"} and all(f.section == ".text.calls" for f in helpers)


def test_notes_match_readelf(intel: dict[str, Path]) -> None:
    out = run_tool(["llvm-readelf-19", "-nW", intel["zebin"]], check=False).stdout
    descs = re.findall(r"IntelGT\s+0x[0-9a-f]+\s+.*\n\s+description data: ([0-9a-f ]+)", out)
    z = Zebin(_elf(intel["zebin"]))
    assert int.from_bytes(bytes.fromhex(descs[0].replace(" ", "")), "little") == z.notes.product_family == 1270
    assert z.notes.zebin_version == z.zeinfo.version_text and z.arch == "dg2"  # type: ignore[union-attr]


def test_device_table_matches_ocloc_ids(tool) -> None:  # type: ignore[no-untyped-def]
    ocloc = tool("ocloc")
    for d in DEVICES[:8]:  # the devices this ocloc knows (Meteor Lake and later are newer)
        for name in d.names:
            out = run_tool([ocloc, "ids", name]).stdout
            assert out.split()[-1] == d.ip_version, (name, out)


@pytest.mark.parametrize(("device", "family"), [("skl", 18), ("tgllp", 29), ("dg1", 1210), ("acm-g11", 1270)])
def test_product_families_as_ocloc_writes_them(tool, device: str, family: int, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ocloc = tool("ocloc")
    src = Path(__file__).parent / "sources" / "intel" / "kernels.cl"
    run_tool([ocloc, "compile", "-q", "-file", src, "-device", device, "-internal_options", "-ze-allow-zebin",
              "-out_dir", tmp_path, "-output", "k"])
    (binary,) = tmp_path.glob("k*.bin")
    z = Zebin(_elf(binary))
    (d,) = [x for x in DEVICES if device in x.names]
    assert z.notes.product_family == d.product_family == family


def test_patch_token_program(intel: dict[str, Path]) -> None:
    elf = _elf(intel["patchtoken"])
    assert is_patch_token_elf(elf) and vendor_for_machine(elf.header.e_machine) is None
    prog = read_patch_token_program(elf)
    sizes = {f.name: f.size for f in import_zebin(_elf(intel["zebin"])).functions}
    assert prog.arch == "xe-hpg" and {k.name: k.unpadded_size for k in prog.kernels} == sizes


def test_fat_archive_members_match_ar(intel: dict[str, Path]) -> None:
    members = read_fat_archive(intel["fat"].read_bytes())
    assert [m.member.name for m in members] == run_tool(["ar", "t", intel["fat"]]).stdout.split()
    zebins = {m.arch: m for m in members if m.role == "zebin"}
    assert set(zebins) == {"12.55.8", "12.60.7"} and any(m.role == "generic_ir" for m in members)
    assert all(m.member.offset % 8 == 0 for m in zebins.values())
    # a member zebin read in place names its device by product family (IGC 2022 writes no IP version note)
    archs = {Zebin(open_elf(m.member.data)).arch for m in zebins.values()}
    assert archs == {"dg2", "pvc"}


@pytest.mark.parametrize("command", ["inspect", "callgraph"])
def test_zebins_in_an_archive_are_read_like_bare_ones(intel: dict[str, Path], tmp_path: Path, command: str) -> None:
    """inspect and callgraph read every vendor's code objects inside containers (the registry's object kinds):
    the zebins of an ``ar`` and of an ocloc fat archive are read as a bare zebin is, none skipped (but the fat
    archive's generic_ir, SPIR-V)."""
    run_tool(["ar", "rc", tmp_path / "z.a", intel["zebin"], intel["zebin_pvc"]])
    bare = json.loads(cli_ok(command, intel["zebin"], "--json"))["images"][0]
    for path, archs in ((tmp_path / "z.a", ["dg2", "pvc"]), (intel["fat"], ["dg2", "pvc"])):
        doc = json.loads(cli_ok(command, path, "--json"))
        skipped = ["spirv"] if path == intel["fat"] else []  # generic_ir's SPIR-V: no ELF code object
        assert [i["kind"] for i in doc["skipped"]] == skipped and sorted(i["arch"] for i in doc["images"]) == archs
        (dg2,) = [i for i in doc["images"] if i["arch"] == "dg2"]
        if path.suffix == ".a":  # the same bytes as the bare file: the same report but where it is
            where = ("address", "file")
            assert {k: v for k, v in dg2.items() if k not in where} == {k: v for k, v in bare.items() if k not in where}


def test_spirv_entry_points_match_spirv_dis(intel: dict[str, Path], tool) -> None:  # type: ignore[no-untyped-def]
    text = run_tool([tool("spirv-dis"), intel["spv"]]).stdout
    m = read_spirv(intel["spv"].read_bytes())
    assert [e.name for e in m.entry_points] == re.findall(r'OpEntryPoint Kernel %\w+ "(\w+)"', text)
    assert f"; Version: {m.version_text}" in text and m.generator_name in text
    caps = re.findall(r"OpCapability (\w+)", text)
    from devbin.formats.spirv.reader import CAPABILITY_NAMES
    assert [CAPABILITY_NAMES[c] for c in m.capabilities] == caps
    (r,) = [e for e in m.entry_points if e.name == "reduce_slm"]
    assert r.mode(17) == (64, 1, 1) and r.mode(35) == (16,)


# ---------------------------------------------------------------- the rules, without tools

def test_gmdid_round_trip() -> None:
    assert ip_from_gmdid(0x030F0007) == (12, 60, 7) and gmdid_of((12, 55, 8)) == 0x030DC008


def test_runtime_rule_and_generic_targets() -> None:
    assert runs_on("12.55.8", "acm-g11") and runs_on("12.55.8", "12.57.0") and not runs_on("12.56.5", "acm-g10")
    assert runs_on("dg2", "acm-g12") and not runs_on("dg2", "pvc") and runs_on("12.70.4", "mtl-h")
    assert names_overlap("dg2", "acm-g10") and names_overlap("12.60.7", "pvc") and not names_overlap("pvc", "dg2")


def test_device_names_and_suggestions() -> None:
    assert canonical_device("PVC") == "pvc" and canonical_device("12.60.7") == "12.60.7"
    with pytest.raises(UsageError, match="did you mean acm-g10"):
        canonical_device("acm-g1O")
    assert guess_vendor("12.60.7") is not None and guess_vendor("acm-g10") is guess_vendor("dg2")


def test_yaml_subset() -> None:
    doc = b"---\nversion: '1.2''3'\nkernels:\n  - name: k\n    execution_env:\n      grf_count: 0x80\n" \
          b"      required_work_group_size: [ 8, 1, 1 ]\n      x: \"a\\tb\"\n    m: { a: 1, b: [] }\n...\ngarbage: [\n"
    tree = parse_yaml(doc)
    assert tree == {"version": "1.2'3", "kernels": [{"name": "k", "execution_env": {
        "grf_count": "0x80", "required_work_group_size": ["8", "1", "1"], "x": "a\tb"}, "m": {"a": "1", "b": []}}]}
    for bad in (b"a: [1, 2", b"a: 'x", b"a:\n   b: 1\n  c: 2", b"a: \"\\q\"", b"\xff", b"- " * 40 + b"x"):
        with pytest.raises(FormatError):
            parse_yaml(bad)


def test_damaged_zebins_raise_format_errors(intel: dict[str, Path]) -> None:
    data = bytearray(intel["zebin"].read_bytes())
    sec = _elf(intel["zebin"]).section(".ze_info")
    assert sec is not None
    for i in range(0, sec.sh_size, 97):
        bad = bytearray(data)
        bad[sec.sh_offset + i] = 0x5B  # '['
        with contextlib.suppress(DeviceBinaryError):  # nothing but devbin's errors escapes
            import_zebin(open_elf(bytes(bad)))


# ---------------------------------------------------------------- a zebin described structurally (IGC 2026 shape)

_ZEINFO_153 = b"""---
version:         '1.53'
kernels:
  - name:            k
    execution_env:
      eu_thread_count: 8
      grf_count:       128
      has_dpas:        true
      private_size:    512
      simd_size:       32
      spill_size:      32
      some_future_key: [ 1, 2 ]
    per_thread_memory_buffers:
      - type:            scratch
        usage:           spill_fill_space
        size:            64
      - type:            global
        usage:           private_space
        size:            16
        is_simt_thread:  true
functions:
  - name:            f
    execution_env:
      grf_count:       128
      simd_size:       16
...
"""


def _zebin_model() -> bytes:
    from devbin.formats.elf import constants as C
    from devbin.formats.elf.model import ElfModel, RelocSpec, SectionSpec, SymbolSpec
    from devbin.formats.elf.writer import write

    from tests.elfbuild import _note

    notes = (_note("IntelGT", 1, (1271).to_bytes(4, "little")) + _note("IntelGT", 2, (0x0C08).to_bytes(4, "little"))
             + _note("IntelGT", 4, b"1.53\0") + _note("IntelGT", 6, (0x030F0007).to_bytes(4, "little")))
    m = ElfModel(e_type=C.ET_REL, machine=C.EM_INTELGT, abiversion=1)
    code = C.SHF_ALLOC | C.SHF_EXECINSTR
    m.sections = [SectionSpec(".text.k", flags=code, data=bytes(256)), SectionSpec(".text", flags=code, data=bytes(64)),
                  SectionSpec(".ze_info", sh_type=0xFF000011, data=_ZEINFO_153),
                  SectionSpec(".note.intelgt.compat", sh_type=C.SHT_NOTE, data=notes, align=4)]
    m.symbols = [SymbolSpec("k", 0, 160, bind=C.STB_LOCAL, type=C.STT_FUNC, section=".text.k"),
                 SymbolSpec("_entry", 0x50, 0, bind=C.STB_LOCAL, section=".text.k"),
                 SymbolSpec("f", 0, 48, type=C.STT_FUNC, section=".text")]
    m.relocations = {".text.k": [RelocSpec(0x60, "f", 2, 0), RelocSpec(0x70, "f", 3, 0)]}
    m.use_rela = False
    return write(m)


def test_zebin_1_53_with_an_external_function() -> None:
    co = import_zebin(open_elf(_zebin_model()))
    assert co.target is not None and co.target.arch == "12.60.7" and co.metadata.get("ip-version") == "12.60.7"
    k, f = co.function("k"), co.function("f")
    assert k is not None and f is not None and k.is_kernel and not f.is_kernel and (k.size, f.size) == (160, 48)
    assert co.callgraph.direct == (("k", "f"),)  # two relocations (lo/hi), one edge
    # 1.39+: private and spill from execution_env, not from the buffers (64 scratch, 16 x 32 global)
    assert (k.resources.local, k.uint(StdAttr.SPILL_BYTES), k.uint(INTEL_GRF_BYTES)) == (512, 32, 64)
    assert k.attribute(0x307) is not None and k.attribute(0x307).text == "some_future_key: [ 1, 2 ]"  # type: ignore[union-attr]
    assert f.resources.registers == 128 and f.uint(StdAttr.WAVE_SIZE) == 16


def test_old_zeinfo_reads_privates_and_spills_from_the_buffers() -> None:
    old = _ZEINFO_153.replace(b"'1.53'", b"'1.20'").replace(b"      private_size:    512\n", b"").replace(
        b"      spill_size:      32\n", b"")
    from devbin.targets.intel.zeinfo import read_zeinfo
    (k,) = read_zeinfo(old).kernels
    assert (k.private_bytes(), k.spill_bytes(), k.scratch_bytes()) == (16 * 32, 64, 64)


def test_list_and_open_an_ocloc_fat_archive(intel: dict[str, Path]) -> None:
    import json

    import devbin

    from tests.runners import cli_ok
    doc = json.loads(cli_ok("list", "--json", intel["fat"]))
    images = [(i["address"].rsplit("!", 1)[1], i["vendor"], i["kind"], i["arch"]) for i in doc["images"]]
    assert images == [("64.12.55.8", "intel", "zebin", "dg2"), ("64.12.60.7", "intel", "zebin", "pvc"),
                      ("generic_ir@SPIRV Object", "intel", "spirv", "")]  # generic_ir: an OpenCL ELF's SPIR-V
    with devbin.open(intel["fat"]) as src:
        for image in src.images:
            if image.kind == "spirv":  # the SPIR-V the archive was built from (ocloc -spirv_input)
                assert bytes(image.data()) == intel["spv"].read_bytes() and image.code_object() is None
                continue
            member = intel["fat"].parent / f"member-{image.arch}"
            member.write_bytes(bytes(image.data()))
            co = image.code_object()
            assert co is not None and {f.name: f.size for f in co.functions} == _readelf_funcs(member)


def test_extract_an_ocloc_fat_archive_is_byte_exact(intel: dict[str, Path], tmp_path: Path) -> None:
    """``devbin extract`` writes each zebin member of an ocloc fat archive byte for byte as ``ar x`` does,
    named ``<member stem>.<device>.zebin`` (docs/IMAGES.md), the same extension as a SYCL library's zebins, and
    ``generic_ir``'s SPIR-V module: the ``.spv`` the archive was built from."""
    out = tmp_path / "out"
    cli_ok("extract", intel["fat"], "-o", f"{out}/")
    run_tool(["ar", "x", intel["fat"]], tmp_path)
    written = {p.name: p.read_bytes() for p in out.iterdir()}
    assert written == {"64.12.55.dg2.zebin": (tmp_path / "64.12.55.8").read_bytes(),
                       "64.12.60.pvc.zebin": (tmp_path / "64.12.60.7").read_bytes(),
                       "generic_ir.spir64.spv": intel["spv"].read_bytes()}


def test_resource_rows(intel: dict[str, Path]) -> None:
    from devbin.targets.intel.resources import format_rows, resource_rows
    rows = {r["name"]: r for r in resource_rows(import_zebin(_elf(intel["calls"])))}
    assert rows["calls"]["kind"] == "kernel" and rows["calls"]["grf"] == 128 and rows["calls"]["simd"] == 8
    assert rows["helper"]["grf"] is None  # a stack-called function .ze_info does not list: unknown
    table = format_rows(list(rows.values()))
    assert table[0].split()[:4] == ["FUNCTION", "KIND", "GRF", "GRF_BYTES"] and "?" in table[-1]


def test_code_size_is_where_the_padding_starts_for_iga64(intel: dict[str, Path], tool, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """iga64 decodes the kernel's symbol-size bytes cleanly and the zero padding after them as ``illegal``."""
    iga = tool("iga64")
    z = Zebin(_elf(intel["zebin"]))
    for f in z.functions:
        data = bytes(z.elf.section(f.section).data)  # type: ignore[union-attr]
        (tmp_path / "code.krn").write_bytes(data[:f.size])
        (tmp_path / "full.krn").write_bytes(data)
        code = run_tool([iga, "-d", "-p=xehpg", tmp_path / "code.krn"]).stdout
        full = run_tool([iga, "-d", "-p=xehpg", tmp_path / "full.krn"]).stdout
        assert "illegal" not in code and "illegal" in full and code.count("\n") > 10


def test_fallback_chain_and_function_parts() -> None:
    from devbin.targets.intel.vendor import INTEL
    assert INTEL.fallback_chain("acm-g11", ["pvc", "dg2", "12.56.5", "12.55.8", "gfx90a"]) == ["12.56.5", "12.55.8",
                                                                                                 "dg2"]
    assert INTEL.fallback_chain("sm_90", ["pvc"]) is None and INTEL.fallback_chain("dg2", ["12.55.8"]) == []
    elf = open_elf(_zebin_model())
    assert INTEL.function_parts(elf, [1, 2, 3], ["k", "_entry", "f"]) == ([True, False, False], {})


def _as_text(v: object) -> object:
    """PyYAML's tree with every scalar as the text IGC wrote (the subset reader keeps scalars as text)."""
    if isinstance(v, dict):
        return {str(k): _as_text(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_as_text(x) for x in v]
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


@pytest.mark.parametrize("key", ["zebin", "zebin_pvc", "spill", "calls"])
def test_yaml_subset_agrees_with_pyyaml(intel: dict[str, Path], key: str) -> None:
    text = bytes(_elf(intel[key]).section(".ze_info").data)  # type: ignore[union-attr]
    assert parse_yaml(text) == _as_text(yaml.safe_load(text))


@pytest.mark.parametrize("device", ["skl", "tgllp", "acm-g10", "pvc"])
def test_core_families_as_ocloc_writes_them(tool, device: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The patch-token program header's device field is the core family; the table's agrees."""
    ocloc = tool("ocloc")
    src = Path(__file__).parent / "sources" / "intel" / "kernels.cl"
    run_tool([ocloc, "compile", "-q", "-file", src, "-device", device, "--format", "patchtokens",
              "-out_dir", tmp_path, "-output", "k"])
    (binary,) = tmp_path.glob("k*.bin")
    (d,) = [x for x in DEVICES if device in x.names]
    assert read_patch_token_program(_elf(binary)).core_family == d.core


def test_a_new_zeinfo_major_version_is_read_with_a_warning() -> None:
    from devbin.errors import FormatWarning
    data = _zebin_model().replace(b"version:         '1.53'", b"version:         '2.00'")
    found: list[DeviceBinaryError] = []
    co = import_zebin(open_elf(data), diag=found.append)
    assert len(found) == 1 and "major version 1 expected" in found[0].message and co.function("k") is not None
    with pytest.warns(FormatWarning, match="2.00"):
        import_zebin(open_elf(data))


def test_intel_names_through_the_generic_arch_parser() -> None:
    from devbin.targets.archnames import canonical_arch, parse_arch_list
    assert parse_arch_list("PVC,12.55.8,dg2,sm_90") == ("pvc", "12.55.8", "dg2", "sm_90")
    with pytest.raises(UsageError, match="did you mean acm-g10"):
        canonical_arch("acm-g1o")
    with pytest.raises(UsageError, match="did you mean pvc"):
        canonical_arch("pvcc")


def test_list_arch_filter_on_a_fat_archive(intel: dict[str, Path]) -> None:
    import json

    from tests.runners import cli_ok
    for wanted, member in (("12.60.7", "64.12.60.7"), ("acm-g10", "64.12.55.8"), ("dg2", "64.12.55.8")):
        doc = json.loads(cli_ok("list", "--json", "--arch", wanted, intel["fat"]))
        assert [i["address"].rsplit("!", 1)[1] for i in doc["images"]] == [member]


def test_annotated_zebin_reads_as_before(intel: dict[str, Path], tmp_path: Path) -> None:
    """devbin annotate adds its sections to a zebin; ocloc disasm and llvm-readelf read it as before."""
    from tests.runners import cli_ok
    out = tmp_path / "annotated.zebin"
    cli_ok("annotate", "-o", out, intel["zebin"])
    assert _elf(out).section(".devbin.func") is not None
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    before, after = ocloc_dump(intel["zebin"], "dg2", tmp_path / "a"), ocloc_dump(out, "dg2", tmp_path / "b")
    for name in (".ze_info", ".text.vadd.asm", ".text.reduce_slm.asm", ".symtab"):
        assert (before / name).read_bytes() == (after / name).read_bytes(), name
    assert _readelf_funcs(out) == _readelf_funcs(intel["zebin"])
    assert {f.name: f.size for f in import_zebin(_elf(out)).functions} == _readelf_funcs(out)


@pytest.mark.parametrize(("pt", "zb"), [("patchtoken", "zebin"), ("patchtoken_spill", "spill")])
def test_patch_tokens_agree_with_the_zebin_of_the_same_source(intel: dict[str, Path], pt: str, zb: str) -> None:
    prog = read_patch_token_program(_elf(intel[pt]))
    z = Zebin(_elf(intel[zb]))
    assert z.zeinfo is not None and {k.name for k in prog.kernels} == {e.name for e in z.zeinfo.kernels}
    for k in prog.kernels:
        e = z.zeinfo.entry(k.name)
        assert e is not None and (k.simd, k.grf_count) == (e.simd_size, e.grf_count)
        assert (k.slm or 0, k.required_work_group_size, k.has_barriers) == (
            e.slm_size, e.required_work_group_size, e.barrier_count > 0)
        assert (k.private or 0, k.scratch[0]) == (e.private_bytes(), e.spill_bytes()), k.name
