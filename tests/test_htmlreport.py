"""The size report and call-graph pictures (issue 15, item 5): the treemap and graph layouts, the page
built from a size document, ``devbin callgraph --svg``, and the page opened in a real headless browser.
"""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import json
import random
import re
import struct
import subprocess
import zipfile
import zlib
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from conftest import require_tool
from devbin.analysis.callgraph_view import CallGraphNode
from devbin.entry.elf import open_elf
from devbin.errors import FormatError
from devbin.formats.devsec.elf import read_code_object
from devbin.htmlreport import (
    Box,
    Rect,
    callgraph_svg,
    largest_code_objects,
    layered_layout,
    layout,
    render_size_report,
    size_tree,
    squarify,
)
from devbin.htmlreport.callgraph import graph_svg
from devbin.htmlreport.names import family, file_labels, middle, short_name
from devbin.importers import import_code_object
from devbin.model import CodeObject

from tests.runners import cli, run_tool

SAMPLES = Path(__file__).parents[1] / "src" / "devbin" / "samples"
EPS = 1e-6


# --------------------------------------------------------------------------- treemap layout


def _overlap(a: Rect, b: Rect) -> float:
    w = min(a.x + a.w, b.x + b.w) - max(a.x, b.x)
    h = min(a.y + a.h, b.y + b.h) - max(a.y, b.y)
    return max(0.0, w) * max(0.0, h)


def _inside(r: Rect, p: Rect) -> bool:
    return (r.x >= p.x - EPS and r.y >= p.y - EPS and r.x + r.w <= p.x + p.w + EPS
            and r.y + r.h <= p.y + p.h + EPS)


def _check_tiling(weights: list[float], rect: Rect) -> list[Rect]:
    rects = squarify(weights, rect)
    assert len(rects) == len(weights)
    total = sum(weights)
    for w, r in zip(weights, rects, strict=True):
        assert r.w >= -EPS and r.h >= -EPS
        assert _inside(r, rect), (r, rect)
        # area proportional to weight, within floating-point rounding
        assert r.area == pytest.approx(rect.area * w / total, rel=1e-9, abs=1e-6)
    for a, b in itertools.combinations(rects, 2):
        assert _overlap(a, b) < 1e-6, (a, b)
    assert sum(r.area for r in rects) == pytest.approx(rect.area, rel=1e-9)
    return rects


