"""The one call-graph closure walk: what a set of roots can reach.

Every reachability question devbin asks goes through :class:`Closure`: the link's
dead-code elimination (:mod:`devbin.link.dce`), the lazy loader's closures
(:mod:`devbin.load.lazy_loader`), the propagated resources' reach lists
(:mod:`devbin.link.resources`, :mod:`devbin.targets.amdgpu.link_facts`) and
:meth:`devbin.model.CallGraph.reachable`.  What differs between them is a parameter:

* the **roots** (:meth:`Closure.reach` before :meth:`Closure.run`; a persistent walk, as the
  lazy loader keeps one per executable, takes more roots later and only walks what is new);
* the **edges followed**: the ``expand`` callback, called once per reached node, names its
  successors (:meth:`Closure.reach`: calls, data edges, anything else), the prototypes of its
  indirect call sites (:meth:`Closure.site`) and the functions whose address it holds
  (:meth:`Closure.taken`);
* the **address-taken rule**: an address-taken function is reached only when some reached
  indirect call site may call it (the one rule, :func:`devbin.model.indirect.may_call`: a
  prototype it is taken with matches the site's), the rule nvlink applies; a caller wanting every address-taken function
  (``--keep-address-taken``) makes them roots instead;
* the **order**: ``preorder=False`` marks a node when it is first named (its reason is the
  first edge naming it); ``preorder=True`` marks it when it is taken off the stack, so
  :attr:`Closure.order` is the depth-first preorder of the successors as named.

Iterative (deep graphs are fine) and linear in nodes, edges and (distinct site prototypes x
address-taken candidates).  :meth:`mark`/:meth:`release` undo a failed walk.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

from devbin.model.indirect import may_call
from devbin.model.prototype import Prototype

__all__ = ["Closure", "reachable", "reachable_preorder"]

K = TypeVar("K", bound=Hashable)


class Closure(Generic[K]):
    """A reachability walk (see the module docstring).

    ``why`` maps each reached node to the reason given when it was marked; ``order`` lists them
    in marking order.  ``sites`` holds the distinct prototypes of the reached indirect call
    sites, each with the node that first had it.
    """

    def __init__(self, expand: Callable[[K], None], *, preorder: bool = False) -> None:
        self.expand = expand
        self.preorder = preorder
        self.why: dict[K, str] = {}
        self.order: list[K] = []
        self.sites: dict[Prototype, K] = {}
        self._site_list: list[Prototype] = []
        self._todo: list[tuple[K, str]] = []
        self._pending: dict[K, tuple[list[Prototype], int]] = {}  # address-taken -> (prototypes, sites checked)
        self._dirty = False  # a site or an address-taken function came since the last matching
        self._done = 0  # len(order) when the last run ended

    def __contains__(self, key: object) -> bool:
        return key in self.why

    def reach(self, key: K, why: str = "") -> bool:
        """Name ``key`` as reached (for ``why``); True when this is news (not marked or queued before
        in a marking-on-naming walk; always True in a preorder walk, which marks on taking)."""
        if self.preorder:
            if key in self.why:
                return False
            self._todo.append((key, why))
            return True
        if key in self.why:
            return False
        self.why[key] = why
        self.order.append(key)
        self._todo.append((key, why))
        return True

    def site(self, proto: Prototype, holder: K) -> None:
        """A reached node ``holder`` has an indirect call site of prototype ``proto``."""
        if proto not in self.sites:
            self.sites[proto] = holder
            self._site_list.append(proto)
            self._dirty = True

    def taken(self, key: K, proto: Prototype) -> None:
        """``key``'s address is taken with prototype ``proto``: reached once a matching site is."""
        if key in self.why:
            return
        have = self._pending.get(key)
        if have is None:
            self._pending[key] = ([proto], 0)
        elif proto not in have[0]:
            self._pending[key] = ([*have[0], proto], 0)
        else:
            return
        self._dirty = True

    def matching(self, proto: Prototype) -> K | None:
        """The node holding the first reached site whose prototype matches ``proto`` (None: none does)."""
        for p in self._site_list:
            if may_call(p, (proto,)):
                return self.sites[p]
        return None

    def run(self, describe: Callable[[K], str] | None = None) -> list[K]:
        """Walk to the fixpoint; returns the nodes marked since the previous run (the roots named
        since then included), in marking order.
        ``describe(holder)`` names a site's holder in the reason of a function reached through it."""
        start, self._done = self._done, len(self.order)
        while True:
            while self._todo:
                key, why = self._todo.pop()
                if self.preorder:
                    if key in self.why:
                        continue
                    self.why[key] = why
                    self.order.append(key)
                self.expand(key)
            if not self._dirty:
                self._done = len(self.order)
                return self.order[start:]
            self._dirty = False
            for key, (protos, checked) in list(self._pending.items()):
                if key in self.why:
                    del self._pending[key]
                    continue
                hit = next((self.sites[p] for p in self._site_list[checked:] if may_call(p, protos)),
                           None)
                if hit is None:
                    self._pending[key] = (protos, len(self._site_list))
                    continue
                del self._pending[key]
                self.reach(key, "address taken, matches an indirect call"
                           + (f" in {describe(hit)}" if describe is not None else ""))
            if not self._todo:
                self._done = len(self.order)
                return self.order[start:]

    def mark(self) -> tuple[int, int, dict[K, tuple[list[Prototype], int]]]:
        """A point :meth:`release` can return the walk to."""
        return len(self.order), len(self._site_list), dict(self._pending)

    def release(self, mark: tuple[int, int, dict[K, tuple[list[Prototype], int]]]) -> None:
        """Forget everything reached, and every site and address-taken function seen, after ``mark``."""
        n, s, pending = mark
        for key in self.order[n:]:
            del self.why[key]
        del self.order[n:]
        self._done = min(self._done, n)
        for p in self._site_list[s:]:
            del self.sites[p]
        del self._site_list[s:]
        self._pending = pending
        self._todo.clear()
        self._dirty = True


def reachable(roots: Iterable[K], successors: Callable[[K], Iterable[K]]) -> list[K]:
    """Every node reachable from ``roots`` (roots included) along ``successors``, in marking order."""
    def expand(key: K) -> None:
        for n in successors(key):
            walk.reach(n)

    walk: Closure[K] = Closure(expand)
    for r in roots:
        walk.reach(r, "root")
    return walk.run()


def reachable_preorder(root: K, successors: Mapping[K, Sequence[K]]) -> list[K]:
    """Every node reachable from ``root`` (included), in depth-first preorder of ``successors`` as listed."""
    def expand(key: K) -> None:
        for n in reversed(successors.get(key, ())):
            walk.reach(n)

    walk: Closure[K] = Closure(expand, preorder=True)
    walk.reach(root, "root")
    return walk.run()
