"""Fallback chains: which targets of a super-archive a target falls back to, in order.

A chain is a list of target names of the same super-archive, searched in order for every
symbol (docs/FORMAT.md §16.5).  The first entry is the target itself: a declared chain that
does not start with it gets it prepended, so ``--chain gfx1030=gfx10-3-generic:generic``
and ``--chain gfx1030=gfx1030:gfx10-3-generic:generic`` mean the same.

When no chain is declared for a target, one is derived from the vendors' loading rules,
among the targets the archive holds (a target not in the archive is never a level):

* **AMDGPU** (``gfxNNN[:feature±...]``): the target, then every other AMDGPU target whose
  code runs on that device (``targets.amdgpu.matching.match``): the same processor with fewer
  pinned features (``gfx90a`` under ``gfx90a:xnack+``; never ``xnack+`` under ``xnack-``),
  then the family's generic target (``gfx10-3-generic`` under ``gfx1030``), best match first.
* **NVIDIA** (``sm_XY[a|f]``): the target, then SASS that runs on that GPU (same major,
  lower minor; ``f`` family variants; never another GPU's ``a`` variant), highest first, then
  PTX (``compute_XY``) not above it, highest first (what the driver would JIT).  A PTX or
  LTO-IR target falls back only to the same kind at a lower or equal compute capability.
* **Intel** (an IP version ``12.56.5`` or an ``ocloc`` name ``acm-g11``, ``pvc``, ``dg2``): the
  target, then the zebins the runtime accepts on that device (same IP version, a generic target
  covering it, its product family), then SPIR-V, the JIT fallback (a target named ``spir64``).
* Finally a target literally named ``generic`` (an arch-neutral bottom layer: bitcode, PTX
  for the lowest arch, data), when the archive has one.

Chains are *stored* as declared (free strings); defaults are computed when read, so adding
a ``generic`` target later extends every defaulted chain.
"""

from __future__ import annotations

from collections.abc import Sequence

from devbin.errors import UsageError, quote
from devbin.targets.registry import guess_vendor

__all__ = ["GENERIC", "check_chains", "default_chain", "effective_chain"]

GENERIC = "generic"


def default_chain(target: str, targets: Sequence[str]) -> tuple[str, ...]:
    """The chain derived from the vendors' rules for ``target`` among ``targets`` (see the module docstring)."""
    others = [t for t in targets if t != target and t != GENERIC]
    vendor = guess_vendor(target)
    lower = vendor.fallback_chain(target, others) if vendor is not None else None
    chain = [target, *(lower or [])]
    if target != GENERIC and GENERIC in targets:
        chain.append(GENERIC)
    return tuple(chain)


def effective_chain(target: str, declared: Sequence[str], targets: Sequence[str]) -> tuple[str, ...]:
    """The levels searched for ``target``: its declared chain (itself first) or the default one.

    A declared entry that names no target of the archive is a UsageError (a typo would
    otherwise silently drop a level); an entry given twice counts once.
    """
    if not declared:
        return default_chain(target, targets)
    known = set(targets)
    out: list[str] = [target]
    for entry in declared:
        if entry not in known:
            raise UsageError(f"the chain of {quote(target)} names {quote(entry)}, which is not a target of this "
                             "super-archive "
                             f"(targets: {', '.join(targets) or 'none'})", fmt="superarchive")
        if entry not in out:
            out.append(entry)
    return tuple(out)


def check_chains(chains: Sequence[tuple[str, Sequence[str]]]) -> None:
    """Refuse a declared chain entry that names no target: ``chains`` is (target, declared chain) per target."""
    names = [t for t, _ in chains]
    for target, declared in chains:
        effective_chain(target, declared, names)