@pytest.mark.parametrize("seed", range(12))
def test_squarify_areas_proportional_inside_and_disjoint(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    weights = [float(rng.choice([rng.randint(1, 10), rng.randint(1, 10_000), rng.randint(1, 10**7)]))
               for _ in range(n)]
    rect = Rect(rng.uniform(0, 50), rng.uniform(0, 50), rng.uniform(1, 1500), rng.uniform(1, 900))
    _check_tiling(weights, rect)


def test_squarify_edge_cases() -> None:
    r = Rect(10, 20, 300, 100)
    assert squarify([5.0], r) == [r]
    assert squarify([], r) == []
    assert all(x.area == 0 for x in squarify([0.0, 0.0], r))
    rects = squarify([3.0, 0.0, 1.0], r)
    assert rects[1].area == 0 and rects[0].area == pytest.approx(225 * 100) and rects[2].area == pytest.approx(7500)
    _check_tiling([1.0] * 17, r)  # equal weights


def test_squarify_is_squarified() -> None:
    """Many equal boxes in a square come out close to squares (not slices)."""
    rects = squarify([1.0] * 16, Rect(0, 0, 400, 400))
    assert max(max(r.w / r.h, r.h / r.w) for r in rects) < 2.0


def test_nested_layout_keeps_children_inside_their_parent() -> None:
    rng = random.Random(7)

    def tree(depth: int) -> Box:
        if depth == 0:
            return Box("leaf", float(rng.randint(1, 1000)))
        kids = [tree(depth - 1) for _ in range(rng.randint(1, 6))]
        return Box("node", sum(k.weight for k in kids), children=kids)

    root = tree(4)
    layout(root, Rect(0, 0, 1200, 640), pad_top=16, pad=2)
    stack = [root]
    while stack:
        box = stack.pop()
        assert box.rect is not None
        rects = [c.rect for c in box.children]
        assert all(r is not None for r in rects)
        for c in box.children:
            assert c.rect is not None and _inside(c.rect, box.rect)
        for a, b in itertools.combinations([r for r in rects if r is not None], 2):
            assert _overlap(a, b) < 1e-6
        child_area = sum(r.area for r in rects if r is not None)
        if box.children and child_area > 0:  # shares among siblings follow the weights
            for c in box.children:
                assert c.rect is not None
                assert c.rect.area / child_area == pytest.approx(c.weight / box.weight, rel=1e-9, abs=1e-9)
        stack.extend(box.children)


# --------------------------------------------------------------------------- graph layout


def _random_graph(rng: random.Random, n: int, m: int) -> tuple[list[str], list[tuple[str, str]]]:
    names = [f"f{i}" for i in range(n)]
    return names, [(rng.choice(names), rng.choice(names)) for _ in range(m)]


def _has_path(edges: list[tuple[str, str]], a: str, b: str) -> bool:
    seen, stack = {a}, [a]
    while stack:
        v = stack.pop()
        if v == b:
            return True
        for s, t in edges:
            if s == v and t not in seen:
                seen.add(t)
                stack.append(t)
    return False


@pytest.mark.parametrize("seed", range(10))
def test_layered_layout_edges_point_down_except_marked_back_edges(seed: int) -> None:
    rng = random.Random(seed)
    names, edges = _random_graph(rng, rng.randint(2, 25), rng.randint(1, 50))
    lay = layered_layout(names, edges)
    assert set(lay.layer) == set(names)
    distinct = list(dict.fromkeys(e for e in edges if e[0] != e[1]))
    assert [(a, b) for a, b, _, _ in lay.edges] == distinct
    assert set(lay.loops) == {a for a, b in edges if a == b}
    forward = [(a, b) for a, b, _, back in lay.edges if not back]
    for a, b, pts, back in lay.edges:
        if back:
            assert lay.layer[b] <= lay.layer[a]
            # a back edge closes a cycle: its target reaches its source
            assert _has_path(distinct, b, a)
        else:
            assert lay.layer[b] > lay.layer[a]
        # one point per layer crossed, from the source to the target, each on its layer
        assert len(pts) == abs(lay.layer[b] - lay.layer[a]) + 1
        assert pts[0] == (round(lay.x[a], 2), round(lay.y[a], 2))
        assert pts[-1] == (round(lay.x[b], 2), round(lay.y[b], 2))
    # longest-path layering: a node's layer is one more than its deepest caller's (back edges aside)
    for v in names:
        callers = [lay.layer[a] for a, b in forward if b == v]
        assert lay.layer[v] == (max(callers) + 1 if callers else 0)
    # the forward edges alone are acyclic
    assert all(not _has_path(forward, b, a) for a, b in forward)
    # nodes of one layer do not overlap
    for level in set(lay.layer.values()):
        row = sorted(lay.x[v] for v in names if lay.layer[v] == level)
        assert all(b - a >= 120 for a, b in itertools.pairwise(row))
    # deterministic
    assert layered_layout(names, edges) == lay


def test_layered_layout_recursion_and_barycentre() -> None:
    lay = layered_layout(["k", "a", "b", "c"], [("k", "a"), ("a", "b"), ("b", "a"), ("c", "c"), ("k", "b")])
    assert lay.layer == {"k": 0, "a": 1, "b": 2, "c": 0}
    assert [(a, b, back) for a, b, _, back in lay.edges] == [("k", "a", False), ("a", "b", False),
                                                             ("b", "a", True), ("k", "b", False)]
    assert lay.loops == ("c",)
    # a crossing that the barycentre sweeps remove: x1 -> y2, x2 -> y1 given crossed
    lay = layered_layout(["x1", "x2", "y1", "y2"], [("x1", "y2"), ("x2", "y1")])
    assert (lay.order["y2"] < lay.order["y1"]) == (lay.order["x1"] < lay.order["x2"])


def test_layered_layout_dummy_budget_draws_the_longest_edges_straight() -> None:
    names = [f"c{i}" for i in range(12)]
    edges = [*itertools.pairwise(names), ("c0", "c11"), ("c0", "c3")]
    full = layered_layout(names, edges)
    assert {(a, b): len(p) for a, b, p, _ in full.edges}[("c0", "c11")] == 12
    lay = layered_layout(names, edges, max_dummies=2)  # enough for c0 -> c3 only
    points = {(a, b): p for a, b, p, _ in lay.edges}
    assert len(points[("c0", "c3")]) == 4 and len(points[("c0", "c11")]) == 2
    assert lay.layer == full.layer


def test_large_graph_is_capped_with_a_note() -> None:
    ns = [CallGraphNode(i + 1, f"fn{i}", "kernel" if i == 0 else "device", 10, False,
               (f"fn{i + 1}",) if i < 399 else ()) for i in range(400)]
    svg = graph_svg(ns, max_nodes=50)
    assert svg.count('class="node ') == 50
    assert "350 of 400 functions not shown" in svg
    ElementTree.fromstring(svg)


# --------------------------------------------------------------------------- call graphs of real code objects


def _code_object(path: Path) -> CodeObject:
    with open_elf(str(path)) as elf:
        obj = read_code_object(elf)
        return obj if obj is not None else import_code_object(elf)


def _svg_nodes(svg: str) -> dict[str, str]:
    root = ElementTree.fromstring(svg)  # well-formed XML
    ns = "{http://www.w3.org/2000/svg}"
    return {g.attrib["data-name"]: "".join(t.text or "" for t in g.iter(f"{ns}text"))
            for g in root.iter(f"{ns}g") if "data-name" in g.attrib}


def test_callgraph_svg_of_a_cubin(cubins: dict[str, Path]) -> None:
    obj = _code_object(cubins["sm_90_rdc"])
    svg = callgraph_svg(obj, title="kernels sm_90")
    assert svg == callgraph_svg(obj, title="kernels sm_90")
    assert " id=" not in svg and "<?xml" not in svg
    shown = _svg_nodes(svg)
    for f in obj.functions:
        assert f.name in shown
        regs = f.resources.registers
        if regs is not None:
            assert f"{regs} regs" in shown[f.name]
    assert shown["ext_scale"].endswith("external")  # the unresolved callee of the relocatable cubin
    # apply_op calls op_add, op_mul, op_sub through a pointer: indirect edges, drawn dotted
    indirect = re.findall(r"<title>apply_op -&gt; (op_\w+) \(indirect\)</title>", svg)
    assert sorted(indirect) == ["op_add", "op_mul", "op_sub"]


def test_callgraph_svg_recursion_is_drawn_against_the_layers() -> None:
    """Self and mutual recursion (the compilers here turn the test sources' recursion into loops: a model)."""
    from devbin.model import CallGraph, Function, FunctionKind
    obj = CodeObject(functions=(Function("k", FunctionKind.KERNEL), Function("even", FunctionKind.DEVICE),
                                Function("odd", FunctionKind.DEVICE), Function("fact", FunctionKind.DEVICE)),
                     callgraph=CallGraph(direct=(("k", "even"), ("even", "odd"), ("odd", "even"), ("k", "fact"),
                                                 ("fact", "fact"))))
    svg = callgraph_svg(obj)
    assert svg.count('class="edge back"') == 1 and "<title>odd -&gt; even (back edge)</title>" in svg
    assert svg.count('class="edge loop"') == 1 and "<title>fact calls itself</title>" in svg
    assert set(_svg_nodes(svg)) == {"k", "even", "odd", "fact"}


def test_callgraph_svg_of_an_amdgpu_object(amdgpu_objects: dict[str, Path]) -> None:
    obj = _code_object(amdgpu_objects["gfx90a_so"])
    shown = _svg_nodes(callgraph_svg(obj))
    assert {f.name for f in obj.functions} <= set(shown)
    assert any("SGPRs" in t or "regs" in t for t in shown.values())


def test_cli_callgraph_svg(tmp_path: Path) -> None:
    cubin = SAMPLES / "sample_sm90_rdc.cubin"
    plain = cli("callgraph", str(cubin))
    out = tmp_path / "g.svg"
    assert cli("callgraph", str(cubin), "--svg", str(out)) == plain  # what is printed is unchanged
    assert _svg_nodes(out.read_text()).keys() == {"saxpy", "axpy_one"}
    as_json = cli("callgraph", str(cubin), "--json")
    assert cli("callgraph", str(cubin), "--json", "--svg", str(tmp_path / "h.svg")) == as_json
    assert (tmp_path / "h.svg").read_bytes() == out.read_bytes()
    # a container: one graph per code object, each titled with its address
    from devbin.formats.ar.writer import ArMember, write_archive
    lib = tmp_path / "lib.a"
    lib.write_bytes(write_archive([ArMember("a.cubin", cubin.read_bytes()),
                                   ArMember("b.o", (SAMPLES / "sample_gfx90a.o").read_bytes())]))
    code, _ = cli("callgraph", str(lib), "--svg", str(tmp_path / "lib.svg"))
    text = (tmp_path / "lib.svg").read_text()
    assert code == 0 and text.count('class="graph"') == 2 and "(sm_90)" in text and "(gfx90a" in text
    ElementTree.fromstring(text)
    # the output is never one of the inputs
    code, _ = cli("callgraph", str(lib), "--svg", str(lib))
    assert code == 1 and lib.read_bytes().startswith(b"!<arch>\n")


# --------------------------------------------------------------------------- the page


def _full(doc: dict[str, Any]) -> dict[str, Any]:
    """A document written by hand, completed with the keys of the size contract its test does not look at
    (written out here, empty or zero: the page itself takes no key as 0, it refuses a document without one)."""
    for f in doc["files"]:
        if "savings" in f:
            f["savings"].setdefault("freed", 0)
        for im in f["images"]:
            im.setdefault("kind", "cubin")
            im.setdefault("compression", "none")
            im.setdefault("container", "file")
            im.setdefault("section", "")
            im.setdefault("functions", [])
            for fn in im["functions"]:
                fn.setdefault("demangled", fn["name"])
                fn.setdefault("kind", "function")
                fn.setdefault("related", {})
        for k, v in (("file_bytes", f["device_bytes"]), ("headers", 0), ("hidden", 0), ("sections", {}),
                     ("stored_size", sum(im["stored_size"] for im in f["images"])),
                     ("size", sum(im["size"] for im in f["images"]))):
            f.setdefault(k, v)
    for row in doc.get("by_arch", []):
        row.setdefault("function_bytes", 0)
    for k, v in (("by_arch", []), ("by_kind", []), ("by_container", []), ("top_functions", []), ("warnings", []),
                 ("duplicate_bytes", 0),
                 ("duplicates", {"images": [], "functions": [], "image_bytes": 0, "function_bytes": 0})):
        doc.setdefault(k, v)
    doc["duplicates"].setdefault("image_bytes", sum(d["wasted"] for d in doc["duplicates"]["images"]))
    doc["duplicates"].setdefault("function_bytes", sum(d["wasted"] for d in doc["duplicates"]["functions"]))
    for d in doc["duplicates"]["images"]:
        d.setdefault("size", d["stored_size"])
    if "savings" in doc:
        doc["savings"].setdefault("freed", 0)
    t = doc.setdefault("totals", {})
    for k in ("files", "file_bytes", "device_bytes", "overhead", "stored_size", "size", "images", "functions"):
        t.setdefault(k, 0)
    return doc


def _doc() -> dict[str, Any]:
    """A size document written by hand after the contract (two vendors, compression, PTX, duplicates, --keep)."""
    return _full({
        "schema": "devbin.size/1",
        "files": [
            {"path": "lib/libfoo.so", "file_bytes": 9000, "device_bytes": 7000, "overhead": 100,
             "images": [
                 {"address": "lib/libfoo.so#0.0", "vendor": "nvidia", "kind": "cubin", "arch": "sm_90",
                  "size": 5000, "stored_size": 2500, "compression": "zstd",
                  "functions": [
                      {"name": "_Z12huge_kernelPfi", "demangled": "huge_kernel(float*, int)", "size": 3000,
                       "kind": "kernel", "related": {"constant_bank": 360, "nv_info": 40}},
                      {"name": "_Z6helperv", "demangled": "helper()", "size": 1000, "kind": "function"}]},
                 {"address": "lib/libfoo.so#0.1", "vendor": "nvidia", "kind": "cubin", "arch": "sm_80",
                  "size": 4000, "stored_size": 4000, "compression": None,
                  "functions": [{"name": "_Z12huge_kernelPfi", "demangled": "huge_kernel(float*, int)",
                                 "size": 2800, "kind": "kernel"}]},
                 {"address": "lib/libfoo.so#0.2", "vendor": "nvidia", "kind": "ptx", "arch": "compute_90",
                  "size": 1200, "stored_size": 400, "compression": "zstd"}],
             "savings": {"bytes": 4000, "by_arch": {"sm_80": 4000}}},
            {"path": "lib/libamd.so", "file_bytes": 4000, "device_bytes": 3000, "overhead": 0,
             "images": [{"address": "lib/libamd.so#0", "vendor": "amd", "kind": "amdgpu", "arch": "gfx90a",
                         "size": 3000, "stored_size": 3000, "compression": None,
                         "functions": [{"name": "amd_kern", "demangled": "amd_kern", "size": 2000,
                                        "kind": "kernel"}]}],
             "savings": {"bytes": 0, "by_arch": {}}},
        ],
        "by_arch": [{"vendor": "nvidia", "arch": "sm_80", "images": 1, "stored_size": 4000, "size": 4000},
                    {"vendor": "amd", "arch": "gfx90a", "images": 1, "stored_size": 3000, "size": 3000},
                    {"vendor": "nvidia", "arch": "sm_90", "images": 1, "stored_size": 2500, "size": 5000},
                    {"vendor": "nvidia", "arch": "compute_90", "images": 1, "stored_size": 400, "size": 1200}],
        "totals": {"files": 2, "file_bytes": 13000, "device_bytes": 10000, "overhead": 100, "stored_size": 9900,
                   "size": 13200, "images": 4, "functions": 4},
        "top_functions": [
            {"name": "_Z12huge_kernelPfi", "demangled": "huge_kernel(float*, int)", "kind": "kernel", "size": 5800,
             "copies": 2, "by_arch": {"sm_90": 3000, "sm_80": 2800}},
            {"name": "amd_kern", "demangled": "amd_kern", "kind": "kernel", "size": 2000, "copies": 1,
             "by_arch": {"gfx90a": 2000}},
            {"name": "_Z6helperv", "demangled": "helper()", "kind": "function", "size": 1000, "copies": 1,
             "by_arch": {"sm_90": 1000}}],
        "duplicate_bytes": 2000,
        "duplicates": {"images": [{"sha256": "ab" * 32, "kind": "cubin", "arch": "sm_90", "stored_size": 2000,
                                   "copies": ["a#0", "b#0"], "wasted": 2000}],
                       "functions": [{"name": "_Z6helperv", "demangled": "helper()", "arch": "sm_90", "size": 1000,
                                      "copies": ["a#0:_Z6helperv", "c#0:_Z6helperv"], "wasted": 1000}]},
        "savings": {"keep": ["sm_90", "gfx90a"], "bytes": 4000, "by_arch": {"sm_80": 4000}},
        "unknown_key": {"ignored": True},
    })


def _boxes(root: Box) -> list[Box]:
    out, stack = [], [root]
    while stack:
        b = stack.pop()
        out.append(b)
        stack.extend(b.children)
    return out


def test_size_tree_weights_are_stored_bytes() -> None:
    root = size_tree(_doc())
    assert [v.label for v in root.children] == ["nvidia", "amd"]
    assert root.weight == 10000  # stored sizes plus the container overhead
    nvidia = root.children[0]
    (foo,) = nvidia.children
    # labelled by the path less what the files share ("lib/"), the full path in the tooltip
    assert foo.label == "libfoo.so" and foo.info[0] == "lib/libfoo.so" and foo.weight == 2500 + 4000 + 400 + 100
    archs = {b.label: b for b in foo.children}
    assert archs["sm_90"].weight == 2500 and archs["container overhead"].weight == 100
    # inside a compressed image, functions share its stored bytes in proportion to their sizes and what
    # belongs to them beside their code (huge_kernel's 400 related bytes); labels are short names
    funcs = {b.label: b.weight for b in archs["sm_90"].children}
    assert funcs == {"huge_kernel": 1700.0, "helper": 500.0, "rest of image": 300.0}
    for b in _boxes(root):
        if b.children:
            assert sum(c.weight for c in b.children) == pytest.approx(b.weight)


def test_size_tree_caps_functions_and_files() -> None:
    doc = {"files": [{"path": f"f{i}", "device_bytes": 100, "overhead": 0, "images": [
        {"address": f"f{i}#0", "vendor": "nvidia", "arch": "sm_90", "size": 100, "stored_size": 100,
         "functions": [{"name": f"k{j}", "size": 1} for j in range(100)]}]} for i in range(30)]}
    doc = _full(doc)
    root = size_tree(doc, max_files=10, max_functions=20, max_boxes=10_000)
    files = root.children[0].children
    assert len(files) == 11 and files[-1].label == "20 more files" and files[-1].weight == 2000
    arch = files[0].children[0]
    assert len(arch.children) == 21
    assert [(b.label, b.weight) for b in arch.children if b.kind == "rest"] == [("80 more functions", 80.0)]
    # with few boxes allowed in all, the smallest functions are merged too
    root = size_tree(doc, max_functions=20, max_boxes=100)
    arches = [f.children[0] for f in root.children[0].children]
    assert sum(1 for a in arches for b in a.children if b.kind == "function") <= 100
    assert all(sum(b.weight for b in a.children) == pytest.approx(100) for a in arches)


def test_report_page_is_self_contained_and_deterministic() -> None:
    doc = _doc()
    cubin = SAMPLES / "sample_sm90_rdc.cubin"
    page = render_size_report(doc, {"lib/libfoo.so#0.0": callgraph_svg(_code_object(cubin))})
    again = render_size_report(json.loads(json.dumps(doc)), {"lib/libfoo.so#0.0": callgraph_svg(_code_object(cubin))})
    assert page == again
    assert page.startswith("<!DOCTYPE html>")
    # nothing from elsewhere: no external URL but the SVG namespace, no src=, no link/import
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}
    assert " src=" not in page and "<link" not in page and "@import" not in page and "fetch(" not in page
    for text in ("huge_kernel(float*, int)", "_Z12huge_kernelPfi", "gfx90a", "sm_80", "compute_90",
                 "lib/libamd.so", "saved by --keep sm_90,gfx90a", "axpy_one", "helper()", "ab" * 8):
        assert text in page, text


