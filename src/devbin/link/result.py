"""What a link decided: :class:`LinkResult` (every pass's result, its report, ``--json`` and
``--map``) and :class:`OutputReport` (what the ``output`` pass did).  Below both the pass
driver (:mod:`devbin.link.core`) and the output pass (:mod:`devbin.link.output`), which use them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from devbin.errors import UsageError
from devbin.link.dce import DeadCode
from devbin.link.graph import ProgramGraph
from devbin.link.inputs import LinkInputs
from devbin.link.resolution import Resolution
from devbin.link.resources import KernelUsage

__all__ = ["LinkResult", "OutputReport", "PassTime"]


@dataclass
class OutputReport:
    """What the output pass did: the file, the vendor linker used, functions removed from the
    objects, those left in (with why), and the totals written for each kernel."""

    path: str
    linker: str
    removed: list[str] = field(default_factory=list)
    kept_in_output: list[tuple[str, str]] = field(default_factory=list)
    patched: dict[str, dict[str, Any]] = field(default_factory=dict)
    size: int = 0

    def prune(self, unit: str, data: bytes, remove: list[str],
              pruner: Callable[..., bytes]) -> bytes:
        """``data`` without ``remove`` (``pruner(data, set, where=unit)``), recorded here; on a refusal
        (kept code still refers to them) ``data`` unchanged and the reason recorded."""
        if not remove:
            return data
        try:
            out = pruner(data, set(remove), where=unit)
        except UsageError as e:
            self.kept_in_output += [(r, f"{unit}: {e.message}") for r in remove]
            return data
        self.removed += [f"{unit}: {r}" for r in remove]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "linker": self.linker, "size": self.size, "removed": self.removed,
                "kept_in_output": [{"name": n, "why": w} for n, w in self.kept_in_output], "patched": self.patched}


@dataclass(frozen=True)
class PassTime:
    name: str
    seconds: float


@dataclass
class LinkResult:
    """Everything a link decided (see the module docstring)."""

    inputs: LinkInputs
    resolution: Resolution
    graph: ProgramGraph
    dce: DeadCode
    usage: list[KernelUsage]
    passes: list[PassTime] = field(default_factory=list)
    output: OutputReport | None = None

    @property
    def errors(self) -> list[str]:
        out = [f"undefined symbol: {s} (referred to by {', '.join(who)})"
               for s, who in sorted(self.resolution.undefined.items())]
        out += [f"duplicate symbol: {s} (defined in {a} and in {b})" for s, a, b in self.resolution.duplicates]
        return out

    @property
    def warnings(self) -> list[str]:
        unresolved = [f"call from {self.graph.nodes[c].name} to {callee}: no definition (external)"
                      for c, callee in self.graph.unresolved_calls if callee not in self.resolution.undefined]
        return self.dce.warnings + unresolved

    def removed(self) -> list[dict[str, Any]]:
        return [{"name": n.name, "unit": n.unit.name, "kind": "function" if n.is_function else "variable",
                 "bytes": n.size} for n in self.dce.removed_nodes(self.graph)]

    def to_dict(self) -> dict[str, Any]:
        res = self.resolution
        return {
            "arch": self.inputs.arch,
            "units": [{"name": u.name, "archive": u.archive} for u in res.units],
            "pulled": [{"unit": p.unit, "symbol": p.symbol, "needed_by": p.needed_by} for p in res.pulls],
            "errors": self.errors,
            "warnings": self.warnings,
            "notes": self.inputs.notes,
            "roots": [self.graph.nodes[k].name for k in self.dce.roots],
            "kept": [{"name": self.graph.nodes[k].name, "unit": self.graph.nodes[k].unit.name,
                      "why": self.dce.why[k]} for k in self.dce.kept],
            "removed": self.removed(),
            "removed_bytes": self.dce.removed_bytes,
            "resources": [u.to_dict() for u in self.usage],
            "passes": [{"name": p.name, "seconds": round(p.seconds, 6)} for p in self.passes],
            "output": self.output.to_dict() if self.output is not None else None,
        }

    def link_map(self) -> str:
        """The ``--map`` text: which unit came from where and why, where each symbol is defined, what was removed."""
        res = self.resolution
        why = {p.unit: p for p in res.pulls}
        lines = [f"# devbin link map ({self.inputs.arch})", "", "units (load order):"]
        for u in res.units:
            p = why.get(u.name)
            reason = f"pulled for {p.symbol} (needed by {p.needed_by})" if p else "named on the command line"
            lines.append(f"  {u.name}: {reason}")
        lines += ["", "symbols:"]
        for name in sorted(res.definitions):
            d = res.definitions[name]
            lines.append(f"  {name}  {d.entry.kind:7}  {d.unit}")
        lines += ["", "kept (why):"]
        lines += [f"  {self.graph.nodes[k].name}  [{self.graph.nodes[k].unit.name}]  {self.dce.why[k]}"
                  for k in self.dce.kept]
        lines += ["", "removed:"]
        lines += [f"  {r['name']}  [{r['unit']}]  {r['bytes']} bytes" for r in self.removed()]
        return "\n".join(lines) + "\n"
