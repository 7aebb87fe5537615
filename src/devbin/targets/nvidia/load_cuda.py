"""A CUDA driver backend for :mod:`devbin.load`: the same code objects, loaded by the real driver.

Uses NVIDIA's ``cuda-bindings`` (an optional dependency: ``pip install devbin[cuda]``),
imported on first use.  What the driver offers, and what this module does with it
(reference ``nvidia-formats.md`` §5):

* ``cuLibraryLoadData`` (CUDA 12.0+, context-independent "libraries") loads a cubin, fatbin
  or PTX.  Relocatable cubins (``-rdc``) that reference each other are first linked at load
  time with ``cuLinkCreate``/``cuLinkAddData``/``cuLinkComplete`` (the driver's own nvlink),
  so a device-function library and a user's object resolve each other; the linked cubin is
  then loaded with ``cuLibraryLoadData``.
* Kernels: ``cuLibraryGetKernel`` -> ``cuKernelGetFunction`` (``cuLibraryGetModule`` +
  ``cuModuleGetFunction`` is equivalent).  Variables: ``cuLibraryGetGlobal`` (address, size).
* **Device functions have no driver query**: ``cuModuleGetFunction``/``cuLibraryGetKernel``
  find only ``.entry`` functions (a non-kernel gives ``CUDA_ERROR_NOT_FOUND``).  Their
  addresses are read from a *device-side table*: a small PTX module (:func:`function_table_ptx`)
  defining ``__devbin_fn_table`` initialised with the functions' addresses is linked with the
  images; ``cuLibraryGetGlobal`` + ``cuMemcpyDtoH`` read it back.
* ``cuFuncGetAttribute`` (``NUM_REGS``, ``LOCAL_SIZE_BYTES``, ``SHARED_SIZE_BYTES``) is
  compared with devbin's model of the same cubins (:meth:`CudaExecutable.compare_resources`).
* ``CUDA_MODULE_LOADING=LAZY`` (default since 12.2) / ``EAGER`` choose the driver's own lazy
  loading; the GPU test times both beside devbin's simulated lazy loading.

Everything that does not need a GPU (argument building, the table's PTX, the error when the
package is missing) is a plain function, tested without one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devbin.errors import UsageError
from devbin.formats.fatbin.constants import FATBIN_MAGIC_BYTES
from devbin.load.executable import Executable
from devbin.model import StdAttr
from devbin.targets.nvidia.archs import try_parse_arch

__all__ = ["CudaExecutable", "JIT_INPUT", "LinkInput", "driver", "function_table_ptx", "driver_report", "link_inputs"]

INSTALL_HINT = "the CUDA backend needs NVIDIA's cuda-bindings: pip install devbin[cuda]"

#: ``CUjitInputType`` values (cuda.h): what ``cuLinkAddData`` is told each input is.
JIT_INPUT = {"cubin": 0, "ptx": 1, "fatbin": 2, "object": 3, "library": 4}
TABLE_SYMBOL = "__devbin_fn_table"


def driver() -> Any:
    """The ``cuda.bindings.driver`` module (or the older ``cuda.cuda``); UsageError naming the extra if absent."""
    import importlib

    for name in ("cuda.bindings.driver", "cuda.cuda"):  # cuda-bindings >= 12.6; cuda-python < 12.6
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise UsageError(INSTALL_HINT, fmt="cuda")


def _check(cu: Any, result: Any, what: str) -> Any:
    """Unpack a cuda-bindings result tuple ``(CUresult, values...)``; UsageError naming the driver's error."""
    res = result if isinstance(result, tuple) else (result,)
    err = res[0]
    if int(err) != 0:
        name = cu.cuGetErrorName(err)
        word = name[1].decode() if isinstance(name, tuple) and len(name) > 1 and int(name[0]) == 0 else str(int(err))
        raise UsageError(f"{what}: {word}", fmt="cuda", value=int(err))
    rest = res[1:]
    return rest[0] if len(rest) == 1 else rest


@dataclass(frozen=True, slots=True)
class LinkInput:
    """One ``cuLinkAddData`` call: ``kind`` (a :data:`JIT_INPUT` key), the bytes and a name for messages."""

    kind: str
    data: bytes
    name: str

    @property
    def jit_type(self) -> int:
        return JIT_INPUT[self.kind]


