"""Per-function resource usage of an AMDGPU code object, as data.

Where the facts come from:

* kernels: the metadata note (``.vgpr_count``, ``.sgpr_count``, ``.agpr_count``,
  segment sizes, spills, ``.uses_dynamic_stack``), already including every callee
  LLVM could see (see reference §4.7);
* any function, LLVM 20+: the resource symbols ``<f>.num_vgpr``, ``.num_agpr``,
  ``.numbered_sgpr``, ``.private_seg_size``, ``.uses_vcc``,
  ``.uses_flat_scratch``, ``.has_dyn_sized_stack``, ``.has_recursion``,
  ``.has_indirect_call`` (LOCAL, ``SHN_ABS``, value = the number);
* device functions in LLVM 19 objects have **no** per-function facts in the
  file: every field is ``None`` and ``source`` is ``"unknown"``; nothing is
  guessed from the kernels that call them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import SymbolTable
from devbin.model import Function, StdAttr
from devbin.model.resources import AMD_SGPR_SPILL, AMD_VGPR_SPILL
from devbin.targets.amdgpu.metadata import KernelMeta

__all__ = ["RESOURCE_SYMBOL_SUFFIXES", "FunctionResources", "model_function_resources",
           "resource_symbols"]  # usage(): importer.py

RESOURCE_SYMBOL_SUFFIXES = ("num_vgpr", "num_agpr", "numbered_sgpr", "num_named_barrier", "private_seg_size",
                            "uses_vcc", "uses_flat_scratch", "has_dyn_sized_stack", "has_recursion",
                            "has_indirect_call")


@dataclass(frozen=True, slots=True)
class FunctionResources:
    """What a function uses.  ``None`` means the file does not say."""

    name: str
    kind: str  # "kernel" or "device"
    source: str  # "metadata", "resource-symbols", "metadata+resource-symbols" or "unknown"
    vgpr: int | None = None
    sgpr: int | None = None
    agpr: int | None = None
    private_segment: int | None = None
    group_segment: int | None = None
    kernarg_segment: int | None = None
    dynamic_stack: bool | None = None
    sgpr_spill: int | None = None
    vgpr_spill: int | None = None
    uses_vcc: bool | None = None
    uses_flat_scratch: bool | None = None
    has_recursion: bool | None = None
    has_indirect_call: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def resource_symbols(symtab: SymbolTable | None) -> dict[str, dict[str, int]]:
    """``{function: {suffix: value}}`` from LLVM 20+ ``<f>.<suffix>`` absolute symbols."""
    out: dict[str, dict[str, int]] = {}
    for s in symtab or ():
        if s.st_shndx != C.SHN_ABS or "." not in s.name:
            continue
        fn, _, suffix = s.name.rpartition(".")
        if suffix in RESOURCE_SYMBOL_SUFFIXES and fn:
            out.setdefault(fn, {})[suffix] = s.st_value
    return out


def _flag(v: int | None) -> bool | None:
    return None if v is None else bool(v)


def function_resources(name: str, kernel: KernelMeta | None, syms: dict[str, int] | None) -> FunctionResources:
    """Combine the note (kernels) and resource symbols; the note wins where both speak."""
    s = syms or {}
    src = [x for x, present in (("metadata", kernel is not None), ("resource-symbols", bool(s))) if present]
    k = kernel
    dyn = k.uses_dynamic_stack if k is not None and k.uses_dynamic_stack is not None else None
    if dyn is None and ("has_dyn_sized_stack" in s or "has_recursion" in s):
        dyn = bool(s.get("has_dyn_sized_stack", 0) or s.get("has_recursion", 0))
    return FunctionResources(
        name, "kernel" if k is not None else "device", "+".join(src) or "unknown",
        vgpr=k.vgpr_count if k is not None and k.vgpr_count is not None else s.get("num_vgpr"),
        sgpr=k.sgpr_count if k is not None and k.sgpr_count is not None else s.get("numbered_sgpr"),
        agpr=k.agpr_count if k is not None and k.agpr_count is not None else s.get("num_agpr"),
        private_segment=(k.private_segment_fixed_size if k is not None and k.private_segment_fixed_size is not None
                         else s.get("private_seg_size")),
        group_segment=k.group_segment_fixed_size if k is not None else None,
        kernarg_segment=k.kernarg_segment_size if k is not None else None,
        dynamic_stack=dyn,
        sgpr_spill=k.sgpr_spill_count if k is not None else None,
        vgpr_spill=k.vgpr_spill_count if k is not None else None,
        uses_vcc=_flag(s.get("uses_vcc")), uses_flat_scratch=_flag(s.get("uses_flat_scratch")),
        has_recursion=_flag(s.get("has_recursion")), has_indirect_call=_flag(s.get("has_indirect_call")),
    )


def model_function_resources(fn: Function) -> FunctionResources:
    """The same columns from a model :class:`~devbin.model.Function` (devbin sections: what ``devbin cc``
    recorded), ``source`` ``devbin-sections`` where its registers are known, else ``unknown``.  A flag
    is recorded only when true: its absence means "no" only for a kernel whose registers are known (its
    note said so); for a device function it is unknown."""
    known = fn.has(StdAttr.REGS_GENERAL) or fn.has(StdAttr.REGS_SCALAR)
    return FunctionResources(
        fn.name, "kernel" if fn.is_kernel else "device", "devbin-sections" if known else "unknown",
        vgpr=fn.uint(StdAttr.REGS_GENERAL), sgpr=fn.uint(StdAttr.REGS_SCALAR), agpr=fn.uint(StdAttr.REGS_ACCUM),
        private_segment=fn.uint(StdAttr.PRIVATE_BYTES), group_segment=fn.uint(StdAttr.SHARED_BYTES),
        kernarg_segment=fn.uint(StdAttr.PARAM_BYTES),
        dynamic_stack=True if fn.has(StdAttr.DYNAMIC_STACK) else (False if fn.is_kernel and known else None),
        sgpr_spill=fn.uint(AMD_SGPR_SPILL), vgpr_spill=fn.uint(AMD_VGPR_SPILL))
