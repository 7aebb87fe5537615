"""Intel GPU test inputs, compiled at test time from ``tests/sources/intel/*.cl`` with Debian's ``ocloc``.

``build_intel(out)`` returns the paths by key:

=================== ================================================================================
``zebin``           ``kernels.cl`` for ``acm-g10`` as a zebin (``-internal_options -ze-allow-zebin``:
                    ocloc 22.43 writes the old patch-token format by default for DG2)
``zebin_pvc``       the same for ``pvc`` (Xe-HPC: 64-byte GRFs)
``spill``           ``spill.cl`` for ``acm-g10`` (IGC spills at SIMD8: a scratch buffer)
``calls``           ``calls.cl`` for ``acm-g10`` with ``IGC_FunctionControl=3`` (stack calls: functions)
``patchtoken``      ``kernels.cl`` for ``acm-g10`` in the patch-token format (``--format patchtokens``)
``patchtoken_spill`` ``spill.cl`` the same way
``spv``             ``kernels.cl`` as SPIR-V (``-spv_only``)
``fat``             ``ocloc -spirv_input`` of ``spv`` for ``acm-g10,pvc``: an ``ar`` of two zebins named by
                    IP version, ``pad_*`` members and ``generic_ir``
=================== ================================================================================

``ocloc_dump(zebin, device, out)`` runs ``ocloc disasm -dump`` (which needs ``libiga64.so`` on the
library path; Debian ships only ``libiga64.so.1``, so a link to it is made in a private folder).
Nothing built here is committed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.conftest import require_tool
from tests.runners import run_tool

SOURCES = Path(__file__).resolve().parent / "sources" / "intel"
ZEBIN = ["-internal_options", "-ze-allow-zebin"]


def compile_cl(ocloc: str, out: Path, source: Path | str, device: str, name: str, *extra: str,
             env: dict[str, str] | None = None) -> Path:
    """``ocloc compile`` into ``out/<name>``: the single output file, renamed (ocloc adds suffixes)."""
    work = out / f".{name}"
    work.mkdir()
    run_tool([ocloc, "compile", "-q", "-file", source, "-device", device, "-output", name, "-out_dir", work, *extra],
             cwd=out, env=env)
    built = [p for p in work.iterdir() if p.suffix != ".spv" or "-spv_only" in extra]
    assert len(built) == 1, built
    dest = out / name
    built[0].rename(dest)
    shutil.rmtree(work)
    return dest


def build_intel(out: Path) -> dict[str, Path]:
    ocloc = require_tool("ocloc")
    k = SOURCES / "kernels.cl"
    paths = {
        "zebin": compile_cl(ocloc, out, k, "acm-g10", "kernels.acm-g10.zebin", *ZEBIN),
        "zebin_pvc": compile_cl(ocloc, out, k, "pvc", "kernels.pvc.zebin", *ZEBIN),
        "spill": compile_cl(ocloc, out, SOURCES / "spill.cl", "acm-g10", "spill.acm-g10.zebin", *ZEBIN),
        "calls": compile_cl(ocloc, out, SOURCES / "calls.cl", "acm-g10", "calls.acm-g10.zebin", *ZEBIN,
                          env={"IGC_FunctionControl": "3"}),
        "patchtoken": compile_cl(ocloc, out, k, "acm-g10", "kernels.acm-g10.pt", "--format", "patchtokens"),
        "patchtoken_spill": compile_cl(ocloc, out, SOURCES / "spill.cl", "acm-g10", "spill.acm-g10.pt", "--format",
                                     "patchtokens"),
        "spv": compile_cl(ocloc, out, k, "acm-g10", "kernels.spv", "-spv_only"),
    }
    paths["fat"] = compile_cl(ocloc, out, paths["spv"], "acm-g10,pvc", "kernels.fat.ar", "-spirv_input", *ZEBIN)
    return paths


def ocloc_dump(zebin: Path, device: str, out: Path) -> Path:
    """``ocloc disasm -file zebin -device device -dump out/dump``: the folder it wrote."""
    ocloc = require_tool("ocloc")
    lib = out / "lib"
    lib.mkdir(exist_ok=True)
    iga = next((p for p in (Path("/usr/lib/x86_64-linux-gnu/libiga64.so.1"), Path("/usr/lib/libiga64.so.1"))
                if p.exists()), None)
    if iga is not None and not (lib / "libiga64.so").exists():
        (lib / "libiga64.so").symlink_to(iga)
    dump = out / "dump"
    dump.mkdir()  # ocloc writes nothing (and exits 0) when the folder does not exist
    ld = os.pathsep.join(p for p in (str(lib), os.environ.get("LD_LIBRARY_PATH", "")) if p)
    run_tool([ocloc, "disasm", "-file", zebin, "-device", device, "-dump", dump], env={"LD_LIBRARY_PATH": ld})
    return dump
