"""What a reader must do with bad bytes, for the robustness tests.

A reader given damaged input either reads it or refuses it with one
:class:`devbin.errors.DeviceBinaryError` that says which format, where (an
offset inside the bytes it was given) and what, on one line; in both cases the
input's bytes are left as they were.  :func:`outcome` runs a reader on a
``bytearray`` copy (so a reader that wrote into its input would be seen) and
checks the bytes afterwards; :func:`assert_located` checks the error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from devbin.errors import DeviceBinaryError, FormatError, TruncatedError


def outcome(read: Callable[[bytearray], object], data: bytes) -> DeviceBinaryError | None:
    """``None`` when ``read`` accepts ``data``, else the DeviceBinaryError it raised; the bytes must be unchanged."""
    buf = bytearray(data)
    err: DeviceBinaryError | None = None
    try:
        read(buf)
    except DeviceBinaryError as e:
        err = e
    assert bytes(buf) == data, "the reader changed the bytes it was given"
    return err


def assert_located(err: DeviceBinaryError, *, fmts: Collection[str], size: int,
                   cls: type[DeviceBinaryError] = FormatError, top: str = "",
                   multiline: list[str] | None = None, unlocated_ok: str = "") -> None:
    """``err`` is a ``cls`` of one of ``fmts``, on one line, located: an offset inside the ``size`` bytes
    read, or at least a ``where`` deeper than ``top`` (the name the caller gave the whole input).

    With ``multiline`` a message on several lines is appended there instead of failing here, for
    the tests that keep the one-line rule apart (issue 18, item 8: names with a newline echoed raw).
    ``unlocated_ok`` is a regular expression of the messages known to carry neither offset nor
    ``where`` yet (listed for their owners); any other unlocated error fails.  A TruncatedError's
    offset is where the read was tried, which a lying header field may put past the end.
    """
    assert isinstance(err, cls), f"{type(err).__name__} instead of {cls.__name__}: {err}"
    assert err.fmt in fmts, f"format {err.fmt!r} not in {sorted(fmts)}: {err}"
    text = str(err)
    assert text, "an empty message"
    if multiline is not None and "\n" in text:
        multiline.append(text)
    else:
        assert "\n" not in text, f"not one line: {text!r}"
    assert text.startswith(f"{err.fmt}: ") or not err.fmt, text
    if err.offset is None and err.where in ("", top):
        assert unlocated_ok and re.search(unlocated_ok, str(err)), f"no location: {err}"
    if err.offset is not None:
        assert err.offset >= 0, err
        if not isinstance(err, TruncatedError):
            assert err.offset <= size, f"offset {err.offset:#x} outside the {size:#x} bytes read: {err}"
