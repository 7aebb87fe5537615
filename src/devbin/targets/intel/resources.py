"""Per-function resource usage of a zebin, as rows: what a resources report shows for Intel.

One row per function of the imported model (:func:`devbin.targets.intel.importer.import_zebin`), the
columns Intel's own tools answer with (Level Zero's ``zeKernelGetProperties``: ``privateMemSize``,
``spillMemSize``, ``maxSubgroupSize``, ``localMemSize``; compute-runtime
``level_zero/core/source/kernel/kernel_imp.cpp``):

============== ================================================================
``grf``        GRF registers per hardware thread (``grf_count``)
``grf_bytes``  bytes per GRF for the core family (32 to Xe-HPG, 64 after)
``simd``       SIMD width (``simd_size``): work-items per hardware thread
``private``    private bytes per hardware thread
``spill``      spill bytes per hardware thread
``scratch``    every scratch buffer's bytes per hardware thread, as recorded
``slm``        static shared local memory per work-group
``barriers``   ``barrier_count``
``reqd_wg``    required work-group size (``x,y,z``)
``reqd_sg``    required sub-group size
============== ================================================================

``None``: the file does not say (functions ``.ze_info`` does not list).

:func:`resources_tables` is ``devbin resources`` of a zebin (:meth:`devbin.targets.vendor.Vendor.resources_tables`):
these rows as its text table, and each function's ``Function.resources`` as its JSON record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from devbin.model import CodeObject, StdAttr
from devbin.targets.intel.importer import INTEL_GRF_BYTES, INTEL_REQD_SUB_GROUP, INTEL_SCRATCH_BYTES
from devbin.targets.resource_records import (
    INTEL_COLUMNS,
    FunctionResources,
    ImageKeys,
    ImageResources,
    IntelImage,
    IntelRow,
    IntelTable,
)

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile
    from devbin.targets.vendor import ModelSource

__all__ = ["COLUMNS", "format_rows", "resource_rows", "resources_tables"]

#: The columns (:data:`devbin.targets.resource_records.INTEL_COLUMNS`, the report's records).
COLUMNS: Final = INTEL_COLUMNS


def resource_rows(co: CodeObject) -> list[IntelRow]:
    """One row per function (``name``, ``kind`` and :data:`COLUMNS`), in the model's (the file's) order."""
    rows: list[IntelRow] = []
    for f in co.functions:
        wg = f.attr(StdAttr.REQD_BLOCK_SIZE)
        rows.append({
            "name": f.name, "kind": "kernel" if f.is_kernel else "device",
            "grf": f.uint(StdAttr.REGS_GENERAL), "grf_bytes": f.uint(INTEL_GRF_BYTES),
            "simd": f.uint(StdAttr.WAVE_SIZE), "private": f.uint(StdAttr.PRIVATE_BYTES),
            "spill": f.uint(StdAttr.SPILL_BYTES), "scratch": f.uint(INTEL_SCRATCH_BYTES),
            "slm": f.uint(StdAttr.SHARED_BYTES), "barriers": f.uint(StdAttr.NUM_BARRIERS),
            "reqd_wg": ",".join(map(str, wg)) if isinstance(wg, tuple) else None,
            "reqd_sg": f.uint(INTEL_REQD_SUB_GROUP),
        })
    return rows


def format_rows(rows: Sequence[IntelRow]) -> list[str]:
    """The rows as a text table (``?`` where the file does not say)."""
    head = ("FUNCTION", "KIND", *(c.upper() for c in COLUMNS))
    cells = [head, *[(r["name"], r["kind"], *("?" if r[c] is None else str(r[c])  # type: ignore[literal-required]
                                              for c in COLUMNS)) for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    return ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]


def resources_tables(elf: ElfFile, head: ImageKeys, model: ModelSource) -> ImageResources:
    """``devbin resources`` of a zebin: the one model's functions (devbin sections, else ``.ze_info`` through
    :func:`devbin.targets.intel.importer.import_zebin`), each function's ``Function.resources`` (JSON) and
    :func:`resource_rows` (the text table), in the file's order."""
    co, source = model()
    functions: list[FunctionResources] = [
        {"name": f.name, "kind": "kernel" if f.is_kernel else "device", "resources": f.resources.to_dict()}
        for f in co.functions]
    return ImageResources(image=IntelImage(**head, source=source, functions=functions),
                          table=IntelTable(**head, source=source, functions=resource_rows(co)))
