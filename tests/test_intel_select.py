"""``devbin select`` for Intel GPUs: the Level Zero runtime's rule (compute-runtime
``shared/source/device_binary_format/device_binary_format_ar.cpp``: an ``ocloc`` fat archive's member by its
name, then ``validateTargetDevice`` on the zebin's notes; ``generic_ir`` and SPIR-V compiled for the device),
on archives ``ocloc`` builds at test time (tests/intelbuild.py), archives made of their members under other
names (devbin's ``ar`` writer), and SYCL host binaries (tests/test_sycl.py's ``sycl_host``).  Oracle for the
member names: ``ar t``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devbin.errors import UsageError
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.packaging.selection import parse_device, select
from devbin.targets.intel.devices import device_named
from devbin.targets.intel.fatarchive import member_filters, member_match

from tests.conftest import require_tool
from tests.intelbuild import build_intel
from tests.runners import cli_err, cli_ok, run_tool
from tests.test_sycl import sycl_host


@pytest.fixture(scope="module")
def intel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_intel(tmp_path_factory.mktemp("intel"))


def _member(fat: Path, name: str, tmp: Path) -> bytes:
    """Member ``name`` as ``ar x`` writes it."""
    run_tool(["ar", "x", fat, name], cwd=tmp)
    return (tmp / name).read_bytes()


def _archive(tmp: Path, name: str, members: list[tuple[str, bytes]]) -> Path:
    path = tmp / name
    path.write_bytes(write_archive([ArMember(n, d, symbols=()) for n, d in members]))
    return path


# ---------------------------------------------------------------- the rule, without tools

def test_member_names_the_runtime_looks_for() -> None:
    """The prefixes in the runtime's order; ``startsWith`` matching (``64.12.55`` answers ``64.12.55.9``)."""
    g10, g11 = device_named("acm-g10"), device_named("acm-g11")
    assert g10 is not None and g11 is not None
    assert [f[1] for f in member_filters(g11)] == ["64.12.56.5", "64.12.56", "64.dg2", "generic_ir"]
    assert member_match("64.12.55.8", g10) == (1, "64.12.55.8", "the device's IP version")
    assert member_match("64.12.55.9", g10) == (3, "64.12.55", "the device's IP major.minor")
    assert member_match("64.dg2.0", g11) == (4, "64.dg2", "the device's product")
    assert member_match("generic_ir", g11) == (5, "generic_ir", "the SPIR-V fallback")
    assert member_match("64.12.55.8", g11) is None  # the generic target's base: not a name acm-g11 looks for
    assert member_match("32.12.55.8", g10) is None and member_match("pad_0", g10) is None


def test_device_names() -> None:
    """Three dotted numbers are an Intel IP version (they were taken for an NVIDIA compute capability);
    a generic acronym is its base device, with a note; X.Y stays NVIDIA's."""
    assert parse_device("12.60.7").vendor == "intel"
    dg2 = parse_device("dg2")
    assert (dg2.vendor, dg2.description) == ("intel", "dg2 (Intel acm-g10, IP 12.55.8)") and "acm-g11" in dg2.note
    assert parse_device("8.6").vendor == "nvidia" and parse_device("sm_86").vendor == "nvidia"
    with pytest.raises(UsageError, match="did you mean acm-g10"):
        parse_device("acm-g1o")


# ---------------------------------------------------------------- ocloc's fat archive

@pytest.mark.parametrize(("device", "member"), [
    ("12.60.7", "64.12.60.7"), ("pvc", "64.12.60.7"), ("acm-g10", "64.12.55.8"), ("dg2", "64.12.55.8")])
def test_fat_archive_is_one_module_and_the_member_of_the_device_is_chosen(
        intel: dict[str, Path], device: str, member: str) -> None:
    fat = intel["fat"]
    assert member in run_tool(["ar", "t", fat]).stdout.split()
    doc = json.loads(cli_ok("select", "--device", device, "--json", fat))
    assert doc["ok"] and [m["name"] for m in doc["modules"]] == [str(fat)]
    assert doc["chosen"]["address"] == f"{fat}!{member}" and not doc["jit"]
    verdicts = {c["address"].rsplit("!", 1)[1]: c["verdict"] for c in doc["candidates"]}
    assert verdicts == {**{m: "chosen" if m == member else "rejected" for m in ("64.12.55.8", "64.12.60.7")},
                        "generic_ir@SPIRV Object": "usable"}
    assert cli_ok("select", "--device", device, fat) == f"{fat}!{member}: {doc['chosen']['arch']} (code object)\n"


