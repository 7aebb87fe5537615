"""The call graph of a code object as nodes and "potentially calls" edges.

An indirect call site potentially calls every address-taken function of a
matching prototype (the one rule, :meth:`devbin.model.CallGraph.potential_callees`):
the rule nvlink uses (``nvlink --dump-callgraph``) and the one a device linker
needs for dead-code elimination.  Edges are listed direct calls first, in the
order the call graph gives them, then each indirect site's candidates in reverse
name order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from devbin.escape.text import visible
from devbin.model import CodeObject, FunctionKind
from devbin.model.resources import Resources


@dataclass(frozen=True, slots=True)
class CallGraphNode:
    number: int
    name: str
    kind: str  # "kernel", "device", "indirect_target", "external"
    registers: int | None
    address_taken: bool
    calls: tuple[str, ...]
    resources: Resources | None = None  # None for external callees (not in this code object)


_KINDS = {int(FunctionKind.KERNEL): "kernel", int(FunctionKind.DEVICE): "device",
          int(FunctionKind.INDIRECT_TARGET): "indirect_target"}


def arch_of(obj: CodeObject) -> str:
    """The architecture a graph is titled with: the target ID, ``unknown`` without a target."""
    return obj.target.target_id if obj.target else "unknown"


def nodes(obj: CodeObject) -> list[CallGraphNode]:
    """One node per function (in the code object's order), then one per external callee."""
    cg = obj.callgraph
    taken_names = {n for n, _ in cg.address_taken}
    calls: dict[str, list[str]] = {}
    for caller, callee in cg.direct:
        calls.setdefault(caller, []).append(callee)
    for caller, proto in cg.indirect_sites:
        calls.setdefault(caller, []).extend(reversed(cg.potential_callees(proto)))
    out: list[CallGraphNode] = []
    known = set()
    for f in obj.functions:
        kind = _KINDS.get(int(f.kind), f"kind {int(f.kind)}")
        res = f.resources
        out.append(CallGraphNode(len(out) + 1, f.name, kind, res.registers, f.name in taken_names,
                        tuple(calls.get(f.name, ())), res))
        known.add(f.name)
    externals = [e for e in cg.external if e not in known]
    for caller_calls in calls.values():
        externals += [c for c in caller_calls if c not in known and c not in externals]
    for name in externals:
        out.append(CallGraphNode(len(out) + 1, name, "external", None, name in taken_names, ()))
    return out


def format_text(obj: CodeObject, arch: str) -> str:
    """The layout of ``nvlink --dump-callgraph``."""
    ns = nodes(obj)
    number = {n.name: n.number for n in ns}
    lines = [
        f"callgraph for {visible(arch)}:",
        "# A: s -> B // s (number A) potentially calls B",
        "# s [N]     // s uses N registers",
        "# ^s        // s is entry point",
        "# &s        // s has address taken",
    ]
    for n in ns:
        mark = ("^" if n.kind == "kernel" else "") + ("&" if n.address_taken else "")
        regs = f" [{n.registers}]" if n.registers is not None else " [?]"
        callees = " ".join(str(number[c]) for c in n.calls)
        lines.append(f"{n.number}: {mark}{visible(n.name)}{regs} ->" + (f" {callees}" if callees else ""))
    return "\n".join(lines) + "\n"


def to_dict(obj: CodeObject, arch: str) -> dict[str, Any]:
    """Each node with its function's resources in the one shape (``Resources.to_dict()``; null for externals)."""
    return {
        "arch": arch,
        "nodes": [{"number": n.number, "name": n.name, "kind": n.kind,
                   "resources": n.resources.to_dict() if n.resources is not None else None,
                   "address_taken": n.address_taken, "calls": list(n.calls)} for n in nodes(obj)],
    }


def dot_id(name: str) -> str:
    """A Graphviz quoted ID: the text rule applied (no control character reaches the DOT text), then
    backslash and quote escaped (graphviz.org/doc/info/lang.html, "ID")."""
    return '"' + visible(name).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_graph(obj: CodeObject, indent: str, prefix: str) -> list[str]:
    """The node and edge lines of one code object's graph: kernels as boxes, address-taken functions
    dashed, externals grey, indirect edges dotted; each node ID is ``prefix`` + the function's name."""
    ns = nodes(obj)
    direct = set(obj.callgraph.direct)
    lines = []
    for n in ns:
        attrs = [f"label={dot_id(n.name + (f' [{n.registers}]' if n.registers is not None else ''))}"]
        if n.kind == "kernel":
            attrs.append("shape=box")
        if n.address_taken:
            attrs.append("style=dashed")
        if n.kind == "external":
            attrs.append("color=grey")
        lines.append(f"{indent}{dot_id(prefix + n.name)} [{', '.join(attrs)}];")
    for n in ns:
        for c in dict.fromkeys(n.calls):
            style = "" if (n.name, c) in direct else " [style=dotted]"
            lines.append(f"{indent}{dot_id(prefix + n.name)} -> {dot_id(prefix + c)}{style};")
    return lines


def format_dot(obj: CodeObject, arch: str) -> str:
    """Graphviz: one digraph named ``callgraph ARCH`` (the node and edge styles of :func:`_dot_graph`)."""
    lines = [f"digraph {dot_id('callgraph ' + arch)} {{", "  node [fontname=monospace];",
             *_dot_graph(obj, "  ", ""), "}"]
    return "\n".join(lines) + "\n"


def format_dot_clusters(graphs: Sequence[tuple[str, CodeObject]]) -> str:
    """One Graphviz digraph holding one ``subgraph cluster_N`` per (label, code object), labelled
    ``LABEL (ARCH)``; nodes and edges as :func:`format_dot` writes them, each node ID prefixed with
    ``N:`` so that functions of the same name in two images stay apart."""
    lines = ['digraph "callgraph" {', "  node [fontname=monospace];"]
    for i, (label, obj) in enumerate(graphs):
        lines += [f"  subgraph cluster_{i} {{", f"    label={dot_id(f'{label} ({arch_of(obj)})')};",
                  *_dot_graph(obj, "    ", f"{i}:"), "  }"]
    lines.append("}")
    return "\n".join(lines) + "\n"
