"""AMDGPU target IDs and offload (bundle entry) IDs: parse, print, compare.

Grammar (LLVM target-id)::

    target-id   = processor *(":" feature ("+" | "-"))     features: sramecc, xnack; each at most once
    offload-id  = kind "-" arch "-" vendor "-" os "-" env "-" target-id
                  e.g. hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+   (env is empty, hence "--")
    note target = arch "-" vendor "-" os "-" env "-" target-id
                  e.g. amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-  (the ``amdhsa.target`` note key)

An omitted feature means *any*.  The canonical spelling lists features
alphabetically (``gfx90a:sramecc-:xnack+``); input in any order is accepted.
Generic processor names contain ``-`` (``gfx9-generic``), so an offload id is
split at its first five dashes only.

Compatibility (:func:`compatible`) follows clang's ``isCompatibleTargetID`` for
features and ROCr's generic rule for processors: a feature the code object
specifies must be specified identically by the device, an unspecified one
matches either setting; the processor must be equal, or the code object's
processor must be the generic target of the device's family with a generic
version at least that family's minimum (1 for every family today).

Which processor has which feature, and which generic target covers it, is the processor
table's (:mod:`devbin.targets.amdgpu.mach`); the names are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from devbin.errors import FormatError
from devbin.targets.amdgpu.mach import FEATURES, GENERIC_FAMILIES, GENERIC_MIN_VERSION, generic_of, supported_features

__all__ = [
    "FEATURES",
    "GENERIC_FAMILIES",
    "GENERIC_MIN_VERSION",
    "OffloadId",
    "TargetId",
    "compatible",
    "generic_of",
    "parse_note_target",
    "parse_offload_id",
    "parse_target_id",
    "supported_features",
]


def _err(message: str, text: str) -> FormatError:
    return FormatError(message, fmt="amdgpu-target-id", value=text)


@dataclass(frozen=True, slots=True)
class TargetId:
    """A processor and its feature settings (``True`` on, ``False`` off, ``None`` any)."""

    processor: str
    sramecc: bool | None = None
    xnack: bool | None = None

    def feature(self, name: str) -> bool | None:
        return self.sramecc if name == "sramecc" else self.xnack if name == "xnack" else None

    @property
    def features(self) -> tuple[str, ...]:
        """``name+``/``name-`` for each specified feature, alphabetical."""
        return tuple(f"{n}{'+' if v else '-'}" for n in FEATURES if (v := self.feature(n)) is not None)

    @property
    def is_generic(self) -> bool:
        return self.processor.endswith("-generic")

    def __str__(self) -> str:
        return ":".join((self.processor, *self.features))

    def unsupported_features(self) -> tuple[str, ...]:
        """Specified features the processor does not have (clang rejects such ids)."""
        have = supported_features(self.processor)
        return tuple(n for n in FEATURES if self.feature(n) is not None and n not in have)


def parse_target_id(text: str) -> TargetId:
    """Parse ``gfx90a:sramecc+:xnack-`` (features in any order, each at most once)."""
    if not isinstance(text, str) or not text:
        raise _err("empty target id", str(text))
    processor, *feats = text.split(":")
    if not processor or any(c.isspace() for c in processor):
        raise _err("bad processor name in target id", text)
    vals: dict[str, bool] = {}
    for f in feats:
        name, sign = f[:-1], f[-1:]
        if sign not in ("+", "-") or name not in FEATURES:
            raise _err(f"bad feature {f!r} in target id (expected sramecc+/- or xnack+/-)", text)
        if name in vals:
            raise _err(f"feature {name!r} given twice in target id", text)
        vals[name] = sign == "+"
    return TargetId(processor, vals.get("sramecc"), vals.get("xnack"))


@dataclass(frozen=True, slots=True)
class OffloadId:
    """A clang-offload-bundler entry id: kind (``hip``, ``hipv4``, ``openmp``, ``host``), triple, target id."""

    kind: str
    triple: str
    target: TargetId | None

    def __str__(self) -> str:
        return f"{self.kind}-{self.triple}" + (f"-{self.target}" if self.target is not None else "")


def _split_triple(parts: list[str], text: str) -> str:
    if len(parts) < 4 or not all(parts[:3]):
        raise _err("expected arch-vendor-os-env before the target id", text)
    return "-".join(parts[:4])


def parse_offload_id(text: str) -> OffloadId:
    """Parse ``hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+``; a host entry may have no target id."""
    if not isinstance(text, str):
        raise _err("offload id must be a string", str(text))
    parts = text.split("-", 5)
    if len(parts) < 5 or not parts[0]:
        raise _err("offload id needs kind-arch-vendor-os-env", text)
    triple = _split_triple(parts[1:5], text)
    target = parse_target_id(parts[5]) if len(parts) == 6 and parts[5] else None
    return OffloadId(parts[0], triple, target)


def parse_note_target(text: str) -> tuple[str, TargetId]:
    """Split the note's ``amdhsa.target`` (``amdgcn-amd-amdhsa--gfx90a:xnack-``) into triple and target id."""
    if not isinstance(text, str):
        raise _err("amdhsa.target must be a string", str(text))
    parts = text.split("-", 4)
    if len(parts) != 5 or not parts[4]:
        raise _err("amdhsa.target needs arch-vendor-os-env-target-id", text)
    return _split_triple(parts[:4], text), parse_target_id(parts[4])


def compatible(code_object: TargetId | str, device: TargetId | str, *, generic_version: int = 1) -> bool:
    """Whether a code object built for ``code_object`` may run on ``device``.

    ``generic_version`` is the code object's ``EF_AMDGPU_GENERIC_VERSION`` (it is
    not part of the target-id string); only used when the code object is generic.
    """
    co = parse_target_id(code_object) if isinstance(code_object, str) else code_object
    dev = parse_target_id(device) if isinstance(device, str) else device
    if co.processor != dev.processor:
        fam = generic_of(dev.processor)
        if fam != co.processor or generic_version < GENERIC_MIN_VERSION.get(fam, 1):
            return False
    return all(co.feature(n) is None or co.feature(n) == dev.feature(n) for n in FEATURES)
