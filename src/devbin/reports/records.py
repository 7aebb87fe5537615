"""The resources report's records (:mod:`devbin.reports.resources`): the JSON document of ``devbin resources``
(docs/JSON.md, ``devbin schema resources``) and the rows of its text tables.  Their home is
:mod:`devbin.targets.resource_records` (below the vendors, whose descriptors build them); re-exported here
under their public names.
"""

from devbin.targets.resource_records import (
    AMD_COLUMNS,
    INTEL_COLUMNS,
    AmdImage,
    AmdRow,
    AmdTable,
    ConstantBank,
    FunctionResources,
    ImageKeys,
    ImageResources,
    IntelImage,
    IntelRow,
    IntelTable,
    NvidiaCommon,
    NvidiaImage,
    NvidiaRow,
    NvidiaTable,
    ResourcesReport,
)

__all__ = ["AMD_COLUMNS", "INTEL_COLUMNS", "AmdImage", "AmdRow", "AmdTable", "ConstantBank", "FunctionResources",
           "ImageKeys", "ImageResources", "IntelImage", "IntelRow", "IntelTable", "NvidiaCommon", "NvidiaImage",
           "NvidiaRow", "NvidiaTable", "ResourcesReport"]
