"""The one indirect-call rule (issue 25, item 5): every door that asks which functions an indirect
call may reach gives the answer of :func:`devbin.model.indirect.potential_callees`.

The doors: ``CallGraph.potential_callees``/``callees``/``reachable`` (the closure walk), the
call-graph view (``devbin callgraph``'s nodes) and the link's program graph (``ProgramGraph.matching``).
nvlink's own answer is compared in tests/test_nvidia_cubin.py (``--dump-callgraph``).
"""

from __future__ import annotations

import pytest

from devbin.analysis.callgraph_view import nodes
from devbin.link.graph import ProgramGraph
from devbin.model import (
    UNKNOWN_PROTOTYPE,
    CallConv,
    CallGraph,
    CodeObject,
    Function,
    FunctionKind,
    ParamType,
    Prototype,
    TypeKind,
)
from devbin.model.indirect import may_call, potential_callees

I32 = ParamType(TypeKind.INT, 4, 4)
F32 = ParamType(TypeKind.FLOAT, 4, 4)
P_INT = Prototype(I32, (I32,), CallConv.DEFAULT)
P_FLOAT = Prototype(F32, (F32,), CallConv.DEFAULT)
P_NONE = Prototype(I32, (I32, I32), CallConv.DEFAULT)  # taken by nobody

TAKEN = (("f_int", P_INT), ("g_unknown", UNKNOWN_PROTOTYPE), ("h_float", P_FLOAT), ("multi", P_INT),
         ("multi", P_FLOAT))
SITES = {"call_int": P_INT, "call_float": P_FLOAT, "call_unknown": UNKNOWN_PROTOTYPE, "call_none": P_NONE}
EXPECTED = {  # equal prototypes match, and an unknown one on either side matches any
    "call_int": ["f_int", "g_unknown", "multi"],
    "call_float": ["g_unknown", "h_float", "multi"],
    "call_unknown": ["f_int", "g_unknown", "h_float", "multi"],
    "call_none": ["g_unknown"],
}

GRAPH = CallGraph(direct=(("k", "call_int"),), indirect_sites=tuple((c, p) for c, p in SITES.items()),
                  address_taken=TAKEN)
OBJ = CodeObject(functions=(Function("k", FunctionKind.KERNEL),
                            *(Function(n, FunctionKind.DEVICE) for n in sorted({*SITES, *(t for t, _ in TAKEN)}))),
                 callgraph=GRAPH)


def test_the_rule() -> None:
    assert may_call(P_INT, [P_INT]) and may_call(P_INT, [UNKNOWN_PROTOTYPE]) and may_call(UNKNOWN_PROTOTYPE, [P_FLOAT])
    assert not may_call(P_INT, [P_FLOAT]) and not may_call(P_INT, [])
    assert may_call(P_FLOAT, [P_INT, P_FLOAT])
    # each function once, in the order of its first matching pair
    assert potential_callees(P_FLOAT, [("b", P_FLOAT), ("a", P_INT), ("a", P_FLOAT), ("b", UNKNOWN_PROTOTYPE)]) \
        == ["b", "a"]


@pytest.mark.parametrize("caller", sorted(SITES))
def test_every_door_agrees(caller: str) -> None:
    want = EXPECTED[caller]
    site = SITES[caller]
    # the model
    assert list(GRAPH.potential_callees(site)) == want
    direct = {b for a, b in GRAPH.direct if a == caller}
    assert set(GRAPH.callees(caller)) - direct == set(want)
    assert set(GRAPH.callees(caller, indirect=False)) == direct
    # the closure walk (what link DCE and the lazy loader use): the targets call nothing
    assert GRAPH.reachable([caller]) == {caller, *want}
    assert GRAPH.reachable([caller], indirect=False) == {caller}
    # the call-graph view (devbin callgraph: text, JSON, DOT): reverse name order
    view = {n.name: n.calls for n in nodes(OBJ)}
    assert list(view[caller]) == [*sorted(direct), *reversed(want)]
    # the link's program graph (taken: function -> every prototype its address is taken with)
    g = ProgramGraph()
    for fn, p in TAKEN:
        g.taken.setdefault(fn, []).append(p)
    assert sorted(g.matching(site)) == want
