"""Image selection: which device image of a package a driver would load on a given GPU.

:func:`select` finds every device image in a file, folder or buffer (with
:mod:`devbin.discover`), groups them into *modules* (one fatbin, one OffloadBinary,
one offload bundle, or one bare cubin / code object: the unit a runtime hands to the
driver and the driver picks one image from), and decides per module, with a verdict
and a one-phrase reason for every image.  :func:`decide` does the same for images
described by hand (what the table tests use).

The rules live beside the formats: NVIDIA in :mod:`devbin.targets.nvidia.archs`, AMD in
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devbin.binary import ByteView
from devbin.errors import DeviceBinaryError, UsageError, short
from devbin.targets.amdgpu import matching as amd
from devbin.targets.amdgpu.targetid import TargetId, parse_target_id, supported_features
from devbin.targets.nvidia import archs as nv

if TYPE_CHECKING:
    from devbin.discover import Found

__all__ = ["Candidate", "Device", "Image", "Module", "NoImageError", "Selection", "decide", "parse_device",
           "select"]

CHOSEN, USABLE, REJECTED, OTHER = "chosen", "usable", "rejected", "other"

_VENDOR_NAMES = {"nvidia": "NVIDIA", "amdgpu": "AMDGPU"}
_NV_KINDS = frozenset({"elf", "ptx", "ltoir", "oldcubin"})
_NOT_CODE = {
    "bitcode": "LLVM bitcode: must be compiled first, no runtime loads it",
    "host": "host code, not a device image",
    "fatbin": "a CUDA fatbin nested in an LLVM container: not opened here",
    "spirv": "SPIR-V: not loaded by the CUDA or ROCm drivers",
    "data": "unrecognised data, not a device image",
    "oldcubin": "legacy (pre-ELF) cubin format: not selected",
}


class NoImageError(UsageError):
    """The package holds no image the device can load (a :class:`devbin.errors.UsageError`)."""


@dataclass(frozen=True, slots=True)
class Device:
    """The GPU to select for: ``vendor`` ``nvidia`` (with ``cc``) or ``amdgpu`` (with ``target``)."""

    name: str
    vendor: str
    cc: tuple[int, int] | None = None
    target: TargetId | None = None
    note: str = ""

    @property
    def description(self) -> str:
        if self.cc is not None:
            return f"{self.name} (NVIDIA, compute capability {self.cc[0]}.{self.cc[1]})"
        return f"{self.name} (AMDGPU {self.target})"

    def __str__(self) -> str:
        return self.name

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "vendor": self.vendor,
                "compute_capability": f"{self.cc[0]}.{self.cc[1]}" if self.cc else None,
                "target_id": str(self.target) if self.target is not None else None, "note": self.note}


def parse_device(text: str) -> Device:
    """``sm_86``, ``sm_90a``, ``sm_100f``, ``8.6`` (NVIDIA) or ``gfx90a:xnack+``, ``gfx1101`` (AMD).

    UsageError for anything else.
    """
    if not isinstance(text, str) or not text.strip():
        raise UsageError("empty device name (expected sm_XY or gfxNNN[:xnack±][:sramecc±])")
    t = text.strip()
    if t.startswith("gfx"):
        target = amd.parse_device(t)
        unknown = [f for f in supported_features(target.processor) if target.feature(f) is None]
        note = (f"{'/'.join(unknown)} not given: unknown, so images that set it load only conditionally"
                if unknown else "")
        return Device(t, "amdgpu", target=target, note=note)
    if t.startswith("sm_") or t[:1].isdigit():
        cc = nv.parse_device(t)
        note = ""
        if t[-1:] in ("a", "f"):
            note = f"{t} names the {cc[0]}.{cc[1]} GPU: the a/f suffix describes code, not devices"
        return Device(t, "nvidia", cc=cc, note=note)
    raise UsageError(f"unknown device {text!r}: expected an NVIDIA sm_XY (e.g. sm_86, sm_90a) "
                     "or an AMDGPU gfxNNN[:sramecc±][:xnack±] (e.g. gfx90a:xnack+)")


@dataclass(frozen=True, slots=True)
class Image:
    """One device image to decide on.

    ``kind`` as :class:`devbin.discover.Found` names it (``elf`` = cubin, ``ptx``,
    ``ltoir``, ``amdgpu``, ``bitcode``, ``host`` ...); ``arch`` its arch with the variant
    (``sm_90a``, ``compute_100f``) or AMD target id (``gfx90a:xnack+``); ``module`` the
    fatbin/bundle/file it belongs to (the driver picks one image per module);
    ``generic_version`` the AMD generic version (generic targets only).
    """

    name: str
    kind: str
    arch: str
    module: str = ""
    generic_version: int = 1
    triple: str = ""
    found: Found | None = field(default=None, compare=False, repr=False)

    @property
    def vendor(self) -> str:
        if self.kind in _NV_KINDS or self.arch.startswith(("sm_", "compute_", "lto_")) \
                or self.triple.startswith("nvptx"):
            return "nvidia"
        if self.kind == "amdgpu" or self.arch.startswith("gfx") or self.triple.startswith("amdgcn"):
            return "amdgpu"
        return ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "module": self.module, "kind": self.kind, "arch": self.arch}
        if self.arch.split(":", 1)[0].endswith("-generic"):
            d["generic_version"] = self.generic_version
        return d


@dataclass(frozen=True, slots=True)
class Candidate:
    """An image with its verdict (``chosen``/``usable``/``rejected``/``other``) and why."""

    image: Image
    verdict: str
    reason: str
    jit: bool = False  # PTX, JIT-compiled by the driver when chosen
    rank: tuple[int, ...] = field(default=(), compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.image.name

    @property
    def arch(self) -> str:
        return self.image.arch

    @property
    def kind(self) -> str:
        return self.image.kind

    def to_dict(self) -> dict[str, Any]:
        return {**self.image.to_dict(), "verdict": self.verdict, "reason": self.reason, "jit": self.jit}


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
        vendor = _VENDOR_NAMES[self.device.vendor]
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
        label = short(c.arch if c.arch and c.kind in ("elf", "ptx", "amdgpu") else f"{c.kind} {c.arch}".strip())
        if label not in seen:
            seen.append(label)
    return ", ".join(seen) if seen else "no device images"


# --------------------------------------------------------------------------- the decision


def _nv_image_arch(img: Image) -> nv.NvArch | str:
    """The parsed arch of an NVIDIA image, or a reason it has none."""
    arch = img.arch
    kind = {"elf": "sass", "ptx": "ptx", "ltoir": "ltoir"}.get(img.kind)
    if kind is None:
        return _NOT_CODE.get(img.kind, f"{img.kind} image: not device code")
    try:
        a = nv.parse_arch(arch)
    except UsageError:
        return f"unrecognised NVIDIA arch {arch!r}"
    # LLVM containers name PTX by its sm_XY target; fatbins name LTO-IR compute_XY.
    return nv.NvArch(a.major, a.minor, a.variant, kind)


def _judge_nvidia(img: Image, cc: tuple[int, int]) -> tuple[bool, str, tuple[int, ...], bool]:
    a = _nv_image_arch(img)
    if isinstance(a, str):
        return False, a, (), False
    ok, why = nv.runs_on(a, cc)
    return ok, why, tuple(-x for x in nv.preference(a)), a.kind == "ptx"


def _judge_amd(img: Image, dev: TargetId) -> tuple[bool, str, tuple[int, ...], bool]:
    if img.kind != "amdgpu":
        return False, _NOT_CODE.get(img.kind, f"{img.kind} image: not a code object"), (), False
    try:
        t = parse_target_id(img.arch)
    except DeviceBinaryError:
        return False, f"unrecognised AMDGPU target {img.arch!r}", (), False
    m = amd.match(t, dev, generic_version=img.generic_version)
    return m.ok, m.reason, m.rank, False


def _passed_over(c: Candidate, chosen: Candidate, vendor: str) -> str:
    if chosen.arch == c.arch:
        return "an earlier copy is taken"
    if vendor == "nvidia":
        if chosen.jit != c.jit:
            return "SASS preferred over PTX (no JIT)"
        if chosen.rank[1:3] != c.rank[1:3]:
            return f"{chosen.arch} is closer to the device"
        return f"{chosen.arch} is more specific"
    # AMD rank: (generic tier, conditional count, -pinned, off-default count, -generic version, index)
    a, b = chosen.rank, c.rank
    if a[0] != b[0]:
        return f"the exact processor image {chosen.arch} comes before the generic target"
    if a[1] != b[1]:
        return f"{chosen.arch} matches for sure"
    if a[2] != b[2]:
        return f"{chosen.arch} is a more specific match"
    if a[3] != b[3]:
        return f"{chosen.arch} matches ROCm's default (XNACK off unless HSA_XNACK=1)"
    if a[4] != b[4]:
        return f"{chosen.arch} has the higher generic version"
    return "an earlier image is taken"


def decide(images: Sequence[Image], device: Device | str, *, source: str = "") -> Selection:
    """Decide over ``images`` (in file order) for ``device``; see the module docstring."""
    dev = parse_device(device) if isinstance(device, str) else device
    vendor_name = _VENDOR_NAMES[dev.vendor]
    order: list[str] = []
    by_module: dict[str, list[int]] = {}
    judged: list[Candidate] = []
    for i, img in enumerate(images):
        by_module.setdefault(img.module, []).append(i)
        if img.module not in order:
            order.append(img.module)
        if img.vendor != dev.vendor:
            other = _VENDOR_NAMES.get(img.vendor)
            why = (f"an {other} image, the device is {vendor_name}" if other
                   else _NOT_CODE.get(img.kind, f"{img.kind} image: not device code"))
            judged.append(Candidate(img, OTHER, why))
            continue
        if dev.vendor == "nvidia":
            assert dev.cc is not None
            ok, why, rank, jit = _judge_nvidia(img, dev.cc)
        else:
            assert dev.target is not None
            ok, why, rank, jit = _judge_amd(img, dev.target)
        judged.append(Candidate(img, USABLE if ok else REJECTED, why, jit, (*rank, i)))
    modules: list[Module] = []
    for name in order:
        idx = by_module[name]
        usable = [i for i in idx if judged[i].verdict == USABLE]
        best = min(usable, key=lambda i: judged[i].rank) if usable else None
        if best is not None:
            b = judged[best]
            extra = " (JIT-compiled by the driver)" if b.jit else ""
            judged[best] = Candidate(b.image, CHOSEN, b.reason + extra, b.jit, b.rank)
            for i in usable:
                if i != best:
                    c = judged[i]
                    judged[i] = Candidate(c.image, USABLE, f"{c.reason}; not chosen: "
                                          f"{_passed_over(c, judged[best], dev.vendor)}", c.jit, c.rank)
        cands = tuple(judged[i] for i in idx)
        relevant = any(judged[i].verdict != OTHER for i in idx)
        modules.append(Module(name, cands, judged[best] if best is not None else None, relevant))
    chosen = next((m.chosen for m in modules if m.chosen is not None), None)
    jit = any(m.chosen is not None and m.chosen.jit for m in modules)
    return Selection(source, dev, tuple(judged), tuple(modules), chosen, jit)


# --------------------------------------------------------------------------- from discovered images


def _module_name(f: Found) -> str:
    """The module an image belongs to.  OffloadBinaries back to back (LLVM ≤ 22 writes one image
    per blob) make one module: the runtime picks among all of them, as among a fatbin's entries."""
    if f.fatbin_index is None:
        return f.path
    if f.container_format == "offload":
        return f.path if f.container == "offload" else f"{f.path}:{f.container}"
    if f.container in ("file", "ar", "zip", "bundle"):
        return f"{f.path}[{f.fatbin_index}]"
    return f"{f.path}:{f.container}[{f.fatbin_index}]"


