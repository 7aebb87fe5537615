"""The size step of ``devbin tour``.

14. ``devbin size`` of what the packaging steps wrote (the package, the wrapped cubin and the
    package pruned to sm_90): device bytes per file and per architecture, every byte of the
    containers accounted for (images' stored bytes + the containers' own headers), the largest
    functions (symbol sizes, every copy), the identical images the files share, and what
    ``--keep sm_90`` would save on the package: what step 10's prune saved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["size_tour"]


def size_tour(folder: Path, pruned_saving: int, step: int = 14) -> tuple[dict[str, Any], list[str], bool]:
    """``(JSON facts, text lines, everything as expected)``; ``pruned_saving``: the bytes step 10's prune saved."""
    from devbin.samples import sample_archs
    from devbin.size.report import size_report

    keep = sample_archs().cubin
    paths = [folder / "app.offload", folder / "sample_sm90.wrapped", folder / f"app.{keep}.offload"]
    doc = size_report(paths, keep=(keep,), top=5)
    facts: dict[str, Any] = {k: doc[k] for k in ("by_arch", "totals", "top_functions", "duplicate_bytes",
                                                 "savings")}
    facts["files"] = [{k: f[k] for k in ("path", "file_bytes", "device_bytes", "stored_size", "overhead",
                                         "savings")} for f in doc["files"]]
    package = doc["files"][0]
    ok = (all(f["stored_size"] + f["overhead"] == f["device_bytes"] for f in doc["files"])
          and package["savings"]["bytes"] == pruned_saving)
    lines = [f"{step}. devbin size --keep {keep} of the package, the wrapped cubin and the pruned package:"]
    lines.append(f"   {'file':34} {'device B':>9} {'stored':>7} {'overhead':>8} {f'--keep {keep} saves':>18}")
    for f in doc["files"]:
        lines.append(f"   {f['path']:34} {f['device_bytes']:>9} {f['stored_size']:>7} {f['overhead']:>8} "
                     f"{f['savings']['bytes']:>18}")
    lines.append(f"   {'vendor':6} {'arch':11} {'images':>6} {'stored':>7} {'uncompressed':>12} {'functions':>9}")
    for a in doc["by_arch"]:
        lines.append(f"   {a['vendor']:6} {a['arch']:11} {a['images']:>6} {a['stored_size']:>7} {a['size']:>12} "
                     f"{a['function_bytes']:>9}")
    lines.append("   largest functions (st_size, every copy): "
                 + ", ".join(f"{f['demangled']} {f['size']} B x{f['copies']}" for f in doc["top_functions"]))
    dup = doc["duplicates"]
    lines.append(f"   duplicates: {doc['duplicate_bytes']} bytes in extra copies of "
                 + (", ".join(f"{g['kind']} {g['arch']} x{len(g['copies'])}" for g in dup["images"]) or "nothing"))
    lines.append(f"   --keep {keep} saves {package['savings']['bytes']} bytes of {package['path']}: "
                 f"{'what' if package['savings']['bytes'] == pruned_saving else 'NOT what'} step 10's prune saved")
    return facts, lines, ok
