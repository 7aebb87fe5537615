"""Fuzz target: the ELF reader, the inspect report and its text printer, notes, the in-place editor.

Contract under test: for any bytes, devbin either succeeds or raises
:class:`devbin.errors.DeviceBinaryError`; nothing else may escape.

Run with atheris (coverage-guided):  python fuzz/fuzz_elf.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import io

from devbin.cli.render import render_elf
from devbin.errors import DeviceBinaryError
from devbin.formats.elf import constants as C
from devbin.formats.elf.describe import describe
from devbin.formats.elf.edit import ElfEditor, NewSection
from devbin.formats.elf.reader import ElfFile
from devbin.reports.inspect import inspect_elf


def TestOneInput(data: bytes) -> None:  # atheris' required name
    try:
        warnings: list[DeviceBinaryError] = []
        elf = ElfFile(data, diag=warnings.append)
        describe(elf)
        render_elf(inspect_elf(elf, file="fuzz", warnings=warnings), io.StringIO())
        for sec in elf.sections:
            if sec.sh_type == C.SHT_NOTE:
                elf.notes(sec)
        ed = ElfEditor(elf)
        assert ed.write() == bytes(data), "no-op rewrite must be byte-identical"
        if elf.sections:
            ed.add_section(NewSection(".devbin.meta", b"\x01\x00\x00\x00\x00\x00\x00\x00\x00", 0x8DB00004))
            out = ed.write()
            again = ElfFile(out, diag=warnings.append)
            assert again.section(".devbin.meta") is not None
            assert again.segments == elf.segments
    except DeviceBinaryError:
        pass


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
