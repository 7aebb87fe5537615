"""devbin link: symbol resolution, dead-code elimination, resource propagation, the CLI.

Inputs are built at test time: AMDGPU objects of tests/sources/link_core (clang-19) put in
archives with llvm-ar-19, and NVIDIA relocatable cubins of tests/sources/kernels.cu and
extfn.cu (nvcc -rdc).  Oracles: ``ld.lld-19 --why-extract`` for which archive members a
link pulls (lld treats every archive as one group), and the sources for what is called.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devbin.errors import UsageError
from devbin.link.core import link

from tests.conftest import SOURCES, cubins_from_ptx, require_tool
from tests.runners import cli, run_tool

CORE = SOURCES / "link_core"
OBJECTS = ("main", "a", "b", "unused", "weak", "strong", "dup", "other", "counter")


@pytest.fixture(scope="module")
def amd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    clang = require_tool("clang-19")
    ar = require_tool("llvm-ar-19")
    out = tmp_path_factory.mktemp("link_core")
    for name in OBJECTS:
        run_tool([clang, "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-mcpu=gfx90a", "-c",
                  "-o", out / f"{name}.o", CORE / f"{name}.cl"], out)
    run_tool([ar, "rcs", out / "lib1.a", "a.o", "unused.o"], out)
    run_tool([ar, "rcs", out / "lib2.a", "b.o", "strong.o"], out)
    return out


@pytest.fixture(scope="module")
def nv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if cubins_from_ptx():
        pytest.skip("no nvcc (cicc) here: these cubins need CUDA C++ compiled")
    nvcc = require_tool("nvcc")
    out = tmp_path_factory.mktemp("link_nv")
    for src in ("kernels", "extfn"):
        run_tool([nvcc, "-rdc=true", "-arch=sm_90", "-cubin", "-o", out / f"{src}.cubin", SOURCES / f"{src}.cu"], out)
    return out


def _lld_pulls(amd: Path, args: list[str]) -> set[tuple[str, str]]:
    proc = run_tool([require_tool("ld.lld-19"), "-shared", "-o", amd / "why.so", *args, "--why-extract=-"], amd)
    rows = [line.split("\t") for line in proc.stdout.splitlines()[1:]]
    return {(ext, sym) for _, ext, sym in rows}


# --------------------------------------------------------------------------- resolution


def test_archive_members_pulled_like_lld(amd: Path) -> None:
    """lib2 before lib1: a.o (from lib1) needs helper_b from lib2, already read: group semantics."""
    args = ["main.o", "weak.o", "lib2.a", "lib1.a", "counter.o", "other.o"]
    result = link([amd / a for a in args])
    pulled = {(Path(p.unit.split("(")[0]).name + "(" + p.unit.split("(")[1], p.symbol) for p in result.resolution.pulls}
    assert pulled == _lld_pulls(amd, args) == {("lib1.a(a.o)", "used_a"), ("lib2.a(b.o)", "helper_b")}
    assert result.errors == []
    # the weak definition on the command line satisfies weak_fn: the strong one in lib2 is not pulled
    assert result.resolution.definitions["weak_fn"].unit.endswith("weak.o")
    assert next(p.needed_by for p in result.resolution.pulls if p.symbol == "helper_b").endswith("lib1.a(a.o)")


def test_strong_beats_weak_whatever_the_order(amd: Path) -> None:
    for order in (["weak.o", "strong.o"], ["strong.o", "weak.o"]):
        result = link([amd / "main.o", *(amd / o for o in order), amd / "a.o", amd / "b.o", amd / "counter.o",
                       amd / "other.o"])
        assert result.resolution.definitions["weak_fn"].unit.endswith("strong.o")
        assert result.errors == []


def test_duplicate_and_undefined_are_errors_naming_everyone(amd: Path) -> None:
    result = link([amd / n for n in ("main.o", "a.o", "dup.o", "b.o", "weak.o", "counter.o")])
    errors = result.errors
    assert any(e.startswith("duplicate symbol: used_a (defined in") and "a.o" in e and "dup.o" in e for e in errors)
    assert any(e.startswith("undefined symbol: other (referred to by") and "main.o: k_other" in e for e in errors)


def test_keep_resolves_and_roots(amd: Path) -> None:
    result = link([amd / "main.o", amd / "lib1.a", amd / "lib2.a", amd / "weak.o", amd / "counter.o",
                   amd / "other.o"], kernels=["k_main"], keep=["never"])
    assert any(p.unit.endswith("lib1.a(unused.o)") and p.symbol == "never" for p in result.resolution.pulls)
    assert "never" in [result.graph.nodes[k].name for k in result.dce.kept]


# --------------------------------------------------------------------------- dead code


def test_kernels_choose_the_roots(amd: Path) -> None:
    files = [amd / n for n in ("main.o", "weak.o", "lib2.a", "lib1.a", "counter.o", "other.o")]
    everything = link(files)
    assert {everything.graph.nodes[k].name for k in everything.dce.roots} == {"k_main", "k_other"}
    only = link(files, kernels=["k_main"])
    removed = {r["name"] for r in only.removed()}
    assert {"k_other", "k_other.kd", "other"} <= removed
    kept = {only.graph.nodes[k].name for k in only.dce.kept}
    assert {"k_main", "k_main.kd", "used_a", "helper_b", "weak_fn", "counter"} <= kept
    assert only.dce.removed_bytes == sum(r["bytes"] for r in only.removed())
    with pytest.raises(UsageError, match="not a kernel of this link"):
        link(files, kernels=["used_a"])


def test_nvidia_indirect_calls_and_cross_object_calls(nv: Path) -> None:
    files = [nv / "kernels.cubin", nv / "extfn.cubin"]
    result = link(files, kernels=["apply_op"])
    kept = {result.graph.nodes[k].name: result.dce.why[k] for k in result.dce.kept}
    # apply_op calls through op_table: every address-taken function with its prototype stays
    assert {"op_add", "op_mul", "op_sub"} <= set(kept)
    assert kept["op_add"].startswith("address taken, matches an indirect call in apply_op")
    assert "ext_scale" not in kept and "fact" not in kept
    cross = link(files, kernels=["scale_ext"])
    usage = {u.kernel: u for u in cross.usage}["scale_ext"]
    assert "ext_scale" in usage.reaches
    node = {n.name: n for n in cross.graph.nodes.values()}
    regs = [node[f].function.uint(1) for f in ("scale_ext", "ext_scale")]  # type: ignore[union-attr]
    assert usage.registers["general"] == max(r for r in regs if r is not None)


# --------------------------------------------------------------------------- CLI


def test_cli_report_map_json_and_time_trace(amd: Path, tmp_path: Path) -> None:
    files = [str(amd / n) for n in ("main.o", "weak.o", "lib2.a", "lib1.a", "counter.o", "other.o")]
    m = tmp_path / "link.map"
    code, text = cli("link", *files, "--kernels", "k_main", "--map", str(m), "--time-trace")
    assert code == 0, text
    assert "dead code: " in text and "k_other" in text and "passes:" in text
    for name in ("load", "resolve", "import", "graph", "dce", "resources"):
        assert f"  {name} " in text
    mapped = m.read_text()
    assert "lib1.a(a.o): pulled for used_a (needed by" in mapped
    code, js = cli("link", *files, "--kernels", "k_main", "--json")
    facts = json.loads(js)
    assert code == 0 and facts["arch"] == "gfx90a" and facts["errors"] == []
    assert {r["name"] for r in facts["removed"]} >= {"k_other", "other"}
    code, js = cli("link", str(amd / "main.o"), "--json")
    assert code == 1 and any("undefined symbol: used_a" in e for e in json.loads(js)["errors"])


def test_cli_rejects_bad_input(tmp_path: Path) -> None:
    junk = tmp_path / "junk.o"
    junk.write_bytes(b"\x7fELF" + bytes(20))
    code, _ = cli("link", str(junk))
    assert code == 1
    text = tmp_path / "t.txt"
    text.write_text("hello")
    code, _ = cli("link", str(text))
    assert code == 3  # no device code in it


# --------------------------------------------------------------------------- more inputs


def test_host_objects_and_nvcc_libraries(nv: Path, tmp_path: Path) -> None:
    """nvcc -rdc -c host objects (device code in __nv_relfatbin) and an nvcc -lib archive of one."""
    nvcc = require_tool("nvcc")
    run_tool([nvcc, "-rdc=true", "-arch=sm_90", "-c", "-o", tmp_path / "kernels.o", SOURCES / "kernels.cu"], tmp_path)
    run_tool([nvcc, "-rdc=true", "-arch=sm_90", "-c", "-o", tmp_path / "extfn.o", SOURCES / "extfn.cu"], tmp_path)
    run_tool([nvcc, "-lib", "-o", tmp_path / "libext.a", tmp_path / "extfn.o"], tmp_path)
    result = link([tmp_path / "kernels.o", tmp_path / "libext.a"], kernels=["scale_ext"])
    assert result.errors == [] and result.inputs.arch == "sm_90"
    assert result.resolution.units[0].name.startswith(str(tmp_path / "kernels.o") + "[")
    assert len(result.resolution.pulls) == 1 and result.resolution.pulls[0].symbol == "ext_scale"
    assert "ext_scale" in {u.kernel: u for u in result.usage}["scale_ext"].reaches
    # the same through the device cubins directly gives the same kept set
    direct = link([nv / "kernels.cubin", nv / "extfn.cubin"], kernels=["scale_ext"])
    names = {result.graph.nodes[k].name for k in result.dce.kept}
    assert names == {direct.graph.nodes[k].name for k in direct.dce.kept}


def test_superarchive_chain_as_input(tmp_path: Path) -> None:
    """A super-archive on the command line offers its target's chain, level by level (tests/sources/layers)."""
    from tests.test_superarchive_chains import LEVELS, _member_name

    clang = require_tool("clang-19")
    flags = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-O2", "-c", f"-I{SOURCES / 'layers'}"]
    args = ["ar", "create", "-o", str(tmp_path / "chain.sa")]
    for target, (cpu, sources) in LEVELS.items():
        objs = []
        for src in sources:
            obj = tmp_path / target.replace(":", "_") / _member_name(src)
            obj.parent.mkdir(exist_ok=True)
            run_tool([clang, *flags, f"-mcpu={cpu}", "-o", obj, SOURCES / "layers" / src], tmp_path)
            objs.append(str(obj))
        args += ["--target", f"{target}=" + objs[0], *objs[1:]]
    args += ["--chain", "gfx90a:xnack+=gfx90a:base", "--chain", "gfx90a=base"]
    assert cli(*args)[0] == 0
    run_tool([clang, *flags, "-mcpu=gfx90a", "-o", tmp_path / "user.o", SOURCES / "layers" / "user.c"], tmp_path)
    result = link([tmp_path / "user.o", tmp_path / "chain.sa"], target="gfx90a:xnack+", keep=["apply"])
    pulled = {(p.unit.split("[", 1)[1], p.symbol) for p in result.resolution.pulls}
    assert pulled == {("base](cos16.o)", "cos16"), ("gfx90a](cos8.o)", "cos8"), ("gfx90a:xnack+](cos1.o)", "cos1"),
                      ("base](pack.o)", "vadd"), ("base](poly.o)", "poly")}
    with pytest.raises(UsageError, match="name the target"):
        link([tmp_path / "user.o", tmp_path / "chain.sa"])


