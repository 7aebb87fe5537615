"""Image selection: which device image of a package a driver would load on a given GPU.

:func:`select` finds every device image in a file, folder or buffer (the
:class:`devbin.images.Image` records of :func:`devbin.images.scan`, every image, as
``list --all`` gives them), groups them into *modules* by their addresses (one fatbin,
one offload bundle, the OffloadBinaries of one file or section, or one bare cubin / code
object: the unit a runtime hands to the driver and the driver picks one image from), and
decides per module, with a verdict and a one-phrase reason for every image.
:func:`decide` does the same for any list of images (what the table tests use).

The rules are the vendors' (their descriptors, :class:`devbin.targets.vendor.Vendor`: ``parse_device``,
``loader_arch``, ``judge``, ``passed_over``): NVIDIA's in :mod:`devbin.targets.nvidia.archs`, AMD's in
:mod:`devbin.targets.amdgpu.matching`.  In short:

NVIDIA (device ``sm_XY`` = compute capability X.Y; ``sm_90a``/``sm_100f`` name the
9.0/10.0 GPU, the suffixes describe code, not devices):

1. SASS runs on the same major with equal or higher minor; ``a`` SASS only on exactly
   its compute capability; ``f`` SASS on its family (same major, minor >= its own).
2. PTX ``compute_XY`` JIT-compiles on every device with cc >= X.Y; ``compute_XYa`` only
   on X.Y; ``compute_XYf`` on X.y with y >= Y.  LTO-IR is never loaded by the driver.
3. Preference: SASS before PTX (the driver JIT-compiles PTX only when no compatible cubin
   is present), then the highest compute capability not above the device, then ``a``
   over ``f`` over plain at the same compute capability, then file order.

AMD (device ``gfxNNN[:sramecc±][:xnack±]``; features not given are unknown, see
:mod:`devbin.targets.amdgpu.matching`):

1. Exact processor with compatible xnack/sramecc (an image's *any* matches either
   device setting, a set one must equal the device's); the most specific match first.
2. Else the family's generic target when its generic version is at least the minimum.
3. Bitcode, host code, SPIR-V and other data are never loaded as device code.

Verdicts: ``chosen`` (the image the driver loads), ``usable`` (would load, but another
is preferred), ``rejected`` (cannot load on this device) and ``other`` (not an image for
this device's vendor, e.g. an AMDGPU code object when the device is NVIDIA).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from devbin.errors import UsageError, short
from devbin.images.address import Address, Entry, Member, SectionStep
from devbin.images.containers import format_named
from devbin.images.record import PTX, BareElf, Image
from devbin.images.scan import scan, scan_bytes
from devbin.targets.archnames import canonical_arch, suggestions
from devbin.targets.registry import VENDORS, object_kinds, vendor_named, vendor_of_device
from devbin.targets.vendor import Device, Vendor, Verdict

__all__ = ["Candidate", "Device", "Module", "NoImageError", "Selection", "decide", "module_of",
           "parse_device", "select"]

CHOSEN, USABLE, REJECTED, OTHER = "chosen", "usable", "rejected", "other"
#: Kinds whose architecture names them in a list of what a package holds (code the vendors' drivers load).
_ARCH_LABELLED = object_kinds() | {PTX}

_NOT_CODE = {
    "bitcode": "LLVM bitcode: must be compiled first, no runtime loads it",
    "host": "host code, not a device image",
    "fatbin": "a CUDA fatbin nested in an LLVM container: not opened here",
    "spirv": "SPIR-V: not loaded by the CUDA or ROCm drivers",
    "data": "unrecognised data (a legacy pre-ELF cubin included), not a device image",
}


class NoImageError(UsageError):
    """The package holds no image the device can load (a :class:`devbin.errors.UsageError`)."""


def parse_device(text: str) -> Device:
    """``sm_86``, ``sm_90a``, ``sm_100f``, ``8.6`` (NVIDIA) or ``gfx90a:xnack+``, ``gfx1101`` (AMD).

    Any case (``SM_90``, ``gfx90A``); a name of the architecture tables only
    (:func:`devbin.targets.archnames.canonical_arch`).  UsageError for anything else, naming the device
    probably meant (``sm90``: "did you mean sm_90?").
    """
    if not isinstance(text, str) or not text.strip():
        raise UsageError("empty device name (expected sm_XY or gfxNNN[:xnack±][:sramecc±])")
    t = text.strip().lower()
    for vendor in VENDORS:
        if vendor.owns_device(t):
            if t.startswith(vendor.arch_prefixes):
                canonical_arch(t)  # an unknown sm_900 or gfx9000: refused with the name meant
            return vendor.parse_device(t, suggestions)
    prefixes = tuple(p for v in VENDORS for p in v.arch_prefixes[:1])  # device names: the first (SASS) prefix
    meant = [n for n in suggestions(t) if n.startswith(prefixes)]
    if meant:
        raise UsageError(f"unknown device {text!r}; did you mean {' or '.join(meant)}?")
    raise UsageError(f"unknown device {text!r}: expected an NVIDIA sm_XY (e.g. sm_86, sm_90a) "
                     "or an AMDGPU gfxNNN[:sramecc±][:xnack±] (e.g. gfx90a:xnack+)")


@dataclass(frozen=True, slots=True)
class Candidate:
    """An image with its verdict (``chosen``/``usable``/``rejected``/``other``) and why.

    ``image`` is the scanned :class:`~devbin.images.Image`, its ``arch`` as the loader sees
    it (see :func:`decide`); ``module`` the unit it belongs to (:func:`module_of`);
    ``generic_version`` its AMD generic version (:func:`generic_version`).
    """

    image: Image
    verdict: str
    reason: str
    jit: bool = False  # PTX, JIT-compiled by the driver when chosen
    rank: tuple[int, ...] = field(default=(), compare=False, repr=False)
    module: str = ""
    generic_version: int = 1

    @property
    def name(self) -> str:
        """The image's address, as ``devbin list`` prints it."""
        return str(self.image.address)

    @property
    def arch(self) -> str:
        return self.image.arch

    @property
    def kind(self) -> str:
        return self.image.kind

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {**self.image.to_dict(), "module": self.module}
        if self.arch.split(":", 1)[0].endswith("-generic"):
            d["generic_version"] = self.generic_version
        return {**d, "verdict": self.verdict, "reason": self.reason, "jit": self.jit}


