"""The ``devbin size --html`` report: one self-contained HTML page from ``devbin size --json``'s document.

Its input is a :class:`devbin.size.shapes.SizeReport` (what :func:`devbin.size.report.size_report`
returns, or that document read back from JSON): every entry point checks it first
(:func:`~devbin.size.shapes.check_size_report`), so a key the records require and the document lacks is
an error naming it, never a 0 drawn as if it were a size; only the optional keys (``savings``,
``budget``, ``stored_exact``) may be absent.  The page holds:

* a **treemap** of stored bytes, vendor -> file -> architecture -> template family -> function (files
  by the path a user knows, families by :mod:`devbin.htmlreport.names`; what ``--keep`` removes red,
  duplicates outlined; docs/REPORT.md), laid out here
  (:mod:`devbin.htmlreport.treemap`) and drawn as inline SVG.  A box's area is the bytes it takes in
  the file (``stored_size``): an architecture's box is its images' stored sizes; inside an image the
  stored bytes are shared among its functions in proportion to their (uncompressed) symbol sizes
  plus their ``related`` bytes,
  what the functions do not cover (headers, data, other sections) being one "rest of image" box, so
  that a compressed image's functions are scaled down with it.  Labels and tooltips give the real
  sizes.  A container's own overhead is a box in its file.  Click a box to zoom into it; the
  breadcrumb above goes back.  A small inline script only rescales the rectangles devbin computed
  (to the zoomed box, and to the window's width when it is narrower than the canvas, so that labels
  stay readable).
* **sortable tables** (click a column head): totals, by architecture, by file, the largest functions
  (demangled and mangled names), the duplicate images and functions, and the ``--keep`` savings;
* the **call graphs** handed in (SVG from :func:`devbin.htmlreport.callgraph.callgraph_svg`).

Nothing is fetched at view time; no clock or random value is used: the same document gives the same
bytes.
"""

from __future__ import annotations

import heapq
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from devbin.escape.markup import lines as markup_lines
from devbin.escape.markup import text as markup
from devbin.htmlreport.names import family, file_labels, middle, short_name
from devbin.htmlreport.treemap import Box, Rect, layout
from devbin.targets.registry import object_kinds, vendor_named

if TYPE_CHECKING:
    from devbin.size.shapes import SizeReport

__all__ = ["GRAPH_CANDIDATES", "MAX_BOXES", "MAX_FILES", "MAX_FUNCTIONS", "TOP_FUNCTIONS", "largest_code_objects",
           "render_size_report", "report_graphs",
           "size_tree"]

#: Treemap canvas, in CSS pixels, and the padding a parent keeps for its label and border.
WIDTH, HEIGHT, PAD_TOP, PAD = 1200.0, 640.0, 16.0, 2.0
#: Files per vendor and functions per architecture drawn as their own boxes; the others share one box.
MAX_FILES = 200
MAX_FUNCTIONS = 60
#: Functions of one template family drawn as their own boxes (zoomed into the family); the others share one.
MAX_FAMILY_FUNCTIONS = 40
MAX_IMAGES = 20
#: Family boxes (or lone functions), and function boxes inside families, in the whole treemap, at most.
MAX_BOXES = 600
#: Rows of the largest-functions table.
TOP_FUNCTIONS = 100
#: A function's box is drawn when it is at least this share of all the bytes (smaller ones are merged).
MIN_SHARE = 1e-5



# --------------------------------------------------------------------------- reading the document


def _checked(doc: SizeReport | Mapping[str, object]) -> SizeReport:
    """``doc`` once it holds every key the size report's records require (FormatError naming the first it
    lacks); the size package is imported here, not when ``devbin callgraph --svg`` imports this package."""
    from devbin.size.shapes import check_size_report
    return check_size_report(doc)


def _map(v: object) -> Mapping[str, object]:
    return v if isinstance(v, Mapping) else {}


def _list(v: object) -> list[Mapping[str, object]]:
    return [x for x in v if isinstance(x, Mapping)] if isinstance(v, list | tuple) else []


def _int(v: object) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _str(v: object, default: str = "") -> str:
    return v if isinstance(v, str) else default


def _bytes(n: float) -> str:
    """``1.50 MiB`` and the like (binary units)."""
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= div:
            return f"{n / div:.2f} {unit}"
    return f"{int(n)} B"


def _key(text: str) -> bytes:
    """The bytes a colour is hashed from: a path's own bytes, also when it is not UTF-8 (PEP 383)."""
    return text.encode("utf-8", "surrogateescape")


def _hue(name: str) -> int:
    v = vendor_named(name)
    return v.hue if v is not None else zlib.crc32(_key(name)) % 360


def _shade(hue: int, key: str, base: int) -> str:
    light = base + zlib.crc32(_key(key)) % 18
    return f"hsl({hue},{45 + zlib.crc32(_key(key)[::-1]) % 25}%,{light}%)"


# --------------------------------------------------------------------------- the tree


def _image_functions(image: Mapping[str, object]) -> tuple[list[tuple[float, Mapping[str, object]]], float]:
    """``image``'s functions with their boxes' weights (its stored bytes shared in proportion to their
    symbol sizes and what belongs to each beside its code: its constant bank, ``.nv.info`` ..., the
    ``related`` bytes), and the stored bytes its functions do not cover."""
    stored = _int(image.get("stored_size"))
    size = _int(image.get("size")) or stored
    functions = _list(image.get("functions"))
    sizes = [max(0, _int(f.get("size"))) + sum(max(0, _int(v)) for v in _map(f.get("related")).values())
             for f in functions]
    covered = sum(sizes)
    scale = stored / max(size, covered, 1)
    return [(s * scale, f) for s, f in zip(sizes, functions, strict=True)], (max(size, covered) - covered) * scale


