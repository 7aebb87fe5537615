"""The markdown rule: a string read from a file as a cell of a GitHub-flavoured markdown table.

``devbin size --diff`` prints markdown for a pull-request comment, where a name that breaks out of its
cell renders links, images (a remote image is a request to a chosen host) and headings.  Every string
read from a file (function names, architectures and target IDs) goes in its table cell as an inline code
span, :func:`code_cell`, the one markdown construct whose content is literal: no emphasis, link, image,
HTML or autolink starts inside it (CommonMark 0.31 §6.1 "Code spans"; backslash escapes would not do,
since GFM's autolink extension still links ``a\\@b.co``).

- A code span ends at the first run of backticks as long as the one that opened it: the fence is a run
  one longer than the longest run inside, padded with a space on each side when the content begins or
  ends with a backtick or a space (the renderer strips one space from each side again); a name of
  spaces only, which a code span cannot hold, is shown as ``\\x20`` escapes.
- The text rule (:func:`devbin.escape.text.visible`) applies first: no newline survives.  A newline would
  end the table row, the next line a heading or an image (GFM spec 0.29, §4.10 "Tables (extension)":
  "The table is broken at the first empty line, or beginning of another block-level structure").
- Each pipe is written ``\\|``, which the table extension reads as a pipe inside the cell, in a code
  span too (the same section: "include a pipe in a cell's content by escaping it, including inside
  other inline spans").
"""

from __future__ import annotations

import re

from devbin.escape.text import visible

__all__ = ["code_cell"]

_BACKTICKS = re.compile("`+")


def code_cell(s: str) -> str:
    """``s`` as a code span fit for a table cell."""
    t = visible(s)
    if not t.strip(" "):  # nothing, or spaces only, which a code span cannot show: spaces as escapes
        t = t.replace(" ", "\\x20")
        if not t:
            return ""
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(t)), default=0) + 1)
    pad = " " if t[0] in "` " or t[-1] in "` " else ""
    return f"{fence}{pad}{t}{pad}{fence}".replace("|", "\\|")
