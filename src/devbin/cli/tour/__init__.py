"""A tour of devbin on the sample data it ships.

1. Builds a small device library in the unified model (kernels, device
   functions, an indirect call through function pointers, an external call,
   prototypes, metadata).
2. Writes it as a new ELF object carrying devbin's device sections.
3. Reads the file back and checks the decoded model equals the original.
4. Imports a real cubin it ships (sm_90, relocatable, built by ptxas from
   sample.ptx): its functions, registers, stack, parameters and call graph
   from NVIDIA's .nv.info/.nv.callgraph/.nv.prototype sections.
5. Annotates that cubin with the devbin sections in place, checks that every
   byte the CUDA loader reads is unchanged and that reading the sections
   back gives the imported model.
6. Does the same for an AMDGPU code object it ships (gfx90a, built by
   clang-19 from sample.cl): kernels from the metadata note and kernel
   descriptor, the device function, the call graph from relocations.
7. Packs the samples into one multi-target package with metadata, picks the
   image a driver would load for three GPUs and prunes the package
   (:mod:`devbin.cli.tour.packaging`).
8. Builds a super-archive from per-GPU sample libraries, prints the bytes
   saved, resolves a symbol through a fallback chain with --explain and
   writes the per-level view a linker takes
   (:mod:`devbin.cli.tour.superarchive`).
9. Links two shipped AMDGPU objects with devbin link: the dead-code report
   and the resources propagated across objects (:mod:`devbin.cli.tour.link`).
13. Loads a shipped user code object and a device-function library into one executable,
    lazily, looks up one kernel and prints the resolved symbols of its closure and the lazy
    statistics (:mod:`devbin.cli.tour.load`).
14. `devbin size --keep sm_90` of the packages: bytes per file, architecture and function,
    duplicates, and what pruning saves (:mod:`devbin.cli.tour.size`).
15. Reads the shipped Intel sample, an ocloc fat archive (zebins for two GPUs and generic_ir): its
    images and kernels' resources, and the image the runtime loads on each of three GPUs, one of them
    compiling generic_ir (:mod:`devbin.cli.tour.intel`).
16. Names the three code objects (machine, type, sections, symbols, relocations) and the
    `devbin inspect` command that prints each one's ELF tables; --details prints those tables
    here (about 250 lines), as the tour did before: the summary first, the details on request.

Files are written to -o/--output (default: ./devbin-tour), each whole or not at all
(:func:`write`), never over a shipped sample.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import CodeObject

HELP = "build, write, read back and print the shipped sample device code objects"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="devbin-tour", metavar="DIR",
                   help="folder for the files written (default: %(default)s)")
    p.add_argument("--out", dest="output", help=argparse.SUPPRESS)  # the old name, kept
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--details", action="store_true",
                   help="also print `devbin inspect` of the three code objects (their ELF tables) at the end")


def write(path: Path, data: bytes | str) -> None:
    """Write one of the tour's files whole (:func:`devbin.binary.output.write_file`), never over
    a shipped sample (``-o`` naming the samples' folder is refused)."""
    from devbin.binary.output import write_file

    write_file(path, data.encode() if isinstance(data, str) else data, inputs=_samples())


_SAMPLES: list[Any] = []


def _samples() -> Any:
    """The shipped samples' files, as :class:`devbin.binary.output.Inputs` (once per process)."""
    import importlib.resources as resources

    from devbin.binary.output import Inputs

    if not _SAMPLES:
        folder = resources.files("devbin.samples")
        _SAMPLES.append(Inputs(p for p in folder.iterdir() if isinstance(p, Path) and p.is_file()))
    return _SAMPLES[0]


def _annotate_and_check(elf: ElfFile, model: CodeObject, folder: Path, stem: str,
                        ext: str) -> tuple[ElfFile, Path, list[str], bool]:
    """Write ``elf`` and its annotated copy to ``folder``; return the copy, its path, what a loader
    would see differently (must be nothing) and whether the sections read back as ``model``."""
    from devbin.formats.devsec.elf import annotate, read_code_object
    from devbin.formats.elf.compare import loader_differences
    from devbin.formats.elf.reader import ElfFile

    path = folder / f"{stem}.annotated{ext}"
    write(folder / f"{stem}{ext}", elf.bytes())
    write(path, annotate(elf, model))
    out = ElfFile(path.read_bytes(), where=str(path))
    back = read_code_object(out)
    same = back is not None and back.functions == model.functions and back.callgraph == model.callgraph
    return out, path, loader_differences(elf, out), same


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.analysis.callgraph_view import format_text
    from devbin.analysis.callgraph_view import to_dict as graph_dict
    from devbin.cli.common import dump
    from devbin.cli.render import render_elf
    from devbin.entry.source import open as open_source
    from devbin.errors import DeviceBinaryError
    from devbin.formats.devsec.elf import devbin_sections, read_code_object
    from devbin.formats.elf.reader import ElfFile
    from devbin.importers import import_code_object
    from devbin.model import StdAttr
    from devbin.reports.inspect import code_object_dict, inspect_elf
    from devbin.reports.resources import ImageResources, analyse_image
    from devbin.samples import sample_amdgpu_bytes, sample_code_object, sample_cubin_bytes, sample_elf_bytes
    folder = Path(args.output)
    folder.mkdir(parents=True, exist_ok=True)
    model = sample_code_object()
    sample = sample_elf_bytes()
    sample_path = folder / "sample.o"
    write(sample_path, sample)
    elf = ElfFile(sample, where=str(sample_path))
    back = read_code_object(elf)
    round_trip = back == model

    cubin = sample_cubin_bytes(relocatable=True)
    cubin_in = ElfFile(cubin, where="sample_sm90_rdc.cubin")
    imported = import_code_object(cubin_in)
    cubin_out, cubin_path, diffs, cubin_round_trip = _annotate_and_check(cubin_in, imported, folder,
                                                                         "sample_sm90_rdc", ".cubin")
    annotated_size = cubin_out.size
    with open_source(cubin, name="sample_sm90_rdc.cubin") as cubin_source:
        analysed = analyse_image(cubin_source.images[0], json=False)
    if not isinstance(analysed, ImageResources) or analysed.usage is None:
        raise DeviceBinaryError("the shipped sample cubin gives no resource usage")
    cubin_usage = analysed.usage

    result: dict[str, Any] = {
        "sample": {
            "file": str(sample_path),
            "size": len(sample),
            "sections": {n: s.sh_size for n, s in devbin_sections(elf).items()},
            "functions": len(model.functions),
            "round_trip_equal": round_trip,
        },
        "cubin": {
            "file": str(cubin_path),
            "size_before": len(cubin),
            "size_after": annotated_size,
            "sections": {n: s.sh_size for n, s in devbin_sections(cubin_out).items()},
            "loader_differences": diffs,
            "round_trip_equal": cubin_round_trip,
            "resources": cubin_usage,
            "callgraph": graph_dict(imported, imported.target.target_id if imported.target else "?"),
        },
    }
    amd = sample_amdgpu_bytes()
    amd_in = ElfFile(amd, where="sample_gfx90a.o")
    amd_model = import_code_object(amd_in)
    amd_out, amd_path, amd_diffs, amd_round_trip = _annotate_and_check(amd_in, amd_model, folder, "sample_gfx90a",
                                                                       ".o")
    amd_arch = amd_model.target.target_id if amd_model.target else "?"
    result["amdgpu"] = {
        "file": str(amd_path),
        "size_before": len(amd),
        "size_after": amd_out.size,
        "loader_differences": amd_diffs,
        "round_trip_equal": amd_round_trip,
        "model": code_object_dict(amd_model),
        "callgraph": graph_dict(amd_model, amd_arch),
    }
    from devbin.cli.tour.packaging import packaging_tour
    result["packaging"], packaging_lines, packaging_ok = packaging_tour(folder)
    from devbin.cli.tour.superarchive import superarchive_tour
    result["superarchive"], sa_lines, sa_ok = superarchive_tour(folder, step=11)
    from devbin.cli.tour.link import link_tour
    result["link"], link_lines, link_ok = link_tour(folder, step=12)
    from devbin.cli.tour.load import load_tour
    result["load"], load_lines, load_ok = load_tour(folder, step=13)
    from devbin.cli.tour.size import size_tour
    pruned = result["packaging"]["prune"]
    result["size"], size_lines, size_ok = size_tour(folder, pruned["input_size"] - pruned["output_size"], step=14)
    from devbin.cli.tour.intel import intel_tour
    result["zebin"], intel_lines, intel_ok = intel_tour(folder, step=15)
    result["inspect"] = [inspect_elf(elf, file=str(sample_path)), inspect_elf(cubin_out, file=str(cubin_path)),
                         inspect_elf(amd_out, file=str(amd_path))]
    if args.json:
        dump("tour", result, out)
    else:
        w = out.write
        s, c = result["sample"], result["cubin"]
        w("devbin tour\n")
        w(f"1. sample device library in the unified model: {s['functions']} functions "
          f"({len(model.kernels)} kernels), {len(model.prototypes)} prototypes\n")
        w(f"2. wrote {s['file']} ({s['size']} bytes); devbin sections: "
          + ", ".join(f"{n} {b} B" for n, b in s["sections"].items()) + "\n")
        w(f"3. read back: decoded model {'equals' if round_trip else 'DIFFERS FROM'} the original\n")
        w("4. imported the shipped sm_90 relocatable cubin (ptxas -c sample.ptx):\n")
        for f in c["resources"]["functions"]:
            w(f"   {f['kind']:7} {f['name']}: REG {f['registers']} (EIATTR_REGCOUNT {f['regcount']}), "
              f"STACK {f['stack']}, SHARED {f['shared']}, LOCAL {f['local']}\n")
        w("   " + format_text(imported, c["resources"]["arch"]).replace("\n", "\n   ").rstrip() + "\n")
        w(f"5. annotated it: {c['size_before']} -> {c['size_after']} bytes, "
          + ", ".join(f"{n} {b} B" for n, b in c["sections"].items()) + "; "
          + ("every loadable byte, symbol and relocation unchanged" if not diffs else "; ".join(diffs))
          + f"; read back {'equals' if cubin_round_trip else 'DIFFERS FROM'} the imported model\n")
        w(f"   -> {c['file']}\n")
        a = result["amdgpu"]
        w(f"6. imported the shipped AMDGPU code object ({amd_arch}, clang-19 sample.cl):\n")
        for f in amd_model.functions:
            regs = (f"VGPR {f.uint(StdAttr.REGS_GENERAL)}, SGPR {f.uint(StdAttr.REGS_SCALAR)}, "
                    f"private {f.uint(StdAttr.PRIVATE_BYTES)}, group {f.uint(StdAttr.SHARED_BYTES)}, "
                    f"kernarg {f.uint(StdAttr.PARAM_BYTES)}" if f.is_kernel
                    else "per-function resources not in an LLVM 19 object (see devbin cc)")
            w(f"   {'kernel' if f.is_kernel else 'device':7} {f.name}: {regs}\n")
        w("   " + format_text(amd_model, amd_arch).replace("\n", "\n   ").rstrip() + "\n")
        w(f"7. annotated it: {a['size_before']} -> {a['size_after']} bytes; "
          + ("every loadable byte, symbol and relocation unchanged" if not amd_diffs else "; ".join(amd_diffs))
          + f"; read back {'equals' if amd_round_trip else 'DIFFERS FROM'} the imported model\n")
        w(f"   -> {a['file']}\n")
        for line in packaging_lines + sa_lines + link_lines + load_lines + size_lines + intel_lines:
            w(line + "\n")
        if args.details:
            w("16. devbin inspect of the three code objects:\n\n")
            for rep in result["inspect"]:
                render_elf(rep, out)
                w("\n")
        else:
            from devbin.escape.text import visible
            w("16. the three code objects (`devbin inspect FILE` prints the ELF tables of each; "
              "`devbin tour --details` prints all three here):\n")
            for rep in result["inspect"]:
                h = rep["header"]
                w(f"   {visible(rep['file'])}: {h['machine_name']} {h['type_name']}, {h['size']:,} bytes, "
                  f"{len(rep['sections'])} sections, {len(rep['symbols'])} symbols, "
                  f"{len(rep['relocations'])} relocations\n")
    ok = (round_trip and cubin_round_trip and amd_round_trip and not diffs and not amd_diffs and packaging_ok
          and sa_ok and link_ok and load_ok and size_ok and intel_ok)
    return 0 if ok else 1