def _function_box(weight: float, f: Mapping[str, object], hue: int, arch: str, mark: str, within: str = "") -> Box:
    """A function's box, labelled with its short name (less its family's name ``within`` a family's box:
    ``<float, 128, Sum>``)."""
    name = _str(f.get("name"))
    shown = _str(f.get("demangled")) or name
    fsize = max(0, _int(f.get("size")))
    related = _map(f.get("related"))
    extra = ", ".join(f"{k} {_int(v)} B" for k, v in related.items() if _int(v))
    # the mangled name is in the tables: a page of thousands of boxes does not carry it twice
    info = (shown, f"{arch}: {_bytes(fsize)}" + (f" (+ {extra})" if extra else "")
            + (" (one of identical copies)" if "dup" in mark else "") + (" (removed by --keep)" if "drop" in mark
                                                                          else ""))
    label = short_name(shown)
    if within and label.startswith(within) and len(label) > len(within):
        label = label[len(within):]
    return Box(label, weight, "function", info, color=_shade(hue, arch + name, 58), mark=mark)


def _merge(boxes: list[Box], keep: int, min_weight: float, what: str) -> list[Box]:
    """The ``keep`` heaviest boxes (at least ``min_weight``), the others merged into one."""
    ordered = sorted(boxes, key=lambda b: -b.weight)
    kept = [b for b in ordered[:keep] if b.weight >= min_weight]
    rest = ordered[len(kept):]
    if len(rest) == 1 and rest[0].count == 1 and not rest[0].children:
        kept += rest  # one box stands for itself
    elif rest:
        weight = sum(b.weight for b in rest)
        count = sum(b.count for b in rest)
        kept.append(Box(f"{count} more {what}", weight, "rest", (f"{count} more {what}: {_bytes(weight)} stored",),
                        color="hsl(0,0%,75%)", count=count, mark=" ".join(sorted({b.mark for b in rest} & {"drop"}))))
    return kept


def _groups(functions: list[tuple[float, Mapping[str, object]]]) -> dict[str, list[tuple[float, Mapping[str, object]]]]:
    """``functions`` by family, in first-seen order."""
    groups: dict[str, list[tuple[float, Mapping[str, object]]]] = {}
    for w, f in functions:
        groups.setdefault(family(_str(f.get("demangled")) or _str(f.get("name"))), []).append((w, f))
    return groups


def _floor(weights: list[float], budget: int) -> float:
    """The weight under which boxes are merged so that at most ``budget`` of ``weights`` get their own."""
    return heapq.nlargest(budget + 1, weights)[-1] * (1 + 1e-9) if len(weights) > budget else 0.0


def _family_boxes(functions: list[tuple[float, Mapping[str, object]]], hue: int, arch: str, max_functions: int,
                  floors: tuple[float, float], drop: bool, dups: frozenset[tuple[str, str]]) -> list[Box]:
    """Boxes for ``functions`` grouped by family (:func:`~devbin.htmlreport.names.family`): a family of
    several is one box named for it with its count, its heaviest members inside; the ``max_functions``
    heaviest families (weighing at least ``floors[0]``) get boxes, the others one "N more functions" box;
    inside a family, functions under ``floors[1]`` share one box."""
    groups = _groups(functions)
    boxes = []
    min_weight, leaf_weight = floors
    base = " drop" if drop else ""
    for name, members in groups.items():
        weight = sum(w for w, _ in members)
        if len(members) == 1:
            w, f = members[0]
            mark = (base + (" dup" if (_str(f.get("name")), arch) in dups else "")).strip()
            boxes.append(_function_box(w, f, hue, arch, mark))
            continue
        ndup = sum(1 for _, f in members if (_str(f.get("name")), arch) in dups)
        mark = base.strip()  # its functions carry the duplicate outline
        kids: list[Box] = []
        if weight >= min_weight:
            cap = min(max_functions, MAX_FAMILY_FUNCTIONS)
            top = heapq.nlargest(cap, range(len(members)), key=lambda i: members[i][0])
            kids = _merge([_function_box(*members[i], hue, arch,
                                         (base + (" dup" if (_str(members[i][1].get("name")), arch) in dups
                                                  else "")).strip(), name)
                           for i in sorted(top, key=lambda i: (-members[i][0], i))], cap, leaf_weight,
                          "functions")
            left = len(members) - len(top)
            if left:
                lw = weight - sum(members[i][0] for i in top)
                if kids and kids[-1].kind == "rest":
                    kids[-1] = _more_functions(kids[-1].count + left, kids[-1].weight + lw, kids[-1].mark)
                else:
                    kids.append(_more_functions(left, lw, base.strip()))
        if len(kids) == 1 and kids[0].kind == "rest":  # all too small to draw: the family is the leaf
            kids = []
        info = (f"{name}: {len(members)} functions", f"{arch}: {_bytes(weight)} stored"
                + (f", {ndup} with identical copies" if ndup else "") + (" (removed by --keep)" if drop else ""))
        boxes.append(Box(f"{name} \u00d7{len(members)}", weight, "family", info, kids,
                         color=_shade(hue, arch + name, 50), count=len(members), mark=mark))
    return _merge(boxes, max_functions, min_weight, "functions")


