"""A layered drawing of a directed graph (the method of Sugiyama, Tagawa and Toda, "Methods for Visual
Understanding of Hierarchical System Structures", IEEE Trans. SMC 11(2), 1981).

1. **Cycles**: a depth-first search from the nodes in their given order marks every edge that closes
   a cycle (to a node on the search's stack) as a *back edge*; self-loops are kept apart.  Without
   them the graph is acyclic.
2. **Layers**: longest path from the sources: a node's layer is one more than the largest layer of
   the nodes calling it (back edges not counted), so every other edge goes from layer i to j > i.
3. **Long edges** get one dummy node per layer they cross, so that each edge segment joins
   neighbouring layers (up to a budget of dummy nodes, the shortest edges first; the others are
   drawn straight, which keeps a dense graph's time and width bounded).
4. **Order**: barycentre heuristic: sweeps down and up the layers, each node moved to the mean
   position of its neighbours in the layer before; ties keep the previous order.  A fixed number of
   sweeps, the order with the fewest crossings kept.
5. **Coordinates**: nodes of a layer side by side (their widths given), each layer centred; edges are
   polylines through their dummy nodes.

Everything is a pure function of the nodes (in order) and edges (in order): the same graph gives
the same layout.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["MAX_DUMMIES", "GraphLayout", "layered_layout"]

_SWEEPS = 8
#: Dummy nodes at most (long edges beyond it are drawn straight): bounds the time and the drawing's width.
MAX_DUMMIES = 1500


@dataclass(frozen=True, slots=True)
class GraphLayout:
    """Where each node goes, and each edge's route.

    ``layer`` and ``order`` (position within the layer) of each real node; ``x``/``y`` its centre;
    ``edges``: (source, target, points, back) for each distinct edge in the order given (self-loops
    excepted), ``points`` the polyline from source to target through its dummy nodes, ``back``
    whether it is a back edge (drawn against the layering); ``loops``: nodes that call themselves;
    ``width``/``height``: the drawing's size.
    """
    layer: Mapping[str, int]
    order: Mapping[str, int]
    x: Mapping[str, float]
    y: Mapping[str, float]
    edges: tuple[tuple[str, str, tuple[tuple[float, float], ...], bool], ...]
    loops: tuple[str, ...]
    width: float
    height: float


def _back_edges(nodes: Sequence[str], succ: Mapping[str, list[str]]) -> set[tuple[str, str]]:
    """Edges to a node on the DFS stack (iterative: no recursion limit on deep call chains)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    back: set[tuple[str, str]] = set()
    for start in nodes:
        if start in state:
            continue
        state[start] = 1
        stack: list[tuple[str, int]] = [(start, 0)]
        while stack:
            v, i = stack[-1]
            out = succ.get(v, [])
            if i < len(out):
                stack[-1] = (v, i + 1)
                w = out[i]
                s = state.get(w)
                if s == 1:
                    back.add((v, w))
                elif s is None:
                    state[w] = 1
                    stack.append((w, 0))
            else:
                state[v] = 2
                stack.pop()
    return back


def _crossings(layers: list[list[str]], down: Mapping[str, list[str]]) -> int:
    total = 0
    for a, b in itertools.pairwise(layers):
        pos = {v: i for i, v in enumerate(b)}
        segs = sorted((i, pos[w]) for i, v in enumerate(a) for w in down.get(v, []) if w in pos)
        below: list[int] = []  # targets of the segments seen so far, sorted
        for _, p in segs:  # a segment crosses each earlier one whose target lies right of its own
            total += len(below) - bisect.bisect_right(below, p)
            bisect.insort(below, p)
    return total