def test_explain_names_the_member_rule(intel: dict[str, Path]) -> None:
    fat = intel["fat"]
    lines = cli_ok("select", "--device", "pvc", "--explain", fat).splitlines()
    assert lines[0] == "device: pvc (Intel pvc, IP 12.60.7)"
    rows = {line.split()[0]: line for line in lines[1:4]}
    assert "chosen" in rows[f"{fat}!64.12.60.7"] and "named 64.12.60.7 (the device's IP version" in \
        rows[f"{fat}!64.12.60.7"]
    assert "rejected" in rows[f"{fat}!64.12.55.8"] and \
        "looks only for members named 64.12.60.7, 64.12.60, 64.pvc, generic_ir" in rows[f"{fat}!64.12.55.8"]
    assert "usable" in rows[f"{fat}!generic_ir@SPIRV"] and rows[f"{fat}!generic_ir@SPIRV"].endswith(
        "not chosen: native code is preferred over SPIR-V")
    assert lines[4] == f"{fat}!64.12.60.7: pvc (code object)"


def test_a_device_no_member_is_named_for_gets_generic_ir(intel: dict[str, Path], tmp_path: Path) -> None:
    """acm-g11 runs code built for 12.55.8 (dg2's generic target), but the runtime looks for a member named
    64.12.56.5, 64.12.56 or 64.dg2: 64.12.55.8 is never opened, generic_ir is compiled; without generic_ir
    nothing loads."""
    fat = intel["fat"]
    assert cli_ok("select", "--device", "acm-g11", fat) == f"{fat}!generic_ir@SPIRV Object: - (SPIR-V, JIT-compiled)\n"
    names = ("64.12.55.8", "64.12.60.7")
    no_ir = _archive(tmp_path, "no-ir.ar", [(n, _member(fat, n, tmp_path)) for n in names])
    code, _, err = cli_err("select", "--device", "acm-g11", no_ir)
    assert code == 1 and f"no image compatible with acm-g11 in {no_ir}; it holds dg2, pvc" in err


def test_member_names_decide_before_the_notes(intel: dict[str, Path], tmp_path: Path) -> None:
    """The same zebins under other names: ``64.dg2`` (a generic-target name) is taken on acm-g11; a member
    named for the device whose notes name another refuses, and the next name the runtime looks for wins."""
    dg2, pvc = _member(intel["fat"], "64.12.55.8", tmp_path), _member(intel["fat"], "64.12.60.7", tmp_path)
    ar = _archive(tmp_path, "renamed.ar", [("64.12.56.5", pvc), ("64.dg2", dg2), ("64.12.55.8", dg2)])
    sel = select(ar, "acm-g11")
    assert [m.name for m in sel.modules] == [str(ar)]
    got = {c.name.rsplit("!", 1)[1]: (c.verdict, c.reason) for c in sel.candidates}
    assert got["64.12.56.5"][0] == "rejected" and "built for pvc, not acm-g11" in got["64.12.56.5"][1]
    assert got["64.dg2"][0] == "chosen" and "the runtime's choice 4 of 5" in got["64.dg2"][1]
    assert got["64.12.55.8"][0] == "rejected"


def test_a_refused_zebin_that_carries_its_spirv_is_compiled_from_it(intel: dict[str, Path], tmp_path: Path) -> None:
    """compute-runtime device_binary_format_zebin.cpp: a zebin not valid for the device but with a .spv section
    (ocloc compile keeps one) is rebuilt from it; a fat archive's members (built from SPIR-V) carry none."""
    zebin = intel["zebin"]
    assert ".spv" in run_tool([require_tool("llvm-readelf"), "-SW", zebin]).stdout
    sel = select(zebin, "pvc")
    assert sel.chosen is not None and sel.jit and sel.chosen.reason.startswith("built for dg2, not pvc (12.60.7): "
                                                                              "the driver compiles the SPIR-V")
    assert cli_ok("select", "--device", "pvc", zebin) == f"{zebin}: dg2 (the IR it carries, JIT-compiled)\n"
    member = tmp_path / "member.zebin"
    member.write_bytes(_member(intel["fat"], "64.12.55.8", tmp_path))
    assert ".spv" not in run_tool([require_tool("llvm-readelf"), "-SW", member]).stdout
    code, _, err = cli_err("select", "--device", "pvc", member)
    assert code == 1 and "no image compatible with pvc" in err
    # named for the device but built for another: its .spv comes before generic_ir's
    ar = _archive(tmp_path, "named.ar", [("64.12.60.7", zebin.read_bytes()),
                                          ("generic_ir", _member(intel["fat"], "generic_ir", tmp_path))])
    got = select(ar, "pvc")
    assert got.chosen is not None and got.chosen.name == f"{ar}!64.12.60.7" and got.jit
    (ir,) = [c for c in got.candidates if c.kind == "spirv"]
    assert ir.verdict == "usable" and ir.reason.endswith("(a zebin's .spv, then generic_ir) is compiled first")


def test_bare_zebins_stay_modules_of_their_own(intel: dict[str, Path], tmp_path: Path) -> None:
    """An ar of zebins under file names (a static library) is no fat archive: each member is a module, judged
    by its notes alone."""
    ar = _archive(tmp_path, "lib.a", [("a.zebin", intel["zebin"].read_bytes()),
                                      ("b.zebin", intel["zebin_pvc"].read_bytes())])
    sel = select(ar, "pvc", strict=False)
    assert [m.name for m in sel.modules] == [f"{ar}!a.zebin", f"{ar}!b.zebin"]
    assert [(c.verdict, c.jit) for c in sel.candidates] == [("chosen", True), ("chosen", False)]  # a.zebin: its .spv


