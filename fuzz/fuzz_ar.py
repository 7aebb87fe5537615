"""Fuzz target: the ``ar`` reader and ``devbin.images.scan_bytes`` over any bytes.

Contract under test: for any bytes, ``ArchiveFile`` either succeeds or raises
:class:`devbin.errors.DeviceBinaryError`, and ``scan_bytes`` never raises at all
(corrupt content becomes warnings in its report).  Everything is consumed: member
data, symbol tables, every ``Found`` and its fatbin entry.

The seeds of ``fuzz/run_all.py`` are mostly ELF files, so each input is also read
(a) behind an ``!<arch>\\n`` magic, where its first bytes are member headers, and
(b) as the one member of a well-formed GNU archive, so that ELF seeds reach the
member-to-ELF path of the scan.

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_ar.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

from devbin.errors import DeviceBinaryError
from devbin.formats.ar import ArchiveFile
from devbin.formats.ar import constants as C
from devbin.images import Address, ScanReport, scan_bytes


def _archive(data: bytes) -> None:
    try:
        a = ArchiveFile(data, where="fuzz.a", diag=lambda e: None)
        for m in a.members:
            bytes(m.data)
            _ = (m.mode_value, m.mtime_value, a.member_where(m))
        for s in a.symbols:
            a.member_at(s.header_offset)
    except DeviceBinaryError:
        pass


def _discover(data: bytes, where: str) -> None:
    report = ScanReport()
    for f in scan_bytes(data, where, report=report):
        _ = (f.path, f.kind, f.arch, f.size, f.stored_size, f.offset, f.metadata)
        assert Address.parse(str(f.address)) == f.address
        if f.entry is not None:
            bytes(f.entry.raw_payload)


def _wrapped(data: bytes) -> bytes:
    header = b"k.o/".ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + b"644".ljust(8)
    header += str(len(data)).encode().ljust(10) + C.FMAG
    return C.MAGIC + header + data + (b"\n" if len(data) % 2 else b"")


def TestOneInput(data: bytes) -> None:  # atheris' required name
    _archive(data)
    _archive(C.MAGIC + data)
    _discover(data, "fuzz")
    _discover(_wrapped(data), "fuzz.a")


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