def layered_layout(nodes: Sequence[str], edges: Sequence[tuple[str, str]], *,
                   widths: Mapping[str, float] | None = None, node_height: float = 40.0,
                   gap_x: float = 24.0, gap_y: float = 56.0, dummy_width: float = 8.0,
                   margin: float = 16.0, max_dummies: int = MAX_DUMMIES) -> GraphLayout:
    """Lay out the graph ``nodes`` (unique names, in order) and ``edges`` (pairs of those names).

    ``widths`` gives each node's box width (default 120).  Duplicate edges are drawn once.  At most
    ``max_dummies`` dummy nodes are made, the shortest long edges first; the long edges left over
    are drawn as straight lines from source to target (two points).
    """
    names = list(dict.fromkeys(nodes))
    known = set(names)
    seen: dict[tuple[str, str], None] = {}
    for a, b in edges:
        if a in known and b in known:
            seen.setdefault((a, b), None)
    all_edges = list(seen)
    loops = tuple(dict.fromkeys(a for a, b in all_edges if a == b))
    plain = [(a, b) for a, b in all_edges if a != b]
    succ: dict[str, list[str]] = {}
    for a, b in plain:
        succ.setdefault(a, []).append(b)
    back = _back_edges(names, succ)
    # the acyclic graph: back edges turned round
    dag = [(b, a) if (a, b) in back else (a, b) for a, b in plain]
    preds: dict[str, list[str]] = {}
    dsucc: dict[str, list[str]] = {}
    for a, b in dict.fromkeys(dag):
        preds.setdefault(b, []).append(a)
        dsucc.setdefault(a, []).append(b)
    # longest path layering in topological order (Kahn; the queue in the nodes' order)
    indeg = {v: len(preds.get(v, [])) for v in names}
    layer: dict[str, int] = {}
    ready = [v for v in names if indeg[v] == 0]
    k = 0
    while k < len(ready):
        v = ready[k]
        k += 1
        layer[v] = max((layer[u] + 1 for u in preds.get(v, [])), default=0)
        for w in dsucc.get(v, []):
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    assert len(layer) == len(names), "back edges left a cycle"
    # dummy nodes along edges longer than one layer, while the budget lasts; the shorter edges first
    down: dict[str, list[str]] = {}
    up: dict[str, list[str]] = {}
    chains: dict[tuple[str, str], list[str]] = {}
    all_layer = dict(layer)
    dag_edges = list(dict.fromkeys(dag))
    budget = max_dummies
    routed: set[tuple[str, str]] = set()
    for a, b in sorted(dag_edges, key=lambda e: layer[e[1]] - layer[e[0]]):  # stable: ties in edge order
        span = layer[b] - layer[a] - 1
        if span <= budget:
            budget -= span
            routed.add((a, b))
    for a, b in dag_edges:
        chain = [a]
        if (a, b) in routed:
            for level in range(layer[a] + 1, layer[b]):
                d = f"\0{a}\0{b}\0{level}"
                all_layer[d] = level
                chain.append(d)
        chain.append(b)
        chains[(a, b)] = chain
        if (a, b) in routed:
            for s, t in itertools.pairwise(chain):
                down.setdefault(s, []).append(t)
                up.setdefault(t, []).append(s)
    depth = max(all_layer.values(), default=-1) + 1
    layers: list[list[str]] = [[] for _ in range(depth)]
    for v in all_layer:  # real nodes in given order, then dummies in edge order
        layers[all_layer[v]].append(v)
    # barycentre sweeps
    best = [list(lv) for lv in layers]
    best_cross = _crossings(best, down)
    for sweep in range(_SWEEPS):
        going_down = sweep % 2 == 0
        rng = range(1, depth) if going_down else range(depth - 2, -1, -1)
        for i in rng:
            ref = layers[i - 1] if going_down else layers[i + 1]
            pos = {v: p for p, v in enumerate(ref)}
            nbrs = up if going_down else down
            keyed = []
            for p, v in enumerate(layers[i]):
                ps = [pos[u] for u in nbrs.get(v, []) if u in pos]
                keyed.append((sum(ps) / len(ps) if ps else float(p), p, v))
            layers[i] = [v for _, _, v in sorted(keyed)]
        cross = _crossings(layers, down)
        if cross < best_cross:
            best, best_cross = [list(lv) for lv in layers], cross
    layers = best
    # coordinates
    wmap = dict(widths or {})

    def width(v: str) -> float:
        return dummy_width if v not in known else float(wmap.get(v, 120.0))

    row_w = [sum(width(v) for v in lv) + gap_x * max(0, len(lv) - 1) for lv in layers]
    total_w = max(row_w, default=0.0) + 2 * margin
    xs: dict[str, float] = {}
    ys: dict[str, float] = {}
    order: dict[str, int] = {}
    for i, lv in enumerate(layers):
        cx = margin + (total_w - 2 * margin - row_w[i]) / 2
        for p, v in enumerate(lv):
            vw = width(v)
            xs[v] = cx + vw / 2
            ys[v] = margin + i * (node_height + gap_y) + node_height / 2
            order[v] = p
            cx += vw + gap_x
    routes = []
    for a, b in all_edges:
        if a == b:
            continue
        is_back = (a, b) in back
        chain = chains[(b, a)] if is_back else chains[(a, b)]
        pts = tuple((round(xs[v], 2), round(ys[v], 2)) for v in chain)
        routes.append((a, b, tuple(reversed(pts)) if is_back else pts, is_back))
    height = 2 * margin + depth * node_height + max(0, depth - 1) * gap_y
    return GraphLayout(layer={v: layer[v] for v in names}, order={v: order[v] for v in names},
                       x={v: xs[v] for v in names}, y={v: ys[v] for v in names}, edges=tuple(routes),
                       loops=loops, width=round(total_w, 2), height=round(height, 2))
