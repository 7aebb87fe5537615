"""Fuzz target: the compiled fast path (``devbin.binary._cdecode``) against its pure-Python twins.

Contract under test: for any bytes, the ELF reader, the cubin reader and the ``.nv.info`` decoders give
the same results, warnings and errors with the C decoders as with the pure-Python ones (and nothing but
:class:`devbin.errors.DeviceBinaryError` escapes either); the compiled ``cuobjdump -res-usage`` pass
(``cubin_usage_lines``) gives the reader's lines or declines (None), and declines wherever the reader fails.
Without the extension built this target only checks the pure-Python path's contract.

Run with atheris (coverage-guided):  python fuzz/fuzz_native.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from devbin.errors import DeviceBinaryError
from devbin.formats.elf import constants as C
from devbin.formats.elf import reader, tables
from devbin.targets.nvidia import cubin, nvinfo
from devbin.targets.nvidia.eiattr import INDEXED
from devbin.targets.nvidia.resources import format_cuobjdump, usage


def _native() -> ModuleType | None:
    """The extension when it is built, whatever DEVBIN_PURE_PYTHON says (both paths are compared here)."""
    try:
        return importlib.import_module("devbin.binary._cdecode")
    except ImportError:
        return None


NATIVE = _native()


@contextmanager
def implementation(native: bool) -> Iterator[None]:
    """Run the readers with the C decoders (``native``) or the pure-Python ones."""
    if native and NATIVE is None:
        raise RuntimeError("devbin.binary._cdecode is not built")
    saved = reader.section_table, nvinfo.indexed_records, nvinfo.records
    reader.section_table = NATIVE.section_table if native and NATIVE else tables.section_table_py
    nvinfo.indexed_records = NATIVE.nvinfo_indexed if native and NATIVE else nvinfo.indexed_records_py
    nvinfo.records = NATIVE.nvinfo_records if native and NATIVE else nvinfo.records_py
    try:
        yield
    finally:
        reader.section_table, nvinfo.indexed_records, nvinfo.records = saved


def outcome(data: bytes, *, collect: bool = True) -> list[object]:
    """Everything the fast path feeds, as comparable values (an error as its class and message)."""
    out: list[object] = []
    try:
        warnings: list[DeviceBinaryError] = []
        elf = reader.ElfFile(data, diag=warnings.append if collect else None)
        out += [elf.header, list(elf.section_rows), list(elf.section_names), list(elf.sections), elf.segments]
        for table in elf.symbol_tables.values():
            out.append(list(table))
        for i, r in enumerate(elf.section_rows):
            if r[tables.SH_TYPE] in (cubin.SHT_CUDA_INFO, cubin.SHT_CUDA_COMPAT) and elf.header.e_machine == C.EM_CUDA:
                for decode in (nvinfo.stack_records, nvinfo.parse_nvinfo):
                    try:
                        out.append(decode(elf.sections[i].view))
                    except DeviceBinaryError as e:
                        out.append((type(e).__name__, str(e)))
        if elf.header.e_machine == C.EM_CUDA:
            c = cubin.Cubin(elf)
            out += [c.functions, c.global_records, c.global_bytes, c.common_constant_banks]
        out.append([str(w) for w in warnings])
    except DeviceBinaryError as e:
        out.append((type(e).__name__, str(e)))
    return out


def kernels(data: bytes) -> list[object]:
    """The decoders themselves on ``data`` read as a section header table and as ``.nv.info`` records:
    (pure-Python result, C result) pairs, or just the pure one without the extension."""
    impls = [(tables.section_table_py, nvinfo.indexed_records_py, nvinfo.records_py)]
    if NATIVE is not None:
        impls.append((NATIVE.section_table, NATIVE.nvinfo_indexed, NATIVE.nvinfo_records))
    got: list[object] = []
    shoff = int.from_bytes(data[:2], "little") if len(data) >= 2 else 0
    for st, nv, recs in impls:
        row: list[object] = []
        for is64 in (False, True):
            for little in (False, True):
                for shnum, strndx in ((len(data) // 40, 1), (3, 0), (2, 5)):
                    row.append(st(data, shoff, shnum, is64, little, (0, 8), strndx))
        row.append(nv(data, tuple(sorted(INDEXED))))
        row.append(nv(data, ()))
        row.append(recs(data))
        row.append(recs(memoryview(data)[1:]))
        got.append(row)
    return got


def usage_lines_by_reader(data: bytes) -> str | None:
    """What ``devbin resources --format cuobjdump`` prints for cubin ``data`` through the readers (the
    pure-Python path of ``cubin_usage_lines``), or None where they report an error."""
    try:
        return format_cuobjdump(usage(cubin.Cubin(reader.ElfFile(data), records=False)))
    except DeviceBinaryError:
        return None


def usage_lines_agree(data: bytes) -> bool:
    """The compiled pass's lines are the readers' wherever it answers (it may decline: None)."""
    if NATIVE is None:
        return True
    fast = NATIVE.cubin_usage_lines(data)
    return fast is None or fast == usage_lines_by_reader(data)


def TestOneInput(data: bytes) -> None:  # atheris' required name
    k = kernels(data)
    assert all(x == k[0] for x in k), "C decoders differ from the pure-Python ones"
    assert usage_lines_agree(data), "cubin_usage_lines differs from the readers' cuobjdump lines"
    for collect in (True, False):
        with implementation(False):
            pure = outcome(data, collect=collect)
        if NATIVE is not None:
            with implementation(True):
                fast = outcome(data, collect=collect)
            assert fast == pure, "the reader differs between the C and the pure-Python decoders"


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
