"""The markup rule: a string read from a file as HTML or SVG/XML text or attribute value.

One rule serves both formats, because the call-graph SVG is written alone (``callgraph --svg``, an XML
document) and inline in the HTML page (``size --html``), and a name must be safe in both:

- the five markup characters ``& < > " '`` are written as character references (``html.escape`` with
  ``quote=True``; its ``&#x27;`` is XML too), so a name closes no element, attribute or ``<script>``
  (OWASP Cross Site Scripting Prevention Cheat Sheet, rules #1 and #2);
- the text rule (:func:`devbin.escape.text.visible`) applies first: XML 1.0 §2.2 "Characters" allows
  only tab, newline and carriage return of the C0 controls, no surrogate and not U+FFFE/U+FFFF, and a
  character outside that production makes the document not well-formed (a browser stops rendering an
  SVG there); escaping every control, surrogate and noncharacter, all format characters and bidi
  overrides included, means none is ever written, and an undecodable byte of a file name (``\\xff``)
  leaves nothing the UTF-8 encoder of the page could fail on.  A character reference would not do: XML
  forbids ``&#1;`` as well.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from devbin.escape.text import visible

__all__ = ["lines", "text"]


def text(s: str) -> str:
    """``s`` fit for HTML or XML text and for an attribute value in double or single quotes."""
    return html.escape(visible(s), quote=True)


def lines(parts: Iterable[str]) -> str:
    """Several lines (a tooltip's ``<title>``): each escaped by :func:`text`, joined by the only newlines
    written."""
    return "\n".join(text(p) for p in parts)
