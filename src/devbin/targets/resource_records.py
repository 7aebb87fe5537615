"""The resources report's records (:mod:`devbin.reports.resources`): the JSON document of ``devbin resources``
(docs/JSON.md, ``devbin schema resources``) and the rows of its text tables, as ``TypedDict``s, and
:class:`ImageResources`, what a vendor's :meth:`devbin.targets.vendor.Vendor.resources_tables` gives of
one image.  They live here, below the vendors, so that each vendor's descriptor builds its own records;
:mod:`devbin.reports.records` re-exports them under their public names.

(No ``from __future__ import annotations`` here: a ``TypedDict`` tells ``NotRequired`` keys from the
evaluated annotations.)
"""

from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict

__all__ = ["AMD_COLUMNS", "INTEL_COLUMNS", "AmdImage", "AmdRow", "AmdTable", "ConstantBank", "FunctionResources",
           "ImageKeys", "ImageResources", "IntelImage", "IntelRow", "IntelTable", "NvidiaCommon", "NvidiaImage",
           "NvidiaRow", "NvidiaTable", "ResourcesReport"]


# --------------------------------------------------------------------------- the JSON records


class FunctionResources(TypedDict):
    """One function of an image of the JSON document."""

    name: str
    kind: Literal["kernel", "device"]
    #: :meth:`devbin.model.resources.Resources.to_dict` (docs/JSON.md); None: the model has no such function
    resources: dict[str, Any] | None
    #: AMD only: where the numbers came from (``devbin-sections``, ``vendor``'s sources, ``unknown``)
    source: NotRequired[str]


class ConstantBank(TypedDict):
    bank: int
    size: int


NvidiaCommon = TypedDict("NvidiaCommon", {"global": int, "constant_banks": list[ConstantBank]})
NvidiaCommon.__doc__ = "A cubin's module-wide memory: ``.nv.global`` bytes and each constant bank's."


class ImageKeys(TypedDict):
    """The keys every command gives an image (:meth:`devbin.images.Image.to_dict`)."""

    address: str
    vendor: str
    kind: str
    arch: str
    size: int
    stored_size: int
    compression: str


class NvidiaImage(ImageKeys):
    common: NvidiaCommon
    functions: list[FunctionResources]


class AmdImage(ImageKeys):
    target_id: str
    #: ``devbin-sections`` or ``vendor``: where the image's model came from (:func:`devbin.importers.model_of`)
    source: str
    functions: list[FunctionResources]


class IntelImage(ImageKeys):
    #: ``devbin-sections`` or ``vendor``: where the image's model came from (:func:`devbin.importers.model_of`)
    source: str
    functions: list[FunctionResources]


class ResourcesReport(TypedDict):
    """``devbin resources --json``'s document (less its ``schema`` key)."""

    images: list[NvidiaImage | AmdImage | IntelImage]
    warnings: list[str]


# --------------------------------------------------------------------------- the text tables' rows


class NvidiaRow(TypedDict):
    """One row of the NVIDIA text table (cuobjdump's numbers; ``None``: the cubin does not say)."""

    name: str
    kind: Literal["kernel", "device"]
    registers: int
    stack: int | Literal["unknown"] | None
    frame: int | None
    spill: int | None
    shared: int
    local: int
    constant: list[ConstantBank]


class AmdRow(TypedDict):
    """One row of the AMD text table (``None``: the file does not say)."""

    name: str
    kind: str
    sgpr: int | None
    vgpr: int | None
    agpr: int | None
    private_segment: int | None
    group_segment: int | None
    kernarg_segment: int | None
    dynamic_stack: bool | None
    sgpr_spill: int | None
    vgpr_spill: int | None
    source: str


#: The AMD table's number columns, in order.
AMD_COLUMNS = ("sgpr", "vgpr", "agpr", "private_segment", "group_segment", "kernarg_segment", "dynamic_stack",
               "sgpr_spill", "vgpr_spill")


class AmdTable(ImageKeys):
    """An AMD image's text table: its keys, target ID, source and rows."""

    target_id: str
    source: str
    functions: list[AmdRow]


class NvidiaTable(ImageKeys):
    """A cubin's text table: its keys, module-wide memory (cuobjdump's shape) and rows."""

    common: dict[str, Any]
    functions: list[NvidiaRow]


class IntelRow(TypedDict):
    """One row of the Intel text table (a zebin's ``.ze_info``; ``None``: the file does not say), the
    columns of :mod:`devbin.targets.intel.resources`."""

    name: str
    kind: Literal["kernel", "device"]
    grf: int | None
    grf_bytes: int | None
    simd: int | None
    private: int | None
    spill: int | None
    scratch: int | None
    slm: int | None
    barriers: int | None
    reqd_wg: str | None
    reqd_sg: int | None


#: The Intel table's columns, in order.
INTEL_COLUMNS = ("grf", "grf_bytes", "simd", "private", "spill", "scratch", "slm", "barriers", "reqd_wg", "reqd_sg")


class IntelTable(ImageKeys):
    """A zebin's text table: its keys, where the model came from, and rows."""

    source: str
    functions: list[IntelRow]


# --------------------------------------------------------------------------- one image


@dataclass(frozen=True, slots=True)
class ImageResources:
    """What ``devbin resources`` found in one code object (plain data: it crosses processes).

    ``image``: the JSON record; ``table``: the text table (None where not asked for); ``usage``:
    cuobjdump ``-res-usage``'s numbers of a cubin (:func:`devbin.targets.nvidia.resources.usage`,
    what ``--format cuobjdump`` prints), None for the other vendors' code objects; ``lines``: those
    lines already written, where only they were asked for and the vendor's compiled pass gave them
    (:meth:`devbin.targets.vendor.Vendor.resource_usage_lines`; ``usage`` is then None)."""

    image: NvidiaImage | AmdImage | IntelImage | None
    table: NvidiaTable | AmdTable | IntelTable | None
    usage: dict[str, Any] | None = None
    lines: str | None = None
