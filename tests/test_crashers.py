"""Inputs the fuzzers once crashed on.  Each must now give a clean DeviceBinaryError or succeed,
and exactly the outcome its sidecar ``NAME.expect`` names (exception class and message, or success),
with its bytes untouched.  ``tests/crashers/cli/`` holds inputs fuzz/cli_mutate.py saved, each with
the command line that failed and, once fixed, its ``.expect`` (exit status and error line).

* ``elf-edit-huge-sh_addralign.bin``: ``.shstrtab`` with sh_addralign 2**63; adding a section
  made the editor pad the output to an exabyte (MemoryError).  Now: FormatError naming the section.
* ``elf-edit-bad-e_shstrndx.bin``: e_shstrndx past the section table (tolerated by the reader as a
  warning); adding a section indexed past the end (IndexError).  Now: FormatError.
* ``cubin-symtab-link-out-of-range.bin``: a cubin whose ``.symtab`` sh_link is past the section table;
  reading a prototype string indexed the section list (IndexError).  Now: FormatError.
* ``link-prune-cubin-huge-sh_addralign.bin``: a cubin section with a huge sh_addralign; removing a
  function (``devbin.targets.nvidia.link_prune.prune_cubin``) padded the output to it (MemoryError).  Now: FormatError.
* ``link-prune-object-huge-alignment.bin``: an AMDGPU object with a huge section alignment; removing
  a function (``devbin.targets.amdgpu.link_lld.prune_object``) made the ELF writer pad to it (MemoryError).  Now:
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
* ``link-prune-object-reloc-sh_info-out-of-range.bin``: found by fuzz_link in this campaign (issue 18
  item 6): an AMDGPU object whose relocation section's sh_info is past the section table;
  ``prune_object`` indexed the sections with it before any check (IndexError).  Now: a FormatError
  naming the relocation section and the missing section, whichever function is removed.
* ``zip-stored-member-recorded-4gb.bin``: found by fuzz_zip: a zip whose stored member records
  4,278,190,144 bytes and holds 64; the scan allocated (and zero-filled) a buffer of the recorded
  size, inside the 4 GiB memory budget.  Now: a member's buffer grows as its bytes come.
* ``zip-member-with-empty-name.bin``: found by fuzz_zip: a zip whose member has an empty name;
  ``zipfile.ZipInfo.is_dir`` indexes the name's last character (IndexError).  Now: folder entries
  are told by ``devbin.formats.zipmember.is_folder``, and the member is scanned like any other.
* ``zip-member-negative-header-offset.bin``: found by fuzz_zip (issue 29, the temporary-file path of a
  large member): a zip whose damaged central directory puts a member's local header at -2 MiB;
  ``zipmember.raw_pieces`` seeked there (ValueError).  Now: FormatError "local header at -2097152".
* ``zip-in-zip-stored-member-says-4gb.bin``: found by fuzz_zip: a zip in a zip whose stored member
  records 4,294,967,104 bytes and holds 64; charged its recorded size, it was a LimitExceeded under
  the default 4 GiB budget.  Now: a member is charged what its compressed bytes can hold at most
  (``zipmember.most_bytes``: as many for a stored member, 1032 times as many for a deflated one).
* ``elf-editor-overlapping-phdrs.bin``: found by fuzz_elf (in CI's 60-second run, issue 24 defect 11):
  an sm-ELF whose program header table (e_phoff 0xf00) overlaps the end of its section header table
  (e_shoff 0xb28, 16 entries); adding a section zeroed the old section header table and with it
  segment 0's type, offset and addresses.  Now: freed bytes are zeroed only where no kept table,
  section or segment lies (``tests/test_elf_edit_overlaps.py`` has the other shapes).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzz import run_all

from devbin.errors import DeviceBinaryError

from tests.runners import cli_err

HERE = Path(__file__).parent / "crashers"
CRASHERS = sorted(HERE.glob("*.bin"))
CLI_CRASHERS = sorted((HERE / "cli").glob("*.bin"))


def _pending(path: Path) -> str:
    """A crasher kept before its fix (sidecar key "pending": why): its tests are strict xfails, so the
    fix makes them pass unexpectedly, and the key must then go."""
    sidecar = path.with_suffix(".expect")
    return str(json.loads(sidecar.read_text()).get("pending", "")) if sidecar.is_file() else ""


def _marks(path: Path) -> list[pytest.MarkDecorator]:
    reason = _pending(path)
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def _found_by(path: Path) -> str:
    sidecar = path.with_suffix(".expect")
    return str(json.loads(sidecar.read_text()).get("found_by", "")) if sidecar.is_file() else ""


@pytest.mark.parametrize("path,target", [
    pytest.param(p, t, id=f"{t}-{p.name}", marks=_marks(p) if t == _found_by(p) else [])
    for t in run_all.available_targets() for p in CRASHERS])
def test_crasher_is_handled(path: Path, target: str) -> None:
    import importlib

    mod = importlib.import_module(f"fuzz.{target}")
    data = path.read_bytes()
    mod.TestOneInput(data)
    assert path.read_bytes() == data


def test_crashers_exist() -> None:
    assert len(CRASHERS) >= 2


# ------------------------------------------------------------------ what each crasher must do now
#
# Each crasher NAME.bin has a sidecar NAME.expect (JSON): {"checks": [CHECK, ...]}, a CHECK being
# {"call": CALL, ...arguments, "result": "ok"} or {..., "raises": "ExceptionClass", "match": REGEX}.
# A top-level "pending": REASON keeps a crasher whose fix has not landed: its raising checks and its
# "found_by" fuzz target are strict xfails until then.
# CALLs: "edit" (add a section with the ELF editor and write), "import" (the unified-model importer),
# "link" (devbin.link.core.link, its dict and map), "prune_cubin"/"prune_object" ("symbol"),
# "load" ("target", "lazy": load, freeze, look up the first symbols, to_dict), "cli" ("argv" with
# {in} for the input; "exit" and "stderr" REGEX instead of raises/match).


def _edit(data: bytearray, check: dict[str, Any]) -> None:
    from devbin.formats.elf.edit import ElfEditor, NewSection
    from devbin.formats.elf.reader import ElfFile

    seen: list[DeviceBinaryError] = []
    elf = ElfFile(data, diag=seen.append)
    ed = ElfEditor(elf)
    ed.add_section(NewSection(".devbin.meta", b"x"))
    out = ElfFile(ed.write(), diag=seen.append)
    assert out.segments == elf.segments, "the edit changed a program header"


def _import(data: bytearray, check: dict[str, Any]) -> None:
    from devbin.formats.elf.reader import ElfFile
    from devbin.importers import import_code_object

    seen: list[DeviceBinaryError] = []
    import_code_object(ElfFile(data, diag=seen.append), diag=seen.append)


def _link(data: bytearray, check: dict[str, Any]) -> None:
    from devbin.link.core import link

    result = link([("fuzz.o", bytes(data))])
    result.to_dict()
    result.link_map()


def _prune_cubin(data: bytearray, check: dict[str, Any]) -> None:
    from devbin.targets.nvidia.link_prune import prune_cubin

    prune_cubin(bytes(data), {check["symbol"]}, where="fuzz")


def _prune_object(data: bytearray, check: dict[str, Any]) -> None:
    from devbin.targets.amdgpu.link_lld import prune_object

    prune_object(bytes(data), {check["symbol"]}, where="fuzz")


def _load(data: bytearray, check: dict[str, Any]) -> None:
    from devbin.load import Executable

    exe = Executable(check["target"], lazy=check["lazy"])
    exe.load_code_object(bytes(data), name="fuzz")
    exe.freeze()
    for name in [s.name for s in exe.symbols()][:4]:
        exe.symbol(name)
    exe.to_dict()


def _scan(data: bytearray, check: dict[str, Any]) -> None:
    """The scan of the input (a zip, say), every image's facts read, within ``max_rss_growth_mb`` more memory."""
    import resource

    from devbin.images import ScanReport, scan_bytes

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for image in scan_bytes(bytes(data), "fuzz.whl", report=ScanReport()):
        _ = (image.kind, image.arch, image.size)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
    assert grown < check["max_rss_growth_mb"], f"the scan took {grown} MB more"