def _amd_elf_facts(f: Found) -> tuple[int, int, int] | None:
    """(EI_ABIVERSION, e_flags, EI_CLASS) of an AMDGPU code object, or None when unreadable."""
    try:
        view = f.head(64)  # the ELF header: a compressed bundle's entry is not decoded whole for it
    except DeviceBinaryError:
        return None
    v = ByteView(view, fmt="elf")
    try:
        if not v.startswith(b"\x7fELF"):
            return None
        ei_class = v.u8(4)
        return v.u8(8), v.u32(48 if ei_class == 2 else 36), ei_class
    except DeviceBinaryError:
        return None


_XNACK_V4 = {0x100: None, 0x200: False, 0x300: True}
_SRAMECC_V4 = {0x400: None, 0x800: False, 0xC00: True}


def _amd_image(f: Found) -> tuple[str, int]:
    """The code object's target id (features from ``e_flags`` when COV4+, the loader's view)
    and generic version (``e_flags`` bits 24..31)."""
    try:
        tid = parse_target_id(f.arch)
    except DeviceBinaryError:
        return f.arch, 1
    facts = _amd_elf_facts(f)
    if facts is None:
        return str(tid), 1
    abi, flags, _cls = facts
    sramecc, xnack = tid.sramecc, tid.xnack
    if abi >= 2:  # code object v4+: two-bit states (reference §4.1)
        xnack = _XNACK_V4.get(flags & 0x300, tid.xnack)
        sramecc = _SRAMECC_V4.get(flags & 0xC00, tid.sramecc)
    elif abi == 1:  # code object v3: one bit each, set = on; clear read as any
        xnack = True if flags & 0x100 else tid.xnack
        sramecc = True if flags & 0x200 else tid.sramecc
    version = (flags >> 24) & 0xFF if tid.is_generic else 1
    return str(TargetId(tid.processor, sramecc, xnack)), version


