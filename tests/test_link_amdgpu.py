"""The AMDGPU backend of devbin link: facts, totals across objects, patching, pruning, ld.lld.

Oracle: tests/sources/link_amd/ compiled by clang-19 for gfx90a as one translation unit
(one.cl: LLVM's own totals, callees kept out of line) and as two objects (kern.cl calls
heavy_fn from lib.cl), linked by ld.lld-19.  ld.lld alone keeps the kernel's own numbers;
after patch_linked the descriptor and the note carry LLVM's one-module private segment and
dynamic-stack flag, and at least its register counts.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import msgpack  # type: ignore[import-untyped]
import pytest

from conftest import SOURCES, require_tool
from devbin.errors import UsageError
from devbin.formats.elf.compare import loader_differences
from devbin.formats.elf.reader import ElfFile
from devbin.targets.amdgpu.descriptor import read_descriptor
from devbin.targets.amdgpu.link_lld import (
    KernelTotals,
    function_facts,
    kernel_totals,
    patch_linked,
    prune_object,
    run_lld,
)
from devbin.targets.amdgpu.link_msgpack import encode_uint, parse
from devbin.targets.amdgpu.link_patch import patch_desc
from devbin.targets.amdgpu.metadata import read_metadata

from tests.runners import run_devbin, run_tool

SRC = SOURCES / "link_amd"
GFX = "gfx90a"
CFLAGS = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-O2", f"-mcpu={GFX}"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Objects (plain and devbin cc-annotated, with -ffunction-sections) and the two links."""
    clang = require_tool("clang-19")
    lld = require_tool("ld.lld-19")
    out = tmp_path_factory.mktemp("link_amd")
    p = {n: out / n for n in ("kern.o", "lib.o", "kern_cc.o", "lib_cc.o", "lib_nofs.o", "one.o", "sep.so",
                              "one.so")}
    fs = [*CFLAGS, "-ffunction-sections"]
    run_tool([clang, *fs, "-c", str(SRC / "kern.cl"), "-o", str(p["kern.o"])], out)
    run_tool([clang, *fs, "-c", str(SRC / "lib.cl"), "-o", str(p["lib.o"])], out)
    run_tool([clang, *CFLAGS, "-c", str(SRC / "lib.cl"), "-o", str(p["lib_nofs.o"])], out)
    run_tool([clang, *CFLAGS, "-c", str(SRC / "one.cl"), "-o", str(p["one.o"])], out)
    for name in ("kern", "lib"):  # devbin cc: the same compile, plus the assembly's per-function facts
        r = run_devbin("cc", "--", clang, *fs, "-c", SRC / f"{name}.cl", "-o", p[f"{name}_cc.o"], cwd=out)
        assert r.returncode == 0, r.stderr
    run_tool([lld, "-shared", "-o", str(p["sep.so"]), str(p["kern.o"]), str(p["lib.o"])], out)
    run_tool([lld, "-shared", "-o", str(p["one.so"]), str(p["one.o"])], out)
    return p


def _kernel(so: bytes, name: str) -> dict[str, Any]:
    """What a loader reads about one kernel: descriptor fields and note keys."""
    elf = ElfFile(so)
    assert elf.dynsym is not None
    kd = read_descriptor(elf, elf.dynsym.get(f"{name}.kd"), GFX)  # type: ignore[arg-type]
    md = read_metadata(elf)
    assert md is not None
    k = md.kernel(name)
    assert k is not None
    return {
        "kd.private_segment_fixed_size": kd.private_segment_fixed_size,
        "kd.uses_dynamic_stack": kd.uses_dynamic_stack,
        "kd.vgpr_granules": kd.compute_pgm_rsrc1.granulated_workitem_vgpr_count,
        "kd.sgpr_granules": kd.compute_pgm_rsrc1.granulated_wavefront_sgpr_count,
        "kd.accum_offset": kd.compute_pgm_rsrc3.accum_offset,
        ".private_segment_fixed_size": k.private_segment_fixed_size,
        ".uses_dynamic_stack": k.uses_dynamic_stack,
        ".vgpr_count": k.vgpr_count,
        ".sgpr_count": k.sgpr_count,
        ".agpr_count": k.agpr_count,
    }


