"""Pictures of device code for people: the ``devbin size --html`` report and call graphs as SVG.

* :func:`render_size_report`: one self-contained HTML page from ``devbin size --json``'s document
  (a zoomable treemap, sortable tables, the duplicates, call graphs);
* :func:`callgraph_svg` / :func:`callgraphs_svg`: a code object's call graph as SVG
  (``devbin callgraph --svg``);
* the layouts they use, computed here: :func:`~devbin.htmlreport.treemap.squarify` (squarified
  treemap) and :func:`~devbin.htmlreport.graphlayout.layered_layout` (layered graph drawing).

No network, no script or style from elsewhere; the same input gives the same bytes.
"""

from __future__ import annotations

from devbin.htmlreport.callgraph import MAX_NODES, callgraph_svg, callgraphs_svg
from devbin.htmlreport.graphlayout import GraphLayout, layered_layout
from devbin.htmlreport.page import largest_code_objects, render_size_report, report_graphs, size_tree
from devbin.htmlreport.treemap import Box, Rect, layout, squarify

__all__ = ["MAX_NODES", "Box", "GraphLayout", "Rect", "callgraph_svg", "callgraphs_svg", "largest_code_objects",
           "layered_layout", "layout", "render_size_report", "report_graphs", "size_tree", "squarify"]
