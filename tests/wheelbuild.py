"""Wheels for tests: members, METADATA, WHEEL and a RECORD that vouches for every member (PEP 376/427),
so that devbin's wheel check (devbin.formats.wheel) lets them through."""

from __future__ import annotations

import zipfile
from pathlib import Path

from devbin.formats.wheel import record_hash

META = "pkg-1.0.dist-info"


def build_wheel(path: Path, files: dict[str, bytes], *, name: str = "pkg", version: str = "1.0") -> Path:
    """``path`` written as the wheel of ``name`` ``version`` (default ``pkg`` 1.0) holding ``files``
    (name -> bytes), deflated."""
    meta = f"{name}-{version}.dist-info"
    files = {**files, f"{meta}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{meta}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-any\n"}
    rows = [f"{n},{record_hash(d)},{len(d)}" for n, d in files.items()] + [f"{meta}/RECORD,,"]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            z.writestr(n, d)
        z.writestr(f"{meta}/RECORD", "\n".join(rows) + "\n")
    return path