# Measured with clang-19 19.1.7 / ld.lld-19 (gfx90a); kept here as the record of the failure.
MEASURED = {
    "one-TU": {"kd.private_segment_fixed_size": 68, "kd.uses_dynamic_stack": False, "kd.vgpr_granules": 10,
               "kd.sgpr_granules": 4, "kd.accum_offset": 15, ".private_segment_fixed_size": 68,
               ".uses_dynamic_stack": False, ".vgpr_count": 82, ".sgpr_count": 39, ".agpr_count": 18},
    "separate": {"kd.private_segment_fixed_size": 0, "kd.uses_dynamic_stack": True, "kd.vgpr_granules": 3,
                 "kd.sgpr_granules": 5, "kd.accum_offset": 7, ".private_segment_fixed_size": 0,
                 ".uses_dynamic_stack": True, ".vgpr_count": 32, ".sgpr_count": 46, ".agpr_count": 0},
}


def test_the_failure_measured(built: dict[str, Path]) -> None:
    one = _kernel(built["one.so"].read_bytes(), "kern_main")
    sep = _kernel(built["sep.so"].read_bytes(), "kern_main")
    print("one-TU", one, "\nseparate", sep)
    # The defining facts: LLVM counts the callee's 64-byte array in one module, ld.lld loses it.
    assert one["kd.private_segment_fixed_size"] == one[".private_segment_fixed_size"] == 68
    assert sep["kd.private_segment_fixed_size"] == sep[".private_segment_fixed_size"] == 0
    assert one["kd.uses_dynamic_stack"] is False and sep["kd.uses_dynamic_stack"] is True
    assert sep[".vgpr_count"] < one[".vgpr_count"] and sep[".agpr_count"] < one[".agpr_count"]
    assert sep["kd.vgpr_granules"] < one["kd.vgpr_granules"]
    if run_tool([require_tool("clang-19"), "--version"], check=False).stdout.find("19.1.7") >= 0:
        assert (one, sep) == (MEASURED["one-TU"], MEASURED["separate"])


def test_function_facts(built: dict[str, Path]) -> None:
    ann = function_facts([built["kern_cc.o"].read_bytes(), built["lib_cc.o"].read_bytes()], ["kern.o", "lib.o"])
    heavy, kern = ann["heavy_fn"], ann["kern_main"]
    assert (heavy.private_bytes, heavy.own_private, heavy.agpr, heavy.dynamic_stack) == (68, 68, 18, False)
    assert heavy.vgpr is not None and heavy.arch_vgpr is not None and heavy.vgpr == heavy.arch_vgpr + heavy.agpr
    assert kern.kernel and kern.calls == ("heavy_fn",) and kern.external_calls == ("heavy_fn",)
    assert kern.dynamic_stack is None  # LLVM's true flag may only be the external call's
    assert ann["unused_fn"].calls == ("helper_fn",) and ann["unused_fn"].external_calls == ()
    # Without devbin cc, LLVM 19 objects know nothing about device functions: unknown, not guessed.
    plain = function_facts([built["kern.o"].read_bytes(), built["lib.o"].read_bytes()])
    assert plain["heavy_fn"].vgpr is None and plain["heavy_fn"].private_bytes is None
    t = kernel_totals(plain)["kern_main"]
    assert t.unknown == ("heavy_fn",) and t.dynamic_stack


def _totals(built: dict[str, Path]) -> dict[str, KernelTotals]:
    return kernel_totals(function_facts([built["kern_cc.o"].read_bytes(), built["lib_cc.o"].read_bytes()]))


