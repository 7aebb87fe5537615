"""A squarified treemap, laid out in Python.

:func:`squarify` places weighted boxes in a rectangle with the algorithm of Bruls, Huizing and van
Wijk, "Squarified Treemaps" (Data Visualization 2000, https://doi.org/10.1007/978-3-7091-6783-0_4):
children sorted by weight, largest first, are laid in rows along the shorter side of the space left,
a row growing while that does not worsen its worst aspect ratio.  Each box's area is its share of the
rectangle's area, exactly (up to floating point); boxes tile the rectangle without overlap.

:class:`Box` is a node of the tree (a label, a weight, children); :func:`layout` places a whole tree,
each level inside its parent's rectangle.  The same input gives the same rectangles: ties in weight
keep the children's given order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Box", "Rect", "layout", "squarify"]


@dataclass(frozen=True, slots=True)
class Rect:
    x: float
    y: float
    w: float
    h: float

    @property
    def area(self) -> float:
        return self.w * self.h


@dataclass(slots=True)
class Box:
    """A treemap node: ``weight`` is its area's share (bytes); a parent's weight is at least its children's sum.

    ``info`` is what the report shows beside the label (a tooltip), line by line; ``kind`` names the level
    ("vendor", "file", "arch", "function", "rest") for colour and behaviour.
    """
    label: str
    weight: float
    kind: str = ""
    info: tuple[str, ...] = ()
    children: list[Box] = field(default_factory=list)
    color: str = ""
    rect: Rect | None = None
    count: int = 1  # how many items the box stands for (a merged "N more" box: N)
    mark: str = ""  # classes the report adds to the box: "drop" (--keep removes it), "dup" (a duplicate)
    cut: str = "end"  # how a label too long for the box is cut: "end" or "middle" (a path)


def _worst(row: Sequence[float], side: float) -> float:
    """The largest aspect ratio of ``row`` (areas) laid along a side of length ``side``."""
    s = sum(row)
    if s <= 0 or side <= 0:
        return float("inf")
    big, small = max(row), min(row)
    if small <= 0:
        return float("inf")
    return max(side * side * big / (s * s), (s * s) / (side * side * small))


def squarify(weights: Sequence[float], rect: Rect) -> list[Rect]:
    """Rectangles for ``weights`` (non-negative) tiling ``rect``, in the order of ``weights``.

    Zero weights get a zero-area rectangle at the corner of the space left.  When all weights are
    zero every box is empty.
    """
    total = float(sum(weights))
    out: list[Rect | None] = [None] * len(weights)
    if total <= 0 or rect.w <= 0 or rect.h <= 0:
        return [Rect(rect.x, rect.y, 0.0, 0.0) for _ in weights]
    scale = rect.area / total
    # largest first; equal weights keep their given order (sorted is stable)
    order = sorted(range(len(weights)), key=lambda i: -weights[i])
    areas = [weights[i] * scale for i in order]
    x, y, w, h = rect.x, rect.y, rect.w, rect.h
    i = 0
    n = len(order)
    while i < n:
        if areas[i] <= 0:  # the rest are zero: empty boxes
            for j in range(i, n):
                out[order[j]] = Rect(x, y, 0.0, 0.0)
            break
        side = min(w, h)
        row = [areas[i]]
        j = i + 1
        while j < n and areas[j] > 0 and _worst([*row, areas[j]], side) <= _worst(row, side):
            row.append(areas[j])
            j += 1
        if j == n or areas[j] <= 0:
            # the last row takes what is left, so that the boxes tile the rectangle exactly
            row_area = w * h
            scale_row = row_area / sum(row) if sum(row) > 0 else 0.0
            row = [a * scale_row for a in row]
        s = sum(row)
        if w >= h:  # a column along the left side
            cw = s / h if h > 0 else 0.0
            cw = min(cw, w)
            cy = y
            for k, a in enumerate(row):
                bh = a / cw if cw > 0 else 0.0
                if k == len(row) - 1:
                    bh = y + h - cy
                out[order[i + k]] = Rect(x, cy, cw, bh)
                cy += bh
            x, w = x + cw, w - cw
        else:  # a row along the top
            rh = s / w if w > 0 else 0.0
            rh = min(rh, h)
            cx = x
            for k, a in enumerate(row):
                bw = a / rh if rh > 0 else 0.0
                if k == len(row) - 1:
                    bw = x + w - cx
                out[order[i + k]] = Rect(cx, y, bw, rh)
                cx += bw
            y, h = y + rh, h - rh
        i = j
    return [r if r is not None else Rect(rect.x, rect.y, 0.0, 0.0) for r in out]


def layout(root: Box, rect: Rect, *, pad_top: float = 0.0, pad: float = 0.0) -> None:
    """Place ``root`` in ``rect`` and every level below it inside its parent (``Box.rect``).

    A parent keeps ``pad_top`` at its top (for its label) and ``pad`` on the other sides when it
    is large enough for them; the children share what is left, in proportion to their weights.
    """
    root.rect = rect
    stack = [root]
    while stack:
        box = stack.pop()
        if not box.children or box.rect is None:
            continue
        r = box.rect
        inner = r
        if r.w > 4 * pad + 1 and r.h > pad_top + 2 * pad + 1:
            inner = Rect(r.x + pad, r.y + pad_top, r.w - 2 * pad, r.h - pad_top - pad)
        # the children share the parent's area in proportion to their weights; a parent heavier
        # than its children's sum keeps the difference empty (drawn as the parent's own colour)
        weights = [max(0.0, float(c.weight)) for c in box.children]
        extra = max(0.0, float(box.weight) - sum(weights))
        rects = squarify([*weights, extra] if extra > 0 else weights, inner)
        for c, cr in zip(box.children, rects, strict=False):
            c.rect = cr
            stack.append(c)
