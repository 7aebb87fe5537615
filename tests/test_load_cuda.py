"""The CUDA driver backend (``devbin.targets.nvidia.load_cuda``).

Without a GPU: the missing-dependency error, argument building for the load-time link, and
the device-side function table's PTX (assembled by the real ``ptxas``).  With a GPU (skipped,
with the reason, when there is no ``libcuda``, no device or no ``cuda-bindings`` -- also under
CI, whose machines have none): the two relocatable cubins linked by the driver, the kernel
launched, device-function addresses read through the table, ``cuFuncGetAttribute`` equal to
devbin's model, and ``CUDA_MODULE_LOADING=LAZY`` against ``EAGER``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_tool
from devbin.errors import UsageError
from devbin.formats.elf.reader import ElfFile
from devbin.targets.nvidia import load_cuda as lc

from tests.runners import cli, run_tool


def test_missing_bindings_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("cuda", "cuda.bindings", "cuda.bindings.driver", "cuda.cuda"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(UsageError, match=r"pip install devbin\[cuda\]"):
        lc.driver()


def test_cli_backend_cuda_without_bindings(cubins: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:

    for name in ("cuda", "cuda.bindings", "cuda.bindings.driver", "cuda.cuda"):
        monkeypatch.setitem(sys.modules, name, None)
    rc = cli("load", "--backend", "cuda", str(cubins["sm_90_rdc"]), str(cubins["sm_90_extfn_rdc"]))[0]
    assert rc == 1 and "pip install devbin[cuda]" in capsys.readouterr().err


def test_link_inputs(cubins: dict[str, Path]) -> None:
    user, lib, exe = (cubins[k].read_bytes() for k in ("sm_90_rdc", "sm_90_extfn_rdc", "sm_90_exec"))
    table = lc.function_table_ptx("sm_90", [("ext_scale", "(.param .b32 r)", "(.param .b32 x)")])
    ins = lc.link_inputs([("user", user), ("lib", lib)], table)
    assert [(i.kind, i.jit_type, i.name) for i in ins] == [("cubin", 0, "user"), ("cubin", 0, "lib"),
                                                           ("ptx", 1, "<__devbin_fn_table>")]
    assert ins[2].data.endswith(b"\0")  # the driver reads PTX as a C string
    assert lc.needs_link(ins)
    assert not lc.needs_link(lc.link_inputs([("exe", exe)]))  # one executable cubin loads as is
    assert lc.needs_link(lc.link_inputs([("user", user)]))  # a relocatable one is linked
    with pytest.raises(UsageError, match="not a cubin, fatbin or PTX"):
        lc.link_inputs([("junk", b"junk")])


def test_function_table_ptx_assembles(tmp_path: Path) -> None:
    ptxas = require_tool("ptxas")
    ptx = lc.function_table_ptx("sm_90", [("ext_scale", "(.param .b32 r)", "(.param .b32 x)"),
                                          ("helper", "", "()")])
    src, out = tmp_path / "table.ptx", tmp_path / "table.cubin"
    src.write_text(ptx)
    run_tool([ptxas, "-arch=sm_90", "-c", "-o", out, src])
    elf = ElfFile(out.read_bytes())
    names = {s.name for s in elf.symtab or ()}
    assert {"__devbin_fn_table", "ext_scale", "helper"} <= names
    relocs = [r for t in elf.relocation_tables.values() for r in t]
    assert len(relocs) == 2  # one address per table slot, filled in by the driver's link
    with pytest.raises(UsageError, match="PTX identifier"):
        lc.function_table_ptx("sm_90", [("bad name", "", "()")])
    with pytest.raises(UsageError, match="NVIDIA arch"):
        lc.function_table_ptx("gfx90a", [])


def test_function_table_links_with_the_images(cubins: dict[str, Path], tmp_path: Path) -> None:
    """What the driver's load-time link does with the table, done by ``nvlink`` (the same linker, offline):
    the table links with the two relocatable cubins, its slot is a 64-bit address relocation against the
    library's device function, and devbin's simulated backend resolves that slot to the function's address
    (the driver writes it when it loads the result)."""
    ptxas, nvlink = require_tool("ptxas"), require_tool("nvlink")
    from devbin.load import Executable

    src, table, linked = tmp_path / "table.ptx", tmp_path / "table.cubin", tmp_path / "linked.cubin"
    src.write_text(lc.function_table_ptx("sm_90", [("ext_scale", "(.param .b32 r)", "(.param .b32 x)")]))
    run_tool([ptxas, "-arch=sm_90", "-c", "-o", table, src])
    run_tool([nvlink, "-arch=sm_90", "-o", linked, cubins["sm_90_rdc"], cubins["sm_90_extfn_rdc"], table])
    e = Executable("sm_90")
    obj = e.load_code_object(linked)
    e.freeze()
    slot = e.symbol(lc.TABLE_SYMBOL)
    assert slot.size == 8 and slot.section == ".nv.global.init"
    (r,) = [r for r in obj.nv_relocations if r.section == slot.section and r.offset == slot.offset]
    assert r.symbol == "ext_scale" and r.type_name == "R_CUDA_64" and r.addend == 0
    assert r.address == e.symbol("ext_scale").address


def test_driver_errors_are_usage_errors() -> None:
    class Fake:
        @staticmethod
        def cuGetErrorName(err: int) -> tuple[int, bytes]:
            return 0, b"CUDA_ERROR_NOT_FOUND"

    assert lc._check(Fake, (0, 7), "ok") == 7
    with pytest.raises(UsageError, match="cuModuleGetFunction helper: CUDA_ERROR_NOT_FOUND"):
        lc._check(Fake, (500,), "cuModuleGetFunction helper")


# ----------------------------------------------------------------------------- on a GPU


def _gpu_or_skip() -> str:
    path = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        pytest.skip("no CUDA driver (libcuda) on this machine: the CUDA backend's GPU tests run on a GPU machine")
    if lib.cuInit(0) != 0:
        pytest.skip("the CUDA driver is present but cuInit fails (no usable GPU)")
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        pytest.skip("the CUDA driver finds no GPU")
    try:
        lc.driver()
    except UsageError as e:
        pytest.skip(str(e))
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    lib.cuDeviceGetAttribute(ctypes.byref(major), 75, 0)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0)
    return f"sm_{major.value}{minor.value}"


def test_gpu_link_launch_and_resources(cubins: dict[str, Path]) -> None:
    arch = _gpu_or_skip()
    if arch != "sm_90":
        pytest.skip(f"the fixture cubins are sm_90; this GPU is {arch}")
    from devbin.load import Executable

    sim = Executable("sm_90")
    sim.load_code_object(cubins["sm_90_rdc"])
    sim.load_code_object(cubins["sm_90_extfn_rdc"])
    sim.freeze()
    images = lc.read_images([cubins["sm_90_rdc"], cubins["sm_90_extfn_rdc"]])
    exe = lc.CudaExecutable(images, arch="sm_90",
                            device_functions=[("ext_scale", "(.param .b32 r)", "(.param .b32 x)")])
    try:
        addrs = exe.device_function_addresses()
        assert addrs["ext_scale"] != 0
        kernels = sim.symbols()
        assert exe.compare_resources(kernels) == []
        cu = exe.cu
        n = 32
        dptr = lc._check(cu, cu.cuMemAlloc(4 * n), "cuMemAlloc")
        host = (ctypes.c_float * n)(*range(n))
        lc._check(cu, cu.cuMemcpyHtoD(dptr, host, 4 * n), "cuMemcpyHtoD")
        exe.launch("scale_ext", (1, 1, 1), (n, 1, 1), [ctypes.c_int(n), ctypes.c_void_p(int(dptr))])
        lc._check(cu, cu.cuMemcpyDtoH(host, dptr, 4 * n), "cuMemcpyDtoH")
        assert list(host)[:4] == [0.0, 2.5, 5.0, 7.5]  # ext_scale: x * 2.5, from the other cubin
        cu.cuMemFree(dptr)
    finally:
        exe.close()


def test_gpu_module_loading_lazy_vs_eager(cubins: dict[str, Path]) -> None:
    _gpu_or_skip()
    code = ("import time, sys; from devbin.targets.nvidia import load_cuda as lc; t=time.perf_counter(); "
            f"e=lc.CudaExecutable(lc.read_images([{str(cubins['sm_90_exec'])!r}]), arch='sm_90'); "
            "e.function('scale_ext'); print(time.perf_counter()-t); e.close()")
    times = {}
    for mode in ("LAZY", "EAGER"):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "CUDA_MODULE_LOADING": mode})
        times[mode] = float(p.stdout.split()[-1])
    print(f"CUDA_MODULE_LOADING: {times}")
    assert all(t > 0 for t in times.values())
