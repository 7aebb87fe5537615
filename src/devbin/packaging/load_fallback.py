"""Prune never silently takes from a kept GPU the last image it can load in a container.

The runtime hands the driver one container at a time (a fatbin, an offload bundle, the
OffloadBinaries of one section: :func:`devbin.packaging.selection.module_of`) and the driver loads
one image of it for the GPU, by its load rule (:func:`devbin.packaging.selection.decide`: NVIDIA
SASS of the same major and a minor not above the GPU's, else PTX of a virtual arch not above it,
JIT-compiled; CUDA C++ Programming Guide, "Application Compatibility"; AMD the exact processor,
else its generic target).  Pruning by name can empty a container of everything a kept GPU loads:
``libcufft.so.11`` (nvidia-cufft-cu12 11.4.1.4) holds 8,115 fatbins whose only image is PTX of
``compute_50`` to ``compute_86``, which ``--keep sm_90`` does not name, yet an sm_90 GPU given one of
them runs it by JIT-compiling that PTX.

So for every kept GPU (``--keep``: each name that names a GPU, ``sm_90``, ``gfx90a``, not
``compute_90``; ``--drop``: the GPU of each code object the selection keeps) and every container,
:func:`protect` keeps the image the driver loads there from the input (a JIT fallback, or SASS of a
lower minor: sm_86 runs sm_80), whatever the names say of it, and counts it: the pruned file loads
on each kept GPU what the input loaded.  Except where the user named that image's removal:
``--ptx none`` (no PTX, nvprune's rule) for PTX, ``--spirv none`` for SPIR-V, or a ``--drop`` name equal
to the image's arch;
where the GPU then loads nothing of the container, the container is counted as lost and a note
says those kernels no longer load.

LTO-IR is never loaded by a driver, so the load rule keeps none; but a library may link it at run
time with nvJitLink (cuFFT's LTO callbacks: 11,651 of its fatbins hold only ``compute_50`` LTO-IR),
so the containers a prune empties of LTO-IR are counted in a note that says how to keep them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from devbin.errors import UsageError
from devbin.images.address import Address
from devbin.images.record import CUBIN, LTO_IR, PTX, SPIRV, Image
from devbin.packaging.selection import CHOSEN, USABLE, Device, decide, module_of, parse_device
from devbin.targets.registry import object_kinds

__all__ = ["Fallback", "kept_gpus", "protect"]


@dataclass(frozen=True, slots=True)
class Fallback:
    """What :func:`protect` did: ``kept`` the images kept beyond the selection (each the only code a
    kept GPU loads in its container), ``lost`` the containers where a kept GPU loaded an image before
    and loads none after (the user asked for it: ``--ptx none`` or a ``--drop`` name), ``lost_images``
    the images those GPUs loaded there; ``kept_for``/``lost_for`` the names of the GPUs concerned."""

    kept: tuple[Image, ...] = ()
    lost: tuple[str, ...] = ()
    lost_images: tuple[Image, ...] = ()
    kept_for: tuple[str, ...] = ()
    lost_for: tuple[str, ...] = ()
    #: The LTO-IR of containers the prune empties: no driver loads LTO-IR (so no kept GPU lost it by the
    #: load rule), but a library may link it at run time with nvJitLink (cuFFT's LTO callbacks).
    emptied_lto: tuple[Image, ...] = ()
    emptied_lto_containers: int = 0

    def notes(self, ptx: str, spirv: str = "kept") -> list[str]:
        """One note for the images kept, one for the containers lost (without the file's name); ``spirv``: the
        SPIR-V policy (``none`` names the SPIR-V a kept device loaded, where the runtime JIT-compiles it)."""
        out: list[str] = []
        if self.kept:
            out.append(f"kept {len(self.kept):,} image(s) the selection drops ({_kinds(self.kept)}): the code "
                       f"{', '.join(self.kept_for)} loads from their containers (the driver's choice there"
                       + (", JIT-compiled" if any(i.kind == PTX for i in self.kept) else "")
                       + ")" + ("; --ptx none drops the PTX among them" if ptx != "none" else ""))
        if self.lost:
            by = " and ".join(dict.fromkeys("--ptx none" if ptx == "none" and i.kind == PTX else
                                            "--spirv none" if spirv == "none" and i.kind == SPIRV else "--drop"
                                            for i in self.lost_images))
            they, them = ("it", "it") if len(self.lost_for) == 1 else ("they", "them")
            out.append(f"{len(self.lost):,} container(s) no longer hold code {', '.join(self.lost_for)} can load: "
                       f"what {they} loaded there ({_kinds(self.lost_images)}) went by {by}; those kernels fail "
                       f"to load on {them}")
        if self.emptied_lto:
            archs = sorted({i.arch for i in self.emptied_lto})
            out.append(f"emptied {self.emptied_lto_containers:,} container(s) that held LTO-IR "
                       f"({_kinds(self.emptied_lto)}): no driver loads LTO-IR, but a library may link it at run "
                       f"time (nvJitLink; cuFFT's LTO callbacks do); to keep it, keep {','.join(archs)} too")
        return out


_KIND_NAMES = {PTX: "PTX", LTO_IR: "LTO-IR"}


def _kinds(images: Sequence[Image]) -> str:
    """``14,611 compute_50 PTX, 3 sm_80 cubin``: the images by arch and kind, most first."""
    n = Counter((i.arch, i.kind) for i in images)
    most = sorted(n.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{c:,} {arch} {_KIND_NAMES.get(kind, kind)}" for (arch, kind), c in most)


def _device(name: str, cache: dict[str, Device | None]) -> Device | None:
    """The GPU ``name`` names (``sm_90``, ``sm_90a``: the 9.0 GPU; ``gfx90a:xnack+``), or None
    (``compute_90`` names code, not a GPU)."""
    if name not in cache:
        try:
            cache[name] = parse_device(name)
        except UsageError:
            cache[name] = None
    return cache[name]


def kept_gpus(keep: Sequence[str] | None, kept_images: Sequence[Image]) -> list[Device]:
    """The GPUs a selection keeps: those its ``keep`` names name, or (``keep`` None: a ``--drop``) the GPU
    of each code object kept (what the device ELFs of the result are built for), one per GPU."""
    cache: dict[str, Device | None] = {}
    names = list(keep) if keep is not None else list(dict.fromkeys(i.arch for i in kept_images
                                                                    if i.kind in object_kinds()))
    out: dict[tuple[object, ...], Device] = {}
    for name in names:
        dev = _device(name, cache)
        if dev is not None:
            out.setdefault((dev.vendor, dev.cc, str(dev.target) if dev.target is not None else None), dev)
    return list(out.values())


def protect(images: Sequence[tuple[Image, bool]], gpus: Sequence[Device], *, ptx: str,
            named_drop: Callable[[Image], bool]) -> tuple[list[tuple[Image, bool]], Fallback]:
    """``images`` (every image in a container with whether the selection keeps it) with, in each
    container, the image each of ``gpus`` loads there from the input kept (module docstring).  ``ptx``
    ``none`` and ``named_drop`` (the image's arch is a ``--drop`` name itself) say which images stay
    dropped: the GPU's next choice among the others is kept instead, and a container where none is left
    is counted lost."""
    if all(k for _, k in images):
        return list(images), Fallback()
    kept = {i.address: k for i, k in images}
    every = [i for i, _ in images]
    modules: dict[str, list[Image]] = {}
    for i in every:
        modules.setdefault(module_of(i), []).append(i)
    added: dict[Address, Image] = {}
    lost: dict[str, Image] = {}
    kept_for: dict[str, None] = {}
    lost_for: dict[str, None] = {}
    for dev in gpus:
        cache: dict[tuple[tuple[str, str], ...], list[tuple[int, bool]]] = {}
        for name, members in modules.items():
            if all(kept[i.address] for i in members):
                continue  # nothing of it dropped: the GPU loads what it did
            choices = _choices(members, dev, cache)
            for pos, jit in choices:
                image = members[pos]
                if kept[image.address]:
                    if image.address in added:  # kept for another GPU: this one loads it too
                        kept_for.setdefault(dev.name)
                    break  # the GPU loads this one, as before or (its first choice asked away) instead
                if (ptx == "none" and jit) or named_drop(image):
                    continue
                kept[image.address] = True
                added[image.address] = image
                kept_for.setdefault(dev.name)
                break
            else:
                if choices:  # it loaded an image of the container before, and loads none now
                    lost.setdefault(name, members[choices[0][0]])
                    lost_for.setdefault(dev.name)
    emptied = [m for m in modules.values() if ptx != "none" and not any(kept[i.address] for i in m)
               and any(i.kind == LTO_IR for i in m)]  # --ptx none: no LTO-IR asked for
    lto = tuple(i for m in emptied for i in m if i.kind == LTO_IR)
    return ([(i, kept[i.address]) for i, _ in images],
            Fallback(tuple(added.values()), tuple(lost), tuple(lost.values()),
                     tuple(kept_for), tuple(lost_for), lto, len(emptied)))


#: Kinds whose loader view is their kind and arch alone (an AMDGPU code object's features come from its
#: ELF header): containers of only these with the same kinds and archs in the same order are decided once.
_BY_NAME_ALONE = (CUBIN, PTX, LTO_IR)


def _choices(members: list[Image], dev: Device, cache: dict[tuple[tuple[str, str], ...], list[tuple[int, bool]]]
             ) -> list[tuple[int, bool]]:
    """The images of one container that ``dev`` can load, as (position in ``members``, JIT-compiled), the
    driver's choice first (:func:`devbin.packaging.selection.decide`); empty when it loads none.  cuFFT's
    24,454 fatbins are 23 different lists of archs, so each list is decided once per GPU."""
    key = tuple((i.kind, i.arch) for i in members) if all(i.kind in _BY_NAME_ALONE for i in members) else None
    if key is not None and key in cache:
        return cache[key]
    (module,) = decide(members, dev).modules
    usable = sorted((c.rank, pos, c.jit) for pos, c in enumerate(module.candidates) if c.verdict in (CHOSEN, USABLE))
    out = [(pos, jit) for _, pos, jit in usable]
    if key is not None:
        cache[key] = out
    return out
