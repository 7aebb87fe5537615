"""Two builds compared: bytes per architecture and per function, and each kernel's resources.

``diff(old, new)`` takes two measurements (:func:`devbin.size.account.measure` with ``resources=True``).
Functions are matched by (vendor, architecture, mangled name), their sizes summed over every copy in
the build; a function's resources are those of its first copy (``Function.resources``, the one record of
registers, stack and spills; the fields compared are :data:`RESOURCE_FIELDS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from devbin.escape.markdown import code_cell
from devbin.size.account import FileSize, demangle, measure
from devbin.size.shapes import ArchChange, DiffTotals, FunctionChange, ResourcesChange, SizeDiff

if TYPE_CHECKING:
    from devbin.images.scanreport import ScanReport
    from devbin.size.budget import Rule, Violation

__all__ = ["RESOURCE_FIELDS", "diff", "diff_report", "markdown"]

#: The resource fields compared per kernel (:class:`devbin.model.resources.Resources`).
RESOURCE_FIELDS: Final = ("registers", "sgprs", "vgprs", "agprs", "stack", "frame", "local", "shared",
                          "spill_instructions", "sgpr_spills", "vgpr_spills")


def _per_arch(files: Sequence[FileSize]) -> dict[tuple[str, str], list[int]]:
    out: dict[tuple[str, str], list[int]] = {}
    for f in files:
        for i in f.images:
            row = out.setdefault((i.image.vendor, i.image.arch), [0, 0])
            row[0] += i.stored
            row[1] += i.size
    return out


def _per_function(files: Sequence[FileSize]) -> dict[tuple[str, str, str], tuple[int, str, dict[str, Any] | None]]:
    out: dict[tuple[str, str, str], tuple[int, str, dict[str, Any] | None]] = {}
    for f in files:
        for i in f.images:
            for fn in i.functions:
                key = (i.image.vendor, i.image.arch, fn.name)
                size, kind, res = out.get(key, (0, fn.kind, None))
                if res is None and fn.resources is not None:
                    res = fn.resources.to_dict()
                out[key] = (size + fn.size, kind, res)
    return out


def diff(old: Sequence[FileSize], new: Sequence[FileSize]) -> SizeDiff:
    """The comparison as the JSON of ``devbin size --diff`` (without the ``schema`` key)."""
    def tot(files: Sequence[FileSize]) -> dict[str, int]:
        return {"files": len(files), "device_bytes": sum(f.device_bytes for f in files),
                "stored_size": sum(f.stored for f in files), "size": sum(f.size for f in files)}

    to, tn = tot(old), tot(new)
    totals = cast(DiffTotals, {k: {"old": to[k], "new": tn[k], "delta": tn[k] - to[k]} for k in to})
    ao, an = _per_arch(old), _per_arch(new)
    archs: list[ArchChange] = []
    for key in sorted(set(ao) | set(an)):
        o, n = ao.get(key, [0, 0]), an.get(key, [0, 0])
        status = "added" if key not in ao else "removed" if key not in an else "same" if o == n else "changed"
        archs.append({"vendor": key[0], "arch": key[1], "old": o[0], "new": n[0], "delta": n[0] - o[0],
                      "old_size": o[1], "new_size": n[1], "status": status})
    archs.sort(key=lambda r: (-abs(r["delta"]), r["vendor"], r["arch"]))
    fo, fnw = _per_function(old), _per_function(new)
    functions: list[FunctionChange] = []
    resources: list[ResourcesChange] = []
    for fkey in sorted(set(fo) | set(fnw)):
        vendor, arch, name = fkey
        o_size, kind, o_res = fo.get(fkey, (0, "", None))
        n_size, n_kind, n_res = fnw.get(fkey, (0, "", None))
        status = "added" if fkey not in fo else "removed" if fkey not in fnw else "changed" if o_size != n_size \
            else "same"
        if status != "same":
            functions.append({"vendor": vendor, "arch": arch, "name": name, "demangled": demangle(name),
                              "kind": kind or n_kind, "old": o_size, "new": n_size, "delta": n_size - o_size,
                              "status": status})
        if o_res is not None and n_res is not None:
            changes = {f: {"old": o_res.get(f), "new": n_res.get(f)} for f in RESOURCE_FIELDS
                       if o_res.get(f) != n_res.get(f)}
            if changes:
                resources.append({"vendor": vendor, "arch": arch, "name": name, "demangled": demangle(name),
                                  "kind": kind or n_kind, "changes": changes})
    functions.sort(key=lambda r: (-abs(r["delta"]), r["name"], r["arch"]))
    return {"totals": totals, "by_arch": archs, "functions": functions, "resources": resources}


def diff_report(old: str | Path, new: str | Path, *, rules: Sequence[Rule] = (),
                report: ScanReport | None = None) -> tuple[SizeDiff, list[Violation]]:
    """``devbin size --diff OLD NEW``'s document (less ``schema``): both builds measured with their
    functions' resources (:func:`devbin.importers.model_of`'s, through ``Image.code_object()``), compared,
    and ``rules`` (``--budget``) checked against NEW, the build about to ship (``budget`` in the document
    where there are rules), with the violations.  ``report`` collects both scans' warnings."""
    from devbin.images.scanreport import ScanReport
    from devbin.size.budget import check
    rep = report if report is not None else ScanReport()
    sides = [measure([path], report=rep, resources=True) for path in (old, new)]
    d: SizeDiff = {"old": str(old), "new": str(new), **diff(sides[0], sides[1])}
    violations = check(rules, sides[1])
    if rules:
        d["budget"] = {"rules": [r.text for r in rules], "violations": [v.to_dict() for v in violations]}
    return d, violations