def test_largest_code_objects() -> None:
    assert largest_code_objects(_doc()) == ["lib/libfoo.so#0.1"]
    assert largest_code_objects(_doc(), 3) == ["lib/libfoo.so#0.1", "lib/libamd.so#0", "lib/libfoo.so#0.0"]
    assert largest_code_objects(_full({"files": []})) == []


def test_report_refuses_a_document_without_a_key() -> None:
    """A key the size report's records require and the document lacks is an error naming it, at any level
    (it was read as 0 and drawn: issue 25); the optional keys (savings, budget, stored_exact) may be absent."""
    for doc, missing in (({}, "size report has no 'by_arch'"),
                         ({**_full({"files": []}), "totals": {}}, "size report.totals has no 'device_bytes'"),
                         (_full({"files": [{"path": "x", "device_bytes": 10, "overhead": 0, "images": [
                             {"address": "x#0", "vendor": "", "kind": "data", "arch": "", "size": 10,
                              "stored_size": 10}]}]}), None)):
        if missing is None:
            assert render_size_report(doc).endswith("</html>\n")
            del doc["files"][0]["images"][0]["stored_size"]
            missing = "size report.files[0].images[0] has no 'stored_size'"
        with pytest.raises(FormatError, match=re.escape(missing)):
            render_size_report(doc)
        with pytest.raises(FormatError):
            size_tree(doc)


