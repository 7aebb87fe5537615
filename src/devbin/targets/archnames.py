"""Architecture names as users type them: the one parser of every ``--arch``/``--keep``/``--drop`` list.

An option that names architectures takes them repeated *and* comma-separated
(``--keep sm_80 --keep sm_90,gfx90a`` names three), so :func:`parse_arch_list` takes a
string or any iterable of strings (argparse's ``action="append"`` list), splits each at
commas and flattens, in order, each name once.

Each name is made canonical where that is unambiguous: the whole name in lower case
(``SM_90`` -> ``sm_90``, ``gfx90A`` -> ``gfx90a``, ``gfx90a:XNACK+`` -> ``gfx90a:xnack+``):
the names are defined in lower case (CUDA's ``-arch=sm_XY``, NVIDIA CUDA Compiler Driver
documentation, "GPU Feature List"; LLVM's AMDGPUUsage "Processors" table and "Target
ID"), and no two architectures differ by case only.

A name must be an architecture of a vendor's tables: the vendor that claims it
(:meth:`devbin.targets.vendor.Vendor.claims_arch`) checks it (:meth:`~devbin.targets.vendor.Vendor.check_arch`):
NVIDIA's :data:`devbin.targets.nvidia.archs.SM_ARCHS` (``sm_``, ``compute_`` or ``lto_`` with a known SM
number and one of its variants: ``sm_900`` and ``sm_80a`` are refused, as ``nvcc -arch`` refuses them:
"Unsupported gpu architecture") and AMD's :data:`devbin.targets.amdgpu.mach.PROCESSORS` (a ``gfx``
processor or generic target, with features it supports: :func:`devbin.targets.amdgpu.targetid.parse_target_id`).
Anything else is a :class:`~devbin.errors.UsageError` whose one line suggests the names
meant: the vendors' obvious repairs first (:meth:`~devbin.targets.vendor.Vendor.arch_repairs`: ``sm90`` ->
``sm_90``, a bare ``90`` -> ``sm_90``, ``9.0`` -> ``sm_90``), then the closest known names
(:func:`difflib.get_close_matches`).
A name that is valid but matches nothing in the input is for each command to report
(it knows the input).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from functools import cache

from devbin.errors import UsageError
from devbin.targets.registry import VENDORS

__all__ = ["canonical_arch", "known_arch_names", "parse_arch_list", "suggestions"]


@cache
def known_arch_names() -> tuple[str, ...]:
    """Every name the vendors' tables know, vendor by vendor (``sm_20`` .. ``lto_121f``, then the ``gfx``
    processors and generic targets)."""
    return tuple(n for v in VENDORS for n in v.known_arch_names())


@cache
def _pools() -> tuple[str, ...]:
    """The first two letters of every vendor's architecture prefixes (``sm``, ``co``, ``lt``, ``gf``)."""
    return tuple(dict.fromkeys(p[:2] for v in VENDORS for p in v.arch_prefixes))


def suggestions(text: str) -> list[str]:
    """The known names ``text`` probably meant, best first (at most three)."""
    t = text.strip().lower()
    known = known_arch_names()
    out = [n for v in VENDORS for n in v.arch_repairs(t) if n in known]
    if out:  # an obvious repair: the one answer
        return out[:1]
    pool = [n for n in known if n.startswith(t[:2])] if t[:2] in _pools() else list(known)
    out += difflib.get_close_matches(t, pool, n=3, cutoff=0.6)
    return list(dict.fromkeys(out))[:3]


def canonical_arch(text: str) -> str:
    """``text`` as the tables spell it (lower case); UsageError, with suggestions, when it names no
    architecture the tables know (module docstring)."""
    t = text.strip().lower()
    for v in VENDORS:
        if v.claims_arch(t):
            try:
                return v.check_arch(t)
            except UsageError as e:
                return _refuse(text, e.message)
    return _refuse(text, "not a GPU architecture" if suggestions(text)
                   else "not a GPU architecture (sm_90, compute_90, gfx90a, gfx90a:xnack+ ...)")


def _refuse(text: str, why: str) -> str:
    """UsageError for ``text``, naming what it probably meant (a target ID's features kept)."""
    base, colon, features = text.strip().partition(":")
    if colon and base.lower() in known_arch_names():  # a known processor, features it lacks or misspelt
        hint = [base.lower()]
    else:
        hint = [f"{b}{colon}{features.lower()}" for b in suggestions(base)]
    meant = f"; did you mean {' or '.join(hint)}?" if hint else ""
    raise UsageError(f"{text}: {why}{meant}")


def parse_arch_list(values: str | Iterable[str], *, option: str = "") -> tuple[str, ...]:
    """``"sm_80,SM_90"`` or ``["sm_80", "sm_90,gfx90a"]`` -> ``("sm_80", "sm_90", "gfx90a")``: split at commas,
    flattened, each name :func:`canonical_arch`, each once.  UsageError (starting with ``option``, e.g.
    ``--keep``, when given) for an empty name, no name at all or a name the tables do not know."""
    lead = f"{option} " if option else ""
    parts = [values] if isinstance(values, str) else list(values)
    out: list[str] = []
    for part in parts:
        for name in part.split(","):
            if not name.strip():
                raise UsageError(f"{lead}{part!r}: empty architecture name")
            try:
                out.append(canonical_arch(name))
            except UsageError as e:
                raise UsageError(f"{lead}{e.message}") from None
    if not out:
        raise UsageError(f"{lead}no architecture named".strip())
    return tuple(dict.fromkeys(out))
