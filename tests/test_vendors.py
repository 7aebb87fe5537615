"""The vendor descriptors and their registry (devbin.targets.vendor, devbin.targets.registry): each
vendor's facts agree with the tables they come from, and the registry answers each question once."""

from __future__ import annotations

import pytest

from devbin.errors import UsageError
from devbin.formats.elf.constants import EM_NAMES
from devbin.model import Attribute, Function, FunctionKind, StdAttr
from devbin.model.attributes import namespace_of, registered_attributes
from devbin.targets.amdgpu.mach import MACH_BY_NAME
from devbin.targets.archnames import known_arch_names, suggestions
from devbin.targets.registry import (
    VENDORS,
    arch_option_matches,
    guess_vendor,
    prune_name_matches,
    vendor_for_kind,
    vendor_for_machine,
    vendor_for_triple,
    vendor_named,
    vendor_names,
    vendor_of_device,
)
from devbin.targets.vendor import Device


def test_registry_is_one_to_one() -> None:
    names = [v.name for v in VENDORS]
    machines = [m for v in VENDORS for m in v.e_machines]
    kinds = [k for v in VENDORS for k in v.image_kinds]
    assert len(set(names)) == len(names) and len(set(machines)) == len(machines) and len(set(kinds)) == len(kinds)
    assert vendor_names() == tuple(names)
    for v in VENDORS:
        assert vendor_named(v.name) is v and v.object_kind in v.image_kinds
        assert all(vendor_for_machine(m) is v and m in EM_NAMES for m in v.e_machines)
        assert all(vendor_for_kind(k) is v for k in v.image_kinds)
        assert all(vendor_for_triple(f"{p}-x-y") is v for p in v.triple_prefixes)
    assert vendor_named("amdgpu") is None and vendor_for_machine(62) is None  # one spelling; x86-64 is a host
    assert vendor_for_kind("host") is None and vendor_for_triple("x86_64-unknown-linux-gnu") is None


def test_every_known_architecture_has_one_vendor() -> None:
    for name in known_arch_names():
        owners = [v.name for v in VENDORS if v.owns_arch(name)]
        assert len(owners) == 1, (name, owners)
        prefixed = [v.name for v in VENDORS if name.startswith(v.arch_prefixes)]
        assert prefixed == owners or (not prefixed and name.count(".") == 2)  # Intel IP versions: no prefix
        assert [v.name for v in VENDORS if v.claims_arch(name)] == owners
    assert guess_vendor("sm_90a") is vendor_named("nvidia") and guess_vendor("lto_100f") is vendor_named("nvidia")
    assert guess_vendor("gfx90a:xnack+") is vendor_named("amd")
    assert guess_vendor("") is None and guess_vendor("spirv64") is None and guess_vendor("sm_x") is None


def test_attribute_names_carry_the_vendor_namespace() -> None:
    for v in VENDORS:
        v.load_attribute_names()
        mine = [a for a in registered_attributes() if namespace_of(a.id) == v.attribute_namespace]
        assert mine and all(a.name.startswith(v.attribute_prefix) for a in mine)
        assert all(namespace_of(a.id) == v.attribute_namespace for a in registered_attributes()
                   if a.name.startswith(v.attribute_prefix))


def test_arch_from_header() -> None:
    nv, amd = vendor_named("nvidia"), vendor_named("amd")
    assert nv is not None and amd is not None
    assert nv.arch_from_header(0x5A, 0x33, 7) == "sm_90"  # CUDA <= 12: the SM in the low byte
    assert nv.arch_from_header(0x6400, 0x41, 8) == "sm_100"  # CUDA 13: bits 8..15
    assert amd.arch_from_header(MACH_BY_NAME["gfx90a"] | 0x300, 64, 3) == "gfx90a"  # xnack/sramecc bits ignored
    assert amd.arch_from_header(0xFE, 64, 3) == "EF_AMDGPU_MACH_0x0fe"


@pytest.mark.parametrize(("found", "wanted", "hit"), [
    ("sm_90a", "sm_90", True), ("sm_90", "sm_90a", True), ("compute_90", "sm_90", True),
    ("sm_90", "compute_90", False), ("sm_100", "sm_10", False), ("gfx90a:xnack+", "gfx90a", True),
    ("gfx90a:xnack+", "gfx90a:xnack-", False), ("gfx90a", "sm_90", False), ("x", "x", True),
])
def test_arch_option_rule(found: str, wanted: str, hit: bool) -> None:
    """``--arch`` takes what cuobjdump -arch takes: the variant does not count (the prune rule's differs)."""
    assert arch_option_matches(found, wanted) is hit


