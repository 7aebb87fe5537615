"""The one archive symbol resolver with lld's semantics, for the device linker and the super-archive.

:class:`LazyResolver` is lld's symbol table reduced to what decides which archive members
are pulled in, shared by :mod:`devbin.link.resolution` (objects, archives and super-archive
levels on a link's command line) and :mod:`devbin.superarchive.resolve` (a target's fallback
chain, checked against ``ld.lld --why-extract``):

* objects are loaded (:meth:`~LazyResolver.define` and :meth:`~LazyResolver.reference` for each
  of their global symbols, in symbol-table order);
* an archive *offers* its members (:meth:`~LazyResolver.offer`, members in order): a member is
  pulled at once when it defines a symbol a strong reference left undefined, else each of its
  symbols not defined or offered already becomes *lazy*; the first offer of a symbol wins;
* an offered member stays offered (lld treats every archive as one group): a strong reference
  made later, by anything, pulls it then; a weak reference pulls nothing;
* strong beats common beats weak, whatever the order; two weak or two common definitions: the
  first (commons take the largest size); two strong ones from different definers are a
  duplicate (the first stays).

Pulling a member calls ``load(member, symbol, needed_by)``, which loads it (its symbols through
``define``/``reference`` again).  Members are any hashable handle the caller chooses.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

__all__ = ["DefKind", "Defined", "LazyResolver", "Undefined"]

M = TypeVar("M", bound=Hashable)
P = TypeVar("P")

DefKind = Literal["defined", "common", "weak"]
_RANK = {"defined": 3, "common": 2, "weak": 1}


@dataclass(frozen=True, slots=True)
class Defined(Generic[P]):
    """A symbol's definition: who defines it, strong/common/weak, its size (commons) and the caller's payload."""

    who: str
    kind: DefKind
    size: int
    payload: P


@dataclass
class Undefined:
    """A symbol referred to and not defined: whether every reference is weak, and the referrers in order."""

    weak: bool
    referrers: list[str] = field(default_factory=list)


class LazyResolver(Generic[M, P]):
    """lld's symbol table, reduced (see the module docstring)."""

    def __init__(self, load: Callable[[M, str, str], None]) -> None:
        self.load = load
        self.defined: dict[str, Defined[P]] = {}
        self.undefined: dict[str, Undefined] = {}
        self.lazy: dict[str, M] = {}
        self.pulled: set[M] = set()
        self.duplicates: list[tuple[str, str, str]] = []  # (symbol, first definer, second)
        self._offers: dict[M, list[str]] = {}

    def define(self, name: str, who: str, payload: P, kind: DefKind = "defined", size: int = 0) -> None:
        self.lazy.pop(name, None)
        self.undefined.pop(name, None)
        have = self.defined.get(name)
        new = Defined(who, kind, size, payload)
        if have is None:
            self.defined[name] = new
            return
        old_rank, new_rank = _RANK[have.kind], _RANK[kind]
        if old_rank == new_rank == _RANK["defined"]:
            if have.who != who:
                self.duplicates.append((name, have.who, who))
        elif old_rank == new_rank == _RANK["common"]:
            if size > have.size:
                self.defined[name] = new
        elif new_rank > old_rank:
            self.defined[name] = new

    def reference(self, name: str, who: str, weak: bool = False) -> Defined[P] | None:
        """``who`` refers to ``name``; returns its definition when it is defined already (nothing
        pulled), else None (a lazy member pulled for a strong reference, or left undefined)."""
        have = self.defined.get(name)
        if have is not None:
            return have
        offered = self.lazy.get(name)
        if offered is not None and not weak:
            self.pull(offered, name, who)
            return None
        u = self.undefined.get(name)
        if u is None:
            self.undefined[name] = Undefined(weak, [who])
        else:
            u.weak = u.weak and weak
            u.referrers.append(who)
        return None

    def offer(self, members: Iterable[tuple[M, Iterable[str]]]) -> None:
        """An archive's members, in order, each with the symbols it defines (the archive's index)."""
        for member, syms in members:
            for sym in syms:
                if sym in self.defined or sym in self.lazy:
                    continue  # shadowed: defined already, or offered by a member read before
                u = self.undefined.get(sym)
                if u is not None and not u.weak:
                    del self.undefined[sym]
                    self.pull(member, sym, u.referrers[0])
                    break
                self.lazy[sym] = member
                self._offers.setdefault(member, []).append(sym)

    def pull(self, member: M, symbol: str, needed_by: str) -> None:
        """Load ``member`` for ``symbol`` (once): its lazy offers are withdrawn first."""
        if member in self.pulled:
            return
        self.pulled.add(member)
        for sym in self._offers.pop(member, ()):
            if self.lazy.get(sym) == member:
                del self.lazy[sym]
        self.load(member, symbol, needed_by)
