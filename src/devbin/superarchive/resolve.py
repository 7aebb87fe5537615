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
6. A pulled ELF defines what the archive's table gives it besides its global symbols (a
   zebin's kernels, ``STB_LOCAL``; ``Vendor.offered_symbols``), and a reference its vendor's
   loader resolves (``Vendor.loader_symbols``: Intel's relocation symbols) is defined by
   ``<loader>``, not looked up.

The symbol table is :class:`devbin.analysis.resolver.LazyResolver`, the one the device linker
uses too (:mod:`devbin.link.resolution`).  Nothing here copies the archive: member data is read
(hash-checked) only for the members that get pulled, to read their references; offered members
are known from the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from devbin.analysis.resolver import LazyResolver
from devbin.errors import DeviceBinaryError, UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.superarchive.manifest import TargetRecord
from devbin.targets.registry import vendor_for_machine

__all__ = ["ChainedArchive", "Definition", "Lookup", "Pull", "Resolution", "RootObject", "resolve"]

COMMAND_LINE = "<command line>"
#: ``Lookup.defined_by`` of a reference the device loader resolves (``Vendor.loader_symbols``).
LOADER = "<loader>"


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
    """The global symbols of an ELF object as ``(name, defined, weak)``, in ``SHT_SYMTAB`` order
    (:meth:`ElfFile.global_symbols`)."""
    return tuple((s.name, s.defined, s.bind == C.STB_WEAK) for s in ElfFile(data, where=where).global_symbols())


def _loader_symbols(data: bytes | bytearray | memoryview, where: str) -> frozenset[str]:
    """The symbols the loader of the member's vendor defines (:attr:`devbin.targets.vendor.Vendor.loader_symbols`)."""
    vendor = vendor_for_machine(ElfFile(data, where=where).header.e_machine)
    return vendor.loader_symbols if vendor is not None else frozenset()


class ChainedArchive(Protocol):
    """What the resolution reads of a super-archive (:class:`devbin.superarchive.SuperArchive` is one)."""

    @property
    def where(self) -> str: ...

    def chain(self, target: str) -> tuple[str, ...]: ...

    def target(self, name: str) -> TargetRecord: ...

    def member_data(self, ordinal: int) -> bytes | bytearray | memoryview: ...


class _Resolver:
    """The chain's use of :class:`~devbin.analysis.resolver.LazyResolver` (lld's symbol table,
    reduced): a member handle is its :class:`Definition`; every lookup is recorded."""

    def __init__(self, lib: ChainedArchive, target: str) -> None:
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
        self.table: LazyResolver[Definition, None] = LazyResolver(self._pull)

    def walk(self, symbol: str) -> tuple[tuple[str, Definition | None], ...]:
        return tuple((level, defs.get(symbol)) for level, defs in zip(self.chain, self.level_defs, strict=True))

    def add_object(self, who: str, entries: tuple[tuple[str, bool, bool], ...]) -> None:
        """An object's symbols, in symbol-table order."""
        for name, defined, weak in entries:
            if defined:
                self.table.define(name, who, None, "weak" if weak else "defined")
            else:
                have = self.table.reference(name, who, weak)
                if have is not None:
                    self.result.lookups.append(Lookup(name, who, self.walk(name), "defined", defined_by=have.who))

    def _pull(self, d: Definition, symbol: str, needed_by: str) -> None:
        self.result.lookups.append(Lookup(symbol, needed_by, self.walk(symbol), "pulled", taken=d))
        data = self.lib.member_data(d.ordinal)
        readable = bytes(data[:4]) == b"\x7fELF"
        rec = self.lib.target(d.level)
        offered = tuple((s, True, False) for s, pos in rec.symbols if pos == d.position)
        if readable:
            where = f"{self.lib.where or '<archive>'}({d.member})"
            try:
                entries = elf_symbols(data, where=where)
                provided = _loader_symbols(data, where)
            except DeviceBinaryError as e:
                raise UsageError(f"cannot read the symbols of member {d.label}: {e.message}",
                                 fmt="superarchive") from e
            for name, defined, _ in entries:
                if not defined and name in provided:
                    self.result.lookups.append(Lookup(name, d.label, self.walk(name), "defined", defined_by=LOADER))
            # what the member offers beyond its ELF globals (a zebin's local kernels) is defined by it too
            defined_here = {name for name, defined, _ in entries if defined}
            entries = (*(e for e in offered if e[0] not in defined_here),
                       *(e for e in entries if e[1] or e[0] not in provided))
        else:
            entries = offered
        self.result.pulled.append(Pull(d, symbol, needed_by, readable))
        self.add_object(d.label, entries)

    def finish(self) -> Resolution:
        self.result.duplicates = list(self.table.duplicates)
        for name, u in self.table.undefined.items():
            outcome: Literal["undefined", "weak"] = "weak" if u.weak else "undefined"
            self.result.lookups.append(Lookup(name, u.referrers[0], self.walk(name), outcome))
            if not u.weak:
                self.result.undefined.append((name, tuple(u.referrers)))
        return self.result


def resolve(lib: ChainedArchive, target: str, symbols: tuple[str, ...] | list[str] = (),
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
        r.table.offer(members)
    return r.finish()
