"""Inputs the fuzzers once crashed on.  Each must now give a clean DeviceBinaryError or succeed.

* ``elf-edit-huge-sh_addralign.bin``: ``.shstrtab`` with sh_addralign 2**63; adding a section
  made the editor pad the output to an exabyte (MemoryError).  Now: FormatError naming the section.
* ``elf-edit-bad-e_shstrndx.bin``: e_shstrndx past the section table (tolerated by the reader as a
  warning); adding a section indexed past the end (IndexError).  Now: FormatError.
* ``cubin-symtab-link-out-of-range.bin``: a cubin whose ``.symtab`` sh_link is past the section table;
  reading a prototype string indexed the section list (IndexError).  Now: FormatError.
* ``link-prune-cubin-huge-sh_addralign.bin``: a cubin section with a huge sh_addralign; removing a
  function (``devbin.link.nvidia.prune_cubin``) padded the output to it (MemoryError).  Now: FormatError.
* ``link-prune-object-huge-alignment.bin``: an AMDGPU object with a huge section alignment; removing
  a function (``devbin.link.amdgpu.prune_object``) made the ELF writer pad to it (MemoryError).  Now:
  the writer refuses an alignment that is no power of two up to 64 KiB (UsageError).
* ``link-prune-object-bad-reloc-symbol.bin``: an AMDGPU object whose relocation names a symbol
  index past the symbol table; ``prune_object`` looked it up in a dict (KeyError).  Now: FormatError.
* ``link-prune-object-reloc-target-out-of-range.bin``: ``tests/sources/link_amd/one.cl`` (gfx90a,
  -ffunction-sections) whose ``.rela.text.unused_fn`` has sh_info 999: the link does not see the call
  it holds, removes ``helper_fn``, and ``prune_object`` read ``sections[999]`` before its range check
  (IndexError, issue 18 defect 6).  Now: FormatError naming the relocation section.
* ``link-kernel-typed-as-object.bin``: a cubin whose kernel symbol says STT_OBJECT; the link graph
  made the kernel a variable and resource propagation looked it up among functions (KeyError).
  Now: a function of the model is a function node.
* ``load-huge-p_memsz.bin``: a code object whose PT_LOAD p_memsz is huge; the simulated device
  allocated it (MemoryError).  Now: a UsageError naming the device's memory limit.
* ``load-lazy-functions-of-one-range.bin`` (``sample_load_lib.so`` with ``lib_private`` given
  ``lib_square``'s range) and ``load-lazy-variables-of-one-range.bin`` (``sample_sm90_rdc.cubin`` with
  two variables of one range): the lazy plan sorted ``(start, end, unit)`` tuples and compared two
  units of the same range (TypeError), found in review.  Now: ordered by the range alone.
* ``load-lazy-huge-nobits-section.bin``: a cubin (``tests/sources/kernels.cu``, sm_90) whose
  ``.nv.global`` claims 0x220000000004 bytes; a lazy lookup zero-filled the range in host memory
  before the simulated device checked its limit (MemoryError).  Now: the device zero-fills what it
  maps, after the check (UsageError naming the limit).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz import run_all

CRASHERS = sorted((Path(__file__).parent / "crashers").glob("*.bin"))


@pytest.mark.parametrize("path", CRASHERS, ids=[p.name for p in CRASHERS])
@pytest.mark.parametrize("target", run_all.available_targets())
def test_crasher_is_handled(path: Path, target: str) -> None:
    import importlib

    mod = importlib.import_module(f"fuzz.{target}")
    mod.TestOneInput(path.read_bytes())


def test_crashers_exist() -> None:
    assert len(CRASHERS) >= 2


@pytest.mark.parametrize("name,needle", [("elf-edit-huge-sh_addralign.bin", "e_shstrndx|sh_addralign"),
                                          ("elf-edit-bad-e_shstrndx.bin", "e_shstrndx")])
def test_crasher_gives_the_named_error(name: str, needle: str) -> None:
    from devbin.errors import DeviceBinaryError, FormatError
    from devbin.formats.elf.edit import ElfEditor, NewSection
    from devbin.formats.elf.reader import ElfFile

    seen: list[DeviceBinaryError] = []
    ed = ElfEditor(ElfFile((Path(__file__).parent / "crashers" / name).read_bytes(), diag=seen.append))
    ed.add_section(NewSection(".devbin.meta", b"x"))
    with pytest.raises(FormatError, match=needle):
        ed.write()


def test_huge_alignment_of_a_moved_section_is_an_error() -> None:
    from devbin.errors import FormatError
    from devbin.formats.elf.edit import ElfEditor
    from devbin.formats.elf.reader import ElfFile

    from tests.elfbuild import patch_section, small_elf

    base = small_elf()
    comment = ElfFile(base).section(".comment")
    assert comment is not None
    ed = ElfEditor(ElfFile(patch_section(base, comment.index, sh_addralign=1 << 63)))
    ed.replace_section(".comment", b"moved")
    with pytest.raises(FormatError, match="sh_addralign"):
        ed.write()
