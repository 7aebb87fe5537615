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
from pathlib import Path
from typing import TypeVar

from devbin.binary.output import check_destination
from devbin.link.dce import eliminate
from devbin.link.graph import build_graph
from devbin.link.inputs import load_inputs
from devbin.link.output import write_output
from devbin.link.resolution import resolve_symbols
from devbin.link.resources import propagate
from devbin.link.result import LinkResult, PassTime

__all__ = ["LinkResult", "PassTime", "link"]

T = TypeVar("T")


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