# --------------------------------------------------------------------------- in a real browser


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) pixels of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 4 if colour == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, [r[i:i + 3] for r in rows for i in range(0, stride, bpp)]


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = require_tool("chromium", versions=())
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", *args]
    return run_tool(argv, check=False)


def _real_doc(cubins: dict[str, Path], amdgpu_objects: dict[str, Path]) -> tuple[dict[str, Any], dict[str, str]]:
    """A size document for real code objects built at test time, their functions' sizes from the model."""
    files, graphs, by_arch = [], {}, []
    for path, vendor in ((cubins["sm_90_rdc"], "nvidia"), (cubins["sm_80_rdc"], "nvidia"),
                         (amdgpu_objects["gfx90a_so"], "amd")):
        obj = _code_object(path)
        arch = obj.target.arch if obj.target else None
        n = path.stat().st_size
        address = f"{path.name}#0"
        files.append({"path": path.name, "file_bytes": n, "device_bytes": n, "overhead": 0, "images": [
            {"address": address, "vendor": vendor, "kind": "cubin" if vendor == "nvidia" else "amdgpu",
             "arch": arch, "size": n, "stored_size": n, "compression": None,
             "functions": [{"name": f.name, "demangled": f.name, "size": f.size,
                            "kind": "kernel" if f.is_kernel else "function"} for f in obj.functions]}]})
        by_arch.append({"vendor": vendor, "arch": arch, "images": 1, "stored_size": n, "size": n})
        graphs[address] = callgraph_svg(obj, title=address)
    total = sum(f["device_bytes"] for f in files)
    doc = {"schema": "devbin.size/1", "files": files, "by_arch": by_arch,
           "totals": {"files": len(files), "file_bytes": total, "device_bytes": total, "overhead": 0,
                      "stored_size": total, "size": total}, "duplicate_bytes": 0}
    return _full(doc), graphs


