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
