"""Fuzz target: zip members inflated with libdeflate (``devbin.formats.zipmember``) and the scan of zips.

Contract under test: for any bytes, ``zipmember.inflate`` and ``zipmember.spill`` (the temporary-file
path of a large member) of any member :mod:`zipfile` lists either return exactly the bytes zipfile reads
(when zipfile reads them without error), the same bytes as each other, or raise
:class:`devbin.errors.DeviceBinaryError`, never more than the member's recorded size; ``scan_bytes``
raises nothing on a zip but LimitExceeded, for a member that can hold more than the memory budget.
Each input is tried (a) as a zip itself, (b) deflated into a well-formed zip with a second member,
and (c) that zip with the input's first bytes written over its local header, data and central
directory (offsets and values from the input), so that ELF seeds reach the member paths.

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_zip.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import io
import zipfile

from devbin.errors import DeviceBinaryError, LimitExceeded
from devbin.formats import zipmember
from devbin.images import ScanReport, scan_bytes


def _zip(data: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, body, method in (("pkg/k.o", data, zipfile.ZIP_DEFLATED), ("pkg/n", data[:64], zipfile.ZIP_STORED)):
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, body, compresslevel=1)
    return buf.getvalue()


def _patched(archive: bytes, data: bytes) -> bytes:
    """``archive`` with up to 8 bytes set from ``data``: each pair (position, value) of its first 16 bytes."""
    out = bytearray(archive)
    for k in range(0, min(len(data), 16) - 1, 2):
        out[(data[k] * 7919) % len(out)] = data[k + 1]
    return bytes(out)


def _members(archive: bytes) -> None:
    try:
        zf = zipfile.ZipFile(io.BytesIO(archive))
        infos = zf.infolist()
    except Exception:  # zipfile's own errors: not devbin's to check
        return
    for info in infos[:4]:
        if not zipmember.inflatable(info) or info.file_size > 1 << 22:
            continue
        try:
            mine: bytes | None = bytes(zipmember.inflate(archive, info))
        except DeviceBinaryError:
            mine = None
        spilled = _spilled(zf, info)  # the path of a member over SPILL_BYTES: zlib into a mapped temporary file
        if spilled is not None:
            assert len(spilled) == info.file_size
            assert mine is None or spilled == mine, info.filename
        if mine is not None:
            assert len(mine) == info.file_size
            try:
                theirs = zf.read(info)
            except Exception:  # zipfile checks less (no length): it may still fail elsewhere
                continue
            assert mine == theirs, info.filename
            assert spilled is None or spilled == theirs, info.filename


def _spilled(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes | None:
    """``zipmember.spill`` of the member: its bytes, or None where it raised DeviceBinaryError."""
    try:
        out = zipmember.spill(zf, info, "fuzz.whl")
    except DeviceBinaryError:
        return None
    try:
        return bytes(out.data)
    finally:
        out.close()


def _scan(archive: bytes) -> None:
    try:
        for f in scan_bytes(archive, "fuzz.whl", report=ScanReport()):
            _ = (f.kind, f.arch)
    except LimitExceeded:  # a member that can hold more than the memory budget: the scan stops, by design
        pass


def TestOneInput(data: bytes) -> None:  # atheris' required name
    for archive in (data, _zip(data), _patched(_zip(data), data)):
        _members(archive)
        _scan(archive)


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