def _size_doc(cubins: dict[str, Path], amdgpu_objects: dict[str, Path], tmp_path: Path) -> dict[str, Any]:
    """``devbin size --json --html report.html`` itself on code objects built at test time (the page has
    the call graph of the largest code object, the default of --graph)."""
    folder = tmp_path / "objects"
    folder.mkdir()
    for p in (cubins["sm_90_rdc"], cubins["sm_80_linked"], amdgpu_objects["gfx90a_so"], amdgpu_objects["hipfb"]):
        (folder / p.name).write_bytes(p.read_bytes())
    code, text = cli("size", str(folder), "--json", "--html", str(tmp_path / "report.html"))
    assert code == 0, text
    doc: dict[str, Any] = json.loads(text)
    (largest,) = largest_code_objects(doc, 1)
    import html as html_mod
    page = (tmp_path / "report.html").read_text()
    assert f'<figure class="graph"><figcaption>{html_mod.escape(largest)}</figcaption><svg' in page
    return doc


@pytest.mark.parametrize("which", ["by-hand", "built", "devbin-size"])
def test_report_in_headless_chromium(which: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    require_tool("chromium", versions=())
    if which == "by-hand":
        doc, graphs = _doc(), {"lib/libfoo.so#0.0": callgraph_svg(_code_object(SAMPLES / "sample_sm90_rdc.cubin"))}
    elif which == "built":
        doc, graphs = _real_doc(request.getfixturevalue("cubins"), request.getfixturevalue("amdgpu_objects"))
    page = tmp_path / "report.html"
    if which == "devbin-size":  # the page devbin size --html writes
        doc = _size_doc(request.getfixturevalue("cubins"), request.getfixturevalue("amdgpu_objects"), tmp_path)
    else:
        page.write_text(render_size_report(doc, graphs))
    functions = sorted(((fn["size"], fn["demangled"]) for f in doc["files"] for im in f["images"]
                        for fn in im.get("functions", [])), reverse=True)
    largest = [name for _, name in functions[:3]]
    archs = {a["arch"] for a in doc["by_arch"]}

    shot = tmp_path / "shot.png"
    res = _chromium(tmp_path, "--window-size=1280,1400", f"--screenshot={shot}", page.as_uri())
    assert shot.is_file(), res.stderr[-2000:]
    width, height, pixels = _png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 1400)
    colours = set(pixels)
    assert len(colours) > 50, len(colours)  # not blank: the treemap's colours, text
    white = sum(1 for p in pixels if p == b"\xff\xff\xff")
    assert white < 0.9 * len(pixels)

    res = _chromium(tmp_path, "--dump-dom", page.as_uri())
    dom = res.stdout
    assert "<svg" in dom and 'id="tm"' in dom, res.stderr[-2000:]
    import html as html_mod
    text = html_mod.unescape(dom)
    for name in largest:
        assert name in text, name
    for arch in archs:
        assert arch in text, arch
    # the script ran: the breadcrumb is filled in by it
    assert re.search(r'<nav id="crumbs"><a data-i="0">all device code</a></nav>', dom), dom[:2000]

    # zoomed into the first file (through the page's address): the breadcrumb names it, other vendors hide
    first_file = re.search(r'<g class="tm file" data-i="(\d+)"[^>]*data-l="([^"]*)"', page.read_text())
    assert first_file is not None
    res = _chromium(tmp_path, "--dump-dom", page.as_uri() + f"#tm={first_file.group(1)}")
    crumbs = re.search(r'<nav id="crumbs">(.*?)</nav>', res.stdout)
    assert crumbs is not None and html_mod.unescape(first_file.group(2)) in html_mod.unescape(crumbs.group(1))
    assert 'class="tm vendor" data-i="1"' in res.stdout
    hidden = re.findall(r'<g class="tm [a-z]+" data-i="\d+"[^>]*style="display: none;"', res.stdout)
    assert hidden or len(doc["files"]) == 1