def test_indirect_site_matching_nothing_is_a_warning(amd: Path) -> None:
    from devbin.link.dce import eliminate
    from devbin.link.graph import ProgramGraph, ProgramNode
    from devbin.model import CallConv, Function, FunctionKind, ParamType, Prototype, TypeKind

    unit = link([amd / "main.o", amd / "a.o", amd / "b.o", amd / "weak.o", amd / "counter.o",
                 amd / "other.o"]).resolution.units[0]
    i32 = ParamType(TypeKind.INT, 4, 4)
    f32 = ParamType(TypeKind.FLOAT, 4, 4)
    g = ProgramGraph()
    g.nodes["k"] = ProgramNode("k", "k", unit, True, 64, Function("k", FunctionKind.KERNEL),
                        sites=[Prototype(i32, (i32,), CallConv.DEFAULT)])
    g.nodes["fl"] = ProgramNode("fl", "fl", unit, True, 16, Function("fl", FunctionKind.INDIRECT_TARGET))
    g.taken["fl"] = [Prototype(f32, (f32,), CallConv.DEFAULT)]
    dce = eliminate(g)
    assert dce.removed == ["fl"] and dce.removed_bytes == 16
    assert dce.warnings == ["indirect call site 0 in k (int32(int32) [default]) matches no address-taken function"]
    assert eliminate(g, keep_address_taken=True).removed == []


