"""The linker step of ``devbin tour``.

12. Links the two shipped AMDGPU objects (``sample_link_kern.o``: kernels ``kern_main``, which
    calls ``heavy_fn`` in the other object, and ``kern_light``; ``sample_link_lib.o``:
    ``heavy_fn`` with a 64-byte private array, and the dead ``unused_fn`` -> ``helper_fn``;
    both compiled separately by ``devbin cc`` from tests/sources/link_amd) with ``devbin
    link``'s passes: prints the dead-code report and each kernel's resources propagated
    through the call graph across the objects -- ``kern_main``'s private segment goes from
    the 0 its own object reports to the 68 bytes one translation unit gives -- and the
    passes run.  (``devbin link -o`` would then hand ld.lld the pruned objects and
    patch the kernel descriptors; the tour does not need ld.lld.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["link_tour"]


def link_tour(folder: Path, step: int = 12) -> tuple[dict[str, Any], list[str], bool]:
    """``(JSON facts, text lines, everything as expected)``."""
    import importlib.resources as resources

    from devbin.cli.tour import write
    from devbin.link.core import link

    samples = resources.files("devbin.samples")
    inputs = [(n, samples.joinpath(n).read_bytes()) for n in ("sample_link_kern.o", "sample_link_lib.o")]
    result = link(inputs)
    facts = result.to_dict()
    facts.pop("passes")  # timings differ run to run; the tour's output does not
    write(folder / "link.map", result.link_map())
    usage = {u.kernel: u for u in result.usage}
    main = usage.get("kern_main")
    removed = {r["name"] for r in facts["removed"]}
    ok = (not result.errors and main is not None and main.stack == 68 and main.own_stack == 0
          and {"unused_fn", "helper_fn"} <= removed)
    lines = [f"{step}. linked the two sample AMDGPU objects (devbin link sample_link_kern.o sample_link_lib.o "
             f"--map {folder / 'link.map'}):"]
    lines.append(f"   dead code: {len(facts['removed'])} removed, {facts['removed_bytes']} bytes: "
                 + ", ".join(f"{r['name']} ({r['bytes']} B)" for r in facts["removed"]))
    lines.append("   resources, the kernel's own object -> through the call graph across both objects:")
    for u in result.usage:
        regs = ", ".join(f"{k} {u.own_registers[k]}->{v}" for k, v in u.registers.items() if v is not None)
        lines.append(f"     {u.kernel}: stack {u.own_stack}->{u.stack}{' (dynamic)' if u.dynamic else ''}; "
                     f"registers {regs}; reaches {', '.join(u.reaches)}")
    lines.append("   passes: " + ", ".join(p.name for p in result.passes) + " (devbin link --time-trace times them)")
    return facts, lines, ok