@dataclass(frozen=True, slots=True)
class Module:
    """One unit the driver loads: its images and the one chosen (None when none loads).

    ``relevant``: it holds images of the device's vendor (a CUDA fatbin is not a failure
    on an AMD device, it is just not for it).
    """

    name: str
    candidates: tuple[Candidate, ...]
    chosen: Candidate | None
    relevant: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "relevant": self.relevant,
                "chosen": self.chosen.name if self.chosen is not None else None}


@dataclass(frozen=True, slots=True)
class Selection:
    """The decision for one device over a package.

    ``chosen`` is the chosen image of the first module that has one (the answer for a
    package of one fatbin or bundle); ``choices`` has one per module; ``jit`` is True
    when a chosen image is PTX.  ``ok`` says every module with images for the device's
    vendor has a choice, and there is at least one.
    """

    source: str
    device: Device
    candidates: tuple[Candidate, ...]
    modules: tuple[Module, ...]
    chosen: Candidate | None
    jit: bool

    @property
    def choices(self) -> tuple[Candidate, ...]:
        return tuple(m.chosen for m in self.modules if m.chosen is not None)

    @property
    def ok(self) -> bool:
        rel = [m for m in self.modules if m.relevant]
        return bool(rel) and all(m.chosen is not None for m in rel)

    def error(self) -> NoImageError | None:
        """The error to report when not :attr:`ok` (one line, naming what the package holds)."""
        if self.ok:
            return None
        vendor = vendor_of_device(self.device).device_title
        rel = [m for m in self.modules if m.relevant]
        if not rel:
            held = _holdings(self.candidates)
            return NoImageError(f"no {vendor} image for {self.device.name}; it holds {held}", where=self.source)
        bad = [m for m in rel if m.chosen is None]
        more = f" (and {len(bad) - 1} more modules)" if len(bad) > 1 else ""
        return NoImageError(f"no image compatible with {self.device.name} in {short(bad[0].name)}; it holds "
                            f"{_holdings(bad[0].candidates)}{more}", where=self.source)

    def explain(self) -> list[str]:
        """One line per candidate: name, arch, verdict, reason (tab-separated columns aligned)."""
        rows = [(c.name, c.arch or "-", c.verdict, c.reason) for c in self.candidates]
        w0 = max((len(r[0]) for r in rows), default=0)
        w1 = max((len(r[1]) for r in rows), default=0)
        return [f"{n:<{w0}}  {a:<{w1}}  {v:<8}  {r}" for n, a, v, r in rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "device": self.device.to_dict(),
            "ok": self.ok,
            "chosen": self.chosen.to_dict() if self.chosen is not None else None,
            "jit": self.jit,
            "choices": [c.to_dict() for c in self.choices],
            "modules": [m.to_dict() for m in self.modules],
            "candidates": [c.to_dict() for c in self.candidates],
            "error": str(err) if (err := self.error()) is not None else None,
        }


