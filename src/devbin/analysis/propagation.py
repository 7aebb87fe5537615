"""The one resource propagation through a call graph, for both vendors' links.

:func:`propagate` runs once over the strongly connected components of a call graph, callees
first (Tarjan, iterative), and gives every component:

* its **cumulative stack**: ``max(reported, own frame + the deepest callee component's
  cumulative stack)`` over its functions, where ``reported`` is what a compiler already says
  for the function with its callees (None: nothing); a cycle (recursion) adds one trip around
  it: the sum of its frames but the largest, which the formula already counts;
* the **maxima** of per-function values (registers ...), over the component and everything
  below it, unknown values (None) left out (None when no function says);
* whether it **recurses**: it is a cycle, or reaches one.

The device linker's resources pass (:mod:`devbin.link.resources`, over the program graph) and
the AMDGPU kernel totals written into a linked code object (:mod:`devbin.targets.amdgpu.link_facts`)
both use it; each adds its own vendor's facts and reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Propagation", "propagate", "sccs"]

K = TypeVar("K", bound=Hashable)


def sccs(nodes: Sequence[K], succ: Mapping[K, Sequence[K]]) -> list[list[K]]:
    """Tarjan's strongly connected components, iteratively; emitted callees-first (reverse topological)."""
    index: dict[K, int] = {}
    low: dict[K, int] = {}
    on: set[K] = set()
    stack: list[K] = []
    out: list[list[K]] = []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work: list[tuple[K, int]] = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            children = succ.get(v, [])
            if i < len(children):
                work.append((v, i + 1))
                w = children[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                comp: list[K] = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out


@dataclass
class Propagation(Generic[K]):
    """Per component (callees first): members, the components directly below (sorted), whether it
    is a cycle, whether it recurses (a cycle or reaching one), cumulative stack and maxima."""

    comps: list[list[K]] = field(default_factory=list)
    comp_of: dict[K, int] = field(default_factory=dict)
    below: list[list[int]] = field(default_factory=list)
    cyclic: list[bool] = field(default_factory=list)
    recurses: list[bool] = field(default_factory=list)
    stack: list[int] = field(default_factory=list)
    maxima: list[dict[str, int | None]] = field(default_factory=list)

    def of(self, node: K) -> int:
        """The component of ``node``."""
        return self.comp_of[node]


def propagate(nodes: Sequence[K], callees: Mapping[K, Sequence[K]], *, frame: Callable[[K], int],
              reported: Callable[[K], int | None], values: Callable[[K], Mapping[str, int | None]],
              names: Sequence[str]) -> Propagation[K]:
    """One pass over the components of ``nodes`` with edges ``callees`` (see the module docstring).
    ``frame``: a function's own frame; ``reported``: its producer's stack with callees (None: none);
    ``values``: its values for each of ``names`` (None: unknown), maximised over what it reaches."""
    out: Propagation[K] = Propagation()
    out.comps = sccs(nodes, callees)
    out.comp_of = {f: i for i, comp in enumerate(out.comps) for f in comp}
    for comp in out.comps:
        members = set(comp)
        cyclic = len(comp) > 1 or any(f in callees.get(f, []) for f in comp)
        below = sorted({out.comp_of[c] for f in comp for c in callees.get(f, []) if c not in members})
        deeper = max((out.stack[j] for j in below), default=0)
        stack = 0
        for f in comp:
            stack = max(stack, reported(f) or 0, frame(f) + deeper)
        if cyclic:
            frames = [frame(f) for f in comp]
            stack += sum(frames) - max(frames, default=0)
        m: dict[str, int | None] = {}
        own = [values(f) for f in comp]
        for name in names:
            vals = [v for d in own if (v := d.get(name)) is not None]
            vals += [v for j in below if (v := out.maxima[j][name]) is not None]
            m[name] = max(vals) if vals else None
        out.below.append(below)
        out.cyclic.append(cyclic)
        out.recurses.append(cyclic or any(out.recurses[j] for j in below))
        out.stack.append(stack)
        out.maxima.append(m)
    return out
