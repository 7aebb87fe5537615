"""The NVIDIA link back end (:data:`LINK_BACKEND`, named by the NVIDIA descriptor's ``link_backend``): the
facts of cubins the generic passes ask for, and the NVIDIA half of the ``output`` pass: pruned
cubins through ``nvlink``.

Every loaded unit is rewritten without the functions and variables dead-code elimination
removed (:func:`devbin.targets.nvidia.link_prune.prune_cubin`); a unit whose removal is refused (kept
code still refers to the removed part) goes to nvlink as it is, and the refusal is
reported.  nvlink then links exactly these cubins, without ``-kernels-used`` (whose rules
differ from devbin's: it keeps every address-taken function, :mod:`devbin.targets.nvidia.link_nvlink`).
nvlink computes per-kernel registers and stack itself (``EIATTR_REGCOUNT``,
``MIN_STACK_SIZE``), so nothing is patched in the machine-level output; the devbin
sections added afterwards (:mod:`devbin.link.output`) carry the propagated totals and each
kernel's reachable functions.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from devbin.link.result import LinkResult, OutputReport
from devbin.targets.nvidia.cubin import Cubin
from devbin.targets.nvidia.link_nvlink import run_nvlink
from devbin.targets.nvidia.link_prune import prune_cubin

__all__ = ["LINK_BACKEND", "NvidiaLink", "nvidia_output"]


def nvidia_output(result: LinkResult, output: Path) -> tuple[OutputReport, bytes]:
    """The report and nvlink's output for ``output`` (linked in a private temporary folder: the
    caller writes the file, whole, after adding devbin's sections)."""
    report = OutputReport(str(output), LINK_BACKEND.linker)
    dead: dict[str, list[str]] = {}
    for node in result.dce.removed_nodes(result.graph):
        dead.setdefault(node.unit.name, []).append(node.name)
    cubins: list[bytes] = []
    for unit in result.resolution.units:
        cubins.append(report.prune(unit.name, unit.data, sorted(dead.get(unit.name, [])), prune_cubin))
    arch = Cubin(result.resolution.units[0].elf).arch
    with tempfile.TemporaryDirectory(prefix="devbin-nvlink-out-") as tmp:
        linked = run_nvlink(cubins, arch, Path(tmp) / "linked.cubin").output.read_bytes()
    report.size = len(linked)
    return report, linked


class NvidiaLink:
    """The NVIDIA link back end: :class:`~devbin.link.backend.LinkBackend` with the output step
    (:class:`~devbin.link.output.OutputBackend`)."""

    linker = "nvlink"
    #: nvcc records a function's stack with its callees; its dynamic-stack flag means recursion or alloca.
    calls_out_flag_dynamic_stack = False

    def link_arch(self, arch: str) -> str:
        """The SM: ``sm_90`` of ``sm_90a`` and ``sm_100f`` (nvlink links an arch-specific or family
        variant with the plain SM's objects)."""
        base = arch.split(":", 1)[0]
        return base[:-1] if base.startswith("sm_") and base[-1:] in ("a", "f") else base

    def descriptor_owner(self, name: str) -> str | None:
        """None: a cubin's kernels have no separate descriptor symbol."""
        return None

    def output(self, result: LinkResult, output: Path, stack_budget: int | None) -> tuple[OutputReport, bytes]:
        """:func:`nvidia_output` (nvlink computes each kernel's stack itself: ``stack_budget`` is not used)."""
        return nvidia_output(result, output)


LINK_BACKEND = NvidiaLink()
