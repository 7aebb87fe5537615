"""Contradictory options across the images of a package (or of a link).

Each image's settings are read from what it carries: its compile options
(the ``CompileOptions`` metadata key, a fatbin entry's options string, a
cubin's ``.note.nv.tkinfo`` ptxas options), its ELF type (relocatable or not)
and, for AMDGPU, its target ID and code object version.  A setting nobody
states is unknown and never contradicts anything.

Checked among the images of one vendor (each finding names the option and the
images on each side):

* ``relocatable``: ``-rdc``/``-c``/``-fgpu-rdc``/``--compile-only`` (the options of a PTX
  entry from ``nvcc -dc``/``-rdc``/``-dlto``; or an ``ET_REL`` image) vs whole-program;
* ``debug``: ``-G``/``-g``/``--device-debug``/``-O0`` vs optimised (``-O1``..``-O3``);
* ``fast-math``: ``--use_fast_math``/``-ffast-math`` vs ``-fno-fast-math``; in NVVM's
  spelling (an ``nvcc -dlto`` LTO-IR entry's options) ``-ftz=1 -prec_div=0 -prec_sqrt=0``
  vs ``-prec_div=1``/``-prec_sqrt=1``;
* ``ftz``: ``-ftz=true``/``--use_fast_math``/``-f{cuda,gpu}-flush-denormals-to-zero`` vs
  ``-ftz=false``/``-fno-gpu-flush-denormals-to-zero``;
* ``code-object-version``: AMDGPU code object versions;
* per translation unit (``tu`` key; by default a container input is one unit of
  its own and loose images share one):
  ``xnack``/``sramecc`` settings for the same processor, the set of target
  architectures, and which PTX archs are shipped (the PTX policy).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from devbin.targets.registry import object_kinds, vendor_for_kind, vendor_named

__all__ = ["Finding", "ImageSettings", "check_consistency", "settings_from_options"]

_TRUE = ("true", "1", "yes", "on")


@dataclass(frozen=True, slots=True)
class ImageSettings:
    """What one image states about how it was built (None: not stated)."""

    label: str
    tu: str
    arch: str = ""
    kind: str = ""
    relocatable: bool | None = None
    debug: bool | None = None
    fast_math: bool | None = None
    ftz: bool | None = None
    code_object_version: int | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    option: str
    message: str
    images: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.option}: {self.message}"


def _tokens(options: str) -> list[str]:
    try:
        return shlex.split(options)
    except ValueError:
        return options.split()


def settings_from_options(options: str) -> dict[str, bool | None]:
    """``relocatable``, ``debug``, ``fast_math`` and ``ftz`` as the options state them."""
    out: dict[str, bool | None] = {"relocatable": None, "debug": None, "fast_math": None, "ftz": None}
    precise: dict[str, bool] = {}
    toks = _tokens(options)
    for i, t in enumerate(toks):
        key, _, val = t.partition("=")
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if key in ("-rdc", "--relocatable-device-code"):
            out["relocatable"] = (val or nxt).lower() in _TRUE
        elif t in ("-c", "--compile-only", "-fgpu-rdc", "--device-c", "-dc"):
            out["relocatable"] = True
        elif t == "-fno-gpu-rdc":
            out["relocatable"] = False
        elif t in ("-G", "-g", "--device-debug", "-O0"):
            out["debug"] = True
        elif t in ("-O1", "-O2", "-O3", "-Os", "-Oz") or (key in ("-O", "--optimize") and (val or nxt) in "123"):
            out["debug"] = out["debug"] or False
        elif t in ("--use_fast_math", "-use_fast_math", "-ffast-math"):
            out["fast_math"] = True
            out["ftz"] = True if out["ftz"] is None else out["ftz"]
        elif t == "-fno-fast-math":
            out["fast_math"] = False
        elif key in ("-ftz", "--ftz"):
            out["ftz"] = (val or nxt).lower() in _TRUE
        elif t in ("-fcuda-flush-denormals-to-zero", "-fgpu-flush-denormals-to-zero"):
            out["ftz"] = True
        elif t in ("-fno-cuda-flush-denormals-to-zero", "-fno-gpu-flush-denormals-to-zero"):
            out["ftz"] = False
        elif key in _PREC:
            precise[_PREC[key]] = (val or nxt).lower() in _TRUE
    # NVVM's own spelling (the options string of an nvcc -dlto LTO-IR entry): --use_fast_math is
    # -ftz=1 -prec_div=0 -prec_sqrt=0 -fmad=1, the default -ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1.
    if out["fast_math"] is None and precise:
        if out["ftz"] and precise.get("div") is False and precise.get("sqrt") is False:
            out["fast_math"] = True
        elif precise.get("div") or precise.get("sqrt"):
            out["fast_math"] = False
    return out


_PREC = {"-prec_div": "div", "-prec-div": "div", "--prec-div": "div",
         "-prec_sqrt": "sqrt", "-prec-sqrt": "sqrt", "--prec-sqrt": "sqrt"}


def _split(images: Sequence[ImageSettings], attr: str) -> dict[object, list[str]]:
    sides: dict[object, list[str]] = {}
    for s in images:
        v = getattr(s, attr)
        if v is not None:
            sides.setdefault(v, []).append(s.label)
    return sides


_WORDS = {
    "relocatable": {True: "relocatable (-rdc)", False: "whole-program"},
    "debug": {True: "debug (-G/-g/-O0)", False: "optimised"},
    "fast_math": {True: "fast-math", False: "no fast-math"},
    "ftz": {True: "flush denormals to zero", False: "keep denormals"},
}


def _features(arch: str) -> tuple[str, tuple[str, ...]]:
    proc, *feats = arch.split(":")
    return proc, tuple(sorted(feats))


def check_consistency(images: Sequence[ImageSettings]) -> list[Finding]:
    """Every contradiction among ``images``; empty when they agree (or say nothing)."""
    out: list[Finding] = []
    vendors: dict[str, list[ImageSettings]] = {}
    for s in images:  # images of different vendors are never linked or loaded together
        vendor = vendor_for_kind(s.kind)
        vendors.setdefault(vendor.name if vendor is not None else s.kind, []).append(s)
    for group in vendors.values():
        for attr, words in _WORDS.items():
            sides = _split(group, attr)
            if len(sides) > 1:
                parts = [f"{words[bool(v)]}: {', '.join(labels)}" for v, labels in sorted(sides.items(), key=str)]
                out.append(Finding(attr.replace("_", "-"), "images disagree — " + "; ".join(parts),
                                   tuple(label for labels in sides.values() for label in labels)))
    for name, group in vendors.items():  # a code object version is a vendor's (AMD's: e_flags/EI_ABIVERSION)
        vendor = vendor_named(name)
        cov = _split([s for s in group if vendor is not None and s.kind == vendor.object_kind], "code_object_version")
        if vendor is not None and len(cov) > 1:
            parts = [f"v{v}: {', '.join(labels)}" for v, labels in sorted(cov.items(), key=str)]
            out.append(Finding("code-object-version", f"{vendor.device_title} code object versions differ — "
                               + "; ".join(parts), tuple(label for labels in cov.values() for label in labels)))
    tus: dict[str, list[ImageSettings]] = {}
    for s in images:
        tus.setdefault(s.tu, []).append(s)
    if len(tus) < 2:
        return out
    # Target features per processor, per translation unit.
    procs: dict[str, dict[str, set[tuple[str, ...]]]] = {}
    for tu, imgs in tus.items():
        for s in imgs:
            if s.kind in object_kinds() and s.arch:  # target-ID features (only AMD's have any today)
                proc, feats = _features(s.arch)
                procs.setdefault(proc, {}).setdefault(tu, set()).add(feats)
    for proc, per_tu in sorted(procs.items()):
        if len({frozenset(v) for v in per_tu.values()}) > 1:
            parts = [f"{tu}: {' '.join(':'.join((proc, *f)) for f in sorted(v))}" for tu, v in per_tu.items()]
            out.append(Finding("xnack/sramecc", f"translation units build {proc} with different target features — "
                               + "; ".join(parts), tuple(per_tu)))
    archs = {tu: frozenset(s.arch for s in imgs if s.kind in object_kinds() and s.arch)
             for tu, imgs in tus.items()}
    if len(set(archs.values())) > 1:
        parts = [f"{tu}: {', '.join(sorted(a)) or '(none)'}" for tu, a in archs.items()]
        out.append(Finding("arch", "translation units target different architectures — " + "; ".join(parts),
                           tuple(archs)))
    ptx = {tu: frozenset(s.arch for s in imgs if s.kind == "ptx") for tu, imgs in tus.items()}
    if len(set(ptx.values())) > 1:
        parts = [f"{tu}: {', '.join(sorted(a)) or 'no PTX'}" for tu, a in ptx.items()]
        out.append(Finding("ptx", "translation units ship different PTX — " + "; ".join(parts), tuple(ptx)))
    return out