CALLS: dict[str, Callable[[bytearray, dict[str, Any]], None]] = {
    "edit": _edit, "import": _import, "link": _link, "prune_cubin": _prune_cubin, "prune_object": _prune_object,
    "load": _load, "scan": _scan,
}


def _expectations(path: Path) -> list[dict[str, Any]]:
    sidecar = path.with_suffix(".expect")
    assert sidecar.is_file(), f"{path.name} has no {sidecar.name} saying what it must do now"
    checks: list[dict[str, Any]] = json.loads(sidecar.read_text())["checks"]
    assert checks, sidecar
    return checks


def _check_id(c: dict[str, Any]) -> str:
    return " ".join(str(v) for k, v in c.items() if k in ("call", "symbol", "target", "lazy"))


CASES = [(p, c) for p in CRASHERS for c in _expectations(p)]


@pytest.mark.parametrize("path,check", [pytest.param(p, c, id=f"{p.stem}:{_check_id(c)}",
                                                      marks=_marks(p) if "raises" in c else [])
                                         for p, c in CASES])
def test_crasher_does_what_its_sidecar_says(path: Path, check: dict[str, Any]) -> None:
    data = path.read_bytes()
    buf = bytearray(data)
    call = CALLS[check["call"]]
    if "raises" in check:
        with pytest.raises(DeviceBinaryError) as info:
            call(buf, check)
        assert type(info.value).__name__ == check["raises"], info.value
        assert re.search(check["match"], str(info.value)), info.value
        assert "\n" not in str(info.value)
    else:
        assert check["result"] == "ok", check
        call(buf, check)
    assert bytes(buf) == data, "the input bytes changed"


