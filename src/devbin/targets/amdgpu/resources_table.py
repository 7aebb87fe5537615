"""``devbin resources`` of an AMDGPU code object: the report's JSON record and text table
(:meth:`devbin.targets.vendor.Vendor.resources_tables`; the records: :mod:`devbin.targets.resource_records`).

The table's columns are the model's attributes where devbin sections were read (``devbin cc`` output:
device functions included), else the vendor's facts (metadata note, LLVM 20+ resource symbols:
:mod:`devbin.targets.amdgpu.resources`).  What the file does not say is ``None`` (text ``?``; JSON
``"source": "unknown"``), never a guess.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from devbin.targets.resource_records import (
    AMD_COLUMNS,
    AmdImage,
    AmdRow,
    AmdTable,
    FunctionResources,
    ImageKeys,
    ImageResources,
)
from devbin.targets.vendor import DEVBIN_SECTIONS

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile
    from devbin.targets.vendor import ModelSource

__all__ = ["resources_tables"]

def resources_tables(elf: ElfFile, head: ImageKeys, model: ModelSource) -> ImageResources:
    """Per-function AMDGPU resources: from the devbin sections when present, else from the vendor's facts."""
    from devbin.targets.amdgpu.importer import code_object_facts
    from devbin.targets.amdgpu.resources import model_function_resources
    facts = code_object_facts(elf)
    obj, source = model()  # the one model (devbin.importers.model_of)
    # the table's columns: the model's attributes where devbin sections were read, else the vendor's facts
    found = [model_function_resources(fn) for fn in obj.functions] if source == DEVBIN_SECTIONS else facts.resources
    rows: list[AmdRow] = []
    for r in found:
        d = r.to_dict()
        rows.append(cast(AmdRow, {"name": r.name, "kind": r.kind, **{k: d[k] for k in AMD_COLUMNS},
                                  "source": r.source}))
    by_name = {fn.name: fn.resources for fn in obj.functions}
    functions: list[FunctionResources] = [
        {"name": r["name"], "kind": "kernel" if r["kind"] == "kernel" else "device", "source": r["source"],
         "resources": by_name[r["name"]].to_dict() if r["name"] in by_name else None} for r in rows]
    return ImageResources(image=AmdImage(**head, target_id=facts.target_id, source=source, functions=functions),
                          table=AmdTable(**head, target_id=facts.target_id, source=source, functions=rows))
