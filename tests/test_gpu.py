"""On a machine with an NVIDIA GPU: what devbin selects is what the CUDA driver loads, and pruned programs run.

Skipped, with the reason, when there is no CUDA driver (``libcuda``) or no GPU -- also under
``CI``, whose machines have none (the other tests' rule that a missing tool fails in CI does
not apply: a GPU is not a tool that can be installed).  nvcc must be present to build.

* a fatbin whose images (SASS for several archs, PTX for two virtual archs) each write a
  different tag is loaded with ``cuModuleLoadData`` and launched; the tag written must be
  the image ``devbin.select(fatbin, present_sm)`` chose;
* an nvcc program pruned to the arch devbin selects for this GPU runs its kernel; pruned to
  an arch the selection rejects, the launch fails.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

import pytest

import devbin
from devbin.packaging import PackInput, pack
from devbin.packaging.pruning import prune_file
from devbin.packaging.selection import REJECTED

from tests.conftest import require_tool
from tests.runners import run_tool

_ATTR_CC_MAJOR, _ATTR_CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR

TAG_KERNEL = r"""
extern "C" __global__ void tag(int *out) { *out = TAG; }
"""

# (nvcc flags, tag): each image of the test fatbin writes its own tag.
IMAGES = {
    "sm_75": (["-cubin", "-arch=sm_75"], 75),
    "sm_80": (["-cubin", "-arch=sm_80"], 80),
    "sm_90": (["-cubin", "-arch=sm_90"], 90),
    "compute_75": (["-ptx", "-arch=compute_75"], 1075),
    "compute_80": (["-ptx", "-arch=compute_80"], 1080),
}

PROGRAM = r"""
#include <cstdio>
__global__ void k(int *p) { p[threadIdx.x] = threadIdx.x * 3; }
int main() {
    int *d;
    if (cudaMalloc(&d, 64) != cudaSuccess) return 2;
    k<<<1, 16>>>(d);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    printf("%s\n", cudaGetErrorName(e));
    return e == cudaSuccess ? 0 : 1;
}
"""
GENCODE = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]


class _Cuda:
    """The few driver API calls the tests need, through ctypes."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib

    def check(self, name: str, *args: object) -> None:
        rc = getattr(self.lib, name)(*args)
        if rc != 0:
            raise RuntimeError(f"{name} failed with CUresult {rc}")


def _driver() -> tuple[_Cuda, ctypes.c_int, str]:
    """The driver, device 0 and its ``sm_XY`` name; skips (never fails) when there is none."""
    path = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        pytest.skip("no CUDA driver (libcuda) on this machine: the GPU tests run on a GPU machine")
    if lib.cuInit(0) != 0:
        pytest.skip("the CUDA driver is present but cuInit fails (no usable GPU)")
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        pytest.skip("the CUDA driver finds no GPU")
    cu = _Cuda(lib)
    dev = ctypes.c_int(0)
    cu.check("cuDeviceGet", ctypes.byref(dev), 0)
    major, minor = ctypes.c_int(0), ctypes.c_int(0)
    cu.check("cuDeviceGetAttribute", ctypes.byref(major), _ATTR_CC_MAJOR, dev)
    cu.check("cuDeviceGetAttribute", ctypes.byref(minor), _ATTR_CC_MINOR, dev)
    return cu, dev, f"sm_{major.value}{minor.value}"


@pytest.fixture(scope="module")
def gpu() -> tuple[_Cuda, ctypes.c_int, str]:
    return _driver()


def _nvcc(cwd: Path, *args: str) -> None:
    run_tool([require_tool("nvcc"), *args], cwd)


def _run_tag(cu: _Cuda, dev: ctypes.c_int, image: bytes) -> int:
    """Load ``image`` with cuModuleLoadData, launch ``tag`` once and return what it wrote."""
    ctx = ctypes.c_void_p()
    cu.check("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
    try:
        cu.check("cuCtxSetCurrent", ctx)
        buf = ctypes.create_string_buffer(image, len(image) + 1)  # PTX needs its NUL; harmless for a fatbin
        module = ctypes.c_void_p()
        cu.check("cuModuleLoadData", ctypes.byref(module), buf)
        try:
            func = ctypes.c_void_p()
            cu.check("cuModuleGetFunction", ctypes.byref(func), module, b"tag")
            dptr = ctypes.c_uint64(0)
            cu.check("cuMemAlloc_v2", ctypes.byref(dptr), ctypes.c_size_t(4))
            try:
                cu.check("cuMemsetD32_v2", dptr, ctypes.c_uint(0xFFFFFFFF), ctypes.c_size_t(1))
                params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(dptr), ctypes.c_void_p))
                cu.check("cuLaunchKernel", func, 1, 1, 1, 1, 1, 1, 0, None, params, None)
                cu.check("cuCtxSynchronize")
                out = ctypes.c_int(0)
                cu.check("cuMemcpyDtoH_v2", ctypes.byref(out), dptr, ctypes.c_size_t(4))
                return out.value
            finally:
                cu.lib.cuMemFree_v2(dptr)
        finally:
            cu.lib.cuModuleUnload(module)
    finally:
        cu.lib.cuDevicePrimaryCtxRelease(dev)


