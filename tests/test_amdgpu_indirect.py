"""Function pointers, recursion and LLVM 22's ``.llvm.callgraph`` in real AMDGPU code objects.

Built at test time from tests/sources/amdgpu_indirect.cl; the expected calls are
read off that source.  Oracles: llvm-readelf's relocation and symbol listings.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from devbin.analysis.callgraph_view import nodes
from devbin.errors import FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.llvm_callgraph import SHT_LLVM_CALL_GRAPH, read_llvm_callgraph
from devbin.formats.elf.model import ElfModel, RelocSpec, SectionSpec, SymbolSpec
from devbin.formats.elf.reader import ElfFile
from devbin.formats.elf.writer import write
from devbin.model import UNKNOWN_PROTOTYPE, CallGraph, FunctionKind
from devbin.targets.amdgpu import import_amdgpu
from devbin.targets.amdgpu.importer import AMD_LLVM_TYPE_ID

from tests.conftest import SOURCES, require_tool
from tests.runners import run_tool

SRC = SOURCES / "amdgpu_indirect.cl"
CFLAGS = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-c"]
ARCHS = ("gfx90a", "gfx942", "gfx1030", "gfx1100")


@pytest.fixture(scope="module")
def objs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("amdgpu_indirect")
    clang19, clang22 = require_tool("clang-19"), require_tool("clang-22")
    built: dict[str, Path] = {}
    for gfx in ARCHS:
        built[gfx] = out / f"ind.{gfx}.o"
        run_tool([clang19, *CFLAGS, f"-mcpu={gfx}", "-o", str(built[gfx]), str(SRC)])
    built["cg22"] = out / "ind.cg22.o"
    run_tool([clang22, *CFLAGS, "-mcpu=gfx90a", "-fexperimental-call-graph-section", "-o",
              str(built["cg22"]), str(SRC)])
    built["cg22_so"] = out / "ind.cg22.so"
    run_tool([require_tool("ld.lld-19"), "-shared", "-o", str(built["cg22_so"]), str(built["cg22"])])
    return built


def _elf(p: Path) -> ElfFile:
    return ElfFile(p.read_bytes())


def _user_functions(names: set[str]) -> set[str]:
    # clang-22 adds a callable body __clang_ocl_kern_imp_<kernel> for every OpenCL kernel.
    return {n for n in names if not n.startswith("__clang_ocl_kern_imp_")}


@pytest.mark.parametrize("key", [*ARCHS, "cg22"])
def test_callgraph_matches_source(objs: dict[str, Path], key: str) -> None:
    co = import_amdgpu(_elf(objs[key]))
    cg = co.callgraph
    direct = {(a, b) for a, b in cg.direct if not a.startswith("__clang_ocl_kern_imp_")}
    assert direct == {("fib_kernel", "fib"), ("fib", "fib")}
    assert {n for n, _ in cg.address_taken} == {"add_one", "twice"}
    assert all(p == UNKNOWN_PROTOTYPE for _, p in cg.address_taken)
    kinds = {f.name: f.kind for f in co.functions}
    assert kinds["add_one"] == kinds["twice"] == FunctionKind.INDIRECT_TARGET
    assert kinds["not_taken"] == kinds["fib"] == FunctionKind.DEVICE
    assert kinds["apply_table"] == kinds["fib_kernel"] == FunctionKind.KERNEL
    assert not cg.external
    # The nvlink-style view marks the address-taken functions with '&'.
    taken = {n.name for n in nodes(co) if n.address_taken}
    assert taken == {"add_one", "twice"}


def _callgraph_relocations(obj: Path) -> list[str]:
    """Symbol names of the .rela.llvm.callgraph entries, in offset order, per llvm-readelf-22."""
    text = run_tool([require_tool("llvm-readelf-22"), "-r", str(obj)]).stdout
    block = text.split("'.rela.llvm.callgraph'", 1)[1].split("Relocation section", 1)[0]
    rows = re.findall(r"^([0-9a-f]{16})\s+\S+\s+R_AMDGPU_ABS64\s+[0-9a-f]+\s+(\S+) \+ 0$", block, re.M)
    return [name for _, name in sorted(rows)]


def _func_symbols(p: Path) -> dict[str, int]:
    text = run_tool([require_tool("llvm-readelf-22"), "-s", str(p)]).stdout
    rows = re.findall(r"^\s*\d+: ([0-9a-f]+)\s+\d+ FUNC\s+\S+\s+\S+\s+\d+ (\S+)$", text, re.M)
    return {name: int(value, 16) for value, name in rows}


def test_llvm_callgraph_section(objs: dict[str, Path]) -> None:
    recs = read_llvm_callgraph(_elf(objs["cg22"]))
    # One record per function, in the order (and for the symbols) of the section's relocations.
    assert [r.function for r in recs] == _callgraph_relocations(objs["cg22"])
    assert all(r.version == 0 and r.indirect_target for r in recs)  # LLVM: every non-local function
    tid = {r.function: r.type_id for r in recs}
    assert tid["add_one"] == tid["twice"] == tid["fib"]  # all int(int)
    assert tid["not_taken"] != tid["add_one"]  # float(float)
    assert tid["apply_table"] != tid["add_one"]
    co = import_amdgpu(_elf(objs["cg22"]))
    for r in recs:
        f = co.function(r.function or "")
        assert f is not None and f.uint(AMD_LLVM_TYPE_ID) == r.type_id
    # The record flag does not make every function address-taken.
    assert {n for n, _ in co.callgraph.address_taken} == {"add_one", "twice"}


def test_llvm_callgraph_in_linked_object(objs: dict[str, Path]) -> None:
    # ld.lld applies the ABS64 relocations: the records hold addresses, which name the same functions.
    so, obj = read_llvm_callgraph(_elf(objs["cg22_so"])), read_llvm_callgraph(_elf(objs["cg22"]))
    assert [(r.function, r.type_id) for r in so] == [(r.function, r.type_id) for r in obj]
    syms = _func_symbols(objs["cg22_so"])
    assert all(r.function is not None and syms[r.function] == r.address for r in so)


def test_clang19_writes_no_llvm_callgraph(objs: dict[str, Path]) -> None:
    assert read_llvm_callgraph(_elf(objs["gfx90a"])) == ()


def test_unknown_prototypes_match_conservatively() -> None:
    # What a consumer sees when it learns that apply_table calls indirectly (e.g. LLVM 20+ has_indirect_call):
    cg = CallGraph(indirect_sites=(("apply_table", UNKNOWN_PROTOTYPE),),
                   address_taken=(("add_one", UNKNOWN_PROTOTYPE), ("twice", UNKNOWN_PROTOTYPE)))
    assert cg.callees("apply_table") == ("add_one", "twice")
    assert cg.callees("apply_table", indirect=False) == ()


def _synthetic(body: bytes, *, elfclass: int = C.ELFCLASS64, little: bool = True,
               relocs: list[RelocSpec] | None = None) -> ElfFile:
    m = ElfModel(elfclass=elfclass, little=little, e_type=C.ET_REL, machine=C.EM_X86_64)
    m.sections = [SectionSpec(".text", flags=C.SHF_ALLOC | C.SHF_EXECINSTR, data=bytes(48), align=16),
                  SectionSpec(".llvm.callgraph", sh_type=SHT_LLVM_CALL_GRAPH, data=body, link=".text")]
    m.symbols = [SymbolSpec("f", 0, 16, type=C.STT_FUNC, section=".text"),
                 SymbolSpec("g", 16, 16, type=C.STT_FUNC, section=".text"),
                 SymbolSpec("h", 32, 16, bind=C.STB_LOCAL, type=C.STT_FUNC, section=".text")]
    if relocs:
        m.relocations = {".llvm.callgraph": relocs}
    return ElfFile(write(m))


def test_llvm_callgraph_layout_structural() -> None:
    # f: direct callees g and h (h through the section symbol + addend), indirect calls of type 0x77;
    # g: indirect target with type id 0x55.  Pointers are 0 on disk with relocations, as in a .o.
    f = b"\x00\x06" + bytes(8) + struct.pack("<Q", 0) + b"\x02" + bytes(16) + b"\x01" + struct.pack("<Q", 0x77)
    g = b"\x00\x01" + bytes(8) + struct.pack("<Q", 0x55)
    relocs = [RelocSpec(2, "f", 1), RelocSpec(19, "g", 1), RelocSpec(27, "h", 1), RelocSpec(len(f) + 2, "g", 1)]
    recs = read_llvm_callgraph(_synthetic(f + g, relocs=relocs))
    assert [(r.function, r.flags, r.type_id, r.direct_callees, r.indirect_type_ids) for r in recs] == [
        ("f", 6, 0, ("g", "h"), (0x77,)), ("g", 1, 0x55, (), ())]
    # ELF32 big-endian: 4-byte pointers in the file's byte order; a linked-style address names the function.
    be = b"\x00\x01" + struct.pack(">I", 0) + struct.pack(">Q", 9)
    recs = read_llvm_callgraph(_synthetic(be, elfclass=C.ELFCLASS32, little=False))
    assert [(r.function, r.type_id) for r in recs] == [(None, 9)]  # ET_REL without relocation: no name
    # An unknown record version ends the section; a cut record or unknown flags are errors.
    only_g = read_llvm_callgraph(_synthetic(g))
    assert len(only_g) == 1 and read_llvm_callgraph(_synthetic(g + b"\x07junk")) == only_g
    for bad in (g[:-1], b"\x00\x09" + bytes(16), b"\x00\x02" + bytes(16) + b"\xff\x01"):
        with pytest.raises(FormatError):
            read_llvm_callgraph(_synthetic(bad))