# --------------------------------------------------------------------------- issue 27, item 7: a page that answers


def test_short_names_families_and_file_labels() -> None:
    cub = "void cub::CUB_200200_800_NS::DeviceReduceKernel<float, 128, Sum>(float const*, float*, int, Sum)"
    assert short_name(cub) == "cub::DeviceReduceKernel<float, 128, Sum>"
    assert family(cub) == "cub::DeviceReduceKernel"
    assert family("huge_kernel(float*, int)") == short_name("huge_kernel(float*, int)") == "huge_kernel"
    assert family("std::vector<int>::operator()(int) const") == "std::vector::operator()"
    assert short_name("void (anonymous namespace)::f<int>(int)") == "{anonymous}::f<int>"
    for odd in ("", "a<<b(", ")))", "<", "operator<", "_Z3foo"):  # best effort, never an error
        assert isinstance(family(odd), str) and isinstance(short_name(odd), str)
    wheel = [f"/tmp/x/pkg-1.0-py3-none-any.whl!pkg/{d}/lib/libk.so" for d in "abc"]
    assert file_labels(wheel) == [f"pkg/{d}/lib/libk.so" for d in "abc"]
    assert file_labels(["/t/o/a.cubin", "/t/o/b.so"]) == ["a.cubin", "b.so"]
    assert file_labels(["/a/b.whl!c/d.so"]) == ["c/d.so"] and file_labels(["/a/k.cubin"]) == ["k.cubin"]
    assert middle("pkg/a/lib/libk.so", 12) == "pkg\u2026/libk.so" and middle("short", 12) == "short"


def _family_doc() -> dict[str, Any]:
    """Three libraries of one wheel, the same base name, 30 instantiations of one template per architecture,
    --keep sm_90 removing sm_80, a function with identical copies."""
    files = []
    for d in "abc":
        path = f"/very/long/folder/of/the/build/pkg-1.0-py3-none-any.whl!pkg/{d}/lib/libk.so"
        images = []
        for arch in ("sm_90", "sm_80"):
            fns = [{"name": f"_ZN3cub17CUB_200200_800_NS18DeviceReduceKernelI{i}E", "size": 1000 + i, "kind": "kernel",
                    "demangled": f"void cub::CUB_200200_800_NS::DeviceReduceKernel<T{i}, 128>(T{i} const*, int)"}
                   for i in range(30)]
            fns.append({"name": "_Z6helperv", "demangled": "helper()", "size": 3000, "kind": "function"})
            images.append({"address": f"{path}#{arch}", "vendor": "nvidia", "kind": "cubin", "arch": arch,
                           "size": 40000, "stored_size": 40000, "functions": fns})
        files.append({"path": path, "file_bytes": 90000, "device_bytes": 80000, "overhead": 0, "images": images,
                      "savings": {"bytes": 40960, "freed": 40000, "by_arch": {"sm_80": 40000}}})
    return _full({"files": files, "totals": {"files": 3, "file_bytes": 270000, "functions": 186},
            "savings": {"keep": ["sm_90"], "bytes": 122880, "freed": 120000, "by_arch": {"sm_80": 120000}},
            "duplicate_bytes": 6000,
            "duplicates": {"images": [], "functions": [
                {"name": "_Z6helperv", "demangled": "helper()", "arch": "sm_90", "size": 3000,
                 "copies": [f"{f['path']}#sm_90:_Z6helperv" for f in files], "wasted": 6000}]}})


def test_size_tree_families_keep_and_duplicates() -> None:
    """Fails on main: files labelled with the whole path, one box per instantiation, nothing marked."""
    root = size_tree(_family_doc())
    files = root.children[0].children
    assert sorted(f.label for f in files) == [f"pkg/{d}/lib/libk.so" for d in "abc"]
    assert all(f.cut == "middle" for f in files)
    for f in files:
        archs = {a.label: a for a in f.children}
        assert set(archs) == {"sm_90", "sm_80 (removed by --keep)"}
        assert archs["sm_80 (removed by --keep)"].mark == "drop" and archs["sm_90"].mark == ""
        assert all("drop" in b.mark for b in _boxes(archs["sm_80 (removed by --keep)"]))
        kids = {b.label: b for b in archs["sm_90"].children}
        fam = kids["cub::DeviceReduceKernel \u00d730"]
        assert fam.kind == "family" and fam.count == 30 and len(fam.children) == 30
        assert fam.children[0].label == "<T29, 128>"  # the heaviest, named by what tells it apart
        assert kids["helper"].mark == "dup" and "dup" not in archs["sm_80 (removed by --keep)"].children[0].mark


def _totals_rows(page: str) -> dict[str, str]:
    table = re.search(r'<table id="totals".*?</table>', page)
    assert table is not None
    return {html.unescape(k): v.replace(",", "") for k, v in
            re.findall(r"<tr><th>(.*?)</th><td class=\"n\">([\d,]+)</td>", table.group(0))}


def test_report_totals_in_words_and_keep_per_file() -> None:
    """Fails on main: the totals table showed the JSON keys (file_bytes, stored_size, size) and no file's saving."""
    rows = _totals_rows(render_size_report(_doc()))
    assert rows["file bytes"] == "13000" and rows["stored image bytes"] == "9900"
    assert rows["uncompressed image bytes"] == "13200" and rows["bytes in duplicate copies"] == "2000"
    assert not {"file_bytes", "stored_size", "size", "device_bytes", "duplicate_bytes"} & set(rows)
    assert rows["saved by --keep sm_90,gfx90a"] == "4000"
    assert rows["\u2003libfoo.so"] == "4000" and rows["\u2003libamd.so"] == "0"
    page = render_size_report(_family_doc())
    assert 'class="legend note"' in page and "red: removed by --keep sm_90" in page
    assert 'stroke-dasharray="3 2"' in page  # the duplicate helper outlined


