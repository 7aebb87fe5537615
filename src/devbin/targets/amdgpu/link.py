"""The AMDGPU link back end (:data:`LINK_BACKEND`, named by the AMD descriptor's ``link_backend``): the
facts of AMDGPU objects the generic passes ask for, and the AMDGPU half of the ``output`` pass.

Dead functions and kernels are removed from ``-ffunction-sections`` objects
(:func:`~devbin.targets.amdgpu.link_lld.prune_object`; a kernel with its descriptor, relocations and note
entry); nothing kept may refer to what is removed, across objects (:func:`_amdgpu_removals`):
what something kept still references, and every dead function of an object whose pruning is
refused (a function sharing a section with code that stays), are left in and reported.
``ld.lld -shared`` links; the kernel descriptors and the metadata note then get each kernel's
totals over everything it reaches across objects (private segment, register granules,
dynamic-stack bit: :func:`~devbin.targets.amdgpu.link_lld.patch_linked`), which ld.lld leaves at the
kernel's own, too-small values.  devbin's own sections are added afterwards by the generic
output pass (:mod:`devbin.link.output`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from devbin.errors import UsageError
from devbin.formats.elf import constants as C
from devbin.link.result import LinkResult, OutputReport
from devbin.model.reach import reachable
from devbin.targets.amdgpu.link_lld import function_facts, kernel_totals, patch_linked, prune_object, run_lld

__all__ = ["LINK_BACKEND", "AmdgpuLink"]

#: The suffix of a kernel descriptor's symbol (``<kernel>.kd``: what the HSA loader looks up).
KD_SUFFIX = ".kd"


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
    :func:`~devbin.targets.amdgpu.link_lld.prune_object`).  Then one rule, across units: nothing kept may
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
            if holder.endswith(KD_SUFFIX):  # a descriptor lives and dies with its kernel
                holder = holder[:-len(KD_SUFFIX)]
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


class AmdgpuLink:
    """The AMDGPU link back end: :class:`~devbin.link.backend.LinkBackend` with the output step
    (:class:`~devbin.link.output.OutputBackend`)."""

    linker = "ld.lld"
    #: LLVM sets a function's dynamic-stack flag for any call that leaves its object (it cannot see the callee).
    calls_out_flag_dynamic_stack = True

    def link_arch(self, arch: str) -> str:
        """The processor: ``gfx90a`` of ``gfx90a:xnack+`` (target-ID features do not change linkability)."""
        return arch.split(":", 1)[0]

    def descriptor_owner(self, name: str) -> str | None:
        """The kernel ``k`` of its descriptor ``k.kd``."""
        return name[:-len(KD_SUFFIX)] if name.endswith(KD_SUFFIX) and len(name) > len(KD_SUFFIX) else None

    def output(self, result: LinkResult, output: Path, stack_budget: int | None) -> tuple[OutputReport, bytes]:
        """The report and the patched ``ld.lld`` output (the caller adds devbin's sections and writes it)."""
        return _amdgpu(result, output, stack_budget)


LINK_BACKEND = AmdgpuLink()
