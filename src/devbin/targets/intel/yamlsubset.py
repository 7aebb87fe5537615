"""The YAML that a zebin's ``.ze_info`` section is written in: a small reader of that subset.

The section is YAML (IGC ``IGC/ZEBinWriter/zebin/spec/zeinfo.md``: a map of attributes), and what
IGC writes of it is a small part of YAML: a document between ``---`` and ``...`` made of:

* block mappings, ``key: value`` one per line, nested by indentation;
* block sequences, ``- item`` lines, whose items are mappings (``- name: vadd`` then the other keys
  indented under ``name``) or scalars;
* scalars: plain (``vadd``, ``128``, ``true``), single-quoted (``'1.20'``, ``''`` for a quote),
  double-quoted (backslash escapes);
* flow sequences (``[ 64, 1, 1 ]``) and flow mappings (``{ }``).

That is what this reader takes: no anchors, tags, block scalars or multi-line flow collections
(the ``.ze_info`` of Debian's ocloc 22.43 has none; ``tests/test_intel.py`` checks that this reader
and PyYAML agree on every zebin it builds).  Scalars stay text (:data:`Value`); their meaning
(integer, boolean) is for the reader of each key (:mod:`devbin.targets.intel.zeinfo`), so unknown
keys keep their exact text.  A key given twice keeps its first value.
Nesting is capped (:data:`MAX_DEPTH`); every error is a :class:`~devbin.errors.FormatError`
naming the line.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

from devbin.errors import FormatError

__all__ = ["MAX_DEPTH", "Value", "parse_yaml"]

#: A parsed node: scalar text, a sequence or a mapping (insertion-ordered).
Value: TypeAlias = "str | list[Value] | dict[str, Value]"

#: Deepest nesting accepted (``.ze_info`` nests four levels deep).
MAX_DEPTH: Final = 32

_ESCAPES: Final = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
                   "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0"}
_HEX_ESCAPES: Final = {"x": 2, "u": 4, "U": 8}
_Err = Callable[[str], FormatError]


@dataclass(slots=True)
class _Line:
    indent: int
    text: str
    number: int


class _Parser:
    def __init__(self, lines: list[_Line], where: str) -> None:
        self.lines = lines
        self.pos = 0
        self.where = where

    def error(self, message: str, line: _Line | None = None, value: object = None) -> FormatError:
        n = line.number if line is not None else (self.lines[-1].number if self.lines else 0)
        return FormatError(message, fmt="ze_info", where=f"{self.where}line {n}", value=value)

    def at(self, line: _Line, message: str) -> FormatError:
        return self.error(message, line)

    def block(self, indent: int, depth: int) -> Value:
        if depth > MAX_DEPTH:
            raise self.error(f"nesting deeper than {MAX_DEPTH}", self.lines[self.pos])
        line = self.lines[self.pos]
        if _is_item(line.text):
            return self.sequence(line.indent, depth)
        return self.mapping(indent, depth)

    def mapping(self, indent: int, depth: int) -> dict[str, Value]:
        out: dict[str, Value] = {}
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.indent < indent or (line.indent == indent and _is_item(line.text)):
                break
            if line.indent > indent:
                raise self.error("unexpected indentation", line)
            key, rest = _split_key(line.text, functools.partial(self.at, line))
            self.pos += 1
            value: Value
            if rest:
                value = _scalar_or_flow(rest, functools.partial(self.at, line))
            elif self.pos < len(self.lines) and self.lines[self.pos].indent > indent:
                value = self.block(self.lines[self.pos].indent, depth + 1)
            elif self.pos < len(self.lines) and self.lines[self.pos].indent == indent \
                    and _is_item(self.lines[self.pos].text):
                value = self.sequence(indent, depth + 1)
            else:
                value = ""
            out.setdefault(key, value)
        return out

    def sequence(self, indent: int, depth: int) -> list[Value]:
        out: list[Value] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if line.indent != indent or not _is_item(line.text):
                if line.indent > indent:
                    raise self.error("unexpected indentation", line)
                break
            rest = line.text[1:]
            body = rest.lstrip(" ")
            if not body:
                self.pos += 1
                if self.pos < len(self.lines) and self.lines[self.pos].indent > indent:
                    out.append(self.block(self.lines[self.pos].indent, depth + 1))
                else:
                    out.append("")
                continue
            inner = indent + 1 + len(rest) - len(body)
            if _is_item(body) or _has_key(body):
                # "- key: v" / "- - x": the item is a block whose first line starts after the dash
                self.lines[self.pos] = _Line(inner, body, line.number)
                out.append(self.block(inner, depth + 1))
            else:
                self.pos += 1
                out.append(_scalar_or_flow(body, functools.partial(self.at, line)))
        return out


def _is_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _key_end(text: str) -> int:
    """Where the ``:`` ending a mapping key is, or -1 (quoted keys honoured)."""
    i = 0
    if text[:1] in ("'", '"'):
        q = text[0]
        i = 1
        while i < len(text):
            if text[i] == q:
                if q == "'" and text[i + 1:i + 2] == "'":
                    i += 2
                    continue
                break
            i += 2 if q == '"' and text[i] == "\\" else 1
        i += 1
    if text[:1] in ("[", "{"):
        return -1
    while i < len(text):
        if text[i] == ":" and (i + 1 == len(text) or text[i + 1] == " "):
            return i
        if text[i] == "#" and i and text[i - 1] == " ":
            return -1
        i += 1
    return -1


def _has_key(text: str) -> bool:
    return _key_end(text) > 0


def _split_key(text: str, error: _Err) -> tuple[str, str]:
    end = _key_end(text)
    if end <= 0:
        raise error("expected 'key: value'")
    raw = text[:end].rstrip()
    key = _scalar(raw, error) if raw[:1] in ("'", '"') else raw
    return key, _strip_comment(text[end + 1:].strip())


def _strip_comment(text: str) -> str:
    if text[:1] in ("'", '"', "[", "{"):
        return text
    cut = text.find(" #")
    return (text[:cut] if cut >= 0 else text).rstrip() if not text.startswith("#") else ""


def _scalar_or_flow(text: str, error: _Err) -> Value:
    if text[:1] in ("[", "{"):
        value, end = _flow(text, 0, error, 0)
        if _strip_comment(text[end:].strip()):
            raise error("text after a flow collection")
        return value
    return _scalar(_strip_comment(text), error)


def _flow(text: str, i: int, error: _Err, depth: int) -> tuple[Value, int]:
    """A flow sequence or mapping starting at ``text[i]``; returns it and the index after it."""
    if depth > MAX_DEPTH:
        raise error(f"nesting deeper than {MAX_DEPTH}")
    close = "]" if text[i] == "[" else "}"
    items: list[Value] = []
    pairs: dict[str, Value] = {}
    i += 1
    while True:
        while i < len(text) and text[i] == " ":
            i += 1
        if i >= len(text):
            raise error(f"unterminated flow collection (no {close!r})")
        if text[i] == close:
            return (items if close == "]" else pairs), i + 1
        if text[i] in ("[", "{"):
            item, i = _flow(text, i, error, depth + 1)
        else:
            start = i
            i = _token_end(text, i, close, error)
            item = text[start:i].strip()
        if close == "}":
            if not isinstance(item, str):
                raise error("a flow mapping key must be a scalar")
            end = _key_end(item)
            key_text, rest = (item[:end], item[end + 1:].strip()) if end > 0 else (item, "")
            key = _scalar(key_text.strip(), error)
            value = _flow(rest, 0, error, depth + 1)[0] if rest[:1] in ("[", "{") else _scalar(rest, error)
            pairs.setdefault(key, value)
        else:
            items.append(_scalar(item, error) if isinstance(item, str) else item)
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1
        elif i < len(text) and text[i] != close:
            raise error("expected ',' in a flow collection")


def _token_end(text: str, i: int, close: str, error: _Err) -> int:
    """End of one flow item (a scalar, perhaps quoted, perhaps ``key: value``)."""
    nest = 0
    while i < len(text) and (nest or text[i] not in (",", close)):
        if text[i] in "[{":
            nest += 1
        elif text[i] in "]}":
            nest -= 1
        if text[i] in ("'", '"'):
            q = text[i]
            i += 1
            while i < len(text) and text[i] != q:
                i += 2 if q == '"' and text[i] == "\\" else 1
            if i >= len(text):
                raise error("unterminated quoted scalar")
        i += 1
    return i


def _scalar(text: str, error: _Err) -> str:
    if not text:
        return ""
    if text[0] == "'":
        if len(text) < 2 or text[-1] != "'":
            raise error("unterminated single-quoted scalar")
        body = text[1:-1]
        if "'" in body.replace("''", ""):
            raise error("a lone quote inside a single-quoted scalar")
        return body.replace("''", "'")
    if text[0] == '"':
        if len(text) < 2 or text[-1] != '"':
            raise error("unterminated double-quoted scalar")
        return _unescape(text[1:-1], error)
    return text


def _unescape(body: str, error: _Err) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == '"':
            raise error("a lone quote inside a double-quoted scalar")
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1:i + 2]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
        elif e in _HEX_ESCAPES:
            n = _HEX_ESCAPES[e]
            digits = body[i + 2:i + 2 + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise error(f"bad \\{e} escape")
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise error(f"bad \\{e} escape")
            out.append(chr(code))
            i += 2 + n
        else:
            raise error(f"unknown escape \\{e}")
    return "".join(out)


def _lines(text: str, where: str) -> list[_Line]:
    out: list[_Line] = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r").rstrip(" ")
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("\t") or "\t" in line[:len(line) - len(stripped)]:
            raise FormatError("a tab in indentation", fmt="ze_info", where=f"{where}line {number}")
        if line in ("---", "...") or line.startswith("--- "):
            if line == "..." or (out and line.startswith("---")):
                break  # one document: what follows the end marker (or a second document) is not read
            if line == "---":
                continue
            stripped = line[4:].lstrip(" ")
            if not stripped:
                continue
        out.append(_Line(len(line) - len(stripped), stripped, number))
    return out


def parse_yaml(data: bytes | str, *, where: str = "") -> Value:
    """The first document of ``data`` (``.ze_info`` bytes or text): a mapping, a sequence or a scalar."""
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).split(b"\0", 1)[0].decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError("not UTF-8 text", fmt="ze_info", where=where, offset=e.start) from None
    else:
        text = data
    where = f"{where} " if where else ""
    lines = _lines(text, where)
    if not lines:
        return {}
    p = _Parser(lines, where)
    value = p.block(lines[0].indent, 0)
    if p.pos < len(lines):
        raise p.error("unexpected text after the document's top level", lines[p.pos])
    return value