# ---------------------------------------------------------------- SYCL host binaries: SPIR-V the JIT fallback

def test_sycl_native_first_then_generic_ir_then_spir64(intel: dict[str, Path], tmp_path: Path) -> None:
    fat, spv = intel["fat"].read_bytes(), intel["spv"].read_bytes()
    host = tmp_path / "libk.so"
    host.write_bytes(sycl_host([fat], [spv], kernels=["vadd", "reduce_slm"]))
    gen, jit = f"{host}@__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen#0.0", f"{host}@__CLANG_OFFLOAD_BUNDLE__sycl-spir64#0.0"
    module = f"{host}@__CLANG_OFFLOAD_BUNDLE__sycl-*[vadd reduce_slm]"
    on_pvc = json.loads(cli_ok("select", "--device", "pvc", "--json", host))
    assert [m["name"] for m in on_pvc["modules"]] == [module]
    assert on_pvc["chosen"]["address"] == f"{gen}!64.12.60.7" and not on_pvc["jit"]
    by = {c["address"]: c for c in on_pvc["candidates"]}
    assert by[jit]["vendor"] == "intel" and by[jit]["verdict"] == "usable"
    assert by[jit]["reason"].endswith("native code is preferred over SPIR-V")
    on_mtl = json.loads(cli_ok("select", "--device", "mtl-u", "--json", host))
    assert on_mtl["chosen"]["address"] == f"{gen}!generic_ir@SPIRV Object" and on_mtl["jit"]
    assert cli_ok("select", "--device", "mtl-u", host) == f"{gen}!generic_ir@SPIRV Object: - (SPIR-V, JIT-compiled)\n"
    # no generic_ir in the native image: the spir64 image is compiled
    names = ("64.12.55.8", "64.12.60.7")
    no_ir = _archive(tmp_path, "gen.ar", [(n, _member(intel["fat"], n, tmp_path)) for n in names])
    host2 = tmp_path / "libk2.so"
    host2.write_bytes(sycl_host([no_ir.read_bytes()], [spv], kernels=["vadd"]))
    sel = select(host2, "mtl-u")
    assert sel.chosen is not None and sel.jit
    assert sel.chosen.name == f"{host2}@__CLANG_OFFLOAD_BUNDLE__sycl-spir64#0.0" and sel.chosen.kind == "spirv"


def test_an_image_naming_no_kernel_is_a_module_of_its_own(intel: dict[str, Path], tmp_path: Path) -> None:
    """A device library's image (its descriptor names no kernel) is not an alternative to another image."""
    spv = intel["spv"].read_bytes()
    host = tmp_path / "libd.so"
    host.write_bytes(sycl_host([], [spv, spv], kernels=[]))
    sel = select(host, "pvc")
    jit = "__CLANG_OFFLOAD_BUNDLE__sycl-spir64"
    assert [m.name for m in sel.modules] == [f"{host}@{jit}#0.0", f"{host}@{jit}#0.1"]
    assert [c.verdict for c in sel.candidates] == ["chosen", "chosen"]


def test_a_long_kernel_list_names_the_module_short(intel: dict[str, Path], tmp_path: Path) -> None:
    """A module is named by its kernels: more than three by the first three, how many more and a checksum."""
    fat, spv = intel["fat"].read_bytes(), intel["spv"].read_bytes()
    host = tmp_path / "libk.so"
    host.write_bytes(sycl_host([fat], [spv], kernels=["a", "b", "c", "d", "e"]))
    (module,) = {c.module for c in select(host, "pvc").candidates}
    assert module.startswith(f"{host}@__CLANG_OFFLOAD_BUNDLE__sycl-*[a b c +2 ") and module.endswith("]")


def test_the_shipped_sample_is_a_fresh_build(tmp_path: Path) -> None:
    """``sample_intel.ar`` (the tour's) is what tests/fixtures/make-fixtures.sh's ocloc steps build today."""
    from devbin.samples import sample_path

    ocloc = require_tool("ocloc")
    for d in ("spv", "fat"):
        (tmp_path / d).mkdir()
    source = Path(__file__).parent / "fixtures" / "sample_intel.cl"
    run_tool([ocloc, "compile", "-q", "-file", source, "-device", "acm-g10", "-spv_only", "-output", "s",
              "-out_dir", "spv"], cwd=tmp_path)
    (spv,) = (tmp_path / "spv").iterdir()
    run_tool([ocloc, "compile", "-q", "-file", spv, "-spirv_input", "-device", "acm-g10,pvc", "-internal_options",
              "-ze-allow-zebin", "-output", "sample_intel", "-out_dir", "fat"], cwd=tmp_path)
    assert (tmp_path / "fat" / "sample_intel").read_bytes() == sample_path("sample_intel.ar").read_bytes()