@pytest.mark.parametrize(("spec", "arch", "hit"), [
    ("sm_90", "sm_90a", False), ("sm_90a", "sm_90", False), ("sm_90", "compute_90", True),
    ("compute_90", "sm_90", False), ("gfx90a", "gfx90a:xnack+", True), ("gfx90a:xnack+", "gfx90a", False),
    ("sm_90", "", False), ("gfx90a", "sm_90", False),
])
def test_prune_name_rule(spec: str, arch: str, hit: bool) -> None:
    """``prune --keep`` names what nvprune names: the ``a``/``f`` variant counts."""
    assert prune_name_matches(spec, arch) is hit


def test_per_thread_stack_convention() -> None:
    """STACK_SIZE, else (where the private segment is the stack: AMD) PRIVATE_BYTES."""
    nv, amd = vendor_named("nvidia"), vendor_named("amd")
    assert nv is not None and amd is not None
    private = Function("f", FunctionKind.DEVICE, (Attribute(StdAttr.PRIVATE_BYTES, 48),))
    both = Function("g", FunctionKind.DEVICE, (Attribute(StdAttr.STACK_SIZE, 16), Attribute(StdAttr.PRIVATE_BYTES, 48)))
    assert amd.stack_bytes(private) == 48 and nv.stack_bytes(private) is None
    assert amd.stack_bytes(both) == 16 and nv.stack_bytes(both) == 16
    assert amd.stack_bytes(Function("h", FunctionKind.DEVICE)) is None


def test_device_names_have_one_vendor() -> None:
    """select's device names: each vendor's own, read by its descriptor; Device.vendor is the vendor's one
    canonical name (select/2, load/2: AMD's was "amdgpu" before) and vendor_of_device maps it back."""
    for text, vendor in (("sm_90a", "nvidia"), ("8.6", "nvidia"), ("gfx90a:xnack+", "amd"), ("gfx1101", "amd")):
        owners = [v for v in VENDORS if v.owns_device(text)]
        assert [v.name for v in owners] == [vendor]
        dev = owners[0].parse_device(text, suggestions)
        assert dev.vendor == vendor and dev.description.startswith(text)
        assert vendor_of_device(dev) is owners[0]
    assert not any(v.owns_device("x86_64") for v in VENDORS)
    with pytest.raises(UsageError, match="unknown vendor 'amdgpu'"):
        vendor_of_device(Device("gfx90a", "amdgpu"))


def test_arch_names_are_the_vendors() -> None:
    """archnames asks the vendor that claims a name: its check, its repairs, its names."""
    nv, amd = vendor_named("nvidia"), vendor_named("amd")
    assert nv is not None and amd is not None
    assert known_arch_names() == tuple(n for v in VENDORS for n in v.known_arch_names())
    assert nv.claims_arch("sm90") and not nv.claims_arch("gfx90a") and amd.claims_arch("gfx9000")
    assert nv.check_arch("sm_90a") == "sm_90a" and amd.check_arch("gfx90a:xnack+") == "gfx90a:xnack+"
    for bad, vendor in (("sm_900", nv), ("sm90", nv), ("gfx9000", amd), ("gfx1101:xnack+", amd)):
        with pytest.raises(UsageError):
            vendor.check_arch(bad)
    assert nv.arch_repairs("9.0") == ["sm_90"] and amd.arch_repairs("gfx90") == []


def test_generations_and_names() -> None:
    """format_arch is the inverse of generation (the PTX policy orders and names by them)."""
    nv, amd = vendor_named("nvidia"), vendor_named("amd")
    assert nv is not None and amd is not None
    for name in ("sm_90", "sm_100a", "compute_120f", "sm_75"):
        gen = nv.generation(name)
        assert gen is not None
        assert nv.format_arch(*gen, virtual=name.startswith("compute_")) == name
    assert nv.virtual_arch("sm_90a") == "compute_90a"
    assert nv.is_virtual_arch("lto_90") and not nv.is_virtual_arch("sm_90")
    assert amd.generation("gfx90a") is None and amd.virtual_arch("gfx90a") == "" and not amd.is_virtual_arch("gfx90a")
    with pytest.raises(UsageError):
        amd.format_arch(90)


def test_how_a_driver_loads_is_the_vendors_label() -> None:
    """``load_label`` (select's text, the tour): each vendor names its machine code and its IR; an image of no
    vendor gets the generic words."""
    from devbin.targets.registry import load_label

    assert [load_label("nvidia", "cubin", False), load_label("nvidia", "ptx", True), load_label("amd", "amdgpu", False),
            load_label("intel", "spirv", True), load_label("intel", "zebin", False), load_label("", "spirv", True),
            load_label("", "data", False)] == [
        "SASS", "PTX, JIT-compiled", "code object", "SPIR-V, JIT-compiled", "code object",
        "the IR it carries, JIT-compiled", "code object"]
