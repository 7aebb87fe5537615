"""Which ranges hold an offset: ``SpanIndex`` over ``[lo, hi)`` spans, O(log n) per query.

Linkers, importers and loaders keep asking "which function (or variable, or section) holds
this relocated place?".  Functions do not nest, so the answer is among the few spans that
start at or just before the offset: the index sorts spans by start once and looks back at
most ``look_back`` of them from the last start not above the offset (aliases and zero-sized
symbols may sit in front of the one that holds it).

``merge_ranges`` and ``subtract_ranges`` are the set arithmetic on such ranges: what a lazy
load maps that is not mapped yet, which freed bytes of an edited ELF no table, section or
segment still occupies.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Generic, TypeVar

__all__ = ["SpanIndex", "merge_ranges", "subtract_ranges"]

T = TypeVar("T")


class SpanIndex(Generic[T]):
    """Spans ``(lo, hi, value)`` sorted by ``lo`` (stable: equal starts keep their given order)."""

    def __init__(self, spans: Iterable[tuple[int, int, T]], *, look_back: int = 16) -> None:
        self.spans = sorted(spans, key=lambda s: s[0])
        self.starts = [s[0] for s in self.spans]
        self.look_back = look_back

    def containing(self, offset: int) -> list[tuple[int, int, T]]:
        """The spans holding ``offset`` among the nearest starts, nearest start first."""
        i = bisect.bisect_right(self.starts, offset) - 1
        return [s for s in (self.spans[j] for j in range(i, max(i - self.look_back, -1), -1))
                if s[0] <= offset < s[1]]

    def at(self, offset: int) -> tuple[int, int, T] | None:
        """The span holding ``offset`` whose start is nearest to it, or None."""
        i = bisect.bisect_right(self.starts, offset) - 1
        if i >= 0 and self.look_back > 0 and offset < self.spans[i][1]:  # the nearest start holds it (usual)
            return self.spans[i]
        hits = self.containing(offset)
        return hits[0] if hits else None


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges sorted, with overlapping and touching ones joined."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        elif lo < hi:
            out.append((lo, hi))
    return out


def subtract_ranges(want: list[tuple[int, int]], have: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``want`` that ``have`` does not cover (both sorted, disjoint; so is the result)."""
    out: list[tuple[int, int]] = []
    j = 0
    for lo, hi in want:
        while j < len(have) and have[j][1] <= lo:
            j += 1
        k = j
        while lo < hi and k < len(have) and have[k][0] < hi:
            a, b = have[k]
            if a > lo:
                out.append((lo, a))
            lo = max(lo, b)
            k += 1
        if lo < hi:
            out.append((lo, hi))
    return out
