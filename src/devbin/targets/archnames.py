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

A name must be an architecture of the tables: NVIDIA's :data:`devbin.targets.nvidia.archs.SM_ARCHS`
(``sm_``, ``compute_`` or ``lto_`` with a known SM number and one of its variants:
``sm_900`` and ``sm_80a`` are refused, as ``nvcc -arch`` refuses them: "Unsupported gpu
architecture") and AMD's :data:`devbin.targets.amdgpu.mach.PROCESSORS` (a ``gfx`` processor or
generic target, with features it supports: :func:`devbin.targets.amdgpu.targetid.parse_target_id`).
Anything else is a :class:`~devbin.errors.UsageError` whose one line suggests the names
meant: the obvious repairs first (``sm90`` -> ``sm_90``, a bare ``90`` -> ``sm_90``,
``9.0`` -> ``sm_90``), then the closest known names (:func:`difflib.get_close_matches`).
A name that is valid but matches nothing in the input is for each command to report
(it knows the input).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from functools import cache

from devbin.errors import DeviceBinaryError, UsageError
from devbin.targets.amdgpu.mach import PROCESSORS, supported_features
from devbin.targets.amdgpu.targetid import parse_target_id
from devbin.targets.nvidia.archs import SM_ARCHS, try_parse_arch

__all__ = ["canonical_arch", "known_arch_names", "parse_arch_list", "suggestions"]

_NV_PREFIXES = ("sm", "compute", "lto")
_BARE = re.compile(r"(sm|compute|lto)?[ _-]?([1-9][0-9]+[af]?)")
_DOTTED = re.compile(r"([1-9][0-9]?)\.([0-9])([af]?)")


@cache
def known_arch_names() -> tuple[str, ...]:
    """Every name the tables know: ``sm_20`` .. ``lto_121f``, then the ``gfx`` processors and generic targets."""
    nv = [f"{p}_{a.sm}{v}" for p in _NV_PREFIXES for a in SM_ARCHS.values() for v in a.variants]
    amd = [p.name for p in PROCESSORS if p.name.startswith("gfx")]
    return (*nv, *amd)


def suggestions(text: str) -> list[str]:
    """The known names ``text`` probably meant, best first (at most three)."""
    t = text.strip().lower()
    known = known_arch_names()
    out: list[str] = []
    m = _BARE.fullmatch(t)
    if m is not None:  # sm90, sm-90, a bare 90 (SASS unless a prefix says otherwise)
        out.append(f"{m.group(1) or 'sm'}_{m.group(2)}")
    m = _DOTTED.fullmatch(t)
    if m is not None:  # a compute capability: 9.0 -> sm_90
        out.append(f"sm_{m.group(1)}{m.group(2)}{m.group(3)}")
    out = [n for n in out if n in known]
    if out:  # an obvious repair: the one answer
        return out[:1]
    pool = [n for n in known if n.startswith(t[:2])] if t[:2] in ("sm", "co", "lt", "gf") else list(known)
    out += difflib.get_close_matches(t, pool, n=3, cutoff=0.6)
    return list(dict.fromkeys(out))[:3]


def canonical_arch(text: str) -> str:
    """``text`` as the tables spell it (lower case); UsageError, with suggestions, when it names no
    architecture the tables know (module docstring)."""
    t = text.strip().lower()
    nv = try_parse_arch(t)
    if nv is not None:
        if nv.known:
            return nv.name
        return _refuse(text, "no NVIDIA architecture of that name")
    if t.startswith("gfx"):
        try:
            tid = parse_target_id(t)
        except DeviceBinaryError as e:
            return _refuse(text, e.message)
        if tid.processor not in known_arch_names():
            return _refuse(text, f"no AMD processor {tid.processor}")
        bad = tid.unsupported_features()
        if bad:
            have = supported_features(tid.processor)
            return _refuse(text, f"{tid.processor} has no {', '.join(bad)} feature"
                                 + (f" (it has {', '.join(have)})" if have else " (it has none)"))
        return str(tid)
    if t.startswith(_NV_PREFIXES):
        return _refuse(text, "not an NVIDIA architecture name (sm_XY, compute_XY or lto_XY, with an a or f suffix "
                             "or none)")
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
