"""The ``output`` pass: the machine-level link, delegated to the vendor's linker.

devbin feeds the vendor linker exactly the units resolution loaded, each rewritten through
the ELF core without the functions dead-code elimination removed, then writes what the
vendor linker cannot know back into its output:

* **AMDGPU** (:mod:`devbin.link.amdgpu`): dead functions and kernels are removed from
  ``-ffunction-sections`` objects (:func:`~devbin.link.amdgpu.prune_object`; a kernel with its
  descriptor, relocations and note entry); nothing kept may refer to what is removed, across
  objects (``_amdgpu_removals``): what something kept still references, and every dead function of
  an object whose pruning is refused (a function sharing a section with code that stays), are
  left in and reported.  ``ld.lld -shared`` links; the kernel descriptors and the
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

import os
import tempfile
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from devbin.binary.output import Inputs, check_destination, write_file
from devbin.errors import UsageError
from devbin.formats.devsec.elf import annotate
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.importers import import_code_object
from devbin.link.amdgpu import function_facts, kernel_totals, patch_linked, prune_object, run_lld
from devbin.link.output_nvidia import nvidia_output
from devbin.link.result import LinkResult, OutputReport
from devbin.model import Attribute, Metadata, StdAttr
from devbin.model.reach import reachable

__all__ = ["OutputReport", "write_output"]  # OutputReport: devbin.link.result


def _removed_by_unit(result: LinkResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node in result.dce.removed_nodes(result.graph):
        if node.is_function:
            out.setdefault(node.unit.name, []).append(node.name)
    return out


_Id = tuple[str, str]  # (unit name, name) for a local symbol, ("", name) for a global one


def _amdgpu_removals(result: LinkResult) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """What to take out of each AMDGPU unit, and what stays although dead-code elimination
    removed it (name, why).

    Dead kernels go with the rest (their descriptors and note entries with them:
    :func:`~devbin.link.amdgpu.prune_object`).  Then one rule, across units: nothing kept may
    refer to something removed.  Every relocation (and model call edge) from a holder that
    stays -- a kept function, any data object or section (data is not pruned here), a kept
    kernel's descriptor -- to a removed function puts that function back, and what it refers
    to in turn (one closure walk, :func:`devbin.model.reach.reachable`).  A unit whose pruning
    is refused (e.g. two functions in one section) keeps all its dead functions, and the walk
    runs again from them, so no unit is left naming a symbol another unit dropped."""
    units = result.resolution.units
    dead_names = _removed_by_unit(result)

    def ident(unit: str, local: frozenset[str], name: str) -> _Id:
        return (unit, name) if name in local else ("", name)

    refs: dict[_Id, set[_Id]] = {}
    dead: set[_Id] = set()
    for u in units:
        local = u.local_functions
        dead |= {ident(u.name, local, n) for n in dead_names.get(u.name, [])}
        for holder, target in (*u.references, *u.model.callgraph.direct):
            sec = u.elf.section(holder)
            if sec is not None and not sec.sh_flags & C.SHF_ALLOC:
                continue  # .llvm.callgraph, debug info: not loaded, rewritten or dropped with the code
            if holder.endswith(".kd"):  # a descriptor lives and dies with its kernel
                holder = holder[:-3]
            refs.setdefault(ident(u.name, local, holder), set()).add(ident(u.name, local, target))
    refused: dict[str, str] = {}
    while True:
        back = _put_back(refs, dead)
        plan: dict[str, list[str]] = {}
        for u in units:
            plan[u.name] = [] if u.name in refused else sorted(
                n for n in dead_names.get(u.name, []) if ident(u.name, u.local_functions, n) not in back)
        for u in units:
            if plan[u.name] and u.name not in refused:
                try:
                    prune_object(u.data, set(plan[u.name]), where=u.name)
                except UsageError as e:
                    refused[u.name] = e.message
                    break
        else:
            break
        dead -= {ident(u.name, u.local_functions, n) for u in units if u.name in refused
                 for n in dead_names.get(u.name, [])}
    kept: list[tuple[str, str]] = []
    for u in units:
        for n in sorted(dead_names.get(u.name, [])):
            if u.name in refused:
                kept.append((n, f"{u.name}: {refused[u.name]}"))
            elif n not in plan[u.name]:
                kept.append((n, f"{u.name}: something kept still refers to it"))
    return plan, kept


def _put_back(refs: dict[_Id, set[_Id]], dead: set[_Id]) -> set[_Id]:
    """The removed functions that something kept refers to, directly or through other such functions."""
    def successors(i: _Id) -> list[_Id]:
        return sorted(t for t in refs.get(i, ()) if t in dead)

    live_refs = sorted({t for h, ts in refs.items() if h not in dead for t in ts if t in dead})
    return set(reachable(live_refs, successors))


def _amdgpu(result: LinkResult, output: Path, stack_budget: int | None) -> tuple[OutputReport, bytes]:
    report = OutputReport(str(output), "ld.lld")
    plan, kept = _amdgpu_removals(result)
    report.kept_in_output += kept
    datas: list[bytes] = []
    names: list[str] = []
    for unit in result.resolution.units:
        datas.append(report.prune(unit.name, unit.data, plan[unit.name], prune_object))
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
