"""Which AMDGPU code object a device loads: the ROCr/CLR rules, with reasons.

Sources (LLVM AMDGPUUsage "Target ID" and "Generic processors"; ROCr ``isa.cpp``); the
processors, their features and generic families come from the one table,
:mod:`devbin.targets.amdgpu.mach`:

* Processor: the code object's processor equals the device's, or it is the device
  family's generic target (``gfx9-generic``, ``gfx9-4-generic``, ``gfx10-1-generic``,
  ``gfx10-3-generic``, ``gfx11-generic``, ``gfx12-generic``) with a generic version
  (``EF_AMDGPU_GENERIC_VERSION``) at least the family's minimum, which is 1 for every
  family today (ROCr ``Isa::IsCompatible``, isa.cpp).
* Features (``xnack``, ``sramecc``): a feature the code object leaves unspecified
  (*any*) matches either device setting; one it sets (``+``/``-``) must equal the
  device's (clang ``isCompatibleTargetID``; ROCr, whose agents never say *any*).
* Preference: exact processor before the generic target ("prefer an exact-processor
  image and fall back to the family generic image", §3.3), and among those the most
  specific one: the most features set and matching the device (what comgr's code
  object lookup for CLR does: a feature-exact entry beats an *any* one).  Between
  generic images, the higher generic version.

Device features that the device name does not state (``gfx90a`` rather than
``gfx90a:xnack-``) are *unknown*; this module decides so:

* an image that leaves the feature *any* matches for sure;
* an image that sets it is still usable, but only conditionally ("if the device runs
  with xnack+"), and ranks after every sure match; between a conditional ``xnack-`` and
  ``xnack+`` image the ``xnack-`` one is preferred because XNACK is off unless the
  process sets ``HSA_XNACK=1`` (ROCm's default).  No default is assumed for ``sramecc``
  (it depends on the board), so there file order decides.

Processors without a feature (``gfx1101`` has neither) make the question moot.
"""

from __future__ import annotations

from dataclasses import dataclass

from devbin.errors import DeviceBinaryError, UsageError
from devbin.targets.amdgpu.mach import FEATURES, GENERIC_FAMILIES, GENERIC_MIN_VERSION, generic_of, supported_features
from devbin.targets.amdgpu.targetid import TargetId, parse_target_id

__all__ = ["Match", "match", "parse_device"]

#: The setting assumed to break ties between conditional images (ROCm: XNACK off unless HSA_XNACK=1).
DEFAULT_SETTING: dict[str, bool] = {"xnack": False}


def parse_device(text: str) -> TargetId:
    """A device target id: ``gfx90a``, ``gfx90a:xnack+``, ``gfx942:sramecc+:xnack-``, ``gfx1101``.

    UsageError for a malformed name, a generic target (code, not a device) or a feature
    the processor does not have.
    """
    try:
        t = parse_target_id(text.strip() if isinstance(text, str) else text)
    except DeviceBinaryError as e:
        raise UsageError(f"bad AMDGPU device {text!r}: {e.message}") from None
    if not t.processor.startswith("gfx") or not t.processor[3:].isalnum():
        if t.is_generic:
            raise UsageError(f"{t.processor} is a generic code target, not a device; name a processor such as "
                             f"{GENERIC_FAMILIES.get(t.processor, ('gfx90a',))[0]}")
        raise UsageError(f"bad AMDGPU device {text!r}: expected gfxNNN[:sramecc(+|-)][:xnack(+|-)]")
    bad = t.unsupported_features()
    if bad:
        raise UsageError(f"AMDGPU device {text!r}: {t.processor} has no {' or '.join(bad)} feature")
    return t


@dataclass(frozen=True, slots=True)
class Match:
    """The verdict on one code object for one device.

    ``ok`` the device may load it; ``reason`` one phrase; ``rank`` a sort key, smaller is
    better (only meaningful when ``ok``); ``conditional`` the unknown device features the
    image pins (it loads only if the device runs with those settings).
    """

    ok: bool
    reason: str
    rank: tuple[int, ...] = ()
    conditional: tuple[str, ...] = ()


def _state(v: bool | None) -> str:
    return "any" if v is None else "+" if v else "-"


def match(image: TargetId, device: TargetId, *, generic_version: int = 1) -> Match:
    """Whether a code object for ``image`` loads on ``device`` (see the module docstring)."""
    generic = False
    if image.processor != device.processor:
        fam = generic_of(device.processor)
        if not image.is_generic:
            return Match(False, f"built for {image.processor}, device is {device.processor}")
        if fam != image.processor:
            members = GENERIC_FAMILIES.get(image.processor, ())
            why = f"covers {', '.join(members)}" if members else "is an unknown generic target"
            return Match(False, f"{image.processor} {why}; not {device.processor}")
        need = GENERIC_MIN_VERSION.get(fam, 1)
        if generic_version < need:
            return Match(False, f"{image.processor} generic version {generic_version} < {need}, the minimum "
                                f"for {device.processor}")
        generic = True
    pinned = 0
    conditional: list[str] = []
    for name in FEATURES:
        want = image.feature(name)
        have = device.feature(name)
        if want is None:
            continue
        if name not in supported_features(device.processor):
            continue  # a feature the processor lacks cannot be pinned meaningfully; ignore
        if have is None:
            conditional.append(f"{name}{_state(want)}")
        elif want != have:
            return Match(False, f"image has {name}{_state(want)}, device has {name}{_state(have)}")
        else:
            pinned += 1
    # ranking: exact before generic; sure before conditional; more pinned features first;
    # conditional images that agree with the default settings first; higher generic version first.
    off_default = sum(1 for c in conditional if c[:-1] in DEFAULT_SETTING
                      and (c[-1] == "+") != DEFAULT_SETTING[c[:-1]])
    rank = (1 if generic else 0, len(conditional), -pinned, off_default, -generic_version if generic else 0)
    if generic:
        what = f"{image} (generic v{generic_version}) covers {device.processor}'s family"
    else:
        what = f"{image} is the device's processor"
    has = supported_features(device.processor)
    unset = [n for n in has if image.feature(n) is None]
    if unset:
        what += f" ({'/'.join(unset)} any: matches either setting)"
    if conditional:
        what += f"; loads only if the device runs with {' and '.join(conditional)}"
    return Match(True, what, rank, tuple(conditional))
