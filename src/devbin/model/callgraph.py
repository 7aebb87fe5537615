"""The call graph of a code object, by function name.

Four relations, each a set kept as a sorted, duplicate-free tuple so that two
graphs with the same facts compare equal:

* ``direct``: ``(caller, callee)`` for each direct call (callee may be an
  external, undefined function);
* ``indirect_sites``: ``(caller, prototype)``: the caller makes indirect calls
  through pointers of that prototype;
* ``address_taken``: ``(function, prototype)``: the function's address is
  taken, so any indirect call site with a matching prototype may reach it
  (equal, or either one unknown: :meth:`Prototype.matches`);
* ``external``: callees that are not defined in this object.

``unknown_blocks`` holds call-graph blocks of a newer format minor, as
``(tag, raw payload)``, so that a writer can put them back unchanged.  They are
kept in tag order (stable for equal tags), the order blocks have on disk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from devbin.errors import UsageError
from devbin.model.indirect import potential_callees
from devbin.model.prototype import Prototype
from devbin.model.reach import Closure

__all__ = ["CallGraph", "KNOWN_BLOCK_TAGS"]

KNOWN_BLOCK_TAGS = frozenset({1, 2, 3, 4})


def _names(pairs: Iterable[tuple[str, str]], what: str) -> tuple[tuple[str, str], ...]:
    out = set()
    for p in pairs:
        if not (isinstance(p, tuple) and len(p) == 2 and all(isinstance(x, str) for x in p)):
            raise UsageError(f"call graph {what}: expected (str, str), got {p!r}")
        out.add(p)
    return tuple(sorted(out))


def _protos(pairs: Iterable[tuple[str, Prototype]], what: str) -> tuple[tuple[str, Prototype], ...]:
    out = set()
    for p in pairs:
        if not (isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], Prototype)):
            raise UsageError(f"call graph {what}: expected (str, Prototype), got {p!r}")
        out.add(p)
    return tuple(sorted(out, key=lambda p: (p[0], p[1].sort_key())))


@dataclass(frozen=True, slots=True)
class CallGraph:
    direct: tuple[tuple[str, str], ...] = ()
    indirect_sites: tuple[tuple[str, Prototype], ...] = ()
    address_taken: tuple[tuple[str, Prototype], ...] = ()
    external: tuple[str, ...] = ()
    unknown_blocks: tuple[tuple[int, bytes], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "direct", _names(self.direct, "direct"))
        object.__setattr__(self, "indirect_sites", _protos(self.indirect_sites, "indirect_sites"))
        object.__setattr__(self, "address_taken", _protos(self.address_taken, "address_taken"))
        ext = tuple(self.external)
        if not all(isinstance(e, str) for e in ext):
            raise UsageError("call graph external: names must be strings")
        object.__setattr__(self, "external", tuple(sorted(set(ext))))
        blocks = []
        for b in self.unknown_blocks:
            if not (isinstance(b, tuple) and len(b) == 2 and isinstance(b[0], int) and 0 <= b[0] <= 0xFF
                    and b[0] not in KNOWN_BLOCK_TAGS and isinstance(b[1], bytes | bytearray | memoryview)):
                raise UsageError(f"call graph unknown block: expected (tag 0..255 not 1..4, bytes), got {b!r}")
            blocks.append((int(b[0]), bytes(b[1])))
        object.__setattr__(self, "unknown_blocks", tuple(sorted(blocks, key=lambda b: b[0])))  # stable

    def __bool__(self) -> bool:
        return bool(self.direct or self.indirect_sites or self.address_taken or self.external or self.unknown_blocks)

    def prototypes(self) -> tuple[Prototype, ...]:
        """Prototypes used, in first-use order (indirect sites, then address-taken), without duplicates."""
        seen: dict[Prototype, None] = {}
        for _, p in (*self.indirect_sites, *self.address_taken):
            seen.setdefault(p, None)
        return tuple(seen)

    def potential_callees(self, site: Prototype) -> tuple[str, ...]:
        """The address-taken functions an indirect call site of prototype ``site`` may reach, by
        name (the one rule: :func:`devbin.model.indirect.potential_callees`)."""
        return tuple(potential_callees(site, self.address_taken))

    def callees(self, name: str, *, indirect: bool = True) -> tuple[str, ...]:
        """Functions ``name`` may call: direct callees, plus (if ``indirect``) the potential
        callees of each of its indirect call sites (:meth:`potential_callees`)."""
        out = {callee for caller, callee in self.direct if caller == name}
        if indirect:
            for caller, p in self.indirect_sites:
                if caller == name:
                    out.update(self.potential_callees(p))
        return tuple(sorted(out))

    def callers(self, name: str) -> tuple[str, ...]:
        """Functions with a direct call to ``name``."""
        return tuple(sorted({caller for caller, callee in self.direct if callee == name}))

    def reachable(self, roots: Iterable[str], *, indirect: bool = True) -> frozenset[str]:
        """Every function reachable from ``roots`` (the roots included): what dead-code
        elimination must keep; an indirect site reaches its potential callees (the one rule,
        :meth:`potential_callees`, applied by the walk).  The walk is
        :class:`devbin.model.reach.Closure`."""
        calls: dict[str, list[str]] = {}
        for caller, callee in self.direct:
            calls.setdefault(caller, []).append(callee)
        sites: dict[str, list[Prototype]] = {}
        for caller, p in self.indirect_sites if indirect else ():
            sites.setdefault(caller, []).append(p)

        def expand(name: str) -> None:
            for callee in calls.get(name, ()):
                walk.reach(callee)
            for p in sites.get(name, ()):
                walk.site(p, name)

        walk: Closure[str] = Closure(expand)
        for fn, p in self.address_taken if indirect else ():
            walk.taken(fn, p)
        for r in roots:
            walk.reach(r, "root")
        walk.run()
        return frozenset(walk.why)

    def to_dict(self) -> dict[str, Any]:
        return {
            "direct": [{"caller": a, "callee": b} for a, b in self.direct],
            "indirect_sites": [{"caller": a, "prototype": p.to_dict()} for a, p in self.indirect_sites],
            "address_taken": [{"function": a, "prototype": p.to_dict()} for a, p in self.address_taken],
            "external": list(self.external),
            "unknown_blocks": [{"tag": t, "data": d.hex()} for t, d in self.unknown_blocks],
        }