def _n(v: int) -> str:
    return f"{v:,}"


def _d(v: int) -> str:
    return f"{v:+,}" if v else "0"


def markdown(d: SizeDiff, *, top: int | None = 20) -> str:
    """The comparison as markdown tables (a CI comment): which builds (``old``, ``new``), totals,
    architectures, the ``top`` functions by change (None: all), and every kernel whose resources
    changed.  An architecture only one build has is one row of the architecture table, with its
    function count, and its functions are left out of the function table (a new sm_100 would fill it
    otherwise; --json lists them).  Names, paths and architectures are read from the files or the
    command line: each goes in its cell through the markdown rule (:mod:`devbin.escape.markdown`)."""
    lines = ["### devbin size --diff", ""]
    if "old" in d:
        lines += [f"old: {code_cell(d['old'])}, new: {code_cell(d['new'])}", ""]
    lines += ["| | old | new | change |", "|---|---:|---:|---:|"]
    for k, label in (("device_bytes", "device bytes"), ("stored_size", "images, stored"),
                     ("size", "images, uncompressed"), ("files", "files")):
        t = cast(dict[str, int], d["totals"][k])  # type: ignore[literal-required]
        lines.append(f"| {label} | {_n(t['old'])} | {_n(t['new'])} | {_d(t['delta'])} |")
    changed = [a for a in d["by_arch"] if a["status"] != "same"]
    whole = {(a["vendor"], a["arch"]): a["status"] for a in changed if a["status"] in ("added", "removed")}
    counts: dict[tuple[str, str], int] = {}
    for f in d["functions"]:
        if (f["vendor"], f["arch"]) in whole:
            counts[(f["vendor"], f["arch"])] = counts.get((f["vendor"], f["arch"]), 0) + 1
    lines += ["", "#### Architectures (stored bytes)", ""]
    if changed:
        lines += ["| arch | old | new | change | |", "|---|---:|---:|---:|---|"]
        for a in changed:
            n = counts.get((a["vendor"], a["arch"]), 0)
            status = (f"{a['status']} whole; functions: {n}" if (a["vendor"], a["arch"]) in whole
                      else a["status"])
            lines.append(f"| {code_cell(a['arch']) or '-'} | {_n(a['old'])} | {_n(a['new'])} | {_d(a['delta'])} | "
                         f"{status} |")
    else:
        lines.append("No change.")
    lines += ["", "#### Functions (bytes, every copy)", ""]
    fns = [f for f in d["functions"] if (f["vendor"], f["arch"]) not in whole]
    if whole:
        lines += [f"Architectures added or removed whole ({', '.join(code_cell(a) or '-' for _, a in sorted(whole))}) "
                  "are one row above; their functions are in --json.", ""]
    if fns:
        lines += ["| function | arch | old | new | change | |", "|---|---|---:|---:|---:|---|"]
        for f in fns[:top]:
            lines.append(f"| {code_cell(f['demangled'])} | {code_cell(f['arch'])} | {_n(f['old'])} | {_n(f['new'])} | "
                         f"{_d(f['delta'])} | {f['status']} |")
        if top is not None and len(fns) > top:
            lines.append(f"\n{len(fns) - top} more functions changed (--top, or --json for all).")
    else:
        lines.append("No change.")
    lines += ["", "#### Resources", ""]
    if d["resources"]:
        lines += ["| function | arch | changes |", "|---|---|---|"]
        for r in d["resources"]:
            ch = ", ".join(f"{k} {v['old']} → {v['new']}" for k, v in r["changes"].items())
            lines.append(f"| {code_cell(r['demangled'])} | {code_cell(r['arch'])} | {ch} |")
    else:
        lines.append("No register, stack or spill change.")
    return "\n".join(lines) + "\n"
