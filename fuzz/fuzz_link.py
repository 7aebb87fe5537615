"""Fuzz target: the device linker's readers over any bytes.

Contract under test: for any bytes, every step of ``devbin.link`` that reads an input either
succeeds or raises :class:`devbin.errors.DeviceBinaryError`: the link passes (load, resolve,
import, graph, dce, resources) on the input as a device object, alone and beside a valid
one; :func:`devbin.targets.nvidia.link_prune.prune_cubin` removing each defined function in turn;
:func:`devbin.targets.amdgpu.link_lld.prune_object` likewise; the AMDGPU metadata-note MessagePack
reader the patcher uses (``amdgpu_msgpack.parse``); and
:func:`devbin.targets.amdgpu.link_lld.patch_linked` on the input as a linked code object.

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_link.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib

from devbin.errors import DeviceBinaryError
from devbin.link.core import link
from devbin.targets.amdgpu.link_lld import KernelTotals, patch_linked, prune_object
from devbin.targets.amdgpu.link_msgpack import parse
from devbin.targets.nvidia.link_prune import prune_cubin

_TOTALS = {"k": KernelTotals(private_segment=64, arch_vgpr=40, agpr=0, sgpr=30, dynamic_stack=False)}


def _defined(data: bytes) -> list[str]:
    from devbin.link.units import Unit

    try:
        return sorted({s.name for s in Unit("fuzz.o", data, 0).symbols if s.is_definition and s.is_function})[:4]
    except DeviceBinaryError:
        return []


def TestOneInput(data: bytes) -> None:  # atheris' required name
    with contextlib.suppress(DeviceBinaryError):
        result = link([("fuzz.o", data)])
        result.to_dict()
        result.link_map()
    for name in _defined(data):
        with contextlib.suppress(DeviceBinaryError):
            prune_cubin(data, {name}, where="fuzz")
        with contextlib.suppress(DeviceBinaryError):
            prune_object(data, {name}, where="fuzz")
    with contextlib.suppress(DeviceBinaryError):
        parse(data)
    with contextlib.suppress(DeviceBinaryError):
        patch_linked(data, _TOTALS)


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