def _holdings(cands: Iterable[Candidate]) -> str:
    seen: list[str] = []
    for c in cands:
        label = short(c.arch if c.arch and c.kind in _ARCH_LABELLED else f"{c.kind} {c.arch}".strip())
        if label not in seen:
            seen.append(label)
    return ", ".join(seen) if seen else "no device images"


# --------------------------------------------------------------------------- the decision


def _passed_over(c: Candidate, chosen: Candidate, vendor: Vendor) -> str:
    if c.arch and chosen.arch == c.arch:
        return "an earlier copy is taken"
    return vendor.passed_over(Verdict(True, chosen.reason, chosen.rank, chosen.jit), chosen.arch,
                              Verdict(True, c.reason, c.rank, c.jit), c.arch)


def decide(images: Sequence[Image], device: Device | str, *, source: str = "") -> Selection:
    """Decide over ``images`` (in file order) for ``device``; see the module docstring.

    Each image is judged as the loader sees it: an AMDGPU code object's xnack/sramecc and
    generic version from its ``e_flags``, a bare cubin's ``a`` variant from ``.nv.compat``,
    PTX that an LLVM container files under ``sm_XY`` as ``compute_XY`` (the candidate's
    image carries that ``arch``).  Images group into modules by :func:`module_of`.
    """
    dev = parse_device(device) if isinstance(device, str) else device
    dev_vendor = vendor_of_device(dev)
    order: list[str] = []
    by_module: dict[str, list[int]] = {}
    judged: list[Candidate] = []
    for i, scanned in enumerate(images):
        module = module_of(scanned)
        img, generic = _loader_view(scanned)
        by_module.setdefault(module, []).append(i)
        if module not in order:
            order.append(module)
        vendor = vendor_named(img.vendor)
        if vendor is not dev_vendor:
            why = (f"an {vendor.device_title} image, the device is {dev_vendor.device_title}" if vendor is not None
                   else _NOT_CODE.get(img.kind, f"{img.kind} image: not device code"))
            judged.append(Candidate(img, OTHER, why, module=module, generic_version=generic))
            continue
        if img.kind not in vendor.loadable_kinds:
            why = _NOT_CODE.get(img.kind, f"{img.kind} image: not device code")
            judged.append(Candidate(img, REJECTED, why, False, (i,), module, generic))
            continue
        picked = _picked_member(img)
        v = (vendor.judge(img.kind, img.arch, dev, generic) if picked is None
             else vendor.judge_member(picked[1], img.kind, img.arch, dev, generic))
        if not v.ok:
            v = vendor.refused_fallback(img.kind, v, scanned.data if isinstance(scanned.native, BareElf) else None)
        judged.append(Candidate(img, USABLE if v.ok else REJECTED, v.reason, v.jit, (*v.rank, i), module, generic))
    modules: list[Module] = []
    for name in order:
        idx = by_module[name]
        usable = [i for i in idx if judged[i].verdict == USABLE]
        best = min(usable, key=lambda i: judged[i].rank) if usable else None
        if best is not None:
            b = judged[best]
            extra = " (JIT-compiled by the driver)" if b.jit else ""
            judged[best] = replace(b, verdict=CHOSEN, reason=b.reason + extra)
            for i in usable:
                if i != best:
                    c = judged[i]
                    judged[i] = replace(c, reason=f"{c.reason}; not chosen: "
                                                  f"{_passed_over(c, judged[best], dev_vendor)}")
        cands = tuple(judged[i] for i in idx)
        relevant = any(judged[i].verdict != OTHER for i in idx)
        modules.append(Module(name, cands, judged[best] if best is not None else None, relevant))
    chosen = next((m.chosen for m in modules if m.chosen is not None), None)
    jit = any(m.chosen is not None and m.chosen.jit for m in modules)
    return Selection(source, dev, tuple(judged), tuple(modules), chosen, jit)