def _more_functions(count: int, weight: float, mark: str = "") -> Box:
    return Box(f"{count} more functions", weight, "rest", (f"{count} more functions: {_bytes(weight)} stored",),
               color="hsl(0,0%,75%)", count=count, mark=mark)


def _arch_box(path: str, arch: str, hue: int, ims: list[Mapping[str, object]], max_functions: int,
              min_weight: float, floors: tuple[float, float], drop: bool, dups: frozenset[tuple[str, str]],
              dup_images: frozenset[str]) -> Box:
    stored = sum(_int(im.get("stored_size")) for im in ims)
    size = sum(_int(im.get("size")) for im in ims)
    functions: list[tuple[float, Mapping[str, object]]] = []
    whole: list[Box] = []
    rest = 0.0
    with_functions = 0
    base = "drop" if drop else ""
    for im in ims:
        address = _str(im.get("address"))
        if address in dup_images:  # an extra copy of an identical image: one box, marked
            kind, n = _str(im.get("kind"), "image"), _int(im.get("stored_size"))
            whole.append(Box(f"{kind} {address} (identical copy)", n, "image",
                             (f"{kind} image {address}: {_bytes(n)} stored, an identical copy of another image",),
                             color=_shade(hue, address, 62), mark=(base + " dup").strip()))
        elif _list(im.get("functions")) and _int(im.get("stored_size")) > 0:
            fs, r = _image_functions(im)
            functions += fs
            rest += r
            with_functions += 1
        else:
            kind, n = _str(im.get("kind"), "image"), _int(im.get("stored_size"))
            whole.append(Box(f"{kind} {address}", n, "image", (f"{kind} image {address}: {_bytes(n)} stored, "
                             f"{_bytes(_int(im.get('size')))} uncompressed",), color=_shade(hue, address, 62),
                             mark=base))
    kids = _family_boxes(functions, hue, arch, max_functions, (max(min_weight, floors[0]), max(min_weight, floors[1])),
                         drop, dups)
    if rest > 0:
        kids.append(Box("rest of image" if with_functions == 1 else f"rest of {with_functions} images", rest, "rest",
                        (f"{path} {arch}: {_bytes(rest)} stored outside the functions (headers, data, other "
                         "sections)",), color="hsl(0,0%,80%)", mark=base))
    kids += _merge(whole, MAX_IMAGES, min_weight, "images")
    kids.sort(key=lambda b: -b.weight)
    note = ": removed by --keep" if drop else ""
    return Box(arch + (" (removed by --keep)" if drop else ""), stored, "arch",
               (path, f"{arch}: {len(ims)} image(s), {_bytes(stored)} stored, {_bytes(size)} uncompressed{note}"),
               kids, color=_shade(hue, arch, 40), mark=base)


def _duplicate_keys(doc: Mapping[str, object]) -> tuple[frozenset[tuple[str, str]], frozenset[str]]:
    """(name, arch) of the functions with identical copies; addresses of the images that are extra copies
    of another (every copy of a group but the first)."""
    dup = _map(doc.get("duplicates"))
    fns = frozenset((_str(d.get("name")), _str(d.get("arch"))) for d in _list(dup.get("functions")))
    images: set[str] = set()
    for d in _list(dup.get("images")):
        copies = d.get("copies")
        if isinstance(copies, list):
            images.update(c for c in copies[1:] if isinstance(c, str))
    return fns, frozenset(images)


