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
driver cannot JIT it alone, so it is no help to a newer GPU either; the policy
cannot tell it from the text alone, so the docs say to leave it out.

:func:`choose_ptx` also warns when no kept image can run on a GPU newer than
the highest SASS: no PTX at all, or only arch-specific PTX.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from devbin.errors import UsageError
from devbin.packaging.facts import ImageFacts, parse_sm

__all__ = ["PTX_POLICIES", "PtxChoice", "choose_ptx", "parse_ptx_policy"]

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


@dataclass(frozen=True, slots=True)
class PtxChoice:
    keep: tuple[int, ...]  # indices into the images given
    dropped: tuple[int, ...]
    warnings: tuple[str, ...]


def choose_ptx(facts: Sequence[ImageFacts], policy: str | frozenset[int]) -> PtxChoice:
    """Apply ``policy`` to the PTX images among ``facts``; non-PTX images are always kept."""
    ptx = [(i, parse_sm(f.arch)) for i, f in enumerate(facts) if f.kind == "ptx"]
    known = [(i, sm) for i, sm in ptx if sm is not None]
    keep_ptx: set[int]
    if policy == "all":
        keep_ptx = {i for i, _ in ptx}
    elif policy == "none":
        keep_ptx = set()
    elif policy in ("highest", "lowest"):
        portable = [(i, sm) for i, sm in known if not sm[1]] or known
        pick = (max if policy == "highest" else min)(portable, key=lambda p: p[1][0], default=None)
        keep_ptx = {pick[0]} if pick else set()
    else:
        assert isinstance(policy, frozenset)
        keep_ptx = {i for i, sm in known if sm[0] in policy and not sm[1]}
        missing = sorted(policy - {sm[0] for i, sm in known if i in keep_ptx})
        if missing:
            raise UsageError("--ptx names " + ", ".join(f"compute_{m}" for m in missing)
                             + " but no PTX image for it was given")
    keep = tuple(i for i, f in enumerate(facts) if f.kind != "ptx" or i in keep_ptx)
    dropped = tuple(i for i, _ in ptx if i not in keep_ptx)
    warnings: list[str] = []
    sass = [sm for f in facts if f.kind == "cubin" and (sm := parse_sm(f.arch)) is not None]
    kept_portable = [sm for i, sm in known if i in keep_ptx and not sm[1]]
    if sass and not kept_portable:
        top = max(s[0] for s in sass)
        warnings.append(f"no PTX that a GPU newer than the highest SASS (sm_{top}) could JIT: the package runs "
                        f"only on the GPUs its SASS covers")
    return PtxChoice(keep, dropped, tuple(warnings))
