"""Dead-code elimination by the call graph (issue 7, part 3).

Roots: every kernel, or the kernels named (``--kernels k1,k2``, like ``nvlink
-kernels-used``), plus symbols to keep (``--keep``).  From them:

* a function stays if a kept function calls it directly;
* an **address-taken** function stays only if some *reachable* indirect call site has a
  prototype that matches its own (the one rule, :mod:`devbin.model.indirect`: equal, or
  either unknown), the rule nvlink applies: a table of function pointers does not keep a function that no
  live call site could call through it;
* a data object stays if a kept function or kept data object refers to it.

``keep_address_taken`` keeps every address-taken function instead (nvlink's rule: its
``-kernels-used`` never drops one, whatever the prototypes; verified with nvlink 13.0,
:mod:`devbin.targets.nvidia.link_nvlink`), for a result equal to nvlink's.

An indirect call site whose prototype matches no address-taken function at all is a
warning naming the call site and its prototype (``Prototype.__str__``): a call that can
reach nothing.  The result lists what was removed and the bytes saved per function (``st_size``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from devbin.errors import UsageError
from devbin.link.graph import ProgramGraph, ProgramNode
from devbin.model.reach import Closure

__all__ = ["DeadCode", "eliminate"]


@dataclass
class DeadCode:
    """What the pass decided: kept and removed node keys (sorted), why each was kept, warnings."""

    roots: list[str]
    kept: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)  # kept key -> "root" | "called by f" | ...
    warnings: list[str] = field(default_factory=list)
    removed_bytes: int = 0

    def removed_nodes(self, graph: ProgramGraph) -> list[ProgramNode]:
        return [graph.nodes[k] for k in self.removed]


def eliminate(graph: ProgramGraph, *, kernels: Iterable[str] | None = None, keep: Iterable[str] = (),
              keep_address_taken: bool = False) -> DeadCode:
    """Mark what ``graph``'s roots reach (see the module docstring)."""
    names = {n.name: k for k, n in graph.nodes.items()}
    if kernels is None:
        roots = sorted(n.key for n in graph.kernels())
    else:
        roots = []
        for k in kernels:
            key = k if k in graph.nodes else names.get(k)
            if key is None or not graph.nodes[key].is_kernel:
                known = ", ".join(sorted(n.name for n in graph.kernels())) or "none"
                raise UsageError(f"--kernels: {k!r} is not a kernel of this link (kernels: {known})", fmt="link")
            roots.append(key)
    for s in keep:
        key = s if s in graph.nodes else names.get(s)
        if key is None:
            raise UsageError(f"--keep: no function or variable {s!r} in this link", fmt="link")
        roots.append(key)
    result = DeadCode(roots=list(dict.fromkeys(roots)))

    def expand(key: str) -> None:
        node = graph.nodes[key]
        for callee in node.calls:
            walk.reach(callee, f"called by {node.name}")
        for d in node.data:
            walk.reach(d, f"referred to by {node.name}")
        for proto in node.sites:
            walk.site(proto, key)

    walk: Closure[str] = Closure(expand)
    for r in result.roots:
        walk.reach(r, "root")
    for fn, protos in graph.taken.items():
        for proto in protos:
            walk.taken(fn, proto)
    if keep_address_taken:
        for fn in sorted(graph.taken):
            walk.reach(fn, "address taken (kept: --keep-address-taken, as nvlink keeps them all)")
    walk.run(lambda key: graph.nodes[key].name)
    why = result.why = walk.why
    for key in sorted(why):
        for i, proto in enumerate(graph.nodes[key].sites):
            if not graph.matching(proto):
                result.warnings.append(f"indirect call site {i} in {graph.nodes[key].name} "
                                       f"({proto}) matches no address-taken function")
    result.kept = sorted(why)
    result.removed = sorted(k for k in graph.nodes if k not in why)
    result.removed_bytes = sum(graph.nodes[k].size for k in result.removed)
    return result
