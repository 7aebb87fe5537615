"""The ELF core against the real tools, on real objects built at test time.

Inputs: cubins (nvcc/ptxas), AMDGPU code objects (clang-19, ld.lld-19) and
host objects (gcc).  Oracles: GNU readelf, llvm-readobj-19/llvm-readelf-19,
cuobjdump and nvdisasm.  In CI a missing tool fails the test (conftest).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devbin.formats.elf import ElfFile
from devbin.formats.elf import constants as C
from devbin.formats.elf.edit import ElfEditor, NewSection

from tests import oracles
from tests.conftest import require_tool
from tests.runners import run_tool


@pytest.fixture(scope="session")
def real_objects(cubins: dict[str, Path], amdgpu_objects: dict[str, Path],
                 host_objects: dict[str, Path]) -> dict[str, Path]:
    out = {f"cubin:{k}": v for k, v in cubins.items()}
    out.update({f"amdgpu:{k}": v for k, v in amdgpu_objects.items()})
    out.update({f"host:{k}": v for k, v in host_objects.items()})
    return out


def _elf_files(objs: dict[str, Path]) -> dict[str, Path]:
    return {k: v for k, v in objs.items() if v.read_bytes()[:4] == b"\x7fELF"}


def test_listings_agree_with_llvm_readobj(real_objects: dict[str, Path]) -> None:
    readobj = require_tool("llvm-readobj", versions=("19",))
    for name, path in _elf_files(real_objects).items():
        elf = ElfFile(path.read_bytes())
        doc = oracles.llvm_json(readobj, path)
        ours = [(s.index, s.name, s.sh_type, s.sh_flags, s.sh_offset, s.sh_size, s.sh_link, s.sh_info)
                for s in elf.sections]
        assert ours == oracles.llvm_sections(doc), name
        symtab = elf.symtab
        if symtab is not None:
            theirs = oracles.llvm_symbols(doc)
            mine = [(s.name, s.st_value, s.st_size) for s in symtab]
            assert mine == [t[:3] for t in theirs], name
        counts = {elf.sections[i].name: len(r) for i, r in elf.relocation_tables.items()}
        assert sorted(counts.values()) == sorted(oracles.llvm_relocation_counts(doc).values()), name


def test_listings_agree_with_gnu_readelf(real_objects: dict[str, Path]) -> None:
    require_tool("readelf")
    for name, path in _elf_files(real_objects).items():
        elf = ElfFile(path.read_bytes())
        theirs = oracles.readelf_sections(path)
        ours = [(s.index, s.name, s.sh_offset, s.sh_size, s.sh_link, s.sh_info) for s in elf.sections]
        assert ours == theirs, name
        if elf.symtab is not None:
            syms = oracles.readelf_symbols(path)
            # readelf shows an unnamed STT_SECTION symbol under its section's name
            mine = [(s.name or (elf.sections[s.st_shndx].name if s.type == C.STT_SECTION else ""), s.st_value)
                    for s in elf.symtab]
            assert mine == [(n, v) for n, v, _, _ in syms], name
        rel = {elf.sections[i].name: len(r) for i, r in elf.relocation_tables.items() if r}  # readelf skips empty ones
        assert rel == oracles.readelf_relocation_counts(path), name


def test_noop_rewrite_is_byte_identical(real_objects: dict[str, Path]) -> None:
    for name, path in _elf_files(real_objects).items():
        raw = path.read_bytes()
        assert ElfEditor(ElfFile(raw)).write() == raw, name


def _annotate(path: Path, out_dir: Path) -> tuple[ElfFile, ElfFile, Path]:
    raw = path.read_bytes()
    before = ElfFile(raw)
    ed = ElfEditor(before)
    ed.add_section(NewSection(".devbin.meta", b"\x01\x00\x00\x00\x00\x00\x00\x00\x01\x08producer\x00\x06devbin",
                              0x8DB00004))
    ed.add_section(NewSection(".devbin.func", b"\x01\x00\x00\x00\x00\x00\x00\x00\x00", 0x8DB00001, link=".symtab"))
    data = ed.write()
    out = out_dir / (path.name + ".annotated")
    out.write_bytes(data)
    return before, ElfFile(data), out


def test_adding_sections_keeps_every_loadable_byte(real_objects: dict[str, Path], tmp_path: Path) -> None:
    for name, path in _elf_files(real_objects).items():
        before, after, _ = _annotate(path, tmp_path)
        raw_a, raw_b = before.bytes(), after.bytes()
        assert before.segments == after.segments, name
        # The ELF header's e_shoff/e_shnum/e_shstrndx must point at the new section header
        # table; in a shared object the first segment maps the header, so blank them there.
        raw_a, raw_b = _blank_section_table_fields(before, raw_a), _blank_section_table_fields(after, raw_b)
        for p in before.segments:
            assert raw_a[p.p_offset:p.p_offset + p.p_filesz] == raw_b[p.p_offset:p.p_offset + p.p_filesz], name
        for s in before.sections:
            t = after.sections[s.index]
            assert (t.name, t.sh_type, t.sh_flags, t.sh_addr, t.sh_link, t.sh_info) == (
                s.name, s.sh_type, s.sh_flags, s.sh_addr, s.sh_link, s.sh_info), name
            if s.is_alloc or s.sh_type in (C.SHT_SYMTAB, C.SHT_REL, C.SHT_RELA) or s.name.startswith(".nv."):
                assert bytes(t.data) == bytes(s.data), (name, s.name)
        assert list(before.symtab or ()) == list(after.symtab or ()), name
        assert before.relocation_tables == after.relocation_tables, name


def _blank_section_table_fields(elf: ElfFile, raw: bytes) -> bytes:
    from devbin.formats.elf import layout as L

    lay = L.EHDR[elf.header.ei_class]
    import struct

    out = bytearray(raw)
    offsets = {f: L.EI_NIDENT + struct.calcsize("<" + lay.fmt[:i]) for i, f in enumerate(lay.fields)}
    for f in ("e_shoff", "e_shnum", "e_shstrndx"):
        size = struct.calcsize("<" + lay.fmt[lay.fields.index(f)])
        out[offsets[f]:offsets[f] + size] = bytes(size)
    return bytes(out)


def test_readelf_accepts_what_devbin_writes(real_objects: dict[str, Path], tmp_path: Path) -> None:
    readelf = require_tool("readelf")
    llvm_readelf = require_tool("llvm-readelf", versions=("19",))
    for name, path in _elf_files(real_objects).items():
        _, _, out = _annotate(path, tmp_path)
        for tool in (readelf, llvm_readelf):
            opts = ("-a", "-W") if tool == readelf else ("-a",)
            new = set(oracles.warnings_of(tool, out, *opts)) - set(oracles.warnings_of(tool, path, *opts))
            assert not new, (name, tool, new)
        names = [s[1] for s in oracles.readelf_sections(out)]
        assert names[-3:] == [".devbin.meta", ".devbin.func", ".shstrtab"]


def test_cuobjdump_and_nvdisasm_still_read_annotated_cubins(cubins: dict[str, Path], tmp_path: Path) -> None:
    cuobjdump = require_tool("cuobjdump")
    nvdisasm = require_tool("nvdisasm")
    for name, path in cubins.items():
        _, _, out = _annotate(path, tmp_path)
        a = run_tool([cuobjdump, "-res-usage", str(path)], check=False)
        b = run_tool([cuobjdump, "-res-usage", str(out)], check=False)
        assert a.returncode == 0 and b.returncode == 0, (name, b.stderr)
        assert a.stdout.replace(path.name, "X") == b.stdout.replace(out.name, "X"), name
        e = run_tool([cuobjdump, "-elf", str(out)], check=False)
        assert e.returncode == 0 and ".devbin.meta" in e.stdout, name
        d0 = run_tool([nvdisasm, str(path)], check=False)
        d1 = run_tool([nvdisasm, str(out)], check=False)
        assert d1.returncode == 0, (name, d1.stderr)
        # nvdisasm prints the new sections as raw bytes; nothing it printed before may change.
        added = oracles.nvdisasm_added_lines(d0.stdout, d1.stdout)
        assert any(".devbin.func" in ln for ln in added), name
        assert all(not ln.strip() or ".devbin." in ln or ".byte" in ln or ln.startswith("//---") for ln in added), name


@pytest.mark.parametrize("elfclass", [1, 2])
@pytest.mark.parametrize("little", [True, False])
@pytest.mark.parametrize("e_type", [C.ET_REL, C.ET_DYN])
def test_tools_accept_new_files_devbin_writes(tmp_path: Path, elfclass: int, little: bool, e_type: int) -> None:
    from devbin.formats.elf.writer import write

    from tests.elfbuild import small_model

    readelf = require_tool("readelf")
    llvm_readelf = require_tool("llvm-readelf", versions=("19",))
    readobj = require_tool("llvm-readobj", versions=("19",))
    path = tmp_path / "new.o"
    path.write_bytes(write(small_model(elfclass, little, e_type)))
    assert oracles.warnings_of(readelf, path, "-a", "-W") == []
    assert oracles.warnings_of(llvm_readelf, path, "-a") == []
    elf = ElfFile(path.read_bytes())
    ours = [(s.index, s.name, s.sh_type, s.sh_flags, s.sh_offset, s.sh_size, s.sh_link, s.sh_info)
            for s in elf.sections]
    assert ours == oracles.llvm_sections(oracles.llvm_json(readobj, path))


def test_tools_accept_the_sample_with_devbin_sections(tmp_path: Path) -> None:
    from devbin.samples import sample_elf_bytes

    path = tmp_path / "sample.o"
    path.write_bytes(sample_elf_bytes())
    assert oracles.warnings_of(require_tool("readelf"), path, "-a", "-W") == []
    assert oracles.warnings_of(require_tool("llvm-readelf", versions=("19",)), path, "-a") == []


def test_notes_agree_with_readelf(real_objects: dict[str, Path]) -> None:
    from devbin.formats.elf.describe import notes_list

    require_tool("readelf")
    seen = 0
    for name, path in _elf_files(real_objects).items():
        elf = ElfFile(path.read_bytes())
        ours = [(n["section"], n["owner"], n["size"]) for n in notes_list(elf)]
        theirs = oracles.readelf_notes(path)
        assert ours == theirs, name
        seen += len(ours)
    assert seen > 0
