"""A code object in the unified model: target, functions, call graph, prototypes, metadata.

Normalisation rules (applied by the constructor, so that equal facts give
equal objects and ``decode(encode(m)) == m`` holds):

* ``functions`` are sorted by name; names are unique (the model is keyed by
  symbol name; two local symbols of the same name cannot both carry records).
* ``prototypes`` is the prototype table that the ``prototype`` attribute
  indexes.  Prototypes used by the call graph but missing from the table are
  appended (first use order), so the table is always complete.  Explicit
  duplicates are kept (indices stay stable); references resolve to the first.
* ``target`` and the metadata keys ``vendor``, ``target-id``, ``triple`` say
  the same thing.  Given a target, those keys are rewritten to match it and
  moved to the front; without one, a target is derived from a parseable
  ``target-id`` key.
* ``section_versions`` keeps the minor version and flag bits of the devbin
  sections the object was read from when they are not the defaults (0, 0), so
  that a writer puts them back.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from devbin.errors import DeviceBinaryError, UsageError
from devbin.model.attributes import AttrForm, StdAttr
from devbin.model.callgraph import CallGraph
from devbin.model.function import Function
from devbin.model.metadata import TARGET_KEYS, Metadata, MetaValue
from devbin.model.prototype import Prototype
from devbin.model.target import Target

__all__ = ["CodeObject", "SectionVersion"]


@dataclass(frozen=True, slots=True)
class SectionVersion:
    """Minor version and flags a devbin section was read with (kept only when not 0, 0)."""

    section: str
    minor: int = 0
    flags: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.section, str) or not self.section:
            raise UsageError("section version: section name must be a non-empty string")
        for what, v in (("minor", self.minor), ("flags", self.flags)):
            lim = 0xFF if what == "minor" else 0xFFFF
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= lim:
                raise UsageError(f"section version {self.section}: {what} out of range: {v!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"section": self.section, "minor": self.minor, "flags": self.flags}


def _target_from_metadata(md: Metadata) -> Target | None:
    tid, vendor, triple = md.get("target-id"), md.get("vendor", ""), md.get("triple", "")
    if not (isinstance(tid, str) and isinstance(vendor, str) and isinstance(triple, str)):
        return None
    try:
        return Target.parse(tid, vendor, triple)  # the vendor as recorded ("" when not): the model guesses none
    except DeviceBinaryError:
        return None


def _metadata_for_target(md: Metadata, t: Target) -> Metadata:
    head: list[tuple[str, MetaValue]] = [("vendor", t.vendor), ("target-id", t.target_id)]
    if t.triple:
        head.append(("triple", t.triple))
    new = Metadata((*head, *md.without(*TARGET_KEYS).entries))
    return md if new == md else new


@dataclass(frozen=True, slots=True)
class CodeObject:
    target: Target | None = None
    functions: tuple[Function, ...] = ()
    callgraph: CallGraph = field(default_factory=CallGraph)
    metadata: Metadata = field(default_factory=Metadata)
    prototypes: tuple[Prototype, ...] = ()
    section_versions: tuple[SectionVersion, ...] = ()

    def __post_init__(self) -> None:
        if self.target is not None and not isinstance(self.target, Target):
            raise UsageError("code object: target must be a Target or None")
        if not isinstance(self.callgraph, CallGraph) or not isinstance(self.metadata, Metadata):
            raise UsageError("code object: callgraph must be a CallGraph and metadata a Metadata")
        funcs = tuple(sorted(_typed(self.functions, Function, "functions"), key=lambda f: f.name))
        for a, b in itertools.pairwise(funcs):
            if a.name == b.name:
                raise UsageError(f"code object: two functions named {a.name!r}")
        object.__setattr__(self, "functions", funcs)

        protos = list(_typed(self.prototypes, Prototype, "prototypes"))
        known = set(protos)
        for p in self.callgraph.prototypes():
            if p not in known:
                known.add(p)
                protos.append(p)
        object.__setattr__(self, "prototypes", tuple(protos))
        for f in funcs:
            a = f.attribute(StdAttr.PROTOTYPE)
            if a is not None and a.form == AttrForm.UINT and isinstance(a.value, int) and a.value >= len(protos):
                raise UsageError(f"function {f.name!r}: prototype index {a.value} outside the table ({len(protos)})")

        if self.target is not None:
            object.__setattr__(self, "metadata", _metadata_for_target(self.metadata, self.target))
        else:
            t = _target_from_metadata(self.metadata)
            if t is not None:
                object.__setattr__(self, "target", t)
                object.__setattr__(self, "metadata", _metadata_for_target(self.metadata, t))

        vers = {v.section: v for v in _typed(self.section_versions, SectionVersion, "section_versions")}
        object.__setattr__(
            self, "section_versions", tuple(v for _, v in sorted(vers.items()) if v.minor or v.flags)
        )

    # -- lookups -----------------------------------------------------------------
    def function(self, name: str) -> Function | None:
        for f in self.functions:
            if f.name == name:
                return f
        return None

    @property
    def kernels(self) -> tuple[Function, ...]:
        return tuple(f for f in self.functions if f.is_kernel)

    def prototype_of(self, name: str) -> Prototype | None:
        """The prototype a function's ``prototype`` attribute points at."""
        f = self.function(name)
        idx = None if f is None else f.uint(StdAttr.PROTOTYPE)
        return None if idx is None or idx >= len(self.prototypes) else self.prototypes[idx]

    def prototype_index(self, proto: Prototype) -> int | None:
        """Index of the first equal prototype in the table."""
        for i, p in enumerate(self.prototypes):
            if p == proto:
                return i
        return None

    def section_version(self, section: str) -> SectionVersion:
        for v in self.section_versions:
            if v.section == section:
                return v
        return SectionVersion(section)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": None if self.target is None else self.target.to_dict(),
            "functions": [f.to_dict() for f in self.functions],
            "callgraph": self.callgraph.to_dict(),
            "prototypes": [p.to_dict() for p in self.prototypes],
            "metadata": self.metadata.to_dict(),
            "section_versions": [v.to_dict() for v in self.section_versions],
        }


def _typed(items: Iterable[Any], cls: type, what: str) -> tuple[Any, ...]:
    out = tuple(items)
    for x in out:
        if not isinstance(x, cls):
            raise UsageError(f"code object {what}: expected {cls.__name__}, got {x!r}")
    return out
