"""Fallback chains of the super-archive: default chains, layered resolution, per-target views.

The oracle for resolution is ``ld.lld-19 --why-extract`` given one archive per chain level in
order: devbin must pull exactly the members lld extracts, for the same symbols, needed by the
same files.  Inputs: the three-level library in tests/sources/layers (see its README),
compiled at test time by clang-19 for gfx90a:xnack+ (top level) and gfx90a (the others).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import devbin.superarchive as sa
from devbin.errors import UsageError
from devbin.superarchive.chains import default_chain, effective_chain
from devbin.superarchive.resolve import RootObject

from tests.conftest import SOURCES, require_tool
from tests.runners import cli, run_tool

LAYERS = SOURCES / "layers"
LEVELS: dict[str, tuple[str, list[str]]] = {  # target -> (-mcpu, source files)
    "gfx90a:xnack+": ("gfx90a:xnack+", ["top_cos1.c", "top_vmul.c"]),
    "gfx90a": ("gfx90a", ["mid_cos8.c", "mid_hook.c"]),
    "base": ("gfx90a", ["base_cos16.c", "base_cos8.c", "base_cos1.c", "base_pack.c", "base_poly.c"]),
}
CHAIN = ("gfx90a:xnack+", "gfx90a", "base")


def _member_name(source: str) -> str:
    return source.split("_", 1)[1].replace(".c", ".o")


@pytest.fixture(scope="module")
def layers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Per-level archives (ar rcsD), user.o, and the super-archive chain.sa built by the CLI."""
    clang = require_tool("clang-19")
    ar = require_tool("ar")
    out = tmp_path_factory.mktemp("layers")
    flags = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-O2", "-c", f"-I{LAYERS}"]
    built: dict[str, Path] = {}
    for i, (target, (cpu, sources)) in enumerate(LEVELS.items(), 1):
        d = out / f"level{i}"
        d.mkdir()
        names = []
        for src in sources:
            name = _member_name(src)
            run_tool([clang, *flags, f"-mcpu={cpu}", "-o", d / name, LAYERS / src], d)
            names.append(name)
        lib = out / f"{i}-{target.replace(':', '_')}.a"
        run_tool([ar, "rcsD", lib, *names], d)
        built[target] = lib
    run_tool([clang, *flags, "-mcpu=gfx90a", "-o", out / "user.o", LAYERS / "user.c"], out)
    built["user"] = out / "user.o"
    args = ["ar", "create", "-o", str(out / "chain.sa")]
    for target in LEVELS:
        args += ["--target", f"{target}={built[target]}"]
    args += ["--chain", "gfx90a:xnack+=gfx90a:xnack+:gfx90a:base", "--chain", "gfx90a=gfx90a:base"]
    assert cli(*args)[0] == 0
    built["sa"] = out / "chain.sa"
    built["dir"] = out
    return built


_WHY = re.compile(r"^(?P<ref>[^\t]+)\t(?P<ext>[^\t]+)\t(?P<sym>[^\t]+)$")
_MEMBER = re.compile(r"^(?:.*/)?(?P<archive>[^/()]+)\((?P<member>[^()]+)\)$")


def _lld_extracts(lld: str, user: Path, archives: list[Path], cwd: Path) -> set[tuple[str, str, str, str]]:
    """lld's --why-extract as {(archive file, member, symbol, referrer)}, referrer 'user.o' or 'file(member)'."""
    proc = run_tool([lld, "-shared", "-o", cwd / "why.so", user, *archives, "--why-extract=-"], cwd)
    out: set[tuple[str, str, str, str]] = set()
    for line in proc.stdout.splitlines()[1:]:
        m = _WHY.match(line)
        assert m, line
        ext = _MEMBER.match(m["ext"])
        assert ext, line
        ref = _MEMBER.match(m["ref"])
        referrer = f"{ref['archive']}({ref['member']})" if ref else Path(m["ref"]).name
        out.add((ext["archive"], ext["member"], m["sym"], referrer))
    return out


