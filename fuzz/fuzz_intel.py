"""Fuzz target: the Intel readers over any bytes: the ``.ze_info`` YAML subset and its typed view, a
zebin through the importer, the ``.note.intelgt.compat`` notes, the patch-token program, the ocloc
fat archive and the SPIR-V module reader.

Contract under test: for any bytes, each reader either succeeds or raises
:class:`devbin.errors.DeviceBinaryError`; what it returns is consumed (every kernel's resources, every
member's role).  Each input is also read as the ``.ze_info`` text of every kernel rule, so the ELF
seeds (the zebins ``tests/intelbuild.py`` builds at run time among them) reach the YAML parser.

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_intel.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib

from devbin.errors import DeviceBinaryError
from devbin.formats.elf.reader import open_elf
from devbin.formats.spirv import read_spirv
from devbin.targets.intel.fatarchive import read_fat_archive
from devbin.targets.intel.importer import import_zebin
from devbin.targets.intel.patchtoken import is_patch_token_elf, read_patch_token_program
from devbin.targets.intel.zeinfo import read_zeinfo


def _zeinfo(data: bytes) -> None:
    try:
        z = read_zeinfo(data)
        for e in (*z.kernels, *z.functions):
            _ = (e.grf_count, e.simd_size, e.private_bytes(), e.spill_bytes(), e.scratch_bytes(), e.slm_size,
                 e.barrier_count, e.required_sub_group_size, e.required_work_group_size, e.unknown_env())
    except DeviceBinaryError:
        pass


def _elf(data: bytes) -> None:
    try:
        elf = open_elf(data, where="fuzz")
        if elf.header.e_machine == 205:
            co = import_zebin(elf)
            for f in co.functions:
                _ = f.resources
        if is_patch_token_elf(elf):
            read_patch_token_program(elf)
    except DeviceBinaryError:
        pass


def _others(data: bytes) -> None:
    for read in (read_spirv, read_fat_archive):
        with contextlib.suppress(DeviceBinaryError):
            read(data)


def TestOneInput(data: bytes) -> None:  # atheris' required name
    _zeinfo(data)
    _elf(data)
    _others(data)
    # an ELF seed as a zebin: e_machine set to EM_INTELGT
    if len(data) > 20 and data[:4] == b"\x7fELF":
        _elf(data[:18] + b"\xcd\x00" + data[20:])
    _others(b"\x03\x02\x23\x07" + data)


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
