"""One escaping rule per output format, for every string read from a file (names, IDs, metadata, paths).

A device binary is untrusted input: a function name, a bundle target ID, a wheel member's name or a
pack's metadata value may hold an escape sequence, a newline, a backtick, a right-to-left override or
bytes that are not UTF-8.  Each output format has one rule, in one module, applied where that output is
rendered (the data model and ``--json`` keep the true strings):

- :mod:`devbin.escape.text`: terminal text (and the base of every other rule): control characters,
  bidirectional and zero-width format characters, line separators, lone surrogates (a file name that
  is not UTF-8) and noncharacters shown as visible escapes (``\\x1b``, ``\\u202e``, ``\\xff``);
- :mod:`devbin.escape.markdown`: GitHub-flavoured markdown table cells (``size --diff``);
- :mod:`devbin.escape.csvcell`: CSV cells (``size --csv``), formula triggers neutralised;
- :mod:`devbin.escape.markup`: HTML and SVG/XML text and attributes (``size --html``, ``callgraph --svg``);
- :mod:`devbin.escape.jsontext`: JSON documents (``--json``), never a raw surrogate or control.

docs/REPORT.md, "Escaping", says what each format does.  This package imports nothing of devbin
(layer 0), so that :mod:`devbin.errors` can use the text rule for its one-line messages.
"""
