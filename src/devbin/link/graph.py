"""The program's call graph across units, after symbol resolution.

Nodes are functions and data objects, keyed by name for global symbols (after resolution
one definition per name) and ``unit::name`` for local ones (two units may each have a
static ``f``).  A global defined in a unit that lost resolution (a weak definition beaten
by a strong one, the second of a duplicate) is not a node: its code is not used.

Edges, from each unit's model (:class:`devbin.model.CallGraph`) and its relocations:

* ``calls``: direct calls (the model's ``direct`` pairs, callees resolved across units; a
  "call" that resolves to a data object, which an AMDGPU object cannot tell from a call to
  an external function, becomes a data edge);
* ``data``: a function or data object refers to a data object (a relocation naming it);
  an AMDGPU kernel "refers to" its descriptor ``<kernel>.kd``, so the two stay together;
* ``sites``: the prototypes of a function's indirect call sites;
* ``taken``: address-taken functions and their prototypes (the model's
  ``address_taken``, plus any function a data object refers to, with an unknown prototype
  when the model gives none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devbin.link.backend import link_backend
from devbin.link.resolution import Resolution
from devbin.link.units import Unit
from devbin.model import Function, Prototype
from devbin.model.indirect import potential_callees
from devbin.model.prototype import UNKNOWN_PROTOTYPE

__all__ = ["ProgramNode", "ProgramGraph", "build_graph"]


@dataclass
class ProgramNode:
    """A function or data object of the program: its key, display name, unit and model facts."""

    key: str
    name: str
    unit: Unit
    is_function: bool
    size: int
    function: Function | None = None
    calls: list[str] = field(default_factory=list)
    data: list[str] = field(default_factory=list)
    sites: list[Prototype] = field(default_factory=list)

    @property
    def is_kernel(self) -> bool:
        return self.function is not None and self.function.is_kernel


@dataclass
class ProgramGraph:
    nodes: dict[str, ProgramNode] = field(default_factory=dict)
    taken: dict[str, list[Prototype]] = field(default_factory=dict)  # address-taken function -> prototypes
    unresolved_calls: list[tuple[str, str]] = field(default_factory=list)  # (caller key, callee name)
    _matching: dict[Prototype, list[str]] = field(default_factory=dict, init=False, repr=False, compare=False)

    def kernels(self) -> list[ProgramNode]:
        return [n for n in self.nodes.values() if n.is_kernel]

    def matching(self, site: Prototype) -> list[str]:
        """The address-taken functions an indirect call site of prototype ``site`` may reach (the one
        rule, :func:`devbin.model.indirect.potential_callees`), in :attr:`taken` order: one scan of
        :attr:`taken` per distinct prototype, not per call site (call once the graph is built: the
        answer is cached)."""
        hit = self._matching.get(site)
        if hit is None:
            hit = self._matching[site] = potential_callees(
                site, ((fn, p) for fn, protos in self.taken.items() for p in protos))
        return hit


def build_graph(res: Resolution) -> ProgramGraph:
    """The call graph of the units ``res`` loaded (see the module docstring)."""
    g = ProgramGraph()
    owners: dict[str, str] = {name: d.unit for name, d in res.definitions.items()}

    def key(u: Unit, name: str) -> str | None:
        if name in u.local_functions or (name in u.data_objects and name not in owners):
            return f"{u.name}::{name}"
        return name if name in owners else None

    for u in res.units:
        model = u.model
        funcs = {f.name: f for f in model.functions}
        for name in sorted(set(u.sizes)):
            k = key(u, name)
            if k is None or (k == name and owners.get(name) != u.name):
                continue
            # a function of the model is a function, whatever type its symbol claims (a corrupt or odd
            # STT_OBJECT for a kernel must not make the kernel a variable that the later passes skip)
            is_fn = name in funcs or name not in u.data_objects
            g.nodes[k] = ProgramNode(k, name, u, is_fn, u.sizes[name], funcs.get(name))
    for k, node in g.nodes.items():
        # a kernel's descriptor (AMDGPU <kernel>.kd) is what the loader looks up; it lives and dies with the kernel
        fn = None if node.is_function else link_backend(node.unit.vendor).descriptor_owner(node.name)
        if fn is not None:
            owner = key(node.unit, fn)
            if owner is not None and owner in g.nodes:
                g.nodes[owner].data.append(k)
    for u in res.units:
        model = u.model
        edges: set[tuple[str, str]] = set()  # a caller's calls all come from its own unit
        for caller, callee in model.callgraph.direct:
            ck, tk = key(u, caller), key(u, callee)
            if ck is None or ck not in g.nodes or g.nodes[ck].unit is not u:
                continue
            if tk is None or tk not in g.nodes:
                g.unresolved_calls.append((ck, callee))
                continue
            if not g.nodes[tk].is_function:  # an external the object could not type (AMDGPU: clang writes
                continue  # STT_NOTYPE for every extern) resolved to a variable: the relocation's data edge
            if (ck, tk) not in edges:  # a self edge is kept: it is recursion
                edges.add((ck, tk))
                g.nodes[ck].calls.append(tk)
        for caller, proto in model.callgraph.indirect_sites:
            ck = key(u, caller)
            if ck is not None and ck in g.nodes and g.nodes[ck].unit is u:
                g.nodes[ck].sites.append(proto)
        for fn, proto in model.callgraph.address_taken:
            fk = key(u, fn)
            if fk is not None and fk in g.nodes:
                g.taken.setdefault(fk, []).append(proto)
    for u in res.units:
        refs: set[tuple[str, str]] = set()  # a holder's data edges come from its own unit (and .kd above)
        for holder, target in u.references:
            hk, tk = key(u, holder), key(u, target)
            if hk is None or tk is None or hk == tk or hk not in g.nodes or tk not in g.nodes:
                continue
            if g.nodes[hk].unit is not u:
                continue
            src, dst = g.nodes[hk], g.nodes[tk]
            if not dst.is_function:
                # src.data holds at most the kernel's descriptor (first) and this unit's earlier edges
                if (hk, tk) not in refs and not (src.data and src.data[0] == tk):
                    refs.add((hk, tk))
                    src.data.append(tk)
            elif not src.is_function and tk not in g.taken:
                g.taken[tk] = [UNKNOWN_PROTOTYPE]
    return g
