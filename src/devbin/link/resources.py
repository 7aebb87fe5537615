"""Resource usage propagated through the call graph (issue 7, part 4).

For each kernel, over everything it can reach (direct calls, and through each reachable
indirect call site every address-taken function whose prototype matches):

* **registers** (general, scalar, accumulation): the maximum over the kernel and every
  function reached; a function whose count is unknown is listed (``unknown``), never
  guessed;
* **stack**: the kernel's own frame plus the deepest call path's frames.  A function's
  cumulative stack is ``max(its compiler-reported stack, own frame + max over callees of
  their cumulative stack)``.  The own frame is ``FRAME_SIZE`` where the producer records
  it (NVIDIA ``EIATTR_FRAME_SIZE``); otherwise it is inferred as the reported stack minus
  the deepest reported stack among the callees *in the same object* (compilers report a
  function's stack including the callees they could see: LLVM's ScratchSize, nvcc's
  MAX_STACK_SIZE), so callees the compiler saw are not counted twice and callees in other
  objects -- the case LLVM gets wrong, llvm#139036 -- are added;
* **flags**: dynamic stack OR-ed over everything reached.  A cycle (recursion) makes the
  stack unbounded: the kernel is marked dynamic, with the cycle named, and the stack is
  the finite part (one trip around each cycle) plus ``stack_budget`` when the user gave
  one (reported as such).

The stack and register arithmetic over the components is :func:`devbin.analysis.propagation.propagate`
(shared with the AMDGPU kernel totals); the reach lists come from the one closure walk.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from devbin.analysis.propagation import propagate as propagate_totals
from devbin.link.backend import link_backend
from devbin.link.graph import ProgramGraph, ProgramNode
from devbin.model import StdAttr
from devbin.model.reach import reachable_preorder
from devbin.model.resources import Resources

__all__ = ["KernelUsage", "propagate"]

#: Reasons kept per kernel for a dynamic stack (the first ones met, callees first by position).
MAX_REASONS = 8

_REGS = {"general": StdAttr.REGS_GENERAL, "scalar": StdAttr.REGS_SCALAR, "accum": StdAttr.REGS_ACCUM}


@dataclass
class KernelUsage:
    """Propagated usage of one kernel: own values, totals, what it reaches, and why it is dynamic."""

    kernel: str
    own_registers: dict[str, int | None]
    registers: dict[str, int | None]
    own_stack: int | None
    stack: int
    dynamic: bool
    reasons: list[str] = field(default_factory=list)
    reaches: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # reached functions with no known resources
    budget_used: int | None = None
    #: the kernel's own resources (``Function.resources``) and the same record with the
    #: propagated totals put in: registers (and SGPR/VGPR/AGPR) maxima, stack, dynamic stack
    own: Resources = field(default_factory=Resources)
    total: Resources = field(default_factory=Resources)

    def to_dict(self) -> dict[str, object]:
        """``own`` and ``total`` in the one shape of a function's resources (docs/JSON.md); ``dynamic``
        is ``total.dynamic_stack`` there."""
        return {"kernel": self.kernel, "own": self.own.to_dict(), "total": self.total.to_dict(),
                "reasons": self.reasons, "stack_budget_used": self.budget_used,
                "reaches": self.reaches, "unknown": self.unknown}


def _totals(node: ProgramNode, own: Resources, maxima: dict[str, int | None], stack: int, dynamic: bool) -> Resources:
    """``own`` with the propagated totals in its fields (the stack where the vendor keeps it:
    ``stack``, or without a stack size, where the private segment is the stack (AMDGPU), ``local``)."""
    general, scalar = maxima.get("general"), maxima.get("scalar")
    out = replace(own, registers=general, sgprs=scalar, vgprs=general if scalar is not None else None,
                  agprs=maxima.get("accum"), dynamic_stack=dynamic)
    vendor = node.unit.vendor
    if vendor is not None and vendor.private_segment_is_stack and own.stack is None:
        return replace(out, local=stack)
    return replace(out, stack=stack)


def _uint(node: ProgramNode, attr: int) -> int | None:
    return node.function.uint(attr) if node.function is not None else None


def _dynamic(graph: ProgramGraph, node: ProgramNode) -> bool:
    """The function's own dynamic-stack flag (a FLAG attribute).

    Where the compiler sets the flag for any call that leaves the object, because it cannot see
    the callee (AMDGPU: LLVM; :attr:`devbin.link.backend.LinkBackend.calls_out_flag_dynamic_stack`),
    and such a function's callees are now in the link, its own flag says nothing more and the
    callees' flags (and recursion) decide instead.
    """
    if node.function is None or not node.function.attr(StdAttr.DYNAMIC_STACK):
        return False
    return not (link_backend(node.unit.vendor).calls_out_flag_dynamic_stack
                and any(graph.nodes[c].unit is not node.unit for c in node.calls))


def _stack(node: ProgramNode) -> int | None:
    """The compiler-reported stack: the vendor's per-thread stack rule
    (:meth:`devbin.targets.vendor.Vendor.stack_bytes`: ``STACK_SIZE``, else the private segment where
    that is the stack: AMDGPU's ``PRIVATE_BYTES``, LLVM's ScratchSize / private_segment_fixed_size)."""
    vendor = node.unit.vendor
    if node.function is None or vendor is None:
        return None
    return vendor.stack_bytes(node.function)


def _callees(graph: ProgramGraph, node: ProgramNode) -> list[str]:
    out = list(node.calls)
    if node.sites:
        have = set(out)
        for proto in node.sites:
            for fn in graph.matching(proto):
                if fn not in have:
                    have.add(fn)
                    out.append(fn)
    return [c for c in out if graph.nodes[c].is_function]


def _own_frame(graph: ProgramGraph, node: ProgramNode) -> int | None:
    frame = _uint(node, StdAttr.FRAME_SIZE)
    if frame is not None:
        return frame
    stack = _stack(node)
    if stack is None:
        return None
    seen = [_stack(graph.nodes[c]) for c in node.calls if graph.nodes[c].unit is node.unit]
    deepest = max((s for s in seen if s is not None), default=0)
    return max(stack - deepest, 0)


def propagate(graph: ProgramGraph, kernels: list[str], *, stack_budget: int | None = None,
              with_reach: bool = True) -> list[KernelUsage]:
    """:class:`KernelUsage` for each of ``kernels`` (node keys), in that order.

    Linear in the size of the graph: one pass over its strongly connected components
    (callees first) computes every function's cumulative stack, register maxima and
    dynamic flag; ``with_reach`` adds each kernel's reachable set (output-sized).
    """
    funcs = [k for k, n in graph.nodes.items() if n.is_function]
    callees = {k: _callees(graph, graph.nodes[k]) for k in funcs}
    prop = propagate_totals(
        funcs, callees, frame=lambda f: _own_frame(graph, graph.nodes[f]) or 0,
        reported=lambda f: _stack(graph.nodes[f]),
        values=lambda f: {name: _uint(graph.nodes[f], attr) for name, attr in _REGS.items()}, names=list(_REGS))
    # why a component's stack is dynamic: its own reasons, then each callee component's in index
    # order, first occurrence kept, at most MAX_REASONS of them (``more`` says some were left out).
    # Capping keeps the pass linear: a program whose every kernel reaches hundreds of recursions
    # would otherwise carry hundreds of reasons through every component.
    why: list[list[str]] = []
    more: list[bool] = []
    for comp, below, cyclic in zip(prop.comps, prop.below, prop.cyclic, strict=True):
        reasons = [f"{graph.nodes[f].name} has a dynamic stack" for f in comp if _dynamic(graph, graph.nodes[f])]
        if cyclic:
            names = sorted(graph.nodes[f].name for f in comp)
            reasons.append("recursion: " + (" <-> ".join(names) if len(names) > 1 else f"{names[0]} calls itself"))
        listed = list(dict.fromkeys(reasons))
        extra = len(listed) > MAX_REASONS
        for j in below:
            extra = extra or more[j]
            for t in why[j]:
                if len(listed) >= MAX_REASONS + 1:
                    break
                if t not in listed:
                    listed.append(t)
        if len(listed) > MAX_REASONS:
            listed, extra = listed[:MAX_REASONS], True
        why.append(listed)
        more.append(extra)
    out: list[KernelUsage] = []
    for k in kernels:
        root = graph.nodes[k]
        c = prop.of(k)
        reach: list[str] = []
        unknown: list[str] = []
        if with_reach:
            for cur in reachable_preorder(k, callees):
                reach.append(graph.nodes[cur].name)
                if _uint(graph.nodes[cur], StdAttr.REGS_GENERAL) is None:
                    unknown.append(graph.nodes[cur].name)
        total = prop.stack[c]
        used = None
        if prop.recurses[c] and stack_budget is not None:
            total += stack_budget
            used = stack_budget
        own = root.function.resources if root.function is not None else Resources()
        out.append(KernelUsage(root.name, {n: _uint(root, a) for n, a in _REGS.items()}, prop.maxima[c],
                               _stack(root), total, bool(why[c]),
                               why[c] + (["(more reasons not listed)"] if more[c] else []), reach, unknown, used,
                               own, _totals(root, own, prop.maxima[c], total, bool(why[c]))))
    return out