def size_tree(doc: SizeReport | Mapping[str, object], *, max_files: int = MAX_FILES,
              max_functions: int = MAX_FUNCTIONS, max_boxes: int = MAX_BOXES) -> Box:
    """The treemap's tree of ``doc`` (a ``devbin size --json`` document): vendor -> file -> arch ->
    family -> function.

    Weights are stored bytes (module docstring).  Each level is ordered by weight, heaviest first.
    Files are labelled with their paths less what all share (:func:`~devbin.htmlreport.names.file_labels`).
    Beyond ``max_files`` files per vendor and ``max_functions`` families per architecture (functions
    per family), and below a share of :data:`MIN_SHARE` of all the bytes, boxes are merged into one
    "N more" box; when the functions number more than ``max_boxes``, the smallest are merged too.
    Under ``--keep`` (each file's ``savings.by_arch``), the architectures it removes are marked "drop";
    functions and images with identical copies (``duplicates``) are marked "dup".  FormatError for a
    document that lacks a key (:func:`~devbin.size.shapes.check_size_report`).
    """
    doc = _checked(doc)
    files = _list(doc["files"])
    grand = sum(_int(f.get("device_bytes")) for f in files) or 1
    min_weight = grand * MIN_SHARE
    # the budget of boxes: at most max_boxes families (or lone functions) and max_boxes functions inside
    # families get boxes of their own, the lightest sharing "N more" boxes
    families: dict[tuple[str, str, str], list[float]] = {}
    for f in files:
        for im in _list(f.get("images")):
            if _list(im.get("functions")) and _int(im.get("stored_size")) > 0:
                at = (_str(f.get("path")), _str(im.get("vendor")), _str(im.get("arch")))
                for name, members in _groups(_image_functions(im)[0]).items():
                    families.setdefault((*at[:2], at[2] + "\0" + name), []).extend(w for w, _ in members)
    floors = (_floor([sum(v) for v in families.values()], max_boxes),
              _floor([w for v in families.values() if len(v) > 1 for w in v], max_boxes))
    dups, dup_images = _duplicate_keys(doc)
    labels = file_labels([_str(f.get("path"), "?") for f in files])
    vendors: dict[str, list[Box]] = {}
    for f, label in zip(files, labels, strict=True):
        path = _str(f.get("path"), "?")
        images = _list(f.get("images"))
        dropped = _map(_map(f.get("savings")).get("by_arch"))
        # vendor -> arch -> images, in first-seen order
        by_vendor: dict[str, dict[str, list[Mapping[str, object]]]] = {}
        for im in images:
            vendor = _str(im.get("vendor"), "unknown")
            arch = _str(im.get("arch"), "") or "unknown"
            by_vendor.setdefault(vendor, {}).setdefault(arch, []).append(im)
        weights = {v: sum(_int(im.get("stored_size")) for a in archs.values() for im in a)
                   for v, archs in by_vendor.items()}
        overhead = _int(f.get("overhead"))
        home = max(weights, key=lambda v: weights[v]) if weights else "unknown"
        if not by_vendor and overhead:
            by_vendor["unknown"] = {}
        for vendor, archs in by_vendor.items():
            hue = _hue(vendor)
            arch_boxes = [_arch_box(path, arch, hue, ims, max_functions, min_weight, floors, arch in dropped, dups,
                                    dup_images) for arch, ims in archs.items()]
            if vendor == home and overhead > 0:
                arch_boxes.append(Box("container overhead", overhead, "rest",
                                      (f"{path}: {_bytes(overhead)} of container headers and padding",),
                                      color="hsl(0,0%,70%)"))
            arch_boxes.sort(key=lambda b: -b.weight)
            weight = sum(b.weight for b in arch_boxes)
            vendors.setdefault(vendor, []).append(
                Box(label, weight, "file", (path, f"{_bytes(weight)} of {vendor} device code"), arch_boxes,
                    color=_shade(hue, path, 30), cut="middle"))
    vendor_boxes = []
    for vendor, file_boxes in vendors.items():
        kept = _merge(file_boxes, max_files, 0.0, "files")
        weight = sum(b.weight for b in kept)
        vendor_boxes.append(Box(vendor, weight, "vendor", (f"{vendor}: {_bytes(weight)} stored",), kept,
                                color=f"hsl({_hue(vendor)},35%,22%)"))
    vendor_boxes.sort(key=lambda b: -b.weight)
    total = sum(b.weight for b in vendor_boxes)
    return Box("all device code", total, "root", (f"all device code: {_bytes(total)} stored",), vendor_boxes,
               color="hsl(0,0%,15%)")


# --------------------------------------------------------------------------- drawing


def _inner(r: Rect) -> Rect:
    """What a parent leaves its children (the script's ``inner`` does the same)."""
    if r.w > 4 * PAD + 1 and r.h > PAD_TOP + 2 * PAD + 1:
        return Rect(r.x + PAD, r.y + PAD_TOP, r.w - 2 * PAD, r.h - PAD_TOP - PAD)
    return r


def _num(v: float) -> str:
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return text if text != "-0" else "0"


def _frac(v: float) -> str:
    text = f"{v:.6f}".rstrip("0").rstrip(".")
    return text if text not in ("-0", "") else "0"


def _label(text: str, r: Rect, parent: bool, cut: str = "end") -> str:
    """The label as it fits in ``r`` (the script's ``fit`` does the same): cut at its end, or in its
    middle (:func:`~devbin.htmlreport.names.middle`, a path)."""
    if r.w < 30 or r.h < (14 if parent else 16):
        return ""
    n = int((r.w - 6) / 6.5)
    if cut == "middle":
        return middle(text, n)
    return text if len(text) <= n else (text[:n - 1] + "\u2026" if n > 1 else "")


def _treemap_svg(root: Box) -> str:
    layout(root, Rect(0.0, 0.0, WIDTH, HEIGHT), pad_top=PAD_TOP, pad=PAD)
    order: list[tuple[Box, int, int]] = []  # (box, parent index, depth), parents before children
    stack: list[tuple[Box, int, int]] = [(root, -1, 0)]
    while stack:
        box, parent, depth = stack.pop()
        index = len(order)
        order.append((box, parent, depth))
        stack.extend((c, index, depth + 1) for c in reversed(box.children))
    out = [f'<svg id="tm" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_num(WIDTH)} {_num(HEIGHT)}" '
           f'width="{_num(WIDTH)}" height="{_num(HEIGHT)}" font-family="sans-serif" font-size="11">']
    for index, (box, parent, depth) in enumerate(order):
        r = box.rect or Rect(0, 0, 0, 0)
        if parent >= 0:
            q = _inner(order[parent][0].rect or Rect(0, 0, 0, 0))
            f = ((r.x - q.x) / q.w if q.w else 0, (r.y - q.y) / q.h if q.h else 0,
                 r.w / q.w if q.w else 0, r.h / q.h if q.h else 0)
        else:
            f = (0.0, 0.0, 1.0, 1.0)
        text = _label(box.label, r, bool(box.children), box.cut)
        dark = box.kind in ("root", "vendor", "file", "arch")
        classes = " ".join(["tm", box.kind, *box.mark.split()])
        fill = box.color
        if "drop" in box.mark.split():  # what --keep removes: red, whatever the vendor's hue
            fill = "hsl(0,70%,36%)" if dark else _shade(0, box.label + str(index), 62)
        stroke = ('stroke="#111111" stroke-width="1.2" stroke-dasharray="3 2"' if "dup" in box.mark.split()
                  else 'stroke="#ffffff" stroke-width="0.5"')
        out.append(f'<g class="{classes}" data-i="{index}" data-p="{parent}" data-d="{depth}" '
                   f'data-f="{" ".join(_frac(v) for v in f)}" data-l="{markup(box.label)}"'
                   + (' data-m="1"' if box.cut == "middle" else "") + ">"
                   f"<title>{markup_lines(box.info or (box.label,))}</title>"
                   f'<rect x="{_num(r.x)}" y="{_num(r.y)}" width="{_num(r.w)}" height="{_num(r.h)}" '
                   f'fill="{fill}" {stroke}/>'
                   f'<text x="{_num(r.x + 3)}" y="{_num(r.y + 12)}" fill="{"#ffffff" if dark else "#111111"}">'
                   f"{markup(text)}</text></g>")
    out.append("</svg>")
    return "\n".join(out)


