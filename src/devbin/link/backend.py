"""What ``devbin link`` asks a vendor: the link back end, one per vendor, found through its descriptor.

Generic link code (inputs, graph, resources, the output pass) names no vendor: it asks a unit's
vendor descriptor (:attr:`devbin.link.units.Unit.vendor`, :class:`devbin.targets.vendor.Vendor`:
the per-thread stack rule, :meth:`~devbin.targets.vendor.Vendor.stack_bytes`; whether the private
segment is the stack) and the vendor's link back end, a module named by the descriptor's
:attr:`~devbin.targets.vendor.Vendor.link_backend` that defines ``LINK_BACKEND``, an object with
the members of :class:`LinkBackend` and the output step of :class:`devbin.link.output.OutputBackend`.
The descriptor (layer 3) names its back end by module path and never imports it: the back end is
link code (layer 5), imported here on first use.

A vendor without a link back end (``link_backend`` empty) cannot be linked: a one-line UsageError.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Protocol

from devbin.errors import UsageError
from devbin.targets.registry import guess_vendor
from devbin.targets.vendor import Vendor

__all__ = ["LinkBackend", "link_arch", "link_backend"]


class LinkBackend(Protocol):
    """The facts of a vendor's objects that the generic link passes need."""

    #: The vendor's machine-level linker, as reports name it (``nvlink``, ``ld.lld``).
    linker: str
    #: Whether the compiler sets a function's dynamic-stack flag for every call that leaves its object,
    #: because it cannot see the callee (AMDGPU: LLVM): once those callees are in the link, that flag says
    #: nothing more and the callees' flags (and recursion) decide (:mod:`devbin.link.resources`).
    calls_out_flag_dynamic_stack: bool

    def link_arch(self, arch: str) -> str:
        """The part of an architecture or target ID that decides linkability (``gfx90a`` of
        ``gfx90a:xnack+``; ``sm_90`` of ``sm_90a``): objects link together when theirs are equal."""
        ...

    def descriptor_owner(self, name: str) -> str | None:
        """The function whose loader-visible descriptor the data object ``name`` is (AMDGPU: the kernel
        ``k`` of ``k.kd``), which lives and dies with it; None for any other name or vendor."""
        ...


@cache
def _backend(vendor: Vendor) -> LinkBackend:
    if not vendor.link_backend:
        raise UsageError(f"devbin link has no back end for {vendor.title} objects", fmt="link")
    backend: LinkBackend = importlib.import_module(vendor.link_backend).LINK_BACKEND
    return backend


def link_backend(vendor: Vendor | None) -> LinkBackend:
    """The link back end of ``vendor`` (imported on first use); UsageError for None or a vendor without one."""
    if vendor is None:
        raise UsageError("not a device object of a vendor devbin knows", fmt="link")
    return _backend(vendor)


def link_arch(text: str) -> str:
    """The part of a target or architecture that decides linkability, by the vendor that owns it
    (:meth:`LinkBackend.link_arch`); the processor before any ``:feature`` for a name no vendor owns."""
    base = text.split(":", 1)[0]
    vendor = guess_vendor(base)
    return link_backend(vendor).link_arch(text) if vendor is not None and vendor.link_backend else base
