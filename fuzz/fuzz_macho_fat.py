"""Fuzz target: the Mach-O universal ("fat") reader over any bytes.

Contract under test: for any bytes, ``FatFile`` either succeeds or raises
:class:`devbin.errors.DeviceBinaryError`; ``is_fat`` never raises.  Every slice's
bytes and arch name are consumed.

The seeds of ``fuzz/run_all.py`` are mostly ELF files, so each input is also read
behind the 32-bit and the 64-bit fat magic, where its first bytes become
``nfat_arch`` and the arch table.

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_macho_fat.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

from devbin.errors import DeviceBinaryError
from devbin.formats.macho import FatFile, is_fat

_MAGICS = (b"\xca\xfe\xba\xbe", b"\xca\xfe\xba\xbf")


def _fat(data: bytes) -> None:
    is_fat(data)
    try:
        f = FatFile(data, where="fuzz")
        for s in f.slices:
            bytes(s.data)
            _ = (s.arch, f.slice_for(s.arch))
        _ = f.archs
    except DeviceBinaryError:
        pass


def TestOneInput(data: bytes) -> None:  # atheris' required name
    _fat(data)
    for magic in _MAGICS:
        _fat(magic + data)
        _fat(magic + b"\0\0\0\x02" + data)  # a small nfat_arch, so the table itself is fuzzed


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