CLI_CASES = [(p, c) for p in CLI_CRASHERS for c in _expectations(p)]


@pytest.mark.parametrize("path,check", CLI_CASES, ids=[p.stem for p, _ in CLI_CASES])
def test_cli_crasher_does_what_its_sidecar_says(path: Path, check: dict[str, Any], tmp_path: Path) -> None:
    """An input fuzz/cli_mutate.py saved: the command line again, in-process, in a fresh folder."""
    data = path.read_bytes()
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    name = check.get("input_name", "input.bin")
    (tmp_path / "in" / name).write_bytes(data)
    argv = [a.replace("{in}", name).replace("{tmp}", str(tmp_path / "out")) for a in check["argv"]]
    cwd = os.getcwd()
    os.chdir(tmp_path / "in")
    try:
        code, _, err = cli_err(*argv)
    finally:
        os.chdir(cwd)
    assert code == check["exit"], err
    lines = err.splitlines()
    if check["exit"]:
        assert len(lines) == 1 and lines[0].startswith("devbin: error:"), lines
        assert re.search(check["stderr"], lines[0]), lines
    assert (tmp_path / "in" / name).read_bytes() == data, "the input changed"


def test_every_crasher_has_a_sidecar() -> None:
    for p in CRASHERS + CLI_CRASHERS:
        assert p.with_suffix(".expect").is_file(), p
    for sidecar in HERE.rglob("*.expect"):
        assert sidecar.with_suffix(".bin").is_file(), f"{sidecar} names no crasher"


@pytest.mark.parametrize("name,needle", [("elf-edit-huge-sh_addralign.bin", "e_shstrndx|sh_addralign"),
                                          ("elf-edit-bad-e_shstrndx.bin", "e_shstrndx")])
def test_crasher_gives_the_named_error(name: str, needle: str) -> None:
    from devbin.errors import FormatError
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