def _devbin_pulls(res: sa.SuperArchive | object, files: dict[str, str]) -> set[tuple[str, str, str, str]]:
    """devbin's pulls in lld's terms: level -> its archive file name, 'level:member' -> 'file(member)'."""
    out: set[tuple[str, str, str, str]] = set()
    for p in res.pulled:  # type: ignore[attr-defined]
        if p.needed_by == "user.o":
            referrer = "user.o"
        else:
            level, member = p.needed_by[:-1].split("(", 1)
            referrer = f"{files[level]}({member})"
        out.add((files[p.definition.level], p.definition.member, p.symbol, referrer))
    return out


# --------------------------------------------------------------------------- default chains


@pytest.mark.parametrize(("target", "targets", "expect"), [
    ("gfx1030", ["gfx1030", "gfx10-3-generic", "gfx90a", "generic"], ("gfx1030", "gfx10-3-generic", "generic")),
    ("gfx906:xnack+", ["gfx906:xnack+", "gfx906:xnack-", "gfx9-generic", "gfx906", "generic"],
     ("gfx906:xnack+", "gfx906", "gfx9-generic", "generic")),
    ("gfx906", ["gfx906", "gfx906:xnack+", "gfx9-generic"], ("gfx906", "gfx9-generic")),  # xnack+ is not safe on 'any'
    ("gfx90a", ["gfx90a", "gfx9-generic", "gfx9-4-generic"], ("gfx90a",)),  # gfx90a is in neither family
    ("gfx942", ["gfx942", "gfx9-generic", "gfx9-4-generic"], ("gfx942", "gfx9-4-generic")),
    ("gfx9-generic", ["gfx9-generic", "gfx90a", "generic"], ("gfx9-generic", "generic")),
    ("sm_86", ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90a", "compute_75", "compute_80", "compute_90", "generic"],
     ("sm_86", "sm_80", "compute_80", "compute_75", "generic")),
    ("sm_90a", ["sm_90", "sm_90a", "compute_90"], ("sm_90a", "sm_90", "compute_90")),
    ("sm_90", ["sm_90", "sm_90a", "sm_80", "compute_90"], ("sm_90", "compute_90")),
    ("sm_100f", ["sm_100f", "sm_100", "sm_103", "compute_100"], ("sm_100f", "sm_100", "compute_100")),
    ("compute_90", ["compute_90", "compute_80", "sm_90", "compute_100"], ("compute_90", "compute_80")),
    ("mycpu", ["mycpu", "other", "generic"], ("mycpu", "generic")),
    ("generic", ["gfx90a", "generic"], ("generic",)),
])
def test_default_chains_follow_the_vendors_rules(target: str, targets: list[str], expect: tuple[str, ...]) -> None:
    assert default_chain(target, targets) == expect


def test_declared_chain_is_checked() -> None:
    assert effective_chain("gfx1030", ["gfx10-3-generic", "generic"], ["gfx1030", "gfx10-3-generic", "generic"]) \
        == ("gfx1030", "gfx10-3-generic", "generic")
    with pytest.raises(UsageError, match="names 'generc', which is not a target"):
        effective_chain("gfx1030", ["generc"], ["gfx1030", "generic"])


def test_create_refuses_a_chain_naming_a_missing_target(layers: dict[str, Path], tmp_path: Path) -> None:
    code, _ = cli("ar", "create", "-o", str(tmp_path / "x.sa"), "--target", f"base={layers['base']}",
                  "--chain", "base=base:gfx90a")
    assert code == 1
    assert not (tmp_path / "x.sa").exists()


# --------------------------------------------------------------------------- resolution vs ld.lld


def test_resolution_matches_lld_with_the_levels_in_order(layers: dict[str, Path], tmp_path: Path) -> None:
    lld = require_tool("ld.lld-19")
    lib = sa.open(layers["sa"].read_bytes())
    assert lib.chain("gfx90a:xnack+") == CHAIN
    files = {t: layers[t].name for t in LEVELS}
    oracle = _lld_extracts(lld, layers["user"], [layers[t] for t in CHAIN], tmp_path)
    res = lib.resolve("gfx90a:xnack+", objects=[RootObject.from_elf("user.o", layers["user"].read_bytes())])
    assert _devbin_pulls(res, files) == oracle
    # what the sources say (tests/sources/layers/README.md)
    pulled = {(p.definition.level, p.definition.member, p.symbol) for p in res.pulled}
    assert pulled == {("base", "cos16.o", "cos16"), ("gfx90a", "cos8.o", "cos8"), ("gfx90a:xnack+", "cos1.o", "cos1"),
                      ("base", "pack.o", "vadd"), ("base", "poly.o", "poly")}
    assert res.undefined == [] and res.duplicates == []
    weak = [lk for lk in res.lookups if lk.symbol == "opt_hook"]
    assert [lk.outcome for lk in weak] == ["weak"]


