"""Metadata bytes per kernel: AMD's msgpack note against devbin's sections (run by hand).

    python3 benchmarks/bench_amdgpu_metadata.py

Builds AMDGPU code objects with clang-19 from tests/sources/*.cl for several processors,
imports each into the unified model (kernels from the note and descriptors, device functions,
the call graph), writes the devbin sections for the same facts, and prints, per object, the
bytes of the NT_AMDGPU_METADATA note's descriptor and of the devbin sections, each divided
by the number of kernels.  The devbin sections also carry what the note does not (device
functions, the call graph), so the comparison favours AMD.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def main() -> None:
    from devbin.formats.devsec.elf import annotate, devbin_sections
    from devbin.formats.elf.reader import ElfFile
    from devbin.importers import import_code_object
    from devbin.tools import find_tool

    clang = find_tool("clang-19") or find_tool("clang", versions=("19",))
    if clang is None:
        raise SystemExit("bench: clang-19 not found")
    out = Path(tempfile.mkdtemp(prefix="devbin-amd-"))
    rows = []
    for gfx in ("gfx90a", "gfx942", "gfx1030", "gfx1100"):
        for src in ("amdgpu_kernels.cl", "amdgpu_lib.cl"):
            obj = out / f"{Path(src).stem}.{gfx}.o"
            subprocess.run([clang, "-target", "amdgcn-amd-amdhsa", f"-mcpu={gfx}", "-nogpulib", "-cl-std=CL2.0",
                            "-O2", "-c", "-o", str(obj), str(ROOT / "tests" / "sources" / src)], check=True)
            elf = ElfFile(obj.read_bytes())
            model = import_code_object(elf)
            kernels = len(model.kernels)
            if not kernels:
                continue
            note = sum(len(n.desc) for s in elf.sections if s.sh_type == 7 for n in elf.notes(s) if n.n_type == 32)
            annotated = ElfFile(annotate(elf, model))
            devbin = sum(s.sh_size for s in devbin_sections(annotated).values())
            rows.append((obj.name, kernels, len(model.functions), note, devbin))
    print(f"{'object':32} {'kernels':>7} {'funcs':>5} {'note B/kernel':>14} {'devbin B/kernel':>16} {'ratio':>6}")
    for name, k, f, note, dev in rows:
        print(f"{name:32} {k:7} {f:5} {note / k:14.0f} {dev / k:16.0f} {dev / note:6.2f}")
    tn, td = sum(r[3] for r in rows), sum(r[4] for r in rows)
    print(f"{'all':32} {sum(r[1] for r in rows):7} {sum(r[2] for r in rows):5} "
          f"{tn / sum(r[1] for r in rows):14.0f} {td / sum(r[1] for r in rows):16.0f} {td / tn:6.2f}")


if __name__ == "__main__":
    main()