def test_report_largest_functions_summed_over_copies() -> None:
    """Fails on main: huge_kernel (sm_90 and sm_80) was two rows; the text report sums copies."""
    page = render_size_report(_doc())
    table = re.search(r'<table class="sortable" id="top-functions">.*?</table>', page, re.S)
    assert table is not None
    rows = re.findall(r"<tr><td class=\"fn\" title=\"([^\"]*)\">([^<]*)</td><td data-v=\"(\d+)\" class=\"n\">"
                      r"[^<]*</td><td class=\"arch\">([^<]*)</td><td>[^<]*</td><td data-v=\"(\d+)\"", table.group(0))
    assert [(name, copies, archs, size) for _, name, copies, archs, size in rows] == [
        ("huge_kernel", "2", "sm_90 3,000 sm_80 2,800", "5800"), ("amd_kern", "1", "gfx90a 2,000", "2000"),
        ("helper", "1", "sm_90 1,000", "1000")]
    assert html.unescape(rows[0][0]) == "huge_kernel(float*, int)\n_Z12huge_kernelPfi"  # the whole name kept
    # the document's own sums (devbin size --json's top_functions) are used as given
    doc = {**_doc(), "top_functions": [{"name": "_Z1fv", "demangled": "f()", "kind": "kernel", "size": 7,
                                        "copies": 3, "by_arch": {"sm_90": 7}}]}
    assert ">f</td><td data-v=\"3\"" in render_size_report(doc)


_TEMPLATES_CU = r"""
namespace cub { namespace CUB_200200_800_NS {
template <typename T, int BLOCK, typename Op>
__global__ void DeviceReduceKernel(const T* in, T* out, int n, Op op) {
  __shared__ T s[BLOCK];
  T acc = T();
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) acc = op(acc, in[i]);
  s[threadIdx.x] = acc; __syncthreads();
  for (int k = BLOCK / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) s[threadIdx.x] = op(s[threadIdx.x], s[threadIdx.x + k]);
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
template <typename T, int ITEMS>
__global__ void DeviceScanKernel(const T* in, T* out, int n) {
  T v[ITEMS];
  int first = (blockIdx.x * blockDim.x + threadIdx.x) * ITEMS;
  for (int j = 0; j < ITEMS; ++j) v[j] = first + j < n ? in[first + j] : T();
  for (int j = 1; j < ITEMS; ++j) v[j] += v[j - 1];
  for (int j = 0; j < ITEMS; ++j) if (first + j < n) out[first + j] = v[j];
}
}}
struct Sum { template <typename T> __device__ T operator()(T a, T b) const { return a + b; } };
struct Max { template <typename T> __device__ T operator()(T a, T b) const { return a > b ? a : b; } };
__global__ void axpy_small(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
#define R(T, B, O) template __global__ void cub::CUB_200200_800_NS::DeviceReduceKernel<T, B, O>(const T*, T*, int, O);
#define RS(T, B) R(T, B, Sum) R(T, B, Max)
#define RB(T) RS(T, 64) RS(T, 128) RS(T, 256)
RB(float) RB(double) RB(int) RB(long long) RB(unsigned)
#define S(T, I) template __global__ void cub::CUB_200200_800_NS::DeviceScanKernel<T, I>(const T*, T*, int);
#define SB(T) S(T, 1) S(T, 2) S(T, 4) S(T, 8) S(T, 16)
SB(float) SB(double) SB(int)
#ifdef VARIANT
template <typename T> __global__ void variant_kernel_VARIANT(T* p) { p[threadIdx.x] *= (T)VARIANT; }
template __global__ void variant_kernel_VARIANT<float>(float*);
template __global__ void variant_kernel_VARIANT<double>(double*);
#endif
"""

#: Checks the page in the browser, after its own script laid the treemap out: what overflows the window,
#: tiles big enough for a label whose label is empty or wider than the tile, the file boxes' labels, the
#: largest-functions rows' heights.  Its result is a <pre id="check"> read back from --dump-dom.
_CHECK_JS = """<script>(function(){
var vw=document.documentElement.clientWidth,r={vw:vw,scroll:document.documentElement.scrollWidth,wide:[],
empty:[],cut:[],files:[],rows:[]};
document.querySelectorAll('body *').forEach(function(e){if(e.closest('figure.graph')||e.closest('title'))return;
var b=e.getBoundingClientRect();if(b.width&&b.right>vw+1&&r.wide.length<20)r.wide.push(e.tagName+' '+b.right);});
document.querySelectorAll('#tm g.tm').forEach(function(g){if(g.style.display==='none')return;
var b=g.querySelector('rect').getBoundingClientRect(),t=g.querySelector('text'),l=g.getAttribute('data-l');
if(g.classList.contains('file'))r.files.push(t.textContent);
if(b.width>=90&&b.height>=20&&!t.textContent)r.empty.push(l);
if(t.textContent&&t.getBoundingClientRect().right>b.right+1)r.cut.push(l);});
document.querySelectorAll('#top-functions tbody tr').forEach(function(tr){
r.rows.push(tr.getBoundingClientRect().height);});
var p=document.createElement('pre');p.id='check';p.textContent=JSON.stringify(r);document.body.appendChild(p);
})();</script>"""