def _restore(orig: bytes, patched: bytes, kernels: list[str]) -> tuple[bytes, set[int]]:
    """``patched`` with the note section and the patched descriptor fields put back; the offsets that
    were allowed to change."""
    elf = ElfFile(orig)
    out = bytearray(patched)
    allowed: set[int] = set()
    note = elf.section(".note")
    assert note is not None
    allowed |= set(range(note.sh_offset, note.sh_offset + note.sh_size))
    out[note.sh_offset:note.sh_offset + note.sh_size] = orig[note.sh_offset:note.sh_offset + note.sh_size]
    assert elf.dynsym is not None
    for k in kernels:
        sym = elf.dynsym.get(f"{k}.kd")
        assert sym is not None
        sec = elf.sections[sym.st_shndx]
        base = sec.sh_offset + sym.st_value - sec.sh_addr
        for lo, hi in ((4, 8), (44, 52), (56, 58)):  # private, rsrc3+rsrc1, kernel_code_properties
            allowed |= set(range(base + lo, base + hi))
            out[base + lo:base + hi] = orig[base + lo:base + hi]
    return bytes(out), allowed


def test_patch_gives_one_tu_numbers(built: dict[str, Path]) -> None:
    totals = _totals(built)
    orig = built["sep.so"].read_bytes()
    patched = patch_linked(orig, totals)
    one = _kernel(built["one.so"].read_bytes(), "kern_main")
    got = _kernel(patched, "kern_main")
    print("patched", got)
    for key in ("kd.private_segment_fixed_size", ".private_segment_fixed_size", "kd.uses_dynamic_stack",
                ".uses_dynamic_stack"):
        assert got[key] == one[key], key
    for key in ("kd.vgpr_granules", "kd.sgpr_granules", "kd.accum_offset", ".vgpr_count", ".sgpr_count",
                ".agpr_count"):
        assert got[key] >= one[key], key
    assert _kernel(patched, "kern_light") == _kernel(orig, "kern_light")
    # Nothing else moved or changed.
    restored, allowed = _restore(orig, patched, ["kern_main", "kern_light"])
    assert restored == orig
    assert {i for i, (a, b) in enumerate(zip(orig, patched, strict=True)) if a != b} <= allowed
    diffs = loader_differences(ElfFile(orig), ElfFile(patched))
    assert set(diffs) <= {"bytes of segment [1] differ", "bytes of segment [7] differ",
                          "allocated section '.note' differs", "allocated section '.rodata' differs"}
    assert loader_differences(ElfFile(orig), ElfFile(restored)) == []
    # Every other note key as it was.
    md0, md1 = read_metadata(ElfFile(orig)), read_metadata(ElfFile(patched))
    assert md0 is not None and md1 is not None
    assert md0.kernels[1:] == md1.kernels[1:] and md0.kernels[0].args == md1.kernels[0].args
    # LLVM's own tools still read it.
    readelf, objdump = require_tool("llvm-readelf-19"), require_tool("llvm-objdump-19")
    path = built["sep.so"].with_name("patched.so")
    path.write_bytes(patched)
    notes = run_tool([readelf, "--notes", str(path)]).stdout
    assert ".private_segment_fixed_size: 68" in notes and "warning" not in notes.lower()
    dis = [run_tool([objdump, "-d", str(f)]).stdout.splitlines()[2:]
           for f in (built["sep.so"], path)]
    assert dis[0] == dis[1] and any("s_swappc_b64" in line for line in dis[1])


def test_patch_never_lowers_and_keeps_bytes_when_nothing_changes(built: dict[str, Path]) -> None:
    orig = built["sep.so"].read_bytes()
    small = KernelTotals(private_segment=0, arch_vgpr=1, agpr=0, sgpr=1, dynamic_stack=True)
    assert patch_linked(orig, {"kern_main": small}) == orig
    light = KernelTotals(private_segment=0, arch_vgpr=1, agpr=0, sgpr=1, dynamic_stack=False)
    assert patch_linked(orig, {"kern_light": light}) == orig


