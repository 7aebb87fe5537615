"""The AMDGPU backend of ``devbin link`` (issue 7, parts 4-6).

``ld.lld`` does the machine-level link; devbin does what it cannot:

1. :func:`function_facts` -- per-function registers, private bytes, dynamic stack and calls of
   each relocatable object, from the unified model (the importer, or the devbin sections that
   ``devbin cc`` writes: LLVM 19 objects alone say nothing about device functions);
   :func:`kernel_totals` -- each kernel's totals over every function it reaches, across
   objects (:mod:`devbin.targets.amdgpu.link_facts`);
2. :func:`prune_object` -- dead functions taken out of a ``-ffunction-sections`` object before
   the link (:mod:`devbin.targets.amdgpu.link_prune`);
3. :func:`run_lld` -- ``ld.lld -shared``, with a one-line error when it is missing;
4. :func:`patch_linked` -- the totals written into the linked file's kernel descriptors and
   metadata note without moving anything (:mod:`devbin.targets.amdgpu.link_patch`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from devbin.errors import UsageError
from devbin.targets.amdgpu.link_facts import FunctionFacts, KernelTotals, function_facts, kernel_totals
from devbin.targets.amdgpu.link_patch import patch_linked
from devbin.targets.amdgpu.link_prune import prune_object
from devbin.tools import find_tool, install_hint, run_tool

__all__ = ["LLD_VERSIONS", "FunctionFacts", "KernelTotals", "find_lld", "function_facts", "kernel_totals",
           "patch_linked", "prune_object", "run_lld"]

#: ``ld.lld`` versions tried, in order (then plain ``ld.lld``).
LLD_VERSIONS = ("19", "22")


def find_lld() -> str:
    """The path of ``ld.lld``; a :class:`UsageError` naming the package when it is missing."""
    path = find_tool("ld.lld", versions=LLD_VERSIONS)
    if path is None:
        raise UsageError(f"devbin link needs ld.lld (LLVM's linker) for AMDGPU and cannot find it "
                         f"(tried ld.lld-{', ld.lld-'.join(LLD_VERSIONS)}, ld.lld, DEVBIN_LD_LLD): "
                         f"{install_hint('ld.lld')}", fmt="link")
    return path


def run_lld(objects: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str],
            extra: Sequence[str] = ()) -> bytes:
    """Link ``objects`` into the code object ``output`` with ``ld.lld -shared`` and return its bytes.

    ``extra`` options go before the inputs.  A missing linker or a failed link is a one-line
    :class:`UsageError` (the linker's first error line).
    """
    lld = find_lld()
    run_tool([lld, "-shared", *extra, "-o", os.fspath(output), *(os.fspath(o) for o in objects)], timeout=600)
    return Path(output).read_bytes()