# --------------------------------------------------------------------------- tables


def _cell(value: object, *, num: bool = False, title: str = "", cls: str = "") -> str:
    attrs = ""
    if num:
        attrs += f' data-v="{_int(value)}" class="n"'
        text = f"{_int(value):,}"
    else:
        text = "" if value is None else str(value)
        if cls:
            attrs += f' class="{cls}"'
    if title:
        attrs += f' title="{markup(title)}"'
    return f"<td{attrs}>{markup(text)}</td>"


def _table(tid: str, heads: Sequence[tuple[str, bool]], rows: Iterable[str], caption: str = "") -> str:
    """A sortable table.  Names and paths wrap anywhere (CSS), numbers never: a table is at most the
    page's width, its long-name columns taking what the others leave."""
    head = "".join(f'<th data-num="{1 if num else 0}">{markup(h)}</th>' for h, num in heads)
    body = "\n".join(rows)
    cap = f"<caption>{markup(caption)}</caption>" if caption else ""
    return (f'<table class="sortable" id="{tid}">{cap}<thead><tr>{head}</tr></thead>\n'
            f"<tbody>\n{body}\n</tbody></table>")


#: The totals table's rows: the document's key, the label a reader knows.
_TOTAL_LABELS = (("files", "files"), ("file_bytes", "file bytes"), ("device_bytes", "device code bytes"),
                 ("overhead", "container overhead"), ("stored_size", "stored image bytes"),
                 ("size", "uncompressed image bytes"))


def _totals(doc: Mapping[str, object], labels: Mapping[str, str]) -> str:
    t = _map(doc.get("totals"))
    rows = [(label, _int(t.get(k)), k != "files") for k, label in _TOTAL_LABELS if k in t]
    if "duplicate_bytes" in doc:
        rows.append(("bytes in duplicate copies", _int(doc.get("duplicate_bytes")), True))
    savings = _map(doc.get("savings"))
    if savings:
        kept = savings.get("keep")
        keep = ",".join(str(k) for k in kept) if isinstance(kept, list) else ""
        rows.append((f"saved by --keep {keep}".strip(), _int(savings.get("bytes")), True))
        if "wheel_bytes" in savings:  # what the zip entries of a wheel's libraries shrink by, compressed
            rows.append(("saved in the compressed wheel", _int(savings.get("wheel_bytes")), True))
        for f in _list(doc.get("files")):  # the saving per file, by the name the treemap shows
            path = _str(f.get("path"), "?")
            rows.append((f"\u2003{labels.get(path, path)}", _int(_map(f.get("savings")).get("bytes")), True))
    body = "".join(f"<tr><th>{markup(k)}</th><td class=\"n\">{v:,}</td>"
                   f"<td>{markup(_bytes(v)) if unit else ''}</td></tr>" for k, v, unit in rows)
    return f'<table id="totals" class="totals"><tbody>{body}</tbody></table>'


def _by_arch(doc: Mapping[str, object]) -> str:
    rows = _list(doc.get("by_arch"))
    total = sum(_int(r.get("stored_size")) for r in rows) or 1
    saved = _map(_map(doc.get("savings")).get("by_arch"))
    heads = [("vendor", False), ("architecture", False), ("images", True), ("stored bytes", True), ("share %", True),
             ("uncompressed bytes", True)]
    if saved:
        heads.append(("saved by --keep", True))
    out = []
    for r in rows:
        stored = _int(r.get("stored_size"))
        arch = _str(r.get("arch"), "") or "unknown"
        cells = [_cell(_str(r.get("vendor"))), _cell(arch, cls="arch"), _cell(r.get("images"), num=True),
                 _cell(stored, num=True),
                 f'<td class="n" data-v="{stored}">{100 * stored / total:.1f}</td>', _cell(r.get("size"), num=True)]
        if saved:
            cells.append(_cell(saved.get(arch, 0), num=True))
        out.append("<tr>" + "".join(cells) + "</tr>")
    return _table("by-arch", heads, out)


