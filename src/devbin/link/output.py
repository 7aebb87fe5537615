"""The ``output`` pass: the machine-level link, delegated to the vendor's linker.

devbin feeds the vendor linker exactly the units resolution loaded, each rewritten through
the ELF core without the functions dead-code elimination removed, then writes what the
vendor linker cannot know back into its output:

* **AMDGPU** (:mod:`devbin.link.amdgpu`): functions are removed from ``-ffunction-sections``
  objects (:func:`~devbin.link.amdgpu.prune_object`); a function that shares a section with
  code that stays, and kernels (their descriptors share ``.rodata`` and the note lists them),
  are left in and reported.  ``ld.lld -shared`` links; the kernel descriptors and the
  metadata note then get each kernel's totals over everything it reaches across objects
  (private segment, register granules, dynamic-stack bit:
  :func:`~devbin.link.amdgpu.patch_linked`), which ld.lld leaves at the kernel's own,
  too-small values.

* **NVIDIA** (:mod:`devbin.link.output_nvidia`): functions and variables are removed from
  the relocatable cubins and ``nvlink`` links them.

Then, for both, devbin's own sections are added to the linked file (nothing the loader
reads moves): the model of the linked file with each kernel's propagated registers and
stack (``STACK_SIZE``, ``DYNAMIC_STACK``), and in the metadata one ``reaches:<kernel>``
entry per kernel listing, space-separated and sorted, every function it can reach, so a
loader can load lazily (docs/FORMAT.md §9.2).

What could not be removed is listed in :attr:`OutputReport.kept_in_output` with the reason.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from devbin.binary.output import Inputs, check_destination, write_file
from devbin.errors import UsageError
from devbin.formats.devsec.elf import annotate
from devbin.formats.elf.reader import ElfFile
from devbin.importers import import_code_object
from devbin.link.amdgpu import function_facts, kernel_totals, patch_linked, prune_object, run_lld
from devbin.link.output_nvidia import nvidia_output
from devbin.link.result import LinkResult, OutputReport
from devbin.model import Attribute, Metadata, StdAttr
from devbin.model.reach import reachable

__all__ = ["OutputReport", "write_output"]  # OutputReport: devbin.link.result


def _get(table: dict[str, list[str]], key: str) -> list[str]:
    return table.get(key, [])


def _removed_by_unit(result: LinkResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node in result.dce.removed_nodes(result.graph):
        if node.is_function:
            out.setdefault(node.unit.name, []).append(node.name)
    return out


def _amdgpu(result: LinkResult, output: Path, stack_budget: int | None) -> tuple[OutputReport, bytes]:
    report = OutputReport(str(output), "ld.lld")
    removed = _removed_by_unit(result)
    datas: list[bytes] = []
    names: list[str] = []
    for unit in result.resolution.units:
        data = unit.data
        dead = sorted(removed.get(unit.name, []))
        kernels = {f.name for f in unit.model.functions if f.is_kernel}
        for k in [d for d in dead if d in kernels]:
            report.kept_in_output.append((k, f"{unit.name}: a kernel (its descriptor shares .rodata; kernels "
                                             "are not removed from AMDGPU objects)"))
        # what a kernel left in the object calls must stay with it
        calls: dict[str, list[str]] = {}
        for caller, c in unit.model.callgraph.direct:
            calls.setdefault(caller, []).append(c)
        dead_set = set(dead)
        dead_callees = {f: [c for c in cs if c in dead_set] for f, cs in calls.items()}
        left = reachable(sorted(kernels), functools.partial(_get, dead_callees))
        keep_too = {c for f in left for c in dead_callees.get(f, ())}
        for f in sorted(keep_too):
            report.kept_in_output.append((f, f"{unit.name}: called by a kernel left in the object"))
        drop = [d for d in dead if d not in kernels and d not in keep_too]
        datas.append(report.prune(unit.name, data, drop, prune_object))
        names.append(unit.name)
    with tempfile.TemporaryDirectory(prefix="devbin-link-") as tmp:
        paths = []
        for i, data in enumerate(datas):
            p = Path(tmp) / f"{i:05d}.o"
            p.write_bytes(data)
            paths.append(p)
        linked = run_lld(paths, Path(tmp) / "out.so")
    facts = function_facts(datas, names)
    kept_kernels = sorted({f.name for f in facts.values() if f.kernel})
    totals = kernel_totals(facts, kept_kernels, stack_budget=stack_budget or 0)
    patched = patch_linked(linked, totals)
    report.size = len(patched)
    report.patched = {k: {"private_segment": t.private_segment, "arch_vgpr": t.arch_vgpr, "agpr": t.agpr,
                          "sgpr": t.sgpr, "dynamic_stack": t.dynamic_stack, "reasons": list(t.reasons)}
                      for k, t in totals.items()}
    return report, patched


def _annotate(result: LinkResult, linked: bytes, output: Path) -> bytes:
    """The linked file with devbin's sections added: propagated totals and each kernel's reach."""
    elf = ElfFile(linked, where=str(output))
    model = import_code_object(elf)
    usage = {u.kernel: u for u in result.usage}
    funcs = []
    for f in model.functions:
        u = usage.get(f.name)
        if u is not None and f.is_kernel:
            attrs = [Attribute(StdAttr.STACK_SIZE, u.stack)]
            for name, attr in (("general", StdAttr.REGS_GENERAL), ("scalar", StdAttr.REGS_SCALAR),
                               ("accum", StdAttr.REGS_ACCUM)):
                total, own = u.registers.get(name), f.uint(attr)
                if total is not None:
                    attrs.append(Attribute(attr, max(total, own or 0)))
            if u.dynamic:
                attrs.append(Attribute(StdAttr.DYNAMIC_STACK, True))
            f = f.with_attributes(*attrs)
        funcs.append(f)
    entries = [e for e in model.metadata.entries if not e[0].startswith("reaches:")]
    entries += [(f"reaches:{u.kernel}", " ".join(sorted(u.reaches))) for u in result.usage if u.reaches]
    return annotate(elf, replace(model, functions=tuple(funcs), metadata=Metadata(tuple(entries))))


def write_output(result: LinkResult, output: str | Path, *, stack_budget: int | None = None,
                 inputs: Iterable[str | os.PathLike[str]] = ()) -> OutputReport:
    """Link ``result``'s units (less the dead functions) with the vendor linker into ``output``.

    The vendor linker writes into a private temporary folder; the annotated result is written
    to ``output`` whole or not at all, never over one of ``inputs``
    (:func:`devbin.binary.output.write_file`), and is never read back from ``output``: another
    process writing the same file cannot mix its bytes in."""
    if result.errors:
        raise UsageError(f"not writing {output}: the link has errors ({result.errors[0]})", fmt="link")
    machines = {u.machine for u in result.resolution.units}
    path = Path(output)
    sources = Inputs(inputs)
    check_destination(path, sources)
    if machines == {"amdgpu"}:
        report, linked = _amdgpu(result, path, stack_budget)
    elif machines == {"nvidia"}:
        report, linked = nvidia_output(result, path)
    else:
        raise UsageError(f"no vendor linker for these objects (machines: {', '.join(sorted(map(str, machines)))})",
                         fmt="link")
    data = _annotate(result, linked, path)
    report.size = write_file(path, data, inputs=sources)
    return report
