"""AMDGPU dead-code elimination in devbin link: kernels removed, nothing kept left dangling.

Objects: tests/sources/link_amd/fptr_{main,lib}.cl (function pointers, an indirect call, recursion,
a variable of the other object read through its GOT slot), compiled at test time by clang-19 and
by clang-22 with ``-fexperimental-call-graph-section``, with ``-ffunction-sections`` (and the main
file once without, so its pruning is refused).  Oracles: ``llvm-readelf-19`` (symbols,
relocations, the metadata note) on the pruned objects and the linked code object, and
``ld.lld-19`` (the pruned objects link with ``--no-undefined``).
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
import pytest

from conftest import SOURCES, require_tool
from devbin.errors import FormatError
from devbin.formats.elf.reader import ElfFile
from devbin.link.core import link
from devbin.targets.amdgpu.link_lld import function_facts, kernel_totals, prune_object
from devbin.targets.amdgpu.link_msgpack import parse, remove_elements

from tests.runners import run_tool

SRC = SOURCES / "link_amd"
COMPILERS = ("clang-19", "clang-22")
CFLAGS = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-mcpu=gfx90a", "-c"]
# What dead-code elimination keeps for each kernel (functions; fib is static in fptr_main.cl)
KEEPS = {
    "k_table": {"k_table"},  # table's functions: address-taken, no indirect call site an LLVM object states
    "k_fact": {"k_fact", "lib_fact"},
    "k_local": {"k_local", "fib"},
    "k_plain": {"k_plain"},
}
TABLE = {"lib_inc", "lib_dbl"}  # what `table` (data: never removed from AMDGPU objects) holds


@pytest.fixture(scope="module")
def objs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    out = tmp_path_factory.mktemp("link_amd_dce")
    built: dict[str, dict[str, Path]] = {}
    for cc in COMPILERS:
        clang = require_tool(cc)
        extra = ["-fexperimental-call-graph-section"] if cc == "clang-22" else []
        b = built[cc] = {}
        for name, fs in (("main", True), ("lib", True), ("main_nofs", False)):
            dest = out / f"{name}.{cc}.o"
            src = SRC / f"fptr_{name.removesuffix('_nofs')}.cl"
            run_tool([clang, *CFLAGS, *extra, *(["-ffunction-sections"] if fs else []), "-o", str(dest), str(src)])
            b[name] = dest
    return built


def _readelf(*args: str | Path) -> str:
    return run_tool([require_tool("llvm-readelf-19"), *map(str, args)]).stdout


def _symbols(path: Path) -> dict[str, tuple[str, str]]:
    """.symtab name -> (type, Ndx) as llvm-readelf prints them."""
    out = {}
    text = _readelf("-s", path)
    table = text.split("Symbol table '.symtab'")[1]
    for ln in table.splitlines():
        f = ln.split()
        if len(f) == 8 and f[0].endswith(":") and f[0] != "Num:":
            out[f[7]] = (f[3], f[6])
    return out


def _relocated(path: Path) -> set[str]:
    """Symbols the relocations of the file name (llvm-readelf -r), those of .llvm.callgraph left out."""
    names = set()
    section = ""
    for ln in _readelf("-r", path).splitlines():
        m = re.match(r"Relocation section '([^']+)'", ln)
        if m:
            section = m[1]
        f = ln.split()
        if len(f) >= 5 and f[2].startswith("R_AMDGPU_") and section != ".rela.llvm.callgraph":
            names.add(f[4])
    return names


def _note_kernels(path: Path) -> list[str]:
    return re.findall(r"^    \.name:\s+(\S+)$", _readelf("--notes", path), re.M)


def _functions(symbols: dict[str, tuple[str, str]]) -> set[str]:
    return {n for n, (t, ndx) in symbols.items() if t == "FUNC" and ndx != "UND"}


# --------------------------------------------------------------------------- prune_object


@pytest.mark.parametrize("cc", COMPILERS)
def test_prune_removes_kernels_with_descriptor_relocations_and_note_entry(objs: dict[str, dict[str, Path]],
                                                                          tmp_path: Path, cc: str) -> None:
    before = objs[cc]["main"]
    data = before.read_bytes()
    gone = {"k_fact", "k_table", "old_helper"}
    if cc == "clang-22":  # its callable copies of the kernels' bodies (clang-22 writes one per OpenCL kernel)
        gone |= {"__clang_ocl_kern_imp_k_fact", "__clang_ocl_kern_imp_k_table"}
    pruned = tmp_path / "main.o"
    pruned.write_bytes(prune_object(data, gone))
    syms = _symbols(pruned)
    assert not set(syms) & {*gone, "k_fact.kd", "k_table.kd", "lib_fact", "lib_leaf", "lib_counter"}
    assert {"k_local", "k_plain", "k_local.kd", "k_plain.kd", "fib", "table", "lib_inc", "lib_dbl"} <= set(syms)
    # table: only k_table read it (the variable stays; its relocations to lib_inc, lib_dbl too)
    assert _relocated(pruned) == _relocated(before) - {*gone, "lib_fact", "lib_leaf", "lib_counter", "table"}
    # clang-22's one .llvm.callgraph per function (call-graph metadata) is dropped
    assert ".llvm.callgraph" in _readelf("-S", before) if cc == "clang-22" else True
    assert ".llvm.callgraph" not in _readelf("-S", pruned)
    assert _note_kernels(before) == ["k_table", "k_fact", "k_local", "k_plain"]
    assert _note_kernels(pruned) == ["k_local", "k_plain"]
    # the descriptors stay where they were; the removed ones are zeros
    old, new = ElfFile(data), ElfFile(pruned.read_bytes())
    assert old.symtab is not None and new.symtab is not None
    rodata_old, rodata_new = old.section(".rodata"), new.section(".rodata")
    assert rodata_old is not None and rodata_new is not None and rodata_old.sh_size == rodata_new.sh_size
    for k in ("k_local.kd", "k_plain.kd", "k_fact.kd"):
        s = old.symtab.get(k)
        assert s is not None
        raw_old = bytes(rodata_old.data)[s.st_value:s.st_value + 64]
        raw_new = bytes(rodata_new.data)[s.st_value:s.st_value + 64]
        assert raw_new == (bytes(64) if k == "k_fact.kd" else raw_old)
    # ld.lld links it with the library, no symbol left undefined
    so = tmp_path / "out.so"
    run_tool([require_tool("ld.lld-19"), "-shared", "--no-undefined", "-o", str(so), str(pruned),
              str(objs[cc]["lib"])])
    assert _note_kernels(so) == ["k_local", "k_plain"]
    assert {"k_local", "k_plain", "fib"} <= _functions(_symbols(so))
    assert not {*gone} & _functions(_symbols(so))


def test_msgpack_remove_elements_keeps_the_header_width() -> None:
    for n in (3, 20):  # fixarray, array16
        doc = msgpack.packb({"amdhsa.kernels": [{".name": f"k{i}"} for i in range(n)], "amdhsa.version": [1, 2]})
        root = parse(doc)
        arr = root.get("amdhsa.kernels")
        assert arr is not None
        out = remove_elements(doc, arr, {0, 2})
        assert msgpack.unpackb(out)["amdhsa.kernels"] == [{".name": f"k{i}"} for i in range(n) if i not in (0, 2)]
        assert msgpack.unpackb(out)["amdhsa.version"] == [1, 2]
        assert out[arr.off] == (0x90 | (n - 2) if n < 16 else 0xDC)
        assert remove_elements(doc, arr, set()) == doc


# --------------------------------------------------------------------------- devbin link -o


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("kernel", sorted(KEEPS))
def test_link_keeps_the_reachable_kernels_only(objs: dict[str, dict[str, Path]], tmp_path: Path, cc: str,
                                               kernel: str) -> None:
    b = objs[cc]
    out = tmp_path / "out.so"
    result = link([b["main"], b["lib"]], kernels=[kernel], output=out)
    assert result.errors == [] and result.output is not None
    g = result.graph
    kept = {g.nodes[k].name for k in result.dce.kept if g.nodes[k].is_function}
    assert kept == KEEPS[kernel]
    # table stays (AMDGPU data is not pruned), so what it holds is left in, and said so
    left = {n for n, _ in result.output.kept_in_output}
    assert left == TABLE - kept
    assert all("something kept still refers to it" in why for _, why in result.output.kept_in_output)
    syms = _symbols(out)
    assert _note_kernels(out) == [kernel]
    assert _functions(syms) == kept | left
    assert not [n for n, (_, ndx) in syms.items() if ndx == "UND" and n]
    usage = {u.kernel: u for u in result.usage}[kernel]
    assert usage.dynamic == (kernel in ("k_local", "k_table")), usage.reasons
    if kernel == "k_local":
        assert any("fib calls itself" in r for r in usage.reasons)
        # the oracle: fib's own relocations name fib's section (llvm-readelf -r)
        assert re.search(r"Relocation section '\.rela\.text\.fib'.*?\.text\.fib \+", _readelf("-r", b["main"]), re.S)


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_variable_read_through_the_got_is_data_not_a_call(objs: dict[str, dict[str, Path]], cc: str) -> None:
    """lib_counter: R_AMDGPU_GOTPCREL32_LO/HI from k_table, an undefined STT_NOTYPE symbol in the
    object (as for an external function); lib defines it as a variable."""
    b = objs[cc]
    rel = _readelf("-r", b["main"])
    assert re.search(r"R_AMDGPU_GOTPCREL32_LO\s+\S+\s+lib_counter", rel)
    assert _symbols(b["main"])["lib_counter"] == ("NOTYPE", "UND")
    result = link([b["main"], b["lib"]], kernels=["k_table"])
    node = result.graph.nodes["k_table"]
    assert "lib_counter" not in node.calls and "lib_counter" in node.data
    assert not [c for c in result.graph.unresolved_calls if c[1] == "lib_counter"]
    facts = function_facts([b["main"].read_bytes(), b["lib"].read_bytes()])
    assert "lib_counter" not in facts["k_table"].calls and "lib_counter" not in facts["k_table"].external_calls
    totals = kernel_totals(facts, ["k_table"])["k_table"]
    assert "lib_counter" not in totals.unresolved
    assert not any("no object defines" in r for r in totals.reasons)


@pytest.mark.parametrize("cc", COMPILERS)
def test_a_unit_that_cannot_be_pruned_keeps_what_it_calls_in_the_others(objs: dict[str, dict[str, Path]],
                                                                       tmp_path: Path, cc: str) -> None:
    """fptr_main without -ffunction-sections: all its code shares .text, so nothing leaves it; what
    its dead code calls or holds in the library (lib_fact, lib_leaf, lib_inc, lib_dbl) must stay too."""
    b = objs[cc]
    out = tmp_path / "out.so"
    result = link([b["main_nofs"], b["lib"]], kernels=["k_plain"], output=out)
    assert result.output is not None
    left = {n for n, _ in result.output.kept_in_output}
    assert {"lib_fact", "lib_leaf", "lib_inc", "lib_dbl", "k_fact", "k_table", "old_helper"} <= left
    assert not [r for r in result.output.removed if r.startswith(b["lib"].name)]
    syms = _symbols(out)
    assert not [n for n, (_, ndx) in syms.items() if ndx == "UND" and n]
    assert {"lib_fact", "lib_leaf"} <= _functions(syms)


def test_prune_object_on_a_relocation_section_for_no_section(objs: dict[str, dict[str, Path]]) -> None:
    """A relocation section whose sh_info names no section is a FormatError, not an IndexError."""
    data = bytearray(objs["clang-19"]["main"].read_bytes())
    elf = ElfFile(bytes(data))
    rela = elf.section(".rela.text.k_table")
    assert rela is not None
    struct.pack_into("<I", data, elf.header.e_shoff + rela.index * 64 + 44, 999)  # sh_info
    with pytest.raises(FormatError, match="applies to section 999"):
        prune_object(bytes(data), {"k_fact"})