def _kind_of(data: bytes) -> str:
    if data[:4] == b"\x7fELF":
        return "cubin"
    if data[:4] == FATBIN_MAGIC_BYTES:
        return "fatbin"
    if b".version" in data[:4096] and b".target" in data[:8192]:
        return "ptx"
    raise UsageError("not a cubin, fatbin or PTX the CUDA driver loads", fmt="cuda")


def link_inputs(images: Sequence[tuple[str, bytes]], table_ptx: str | None = None) -> list[LinkInput]:
    """The inputs, in order, for one load-time link: each image by its kind, then the function table's PTX.

    The driver links when there is more than one input or a relocatable cubin (``ET_REL``);
    a single executable cubin is loaded as is (:func:`needs_link`).
    """
    out = [LinkInput(_kind_of(data), data, name) for name, data in images]
    if table_ptx is not None:
        out.append(LinkInput("ptx", table_ptx.encode() + b"\0", f"<{TABLE_SYMBOL}>"))
    return out


def needs_link(inputs: Sequence[LinkInput]) -> bool:
    if len(inputs) != 1:
        return True
    i = inputs[0]
    return i.kind == "cubin" and int.from_bytes(i.data[16:18], "little") == 1  # ET_REL


def function_table_ptx(arch: str, functions: Sequence[tuple[str, str, str]]) -> str:
    """PTX defining ``__devbin_fn_table``: the addresses of ``functions``, in order, for the driver to link
    with the images.  Each is (name, PTX return list or "", PTX parameter list), as the function's own
    PTX declares it: ``("lib_scale", "(.param .b32 r)", "(.param .b32 x)")``."""
    nv = try_parse_arch(arch)
    if nv is None:
        raise UsageError(f"not an NVIDIA arch: {arch!r}", fmt="cuda")
    sm = nv.sm
    lines = [".version 7.8", f".target sm_{sm}", ".address_size 64", ""]
    for name, ret, params in functions:
        if not name or not name.replace("_", "a").replace("$", "a").isalnum() or name[0].isdigit():
            raise UsageError(f"not a PTX identifier: {name!r}", fmt="cuda")
        lines.append(f".extern .func {ret + ' ' if ret else ''}{name}{params or '()'};")
    inits = ", ".join(n for n, _, _ in functions) or "0"
    lines.append(f".visible .global .align 8 .u64 {TABLE_SYMBOL}[{max(len(functions), 1)}] = {{{inits}}};")
    return "\n".join(lines) + "\n"


