"""Layered symbol resolution through a target's fallback chain (docs/FORMAT.md §16.5).

The semantics are, on purpose, exactly what a linker does when it is given one archive per
chain level in order, ``ld.lld-19 user.o level0.a level1.a level2.a`` (checked against lld's
``--why-extract`` in tests/test_superarchive_chains.py), so that a per-target *view*
(:mod:`devbin.superarchive.views`) handed to lld or GNU ld links what devbin predicts:

1. **First definition in chain order wins.**  Levels are read in chain order, each level's
   members in order.  A member is pulled in when it defines a symbol that is undefined at
   that moment; a definition further down (or later in the same level) of a symbol already
   pulled or offered is *shadowed*.
2. **Pulled members are resolved again from the top.**  A reference from a pulled member to
   a symbol that a level already read defines pulls that member at once (a generic ``cos16``
   calling ``cos8`` gets the family's ``cos8``, whose ``cos1`` comes from the GPU-specific
   level); a reference nothing read so far defines waits for the levels below.
3. **A loaded definition beats one that is not loaded**: when a pulled member defines a
   symbol a higher level also offers, the loaded one is used and the other member stays out.
   Two loaded definitions of one symbol are a duplicate (reported, as a linker would).
4. **Weak references pull nothing**; a weak reference to a symbol nothing loads stays
   undefined without an error (both GNU ld and lld leave it for the program).
5. Members that are not ELF (LLVM bitcode, PTX, data) are pulled by the symbols the archive's
   table gives them, but their own references are not read (devbin does not parse bitcode):
   each such pull says so (``references_read`` False).

Nothing here copies the archive: member data is read (hash-checked) only for the members
that get pulled, to read their references; offered members are known from the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from devbin.errors import DeviceBinaryError, UsageError

if TYPE_CHECKING:
    from devbin.superarchive.reader import SuperArchive

__all__ = ["Definition", "Lookup", "Pull", "Resolution", "RootObject", "resolve"]

_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE = 1, 2, 10
COMMAND_LINE = "<command line>"


@dataclass(frozen=True)
class Definition:
    """A member of one chain level that defines a symbol: ``level`` (a target), position in
    that target, ``ordinal`` in the archive and the member's name in that target."""

    level: str
    position: int
    ordinal: int
    member: str

    @property
    def label(self) -> str:
        return f"{self.level}({self.member})"


@dataclass(frozen=True)
class Lookup:
    """One reference looked up: who needed ``symbol``, every level's first definition (the walk),
    and the outcome.

    ``outcome``: ``"pulled"`` (``taken`` was pulled in for it), ``"defined"`` (already defined
    by ``defined_by``: a loaded member or a root object), ``"undefined"`` (nothing defines
    it) or ``"weak"`` (only weak references, and nothing loaded defines it).
    """

    symbol: str
    needed_by: str
    walk: tuple[tuple[str, Definition | None], ...]
    outcome: Literal["pulled", "defined", "undefined", "weak"]
    taken: Definition | None = None
    defined_by: str | None = None


@dataclass(frozen=True)
class Pull:
    """A member pulled in: which, for which symbol, needed by whom; ``references_read`` is False
    for a member devbin cannot read references from (not ELF)."""

    definition: Definition
    symbol: str
    needed_by: str
    references_read: bool = True


@dataclass(frozen=True)
class RootObject:
    """An object given to the resolution (the user's code): its name and its global symbols in
    symbol-table order, each ``(name, defined, weak)``."""

    name: str
    entries: tuple[tuple[str, bool, bool], ...] = ()

    @classmethod
    def from_elf(cls, name: str, data: bytes | bytearray | memoryview) -> RootObject:
        return cls(name, elf_symbols(data, where=name))

    @classmethod
    def references(cls, name: str, symbols: tuple[str, ...] | list[str]) -> RootObject:
        """Strong references only (``-u SYMBOL`` on a linker's command line)."""
        return cls(name, tuple((s, False, False) for s in symbols))


@dataclass
class Resolution:
    """The result of :func:`resolve`: the chain, the members pulled (in pull order), every lookup
    (in resolution order), the references nothing defines, and duplicate definitions."""

    target: str
    chain: tuple[str, ...]
    pulled: list[Pull] = field(default_factory=list)
    lookups: list[Lookup] = field(default_factory=list)
    undefined: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # (symbol, every referrer)
    duplicates: list[tuple[str, str, str]] = field(default_factory=list)  # (symbol, first, second)

    def explain(self, symbol: str) -> list[tuple[int, Lookup]]:
        """The lookups of ``symbol`` and, under each that pulled a member, the lookups of that
        member's references (recursively), with their depth: the walk ``--explain`` prints."""
        out: list[tuple[int, Lookup]] = []
        seen: set[str] = set()

        def visit(lk: Lookup, depth: int) -> None:
            out.append((depth, lk))
            if lk.taken is None or lk.taken.label in seen:
                return
            seen.add(lk.taken.label)
            for child in self.lookups:
                if child.needed_by == lk.taken.label:
                    visit(child, depth + 1)

        for lk in self.lookups:
            if lk.symbol == symbol:
                visit(lk, 0)
        return out


def elf_symbols(data: bytes | bytearray | memoryview, *, where: str = "") -> tuple[tuple[str, bool, bool], ...]:
    """The global symbols of an ELF object as ``(name, defined, weak)``, in ``SHT_SYMTAB`` order."""
    from devbin.formats.elf.reader import ElfFile

    elf = ElfFile(data, where=where)
    out: list[tuple[str, bool, bool]] = []
    for table in elf.symbol_tables.values():
        if table.section.sh_type != 2:
            continue
        for s in table:
            if s.index == 0 or not s.name or s.bind not in (_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE):
                continue
            out.append((s.name, s.defined, s.bind == _STB_WEAK))
    return tuple(out)


