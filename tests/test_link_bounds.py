"""Indices read from an input are range-checked before their first use in link/ (issue 18, defect 6).

Each case is a real object built at test time (clang-19, nvcc) with one field pointed past the
table it indexes; before the fix each raised IndexError or KeyError out of the linker.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from conftest import SOURCES, require_tool
from devbin.errors import FormatError
from devbin.formats.elf.reader import ElfFile
from devbin.targets.amdgpu.link_lld import prune_object
from devbin.targets.nvidia.link_prune import prune_cubin

from tests.elfbuild import patch_section
from tests.runners import run_devbin, run_tool

CRASHER = Path(__file__).parent / "crashers" / "link-prune-object-reloc-target-out-of-range.bin"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def amd_object(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """tests/sources/link_amd/one.cl with -ffunction-sections: kern_main -> heavy_fn; unused_fn -> helper_fn."""
    clang = require_tool("clang-19")
    out = tmp_path_factory.mktemp("bounds") / "one.o"
    run_tool([clang, "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-O2", "-mcpu=gfx90a", "-ffunction-sections",
              "-c", str(SOURCES / "link_amd" / "one.cl"), "-o", str(out)])
    return out.read_bytes()


def test_link_of_the_crasher_is_one_clean_error(tmp_path: Path) -> None:
    """The kept crasher: one.o whose .rela.text.unused_fn has sh_info 999.  The call it holds is not seen,
    so the link removes helper_fn, and prune_object read sections[999] before checking it."""
    data = CRASHER.read_bytes()
    (tmp_path / "k.o").write_bytes(data)
    r = run_devbin("link", "k.o", "-o", "out.so", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith("devbin: error: ")
    assert "'.rela.text.unused_fn' applies to section 999, which does not exist" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out.so").exists()
    assert (tmp_path / "k.o").read_bytes() == data


def test_prune_object_relocation_target_out_of_range(amd_object: bytes) -> None:
    elf = ElfFile(amd_object)
    rsec = elf.section(".rela.text.unused_fn")
    assert rsec is not None
    bad = patch_section(amd_object, rsec.index, sh_info=len(elf.sections) + 3)
    with pytest.raises(FormatError, match=r"'.rela.text.unused_fn' applies to section \d+, which does not exist"):
        prune_object(bad, {"helper_fn"})


def test_prune_object_function_in_a_section_that_does_not_exist(amd_object: bytes) -> None:
    """unused_fn and helper_fn both claim section len+5: naming the other one read sections[len+5] (IndexError)."""
    elf = ElfFile(amd_object)
    table = elf.symtab
    assert table is not None
    raw = bytearray(amd_object)
    for name in ("unused_fn", "helper_fn"):
        sym = next(s for s in table if s.name == name)
        struct.pack_into("<H", raw, table.section.sh_offset + sym.index * 24 + 6, len(elf.sections) + 5)
    with pytest.raises(FormatError, match=f"'unused_fn' is defined in section {len(elf.sections) + 5}, which does"):
        prune_object(bytes(raw), {"unused_fn"})


def test_prune_cubin_section_name_table_tied_to_a_removed_section(tmp_path: Path) -> None:
    """.shstrtab given SHF_INFO_LINK to a removed function's section was removed with it; the header's
    e_shstrndx was then looked up among the kept sections (KeyError)."""
    nvcc = require_tool("nvcc")
    cubin = tmp_path / "lib.cubin"
    run_tool([nvcc, "-arch=sm_90", "-rdc=true", "-cubin", "-o", str(cubin), str(SOURCES / "link_nv" / "lib.cu")])
    data = cubin.read_bytes()
    elf = ElfFile(data)
    text = elf.section(".text.lib_unused")
    assert text is not None
    prune_cubin(data, {"lib_unused"})  # the unmodified cubin prunes
    bad = patch_section(data, elf.header.e_shstrndx, sh_flags=0x40, sh_info=text.index)  # SHF_INFO_LINK
    with pytest.raises(FormatError, match=r"'.shstrtab': it is the section-name table \(e_shstrndx\)"):
        prune_cubin(bad, {"lib_unused"})
