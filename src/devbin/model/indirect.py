"""The one indirect-call rule: which functions an indirect call may reach.

An address-taken function is a potential callee of an indirect call site when one of the
prototypes its address is taken with matches the site's prototype (:meth:`Prototype.matches`:
equal, or either one unknown, so a producer that records no prototypes, as AMDGPU objects do,
keeps the answer conservative).  This is the rule ``nvlink --dump-callgraph`` prints ("s
potentially calls B") and the one its dead-code elimination keeps functions by.

Every door asks here: :meth:`devbin.model.CallGraph.potential_callees` (and ``callees``),
the call-graph view (:mod:`devbin.analysis.callgraph_view`), the link's program graph
(``ProgramGraph.matching``, across units) and the closure walk (:class:`devbin.model.reach.Closure`:
link DCE, the lazy loader, ``CallGraph.reachable``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

from devbin.model.prototype import Prototype

__all__ = ["may_call", "potential_callees"]

K = TypeVar("K", bound=Hashable)


def may_call(site: Prototype, taken: Iterable[Prototype]) -> bool:
    """Whether an indirect call site of prototype ``site`` may reach a function whose address is
    taken with the prototypes ``taken``."""
    return any(site.matches(p) for p in taken)


def potential_callees(site: Prototype, taken: Iterable[tuple[K, Prototype]]) -> list[K]:
    """The functions of ``taken`` (pairs of a function and a prototype its address is taken with)
    that an indirect call site of prototype ``site`` may reach: each once, in the order of its
    first matching pair."""
    return list(dict.fromkeys(fn for fn, p in taken if may_call(site, (p,))))
