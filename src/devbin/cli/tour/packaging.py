"""The packaging half of ``devbin tour``: pack the shipped samples, select per GPU, prune.

8. Packs the shipped sm_90 cubin, its PTX and the gfx90a code object into one LLVM
   OffloadBinary with metadata (``devbin pack``), and the cubin alone into a wrapped
   image whose metadata prints the way a plugin's debug log would.
9. Picks the image a driver would load for sm_90, sm_120 (no SASS: the PTX is
   JIT-compiled) and gfx90a:xnack+, with ``--explain`` for sm_120 (``devbin select``).
10. Prunes the package to sm_90 (``devbin prune --keep sm_90``) and reports the bytes
    saved per architecture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["expected_picks", "packaging_tour"]


def expected_picks() -> dict[str, tuple[str, bool]]:
    """What a driver loads from the package for each GPU the tour asks about: ``{device: (arch, JIT)}``
    (the samples' architectures, :func:`devbin.samples.sample_archs`)."""
    from devbin.samples import sample_archs
    a = sample_archs()
    return {a.cubin: (a.cubin, False), a.jit_device: (a.ptx, True), a.layer_top: (a.code_object, False)}


def packaging_tour(folder: Path) -> tuple[dict[str, Any], list[str], bool]:
    """``(JSON facts, text lines, everything as expected)``."""
    import importlib.resources as resources

    from devbin.cli.tour import write
    from devbin.formats.wrapped import parse_wrapped
    from devbin.packaging import PackInput, pack
    from devbin.packaging.pruning import prune
    from devbin.packaging.selection import select
    from devbin.samples import sample_archs

    archs = sample_archs()
    expected = expected_picks()
    samples = resources.files("devbin.samples")
    inputs = [PackInput(samples.joinpath(n).read_bytes(), n)
              for n in ("sample_sm90.cubin", "sample.ptx", "sample_gfx90a.o")]
    package = pack(inputs)
    pkg_path = folder / "app.offload"
    write(pkg_path, package.data)
    wrapped = pack(inputs[:1], format="wrapped")
    wrapped_path = folder / "sample_sm90.wrapped"
    write(wrapped_path, wrapped.data)

    picks = {dev: select(package.data, dev, name=str(pkg_path)) for dev in expected}
    got = {dev: (s.chosen.arch if s.chosen else "", s.jit) for dev, s in picks.items()}

    pruned = prune(package.data, keep=archs.cubin, where=str(pkg_path))
    pruned_path = folder / f"app.{archs.cubin}.offload"
    write(pruned_path, pruned.data)
    kept = sorted({image.arch for image, stays in pruned.images if stays})

    ok = got == expected and kept == sorted([archs.ptx, archs.cubin]) and not package.findings
    facts: dict[str, Any] = {
        "pack": {"file": str(pkg_path), **package.to_dict()},
        "wrapped": {"file": str(wrapped_path), "metadata": dict(parse_wrapped(wrapped.data).metadata)},
        "select": {dev: s.to_dict() for dev, s in picks.items()},
        "prune": {"file": str(pruned_path), "input_size": pruned.input_size, "output_size": pruned.output_size,
                  "saved_by_arch": pruned.saved_by_arch(), "kept": kept},
    }
    lines = [f"8. packed the three samples into {pkg_path} (LLVM OffloadBinary, {len(package.data)} bytes):"]
    for img in package.images:
        lines.append(f"   {img.image.kind:6} {img.image.arch:11} {len(img.data):6} B  Producer: {img.get('Producer')}")
    for w in package.warnings:
        lines.append(f"   warning: {w}")
    lines.append(f"   the cubin alone as a wrapped image ({wrapped_path}); its metadata, as a plugin logs it:")
    lines += [f"     {k}: {v}".rstrip() for k, v in parse_wrapped(wrapped.data).metadata]
    lines.append("9. the image a driver would load (devbin select):")
    for dev, s in picks.items():
        c = s.chosen
        from devbin.targets.registry import load_label
        from devbin.targets.vendor import generic_load_label
        how = load_label(c.image.vendor, c.kind, c.jit) if c is not None else generic_load_label(False)
        lines.append(f"   {dev:14} -> {c.arch if c else 'none'} ({how})")
    lines.append(f"   --explain for {archs.jit_device}:")
    lines += ["     " + line.rstrip() for line in picks[archs.jit_device].explain()]
    lines.append(f"10. pruned to {archs.cubin} (devbin prune --keep {archs.cubin}): {pruned.input_size} -> "
                 f"{pruned.output_size} bytes, kept {', '.join(kept)}; saved "
                 + ", ".join(f"{a} {n} B" for a, n in sorted(pruned.saved_by_arch().items())))
    lines.append(f"    -> {pruned_path}")
    return facts, lines, ok
