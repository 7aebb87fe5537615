"""Fuzz target: AMDGPU code objects (ELF, metadata note, kernel descriptors, import, resources).

Contract under test: for any bytes, devbin either succeeds or raises
:class:`devbin.errors.DeviceBinaryError`; nothing else may escape.

Run with atheris (coverage-guided):  python fuzz/fuzz_amdgpu.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib

from devbin.errors import DeviceBinaryError
from devbin.formats.elf.reader import ElfFile
from devbin.targets.amdgpu.importer import code_object_facts, import_amdgpu, usage
from devbin.targets.amdgpu.metadata import decode_metadata


def TestOneInput(data: bytes) -> None:  # atheris' required name
    with contextlib.suppress(DeviceBinaryError):
        decode_metadata(data)
    try:
        warnings: list[DeviceBinaryError] = []
        elf = ElfFile(data, diag=warnings.append)
        facts = code_object_facts(elf, diag=warnings.append)
        for kd in facts.descriptors.values():
            _ = (kd.properties, kd.vgpr_blocks, kd.sgpr_blocks, kd.kernarg_preload_offset, kd.entry)
        co = import_amdgpu(elf, diag=warnings.append)
        co.to_dict()
        usage(elf)
        import_amdgpu(elf)  # the default diag raises
    except DeviceBinaryError:
        pass


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
