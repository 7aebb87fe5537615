"""The JSON rule: a document as ``--json`` prints it.

JSON keeps the true strings: the encoder escapes quotes, backslashes and C0 controls (RFC 8259 §7), and
every other character is written as itself when the document holds no character of the text rule
(:mod:`devbin.escape.text`).  When it does (a C1 control, a bidi override, a lone surrogate from a file
name that is not UTF-8), the whole document is written with ``\\uXXXX`` escapes for everything beyond
ASCII: the same JSON value, and nothing a terminal acts on or a UTF-8 encoder fails on (``json.dumps``
of a lone surrogate with ``ensure_ascii=False``, then encoded, raises ``UnicodeEncodeError``).  A
surrogate stays a ``\\udcff`` escape, which ``json.loads`` gives back and ``os.fsencode`` turns back
into the file name's byte.

A document too large to hold as one string (``size --json`` of a framework wheel: 200 MB) is written by
:func:`write` with its large arrays as :class:`Stream` values, whose items are made and encoded one at a
time: the same bytes :func:`dumps` gives (``indent=None``).  Whether the rule's escapes apply is known only
at the end, so once an item needs a ``\\u`` escape the rest is spooled to an unnamed temporary file (its
form with and without the escapes of non-ASCII text noted) and copied out when the answer is known; the
usual document, ASCII, goes straight out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TextIO

from devbin.escape.text import needs_escape

__all__ = ["Stream", "dumps", "write"]


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


class Stream:
    """A JSON array whose items ``make()`` gives one at a time while :func:`write` writes it (each item a
    JSON value, or a dict holding more :class:`Stream` values)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Iterable[Any]]) -> None:
        self.make = make

    def __iter__(self) -> Iterator[Any]:
        return iter(self.make())


def write(obj: Any, out: TextIO) -> None:
    """Write ``obj`` (a dict or list whose values may be :class:`Stream` arrays) to ``out``: exactly what
    ``out.write(dumps(obj, indent=None))`` writes with every stream made a list, without holding it all."""
    if not isinstance(obj, Stream) and not (isinstance(obj, dict) and _holds_stream(obj)):
        out.write(dumps(obj, indent=None))
        return
    w = _Writer(out)
    try:
        w.value(obj)
        w.close()
    finally:
        if w.spool is not None:
            w.spool.close()


#: Items of a :class:`Stream` encoded in one call.
_BATCH = 64
#: Characters copied at a time from the spool to the output.
_CHUNK = 1 << 20


class _Writer:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.spool: IO[bytes] | None = None  # from the first value with a \u escape, while undecided
        self.pos = 0  # characters spooled
        self.wide: list[tuple[int, int, str]] = []  # spooled (offset, length, form without escapes of non-ASCII)
        self.escape = False  # whether the document holds a character of the text rule: then ASCII throughout

    def raw(self, text: str) -> None:
        if self.spool is None:
            self.out.write(text)
        else:
            self.spool.write(text.encode("ascii"))
            self.pos += len(text)

    def value(self, obj: Any) -> None:
        if isinstance(obj, Stream):
            self.raw("[")
            batch: list[Any] = []  # items encoded together (one call of the C encoder for many small ones)
            first = True
            for item in obj:
                if isinstance(item, dict) and _holds_stream(item):
                    first = self._items(batch, first)
                    self.raw("" if first else ", ")
                    self.value(item)
                    first = False
                else:
                    batch.append(item)
                    if len(batch) == _BATCH:
                        first = self._items(batch, first)
            self._items(batch, first)
            self.raw("]")
        elif isinstance(obj, dict) and _holds_stream(obj):
            self.raw("{")
            for k, (key, v) in enumerate(obj.items()):
                self.raw(", " if k else "")
                self.leaf(key)
                self.raw(": ")
                self.value(v)
            self.raw("}")
        else:
            self.leaf(obj)

    def _items(self, batch: list[Any], first: bool) -> bool:
        """Write the items of ``batch`` (emptied) as array items; whether none was written yet."""
        if not batch:
            return first
        self.raw("" if first else ", ")
        self.leaf(batch, items=True)
        batch.clear()
        return False

    def leaf(self, obj: Any, *, items: bool = False) -> None:
        """Write ``obj`` as JSON (``items``: a list's items, without its brackets)."""
        text = json.dumps(obj)[1:-1] if items else json.dumps(obj)
        if "\\u" not in text or self.escape:
            self.raw(text)
            return
        wide = json.dumps(obj, ensure_ascii=False)[1:-1] if items else json.dumps(obj, ensure_ascii=False)
        if needs_escape(wide, keep="\n"):  # ASCII throughout: what is spooled is the output
            self.escape = True
            self._flush(keep_wide=False)
            self.raw(text)
            return
        if self.spool is None:
            import tempfile  # only where a large document holds non-ASCII text

            self.spool = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _flush, or by write on an error)
        self.wide.append((self.pos, len(text), wide))
        self.raw(text)

    def _flush(self, *, keep_wide: bool) -> None:
        """Copy the spool to the output (each noted value in its form without escapes if ``keep_wide``)."""
        spool, self.spool = self.spool, None
        if spool is None:
            return
        with spool:
            spool.seek(0)
            at = 0
            for offset, length, wide in [*(self.wide if keep_wide else ()), (self.pos, 0, "")]:
                while at < offset:
                    chunk = spool.read(min(_CHUNK, offset - at)).decode("ascii")
                    self.out.write(chunk)
                    at += len(chunk)
                self.out.write(wide)
                spool.seek(length, 1)
                at += length
        self.wide.clear()
        self.pos = 0

    def close(self) -> None:
        self._flush(keep_wide=True)


def _holds_stream(d: dict[Any, Any]) -> bool:
    """Whether a dict's values (or those of the dicts among them) hold a :class:`Stream`."""
    return any(isinstance(v, Stream) or (isinstance(v, dict) and _holds_stream(v)) for v in d.values())
