"""``devbin.link.link()``: the device link as a flat list of named, timed passes.

Passes, in order (``--time-trace`` prints each one's time):

1. ``load``: read the inputs into units and archives (:mod:`devbin.link.inputs`);
2. ``resolve``: symbol resolution (:mod:`devbin.link.resolution`);
3. ``import``: each loaded unit's model (vendor metadata or devbin sections);
4. ``graph``: the program's call graph (:mod:`devbin.link.graph`);
5. ``dce``: dead-code elimination from the roots (:mod:`devbin.link.dce`);
6. ``resources``: usage propagated through the call graph (:mod:`devbin.link.resources`);
7. ``output`` (with ``output=``): the vendor linker on the pruned units, then the totals
   written back (:mod:`devbin.link.output`).

The result (:class:`LinkResult`) holds every pass's output and renders the report, the
link map and JSON.  It never depends on anything but the inputs and options: ties are
broken by command-line order, lists are sorted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from devbin.binary.output import check_destination
from devbin.link.dce import DeadCode, eliminate
from devbin.link.graph import ProgramGraph, build_graph
from devbin.link.inputs import LinkInputs, load_inputs
from devbin.link.output import OutputReport, write_output
from devbin.link.resolution import Resolution, resolve_symbols
from devbin.link.resources import KernelUsage, propagate

__all__ = ["LinkResult", "PassTime", "link"]

T = TypeVar("T")


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


class _Timer:
    def __init__(self) -> None:
        self.passes: list[PassTime] = []

    def run(self, name: str, fn: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        out = fn()
        self.passes.append(PassTime(name, time.perf_counter() - t0))
        return out


def link(inputs: Sequence[str | Path | tuple[str, bytes]], *, target: str | None = None,
         kernels: Iterable[str] | None = None, keep: Iterable[str] = (), stack_budget: int | None = None,
         with_reach: bool = True, output: str | Path | None = None,
         keep_address_taken: bool = False) -> LinkResult:
    """Link ``inputs`` for one target (see the module docstring).

    ``kernels``: the roots (default: every kernel); ``keep``: more roots (functions or
    variables), also resolved as strong references; ``stack_budget``: bytes added to the stack of a
    kernel whose call graph recurses; ``output``: also link with the vendor linker into this file
    (not when the link has errors; refused at once when it is one of the input files), written
    whole or not at all; ``keep_address_taken``: keep every address-taken function, as nvlink
    does, instead of only those a reachable indirect call can reach.
    """
    timer = _Timer()
    keep = list(keep)
    files = [p for p in inputs if not isinstance(p, tuple)]
    if output is not None:
        check_destination(output, files)  # an -o naming an input fails before the link
    loaded = timer.run("load", lambda: load_inputs(inputs, target=target))
    res = timer.run("resolve", lambda: resolve_symbols(loaded.items, undefined=keep))
    timer.run("import", lambda: [u.model for u in res.units])
    graph = timer.run("graph", lambda: build_graph(res))
    dce = timer.run("dce", lambda: eliminate(graph, kernels=kernels, keep=keep,
                                             keep_address_taken=keep_address_taken))
    roots = [k for k in dce.roots if graph.nodes[k].is_kernel]
    usage = timer.run("resources", lambda: propagate(graph, roots, stack_budget=stack_budget, with_reach=with_reach))
    result = LinkResult(loaded, res, graph, dce, usage, timer.passes)
    if output is not None and not result.errors:
        result.output = timer.run("output", lambda: write_output(result, output, stack_budget=stack_budget,
                                                                       inputs=files))
    return result