def test_driver_loads_the_image_devbin_selects(gpu: tuple[_Cuda, ctypes.c_int, str], tmp_path: Path) -> None:
    cu, dev, sm = gpu
    (tmp_path / "tag.cu").write_text(TAG_KERNEL)
    inputs = []
    for arch, (flags, tag) in IMAGES.items():
        out = f"tag.{arch}.{'ptx' if arch.startswith('compute') else 'cubin'}"
        _nvcc(tmp_path, *flags, f"-DTAG={tag}", "-o", out, "tag.cu")
        inputs.append(PackInput((tmp_path / out).read_bytes(), out))
    fatbin = pack(inputs, format="fatbin", ptx="all").data
    sel = devbin.select(fatbin, sm, strict=False)
    got = _run_tag(cu, dev, fatbin)
    if sel.chosen is None:
        pytest.fail(f"devbin selects nothing for {sm}, but the driver ran the image with tag {got}")
    assert got == IMAGES[sel.chosen.arch][1], (sm, sel.chosen.arch, got)
    assert sel.jit == sel.chosen.arch.startswith("compute_")


def test_pruned_program_runs_its_kernel(gpu: tuple[_Cuda, ctypes.c_int, str], tmp_path: Path) -> None:
    _, _, sm = gpu
    (tmp_path / "k.cu").write_text(PROGRAM)
    _nvcc(tmp_path, *GENCODE, "k.cu", "-o", "k.exe")
    exe = tmp_path / "k.exe"
    sel = devbin.select(exe, sm, strict=False)
    if sel.chosen is None:
        pytest.skip(f"the test program has no image for {sm} (sm_80, sm_90, compute_90)")
    chosen = sel.chosen.arch
    keep = tmp_path / "keep.exe"
    prune_file(exe, keep, keep=chosen)
    res = run_tool([str(keep)], check=False)
    assert (res.returncode, res.stdout.strip()) == (0, "cudaSuccess"), res.stdout + res.stderr
    # Pruned to an image the selection rejects for this GPU, the launch finds no image.
    rejected = [c.arch for c in sel.candidates if c.verdict == REJECTED and c.arch != chosen]
    if rejected:
        other = tmp_path / "other.exe"
        prune_file(exe, other, keep=rejected[0])
        res = run_tool([str(other)], check=False)
        assert res.returncode != 0 and "cudaSuccess" not in res.stdout, (rejected[0], res.stdout)


def test_pruned_shared_library_runs_its_kernel(gpu: tuple[_Cuda, ctypes.c_int, str], tmp_path: Path) -> None:
    """A shared library that prune shrank by whole pages (tests/test_prune_linked.py) still launches its kernel,
    through the wrapper and relocation prune moved, from a program linked against it."""
    from tests.test_prune_linked import ARCHS, LIB_CU

    _, _, sm = gpu
    (tmp_path / "lib.cu").write_text(LIB_CU)
    _nvcc(tmp_path, *ARCHS, "-shared", "-Xcompiler", "-fPIC", "lib.cu", "-o", "libfull.so")
    sel = devbin.select(tmp_path / "libfull.so", sm, strict=False)
    if sel.chosen is None:
        pytest.skip(f"the test library has no image for {sm} (sm_75, sm_80, sm_90, compute_90)")
    result = prune_file(tmp_path / "libfull.so", tmp_path / "libk.so", keep=sel.chosen.arch)
    assert result.file_bytes_saved > 0
    (tmp_path / "use.cu").write_text(
        'extern "C" int launch_a(float *p);\n#include <cstdio>\n'
        "int main() { float *d; cudaMalloc(&d, 1 << 16); int rc = launch_a(d);\n"
        '  printf("%s\\n", cudaGetErrorName((cudaError_t)rc)); return rc; }\n')
    _nvcc(tmp_path, "use.cu", "-o", "use.exe", "-L.", "-lk", "-Xlinker", "-rpath,$ORIGIN")
    res = run_tool([str(tmp_path / "use.exe")], check=False)
    assert (res.returncode, res.stdout.strip()) == (0, "cudaSuccess"), res.stdout + res.stderr