def _by_file(doc: Mapping[str, object], labels: Mapping[str, str]) -> str:
    files = _list(doc.get("files"))
    any_savings = any("savings" in f for f in files)
    any_wheel = any("wheel_bytes" in _map(f.get("savings")) for f in files)
    heads = [("file", False), ("architectures", False), ("images", True), ("file bytes", True),
             ("device bytes", True), ("overhead", True), ("stored bytes", True), ("uncompressed bytes", True)]
    if any_savings:
        heads.append(("saved by --keep", True))
    if any_wheel:
        heads.append(("wheel saved", True))
    out = []
    for f in files:
        images = _list(f.get("images"))
        archs = sorted({_str(im.get("arch"), "") or "unknown" for im in images})
        path = _str(f.get("path"))
        cells = [_cell(labels.get(path, path), cls="path", title=path), _cell(" ".join(archs)),
                 _cell(len(images), num=True),
                 _cell(f.get("file_bytes"), num=True), _cell(f.get("device_bytes"), num=True),
                 _cell(f.get("overhead"), num=True),
                 _cell(sum(_int(im.get("stored_size")) for im in images), num=True),
                 _cell(sum(_int(im.get("size")) for im in images), num=True)]
        if any_savings:
            cells.append(_cell(_map(f.get("savings")).get("bytes", 0), num=True))
        if any_wheel:
            cells.append(_cell(_map(f.get("savings")).get("wheel_bytes", 0), num=True))
        out.append("<tr>" + "".join(cells) + "</tr>")
    return _table("by-file", heads, out)


def _name_cell(demangled: str, mangled: str) -> str:
    """A function's name shortened (:func:`~devbin.htmlreport.names.short_name`), the whole demangled and
    mangled names in its tooltip."""
    title = (demangled,) if demangled == mangled or not mangled else (demangled, mangled)
    return f'<td class="fn" title="{markup_lines(title)}">{markup(short_name(demangled or mangled))}</td>'


def _top_functions(doc: SizeReport, top: int) -> str:
    found = doc["top_functions"]  # each function summed over its copies, as the text report shows it
    count = doc["totals"]["functions"]
    rows = []
    for r in found[:top]:
        archs = _map(r.get("by_arch"))
        rows.append("<tr>" + "".join([
            _name_cell(_str(r.get("demangled")), _str(r.get("name"))), _cell(r.get("copies"), num=True),
            _cell(" ".join(f"{a} {_int(n):,}" for a, n in archs.items()), cls="arch"), _cell(_str(r.get("kind"))),
            _cell(r.get("size"), num=True)]) + "</tr>")
    caption = (f"the {len(rows)} largest functions, each summed over its copies in every image and "
               f"architecture ({count:,} function copies in all)" if rows else "no functions")
    return _table("top-functions", [("function", False), ("copies", True), ("bytes by architecture", False),
                                    ("kind", False), ("bytes", True)], rows, caption)


def _where(copies: list[str], labels: Mapping[str, str], name: str = "") -> str:
    """Where the copies are: each address with its file's path as the treemap labels it, less the
    function's name (the row says it)."""
    paths = sorted(labels, key=len, reverse=True)
    out = []
    for c in copies:
        if name and c.endswith(":" + name):
            c = c[:-len(name) - 1]
        p = next((p for p in paths if c.startswith(p)), "")
        out.append(labels[p] + c[len(p):] if p else c)
    return " ".join(out)


def _duplicates(doc: Mapping[str, object], labels: Mapping[str, str]) -> str:
    dup = _map(doc.get("duplicates"))
    images = _list(dup.get("images"))
    functions = _list(dup.get("functions"))

    def copies(d: Mapping[str, object]) -> list[str]:
        c = d.get("copies")
        return [str(x) for x in c] if isinstance(c, list) else []

    img_rows = ["<tr>" + "".join([_cell(_str(d.get("sha256"))[:16], title=_str(d.get("sha256"))),
                                  _cell(_str(d.get("kind"))), _cell(_str(d.get("arch"), "") or "unknown", cls="arch"),
                                  _cell(d.get("stored_size"), num=True), _cell(len(copies(d)), num=True),
                                  _cell(d.get("wasted"), num=True), _cell(_where(copies(d), labels), cls="path")])
                + "</tr>"
                for d in images]
    fn_rows = ["<tr>" + "".join([_name_cell(_str(d.get("demangled")), _str(d.get("name"))),
                                 _cell(_str(d.get("arch"), "") or "unknown", cls="arch"),
                                 _cell(d.get("size"), num=True), _cell(len(copies(d)), num=True),
                                 _cell(d.get("wasted"), num=True),
                                 _cell(_where(copies(d), labels, _str(d.get("name"))), cls="path")]) + "</tr>"
               for d in functions]
    out = [f"<p>The extra copies cost {_int(doc.get('duplicate_bytes')):,} bytes "
           f"({markup(_bytes(_int(doc.get('duplicate_bytes'))))}).</p>"]
    out.append(_table("dup-images", [("sha256", False), ("kind", False), ("architecture", False),
                                     ("stored bytes", True), ("copies", True), ("wasted", True), ("where", False)],
                      img_rows, f"identical images: {len(images)}"))
    out.append(_table("dup-functions", [("function", False), ("architecture", False),
                                        ("bytes", True), ("copies", True), ("wasted", True), ("where", False)],
                      fn_rows, f"identical functions (outside identical images): {len(functions)}"))
    return "\n".join(out)


def _graphs(graphs: Mapping[str, str]) -> str:
    if not graphs:
        return ("<p>No call graph to show: none was chosen, or the largest code objects call no function "
                "(kernels alone; <code>devbin size --graph ADDRESS</code> draws one anyway).</p>")
    out = []
    for address, svg in graphs.items():
        start = svg.find("<svg")
        out.append(f'<figure class="graph"><figcaption>{markup(address)}</figcaption>'
                   f"{svg[start:] if start >= 0 else ''}</figure>")
    return "\n".join(out)


