"""NVIDIA architecture names and which code runs on which GPU.

Names: ``sm_XY`` (SASS, a cubin), ``compute_XY`` (PTX, a virtual architecture) and
``lto_XY`` (LTO-IR), each optionally with a variant suffix: ``a`` (arch-specific,
``sm_90a``) or ``f`` (family-specific, ``sm_100f``).  The number is the compute
capability without its dot: ``XY`` = major ``X`` (all digits but the last) and minor
``Y`` (the last digit), so ``sm_86`` is 8.6 and ``sm_120`` is 12.0.

Rules (:func:`runs_on`), from NVIDIA's documentation:

* SASS ``sm_XY``: CUDA C++ Programming Guide, "Binary Compatibility": "a cubin object
  generated for compute capability X.y will only execute on devices of compute capability
  X.z where z >= y".  So: same major, equal or higher minor.
* PTX ``compute_XY``: same guide, "PTX Compatibility": PTX for a compute capability "can
  always be compiled to binary code of greater or equal compute capability", so it is
  JIT-compiled on any device with cc >= X.Y (later majors included).
* ``a`` variants (``sm_90a``, ``compute_90a``, ``sm_100a``): same guide, "Feature
  Availability" (architecture-specific feature set): such code runs only on devices of
  exactly that compute capability, neither forward nor backward compatible.
* ``f`` variants (``sm_100f``, ``compute_120f``): NVIDIA technical blog "NVIDIA Blackwell
  and NVIDIA CUDA 12.9 Introduce Family-Specific Architecture Features" (developer.nvidia.com,
  2025) and the programming guide's family-specific feature set: a family is the GPUs of
  one major version; ``XYf`` code runs on devices of major ``X`` with minor >= ``Y`` (``sm_100f`` on
  10.0 and 10.3, ``sm_103f`` only on 10.3, ``sm_120f`` on 12.0 and 12.1; ``sm_110f`` on
  11.0, sm_110 being the renumbered sm_101).  For SASS this equals the plain rule; for
  PTX it withholds the cross-major JIT (``compute_100f`` does not JIT on 12.0).
  CUDA 13 does not mark ``f`` in a cubin (llvm-project PR #151604): only
  the fatbin entry's flags carry it, so a bare ``f`` cubin reads as plain (same rule).
* LTO-IR is not loaded by the driver (nvJitLink links it), so it never runs as is.

A device given as ``sm_90a`` or ``sm_100f`` means the GPU of that compute capability:
the suffixes describe code, not devices (:func:`parse_device`).

This module is the one NVIDIA architecture table (:data:`SM_ARCHS`: every SM number a
CUDA release has named, with its compute capability, family and the variants it has) and
the one place the cubin ELF header is read for the architecture, in both header ABIs
(:func:`sm_from_e_flags`, :func:`is_arch_specific`):

* the old ABI (CUDA <= 12: ``EI_OSABI`` 0x33, ``EI_ABIVERSION`` 7): the SM in ``e_flags``
  bits 0..7 (``EF_CUDA_SM``), the ``a`` variant as ``EF_CUDA_ACCELERATORS`` (0x800), the
  virtual SM in bits 16..23 (LLVM ``llvm/include/llvm/BinaryFormat/ELF.h``, "NVPTX specific
  e_flags");
* the CUDA 13 ABI (``EI_OSABI`` 0x41, ``EI_ABIVERSION`` 8): the SM in bits 8..15; the ``a``
  variant is the ``.nv.compat`` attribute 0x09 with value 1.

SM numbers and their variants: ``nvcc --list-gpu-code`` (CUDA 13.0: sm_75 .. sm_121) and
the CUDA C++ Programming Guide, "Compute Capabilities" (older numbers, sm_101 renamed
sm_110 in CUDA 13).  Unknown numbers are kept: :func:`parse_arch` accepts any
``sm_XY``, and :func:`known_sm` says whether the table names it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from devbin.errors import UsageError
from devbin.formats.elf.constants import ELFOSABI_CUDA_V2  # OS/ABI of the CUDA 13 cubin header (0x41)

__all__ = [
    "EF_CUDA_ACCELERATORS", "ELFOSABI_CUDA_V2", "NV_COMPAT_ARCH_SPECIFIC", "SM_ARCHS", "NvArch", "SmArch",
    "is_arch_specific", "is_cuda13_header", "known_sm", "parse_arch", "parse_device", "preference", "runs_on",
    "sm_from_e_flags", "try_parse_arch",
]

#: The old header's ``a`` flag in ``e_flags`` (LLVM ``EF_CUDA_ACCELERATORS``: "set when using sm_90a").
EF_CUDA_ACCELERATORS = 0x800
#: The ``.nv.compat`` attribute that marks an ``a`` cubin in the CUDA 13 header ABI (value 1).
NV_COMPAT_ARCH_SPECIFIC = 0x09


@dataclass(frozen=True, slots=True)
class SmArch:
    """A known SM number: compute capability, family (the major version ``f`` code is tied to)
    and whether ``a`` / ``f`` variants of it exist."""

    sm: int
    major: int
    minor: int
    family: int
    has_a: bool
    has_f: bool

    @property
    def variants(self) -> tuple[str, ...]:
        """``("",)``, ``("", "a")`` or ``("", "a", "f")``."""
        return ("",) + (("a",) if self.has_a else ()) + (("f",) if self.has_f else ())


def _sm(sm: int) -> SmArch:
    major, minor = divmod(sm, 10)
    return SmArch(sm, major, minor, major, sm >= 90, sm >= 100)


#: Every SM number CUDA has named (Fermi sm_20 .. Blackwell sm_121), by number.
SM_ARCHS: dict[int, SmArch] = {a.sm: a for a in map(_sm, (
    20, 21, 30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89, 90,
    100, 101, 103, 110, 120, 121))}


def known_sm(sm: int) -> bool:
    """Whether ``sm`` (90 for sm_90) is an SM number of the table."""
    return sm in SM_ARCHS

_ARCH = re.compile(r"(sm|compute|lto)_([1-9][0-9]+)([af]?)")
_DOTTED = re.compile(r"([1-9][0-9]*)\.([0-9])")

_KINDS = {"sm": "sass", "compute": "ptx", "lto": "ltoir"}


def is_cuda13_header(ei_osabi: int, ei_abiversion: int) -> bool:
    """Whether a cubin header uses the CUDA 13 ABI (``EI_ABIVERSION`` >= 8, or ``EI_OSABI`` 0x41)."""
    return ei_abiversion >= 8 or ei_osabi == ELFOSABI_CUDA_V2


def sm_from_e_flags(ei_osabi: int, ei_abiversion: int, e_flags: int) -> int:
    """The SM number (90 for ``sm_90``) a cubin's ELF header names.

    Two header ABIs exist: the CUDA 13 one keeps the SM in ``e_flags`` bits 8..15; the older one
    (``EI_OSABI`` 0x33, ABI version 7) in the low byte.  This is the one place that rule is written.
    """
    if is_cuda13_header(ei_osabi, ei_abiversion):
        return (e_flags >> 8) & 0xFF
    return e_flags & 0xFF


def is_arch_specific(ei_osabi: int, ei_abiversion: int, e_flags: int,
                     compat: Iterable[tuple[int, int | None]] = ()) -> bool:
    """Whether a cubin is an ``a`` variant (sm_90a, sm_100a).

    ``compat`` holds the (attribute, value) pairs of its ``.nv.compat`` section: attribute 0x09 = 1
    marks it in either ABI (CUDA 13 writes only that); the old header ABI also says so with
    ``EF_CUDA_ACCELERATORS`` (0x800) in ``e_flags``.  The one place that rule is written.
    """
    if any(attr == NV_COMPAT_ARCH_SPECIFIC and value == 1 for attr, value in compat):
        return True
    return not is_cuda13_header(ei_osabi, ei_abiversion) and bool(e_flags & EF_CUDA_ACCELERATORS)


@dataclass(frozen=True, slots=True, order=True)
class NvArch:
    """A parsed NVIDIA arch name: ``kind`` (``sass``/``ptx``/``ltoir``), compute capability and variant."""

    major: int
    minor: int
    variant: str = ""  # "", "a" or "f"
    kind: str = "sass"

    @property
    def cc(self) -> tuple[int, int]:
        return (self.major, self.minor)

    @property
    def sm(self) -> int:
        """The number in the name: 90 for ``sm_90a``, 100 for ``compute_100f``."""
        return self.major * 10 + self.minor

    @property
    def known(self) -> bool:
        """Whether the table names this SM number and, for a variant, that variant."""
        a = SM_ARCHS.get(self.sm)
        return a is not None and self.variant in a.variants

    @property
    def cc_text(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def name(self) -> str:
        prefix = {"sass": "sm", "ptx": "compute", "ltoir": "lto"}[self.kind]
        return f"{prefix}_{self.major}{self.minor}{self.variant}"

    def __str__(self) -> str:
        return self.name


def parse_arch(text: str) -> NvArch:
    """Parse ``sm_86``, ``sm_90a``, ``compute_100f``, ``lto_90``; UsageError otherwise."""
    m = _ARCH.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise UsageError(f"not an NVIDIA arch name: {text!r} (expected sm_XY, compute_XY or lto_XY, "
                         "optionally with an a or f suffix)")
    major, minor = divmod(int(m.group(2)), 10)
    return NvArch(major, minor, m.group(3), _KINDS[m.group(1)])


def try_parse_arch(text: str) -> NvArch | None:
    """:func:`parse_arch`, or None when ``text`` is no NVIDIA arch name."""
    try:
        return parse_arch(text)
    except UsageError:
        return None


def parse_device(text: str) -> tuple[int, int]:
    """The compute capability of a device named ``sm_86``, ``sm_90a``, ``sm_100f`` or ``8.6``.

    ``a``/``f`` suffixes describe code, not GPUs: ``sm_90a`` is the 9.0 GPU.
    """
    t = text.strip() if isinstance(text, str) else ""
    if m := _DOTTED.fullmatch(t):
        return int(m.group(1)), int(m.group(2))
    if not t.startswith("sm_"):
        raise UsageError(f"not an NVIDIA device name: {text!r} (expected sm_XY, e.g. sm_86, or X.Y)")
    return parse_arch(t).cc


def runs_on(image: NvArch, device: tuple[int, int]) -> tuple[bool, str]:
    """Whether ``image`` runs on a device of compute capability ``device``, and why (one phrase)."""
    dmaj, dmin = device
    dev = f"{dmaj}.{dmin}"
    what = {"sass": "SASS", "ptx": "PTX", "ltoir": "LTO-IR"}[image.kind]
    if image.kind == "ltoir":
        return False, f"LTO-IR {image.name} is linked by nvJitLink, the driver does not load it"
    if image.variant == "a":
        if image.cc == device:
            return True, f"arch-specific {what} {image.name} for exactly {image.cc_text} = device {dev}"
        return False, f"arch-specific {what} {image.name} runs only on exactly {image.cc_text}, device is {dev}"
    if image.variant == "f" or image.kind == "sass":
        rule = "family-specific " if image.variant == "f" else ""
        if image.major == dmaj and image.minor <= dmin:
            return True, f"{rule}{what} {image.name} runs on {image.major}.x with minor >= {image.minor}: device {dev}"
        if image.major != dmaj:
            return False, (f"{rule}{what} {image.name} runs only on major {image.major} "
                           f"(minor >= {image.minor}), device is {dev}")
        return False, f"{rule}{what} {image.name} needs minor >= {image.minor} on {image.major}.x, device is {dev}"
    # plain PTX: JIT on any device of equal or higher compute capability
    if image.cc <= device:
        return True, f"PTX {image.name} is JIT-compiled on cc >= {image.cc_text}: device {dev}"
    return False, f"PTX {image.name} needs cc >= {image.cc_text}, device is {dev}"


_VARIANT_RANK = {"a": 2, "f": 1, "": 0}


def preference(image: NvArch) -> tuple[int, int, int, int]:
    """Sort key, larger is better, among images that all run on one device.

    SASS before PTX (no JIT needed; the driver only JIT-compiles PTX when no compatible
    cubin is present, programming guide "Just-in-Time Compilation"), then the highest
    compute capability (the closest one not above the device, which uses the most of its
    features), then the most specific variant: ``a`` over ``f`` over plain, at equal
    compute capability (an assumption: NVIDIA does not document the tie).
    """
    return (1 if image.kind == "sass" else 0, image.major, image.minor, _VARIANT_RANK.get(image.variant, 0))
