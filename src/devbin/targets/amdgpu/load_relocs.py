"""Step 2b for AMDGPU (the AMDGPU load back end's relocations, :mod:`devbin.targets.amdgpu.load`): apply a
code object's dynamic relocations in device memory, as ROCr does.

ROCr's loader (``loader/executable.cpp``; reference §4.6 and §5.2) applies exactly these
five, each at ``base + r_offset``:

=====================  ====  =====  ==============================
``R_AMDGPU_ABS32_LO``     1  w32    ``(S + A) & 0xffffffff``
``R_AMDGPU_ABS32_HI``     2  w32    ``(S + A) >> 32``
``R_AMDGPU_ABS64``        3  w64    ``S + A``
``R_AMDGPU_ABS32``        6  w32    ``S + A``
``R_AMDGPU_RELATIVE64``  13  w64    ``B + A`` (B: the code object's load base)
=====================  ====  =====  ==============================

``S`` is ``base + st_value`` for a symbol the code object defines, and for an undefined one
the address of its definition in another code object of the executable (resolved by
:meth:`devbin.load.Executable.freeze`; a weak reference left unresolved is 0).  So the GOT
slot through which a user's kernel calls a library's default-visibility device function
receives ``library_base + f``: the cross-object call ROCr cannot make today (it only
resolves kernels and variables across code objects).
"""

from __future__ import annotations

from collections.abc import Callable

from devbin.errors import UsageError
from devbin.formats.elf import constants as C
from devbin.load.indexed import DynReloc, IndexedCodeObject
from devbin.load.relocation import AppliedReloc
from devbin.load.simulated import SimulatedDevice

__all__ = ["RELOC_WIDTH", "apply_relocations", "plan_relocations", "relocation_value"]

R_NONE, R_ABS32_LO, R_ABS32_HI = C.R_AMDGPU_NONE, C.R_AMDGPU_ABS32_LO, C.R_AMDGPU_ABS32_HI
R_ABS64, R_ABS32, R_RELATIVE64 = C.R_AMDGPU_ABS64, C.R_AMDGPU_ABS32, C.R_AMDGPU_RELATIVE64
#: The dynamic relocations ROCr applies, and the bytes each writes (reference §4.6).
RELOC_WIDTH = {R_NONE: 0, R_ABS32_LO: 4, R_ABS32_HI: 4, R_ABS64: 8, R_ABS32: 4, R_RELATIVE64: 8}

_MASK64 = (1 << 64) - 1


def relocation_value(rtype: int, s: int, a: int, b: int) -> int:
    """The value a relocation of type ``rtype`` writes, for symbol value ``s``, addend ``a``, base ``b``."""
    if rtype == R_RELATIVE64:
        return (b + a) & _MASK64
    v = (s + a) & _MASK64
    if rtype == R_ABS32_LO:
        return v & 0xFFFFFFFF
    if rtype == R_ABS32_HI:
        return v >> 32
    if rtype == R_ABS32:
        return v & 0xFFFFFFFF
    if rtype == R_ABS64:
        return v
    raise UsageError(f"relocation type {rtype} is not applied by the HSA loader")


def apply_relocations(obj: IndexedCodeObject, base: int, device: SimulatedDevice,
                      resolve: Callable[[str], tuple[int, str] | None]) -> list[AppliedReloc]:
    """Apply ``obj``'s dynamic relocations at ``base``; ``resolve(name)`` gives (address, defining object)."""
    out = []
    for r in obj.relocations:
        out.append(_apply(r, obj, base, device, resolve))
    return out


def _resolved(r: DynReloc, obj: IndexedCodeObject, base: int, addend: int,
              resolve: Callable[[str], tuple[int, str] | None]) -> tuple[int, str | None]:
    """The value to write for ``r`` and the code object its symbol lives in."""
    s, owner = 0, None
    if r.symbol is not None:
        hit = resolve(r.symbol)
        if hit is not None:
            s, owner = hit
        elif not r.weak:
            raise UsageError(f"{obj.name}: {r.site}: {r.symbol!r} is not defined in the executable")
    elif r.local is not None:
        s, owner = base + r.local, obj.name
    else:
        owner = obj.name
    return relocation_value(r.rtype, s, addend, base), owner


def _apply(r: DynReloc, obj: IndexedCodeObject, base: int, device: SimulatedDevice,
           resolve: Callable[[str], tuple[int, str] | None]) -> AppliedReloc:
    at = base + r.offset
    addend = r.addend if r.addend is not None else int.from_bytes(device.read(at, r.width), "little", signed=True)
    value, owner = _resolved(r, obj, base, addend, resolve)
    device.write_uint(at, value, r.width)
    return AppliedReloc(at, r.offset, r.type_name, r.width, value, r.name or None, addend, owner, r.site)


def plan_relocations(obj: IndexedCodeObject, base: int,
                     resolve: Callable[[str], tuple[int, str] | None]) -> list[AppliedReloc]:
    """What :func:`apply_relocations` would write, computed without device memory (implicit addends
    read from the code object's bytes): lazy loading applies these one unit at a time."""
    out = []
    for r in obj.relocations:
        addend = r.addend if r.addend is not None else int.from_bytes(obj.file_bytes(r.offset, r.width), "little",
                                                                       signed=True)
        value, owner = _resolved(r, obj, base, addend, resolve)
        out.append(AppliedReloc(base + r.offset, r.offset, r.type_name, r.width, value, r.name or None, addend, owner,
                                r.site))
    return out
