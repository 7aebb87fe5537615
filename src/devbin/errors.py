"""The one exception family of devbin.

Every parser reports bad input by raising a :class:`DeviceBinaryError` (or a
subclass).  No parser lets ``IndexError``, ``struct.error``, ``KeyError``,
``UnicodeDecodeError``, ``RecursionError`` or ``MemoryError`` escape: the byte
reader in :mod:`devbin.binary` checks every offset and size *before* it reads,
and the few places that call into other libraries translate their errors here.

Messages follow one grammar so that a user can act on them::

    <format>: <where>: <message> (at offset 0x<off>, value 0x<val>)

for example ``elf: section [7] '.nv.info': sh_offset 0x1f00 + sh_size 0x400
exceeds file size 0x2000``.  ``where`` is a path through containers, such as
``lib.a(k.o)`` or ``fatbin[2] sm_90``; callers that open a member prefix it with
:meth:`DeviceBinaryError.within`.
"""

from __future__ import annotations

from devbin.escape.text import visible as _escape  # the text rule: a message stays one line, shown as stored

__all__ = [
    "NAME_LIMIT",
    "DeviceBinaryError",
    "FormatError",
    "LimitExceeded",
    "FormatWarning",
    "InputClash",
    "NotThisFormat",
    "OutputError",
    "TruncatedError",
    "UnsupportedVersion",
    "UsageError",
    "quote",
    "short",
]

#: Characters of a name from a file that a message shows before cutting it.
NAME_LIMIT = 80


def short(name: str, limit: int = NAME_LIMIT) -> str:
    """A name read from a file, fit for a one-line message: the text rule applied (:mod:`devbin.escape.text`:
    controls, bidi overrides, undecodable bytes shown as escapes), and cut
    after ``limit`` characters with ``...`` and its total length (``aaaa... (5000 chars)``).

    With :func:`quote`, the one helper for every message that embeds a member, entry, target,
    section or symbol name read from a file.
    """
    text = _escape(name)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(name)} chars)"


def quote(name: str, limit: int = NAME_LIMIT) -> str:
    """``repr(name)`` cut as :func:`short` cuts (``'aaaa'... (5000 chars)``): for ``{name!r}`` in messages."""
    if len(name) <= limit:
        return repr(name)
    return f"{name[:limit]!r}... ({len(name)} chars)"


class DeviceBinaryError(Exception):
    """Base of every error devbin raises on purpose.

    Attributes are structured so that tools can report them without parsing
    the message: ``fmt`` (format name), ``where`` (location path), ``offset``
    (byte offset in the buffer the parser was given, if known) and ``value``
    (the offending value, if any).
    """

    def __init__(
        self,
        message: str,
        *,
        fmt: str = "",
        where: str = "",
        offset: int | None = None,
        value: object = None,
    ) -> None:
        self.message = message
        self.fmt = fmt
        self.where = where
        self.offset = offset
        self.value = value
        super().__init__(self.render())

    def render(self) -> str:
        """One line: the location's parts cut with :func:`short`, control characters escaped."""
        where = ": ".join(short(p) for p in self.where.split(": ")) if self.where else ""
        parts = [p for p in (self.fmt, where) if p]
        head = _escape(": ".join([*parts, self.message]))
        tail = []
        if self.offset is not None:
            tail.append(f"at offset {self.offset:#x}")
        if self.value is not None:
            v = self.value
            if isinstance(v, int) and not isinstance(v, bool):
                tail.append(f"value {v:#x}")
            else:
                text = repr(v)
                tail.append(f"value {text if len(text) <= NAME_LIMIT else short(text)}")
        return f"{head} ({', '.join(tail)})" if tail else head

    def __str__(self) -> str:
        return self.render()

    def within(self, outer: str) -> DeviceBinaryError:
        """Prefix the location with an enclosing container path and return self."""
        if outer:
            self.where = f"{outer}: {self.where}" if self.where else outer
            self.args = (self.render(),)
        return self


class FormatError(DeviceBinaryError):
    """The bytes break a rule of their format (bad magic, bad offset, bad count)."""


class TruncatedError(FormatError):
    """A read ran past the end of the buffer: the file is cut short or a size lies."""


class NotThisFormat(FormatError):
    """The bytes are not of the format asked for (wrong magic).

    Sniffers catch this to fall through to the next candidate; it is a
    distinct type so that "not an ELF" is never confused with "a corrupt ELF".
    """


class UnsupportedVersion(FormatError):
    """The format is recognised but its version is newer than this reader knows."""


class LimitExceeded(DeviceBinaryError):
    """Decoding an input would take more memory than the command's budget allows
    (:mod:`devbin.binary.budget`), or more than the system can give."""


class UsageError(DeviceBinaryError):
    """A caller asked for something impossible (bad argument, bad model)."""


class OutputError(UsageError):
    """A file devbin was asked to write cannot be written, or must not be: it is one of the
    command's inputs, or the system refused (permissions, disk full, file-size limit).
    ``where`` names the file; nothing of it was left behind (:mod:`devbin.binary.output`)."""


class InputClash(OutputError):
    """The file devbin was asked to write is one of the command's inputs (the same path, a symbolic
    link to it or a hard link to it): refused before anything is read
    (:func:`devbin.binary.output.check_destination`)."""


class FormatWarning(UserWarning):
    """A problem a reader went past, keeping the data raw (``warnings.warn``): an NVIDIA
    prototype string devbin cannot decode, for one.  The CLI prints each one once on stderr
    as ``warning: ...``; a library caller may filter or escalate them."""
