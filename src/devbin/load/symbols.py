"""Executable symbols: what ``Executable.symbols()`` / ``symbol(name)`` return after ``freeze()``.

HSA has three symbol kinds (``hsa_symbol_kind_t``: VARIABLE 0, KERNEL 1, INDIRECT_FUNCTION 2)
and ROCr implements two (kernels and variables; ``STT_FUNC`` symbols are ignored).  devbin
adds device functions (ROCR-Runtime#203) and implements indirect functions, so
:class:`SymbolKind` keeps HSA's numbers and adds ``DEVICE_FUNCTION = 3``:

* ``KERNEL``: an AMDGPU kernel (``<name>`` + its ``<name>.kd`` descriptor) or a CUDA
  ``__global__`` function.  For AMDGPU ``address`` is the descriptor's address (HSA's
  ``KERNEL_OBJECT``, what a dispatch packet holds) and ``code_address`` the entry the
  descriptor leads to; for NVIDIA both are the kernel's code.
* ``INDIRECT_FUNCTION``: a function whose address is taken (stored in data, by any loaded
  code object): it may be called through a pointer, so its ABI matters to others.
* ``DEVICE_FUNCTION``: any other function.
* ``VARIABLE``: a data object (``STT_OBJECT``; NVIDIA ``STT_CUDA_OBJECT``).

``linkage`` is HSA's: ``program`` for symbols the code object exports (global/weak, not
hidden: they resolve references from other code objects), ``module`` for symbols local to
their code object (hidden device functions become local in an ``ld.lld -shared`` output;
they are listed, but never bind another object's reference).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from devbin.model import Function, StdAttr, attr_info
from devbin.model.prototype import CallConv, enum_name
from devbin.targets.vendor import Vendor

__all__ = ["LoadedSymbol", "SymbolKind"]


class SymbolKind(IntEnum):
    """HSA's ``hsa_symbol_kind_t`` values, plus devbin's ``DEVICE_FUNCTION``."""

    VARIABLE = 0
    KERNEL = 1
    INDIRECT_FUNCTION = 2
    DEVICE_FUNCTION = 3

    @property
    def word(self) -> str:
        return {0: "variable", 1: "kernel", 2: "indirect-function", 3: "device-function"}[int(self)]


_REGISTER_ATTRS = (("general", StdAttr.REGS_GENERAL), ("scalar", StdAttr.REGS_SCALAR),
                   ("accum", StdAttr.REGS_ACCUM), ("predicate", StdAttr.REGS_PREDICATE))


@dataclass(frozen=True, slots=True)
class LoadedSymbol:
    """One symbol of a frozen executable.

    ``address``/``code_address`` are device addresses in the backend's address space;
    ``offset`` is the symbol's value in its code object (``st_value``: a virtual address in
    an AMDGPU ``.so``, section-relative in a cubin) and ``section`` its section.
    ``function`` is the unified-model record (registers, stack, calling convention and every
    other attribute), None for variables and for functions the model does not list.
    """

    name: str
    kind: SymbolKind
    address: int
    size: int
    code_object: str
    linkage: str  # "program" (exported) or "module" (local to its code object)
    section: str = ""
    offset: int = 0
    binding: str = "global"
    visibility: str = "default"
    code_address: int | None = None
    descriptor: str = ""  # AMDGPU kernels: the descriptor symbol (``<name>.kd``)
    function: Function | None = field(default=None, compare=False, repr=False)
    #: the vendor of its code object (its descriptor: the per-thread stack rule is the vendor's)
    vendor: Vendor | None = field(default=None, compare=False, repr=False)

    @property
    def is_function(self) -> bool:
        return self.kind != SymbolKind.VARIABLE

    @property
    def registers(self) -> dict[str, int]:
        """Register counts the model knows: ``general`` (VGPR / R), ``scalar`` (SGPR / UR), ``accum`` (AGPR)."""
        if self.function is None:
            return {}
        out = {}
        for word, attr in _REGISTER_ATTRS:
            v = self.function.uint(attr)
            if v is not None:
                out[word] = v
        return out

    @property
    def stack_bytes(self) -> int | None:
        """Per-thread stack: the vendor's rule (:meth:`devbin.targets.vendor.Vendor.stack_bytes`): ``stack_size``
        (with callees) if known, else private bytes where they are the stack (AMDGPU scratch); None when
        not recorded."""
        if self.function is None or self.vendor is None:
            return None
        return self.vendor.stack_bytes(self.function)

    @property
    def callconv(self) -> str | None:
        """``kernel``, ``default`` (the vendor's device-function ABI), ``internal`` or ``unknown``."""
        if self.function is None:
            return None
        v = self.function.uint(StdAttr.CALLCONV)
        return enum_name(v, CallConv) if v is not None else None

    def attributes(self) -> dict[str, Any]:
        """Every model attribute by name (bytes as text when printable ASCII, else hex), for reports."""
        out: dict[str, Any] = {}
        for a in self.function.attributes if self.function is not None else ():
            info = attr_info(a.id)
            name = info.name if info is not None else f"attr_{a.id:#x}"
            v = a.value
            if isinstance(v, bytes):
                out[name] = v.decode() if v.isascii() and v.decode().isprintable() else v.hex()
            else:
                out[name] = list(v) if isinstance(v, tuple) else v
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": self.kind.word, "kind_raw": int(self.kind), "address": self.address,
            "size": self.size, "code_address": self.code_address, "code_object": self.code_object,
            "linkage": self.linkage, "section": self.section, "offset": self.offset, "binding": self.binding,
            "visibility": self.visibility, "descriptor": self.descriptor or None,
            # the one shape of a function's resources (docs/JSON.md); null for variables
            "resources": self.function.resources.to_dict() if self.function is not None else None,
            "callconv": self.callconv, "attributes": self.attributes(),
        }
