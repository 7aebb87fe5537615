"""The registry of vendors: the one list of :class:`~devbin.targets.vendor.Vendor` descriptors,
and the questions generic code asks it.

Adding a vendor: a folder ``targets/<vendor>/`` whose ``vendor.py`` defines its descriptor, and one
line in :data:`VENDORS`.  Generic code asks here and never names a vendor (tests/test_layers.py):

* :func:`vendor_named` (``"nvidia"`` -> the descriptor), :func:`vendor_names` (the enum of names);
* :func:`vendor_for_machine` (an ELF ``e_machine``), :func:`vendor_for_kind` (an image kind),
  :func:`vendor_for_triple` (an LLVM triple), :func:`guess_vendor` (an architecture name);
  :func:`object_kinds` (the image kinds of the vendors' code objects);
* :func:`vendor_of_device`: the vendor of a select/load :class:`~devbin.targets.vendor.Device`;
* :func:`parse_target`: a target-ID string as a :class:`~devbin.model.Target`, its vendor guessed;
* :func:`arch_option_matches` (the ``--arch`` filter: cuobjdump's ``-arch`` rule) and
  :func:`prune_name_matches` (``prune --keep/--drop``: nvprune's rule), each the vendor's rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin.errors import UsageError
from devbin.targets.amdgpu.vendor import AMD
from devbin.targets.intel.vendor import INTEL
from devbin.targets.nvidia.vendor import NVIDIA
from devbin.targets.vendor import Vendor, generic_load_label

if TYPE_CHECKING:
    from devbin.model import Target
    from devbin.targets.vendor_records import Device

__all__ = ["VENDORS", "arch_option_matches", "guess_vendor", "load_label", "object_kinds", "parse_target",
           "prune_name_matches", "vendor_for_kind", "vendor_for_machine", "vendor_for_triple", "vendor_named",
           "vendor_names", "vendor_of_device"]

#: Every vendor devbin knows, in the order reports list them.
VENDORS: tuple[Vendor, ...] = (NVIDIA, AMD, INTEL)

_BY_NAME: dict[str, Vendor] = {v.name: v for v in VENDORS}
_BY_MACHINE: dict[int, Vendor] = {m: v for v in VENDORS for m in v.e_machines}
_BY_KIND: dict[str, Vendor] = {k: v for v in VENDORS for k in v.image_kinds}


def vendor_names() -> tuple[str, ...]:
    """The canonical vendor names (``nvidia``, ``amd``): every value a record's ``vendor`` may hold but ``""``."""
    return tuple(_BY_NAME)


def vendor_named(name: str) -> Vendor | None:
    """The vendor of canonical name ``name``, or None."""
    return _BY_NAME.get(name)


def load_label(vendor: str, kind: str, jit: bool) -> str:
    """How the driver loads a chosen image of ``vendor`` (its :meth:`~devbin.targets.vendor.Vendor.load_label`;
    the vendor of ``kind`` where ``vendor`` is empty)."""
    v = _BY_NAME.get(vendor) or _BY_KIND.get(kind)
    return v.load_label(kind, jit) if v is not None else generic_load_label(jit)


def vendor_of_device(device: Device) -> Vendor:
    """The vendor whose device ``device`` is: the one its :meth:`~devbin.targets.vendor.Vendor.parse_device`
    named (``Device.vendor`` is that vendor's canonical name); UsageError for a name no vendor has."""
    v = _BY_NAME.get(device.vendor)
    if v is None:
        raise UsageError(f"device {device.name!r}: unknown vendor {device.vendor!r}; known: "
                         f"{', '.join(_BY_NAME)}")
    return v


def vendor_for_machine(e_machine: int) -> Vendor | None:
    """The vendor whose device ELF files carry ``e_machine``, or None (a host or unknown machine)."""
    return _BY_MACHINE.get(e_machine)


def vendor_for_kind(kind: str) -> Vendor | None:
    """The vendor whose code an image of ``kind`` is (``cubin``, ``ptx``, ``amdgpu`` ...), or None
    (host objects, bitcode, SPIR-V, data: no vendor by kind)."""
    return _BY_KIND.get(kind)


def object_kinds() -> frozenset[str]:
    """The image kinds of the vendors' device ELF code objects (``cubin``, ``amdgpu``)."""
    return frozenset(v.object_kind for v in VENDORS)


def vendor_for_triple(triple: str) -> Vendor | None:
    """The vendor of an LLVM triple (``nvptx64-nvidia-cuda``, ``amdgcn-amd-amdhsa``), or None."""
    return next((v for v in VENDORS if triple and v.owns_triple(triple)), None)


def guess_vendor(arch: str) -> Vendor | None:
    """The vendor whose architecture ``arch`` is (``sm_90`` -> NVIDIA, ``gfx90a:xnack+`` -> AMD), or None:
    the vendors' names do not overlap, so the name alone decides."""
    return next((v for v in VENDORS if arch and v.owns_arch(arch)), None)


def parse_target(text: str, vendor: str = "", triple: str = "") -> Target:
    """:meth:`devbin.model.Target.parse` with the vendor, when not given, that the arch implies
    (:func:`guess_vendor`; ``""`` for an arch no vendor owns): ``gfx90a:xnack-`` -> vendor ``amd``."""
    from devbin.model import Target  # the model only when a target is parsed (CLI start-up)

    if not vendor and isinstance(text, str):
        owner = guess_vendor(text.split(":", 1)[0])
        vendor = owner.name if owner is not None else ""
    return Target.parse(text, vendor, triple)


def arch_option_matches(found: str, wanted: str) -> bool:
    """Whether an image of architecture ``found`` is one ``--arch wanted`` takes: the vendor of
    ``wanted``'s rule (:meth:`Vendor.option_matches`; NVIDIA: cuobjdump ``-arch``'s)."""
    if found == wanted:
        return True
    v = guess_vendor(wanted)
    return v is not None and v.option_matches(found, wanted)


def prune_name_matches(spec: str, arch: str) -> bool:
    """Whether ``prune --keep/--drop spec`` names an image of architecture ``arch``: the vendor of
    ``spec``'s rule (:meth:`Vendor.keep_matches`; NVIDIA: nvprune's); an image that names no
    architecture is named by nothing."""
    if not arch:
        return False
    v = guess_vendor(spec)
    return v.keep_matches(spec, arch) if v is not None else spec == arch
