"""Symbol resolution across objects, archives and super-archives (issue 7, part 2).

The semantics linker users know, made deterministic:

* Inputs are read in command-line order.  An object is loaded; an archive (or one level
  of a super-archive's chain, in chain order) *offers* its members: a member is pulled in
  only when it defines a symbol that is undefined (by a strong reference) at that moment.
* **Group semantics**: an offered member stays offered, so a reference from a member
  pulled later, by any input, pulls it at once, wherever it was on the command line (what
  ``ld.lld`` does for every archive, and GNU ld inside ``--start-group``); so the result
  is what rescanning every archive until nothing changes gives.  The first offer of a
  symbol in command-line order is the one taken, so ties never depend on anything else.
* **Strong, weak and common**: a strong definition beats a weak one and a common one
  (whatever the order); two weak definitions: the first; commons merge to the largest
  size; two strong definitions are a duplicate, reported with both definers (the first
  stays).  A weak undefined reference pulls nothing and is not an error.
* The resolver itself is :class:`devbin.analysis.resolver.LazyResolver`, shared with the
  super-archive's layered resolution.
* Undefined symbols are reported with every function that refers to them (from the
  relocations of the referring units, :attr:`Unit.references`).

Every decision is recorded (:class:`Pull`: which member, for which symbol, needed by whom)
for the link map.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from devbin.analysis.resolver import LazyResolver
from devbin.link.units import SymbolEntry, Unit

__all__ = ["ArchiveInput", "Definition", "Pull", "Resolution", "resolve_symbols"]


@dataclass
class ArchiveInput:
    """An archive (or one super-archive level) on the command line: its name and its members,
    each with the symbols its index gives (``offers``); members are parsed only when pulled."""

    name: str
    members: list[tuple[str, bytes, tuple[str, ...]]]  # (member name, bytes, defined symbols)
    order: int = 0


@dataclass(frozen=True, slots=True)
class Definition:
    """The definition a symbol resolved to: the unit, the entry, and whether it is weak/common."""

    unit: str
    entry: SymbolEntry


@dataclass(frozen=True, slots=True)
class Pull:
    """An archive member pulled in: the unit name (``lib.a(m.o)``), the symbol and who needed it."""

    unit: str
    symbol: str
    needed_by: str


@dataclass
class Resolution:
    """Loaded units in load order, each global symbol's definition, and the diagnostics."""

    units: list[Unit] = field(default_factory=list)
    definitions: dict[str, Definition] = field(default_factory=dict)
    pulls: list[Pull] = field(default_factory=list)
    undefined: dict[str, list[str]] = field(default_factory=dict)  # symbol -> referring functions ("unit: f")
    weak_undefined: list[str] = field(default_factory=list)
    duplicates: list[tuple[str, str, str]] = field(default_factory=list)  # (symbol, first definer, second)
    offered_not_pulled: int = 0
    _by_name: dict[str, Unit] = field(default_factory=dict, init=False, repr=False, compare=False)

    def unit(self, name: str) -> Unit | None:
        """The first loaded unit named ``name`` (an index, rebuilt when units were added since)."""
        if len(self._by_name) != len(self.units) or not self.units:
            self._by_name = {}
            for u in self.units:
                self._by_name.setdefault(u.name, u)
        return self._by_name.get(name)


class _Resolver:
    """The link's use of :class:`~devbin.analysis.resolver.LazyResolver`: a member handle is
    ``(archive position, member index)``; pulling one loads it as a :class:`Unit`."""

    def __init__(self) -> None:
        self.result = Resolution()
        self.archives: dict[int, ArchiveInput] = {}
        self.table: LazyResolver[tuple[int, int], SymbolEntry] = LazyResolver(self._pull)

    def load(self, unit: Unit, needed_by: str | None = None, symbol: str | None = None) -> None:
        self.result.units.append(unit)
        if needed_by is not None and symbol is not None:
            self.result.pulls.append(Pull(unit.name, symbol, needed_by))
        for e in unit.symbols:
            if e.kind == "defined" or e.kind == "weak" or e.kind == "common":
                self.table.define(e.name, unit.name, e, e.kind, e.size)
            else:
                self.table.reference(e.name, unit.name, e.kind == "weak-undefined")

    def offer(self, archive: ArchiveInput) -> None:
        key = len(self.archives)
        self.archives[key] = archive
        self.table.offer(((key, i), syms) for i, (_, _, syms) in enumerate(archive.members))

    def _pull(self, member: tuple[int, int], symbol: str, needed_by: str) -> None:
        archive = self.archives[member[0]]
        name, data, _ = archive.members[member[1]]
        self.load(Unit(f"{archive.name}({name})", data, archive.order, archive=archive.name), needed_by, symbol)


def _referrers(res: Resolution, symbol: str, units: list[str], index: dict[str, dict[str, list[str]]]) -> list[str]:
    """``unit: function`` for each function of ``units`` referring to ``symbol`` (``index`` caches
    each unit's references by target, so many undefined symbols cost one pass per unit)."""
    out: list[str] = []
    for name in dict.fromkeys(units):
        by_target = index.get(name)
        if by_target is None:
            by_target = index[name] = {}
            u = res.unit(name)
            for frm, to in u.references if u is not None else ():
                by_target.setdefault(to, []).append(frm)
        out += [f"{name}: {h}" for h in by_target.get(symbol, ())] or [name]
    return out


def resolve_symbols(inputs: Sequence[Unit | ArchiveInput], *, undefined: Sequence[str] = ()) -> Resolution:
    """Resolve ``inputs`` in order (see the module docstring); ``undefined`` are extra strong
    references (roots such as ``--keep`` symbols), made before the first input is read."""
    r = _Resolver()
    for sym in undefined:
        r.table.reference(sym, "<command line>")
    offered = 0
    for item in inputs:
        if isinstance(item, ArchiveInput):
            offered += len(item.members)
            r.offer(item)
        else:
            r.load(item)
    res = r.result
    res.definitions = {name: Definition(d.who, d.payload) for name, d in r.table.defined.items()}
    res.duplicates = r.table.duplicates
    index: dict[str, dict[str, list[str]]] = {}
    for name, u in sorted(r.table.undefined.items()):
        if u.weak:
            res.weak_undefined.append(name)
        else:
            cmd = [w for w in u.referrers if w == "<command line>"]
            res.undefined[name] = cmd + _referrers(res, name, [w for w in u.referrers if w != "<command line>"], index)
    res.offered_not_pulled = offered - len(r.table.pulled)
    return res
