"""The CSV rule: a string read from a file as a cell of ``devbin size --csv``.

A spreadsheet that opens the CSV evaluates a cell that begins with ``=``, ``+``, ``-`` or ``@`` as a
formula (``=HYPERLINK(...)`` sends data away; DDE formulas run commands), and tab and carriage return
at the start of a cell are read the same way by some.  OWASP, "CSV Injection"
(https://owasp.org/www-community/attacks/CSV_Injection): prepend a single quote to such a cell, so that
it is read as text.  Quoting the cell does not help (the spreadsheet strips the quotes first); the
writer quotes cells with commas, quotes or line ends as RFC 4180 asks.

The text rule (:func:`devbin.escape.text.visible`) applies first: no control character, override or
undecodable byte reaches the file, and a newline in a name cannot start a row for a reader that ignores
quoting.  Numbers are written as they are.
"""

from __future__ import annotations

from typing import Final

from devbin.escape.text import visible

__all__ = ["FORMULA_STARTS", "cell"]

#: The characters OWASP lists as starting a formula.
FORMULA_STARTS: Final = ("=", "+", "-", "@", "\t", "\r")


def cell(value: str | int) -> str | int:
    """A CSV cell: a string with the text rule applied and ``'`` before a formula's first character."""
    if not isinstance(value, str):
        return value
    t = visible(value)
    return "'" + t if t.startswith(FORMULA_STARTS) else t
