"""Which PTX goes into a package: the PTX policy (``--ptx``), docs/PACKAGING.md.

A GPU runs SASS built for its own major version (minor equal or lower); a GPU
of a newer major version can only JIT-compile PTX whose virtual arch is not
above it.  So:

* ``highest`` (the default): keep the PTX of the highest virtual arch that is
  not arch-specific (``compute_90a`` JITs only on 9.0).  Every future GPU can
  JIT it, and it uses the newest features the code was built for.
* ``lowest``: the PTX of the lowest virtual arch: the widest reach among
  *older* GPUs that have no SASS in the package, at the cost of older features.
* ``all``: every PTX given.  Wasteful: a GPU only ever JITs one, and PTX is
  large (typically several times a cubin, before compression).
* ``none``: no PTX.  The package then runs only on the GPUs its SASS covers.
* ``sm_80,compute_90,...``: exactly the PTX of these virtual archs (``sm_XX``
  means ``compute_XX``).

PTX compiled in relocatable mode (``-rdc``) has unresolved external calls: the
driver cannot JIT it alone, so it is no help to a newer GPU either.  The text
does not say so, but a fatbin entry's options do (``nvcc -dc`` and ``-dlto``
record ``--compile-only``); such PTX is relocatable
(:func:`devbin.packaging.facts.relocatable`), is passed over by ``highest``/``lowest``
when the unit has whole-program PTX of the same kind, and never counts as PTX a newer GPU could JIT (``devbin pack``
also warns about each relocatable PTX it keeps).

The policy applies per translation unit (``tu=``): each unit's code is
different, so a unit keeps its own PTX even when another unit has PTX for a
higher arch.  :func:`choose_ptx` also warns, per unit with SASS, when no kept
image of that unit can run on a GPU newer than its highest SASS: no PTX at all,
or only arch-specific PTX.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from devbin.errors import UsageError
from devbin.images.record import CUBIN, PTX, Image
from devbin.packaging.facts import arch_name_of_sm, parse_sm, relocatable

__all__ = ["PTX_POLICIES", "PtxChoice", "choose_ptx", "jit_ptx", "parse_ptx_policy"]

PTX_POLICIES = ("none", "highest", "lowest", "all")
DEFAULT_PTX_POLICY = "highest"


def parse_ptx_policy(text: str) -> str | frozenset[int]:
    """A named policy, or the set of SM numbers an ``sm_XX,compute_YY`` list names."""
    t = text.strip().lower()
    if t in PTX_POLICIES:
        return t
    archs: set[int] = set()
    for part in t.split(","):
        sm = parse_sm(part)
        if sm is None or sm[1]:
            raise UsageError(f"--ptx: expected none, highest, lowest, all or a list like sm_80,sm_90; got {part!r}")
        archs.add(sm[0])
    return frozenset(archs)


def jit_ptx(images: Sequence[Image]) -> list[Image]:
    """The PTX among ``images`` that a GPU newer than every SASS could JIT: of a known virtual arch,
    neither arch- nor family-specific (``compute_90a`` JITs only on 9.0, ``compute_100f`` on major
    10 only) and not relocatable (module docstring).  ``pack`` and ``prune`` warn with this one rule."""
    return [i for i in images
            if i.kind == PTX and (sm := parse_sm(i.arch)) is not None and not sm[1] and not relocatable(i)]


@dataclass(frozen=True, slots=True)
class PtxChoice:
    keep: tuple[int, ...]  # indices into the images given
    dropped: tuple[int, ...]
    warnings: tuple[str, ...]


def choose_ptx(facts: Sequence[Image], policy: str | frozenset[int],
               groups: Sequence[str] | None = None) -> PtxChoice:
    """Apply ``policy`` to the PTX images among ``facts``, separately in each translation unit.

    ``groups`` names the translation unit of each image (parallel to ``facts``;
    None: all one unit).  Each unit keeps its own PTX by the policy: a unit's
    only PTX is never dropped because another unit has a higher one, since the
    two hold different code.  Non-PTX images are always kept.  The warning about
    GPUs newer than the highest SASS is given per unit that has SASS.  A list
    policy (``sm_80,sm_90``) is an error only when no unit has PTX for a listed
    arch; a unit that lacks one gets a warning.
    """
    tus = list(groups) if groups is not None else [""] * len(facts)
    if len(tus) != len(facts):
        raise UsageError("choose_ptx: one translation unit per image expected")
    order = list(dict.fromkeys(tus))
    keep_ptx: set[int] = set()
    warnings: list[str] = []
    listed_found: set[int] = set()
    for tu in order:
        members = [i for i, t in enumerate(tus) if t == tu]
        ptx = [(i, parse_sm(facts[i].arch)) for i in members if facts[i].kind == PTX]
        known = [(i, sm) for i, sm in ptx if sm is not None]
        chosen: set[int]
        if policy == "all":
            chosen = {i for i, _ in ptx}
        elif policy == "none":
            chosen = set()
        elif policy in ("highest", "lowest"):
            generic = [(i, sm) for i, sm in known if not sm[1]]
            portable = [(i, sm) for i, sm in generic if not relocatable(facts[i])] or generic or known
            pick = (max if policy == "highest" else min)(portable, key=lambda p: p[1][0], default=None)
            chosen = {pick[0]} if pick else set()
        else:
            assert isinstance(policy, frozenset)
            chosen = {i for i, sm in known if sm[0] in policy and not sm[1]}
            have = {sm[0] for i, sm in known if i in chosen}
            listed_found |= have
            lacking = sorted(policy - have)
            if lacking and len(order) > 1:
                names = ", ".join(arch_name_of_sm(m, virtual=True) for m in lacking)
                warnings.append(f"{_unit(tu)}has no PTX for {names}")
        keep_ptx |= chosen
        sass = [sm for i in members if facts[i].kind == CUBIN and (sm := parse_sm(facts[i].arch)) is not None]
        kept_portable = jit_ptx([facts[i] for i in members if i in chosen])
        if sass and not kept_portable:
            top = max(s[0] for s in sass)
            warnings.append(f"{_unit(tu) if len(order) > 1 else ''}no PTX that a GPU newer than the highest SASS "
                            f"({arch_name_of_sm(top)}) could JIT: "
                            + ("this translation unit's code" if len(order) > 1 else "the package")
                            + " runs only on the GPUs its SASS covers")
    if isinstance(policy, frozenset):
        missing = sorted(policy - listed_found)
        if missing:
            raise UsageError("--ptx names " + ", ".join(arch_name_of_sm(m, virtual=True) for m in missing)
                             + " but no PTX image for it was given")
    keep = tuple(i for i, f in enumerate(facts) if f.kind != PTX or i in keep_ptx)
    dropped = tuple(i for i, f in enumerate(facts) if f.kind == PTX and i not in keep_ptx)
    return PtxChoice(keep, dropped, tuple(warnings))


def _unit(tu: str) -> str:
    return f"translation unit {tu}: "
