"""What ``devbin.load`` asks a vendor: the load back end, one per vendor, found through its descriptor.

Generic load code (indexing, the executable, symbols, lazy loading) names no vendor: it asks the
code object's vendor descriptor (:class:`devbin.targets.vendor.Vendor`: the importer, the
per-thread stack rule) and the vendor's load back end, a module named by the descriptor's
:attr:`~devbin.targets.vendor.Vendor.load_backend` that defines ``LOAD_BACKEND``, an object with
the members of :class:`LoadBackend`.  The descriptor (layer 3) names its back end by module path
and never imports it: the back end is load code (layer 5), imported here on first use.

What a back end decides: how a code object of the vendor is indexed (what is mapped where, what
is exported, which relocations the loader applies or leaves to the driver:
:meth:`LoadBackend.index`), which devices it loads on (:meth:`LoadBackend.check_target`), where
its kernels' descriptors are (:meth:`LoadBackend.descriptors`), and how lazy loading cuts it into
units (:meth:`LoadBackend.plan`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Protocol

from devbin.errors import UsageError
from devbin.targets.registry import vendor_for_machine
from devbin.targets.vendor import Device, Vendor

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile
    from devbin.load.indexed import IndexedCodeObject, ObjDefinition
    from devbin.load.relocation import AppliedReloc
    from devbin.load.simulated import SimulatedDevice

#: Resolves a symbol name across the executable: (its device address, the code object defining it), or None.
Resolver = Callable[[str], "tuple[int, str] | None"]

__all__ = ["LoadBackend", "Pins", "Resolver", "load_backend", "loadable_vendor"]

#: Target features a conditional load pinned: feature -> (state, the code object that needs it).
Pins = dict[str, tuple[str, str]]


class LoadBackend(Protocol):
    """The vendor-specific steps of loading a code object."""

    def index(self, elf: ElfFile, name: str) -> IndexedCodeObject:
        """Check and index a code object of this vendor (:mod:`devbin.load.indexing`); FormatError or
        UsageError (naming ``name``) when the loader would refuse it."""
        ...

    def target_of(self, idx: IndexedCodeObject) -> str:
        """The device target a bare code object names (``devbin load`` without ``--target``)."""
        ...

    def check_target(self, idx: IndexedCodeObject, device: Device, pins: Pins) -> str:
        """Whether ``idx`` loads on ``device`` (this vendor's): the reason (a note) when it does, UsageError
        when not.  A load that holds only with a target feature in one state records it in ``pins``
        (one device runs with one setting); a later load needing the other state is refused."""
        ...

    def descriptors(self, idx: IndexedCodeObject) -> dict[str, ObjDefinition] | None:
        """Kernel name -> the definition of its descriptor (the symbol a dispatch names: AMDGPU ``<k>.kd``),
        or None where kernels have no descriptor symbol (the model's kernel kind tells them)."""
        ...

    def kernel_entry(self, idx: IndexedCodeObject, descriptor: ObjDefinition, address: int) -> int:
        """The code address the descriptor at device address ``address`` leads to."""
        ...

    def apply_relocations(self, idx: IndexedCodeObject, base: int, device: SimulatedDevice,
                          resolve: Resolver) -> list[AppliedReloc]:
        """Apply the relocations the loader applies (AMDGPU's dynamic ones, as ROCr does) to ``idx`` mapped at
        ``base`` in ``device``; none where the driver applies them (cubins: :attr:`IndexedCodeObject.nv_relocations`
        are resolved and recorded instead)."""
        ...

    def plan_relocations(self, idx: IndexedCodeObject, base: int, resolve: Resolver) -> list[AppliedReloc]:
        """What :meth:`apply_relocations` would write, without device memory, in ``idx.relocations`` order (the
        lazy loader applies them one unit at a time)."""
        ...

    def plan(self, idx: IndexedCodeObject) -> object:
        """The lazy loader's units and edges (:class:`devbin.load.lazy.ObjectPlan`)."""
        ...


@cache
def _backend(vendor: Vendor) -> LoadBackend:
    backend: LoadBackend = importlib.import_module(vendor.load_backend).LOAD_BACKEND
    return backend


def load_backend(vendor: Vendor) -> LoadBackend:
    """The load back end of ``vendor`` (imported on first use); UsageError for a vendor without one."""
    if not vendor.load_backend:
        raise UsageError(f"devbin load has no loader for {vendor.title} code objects", fmt="load")
    return _backend(vendor)


def loadable_vendor(e_machine: int) -> Vendor | None:
    """The vendor of an ELF machine when devbin can load its code objects, else None."""
    v = vendor_for_machine(e_machine)
    return v if v is not None and v.load_backend else None
