"""The text rule: what a string read from a file looks like in terminal output.

Text output is read by people at a terminal, and by scripts line by line.  A name read from a file must
not be able to drive the terminal, forge a line, or look like something else, so these characters are
shown as visible escapes instead of being written:

- C0 controls (U+0000-U+001F, newline and tab included: the output's own newlines and column gaps are
  its structure, so a value never carries one), DEL and the C1 controls (U+0080-U+009F).  ECMA-48
  §5 (C0/C1 sets) and §5.4 (control sequences start with ESC or CSI U+009B): ESC ``]0;...`` retitles
  a terminal window, CR rewrites the line.  Shown as Python writes them: ``\\n``, ``\\t``, ``\\r``,
  ``\\x1b``, ``\\x9b``.
- Format characters (Unicode general category Cf): the bidirectional embeddings, overrides and isolates
  (U+202A-U+202E, U+2066-U+2069), marks (U+200E, U+200F, U+061C), zero-width characters (U+200B-U+200D,
  U+2060, U+FEFF) and the rest of Cf.  Unicode Standard Annex #9 (the bidirectional algorithm) and
  CVE-2021-42574 ("Trojan Source", https://trojansource.codes/): an override makes the text displayed
  differ from the text stored.  Shown as ``\\u202e`` (``\\U000e0001`` beyond the BMP).
- Line and paragraph separators (U+2028, U+2029: categories Zl, Zp), which some viewers break lines at.
- Lone surrogates (category Cs).  A file name that is not UTF-8 reaches Python through ``os.fsdecode``
  with the ``surrogateescape`` handler (PEP 383): byte 0xff becomes U+DCFF.  Such a byte is shown as
  ``\\xff``; any other lone surrogate as ``\\udXXX``.  No encoder then fails on the output.
- Noncharacters (U+FDD0-U+FDEF and U+xFFFE/U+xFFFF of every plane; Unicode §23.7), which XML 1.0 and
  many tools reject.

Everything else is written as itself, other scripts and symbols included.  A backslash is not doubled:
names without these characters (all real ones) print exactly as before and as the vendor tools print
them, and the escapes are for the eye; ``--json`` holds the exact string.

:func:`visible` is the rule for one value; :class:`VisibleWriter` applies it, newline and tab excepted,
to a whole output stream (the command line's stdout), a second line of defence behind the renderers.
"""

from __future__ import annotations

import io
import re
import unicodedata
from typing import Any, TextIO

__all__ = ["VisibleWriter", "needs_escape", "visible", "visible_tree"]

_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})

#: How the JSON encoder writes a C0 control (a backslash before a backslash gives a false alarm: the
#: tree is then walked, which finds nothing).
_JSON_C0 = re.compile(r"\\[nrtbf]|\\u00[01]")

#: ASCII characters the rule escapes, for the stream's fast path (newline and tab kept there).
_ASCII_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f]")


def _escaped(c: str) -> bool:
    o = ord(c)
    return (unicodedata.category(c) in _ESCAPED_CATEGORIES or 0xFDD0 <= o <= 0xFDEF
            or (o & 0xFFFE) == 0xFFFE)


def _shown(c: str) -> str:
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:  # an undecodable byte, as os.fsdecode (surrogateescape) carries it
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x100:
        return repr(c)[1:-1]  # \n \t \r \x1b \x85
    return f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def needs_escape(s: str, keep: str = "") -> bool:
    """Whether :func:`visible` changes ``s`` (each distinct character looked at once: fast on megabytes)."""
    return not s.isprintable() and any(_escaped(c) for c in set(s) if c not in keep)


def visible(s: str, keep: str = "") -> str:
    """``s`` with every character of the rule (the module docstring) shown as an escape; the characters
    in ``keep`` (newline and tab, for a whole output stream) are written as they are."""
    if not needs_escape(s, keep):  # every character the rule escapes is unprintable: most cost one scan
        return s
    return "".join(_shown(c) if c not in keep and _escaped(c) else c for c in s)


def visible_tree(value: Any) -> Any:
    """A copy of a report's dict/list tree with :func:`visible` applied to every string, keys included:
    the one choke point of a text renderer that formats a ``--json`` document.  A tree with nothing to
    escape (the usual case) is given back as it is, after one pass of the C JSON encoder (200,000
    functions: 0.7 s, against 2.6 s walking them in Python, on a shared 2-core machine)."""
    import json  # here: devbin.errors imports this module, and most commands never need json

    try:
        text = json.dumps(value, ensure_ascii=False, check_circular=False)
    except (TypeError, ValueError):  # not a JSON tree: walk it
        return _walk(value)
    if not _JSON_C0.search(text) and not needs_escape(text):
        return value
    return _walk(value)


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return value if value.isprintable() else visible(value)
    if isinstance(value, dict):
        return {_walk(k): _walk(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v) for v in value]
    return value


def _visible_stream(text: str) -> str:
    if text.isascii() and not _ASCII_UNSAFE.search(text):
        return text
    return visible(text, keep="\n\t")


class VisibleWriter(io.TextIOBase):
    """A text stream that writes to ``out`` with the rule applied to everything but newline and tab:
    whatever a renderer forgot to escape still cannot reach the terminal as a control or an override,
    nor make the encoder fail on an undecodable byte.  JSON passes unchanged (:mod:`devbin.escape.jsontext`
    writes none of these characters)."""

    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self.out = out

    def write(self, text: str) -> int:
        self.out.write(_visible_stream(text))
        return len(text)

    def flush(self) -> None:
        self.out.flush()

    def isatty(self) -> bool:
        return self.out.isatty()

    def fileno(self) -> int:
        return self.out.fileno()

    def writable(self) -> bool:
        return True
