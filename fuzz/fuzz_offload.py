"""Fuzz target: the LLVM OffloadBinary reader and writer (``devbin.formats.offload``).

Contract under test: for any bytes, ``parse_offload_binary`` and
``iter_offload_binaries`` (and every entry property) either succeed or raise
:class:`devbin.errors.DeviceBinaryError`; nothing else may escape.  Parsed
entries are written again (version 1 when every value is NUL-free, and
version 2) and must read back to the same kinds, flags, strings and images.

Run with atheris (coverage-guided):  PYTHONPATH=src python fuzz/fuzz_offload.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

from devbin.errors import DeviceBinaryError
from devbin.formats.offload import (
    OffloadEntry,
    OffloadImage,
    iter_offload_binaries,
    parse_offload_binary,
    write_offload_binary,
)


def _touch(e: OffloadEntry) -> None:
    _ = (e.string_map, e.triple, e.arch, e.image_kind_name, e.objdump_kind, e.numbering, e.producer,
         e.producer_legacy, e.producer_mask, e.is_metadata_only, e.image_bytes, e.where)


def _rewrite(entries: list[OffloadEntry]) -> None:
    keys_ok = [e for e in entries
               if all("\\x" not in k + v for k, v in e.strings)  # escaped bad UTF-8 does not round-trip
               and len({k for k, _ in e.strings}) == len(e.strings)]
    images = [OffloadImage.of(e.image_bytes, image_kind=e.image_kind, offload_kind=e.offload_kind, flags=e.flags,
                              strings=e.strings) for e in keys_ok]
    want = [(i.image_kind, i.offload_kind, i.flags, i.strings, i.image) for i in images]
    has_nul = any("\0" in v for i in images for _, v in i.strings)  # only version 2 stores such values
    for version in [2] if has_nul else [1, 2]:
        data = write_offload_binary(images, version=version)
        got = [(e.image_kind, e.offload_kind, e.flags, e.strings, e.image_bytes)
               for b in iter_offload_binaries(data) for e in b.entries]
        assert got == want, "re-written OffloadBinary reads back differently"


def TestOneInput(data: bytes) -> None:  # atheris' name
    try:
        ob = parse_offload_binary(data)
    except DeviceBinaryError:
        ob = None
    if ob is not None:
        for e in ob.entries:
            _touch(e)
        _rewrite(list(ob.entries))
    try:
        for one in iter_offload_binaries(data):
            for e in one.entries:
                _touch(e)
    except DeviceBinaryError:
        pass


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