def _nv_bare_arch(f: Found) -> str:
    """A bare cubin's arch including ``a`` (``.nv.compat`` attribute 9, or the old e_flags bit)."""
    try:
        from devbin.binary import ByteView
        from devbin.formats.elf.reader import ElfFile
        from devbin.targets.nvidia.cubin import cubin_arch
        return cubin_arch(ElfFile(ByteView(f.image_view())))
    except DeviceBinaryError:
        return f.arch


def image_of(f: Found) -> Image:
    """The :class:`Image` for a discovered image."""
    module = _module_name(f)
    if f.container_format == "offload" and f.fatbin_index is not None:  # one module of many blobs
        name = f"{module}#{f.fatbin_index}.{f.entry_index}"
    else:
        name = f"{module}#{f.entry_index}" if f.entry_index is not None else module
    arch, generic_version = f.arch, 1
    if f.kind == "amdgpu":
        arch, generic_version = _amd_image(f)
    elif f.kind == "elf" and f.entry is None:
        arch = _nv_bare_arch(f)
    elif f.kind == "ptx" and arch.startswith("sm_"):
        arch = "compute_" + arch[3:]
    return Image(name, f.kind, arch, module, generic_version, f.triple, f)


def select(source: str | os.PathLike[str] | bytes | bytearray | memoryview, device: Device | str, *,
           name: str = "", strict: bool = True) -> Selection:
    """The image(s) a driver would load from ``source`` on ``device``.

    ``source`` is a path (file or folder) or the bytes of a file.  With ``strict`` (the
    default) a package with no loadable image raises :class:`NoImageError` (a
    :class:`devbin.errors.UsageError`) naming what it holds; otherwise the returned
    :class:`Selection` says so (``ok`` False, ``error()``).  A bad device name raises
    UsageError.
    """
    from devbin.discover import discover, discover_bytes

    dev = parse_device(device) if isinstance(device, str) else device
    if isinstance(source, (bytes, bytearray, memoryview)):
        where = name or "<bytes>"
        found = list(discover_bytes(source, where))
    else:
        where = name or str(source)
        found = list(discover([Path(source)]))
    sel = decide([image_of(f) for f in found], dev, source=where)
    if strict and (err := sel.error()) is not None:
        raise err
    return sel
