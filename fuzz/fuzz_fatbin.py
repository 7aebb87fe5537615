"""Fuzz target: the fatbin reader and writer (``devbin.formats.fatbin``).

Contract under test: for any bytes, ``parse_fatbin``, ``iter_fatbins``,
every entry property, ``FatbinEntry.data(max_size=1 << 20)`` and
``parse_wrapper`` either succeed or raise
:class:`devbin.errors.DeviceBinaryError`; nothing else may escape.  Parsed
uncompressed images are written again with ``write_fatbin`` and must parse
back to the same kinds, archs, flags and images.

Run with atheris (coverage-guided):  PYTHONPATH=src python fuzz/fuzz_fatbin.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib

from devbin.errors import DeviceBinaryError
from devbin.formats.fatbin import FatbinEntry, FatbinImage, iter_fatbins, parse_fatbin, parse_wrapper, write_fatbin
from devbin.formats.fatbin import constants as C

_MAX = 1 << 20


def _touch(e: FatbinEntry) -> bytes | None:
    _ = (e.kind_name, e.arch_name, e.compression, e.is_64bit, e.is_debug, e.flag_names, e.variant, e.options,
         e.identifier, e.extension, bytes(e.raw_payload), e.payload_offset)
    try:
        return e.data(max_size=_MAX)
    except DeviceBinaryError:
        return None


def _rewrite(entries: tuple[FatbinEntry, ...]) -> None:
    plain = [e for e in entries if not e.is_compressed and e.kind != C.KIND_PTX]
    images = [
        FatbinImage(e.kind, e.arch, bytes(e.raw_payload), identifier=e.identifier, flags=e.flags, major=e.major,
                    minor=e.minor, options=e.options, compat=b"")
        for e in plain
        if "\\x" not in e.identifier and "\\x" not in e.options  # names kept as escapes do not round-trip
    ]
    again = parse_fatbin(write_fatbin(images)).entries
    assert [(e.kind, e.arch, e.flags, e.identifier, bytes(e.raw_payload)) for e in again] == [
        (i.kind, i.arch, i.flags, i.identifier, i.data) for i in images
    ], "re-written fatbin reads back differently"


def TestOneInput(data: bytes) -> None:  # atheris' name
    try:
        fb = parse_fatbin(data)
    except DeviceBinaryError:
        fb = None
    if fb is not None:
        for e in fb.entries:
            _touch(e)
        _rewrite(fb.entries)
    try:
        for one in iter_fatbins(data):
            for e in one.entries:
                _touch(e)
    except DeviceBinaryError:
        pass
    with contextlib.suppress(DeviceBinaryError):
        parse_wrapper(data)


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
