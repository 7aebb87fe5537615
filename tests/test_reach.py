"""The one closure walk (devbin.model.reach), the archive resolver (devbin.analysis.resolver) and
the resource propagation (devbin.analysis.propagation) on small graphs, apart from their users
(link DCE, lazy loading, link resolution, the super-archive, link resources and AMDGPU totals)."""

from __future__ import annotations

from devbin.analysis.propagation import propagate, sccs
from devbin.analysis.resolver import LazyResolver
from devbin.model import UNKNOWN_PROTOTYPE, ParamType, Prototype, TypeKind
from devbin.model.reach import Closure, reachable, reachable_preorder

INT = ParamType(TypeKind.INT, 4, 4)
PTR = ParamType(TypeKind.POINTER, 8, 8)
P_II = Prototype(INT, (INT,))
P_VP = Prototype(params=(PTR,))


def _walk(calls: dict[str, list[str]], sites: dict[str, list[Prototype]], *,
          preorder: bool = False) -> Closure[str]:
    def expand(key: str) -> None:
        for c in calls.get(key, ()):
            walk.reach(c, f"called by {key}")
        for p in sites.get(key, ()):
            walk.site(p, key)

    walk: Closure[str] = Closure(expand, preorder=preorder)
    return walk


def test_address_taken_functions_are_reached_only_through_a_matching_reached_site() -> None:
    walk = _walk({"k": ["a"], "dead": ["x"]}, {"a": [P_II], "dead": [P_VP]})
    walk.taken("f_ii", P_II)
    walk.taken("f_vp", P_VP)  # only the unreached "dead" has a P_VP site
    walk.taken("f_any", UNKNOWN_PROTOTYPE)  # unknown matches any site
    walk.reach("k", "root")
    assert set(walk.run(str)) == {"k", "a", "f_ii", "f_any"}
    assert walk.why["a"] == "called by k"
    assert walk.why["f_ii"] == "address taken, matches an indirect call in a"


def test_a_persistent_walk_takes_new_roots_and_undoes_a_failed_run() -> None:
    walk = _walk({"k1": ["a"], "k2": ["b"], "b": ["c"]}, {"c": [P_II]})
    walk.taken("f", P_II)
    walk.reach("k1")
    assert walk.run() == ["k1", "a"]
    mark = walk.mark()
    walk.reach("k2")
    assert walk.run() == ["k2", "b", "c", "f"]
    walk.release(mark)
    assert set(walk.why) == {"k1", "a"} and not walk.sites
    walk.reach("k2")
    assert set(walk.run()) == {"k2", "b", "c", "f"}  # the address-taken function is pending again


def test_preorder_and_marking_orders() -> None:
    succ = {"r": ["a", "b"], "a": ["c"], "b": ["c"]}
    assert reachable_preorder("r", succ) == ["r", "a", "c", "b"]
    assert reachable(["r"], lambda n: succ.get(n, [])) == ["r", "a", "b", "c"]
    chain = {f"f{i}": [f"f{i + 1}"] for i in range(20000)}
    assert len(reachable_preorder("f0", chain)) == 20001  # iterative


def _resolver(log: list[tuple[str, str, str]], archive: dict[str, list[tuple[str, str]]]) -> LazyResolver[str, int]:
    """``archive``: member -> its symbols as (name, kind); pulling a member loads them."""
    def load(member: str, symbol: str, needed_by: str) -> None:
        log.append((member, symbol, needed_by))
        for name, kind in archive[member]:
            if kind == "undefined":
                r.reference(name, member)
            else:
                r.define(name, member, 0, kind)  # type: ignore[arg-type]

    r: LazyResolver[str, int] = LazyResolver(load)
    return r


def test_resolver_lazy_members_first_offer_and_strength() -> None:
    log: list[tuple[str, str, str]] = []
    archive = {"m1.o": [("f", "defined"), ("g", "undefined")], "m2.o": [("g", "weak")], "m3.o": [("g", "defined")],
               "m4.o": [("h", "defined")]}
    r = _resolver(log, archive)
    r.reference("f", "main.o")
    r.reference("h", "main.o", weak=True)  # a weak reference pulls nothing
    r.define("c", "main.o", 0, "common", 4)
    r.define("c", "other.o", 0, "common", 8)  # commons: the largest
    r.define("c", "third.o", 0, "weak")  # weak loses to common
    r.offer((m, [s for s, k in syms if k != "undefined"]) for m, syms in archive.items())
    assert log == [("m1.o", "f", "main.o"), ("m2.o", "g", "m1.o")]  # the first offer of g wins
    assert r.defined["g"].who == "m2.o" and r.defined["g"].kind == "weak"
    assert r.defined["c"].who == "other.o"
    r.reference("g", "late.o")  # defined: nothing pulled
    assert "m3.o" not in r.pulled and "m4.o" not in r.pulled and r.lazy == {"h": "m4.o"}
    assert r.undefined["h"].weak
    r.define("f", "dup.o", 0)
    assert r.duplicates == [("f", "m1.o", "dup.o")]


def test_propagation_stack_cycles_and_maxima() -> None:
    calls = {"k": ["a", "r1"], "a": ["b"], "b": [], "r1": ["r2"], "r2": ["r1"]}
    frames = {"k": 16, "a": 8, "b": 32, "r1": 4, "r2": 2}
    regs = {"k": 10, "a": None, "b": 40, "r1": 5, "r2": 6}
    assert [sorted(c) for c in sccs(list(calls), calls)][-1] == ["k"]  # callees first
    p = propagate(list(calls), calls, frame=frames.__getitem__, reported=lambda f: 100 if f == "a" else None,
                  values=lambda f: {"regs": regs[f]}, names=["regs"])
    k, a, r1 = p.of("k"), p.of("a"), p.of("r1")
    assert p.stack[a] == 100  # reported wins over frame + deepest (8 + 32)
    assert p.stack[r1] == 4 + 2  # one trip around the cycle
    assert p.stack[k] == 16 + 100
    assert p.maxima[k] == {"regs": 40} and p.maxima[a] == {"regs": 40}
    assert p.recurses[k] and p.cyclic[r1] and not p.cyclic[k] and not p.recurses[a]
