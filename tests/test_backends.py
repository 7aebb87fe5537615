"""Every vendor's link and load back ends (named by its descriptor) provide what devbin.link and devbin.load ask.

A back end is found by module path (``Vendor.link_backend``/``load_backend``/``driver_backend``) and imported on
use, so nothing static checks it: this test does, for every registered vendor, so a new vendor's missing
hook fails here and not in the middle of a link.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from devbin.errors import UsageError
from devbin.link.backend import LinkBackend, link_backend
from devbin.link.output import OutputBackend
from devbin.load.backend import LoadBackend, load_backend
from devbin.targets.registry import VENDORS


def _members(protocol: type) -> set[str]:
    names = {n for n, v in vars(protocol).items() if not n.startswith("_") and callable(v)}
    names |= set(getattr(protocol, "__annotations__", {}))
    for base in protocol.__mro__[1:]:
        if base is not object and getattr(base, "_is_protocol", False):
            names |= _members(base)
    return names


@pytest.mark.parametrize("vendor", VENDORS, ids=lambda v: v.name)
def test_back_ends_have_every_member(vendor: object) -> None:
    from devbin.targets.vendor import Vendor

    assert isinstance(vendor, Vendor)
    if not vendor.link_backend or not vendor.load_backend:  # Intel: read, not linked or loaded (yet)
        assert not vendor.link_backend and not vendor.load_backend and not vendor.driver_backend
        with pytest.raises(UsageError, match=f"devbin link has no back end for {vendor.title} objects"):
            link_backend(vendor)
        with pytest.raises(UsageError, match=f"devbin load has no loader for {vendor.title} code objects"):
            load_backend(vendor)
        return
    link = link_backend(vendor)
    assert _members(OutputBackend) >= _members(LinkBackend) >= {"linker", "link_arch", "descriptor_owner"}
    missing = sorted(n for n in _members(OutputBackend) if not hasattr(link, n))
    assert missing == [], f"{vendor.link_backend}.LINK_BACKEND lacks {missing}"
    load = load_backend(vendor)
    missing = sorted(n for n in _members(LoadBackend) if not hasattr(load, n))
    assert missing == [], f"{vendor.load_backend}.LOAD_BACKEND lacks {missing}"
    if vendor.driver_backend:
        report = importlib.import_module(vendor.driver_backend).driver_report
        assert list(inspect.signature(report).parameters)[:4] == ["files", "target", "kernel", "lazy"]


def test_back_end_answers() -> None:
    """The back ends' link-architecture keys, descriptor owners and device targets (the rules moved from
    devbin.link.inputs, devbin.link.graph and devbin.load.loaded)."""
    by = {v.name: v for v in VENDORS}
    nv, amd = link_backend(by["nvidia"]), link_backend(by["amd"])
    assert [nv.link_arch(a) for a in ("sm_90a", "sm_100f", "sm_90", "compute_90a")] == \
        ["sm_90", "sm_100", "sm_90", "compute_90a"]
    assert amd.link_arch("gfx90a:xnack+") == "gfx90a"
    assert (amd.descriptor_owner("k.kd"), amd.descriptor_owner("k"), amd.descriptor_owner(".kd")) == ("k", None, None)
    assert nv.descriptor_owner("k.kd") is None
    assert amd.calls_out_flag_dynamic_stack and not nv.calls_out_flag_dynamic_stack
