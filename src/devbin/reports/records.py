"""The resources report's records (:mod:`devbin.reports.resources`): the JSON document of ``devbin resources``
(docs/JSON.md, ``devbin schema resources``) and the rows of its text tables, as ``TypedDict``s.

(No ``from __future__ import annotations`` here: a ``TypedDict`` tells ``NotRequired`` keys from the
evaluated annotations.)
"""

from typing import Any, Literal, NotRequired, TypedDict

__all__ = ["AMD_COLUMNS", "AmdImage", "AmdRow", "AmdTable", "ConstantBank", "FunctionResources", "ImageKeys",
           "NvidiaCommon", "NvidiaImage", "NvidiaRow", "NvidiaTable", "ResourcesReport"]


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


class ResourcesReport(TypedDict):
    """``devbin resources --json``'s document (less its ``schema`` key)."""

    images: list[NvidiaImage | AmdImage]
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