def test_patch_refuses_a_kernel_without_scratch(built: dict[str, Path]) -> None:
    t = KernelTotals(private_segment=16, arch_vgpr=2, agpr=0, sgpr=10, dynamic_stack=False)
    with pytest.raises(UsageError, match="without scratch"):
        patch_linked(built["sep.so"].read_bytes(), {"kern_light": t})


def test_note_growth_absorbs_a_redundant_note_or_is_refused(built: dict[str, Path]) -> None:
    big = KernelTotals(private_segment=40000, arch_vgpr=200, agpr=200, sgpr=100, dynamic_stack=True)
    sep = built["sep.so"].read_bytes()
    patched = patch_linked(sep, {"kern_main": big})  # lib.o's kernel-less note gives the room
    assert len(patched) == len(sep)
    elf = ElfFile(patched)
    md = read_metadata(elf)
    assert md is not None and [k.name for k in md.kernels] == ["kern_main", "kern_light"]
    k = md.kernel("kern_main")
    assert k is not None and (k.private_segment_fixed_size, k.vgpr_count, k.agpr_count) == (40000, 400, 200)
    assert loader_differences(ElfFile(sep), ElfFile(_restore(sep, patched, ["kern_main"])[0])) == []
    path = built["sep.so"].with_name("grown.so")
    path.write_bytes(patched)
    notes = run_tool([require_tool("llvm-readelf-19"), "--notes", str(path)]).stdout
    assert ".private_segment_fixed_size: 40000" in notes and ".vgpr_count:     400" in notes
    # The one-unit file has a single note: no room to grow beyond its 4-byte padding.
    with pytest.raises(UsageError, match="cannot move"):
        patch_linked(built["one.so"].read_bytes(), {"kern_main": big})


def test_msgpack_patch_keeps_widths_and_pads() -> None:
    doc = {"amdhsa.kernels": [{".name": "k", ".private_segment_fixed_size": 0, ".vgpr_count": 300,
                               ".sgpr_count": 10, ".uses_dynamic_stack": True, ".size": 5}]}
    desc = msgpack.packb(doc)
    t = KernelTotals(private_segment=68, arch_vgpr=12, agpr=0, sgpr=12, dynamic_stack=False)
    out = patch_desc(desc, {"k": t}, "gfx90a")
    assert len(out) == len(desc)
    k = msgpack.unpackb(out)["amdhsa.kernels"][0]
    assert (k[".private_segment_fixed_size"], k[".vgpr_count"], k[".sgpr_count"], k[".uses_dynamic_stack"]) == (
        68, 300, 12, False)
    padded = patch_desc(desc, {"k": t}, "gfx90a", pad=1)
    assert len(padded) == len(desc) + 1 and msgpack.unpackb(padded) == msgpack.unpackb(out)
    assert encode_uint(5, 2) == b"\xcc\x05" and encode_uint(300) == b"\xcd\x01\x2c"
    assert parse(desc).get("amdhsa.kernels") is not None


def _words(so: bytes, func: str) -> tuple[int, bytes]:
    elf = ElfFile(so)
    assert elf.symtab is not None
    s = elf.symtab.get(func)
    assert s is not None
    sec = elf.sections[s.st_shndx]
    off = sec.sh_offset + s.st_value - sec.sh_addr
    return s.st_value, so[off:off + s.st_size]


def _same_code(a: bytes, b: bytes, func: str, relocs: list[tuple[int, int, int, str]]) -> None:
    """``func`` has the same bytes in both links, except the relocated words, which resolve to the
    same symbols in each.  ``relocs``: (offset in the function, type, addend, symbol)."""
    codes = []
    for so in (a, b):
        addr, code = _words(so, func)
        buf = bytearray(code)
        elf = ElfFile(so)
        assert elf.symtab is not None
        for off, rtype, addend, sym in relocs:
            target = elf.symtab.get(sym)
            assert target is not None
            value = target.st_value + addend - (addr + off)
            expect = value & 0xFFFFFFFF if rtype == 10 else (value >> 32) & 0xFFFFFFFF  # REL32_LO / REL32_HI
            assert struct.unpack_from("<I", buf, off)[0] == expect
            buf[off:off + 4] = bytes(4)
        codes.append(bytes(buf))
    assert codes[0] == codes[1]


