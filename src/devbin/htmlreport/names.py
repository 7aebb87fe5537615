"""Short names for the size report's pictures: C++ functions by family, files by the path a user knows.

A demangled C++ name as ``c++filt`` prints it carries its return type, every template argument and
its parameter list: ``void cub::CUB_200200_800_NS::DeviceReduceKernel<float, 128, Sum>(float const*,
float*, int, Sum)``.  Hundreds of instantiations of one template share all but the arguments, so a
tile labelled from the left reads ``void cub::CU…`` whatever it holds.

* :func:`short_name`: the name without return type and parameter list, and without CUB's and
  Thrust's versioned inline namespaces (``CUB_200200_800_NS``: CUB's ``CUB_NAMESPACE_BEGIN`` puts
  every symbol in ``CUB_<version>_<archs>_NS`` so that two CUB versions link into one program; it
  says nothing to a reader): ``cub::DeviceReduceKernel<float, 128, Sum>``;
* :func:`family`: that without template arguments, the name every instantiation shares:
  ``cub::DeviceReduceKernel``;
* :func:`file_labels`: each file's path less what all share (a wheel's member path, ``pkg/a/lib/libk.so``,
  when the files are members of one wheel; a file's name relative to the folder they share);
* :func:`middle`: a text cut in the middle to ``n`` characters, head and tail kept (three
  ``libk.so`` of one wheel stay told apart by their folders).

Parsing is by bracket depth only (``<>``, ``()``, ``[]``); an unbalanced or odd name (``operator<``,
a C name, bytes that are no C++ at all) gives a best effort, never an error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

__all__ = ["family", "file_labels", "middle", "short_name"]

_INLINE_NS = re.compile(r"\b(?:CUB|THRUST)_\d+(?:_\d+)*_NS::")
_ANON = "(anonymous namespace)"
_OPEN, _CLOSE = "<([", ">)]"


def _depths(text: str) -> list[int]:
    """The bracket depth before each character of ``text`` (never below zero)."""
    out, d = [], 0
    for c in text:
        if c in _CLOSE:
            d = max(0, d - 1)
        out.append(d)
        if c in _OPEN:
            d += 1
    return out


@lru_cache(maxsize=1 << 14)
def short_name(demangled: str) -> str:
    """``demangled`` without its return type, parameter list and versioned inline namespaces."""
    s = _INLINE_NS.sub("", demangled.replace(_ANON, "{anonymous}")).strip()
    # the parameter list: the last top-level "(...)" that ends the name (a const or & qualifier may follow)
    depth = _depths(s)
    end = len(s)
    for i in range(len(s) - 1, -1, -1):
        if s[i] == "(" and depth[i] == 0 and i > 0 and not s[:i].endswith("operator"):
            end = i
            break
    head = s[:end].rstrip()
    # the return type: what comes before the last top-level space (not inside template arguments)
    depth = _depths(head)
    for i in range(len(head) - 1, -1, -1):
        if head[i] == " " and depth[i] == 0 and not head[:i].endswith("operator"):
            head = head[i + 1:]
            break
    return head or s


@lru_cache(maxsize=1 << 14)
def family(demangled: str) -> str:
    """The name every instantiation of ``demangled``'s template shares: :func:`short_name` without
    template arguments (``cub::DeviceReduceKernel``)."""
    out, depth = [], 0
    for c in short_name(demangled):
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif not depth:
            out.append(c)
    return "".join(out).strip() or demangled


def middle(text: str, n: int) -> str:
    """``text`` in at most ``n`` characters: cut in the middle with an ellipsis, a third of them from
    its head and the rest from its tail (a path's file name and last folders)."""
    if len(text) <= n:
        return text
    if n < 2:
        return ""
    head = (n - 1) // 3
    return text[:head] + "\u2026" + text[len(text) - (n - 1 - head):]


def file_labels(paths: Sequence[str]) -> list[str]:
    """``paths`` less the prefix they all share, cut back to a ``!`` (a wheel's or archive's member
    path stays whole) or else to a ``/``; a single file keeps its member path or its file name."""
    if not paths:
        return []
    if len(set(paths)) == 1:
        p = paths[0]
        cut = p.rfind("!") + 1 or p.rfind("/") + 1
        return [p[cut:] or p for _ in paths]
    common = paths[0]
    for p in paths[1:]:
        k = 0
        while k < min(len(common), len(p)) and common[k] == p[k]:
            k += 1
        common = common[:k]
    bang = common.rfind("!")
    cut = bang + 1 if bang >= 0 else common.rfind("/") + 1
    return [p[cut:] or p for p in paths]
