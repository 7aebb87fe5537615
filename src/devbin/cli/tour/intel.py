"""The Intel step of ``devbin tour``.

15. Reads the shipped ``ocloc`` fat archive (``sample_intel.ar``: ``sample_intel.cl`` built for two GPUs,
    and its SPIR-V as ``generic_ir``): each image with its kernel's GRFs, SIMD width, SLM and private
    bytes (``devbin list``, ``devbin resources``), then the image the Level Zero runtime loads on each
    GPU a zebin is built for (named by the IP version in the member's name) and on one none is built for,
    which gets ``generic_ir`` compiled (``devbin select``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["intel_tour"]

_SAMPLE = "sample_intel.ar"


def intel_tour(folder: Path, step: int = 15) -> tuple[dict[str, Any], list[str], bool]:
    """``(JSON facts, text lines, everything as expected)``: the copy written to ``folder`` is what is read."""
    from devbin.cli.tour import write
    from devbin.entry.source import open as open_source
    from devbin.model import StdAttr
    from devbin.packaging.selection import select
    from devbin.samples import INTEL_JIT_DEVICE, sample_path

    path = folder / _SAMPLE
    write(path, sample_path(_SAMPLE).read_bytes())
    images: list[dict[str, Any]] = []
    functions: list[dict[str, Any]] = []
    native: list[tuple[str, str]] = []  # (the IP version a zebin's member is named for, its address)
    with open_source(path) as src:
        for image in src.images:
            address, member = str(image.address), image.address.member
            images.append({"address": address, "kind": image.kind, "arch": image.arch, "size": image.size})
            co = image.code_object()
            if co is None or member is None:
                continue
            native.append((member.name.partition(".")[2], address))  # "64.12.60.7": pointer bits, IP version
            functions += [{"image": address, "name": f.name, "registers": f.resources.registers,
                           "simd": f.uint(StdAttr.WAVE_SIZE), "shared": f.resources.shared, "local": f.resources.local}
                          for f in co.functions if f.is_kernel]
    picks: list[dict[str, Any]] = []
    ok = len(native) >= 2
    for device, expected in [*native, (INTEL_JIT_DEVICE, "")]:
        sel = select(path, device, strict=False)
        c = sel.chosen
        picks.append({"device": device, "description": sel.device.description,
                      "chosen": c.name if c is not None else None, "kind": c.kind if c is not None else None,
                      "jit": sel.jit, "reason": c.reason if c is not None else str(sel.error())})
        ok = ok and c is not None and (c.name == expected if expected else c.kind == "spirv" and sel.jit)
    lines = [f"{step}. the shipped Intel sample: {path} (ocloc fat archive of sample_intel.cl for two GPUs, "
             "and its SPIR-V):"]
    for i in images:
        lines.append(f"   {i['address']}: {i['kind']} {i['arch'] or '-'}, {i['size']:,} bytes")
    for f in functions:
        lines.append(f"   {f['image'].rpartition('!')[2]} {f['name']}: GRF {f['registers']}, SIMD {f['simd']}, "
                     f"SLM {f['shared']}, private {f['local']} bytes per thread")
    for p in picks:
        how = "SPIR-V, JIT-compiled" if p["jit"] else p["kind"]
        lines.append(f"   devbin select --device {p['description']}: "
                     f"{(p['chosen'] or 'nothing').rpartition('!')[2]} ({how}): {p['reason']}")
    return {"file": str(path), "images": images, "functions": functions, "select": picks}, lines, ok
