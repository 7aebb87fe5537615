"""devbin link against the vendor linkers, end to end (``devbin.link.core.link``, ``-o``).

NVIDIA (tests/sources/link_nv, built as in tests/test_link_nvidia.py): with
``keep_address_taken`` the functions devbin keeps for ``--kernels k`` equal what ``nvlink
-kernels-used=k`` keeps; by default devbin also drops address-taken functions no reachable
indirect call site can reach (a subset of nvlink's, differing exactly there); per-kernel
stack and the recursion marker agree with what nvlink writes (MIN_STACK_SIZE, 0xFFFFFFFF);
``-o`` hands nvlink the pruned cubins and the output holds exactly the kept functions.

AMDGPU (tests/sources/link_amd): ``-o`` links the ``devbin cc`` objects with ld.lld-19 and
writes into the kernel descriptor and the note what the one-translation-unit build says.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devbin.formats.devsec.elf import read_code_object
from devbin.formats.elf.reader import ElfFile
from devbin.link.core import link
from devbin.model import StdAttr
from devbin.targets.nvidia.link_nvlink import linked_functions, nvlink_facts, nvlink_kept

from tests.conftest import SOURCES, require_tool
from tests.runners import run_devbin, run_tool
from tests.test_link_nvidia import ADDRESS_TAKEN, BLACKWELL, NVLINK_KEEPS, Programs

CHOICES = [k for k in NVLINK_KEEPS if k != ("k_int",)]  # devbin names kernels exactly; nvlink matches substrings


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Programs:
    require_tool("nvlink")
    return Programs(tmp_path_factory.mktemp("link_vs_nvlink"))


@pytest.fixture()
def program(programs: Programs) -> list[Path]:
    built = programs["sm_90"]
    return [built["prog"], built["lib"]]


def _kept_functions(result: object) -> set[str]:
    graph, dce = result.graph, result.dce  # type: ignore[attr-defined]
    return {graph.nodes[k].name for k in dce.kept if graph.nodes[k].is_function}


@pytest.mark.parametrize("kernels", CHOICES)
def test_nvlink_compatible_mode_keeps_what_nvlink_keeps(program: list[Path], kernels: tuple[str, ...] | None) -> None:
    result = link(program, kernels=kernels, keep_address_taken=True)
    assert result.errors == []
    assert _kept_functions(result) == nvlink_kept(program, kernels)


@pytest.mark.parametrize("arch", (*BLACKWELL, "sm_100a", "sm_120f"))
def test_blackwell_links_as_earlier_archs(programs: Programs, tmp_path: Path, arch: str) -> None:
    """sm_100-sm_121 (Mercury sections): for every kernel choice devbin keeps what nvlink
    -kernels-used keeps, each kernel's stack and recursion marker are nvlink's, and -o links."""
    objs = [programs[arch]["prog"], programs[arch]["lib"]]
    for kernels in CHOICES:
        result = link(objs, kernels=kernels, keep_address_taken=True)
        assert result.errors == [] and result.inputs.arch == arch[:6]  # sm_100a, sm_120f: link as sm_100, sm_120
        assert _kept_functions(result) == nvlink_kept(objs, kernels), kernels
    _stack_and_recursion_agree(objs)
    out = tmp_path / "linked.cubin"
    result = link(objs, kernels=["k_direct", "k_recursive"], output=out)
    assert result.output is not None and not result.output.kept_in_output
    assert linked_functions(out.read_bytes()) == _kept_functions(result) == {
        "k_direct", "helper", "leaf", "k_recursive", "rec_fib", "ping", "pong"}


@pytest.mark.parametrize("kernels", CHOICES)
def test_default_mode_differs_from_nvlink_only_by_unreachable_address_taken(program: list[Path],
                                                                          kernels: tuple[str, ...] | None) -> None:
    ours = _kept_functions(link(program, kernels=kernels))
    theirs = nvlink_kept(program, kernels)
    assert ours <= theirs
    assert theirs - ours <= ADDRESS_TAKEN


def test_default_mode_follows_prototypes(program: list[Path]) -> None:
    """k_int_table calls through int_ops (#ii): op_inc/op_dbl (and taken_in_code, also #ii) stay; the
    float and void tables' functions go, although nvlink keeps them."""
    kept = _kept_functions(link(program, kernels=["k_int_table"]))
    assert {"op_inc", "op_dbl"} <= kept
    assert not kept & {"fop_add", "fop_mul", "vop_zero", "vop_one"}
    assert _kept_functions(link(program, kernels=["k_direct"])) == {"k_direct", "helper", "leaf"}


def test_stack_and_recursion_agree_with_nvlink(program: list[Path]) -> None:
    _stack_and_recursion_agree(program)


def _stack_and_recursion_agree(program: list[Path]) -> None:
    facts = nvlink_facts(program, None)
    usage = {u.kernel: u for u in link(program, keep_address_taken=True).usage}
    for name, k in facts.kernels.items():
        u = usage[name]
        assert u.dynamic == k.stack_unknown, name
        if not k.stack_unknown and k.min_stack_size is not None:
            assert u.stack == k.min_stack_size, name
    assert usage["k_recursive"].dynamic and any("recursion" in r for r in usage["k_recursive"].reasons)
    budget = link(program, kernels=["k_recursive"], stack_budget=1024).usage[0]
    assert budget.budget_used == 1024 and budget.stack >= 1024


@pytest.mark.parametrize("kernels", [("k_direct",), ("k_int_table",), ("k_other", "k_lib"), None])
def test_output_is_linked_by_nvlink_with_exactly_the_kept_functions(program: list[Path], tmp_path: Path,
                                                                    kernels: tuple[str, ...] | None) -> None:
    out = tmp_path / "linked.cubin"
    result = link(program, kernels=kernels, output=out)
    assert result.output is not None and result.output.linker == "nvlink"
    left_in = {n for n, _ in result.output.kept_in_output}
    assert linked_functions(out.read_bytes()) == _kept_functions(result) | left_in
    model = read_code_object(ElfFile(out.read_bytes()))
    assert model is not None
    reaches = dict(model.metadata.entries)
    for u in result.usage:
        assert reaches[f"reaches:{u.kernel}"].split() == sorted(u.reaches)  # type: ignore[union-attr]
    require_tool("cuobjdump")
    listing = run_tool([require_tool("cuobjdump"), "-res-usage", str(out)], check=False)
    assert listing.returncode == 0, listing.stderr


# --------------------------------------------------------------------------- AMDGPU


@pytest.fixture(scope="module")
def amd(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    clang = require_tool("clang-19")
    out = tmp_path_factory.mktemp("link_vs_lld")
    flags = [clang, "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-mcpu=gfx90a"]
    built = {}
    for name in ("kern", "lib"):
        dest = out / f"{name}.o"
        p = run_devbin("cc", "--", *flags, "-ffunction-sections", "-c", SOURCES / "link_amd" / f"{name}.cl", "-o",
                       dest)
        assert p.returncode == 0, p.stderr
        built[name] = dest
    one = out / "one.o"
    p = run_tool([*flags, "-c", str(SOURCES / "link_amd" / "one.cl"), "-o", str(one)], check=False)
    assert p.returncode == 0, p.stderr
    built["one"] = one
    return built


def test_amdgpu_output_carries_the_one_unit_totals(amd: dict[str, Path], tmp_path: Path) -> None:
    from devbin.importers import import_code_object

    out = tmp_path / "linked.so"
    result = link([amd["kern"], amd["lib"]], output=out)
    assert result.output is not None and result.output.linker == "ld.lld"
    assert any("unused_fn" in r for r in result.output.removed)
    one = {f.name: f for f in import_code_object(ElfFile(amd["one"].read_bytes())).functions}
    linked = {f.name: f for f in import_code_object(ElfFile(out.read_bytes())).functions}
    k, ref = linked["kern_main"], one["kern_main"]
    assert k.uint(StdAttr.PRIVATE_BYTES) == ref.uint(StdAttr.PRIVATE_BYTES) == 68
    assert bool(k.uint(StdAttr.DYNAMIC_STACK)) == bool(ref.uint(StdAttr.DYNAMIC_STACK))
    assert (k.uint(StdAttr.REGS_GENERAL) or 0) >= (ref.uint(StdAttr.REGS_GENERAL) or 0)
    usage = {u.kernel: u for u in result.usage}["kern_main"]
    assert usage.stack == 68 and usage.registers["accum"] == ref.uint(StdAttr.REGS_ACCUM)
    assert "unused_fn" not in linked and "helper_fn" not in linked
    notes = run_tool([require_tool("llvm-readelf-19"), "--notes", str(out)], check=False)
    assert notes.returncode == 0 and ".private_segment_fixed_size: 68" in notes.stdout


@pytest.mark.parametrize(("kernel", "gone"), [("kern_light", {"kern_main", "heavy_fn", "unused_fn", "helper_fn"}),
                                              ("kern_main", {"kern_light", "unused_fn", "helper_fn"})])
def test_amdgpu_output_without_the_kernels_not_asked_for(amd: dict[str, Path], tmp_path: Path, kernel: str,
                                                       gone: set[str]) -> None:
    """The other kernel goes with what only it called, across objects (kern_main calls heavy_fn in
    lib.o: leaving kern_main in while heavy_fn goes made ld.lld fail with an undefined hidden symbol)."""
    out = tmp_path / "linked.so"
    result = link([amd["kern"], amd["lib"]], kernels=[kernel], output=out)
    assert result.output is not None and not result.output.kept_in_output
    assert {r.split(": ")[1] for r in result.output.removed} == gone
    syms = run_tool([require_tool("llvm-readelf-19"), "-s", "--notes", str(out)], check=False)
    assert syms.returncode == 0
    names = {ln.split()[-1] for ln in syms.stdout.splitlines() if " FUNC " in ln or " OBJECT " in ln}
    assert {kernel, f"{kernel}.kd"} <= names and not names & {*gone, *(f"{g}.kd" for g in gone)}
    assert f".name:           {kernel}" in syms.stdout and syms.stdout.count(".name:  ") == 1


def test_shipped_link_samples_match_their_recipe(amd: dict[str, Path]) -> None:
    """src/devbin/samples/sample_link_{kern,lib}.o (tests/fixtures/make-fixtures.sh) are what devbin cc builds here."""
    shipped = Path(__file__).parents[1] / "src" / "devbin" / "samples"
    for name in ("kern", "lib"):
        assert (shipped / f"sample_link_{name}.o").read_bytes() == amd[name].read_bytes()