def test_per_level_view_links_like_the_original_libraries(layers: dict[str, Path], tmp_path: Path) -> None:
    lld = require_tool("ld.lld-19")
    view = tmp_path / "view"
    code, text = cli("ar", "view", str(layers["sa"]), "--target", "gfx90a:xnack+", "-o", str(view), "--json")
    assert code == 0
    facts = json.loads(text)
    archives = [Path(p) for p in facts["archives"]]
    assert [p.name for p in archives] == ["1-gfx90a_xnack+.a", "2-gfx90a.a", "3-base.a"]
    run_tool([lld, "-shared", "-o", tmp_path / "orig.so", layers["user"], *[layers[t] for t in CHAIN]], tmp_path)
    run_tool([lld, "-shared", "-o", tmp_path / "view.so", layers["user"], *archives], tmp_path)
    assert (tmp_path / "view.so").read_bytes() == (tmp_path / "orig.so").read_bytes()
    # members of each level's archive are byte-identical to the inputs, names included
    for t, p in zip(CHAIN, archives, strict=True):
        run_tool(["ar", "x", p], p.parent)
        for src in LEVELS[t][1]:
            name = _member_name(src)
            idx = list(LEVELS).index(t) + 1
            assert (p.parent / name).read_bytes() == (layers["dir"] / f"level{idx}" / name).read_bytes()


def test_single_view_extracts_the_same_members(layers: dict[str, Path], tmp_path: Path) -> None:
    lld = require_tool("ld.lld-19")
    single = tmp_path / "single.a"
    assert cli("ar", "view", str(layers["sa"]), "--target", "gfx90a:xnack+", "--single", "-o", str(single))[0] == 0
    lib = sa.open(layers["sa"].read_bytes())
    res = lib.resolve("gfx90a:xnack+", objects=[RootObject.from_elf("user.o", layers["user"].read_bytes())])
    oracle = _lld_extracts(lld, layers["user"], [single], tmp_path)
    ar_name = {(r.ordinal): r.name for r in lib.records()}
    assert {(m, s) for _, m, s, _ in oracle} == {(ar_name[p.definition.ordinal], p.symbol) for p in res.pulled}


def test_lower_target_uses_its_own_chain(layers: dict[str, Path], tmp_path: Path) -> None:
    """For target gfx90a (chain gfx90a -> base) the base cos1 is taken: the top level is not in its chain."""
    lld = require_tool("ld.lld-19")
    lib = sa.open(layers["sa"].read_bytes())
    files = {t: layers[t].name for t in LEVELS}
    res = lib.resolve("gfx90a", objects=[RootObject.from_elf("user.o", layers["user"].read_bytes())])
    assert ("base", "cos1.o", "cos1") in {(p.definition.level, p.definition.member, p.symbol) for p in res.pulled}
    assert _devbin_pulls(res, files) == _lld_extracts(lld, layers["user"], [layers["gfx90a"], layers["base"]],
                                                       tmp_path)


def test_extracted_target_links_like_its_input(layers: dict[str, Path], tmp_path: Path) -> None:
    lld = require_tool("ld.lld-19")
    out = tmp_path / "base.a"
    assert cli("ar", "extract", str(layers["sa"]), "--target", "base", "-o", str(out))[0] == 0
    run_tool([lld, "-shared", "-o", tmp_path / "a.so", layers["user"], layers["base"]], tmp_path)
    run_tool([lld, "-shared", "-o", tmp_path / "b.so", layers["user"], out], tmp_path)
    assert (tmp_path / "a.so").read_bytes() == (tmp_path / "b.so").read_bytes()


