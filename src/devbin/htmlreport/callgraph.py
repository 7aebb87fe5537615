"""A code object's call graph as SVG, laid out by :mod:`devbin.htmlreport.graphlayout`.

The graph is the one every command prints (:func:`devbin.analysis.callgraph_view.nodes`: direct calls,
indirect calls to every address-taken function of the same prototype, external callees).  Each
node is a box with the function's name and, where the file records them, its registers (NVIDIA;
SGPRs/VGPRs on AMD) and stack bytes.  Kernels are drawn bold, address-taken functions dashed,
external callees grey; indirect edges dotted; back edges (recursion, drawn against the layers) in
red, and a function calling itself gets a loop.  A graph of more than ``max_nodes`` functions
keeps the first ``max_nodes`` met walking the calls breadth-first from the kernels, with a note
of how many were left out.

The SVG has no ``id`` attributes and no XML declaration, so that several can be put inline in one
HTML page, and the same code object always gives the same bytes.  Every name and title goes through
the markup rule (:mod:`devbin.escape.markup`): the SVG is well-formed XML whatever the names hold.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from devbin.analysis.callgraph_view import CallGraphNode, nodes
from devbin.escape.markup import lines as markup_lines
from devbin.escape.markup import text as markup
from devbin.htmlreport.graphlayout import layered_layout
from devbin.model import CodeObject

__all__ = ["MAX_NODES", "callgraph_svg", "callgraphs_svg", "graph_svg", "resource_line"]

#: The most functions drawn in one graph.
MAX_NODES = 150

_CHAR_W = 7.0  # monospace 12px, roughly
_NAME_CHARS = 48
_NODE_H = 40.0


def _num(v: float) -> str:
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return text if text != "-0" else "0"


def resource_line(n: CallGraphNode) -> str:
    """``"R regs, S B stack"`` (or ``"s SGPRs, v VGPRs, ..."``) for what the node's function records."""
    r = n.resources
    if r is None:
        return "external" if n.kind == "external" else ""
    parts = []
    if r.registers is not None:
        parts.append(f"{r.registers} regs")
    else:
        if r.sgprs is not None:
            parts.append(f"{r.sgprs} SGPRs")
        if r.vgprs is not None:
            parts.append(f"{r.vgprs} VGPRs")
    if r.stack is not None:
        parts.append(f"{r.stack} B stack")
    if r.dynamic_stack:
        parts.append("dynamic stack")
    spills = (r.spill_instructions or 0) + (r.sgpr_spills or 0) + (r.vgpr_spills or 0)
    if spills:
        parts.append(f"{spills} spills")
    return ", ".join(parts)


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 3] + "..."


def _keep(ns: list[CallGraphNode], max_nodes: int) -> list[CallGraphNode]:
    """Up to ``max_nodes`` nodes: breadth-first from the kernels (then the other roots), in node order."""
    if len(ns) <= max_nodes:
        return ns
    by_name = {n.name: n for n in ns}
    kept: dict[str, None] = {}
    starts = [n.name for n in ns if n.kind == "kernel"] + [n.name for n in ns]
    for s in starts:
        if len(kept) >= max_nodes:
            break
        if s in kept:
            continue
        queue = deque([s])
        kept[s] = None
        while queue and len(kept) < max_nodes:
            v = queue.popleft()
            for c in by_name[v].calls if v in by_name else ():
                if c not in kept and len(kept) < max_nodes:
                    kept[c] = None
                    queue.append(c)
    return [n for n in ns if n.name in kept]


def graph_svg(ns: list[CallGraphNode], *, title: str = "", direct: frozenset[tuple[str, str]] | None = None,
              max_nodes: int = MAX_NODES) -> str:
    """The SVG of call graph nodes ``ns`` (as :func:`devbin.analysis.callgraph_view.nodes` gives them).

    ``direct``: the direct-call edges (the others are drawn dotted as indirect); None: all direct.
    """
    body, width, height = _draw(ns, title, direct, max_nodes)
    return _document(body, width, height)


def _document(body: list[str], width: float, height: float) -> str:
    return "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" class="callgraph" width="{_num(width)}" '
                      f'height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}" '
                      f'font-family="monospace" font-size="12">',
                      f'<rect x="0" y="0" width="{_num(width)}" height="{_num(height)}" fill="#ffffff"/>',
                      *body, "</svg>"]) + "\n"


