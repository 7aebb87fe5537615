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
"""

from __future__ import annotations

from typing import Any, Final

from devbin.model import CodeObject, StdAttr
from devbin.targets.intel.importer import INTEL_GRF_BYTES, INTEL_REQD_SUB_GROUP, INTEL_SCRATCH_BYTES

__all__ = ["COLUMNS", "format_rows", "resource_rows"]

COLUMNS: Final = ("grf", "grf_bytes", "simd", "private", "spill", "scratch", "slm", "barriers", "reqd_wg", "reqd_sg")


def resource_rows(co: CodeObject) -> list[dict[str, Any]]:
    """One dict per function (``name``, ``kind`` and :data:`COLUMNS`), kernels first, by name."""
    rows = []
    for f in sorted(co.functions, key=lambda f: (not f.is_kernel, f.name)):
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


def format_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The rows as a text table (``?`` where the file does not say)."""
    head = ("FUNCTION", "KIND", *(c.upper() for c in COLUMNS))
    cells = [head, *[(r["name"], r["kind"], *("?" if r[c] is None else str(r[c]) for c in COLUMNS)) for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    return ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
