"""What a function uses: registers, stack, memory, spills, as one typed record.

:class:`Resources` is computed from a :class:`~devbin.model.Function`'s attributes, here and
nowhere else (``Function.resources``), so it is the same whether the function came from a
cubin, an AMDGPU code object or devbin's own sections.  ``None`` means the file does not say.

Which vendor field fills each field (the importers in :mod:`devbin.targets` store them as the
attributes named in brackets):

==================== ===================================================== ===================================
field                NVIDIA cubin (``cuobjdump -res-usage``)               AMDGPU code object (metadata note)
==================== ===================================================== ===================================
registers            REG: ``EIATTR_REGCOUNT``, or the ``.text.<f>``         ``.vgpr_count`` (VGPRs) [regs_general]
                     ``sh_info`` top byte [regs_general]
sgprs, vgprs, agprs  ``None``                                              ``.sgpr_count``, ``.vgpr_count``,
                                                                           ``.agpr_count`` [regs_scalar, regs_general,
                                                                           regs_accum]
stack                STACK: ``EIATTR_MIN_STACK_SIZE``, else                 ``None`` (scratch is ``local``)
                     ``EIATTR_MAX_STACK_SIZE`` [stack_size]
frame                ``EIATTR_FRAME_SIZE`` [frame_size]                    ``None``
dynamic_stack        stack size 0xFFFFFFFF (recursion) [dynamic_stack]     ``.uses_dynamic_stack`` [dynamic_stack]
shared               SHARED: ``.nv.shared.<f>`` bytes [shared_bytes]       ``.group_segment_fixed_size``
local                LOCAL: ``.nv.local.<f>`` bytes [private_bytes]        ``.private_segment_fixed_size``
constant_banks       CONSTANT[n]: ``.nv.constant<n>.<f>`` bytes            ``()``
                     [nvidia.constant_banks]
params               ``EIATTR_CBANK_PARAM_SIZE`` [param_bytes]             ``.kernarg_segment_size``
spill_instructions   spill/refill instructions ptxas marks in              ``None``
                     ``EIATTR_ANNOTATIONS`` [nvidia.spill_instructions]
sgpr_spills,         ``None``                                              ``.sgpr_spill_count``,
vgpr_spills                                                                ``.vgpr_spill_count``
max_threads          ``EIATTR_MAX_THREADS`` x*y*z (``__launch_bounds__``)  ``.max_flat_workgroup_size``
max_registers        ``EIATTR_MAXREG_COUNT`` [max_regs]                    ``None``
==================== ===================================================== ===================================

Units differ and are kept apart: ``spill_instructions`` counts instructions (NVIDIA cubins
record where ptxas put spill and refill code it marked, not ``ptxas -v``'s bytes; the registers a
recursive device function saves across its own call count in those bytes and are not marked, so
0 does not mean "no spill bytes": docs/API.md, footnote 2), ``sgpr_spills`` and ``vgpr_spills``
count registers (what LLVM records).

The vendor attribute ids read here are defined here (one place) and registered by the
importers that fill them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

from devbin.model.attributes import Attribute, AttrValue, StdAttr

__all__ = [
    "AMD_MAX_FLAT_WG", "AMD_SGPR_SPILL", "AMD_VGPR_SPILL", "NV_CONSTANT_BANKS", "NV_SPILL_INSTRUCTIONS", "Resources",
    "resources_of",
]

#: ``nvidia.constant_banks``: bank, bytes, bank, bytes ... of the function's ``.nv.constant<N>.<f>`` sections.
NV_CONSTANT_BANKS: Final = 0x105
#: ``nvidia.spill_instructions``: spill/refill instructions ptxas marked (``EIATTR_ANNOTATIONS`` kind 1).
NV_SPILL_INSTRUCTIONS: Final = 0x106
#: ``amdgpu.sgpr_spill_count`` / ``amdgpu.vgpr_spill_count`` (metadata note).
AMD_SGPR_SPILL: Final = 0x201
AMD_VGPR_SPILL: Final = 0x202
#: ``amdgpu.max_flat_workgroup_size`` (metadata note).
AMD_MAX_FLAT_WG: Final = 0x203


@dataclass(frozen=True, slots=True)
class Resources:
    """What one function uses (see the module docstring for where each number comes from).

    Counts are per thread (registers, stack, frame, local) or per block / work-group (shared);
    sizes in bytes.  ``None``: the file does not record it.
    """

    registers: int | None = None
    sgprs: int | None = None
    vgprs: int | None = None
    agprs: int | None = None
    stack: int | None = None
    frame: int | None = None
    dynamic_stack: bool | None = None
    shared: int | None = None
    local: int | None = None
    constant_banks: tuple[tuple[int, int], ...] = ()
    params: int | None = None
    spill_instructions: int | None = None
    sgpr_spills: int | None = None
    vgpr_spills: int | None = None
    max_threads: int | None = None
    max_registers: int | None = None

    def constant(self, bank: int) -> int:
        """Bytes of constant bank ``bank`` (cuobjdump's ``CONSTANT[bank]``); 0 when the function has none."""
        return sum(size for b, size in self.constant_banks if b == bank)

    def to_dict(self) -> dict[str, Any]:
        """The one JSON shape of a function's resources, the same in every command (docs/JSON.md).

        Every field is a key, always present and in field order; ``null`` where the file does
        not say; ``constant_banks`` is a list of ``{"bank", "size"}``.
        """
        d = asdict(self)
        d["constant_banks"] = [{"bank": b, "size": s} for b, s in self.constant_banks]
        return d


def _pairs(v: object) -> tuple[tuple[int, int], ...]:
    if not isinstance(v, tuple) or len(v) % 2:
        return ()
    return tuple((v[i], v[i + 1]) for i in range(0, len(v), 2))


def _dynamic_stack(values: Mapping[int, object]) -> bool | None:
    """True when the vendor marked the stack dynamic; False when it recorded the function's stack or
    private segment size without that mark (the importers add the attribute only when it is set);
    None when neither is recorded (an LLVM 19 device function): unknown, not guessed."""
    if values.get(StdAttr.DYNAMIC_STACK) is True:
        return True
    if values.get(StdAttr.STACK_SIZE) is not None or values.get(StdAttr.PRIVATE_BYTES) is not None:
        return False
    return None


def resources_of(attributes: Iterable[Attribute]) -> Resources:
    """The :class:`Resources` a function's ``attributes`` state (``Function.resources`` calls this)."""
    values: dict[int, AttrValue] = {a.id: a.value for a in attributes}

    def u(attr_id: int) -> int | None:
        v = values.get(attr_id)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    scalar = u(StdAttr.REGS_SCALAR)
    general = u(StdAttr.REGS_GENERAL)
    dims = values.get(StdAttr.MAX_THREADS)
    max_threads = u(AMD_MAX_FLAT_WG)
    if max_threads is None and isinstance(dims, tuple) and len(dims) == 3:
        max_threads = dims[0] * dims[1] * dims[2]
    return Resources(
        registers=general,
        sgprs=scalar,
        vgprs=general if scalar is not None else None,  # AMDGPU: SGPRs and VGPRs are recorded together
        agprs=u(StdAttr.REGS_ACCUM),
        stack=u(StdAttr.STACK_SIZE),
        frame=u(StdAttr.FRAME_SIZE),
        dynamic_stack=_dynamic_stack(values),
        shared=u(StdAttr.SHARED_BYTES),
        local=u(StdAttr.PRIVATE_BYTES),
        constant_banks=_pairs(values.get(NV_CONSTANT_BANKS)),
        params=u(StdAttr.PARAM_BYTES),
        spill_instructions=u(NV_SPILL_INSTRUCTIONS),
        sgpr_spills=u(AMD_SGPR_SPILL),
        vgpr_spills=u(AMD_VGPR_SPILL),
        max_threads=max_threads,
        max_registers=u(StdAttr.MAX_REGS),
    )