@pytest.fixture(scope="module")
def templates_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel of three libraries of one base name (pkg/{a,b,c}/lib/libk.so), each built by nvcc here for
    sm_80 and sm_90 with compute_90 PTX: 48 CUB-like template instantiations (the same code in all three:
    duplicates), a kernel of its own per library."""
    nvcc = require_tool("nvcc", versions=())
    out = tmp_path_factory.mktemp("templates")
    (out / "k.cu").write_text(_TEMPLATES_CU)
    wheel = out / "pkg-1.0-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for variant, folder in ((1, "a"), (2, "b"), (3, "c")):
            lib = out / f"libk{variant}.so"
            run_tool([nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_80,code=sm_80",
                      "-gencode", "arch=compute_90,code=[sm_90,compute_90]", f"-DVARIANT={variant}",
                      out / "k.cu", "-o", lib])
            data = lib.read_bytes()
            zf.writestr(f"pkg/{folder}/lib/libk.so", data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"pkg/{folder}/lib/libk.so,sha256={digest},{len(data)}")
        zf.writestr("pkg-1.0.dist-info/RECORD", "\n".join([*record, "pkg-1.0.dist-info/RECORD,,"]) + "\n")
    return wheel


def test_keep_predicts_the_compressed_wheel(templates_wheel: Path, tmp_path: Path) -> None:
    """``size --keep`` on a wheel gives what each library's zip entry shrinks by, compressed, and the sum:
    exactly what ``devbin prune --keep -o`` then writes (fails on main: only uncompressed file bytes)."""
    code, text = cli("size", str(templates_wheel), "--keep", "sm_90", "--json")
    assert code == 0, text
    doc = json.loads(text)
    code, text = cli("prune", str(templates_wheel), "--keep", "sm_90", "-o", str(tmp_path / "pruned.whl"))
    assert code == 0, text
    with zipfile.ZipFile(templates_wheel) as old, zipfile.ZipFile(tmp_path / "pruned.whl") as new:
        shrunk = {n: old.getinfo(n).compress_size - new.getinfo(n).compress_size for n in old.namelist()}
    for f in doc["files"]:
        member = f["path"].split("!", 1)[1]
        assert f["savings"]["wheel_bytes"] == shrunk[member] > 0, (member, f["savings"], shrunk)
    assert doc["savings"]["wheel_bytes"] == sum(v for n, v in shrunk.items() if n.endswith(".so"))
    assert 0 < doc["savings"]["wheel_bytes"] < doc["savings"]["bytes"]


def _red(pixel: bytes) -> bool:
    return pixel[0] > 150 and pixel[1] < 120 and pixel[2] < 120


@pytest.mark.parametrize("window", [(1280, 900), (800, 1000)])
def test_wheel_report_in_headless_chromium(window: tuple[int, int], templates_wheel: Path, tmp_path: Path) -> None:
    """``devbin size WHEEL --keep sm_90 --html`` seen in Chromium at two window sizes (fails on main: the
    three libraries' boxes read the same cut absolute path, the totals show JSON keys, the largest
    functions are copies row by row, the treemap and tables overflow an 800-pixel window)."""
    require_tool("chromium", versions=())
    page = tmp_path / "report.html"
    code, text = cli("size", str(templates_wheel), "--keep", "sm_90", "--json", "--html", str(page))
    assert code == 0, text
    doc = json.loads(text)
    source = page.read_text()
    assert "<h2>Call graphs</h2>\n<p>No call graph to show" in source  # kernels alone: no row of boxes
    assert len(source.encode()) < 300_000, len(source.encode())  # 354,585 bytes on main, 242,362 now
    rows = _totals_rows(source)
    assert rows["saved by --keep sm_90"] == str(doc["savings"]["bytes"])
    assert rows["saved in the compressed wheel"] == str(doc["savings"]["wheel_bytes"])
    assert {rows[f"\u2003pkg/{d}/lib/libk.so"] for d in "abc"} == {str(f["savings"]["bytes"]) for f in doc["files"]}

    width, height = window
    shot = tmp_path / "shot.png"
    res = _chromium(tmp_path, f"--window-size={width},{height}", f"--screenshot={shot}", page.as_uri())
    assert shot.is_file(), res.stderr[-2000:]
    w, h, pixels = _png_pixels(shot.read_bytes())
    assert (w, h) == window
    assert sum(1 for p in pixels if _red(p)) > 0.02 * len(pixels)  # what --keep removes, in red, on screen

    checked = tmp_path / "checked.html"
    checked.write_text(source.replace("</body>", _CHECK_JS + "</body>"))
    res = _chromium(tmp_path, f"--window-size={width},{height}", "--dump-dom", checked.as_uri())
    found = re.search(r'<pre id="check">(.*?)</pre>', res.stdout)
    assert found is not None, res.stderr[-2000:]
    check = json.loads(html.unescape(found.group(1)))
    assert check["vw"] <= width and check["scroll"] <= check["vw"], check
    assert check["wide"] == [], check["wide"]  # nothing wider than the window
    assert check["empty"] == [] and check["cut"] == [], (check["empty"], check["cut"])
    assert sorted(check["files"]) == [f"pkg/{d}/lib/libk.so" for d in "abc"]
    assert check["rows"] and max(check["rows"]) < 40, check["rows"]
    labels = [html.unescape(x) for x in re.findall(r'class="tm family[^"]*"[^>]*data-l="([^"]*)"', source)]
    assert "cub::DeviceReduceKernel \u00d730" in labels and "cub::DeviceScanKernel \u00d715" in labels


def test_report_docs_say_what_the_page_does() -> None:
    """docs/REPORT.md's numbers and its family example are the code's."""
    from devbin.htmlreport import page

    text = " ".join((Path(__file__).parents[1] / "docs" / "REPORT.md").read_text().split())
    assert f"An architecture's {page.MAX_FUNCTIONS} largest families" in text
    assert f"a family's {page.MAX_FAMILY_FUNCTIONS} largest functions" in text
    assert f"beyond {page.MAX_BOXES} families and {page.MAX_BOXES} functions" in text
    example = re.search(r"\(`(void cub::CUB_\w+::DeviceReduceKernel<float, 128, Sum>)\(\.\.\.\)` → `([^`]+)`\)", text)
    assert example is not None and family(example.group(1) + "(float const*)") == example.group(2)
    assert "`<float, 128, Sum>`" in text and short_name(example.group(1) + "()").endswith("<float, 128, Sum>")
