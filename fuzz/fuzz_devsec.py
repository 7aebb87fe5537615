"""Fuzz target: the devbin section codec (``devbin.formats.devsec``).

Contract under test: for any bytes, decoding them as each of the four devbin
sections either succeeds or raises :class:`devbin.errors.DeviceBinaryError`;
nothing else may escape.  On success the decoded model is re-encoded and
decoded again, and must come back equal (the writer and reader agree on
everything the reader accepts).

Run with atheris (coverage-guided):  PYTHONPATH=src python fuzz/fuzz_devsec.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

from devbin.binary import ByteView
from devbin.errors import DeviceBinaryError
from devbin.formats.devsec import constants as C
from devbin.formats.devsec import decode, encode


def _symbol_name(i: int) -> str:
    return f"s{i}"


def _symbol_index(name: str) -> int:
    return int(name[1:])


def TestOneInput(data: bytes) -> None:  # atheris' name
    for name in C.SECTION_NAMES:
        try:
            obj = decode({name: ByteView(data)}, _symbol_name, None)
        except DeviceBinaryError:
            continue
        count = ByteView(data).u32(4) if name in C.LINKS_SYMTAB else 0
        secs = encode(obj, _symbol_index, count)
        again = decode({s.name: ByteView(s.data) for s in secs}, _symbol_name, count or None)
        assert again == obj, f"{name}: re-encoded section decodes differently"
        assert [s.data for s in encode(again, _symbol_index, count)] == [s.data for s in secs], "encoding not stable"


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
