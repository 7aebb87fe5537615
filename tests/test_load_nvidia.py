"""devbin.load with NVIDIA cubins (simulated backend): two relocatable cubins resolve each other.

``kernels.cu``'s ``scale_ext`` calls ``ext_scale``, defined in ``extfn.cu``; both are built
``-rdc=true`` (``cubins`` fixture: nvcc, or ptxas on the committed PTX).  The simulated backend
maps each cubin's global and constant sections (not ``.nv.shared.*``/``.nv.local.*``, which are
per block and per thread), resolves every symbol across cubins, and records the ``R_CUDA_*``
relocations with their resolved addresses for the driver: it does not patch SASS.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devbin.errors import UsageError
from devbin.formats.elf.reader import ElfFile
from devbin.importers import import_code_object
from devbin.load import Executable, SymbolKind, UnresolvedSymbolsError
from devbin.model import FunctionKind


@pytest.fixture()
def exe(cubins: dict[str, Path]) -> Executable:
    e = Executable("sm_90")
    e.load_code_object(cubins["sm_90_rdc"])
    e.load_code_object(cubins["sm_90_extfn_rdc"])
    e.freeze()
    return e


def test_cross_cubin_call_resolves(exe: Executable, cubins: dict[str, Path]) -> None:
    user, lib = exe.code_objects
    ext = exe.symbol("ext_scale")
    assert ext.kind == SymbolKind.DEVICE_FUNCTION and ext.code_object == lib.name and ext.linkage == "program"
    calls = [r for r in user.nv_relocations if r.symbol == "ext_scale"]
    assert calls and all(r.section == ".text.scale_ext" for r in calls)
    assert all(r.address == ext.address and r.target_object == lib.name for r in calls)
    # the bytes mapped for the function are the cubin's .text.ext_scale (SASS is not patched)
    sec = ElfFile(cubins["sm_90_extfn_rdc"].read_bytes()).section(".text.ext_scale")
    assert sec is not None and exe.read(ext.address, ext.size) == bytes(sec.data)[: ext.size]


def test_symbols_carry_the_model(exe: Executable, cubins: dict[str, Path]) -> None:
    model = import_code_object(ElfFile(cubins["sm_90_rdc"].read_bytes()))
    by_name = {s.name: s for s in exe.symbols()}
    for f in model.functions:
        s = by_name[f.name]
        assert s.function == f
        want = {FunctionKind.KERNEL: SymbolKind.KERNEL, FunctionKind.INDIRECT_TARGET: SymbolKind.INDIRECT_FUNCTION,
                FunctionKind.DEVICE: SymbolKind.DEVICE_FUNCTION}[FunctionKind(f.kind)]
        assert s.kind == want, f.name
    k = exe.symbol("scale_ext")
    assert k.kind == SymbolKind.KERNEL and k.code_address == k.address and k.callconv == "kernel"
    assert k.registers["general"] > 0 and k.stack_bytes is not None
    assert {exe.symbol(n).kind for n in ("op_add", "op_mul", "op_sub")} == {SymbolKind.INDIRECT_FUNCTION}
    assert exe.symbol("fact").kind == SymbolKind.DEVICE_FUNCTION
    assert exe.symbol("launch_counter").kind == SymbolKind.VARIABLE
    assert exe.u32(exe.symbol("launch_counter").address) == 0  # .nv.global: zero-filled
    op_table = exe.symbol("op_table")
    uft = [r for r in exe.code_objects[0].nv_relocations if r.section == ".nv.global.init"]
    assert {r.symbol for r in uft} == {"op_add", "op_mul", "op_sub"}  # left for the driver, resolved
    assert all(r.address == exe.symbol(r.symbol).address for r in uft)
    assert op_table.size == 24


def test_unresolved_without_the_library(cubins: dict[str, Path]) -> None:
    e = Executable("sm_90")
    e.load_code_object(cubins["sm_90_rdc"])
    with pytest.raises(UnresolvedSymbolsError) as info:
        e.freeze()
    (u,) = info.value.unresolved  # the weak __UFT* symbols nvlink defines do not count
    assert u.symbol == "ext_scale" and u.needed_by == str(cubins["sm_90_rdc"])
    assert any(site.startswith("scale_ext+") for site in u.sites)


def test_arch_rules(cubins: dict[str, Path]) -> None:
    with pytest.raises(UsageError, match="runs only on major 9"):
        Executable("sm_80").load_code_object(cubins["sm_90_rdc"])
    with pytest.raises(UsageError, match="AMDGPU"):
        Executable("gfx90a").load_code_object(cubins["sm_90_rdc"])
    e = Executable("sm_86")  # sm_80 SASS runs on 8.6
    e.load_code_object(cubins["sm_80_rdc"])
    e.load_code_object(cubins["sm_80_extfn_rdc"])
    e.freeze()
    assert e.symbol("ext_scale").registers


def test_linked_cubin_alone_and_duplicates(cubins: dict[str, Path]) -> None:
    e = Executable("sm_90")
    e.load_code_object(cubins["sm_90_linked"])
    with pytest.raises(UsageError, match="duplicate definition"):
        e.load_code_object(cubins["sm_90_extfn_rdc"])
    e.freeze()
    assert e.symbol("scale_ext").kind == SymbolKind.KERNEL
    assert e.symbol("ext_scale").code_object == str(cubins["sm_90_linked"])


@pytest.mark.parametrize("which", ["sm_90_exec", "sm_90_linked"])
def test_linked_cubin_maps_no_shared_or_local_memory(cubins: dict[str, Path], which: str) -> None:
    """A linked cubin (nvlink, or whole-program ptxas) gives ``.nv.shared.<f>`` the type SHT_NOBITS rather than
    SHT_CUDA_SHARED: per-block memory all the same, never mapped as device-global memory."""
    from devbin.formats.elf import constants as C

    elf = ElfFile(cubins[which].read_bytes())
    shared = [s for s in elf.sections if s.name.startswith(".nv.shared.") and s.sh_size]
    assert shared and all(s.sh_type == C.SHT_NOBITS for s in shared)
    e = Executable("sm_90")
    obj = e.load_code_object(cubins[which])
    e.freeze()
    labels = [p.label for p in obj.index.pieces]
    assert ".nv.global" in labels and not [n for n in labels if n.startswith((".nv.shared.", ".nv.local."))]
    assert e.backend.bytes_mapped == sum(p.mem_size for p in obj.index.pieces)


def _reach(graph_edges: set[tuple[str, str]], root: str) -> set[str]:
    out, todo = {root}, [root]
    while todo:
        f = todo.pop()
        for a, b in graph_edges:
            if a == f and b not in out:
                out.add(b)
                todo.append(b)
    return out


@pytest.mark.parametrize("which", [("sm_90_exec",), ("sm_90_linked",), ("sm_90_rdc", "sm_90_extfn_rdc")])
def test_lazy_cubins_map_what_eager_maps(cubins: dict[str, Path], which: tuple[str, ...]) -> None:
    """Lazy loading of cubins: each kernel's lookup gives eager's symbol, maps its call-graph closure (its
    constant bank 0 and code, the functions it calls, and, as the cubin does not say which function uses
    which variable, the data sections), every mapped byte equal to eager's; adjacent sections map as
    regions of their own."""
    eager = Executable("sm_90")
    for w in which:
        eager.load_code_object(cubins[w])
    eager.freeze()
    edges = {e for w in which for e in import_code_object(ElfFile(cubins[w].read_bytes())).callgraph.direct}
    kernels = [s.name for s in eager.symbols() if s.kind == SymbolKind.KERNEL]
    assert len(kernels) >= 5
    smaller = 0
    for k in kernels:
        lazy = Executable("sm_90", lazy=True)
        for w in which:
            lazy.load_code_object(cubins[w])
        lazy.freeze()
        got = lazy.symbol(k)
        assert got.to_dict() == eager.symbol(k).to_dict()
        loaded = set().union(*(o.loaded_functions for o in lazy.code_objects))
        assert _reach(edges, k) <= loaded
        for region in lazy.backend.regions:
            assert lazy.read(region.start, len(region.data)) == eager.read(region.start, len(region.data)), region.label
        assert lazy.backend.is_mapped(got.address, got.size)
        smaller += lazy.backend.bytes_mapped < eager.backend.bytes_mapped
        relocs = {(r.section, r.offset, r.symbol): r for o in eager.code_objects for r in o.nv_relocations}
        for o in lazy.code_objects:
            for r in o.nv_relocations:
                assert relocs[(r.section, r.offset, r.symbol)] == r
    assert smaller == len(kernels)


@pytest.mark.parametrize("which", ["sm_90_rdc", "sm_90_exec", "sm_90_linked", "sm_80_rdc"])
def test_importer_only_records_equal_whole(cubins: dict[str, Path], which: str) -> None:
    """``import_cubin(only=)`` (what a lazy lookup imports): each record equals the whole import's, the call
    graph's edges, indirect sites and address-taken functions are the whole one's, and so are the prototypes."""
    from devbin.targets.nvidia.importer import import_cubin

    data = cubins[which].read_bytes()
    whole = import_cubin(ElfFile(data))
    assert len(whole.functions) >= 5
    for f in whole.functions:
        part = import_cubin(ElfFile(data), only=frozenset({f.name}))
        assert part.functions == (f,)
        g, w = part.callgraph, whole.callgraph
        assert (g.direct, g.indirect_sites, g.address_taken) == (w.direct, w.indirect_sites, w.address_taken)
        assert set(g.external) <= set(w.external) and part.prototypes == whole.prototypes
        assert part.metadata == whole.metadata and part.target == whole.target
    assert import_cubin(ElfFile(data), only=frozenset()).functions == ()


def _lazy(cubins: dict[str, Path], *which: str) -> Executable:
    e = Executable("sm_90", lazy=True)
    for w in which:
        e.load_code_object(cubins[w])
    e.freeze()
    return e


def test_lazy_relocatable_cubins_load_per_function_data_and_table_targets(cubins: dict[str, Path]) -> None:
    """A relocatable cubin keeps each function's relocations: ``apply_op`` brings the two variables it uses
    (``op_table``, ``launch_counter``) and, since it calls through ``op_table`` with the prototype of
    ``op_add``/``op_mul``/``op_sub`` (``.nv.callgraph``), the three functions the table holds; ``square_all``
    brings ``helper_square`` and no variable; ``scale_ext`` brings ``ext_scale`` and the variable it reads
    from the other cubin, nothing else."""
    e = _lazy(cubins, "sm_90_rdc", "sm_90_extfn_rdc")
    e.symbol("apply_op")
    user, lib = e.code_objects
    assert user.loaded_functions == {"apply_op", "op_add", "op_mul", "op_sub"}
    assert user.loaded_data == {"op_table", "launch_counter"} and not lib.loaded_functions | lib.loaded_data
    for name in ("op_add", "op_mul", "op_sub", "op_table", "launch_counter"):
        s = e.symbol(name)
        assert e.backend.is_mapped(s.address, s.size), name
    table = [r for r in user.nv_relocations if r.section == ".nv.global.init"]
    assert {r.symbol for r in table} == {"op_add", "op_mul", "op_sub"}  # recorded for the driver
    e = _lazy(cubins, "sm_90_rdc", "sm_90_extfn_rdc")
    e.symbol("square_all")
    assert e.code_objects[0].loaded_functions == {"square_all", "helper_square"}
    assert not e.code_objects[0].loaded_data
    e.symbol("scale_ext")
    assert (e.code_objects[1].loaded_functions, e.code_objects[1].loaded_data) == ({"ext_scale"},
                                                                                   {"ext_scale_factor"})


def test_lazy_linked_cubin_loads_table_targets_for_a_matching_call_site(cubins: dict[str, Path]) -> None:
    """A linked cubin keeps no per-function relocations: the first function brings every variable, and the
    functions a loaded variable points at load only with a loaded indirect call site that can reach them."""
    e = _lazy(cubins, "sm_90_linked")
    e.symbol("square_all")
    (obj,) = e.code_objects
    assert obj.loaded_functions == {"square_all", "helper_square"}  # op_table is mapped, no call site matches
    assert {"op_table", "launch_counter", "ext_scale_factor"} <= obj.loaded_data
    e.symbol("apply_op")
    assert {"apply_op", "op_add", "op_mul", "op_sub"} <= obj.loaded_functions
    assert "ext_scale" not in obj.loaded_functions