@dataclass
class _Undefined:
    weak: bool
    referrers: list[str]


class _Resolver:
    """lld's symbol table, reduced to what decides which members are pulled.

    A symbol is undefined (with its referrers and whether every reference is weak), offered
    by a member not yet pulled (lazy), or defined by a loaded object or member.
    """

    def __init__(self, lib: SuperArchive, target: str) -> None:
        self.lib = lib
        self.chain = lib.chain(target)
        self.result = Resolution(target, self.chain)
        self.level_defs: list[dict[str, Definition]] = []  # per level: symbol -> first member defining it
        self.level_members: list[list[tuple[Definition, tuple[str, ...]]]] = []
        for level in self.chain:
            rec = lib.target(level)
            by_pos: dict[int, list[str]] = {}
            for sym, pos in rec.symbols:
                by_pos.setdefault(pos, []).append(sym)
            members = [(Definition(level, pos, tm.ordinal, tm.name), tuple(by_pos.get(pos, ())))
                       for pos, tm in enumerate(rec.members)]
            defs: dict[str, Definition] = {}
            for d, syms in members:
                for sym in syms:
                    defs.setdefault(sym, d)
            self.level_defs.append(defs)
            self.level_members.append(members)
        self.undefined: dict[str, _Undefined] = {}
        self.lazy: dict[str, Definition] = {}
        self.defined: dict[str, str] = {}
        self.weak_defs: dict[str, bool] = {}
        self.loaded: set[tuple[str, int]] = set()

    def walk(self, symbol: str) -> tuple[tuple[str, Definition | None], ...]:
        return tuple((level, defs.get(symbol)) for level, defs in zip(self.chain, self.level_defs, strict=True))

    # -- an object's symbols, in symbol-table order ------------------------------------------------
    def add_object(self, who: str, entries: tuple[tuple[str, bool, bool], ...]) -> None:
        for name, defined, weak in entries:
            if defined:
                self._define(name, who, weak)
            else:
                self._reference(name, weak, who)

    def _define(self, name: str, who: str, weak: bool = False) -> None:
        first = self.defined.get(name)
        if first is not None:
            if first != who and not weak:
                if self.weak_defs.get(name):
                    self.defined[name] = who  # a strong definition replaces a weak one
                    self.weak_defs[name] = False
                else:
                    self.result.duplicates.append((name, first, who))
            return
        self.defined[name] = who
        self.weak_defs[name] = weak
        self.lazy.pop(name, None)
        self.undefined.pop(name, None)

    def _reference(self, name: str, weak: bool, who: str) -> None:
        if name in self.defined:
            self.result.lookups.append(Lookup(name, who, self.walk(name), "defined", defined_by=self.defined[name]))
            return
        offered = self.lazy.get(name)
        if offered is not None and not weak:
            self._pull(offered, name, who)
            return
        u = self.undefined.get(name)
        if u is None:
            self.undefined[name] = _Undefined(weak, [who])
        else:
            u.weak = u.weak and weak
            u.referrers.append(who)

    # -- a level's members offered, in member order -------------------------------------------------
    def add_level(self, members: list[tuple[Definition, tuple[str, ...]]]) -> None:
        for d, syms in members:
            for sym in syms:
                if sym in self.defined or sym in self.lazy:
                    continue  # shadowed: defined already, or offered by a member read before
                u = self.undefined.get(sym)
                if u is not None and not u.weak:
                    del self.undefined[sym]
                    self._pull(d, sym, u.referrers[0])
                    break
                self.lazy[sym] = d

    def _pull(self, d: Definition, symbol: str, needed_by: str) -> None:
        key = (d.level, d.position)
        if key in self.loaded:
            return
        self.loaded.add(key)
        for sym in [s for s, o in self.lazy.items() if o == d]:
            del self.lazy[sym]
        self.result.lookups.append(Lookup(symbol, needed_by, self.walk(symbol), "pulled", taken=d))
        data = self.lib.member_data(d.ordinal)
        readable = bytes(data[:4]) == b"\x7fELF"
        if readable:
            try:
                entries = elf_symbols(data, where=f"{self.lib.where or '<archive>'}({d.member})")
            except DeviceBinaryError as e:
                raise UsageError(f"cannot read the symbols of member {d.label}: {e.message}",
                                 fmt="superarchive") from e
        else:
            rec = self.lib.target(d.level)
            entries = tuple((s, True, False) for s, pos in rec.symbols if pos == d.position)
        self.result.pulled.append(Pull(d, symbol, needed_by, readable))
        self.add_object(d.label, entries)

    def finish(self) -> Resolution:
        for name, u in self.undefined.items():
            outcome: Literal["undefined", "weak"] = "weak" if u.weak else "undefined"
            self.result.lookups.append(Lookup(name, u.referrers[0], self.walk(name), outcome))
            if not u.weak:
                self.result.undefined.append((name, tuple(u.referrers)))
        return self.result


def resolve(lib: SuperArchive, target: str, symbols: tuple[str, ...] | list[str] = (),
            objects: tuple[RootObject, ...] | list[RootObject] = ()) -> Resolution:
    """Resolve ``symbols`` (strong references, as ``-u SYMBOL``) and the references of ``objects``
    (the user's code, whose definitions count as loaded) through ``target``'s chain.

    The symbols come first, then the objects in order, then the chain's levels in order, as a
    linker reads ``-u SYMBOL user.o level0.a level1.a ...``.
    """
    r = _Resolver(lib, target)
    if symbols:
        r.add_object(COMMAND_LINE, RootObject.references(COMMAND_LINE, symbols).entries)
    for obj in objects:
        r.add_object(obj.name, obj.entries)
    for members in r.level_members:
        r.add_level(members)
    return r.finish()
