"""Fuzz target: devbin's wrapped single image, and ``devbin.pack`` facts over any bytes.

Contract under test: for any bytes, ``parse_wrapped`` either succeeds or raises
:class:`devbin.errors.DeviceBinaryError`; what it reads, written again, reads back the
same; ``loose_image`` (pack's facts: reads cubins, AMDGPU objects, PTX) never raises anything
else; ``scan_bytes`` never raises on a wrapped image of the input
(``Image.data()`` may raise DeviceBinaryError for a corrupt compressed entry).

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_wrapped.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib

from devbin.errors import DeviceBinaryError
from devbin.formats.wrapped import parse_wrapped, write_wrapped
from devbin.images import ScanReport, scan_bytes
from devbin.packaging.facts import loose_image


def TestOneInput(data: bytes) -> None:  # atheris' required name
    try:
        w = parse_wrapped(data)
    except DeviceBinaryError:
        w = None
    if w is not None:
        again = parse_wrapped(write_wrapped(bytes(w.image), w.metadata, flags=w.flags))
        assert (again.metadata, bytes(again.image), again.flags) == (w.metadata, bytes(w.image), w.flags)
    with contextlib.suppress(DeviceBinaryError):
        loose_image(data, "fuzz")
    wrapped = write_wrapped(data, [("TargetID", "sm_90"), ("Producer", "fuzz")])
    for f in scan_bytes(wrapped, "fuzz.wrapped", report=ScanReport()):
        _ = (f.kind, f.arch, f.metadata)
        with contextlib.suppress(DeviceBinaryError):  # a corrupt entry fails when its bytes are asked for
            f.data()


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