def largest_code_objects(doc: SizeReport | Mapping[str, object], count: int = 1) -> list[str]:
    """Addresses of the ``count`` largest code objects (``cubin``/``amdgpu`` images, by stored bytes) of
    ``doc``: a default choice of call graphs to show (ties: the first listed)."""
    doc = _checked(doc)
    found = [(_int(im.get("stored_size")), i, _str(im.get("address")))
             for i, im in enumerate(im for f in _list(doc.get("files")) for im in _list(f.get("images")))
             if _str(im.get("kind")) in object_kinds() and _str(im.get("address"))]
    return [a for _, _, a in heapq.nsmallest(count, found, key=lambda t: (-t[0], t[1]))]


#: The largest code objects :func:`report_graphs` looks at, by default, for one with calls to draw.
GRAPH_CANDIDATES = 8


def report_graphs(doc: SizeReport | Mapping[str, object], addresses: Sequence[str] = ()) -> dict[str, str]:
    """The call graphs the page of ``doc`` shows, address -> SVG (:func:`render_size_report`'s ``graphs``):
    those of ``addresses`` (``--graph``), or by default the largest code object whose functions call one
    another (of the :data:`GRAPH_CANDIDATES` largest: a graph of kernels alone is a row of unconnected
    boxes that says nothing), or none.  UsageError for an address that is no cubin or AMDGPU code object."""
    import devbin
    from devbin.analysis.callgraph_view import nodes
    from devbin.errors import UsageError
    from devbin.htmlreport.callgraph import callgraph_svg
    from devbin.images.address import Address
    graphs: dict[str, str] = {}
    for address in addresses or largest_code_objects(doc, GRAPH_CANDIDATES):
        with devbin.open(Address.parse(address).path) as src:
            obj = src.image(address).code_object()
        if obj is None:
            raise UsageError(f"--graph {address}: not a cubin or AMDGPU code object")
        if not addresses and not any(n.calls for n in nodes(obj)):
            continue
        graphs[address] = callgraph_svg(obj, title=address)
        if not addresses:
            break
    return graphs


# --------------------------------------------------------------------------- the page

_CSS = """
body{font-family:sans-serif;margin:16px;color:#111;background:#fff}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid #ccc}
#crumbs{margin:6px 0;font-size:13px}#crumbs a{color:#0645ad;cursor:pointer;text-decoration:none}
#crumbs a:hover{text-decoration:underline}
#tm g.tm{cursor:pointer}#tm g.tm:hover>rect{stroke:#000;stroke-width:1.5}
table{border-collapse:collapse;font-size:12px;margin:6px 0}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th{cursor:pointer;background:#f2f2f2;user-select:none}
table.sortable th.asc::after{content:" \\25B2"}table.sortable th.desc::after{content:" \\25BC"}
td.mangled,td.path{font-family:monospace;font-size:11px;word-break:break-all}
td.fn,td.path,td.mangled{overflow-wrap:anywhere;min-width:12ch}td.n{white-space:nowrap}
#tm{max-width:100%;height:auto;display:block}
.legend span{display:inline-block;width:14px;height:10px;margin:0 4px 0 12px;vertical-align:middle}
caption{text-align:left;font-size:12px;color:#555}
figure.graph{margin:8px 0;overflow:auto}figcaption{font-family:monospace;font-size:12px}
.note{color:#555;font-size:12px}
"""

_JS = """
(function(){
var W=%(w)s,H=%(h)s,PT=%(pt)s,PD=%(pd)s;
var svg=document.getElementById('tm');if(!svg)return;
var gs=Array.prototype.slice.call(svg.querySelectorAll('g.tm')),N=gs.length,par=[],fr=[],kids=[];
gs.forEach(function(g,i){par.push(+g.getAttribute('data-p'));
fr.push(g.getAttribute('data-f').split(' ').map(Number));kids.push(0);if(par[i]>=0)kids[par[i]]++;});
function inner(r){return(r[2]>4*PD+1&&r[3]>PT+2*PD+1)?[r[0]+PD,r[1]+PT,r[2]-2*PD,r[3]-PT-PD]:r;}
function cut(t,n,m){if(t.length<=n)return t;if(n<2)return'';if(m){var h=Math.floor((n-1)/3);
return t.slice(0,h)+'\\u2026'+t.slice(t.length-(n-1-h));}return t.slice(0,n-1)+'\\u2026';}
function fit(t,r,p,m){if(r[2]<30||r[3]<(p?14:16))return'';return cut(t,Math.floor((r[2]-6)/6.5),m);}
function f2(v){return String(Math.round(v*100)/100);}
var root=0;
function fitw(){var w=Math.floor(svg.parentNode.clientWidth||W);w=Math.max(320,Math.min(%(w)s,w));
if(w!==W){W=w;svg.setAttribute('viewBox','0 0 '+W+' '+H);svg.setAttribute('width',W);}}
function draw(){fitw();var abs=new Array(N);abs[root]=[0,0,W,H];
for(var i=0;i<N;i++){var g=gs[i],r=abs[i];
if(i!==root&&par[i]>=0&&abs[par[i]]){var q=inner(abs[par[i]]),f=fr[i];
r=[q[0]+f[0]*q[2],q[1]+f[1]*q[3],f[2]*q[2],f[3]*q[3]];abs[i]=r;}
if(!r){g.style.display='none';continue;}
g.style.display='';var e=g.firstElementChild.nextElementSibling;
e.setAttribute('x',f2(r[0]));e.setAttribute('y',f2(r[1]));
e.setAttribute('width',f2(r[2]));e.setAttribute('height',f2(r[3]));
var t=e.nextElementSibling;t.setAttribute('x',f2(r[0]+3));t.setAttribute('y',f2(r[1]+12));
var l=g.getAttribute('data-l'),m=g.hasAttribute('data-m'),s=fit(l,r,kids[i]>0,m);t.textContent=s;
for(var n=s.length;n>0&&t.getComputedTextLength()>r[2]-5;){n--;t.textContent=cut(l,n,m);}}
var c=document.getElementById('crumbs');c.textContent='';var chain=[];
for(var k=root;k>=0;k=par[k])chain.unshift(k);
chain.forEach(function(k,j){if(j){c.appendChild(document.createTextNode(' \\u203a '));}
var a=document.createElement('a');a.textContent=gs[k].getAttribute('data-l');
a.setAttribute('data-i',k);a.onclick=function(){zoom(k);return false;};c.appendChild(a);});}
function zoom(i){root=i;draw();try{history.replaceState(null,'','#tm='+i);}catch(e){}}
svg.addEventListener('click',function(ev){var g=ev.target.closest('g.tm');if(!g)return;
var i=gs.indexOf(g);while(i>=0&&par[i]!==root)i=par[i];
if(i>=0&&kids[i]>0)zoom(i);});
var m=/^#tm=(\\d+)$/.exec(location.hash);if(m&&+m[1]<N&&kids[+m[1]]>0)root=+m[1];
window.addEventListener('resize',function(){draw();});
draw();
})();
"""

