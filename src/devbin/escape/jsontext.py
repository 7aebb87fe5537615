"""The JSON rule: a document as ``--json`` prints it.

JSON keeps the true strings: the encoder escapes quotes, backslashes and C0 controls (RFC 8259 §7), and
every other character is written as itself when the document holds no character of the text rule
(:mod:`devbin.escape.text`).  When it does (a C1 control, a bidi override, a lone surrogate from a file
name that is not UTF-8), the whole document is written with ``\\uXXXX`` escapes for everything beyond
ASCII: the same JSON value, and nothing a terminal acts on or a UTF-8 encoder fails on (``json.dumps``
of a lone surrogate with ``ensure_ascii=False``, then encoded, raises ``UnicodeEncodeError``).  A
surrogate stays a ``\\udcff`` escape, which ``json.loads`` gives back and ``os.fsencode`` turns back
into the file name's byte.
"""

from __future__ import annotations

import json
from typing import Any

from devbin.escape.text import needs_escape

__all__ = ["dumps"]


def dumps(obj: Any, *, indent: int | None = 2) -> str:
    """``obj`` as JSON text, non-ASCII text as itself unless the text rule would escape some of it."""
    # json.dumps, not json.dump: only a one-shot encode takes the C encoder (when indent is None).  The
    # C encoder's ASCII path is also twice as fast (a wheel's 2.9 MB report: 16 against 29 ms): when
    # it escaped nothing, its text is the other's.
    text = json.dumps(obj, indent=indent)
    if "\\u" not in text:
        return text
    wide = json.dumps(obj, indent=indent, ensure_ascii=False)
    return text if needs_escape(wide, keep="\n") else wide
