"""The target a code object was compiled for.

A :class:`Target` is vendor-neutral: a vendor name, a processor (``arch``) and a
set of feature switches.  Its canonical string, :attr:`Target.target_id`, uses
the LLVM target-id grammar for every vendor::

    <arch>(:<feature>(+|-))*        features sorted by name

so AMDGPU targets read exactly as LLVM writes them (``gfx90a:sramecc+:xnack-``)
and NVIDIA targets are just the SM name (``sm_90a``): NVIDIA has no feature
switches, its variants are part of the arch name.  The vendor is *not* part of
the string because the arch names of the vendors do not overlap; it is kept in
its own field.  The model knows no vendor: :meth:`Target.parse` takes the vendor
as given, and :func:`devbin.targets.registry.parse_target` is the parse that
infers it from the arch name (the vendor descriptors know their names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devbin.errors import UsageError

__all__ = ["Target"]


def _feature_name(feature: str) -> str:
    return feature[:-1]


@dataclass(frozen=True, slots=True)
class Target:
    """A compilation target.

    ``features`` are ``name+`` / ``name-`` switches; a feature that is absent
    means "any" (the LLVM rule).  They are stored sorted by name so that two
    equal targets compare equal whatever order they were written in.
    """

    vendor: str
    arch: str
    features: tuple[str, ...] = ()
    triple: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.vendor, str) or not isinstance(self.arch, str) or not isinstance(self.triple, str):
            raise UsageError("target: vendor, arch and triple must be strings")
        if not self.arch or ":" in self.arch:
            raise UsageError(f"target: bad arch name {self.arch!r}")
        feats = tuple(self.features)
        names: set[str] = set()
        for f in feats:
            if not isinstance(f, str) or len(f) < 2 or f[-1] not in "+-" or ":" in f:
                raise UsageError(f"target: bad feature {f!r} (expected name+ or name-)")
            if _feature_name(f) in names:
                raise UsageError(f"target: feature {_feature_name(f)!r} given twice")
            names.add(_feature_name(f))
        object.__setattr__(self, "features", tuple(sorted(feats, key=_feature_name)))

    @property
    def target_id(self) -> str:
        """Canonical target-id string, e.g. ``gfx90a:sramecc+:xnack-`` or ``sm_90a``."""
        return ":".join((self.arch, *self.features))

    def feature(self, name: str) -> bool | None:
        """``True`` (on), ``False`` (off) or ``None`` (any) for a feature name."""
        for f in self.features:
            if _feature_name(f) == name:
                return f[-1] == "+"
        return None

    @classmethod
    def parse(cls, text: str, vendor: str = "", triple: str = "") -> Target:
        """Parse a target-id string; ``vendor`` as given (:func:`devbin.targets.registry.parse_target`
        infers it from the arch)."""
        if not isinstance(text, str):
            raise UsageError(f"target: expected a string, got {type(text).__name__}")
        arch, *features = text.split(":")
        return cls(vendor, arch, tuple(features), triple)

    def __str__(self) -> str:
        return self.target_id

    def to_dict(self) -> dict[str, Any]:
        return {
            "vendor": self.vendor,
            "arch": self.arch,
            "features": list(self.features),
            "triple": self.triple,
            "target_id": self.target_id,
        }
