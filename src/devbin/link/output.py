"""The ``output`` pass: the machine-level link, delegated to the vendor's linker.

devbin feeds the vendor linker exactly the units resolution loaded, each rewritten through
the ELF core without the functions dead-code elimination removed, then writes what the
vendor linker cannot know back into its output.  Both steps are the vendor's link back end's
(:class:`OutputBackend`, found through the units' vendor descriptor: :mod:`devbin.link.backend`):

* AMDGPU (:mod:`devbin.targets.amdgpu.link`): dead functions and kernels are removed from
  ``-ffunction-sections`` objects, never something kept still refers to; ``ld.lld -shared``
  links; each kernel's totals across objects are patched into its descriptor and the
  metadata note, which ld.lld leaves at the kernel's own, too-small values;
* NVIDIA (:mod:`devbin.targets.nvidia.link`): functions and variables are removed from
  the relocatable cubins and ``nvlink`` links them.

Then, for every vendor, devbin's own sections are added to the linked file (nothing the loader
reads moves): the model of the linked file with each kernel's propagated registers and
stack (``STACK_SIZE``, ``DYNAMIC_STACK``), and in the metadata one ``reaches:<kernel>``
entry per kernel listing, space-separated and sorted, every function it can reach, so a
loader can load lazily (docs/FORMAT.md §9.2).

What could not be removed is listed in :attr:`OutputReport.kept_in_output` with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Protocol, cast

from devbin.binary.output import Inputs, check_destination, write_file
from devbin.errors import UsageError
from devbin.formats.devsec.elf import annotate
from devbin.formats.elf.reader import ElfFile
from devbin.importers import import_code_object
from devbin.link.backend import LinkBackend, link_backend
from devbin.link.result import LinkResult, OutputReport
from devbin.model import Attribute, Metadata, StdAttr

__all__ = ["OutputBackend", "OutputReport", "write_output"]  # OutputReport: devbin.link.result


class OutputBackend(LinkBackend, Protocol):
    """A vendor's link back end with its output step (the module's ``LINK_BACKEND``)."""

    def output(self, result: LinkResult, output: Path, stack_budget: int | None) -> tuple[OutputReport, bytes]:
        """The report and the vendor linker's output for ``result``'s units less the dead code, linked
        in a private temporary folder (the caller adds devbin's sections and writes ``output`` whole)."""
        ...


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
    vendors = {u.vendor for u in result.resolution.units}
    path = Path(output)
    sources = Inputs(inputs)
    check_destination(path, sources)
    if len(vendors) != 1:
        names = sorted(v.name if v is not None else "None" for v in vendors)
        raise UsageError(f"no vendor linker for these objects (vendors: {', '.join(names)})", fmt="link")
    backend = cast(OutputBackend, link_backend(vendors.pop()))
    report, linked = backend.output(result, path, stack_budget)
    data = _annotate(result, linked, path)
    report.size = write_file(path, data, inputs=sources)
    return report