# --------------------------------------------------------------------------- CLI


def test_resolve_explain_shows_the_walk(layers: dict[str, Path]) -> None:
    code, text = cli("ar", "resolve", str(layers["sa"]), "--target", "gfx90a:xnack+", "--explain", "cos16")
    assert code == 0, text
    assert "chain: gfx90a:xnack+ -> gfx90a -> base" in text
    lines = text.splitlines()
    at = lines.index("explain cos16:")
    walk = "\n".join(lines[at:])
    assert "cos16 (needed by <command line>) -> pulled base(cos16.o)" in walk
    assert "walk: gfx90a:xnack+: -; gfx90a: -; base: cos16.o [taken]" in walk
    assert "cos8 (needed by base(cos16.o)) -> pulled gfx90a(cos8.o)" in walk
    assert "walk: gfx90a:xnack+: -; gfx90a: cos8.o [taken]; base: cos8.o" in walk
    assert "cos1 (needed by gfx90a(cos8.o)) -> pulled gfx90a:xnack+(cos1.o)" in walk
    code, text = cli("ar", "resolve", str(layers["sa"]), "--target", "gfx90a:xnack+", "--explain", "cos16", "--json")
    facts = json.loads(text)
    rows = facts["explain"]["cos16"]
    assert [(r["depth"], r["symbol"], r["taken"]["level"]) for r in rows] == [
        (0, "cos16", "base"), (1, "cos8", "gfx90a"), (2, "cos1", "gfx90a:xnack+")]


def test_resolve_reports_undefined_and_duplicates(layers: dict[str, Path], tmp_path: Path) -> None:
    code, text = cli("ar", "resolve", str(layers["sa"]), "--target", "gfx90a:xnack+", "-u", "nosuch", "--json")
    assert code == 1
    assert json.loads(text)["undefined"] == [{"symbol": "nosuch", "referenced_by": ["<command line>"]}]
    lib = sa.open(layers["sa"].read_bytes())
    # the top vmul and base pack both loaded: the second strong vmul is a duplicate, as in a linker
    res = lib.resolve("gfx90a:xnack+", ["vmul", "vadd"])
    assert [(s, a, b) for s, a, b in res.duplicates] == [("vmul", "gfx90a:xnack+(vmul.o)", "base(pack.o)")]


def test_symbols_through_the_chain_and_lookup(layers: dict[str, Path]) -> None:
    code, text = cli("ar", "symbols", str(layers["sa"]), "--target", "gfx90a:xnack+", "--chain", "--json")
    assert code == 0
    rows = {r["name"]: r["level"] for r in json.loads(text)["symbols"]}
    assert rows["cos1"] == "gfx90a:xnack+" and rows["cos8"] == "gfx90a" and rows["cos16"] == "base"
    lib = sa.open(layers["sa"].read_bytes(), verify="lazy")
    found = lib.lookup("gfx90a", "cos1")
    assert found is not None and found[0] == "base" and found[1].member == "cos1.o"
    assert lib.lookup("base", "opt_hook") is None
    code, text = cli("ar", "list", str(layers["sa"]))
    assert "chain: gfx90a:xnack+ -> gfx90a -> base" in text


def test_shipped_layer_samples_match_their_recipe(layers: dict[str, Path]) -> None:
    """src/devbin/samples/sample_layer_*.a (tests/fixtures/make-fixtures.sh) hold what clang-19 builds here."""
    from devbin.formats.ar import ArchiveFile

    shipped = Path(__file__).parents[1] / "src" / "devbin" / "samples"
    for i, level in enumerate(("top", "mid", "base"), 1):
        ar = ArchiveFile((shipped / f"sample_layer_{level}.a").read_bytes())
        built = {_member_name(src): (layers["dir"] / f"level{i}" / _member_name(src)).read_bytes()
                 for src in list(LEVELS.values())[i - 1][1]}
        assert {m.name: bytes(m.data) for m in ar.files} == built
    assert (shipped / "sample_layer_user.o").read_bytes() == layers["user"].read_bytes()