# --------------------------------------------------------------------------- from scanned images


def module_of(image: Image) -> str:
    """The module ``image`` belongs to, named from its address: the container it sits in.

    A fatbin or a bundle is one module (``lib.so@.nv_fatbin#2``: the address without the entry
    number); the OffloadBinaries back to back in one file or section make
    one module (LLVM <= 22 writes one image per blob; the runtime picks among all of them, as
    among a fatbin's entries: ``x.o@.llvm.offloading``); the ``__CLANG_OFFLOAD_BUNDLE__<id>``
    sections of one object are one bundle (``k.o@__CLANG_OFFLOAD_BUNDLE__*``); a bare or wrapped
    image is its own module (its address); the members of an archive its vendor's runtime picks one
    from (:meth:`~devbin.targets.vendor.Vendor.picks_member`: an ``ocloc`` fat archive) are one module, the
    archive (``k.ar``, ``lib.so@__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen#0.0``); a format may name its
    modules itself (``ContainerFormat.module_name``: a SYCL library's images of one kernel set); another
    member of what an entry decodes to belongs to that entry (``lib.so@sec#0.1``): the runtime hands the
    entry over whole and the device's loader picks one member of it."""
    address = image.address
    entry = address.entry
    fmt = format_named(image.container)
    if fmt is not None and fmt.module_name is not None:
        return fmt.module_name(image)
    picked = _picked_member(image)
    if picked is not None:
        return str(picked[0])
    inner = max((k for k, s in enumerate(address.steps) if isinstance(s, Entry)), default=None)
    if entry is None and inner is not None:
        return str(Address(address.path, address.steps[:inner + 1]))
    if entry is None:
        prefix = fmt.object_section_prefix if fmt is not None else ""
        if prefix and address.section.startswith(prefix):
            return f"{address.file}{SectionStep(prefix)}*"
        return str(address)
    parent = str(Address(address.path, address.steps[:-1]))
    if fmt is not None and fmt.blobs_one_module:
        return parent
    return f"{parent}#{entry.container}"


def _picked_member(image: Image) -> tuple[Address, str] | None:
    """``(archive address, member name)`` when ``image`` is, or sits in, an archive member its vendor's runtime
    picks by name (:meth:`~devbin.targets.vendor.Vendor.picks_member`), else None."""
    address = image.address
    last = max((i for i, s in enumerate(address.steps) if isinstance(s, Member)), default=-1)
    vendor = vendor_named(image.vendor)
    if last < 0 or vendor is None:
        return None
    step = address.steps[last]
    assert isinstance(step, Member)
    return (Address(address.path, address.steps[:last]), step.name) if vendor.picks_member(step.name) else None


def _loader_view(image: Image) -> tuple[Image, int]:
    """``image`` with its arch as the loader sees it, and its generic version (see :func:`decide`):
    its vendor's :meth:`~devbin.targets.vendor.Vendor.loader_arch`."""
    vendor = vendor_named(image.vendor)
    if vendor is None:
        return image, 1
    data = image.data if isinstance(image.native, BareElf) else None
    arch, version = vendor.loader_arch(image.kind, image.arch, lambda: image.head(64), data)
    return (image if arch == image.arch else replace(image, arch=arch)), version


def select(source: str | os.PathLike[str] | bytes | bytearray | memoryview, device: Device | str, *,
           name: str = "", strict: bool = True) -> Selection:
    """The image(s) a driver would load from ``source`` on ``device``.

    ``source`` is a path (file or folder) or the bytes of a file.  With ``strict`` (the
    default) a package with no loadable image raises :class:`NoImageError` (a
    :class:`devbin.errors.UsageError`) naming what it holds; otherwise the returned
    :class:`Selection` says so (``ok`` False, ``error()``).  A bad device name raises
    UsageError.
    """
    dev = parse_device(device) if isinstance(device, str) else device
    if isinstance(source, (bytes, bytearray, memoryview)):
        where = name or "<bytes>"
        images = list(scan_bytes(source, where, all=True))
    else:
        where = name or str(source)
        images = list(scan([Path(source)], all=True))
    sel = decide(images, dev, source=where)
    if strict and (err := sel.error()) is not None:
        raise err
    return sel