_SORT_JS = """
(function(){
document.querySelectorAll('table.sortable').forEach(function(tb){
tb.querySelectorAll('th').forEach(function(th,col){th.addEventListener('click',function(){
var num=th.getAttribute('data-num')==='1',asc=!th.classList.contains('asc');
tb.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc');});
th.classList.add(asc?'asc':'desc');var body=tb.tBodies[0];
var rows=Array.prototype.slice.call(body.rows);
rows.sort(function(a,b){var x=a.cells[col],y=b.cells[col];
var d=num?(+x.getAttribute('data-v'))-(+y.getAttribute('data-v')):x.textContent.localeCompare(y.textContent);
return asc?d:-d;});rows.forEach(function(r){body.appendChild(r);});});});});
})();
"""


def _legend(doc: Mapping[str, object]) -> str:
    """What the colours and outlines of the treemap mean (what --keep removes, duplicates)."""
    parts = []
    savings = _map(doc.get("savings"))
    if savings:
        kept = savings.get("keep")
        keep = ",".join(str(k) for k in kept) if isinstance(kept, list) else ""
        parts.append(f'<span style="background:hsl(0,70%,50%)"></span>red: removed by --keep {markup(keep)} '
                     f"(saves {markup(_bytes(_int(savings.get('bytes'))))} of file bytes"
                     + (f", {markup(_bytes(_int(savings.get('wheel_bytes'))))} of the compressed wheel"
                        if "wheel_bytes" in savings else "") + ")")
    if _int(doc.get("duplicate_bytes")):
        parts.append('<span style="border:1px dashed #111;box-sizing:border-box"></span>dashed outline: '
                     f"has identical copies ({markup(_bytes(_int(doc.get('duplicate_bytes'))))} in extra copies)")
    return f'<p class="legend note">{"".join(parts)}</p>' if parts else ""


def render_size_report(doc: SizeReport | Mapping[str, object], graphs: Mapping[str, str] | None = None, *,
                       title: str = "devbin size", top: int = TOP_FUNCTIONS) -> str:
    """The HTML report of ``doc`` (a ``devbin size --json`` document), one self-contained page.

    ``graphs``: call graphs to show, image address -> SVG (as :func:`callgraph_svg` writes it; put
    in the page as given, so it must come from devbin).  ``top``: rows of the largest-functions
    table.  The same arguments give the same text.  FormatError for a document that lacks a key
    (:func:`~devbin.size.shapes.check_size_report`).
    """
    doc = _checked(doc)
    graphs = graphs or {}
    tree = size_tree(doc)
    paths = [_str(f.get("path"), "?") for f in _list(doc.get("files"))]
    labels = dict(zip(paths, file_labels(paths), strict=True))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        f"<title>{markup(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{markup(title)}</h1>",
        "<h2>Totals</h2>", _totals(doc, labels),
        "<h2>Treemap</h2>",
        '<p class="note">Area: bytes stored in the file.  Inside an image, its stored bytes are shared among its '
        "functions in proportion to their symbol sizes (the rest of the image is one grey box); the instantiations "
        "of one template are one box, named for the template with their count (\u00d7N).  Click a box to "
        "zoom in; the path above goes back (the page's address ends in #tm=N for box N).</p>",
        _legend(doc),
        '<nav id="crumbs"></nav>',
        _treemap_svg(tree),
        "<h2>By architecture</h2>", _by_arch(doc),
        "<h2>By file</h2>", _by_file(doc, labels),
        "<h2>Largest functions</h2>", _top_functions(doc, top),
        "<h2>Duplicates</h2>", _duplicates(doc, labels),
        "<h2>Call graphs</h2>", _graphs(graphs),
        "<script>" + _JS % {"w": _num(WIDTH), "h": _num(HEIGHT), "pt": _num(PAD_TOP), "pd": _num(PAD)}
        + _SORT_JS + "</script>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