class CudaExecutable:
    """The images of one executable, loaded by the CUDA driver on device 0 (needs a GPU).

    ``images``: (name, bytes) of cubins/fatbins/PTX; ``device_functions``: names whose
    addresses to read through the device-side table (with their PTX parameter lists).
    """

    def __init__(self, images: Sequence[tuple[str, bytes]], *, arch: str,
                 device_functions: Sequence[tuple[str, str, str]] = ()) -> None:
        self.cu = cu = driver()
        _check(cu, cu.cuInit(0), "cuInit")
        self.device = _check(cu, cu.cuDeviceGet(0), "cuDeviceGet")
        self.context = _check(cu, cu.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        _check(cu, cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.device_functions = tuple(device_functions)
        table = function_table_ptx(arch, self.device_functions) if self.device_functions else None
        self.inputs = link_inputs(images, table)
        image = self._link() if needs_link(self.inputs) else self.inputs[0].data
        self.library = _check(cu, cu.cuLibraryLoadData(image, None, None, 0, None, None, 0), "cuLibraryLoadData")

    def _link(self) -> bytes:
        cu = self.cu
        state = _check(cu, cu.cuLinkCreate(0, [], []), "cuLinkCreate")
        try:
            for i in self.inputs:
                _check(cu, cu.cuLinkAddData(state, cu.CUjitInputType(i.jit_type), i.data, len(i.data),
                                            i.name.encode(), 0, [], []), f"cuLinkAddData {i.name}")
            ptr, size = _check(cu, cu.cuLinkComplete(state), "cuLinkComplete")
            import ctypes

            return ctypes.string_at(int(ptr), int(size))  # owned by the link state: copy before destroying it
        finally:
            cu.cuLinkDestroy(state)

    def function(self, kernel: str) -> Any:
        cu = self.cu
        k = _check(cu, cu.cuLibraryGetKernel(self.library, kernel.encode()), f"cuLibraryGetKernel {kernel}")
        return _check(cu, cu.cuKernelGetFunction(k), f"cuKernelGetFunction {kernel}")

    def global_address(self, name: str) -> tuple[int, int]:
        dptr, size = _check(self.cu, self.cu.cuLibraryGetGlobal(self.library, name.encode()),
                            f"cuLibraryGetGlobal {name}")
        return int(dptr), int(size)

    def device_function_addresses(self) -> dict[str, int]:
        """Each device function's address, read from ``__devbin_fn_table`` (the driver has no query for them)."""
        if not self.device_functions:
            return {}
        addr, size = self.global_address(TABLE_SYMBOL)
        buf = bytearray(size)
        _check(self.cu, self.cu.cuMemcpyDtoH(buf, addr, size), "cuMemcpyDtoH")
        return {n: int.from_bytes(buf[8 * i: 8 * i + 8], "little") for i, (n, _, _) in enumerate(self.device_functions)}

    def attributes(self, kernel: str) -> dict[str, int]:
        """``cuFuncGetAttribute``: registers, local (per thread) and static shared memory bytes."""
        cu = self.cu
        f = self.function(kernel)
        A = cu.CUfunction_attribute
        return {"registers": int(_check(cu, cu.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_NUM_REGS, f), "attr")),
                "local": int(_check(cu, cu.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f), "attr")),
                "shared": int(_check(cu, cu.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), "attr"))}

    def launch(self, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int],
               args: Sequence[Any] = (), shared: int = 0) -> None:
        """Launch and wait.  ``args``: ctypes values (e.g. ``ctypes.c_void_p(dptr)``, ``ctypes.c_int(3)``)."""
        import ctypes

        cu = self.cu
        f = self.function(kernel)
        ptrs = (ctypes.c_void_p * max(len(args), 1))(*(ctypes.addressof(a) for a in args))
        _check(cu, cu.cuLaunchKernel(f, *grid, *block, shared, 0, ctypes.addressof(ptrs) if args else 0, 0),
               f"cuLaunchKernel {kernel}")
        _check(cu, cu.cuCtxSynchronize(), "cuCtxSynchronize")

    def compare_resources(self, symbols: Sequence[Any]) -> list[str]:
        """Differences between devbin's model (``LoadedSymbol`` kernels) and ``cuFuncGetAttribute``; [] when equal."""
        out = []
        for s in symbols:
            if s.kind.word != "kernel" or s.function is None:
                continue
            got = self.attributes(s.name)
            want = {"registers": s.function.uint(StdAttr.REGS_GENERAL),
                    "local": s.function.uint(StdAttr.PRIVATE_BYTES),
                    "shared": s.function.uint(StdAttr.SHARED_BYTES)}
            for k, v in want.items():
                if v is not None and v != got[k]:
                    out.append(f"{s.name}: {k} devbin {v}, driver {got[k]}")
        return out

    def close(self) -> None:
        self.cu.cuLibraryUnload(self.library)
        self.cu.cuDevicePrimaryCtxRelease(self.device)


def driver_report(files: Sequence[str], target: str, kernel: str | None = None, lazy: bool = False) -> dict[str, Any]:
    """What ``devbin load --backend cuda`` prints: the files resolved by devbin (the same errors,
    the model's facts), then linked and loaded by the driver; each kernel's driver attributes and
    the differences from devbin's model (``differences``: [] when equal)."""
    if not target.startswith("sm_"):
        raise UsageError(f"--backend cuda loads NVIDIA images; the target is {target}", fmt="cuda")
    sim = Executable(target)
    for f in files:
        sim.load(f)
    sim.freeze()
    cu_exe = CudaExecutable([(o.name, bytes(o.index.elf.bytes())) for o in sim.code_objects], arch=target)
    try:
        kernels = [s for s in sim.symbols() if s.kind.word == "kernel" and (kernel is None or s.name == kernel)]
        rows = [{"name": s.name, **cu_exe.attributes(s.name)} for s in kernels]
        return {"target": target, "backend": "cuda", "lazy_env": os.environ.get("CUDA_MODULE_LOADING", "LAZY"),
                "lazy": lazy, "kernels": rows, "differences": cu_exe.compare_resources(kernels)}
    finally:
        cu_exe.close()


def read_images(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[str, bytes]]:
    return [(str(p), Path(p).read_bytes()) for p in paths]