def test_prune_then_link_gives_the_same_code(built: dict[str, Path], tmp_path: Path) -> None:
    lib = built["lib_cc.o"].read_bytes()
    pruned = prune_object(lib, {"unused_fn", "helper_fn"})
    elf = ElfFile(pruned)
    assert elf.symtab is not None
    assert {s.name for s in elf.symtab if s.name} == {"heavy_fn", "__oclc_ABI_version"}
    assert elf.section(".text.unused_fn") is None and elf.section(".text.helper_fn") is None
    facts = function_facts([pruned])
    assert set(facts) == {"heavy_fn"} and facts["heavy_fn"].private_bytes == 68  # devbin sections rewritten
    (tmp_path / "lib_pruned.o").write_bytes(pruned)
    full = run_lld([built["kern_cc.o"], built["lib_cc.o"]], tmp_path / "full.so")
    small = run_lld([built["kern_cc.o"], tmp_path / "lib_pruned.o"], tmp_path / "small.so")
    assert len(small) < len(full)
    kern = ElfFile(built["kern_cc.o"].read_bytes())
    rel = kern.section(".rela.text.kern_main")
    assert rel is not None and kern.symtab is not None
    relocs = [(r.r_offset, r.r_type, r.r_addend or 0, kern.symtab[r.r_sym].name)
              for r in kern.relocation_tables[rel.index]]
    assert {r[3] for r in relocs} == {"heavy_fn"}
    _same_code(full, small, "kern_main", relocs)
    _same_code(full, small, "heavy_fn", [])
    _same_code(full, small, "kern_light", [])
    assert ElfFile(small).symtab.get("unused_fn") is None  # type: ignore[union-attr]
    # Pruning the plain object (no devbin sections) links too.
    (tmp_path / "lib_plain.o").write_bytes(prune_object(built["lib.o"].read_bytes(), {"unused_fn", "helper_fn"}))
    run_lld([built["kern.o"], tmp_path / "lib_plain.o"], tmp_path / "plain.so")


def test_prune_refusals(built: dict[str, Path]) -> None:
    lib = built["lib.o"].read_bytes()
    assert prune_object(lib, set()) == lib
    with pytest.raises(UsageError, match=r"still referenced from \.text\.unused_fn"):
        prune_object(lib, {"helper_fn"})
    with pytest.raises(UsageError, match=r"also holds 'heavy_fn'.*-ffunction-sections"):
        prune_object(built["lib_nofs.o"].read_bytes(), {"unused_fn", "helper_fn"})
    # a kernel goes with its descriptor symbol (tests/test_link_amdgpu_dce.py has the rest)
    kern = ElfFile(prune_object(built["kern.o"].read_bytes(), {"kern_light"}))
    assert kern.symtab is not None and kern.symtab.get("kern_light.kd") is None
    assert kern.symtab.get("kern_main.kd") is not None
    with pytest.raises(UsageError, match="not a function defined"):
        prune_object(lib, {"no_such_fn"})
    with pytest.raises(UsageError, match="relocatable"):
        prune_object(built["sep.so"].read_bytes(), {"heavy_fn"})


def test_run_lld_missing_and_failing(built: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="undefined hidden symbol: heavy_fn") as e:
        run_lld([built["kern.o"]], tmp_path / "x.so")
    assert "\n" not in str(e.value)
    monkeypatch.setenv("DEVBIN_LD_LLD", os.fspath(tmp_path / "no-such-ld.lld"))  # the override wins
    with pytest.raises(UsageError) as e:
        run_lld([built["kern.o"]], tmp_path / "x.so")
    msg = str(e.value)
    assert "ld.lld" in msg and "apt-get install lld-19" in msg and "\n" not in msg

