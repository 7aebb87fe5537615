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
* Undefined symbols are reported with every function that refers to them (from the
  relocations of the referring units, :attr:`Unit.references`).

Every decision is recorded (:class:`Pull`: which member, for which symbol, needed by whom)
for the link map.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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


_RANK = {"defined": 3, "common": 2, "weak": 1}


class _Resolver:
    def __init__(self) -> None:
        self.result = Resolution()
        self.undef: dict[str, tuple[bool, list[str]]] = {}  # symbol -> (all references weak, referring units)
        self.lazy: dict[str, tuple[ArchiveInput, int]] = {}
        self.pulled: set[tuple[int, int]] = set()

    def load(self, unit: Unit, needed_by: str | None = None, symbol: str | None = None) -> None:
        self.result.units.append(unit)
        if needed_by is not None and symbol is not None:
            self.result.pulls.append(Pull(unit.name, symbol, needed_by))
        for e in unit.symbols:
            if e.is_definition:
                self.define(unit, e)
            else:
                self.reference(unit, e.name, e.kind == "weak-undefined")

    def define(self, unit: Unit, e: SymbolEntry) -> None:
        name = e.name
        self.lazy.pop(name, None)
        self.undef.pop(name, None)
        have = self.result.definitions.get(name)
        if have is None:
            self.result.definitions[name] = Definition(unit.name, e)
            return
        old, new = _RANK[have.entry.kind], _RANK[e.kind]
        if old == new == _RANK["defined"]:
            self.result.duplicates.append((name, have.unit, unit.name))
        elif old == new == _RANK["common"]:
            if e.size > have.entry.size:
                self.result.definitions[name] = Definition(unit.name, e)
        elif new > old:
            self.result.definitions[name] = Definition(unit.name, e)

    def reference(self, unit: Unit, name: str, weak: bool) -> None:
        if name in self.result.definitions:
            return
        offered = self.lazy.get(name)
        if offered is not None and not weak:
            self.pull(offered[0], offered[1], name, unit.name)
            return
        all_weak, who = self.undef.get(name, (True, []))
        who.append(unit.name)
        self.undef[name] = (all_weak and weak, who)

    def offer(self, archive: ArchiveInput) -> None:
        for i, (_, _, syms) in enumerate(archive.members):
            for sym in syms:
                if sym in self.result.definitions or sym in self.lazy:
                    continue
                state = self.undef.get(sym)
                if state is not None and not state[0]:
                    self.pull(archive, i, sym, state[1][0])
                    break
                self.lazy[sym] = (archive, i)

    def pull(self, archive: ArchiveInput, index: int, symbol: str, needed_by: str) -> None:
        key = (id(archive), index)
        if key in self.pulled:
            return
        self.pulled.add(key)
        member, data, offers = archive.members[index]
        for sym in offers:  # the lazy entries pointing at this member are among its own offers
            have = self.lazy.get(sym)
            if have is not None and have[0] is archive and have[1] == index:
                del self.lazy[sym]
        self.load(Unit(f"{archive.name}({member})", data, archive.order, archive=archive.name), needed_by, symbol)


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
        r.undef[sym] = (False, ["<command line>"])
    offered = 0
    for item in inputs:
        if isinstance(item, ArchiveInput):
            offered += len(item.members)
            r.offer(item)
        else:
            r.load(item)
    res = r.result
    index: dict[str, dict[str, list[str]]] = {}
    for name, (weak, who) in sorted(r.undef.items()):
        if weak:
            res.weak_undefined.append(name)
        else:
            cmd = [w for w in who if w == "<command line>"]
            res.undefined[name] = cmd + _referrers(res, name, [w for w in who if w != "<command line>"], index)
    res.offered_not_pulled = offered - len(r.pulled)
    return res