def test_dynamic_stack_flag_and_self_recursion(amd: Path) -> None:
    from devbin.link.graph import ProgramGraph, ProgramNode
    from devbin.link.resources import propagate
    from devbin.model import Attribute, Function, FunctionKind, StdAttr

    unit = link([amd / "main.o", amd / "a.o", amd / "b.o", amd / "weak.o", amd / "counter.o",
                 amd / "other.o"]).resolution.units[0]
    g = ProgramGraph()
    g.nodes["k"] = ProgramNode("k", "k", unit, True, 64, Function("k", FunctionKind.KERNEL, (
        Attribute(StdAttr.PRIVATE_BYTES, 16), Attribute(StdAttr.FRAME_SIZE, 16))), calls=["f", "r"])
    g.nodes["f"] = ProgramNode("f", "f", unit, True, 16, Function("f", FunctionKind.DEVICE, (
        Attribute(StdAttr.PRIVATE_BYTES, 32), Attribute(StdAttr.DYNAMIC_STACK, True))))
    g.nodes["r"] = ProgramNode("r", "r", unit, True, 16, Function("r", FunctionKind.DEVICE,
                                                          (Attribute(StdAttr.PRIVATE_BYTES, 8),)), calls=["r"])
    (u,) = propagate(g, ["k"], stack_budget=100)
    assert u.dynamic and u.reasons == ["f has a dynamic stack", "recursion: r calls itself"]
    assert u.stack == 16 + 32 + 100 and u.budget_used == 100