def _draw(ns: list[CallGraphNode], title: str, direct: frozenset[tuple[str, str]] | None,
          max_nodes: int) -> tuple[list[str], float, float]:
    """The elements of one graph (its origin at 0,0), its width and height."""
    total = len(ns)
    shown = _keep(ns, max_nodes)
    names = [n.name for n in shown]
    edges = [(n.name, c) for n in shown for c in dict.fromkeys(n.calls)]
    labels = {n.name: _cut(n.name, _NAME_CHARS) for n in shown}
    lines = {n.name: resource_line(n) for n in shown}
    widths = {n.name: max(60.0, _CHAR_W * max(len(labels[n.name]), len(lines[n.name])) + 16) for n in shown}
    lay = layered_layout(names, edges, widths=widths, node_height=_NODE_H)
    head = 24.0 if title else 0.0
    notes = []
    if total > len(shown):
        notes.append(f"{total - len(shown)} of {total} functions not shown (the first {len(shown)} "
                     f"reached from the kernels are)")
    if not shown:
        notes.append("no functions")
    foot = 18.0 * len(notes)
    width = max(lay.width, 320.0, _CHAR_W * len(title) + 32)
    height = lay.height + head + foot
    out: list[str] = []
    if title:
        out.append(f'<text x="12" y="17" font-size="13" font-weight="bold">{markup(title)}</text>')
    dx = (width - lay.width) / 2
    out.append(f'<g transform="translate({_num(dx)},{_num(head)})">')
    kinds = {n.name: n for n in shown}
    for a, b, pts, back in lay.edges:
        # from the source box's bottom (top for a back edge) to the target's top (bottom)
        sy = _NODE_H / 2 * (-1 if back else 1)
        p = [(pts[0][0], pts[0][1] + sy), *pts[1:-1], (pts[-1][0], pts[-1][1] - sy)]
        d = " ".join(f"{_num(x)},{_num(y)}" for x, y in p)
        indirect = direct is not None and (a, b) not in direct
        cls = "edge back" if back else "edge"
        colour = "#c0392b" if back else "#555555"
        dash = ' stroke-dasharray="2,3"' if indirect else ""
        out.append(f'<g class="{cls}"><title>{markup(a)} -&gt; {markup(b)}'
                   f'{" (indirect)" if indirect else ""}{" (back edge)" if back else ""}</title>'
                   f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="1.2"{dash}/>'
                   f'{_arrow(p[-2], p[-1], colour)}</g>')
    for name in lay.loops:
        x, y = lay.x[name] + widths[name] / 2, lay.y[name]
        colour = "#c0392b"
        out.append(f'<g class="edge loop"><title>{markup(name)} calls itself</title>'
                   f'<path d="M{_num(x)},{_num(y - 8)} C{_num(x + 26)},{_num(y - 20)} {_num(x + 26)},'
                   f'{_num(y + 20)} {_num(x)},{_num(y + 8)}" fill="none" stroke="{colour}" stroke-width="1.2"/>'
                   f'{_arrow((x + 12, y + 14), (x, y + 8), colour)}</g>')
    for name in names:
        n = kinds[name]
        w = widths[name]
        x, y = lay.x[name] - w / 2, lay.y[name] - _NODE_H / 2
        fill = {"kernel": "#dbe9f7", "external": "#eeeeee"}.get(n.kind, "#fdf3dc")
        stroke = "#999999" if n.kind == "external" else "#333333"
        extra = ' stroke-dasharray="4,2"' if n.address_taken else ""
        sw = "2" if n.kind == "kernel" else "1"
        tip = [f"{n.name} ({n.kind}{', address taken' if n.address_taken else ''})", *[lines[name]][:bool(lines[name])]]
        out.append(f'<g class="node {markup(n.kind)}" data-name="{markup(n.name)}"><title>{markup_lines(tip)}</title>'
                   f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(_NODE_H)}" rx="4" '
                   f'fill="{fill}" stroke="{stroke}" stroke-width="{sw}"{extra}/>'
                   f'<text x="{_num(x + 8)}" y="{_num(y + 16)}"'
                   f'{" font-weight=" + chr(34) + "bold" + chr(34) if n.kind == "kernel" else ""}>'
                   f'{markup(labels[name])}</text>'
                   f'<text x="{_num(x + 8)}" y="{_num(y + 32)}" fill="#555555">{markup(lines[name])}</text></g>')
    out.append("</g>")
    for i, note in enumerate(notes):
        out.append(f'<text class="note" x="12" y="{_num(head + lay.height + 14 + 18 * i)}" '
                   f'fill="#7a4b00">{markup(note)}</text>')
    return out, width, height


def _arrow(p: tuple[float, float], q: tuple[float, float], colour: str) -> str:
    """A filled arrowhead at ``q`` pointing from ``p`` (drawn, not an SVG marker: no ids)."""
    (px, py), (qx, qy) = p, q
    dx, dy = qx - px, qy - py
    length = (dx * dx + dy * dy) ** 0.5 or 1.0
    ux, uy = dx / length, dy / length
    bx, by = qx - 8 * ux, qy - 8 * uy
    pts = [(qx, qy), (bx - 4 * uy, by + 4 * ux), (bx + 4 * uy, by - 4 * ux)]
    return '<polygon points="' + " ".join(f"{_num(x)},{_num(y)}" for x, y in pts) + f'" fill="{colour}"/>'


def callgraph_svg(obj: CodeObject, *, title: str = "", max_nodes: int = MAX_NODES) -> str:
    """The call graph of ``obj`` as one self-contained SVG document (module docstring)."""
    return graph_svg(nodes(obj), title=title, direct=frozenset(obj.callgraph.direct), max_nodes=max_nodes)


def callgraphs_svg(graphs: Sequence[tuple[str, CodeObject]], *, max_nodes: int = MAX_NODES) -> str:
    """Several code objects' call graphs, one below the other, each titled with its label, in one SVG."""
    body: list[str] = []
    width = height = 0.0
    for label, obj in graphs:
        part, w, h = _draw(nodes(obj), label, frozenset(obj.callgraph.direct), max_nodes)
        top = height + (12.0 if body else 0.0)
        body += [f'<g class="graph" transform="translate(0,{_num(top)})">', *part, "</g>"]
        width, height = max(width, w), top + h
    if not graphs:
        body, width, height = _draw([], "", None, max_nodes)
    return _document(body, width, height)
