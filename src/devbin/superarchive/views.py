"""Per-target views of a super-archive for real linkers (docs/FORMAT.md §16.5).

A super-archive cannot be handed to ``ld.lld`` as it is: lld ignores the archive index and
refuses an archive holding members for another machine (measured with
ld.lld-19, which reports such a member as incompatible with the output).
A *view* turns one target's chain into standard archives a linker takes:

* :func:`level_archives`: one archive per chain level, in chain order; passed to a linker in
  that order (``ld.lld user.o 1-gfx90a.a 2-gfx9-generic.a 3-generic.a``), the first
  definition in chain order wins, exactly as :mod:`devbin.superarchive.resolve` predicts.
  GNU ld needs them inside ``--start-group``/``--end-group`` for references from a lower
  level back up (lld resolves those without it).
* :func:`single_archive`: one archive whose members are the levels' members in chain order
  (a member shared by two levels appears once, at its first level); lld takes the first
  definition in archive order, and the ``/`` index is written in the same order for GNU ld.
  Member names are the super-archive's unique ar names, so ``ar x`` loses nothing.

Members keep their bytes (decoded from the storage when packed), so the view of a target
links to the same output as the per-target library it was built from.
"""

from __future__ import annotations

from dataclasses import dataclass

from devbin.formats.ar.writer import ArMember, write_archive
from devbin.superarchive.reader import SuperArchive

__all__ = ["LevelArchive", "level_archives", "single_archive", "target_archive"]


@dataclass(frozen=True)
class LevelArchive:
    """One chain level as a standard archive: its position (1-based), target name and bytes."""

    position: int
    level: str
    data: bytes
    members: int

    @property
    def file_name(self) -> str:
        safe = "".join(c if c.isalnum() or c in "._+-" else "_" for c in self.level)
        return f"{self.position}-{safe}.a"


def _members(lib: SuperArchive, level: str, *, unique_names: bool) -> list[tuple[int, ArMember]]:
    t = lib.target(level)
    syms: dict[int, list[str]] = {}
    for s, pos in t.symbols:
        syms.setdefault(pos, []).append(s)
    out: list[tuple[int, ArMember]] = []
    for pos, tm in enumerate(t.members):
        name = lib.record(tm.ordinal).name if unique_names else tm.name
        out.append((tm.ordinal, ArMember(name, bytes(lib.member_data(tm.ordinal)), tuple(syms.get(pos, ())))))
    return out


def target_archive(lib: SuperArchive, target: str) -> bytes:
    """``target`` alone as a standard archive: its members under their original names, in order,
    with its symbol table (what ``devbin ar extract --target`` writes)."""
    return write_archive([m for _, m in _members(lib, target, unique_names=False)])


def level_archives(lib: SuperArchive, target: str) -> list[LevelArchive]:
    """One standard archive per level of ``target``'s chain, in chain order."""
    out: list[LevelArchive] = []
    for i, level in enumerate(lib.chain(target), 1):
        members = [m for _, m in _members(lib, level, unique_names=False)]
        out.append(LevelArchive(i, level, write_archive(members), len(members)))
    return out


def single_archive(lib: SuperArchive, target: str) -> bytes:
    """One standard archive with the chain's members in chain order (see the module docstring)."""
    seen: set[int] = set()
    members: list[ArMember] = []
    for level in lib.chain(target):
        for ordinal, m in _members(lib, level, unique_names=True):
            if ordinal not in seen:
                seen.add(ordinal)
                members.append(m)
    return write_archive(members)
