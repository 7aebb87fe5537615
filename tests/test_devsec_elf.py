"""devbin sections inside real ELF files: annotate, read back, staleness, newer majors."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from devbin.errors import FormatError, UnsupportedVersion
from devbin.formats.devsec.elf import annotate, devbin_sections, read_code_object
from devbin.formats.elf.compare import loader_differences
from devbin.formats.elf.edit import ElfEditor, NewSection
from devbin.formats.elf.reader import ElfFile
from devbin.samples import sample_code_object, sample_cubin_bytes, sample_elf_bytes
from devbin.targets.nvidia import code_object_from_symbols, sm_of


def test_sample_round_trip_through_elf() -> None:
    elf = ElfFile(sample_elf_bytes())
    assert read_code_object(elf) == sample_code_object()
    assert set(devbin_sections(elf)) == {".devbin.func", ".devbin.callgraph", ".devbin.proto", ".devbin.meta"}


def test_annotate_real_cubins_and_read_back(cubins: dict[str, Path]) -> None:
    for name, path in cubins.items():
        before = ElfFile(path.read_bytes())
        obj = code_object_from_symbols(before)
        after = ElfFile(annotate(before, obj))
        assert loader_differences(before, after) == [], name
        back = read_code_object(after)
        assert back is not None and [f.name for f in back.functions] == [f.name for f in obj.functions], name
        assert back.target is not None and back.target.arch == f"sm_{sm_of(before)}", name
        # annotating again replaces the sections: same bytes, not a second copy
        again = annotate(after, obj)
        assert again == after.bytes(), name


def test_annotate_amdgpu_objects(amdgpu_objects: dict[str, Path]) -> None:
    from devbin.model import CodeObject, Function, FunctionKind, Metadata

    for name, path in amdgpu_objects.items():
        raw = path.read_bytes()
        if raw[:4] != b"\x7fELF":
            continue
        before = ElfFile(raw)
        funcs = [Function(s.name, FunctionKind.DEVICE) for s in before.symtab or () if s.type == 2 and s.defined]
        after = ElfFile(annotate(before, CodeObject(None, tuple(funcs), metadata=Metadata.of([("vendor", "amd")]))))
        assert loader_differences(before, after) == [], name
        assert read_code_object(after) is not None


def test_stale_section_is_reported_not_misattributed() -> None:
    from devbin.formats.devsec import StaleSection

    data = bytearray(sample_elf_bytes())
    elf = ElfFile(bytes(data))
    func = devbin_sections(elf)[".devbin.func"]
    struct.pack_into("<I", data, func.sh_offset + 4, 3)  # a count the symbol table does not have
    with pytest.raises(StaleSection):
        read_code_object(ElfFile(bytes(data)))


def test_newer_major_is_kept_and_never_overwritten() -> None:
    cubin = ElfFile(sample_cubin_bytes())
    ed = ElfEditor(cubin)
    ed.add_section(NewSection(".devbin.meta", b"\x02\x00\x00\x00\x00\x00\x00\x00future", 0x8DB00004))
    elf = ElfFile(ed.write())
    with pytest.raises(UnsupportedVersion):
        read_code_object(elf)
    with pytest.raises(UnsupportedVersion):
        annotate(elf, code_object_from_symbols(elf))
    assert ElfEditor(elf).write() == elf.bytes()


def test_corrupt_section_gives_format_error() -> None:
    data = bytearray(sample_elf_bytes())
    func = devbin_sections(ElfFile(bytes(data)))[".devbin.func"]
    data[func.sh_offset + 8] = 0x7F  # record count far beyond the section
    with pytest.raises(FormatError):
        read_code_object(ElfFile(bytes(data)))
