"""Fuzz target: clang offload bundles (``devbin.formats.bundle``).

Contract under test: for any bytes, ``parse_any_bundle`` (binary and CCOB,
decompressed under a 1 MiB cap), ``iter_hip_fatbin`` and ``parse_text_bundle``
either succeed or raise :class:`devbin.errors.DeviceBinaryError`; nothing else
may escape.  A parsed binary bundle is written again with ``write_bundle`` and
must read back to the same IDs and images.

Run with atheris (coverage-guided):  PYTHONPATH=src python fuzz/fuzz_bundle.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib

from devbin.errors import DeviceBinaryError
from devbin.formats.bundle import Bundle, iter_hip_fatbin, parse_any_bundle, parse_text_bundle, write_bundle

_MAX = 1 << 20


def _rewrite(b: Bundle) -> None:
    # The writer refuses empty IDs, and IDs kept as \\xNN escapes do not round-trip.
    entries = [(e.id, bytes(e.data)) for e in b.entries if e.id and "\\x" not in e.id]
    again = parse_any_bundle(write_bundle(entries, host=None))
    assert [(e.id, bytes(e.data)) for e in again.entries] == entries, "re-written bundle reads back differently"


def TestOneInput(data: bytes) -> None:  # atheris' name
    try:
        b = parse_any_bundle(data, max_size=_MAX)
    except DeviceBinaryError:
        b = None
    if b is not None:
        for e in b.entries:
            _ = (e.bundle_id.kind, e.bundle_id.triple, e.bundle_id.target_id, len(e.data))
        _rewrite(b)
    with contextlib.suppress(DeviceBinaryError):
        for one in iter_hip_fatbin(data, max_size=_MAX):
            _ = one.ids()
    with contextlib.suppress(DeviceBinaryError):
        for part in parse_text_bundle(data):
            _ = (part.bundle_id, part.content)


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
