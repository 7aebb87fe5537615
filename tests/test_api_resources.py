"""``Function.resources`` through ``devbin.open()``, function by function, against the vendors' tools.

* cubins (the ``cubins`` and ``wide_cubins`` fixtures, and ``spill.cu``'s cubins built here): every
  function's REG, STACK, SHARED, LOCAL and CONSTANT[n] as ``cuobjdump -res-usage`` prints them;
  the spill/refill instructions as ``cuobjdump -elf`` lists them (``SpillRefill`` annotations),
  non-zero only where ``ptxas -v`` reports spill bytes, and 0 for the recursive ``descend``, whose
  spill bytes ptxas does not mark (docs/API.md, footnote 2).
* AMDGPU code objects (the ``amdgpu_objects`` fixture and ``spill.cl``'s objects built here): every
  kernel's ``.sgpr_count``, ``.vgpr_count``, ``.agpr_count``, ``.private_segment_fixed_size``,
  ``.group_segment_fixed_size``, ``.sgpr_spill_count``, ``.vgpr_spill_count``,
  ``.kernarg_segment_size`` and ``.max_flat_workgroup_size`` as ``llvm-readelf-19 --notes`` prints them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

import devbin
from devbin.model import CodeObject, Function

from tests.conftest import PTX_DIR, SOURCES, require_tool
from tests.runners import run_tool


def _code_objects(path: Path) -> list[CodeObject]:
    """Every code object devbin.open() finds in ``path``, in `devbin list` order."""
    with devbin.open(path) as src:
        objs = [co for image in src.images if (co := image.code_object()) is not None]
    assert objs, path
    return objs


# --------------------------------------------------------------------------- NVIDIA

_FUNCTION = re.compile(r"^ Function (\S+):$")
_FIELD = re.compile(r"([A-Z]+(?:\[\d+\])?):(\d+)")


def _res_usage(path: Path) -> list[tuple[str, dict[str, int]]]:
    """(function, {REG: .., STACK: .., CONSTANT[0]: ..}) for every function block cuobjdump prints, in order."""
    out: list[tuple[str, dict[str, int]]] = []
    lines = run_tool([require_tool("cuobjdump"), "-res-usage", path]).stdout.splitlines()
    for i, line in enumerate(lines):
        if m := _FUNCTION.match(line):
            out.append((m[1], {k: int(v) for k, v in _FIELD.findall(lines[i + 1])}))
    return out


def _regcounts(path: Path) -> dict[str, int]:
    """EIATTR_REGCOUNT per function, as ``cuobjdump -elf`` prints the global ``.nv.info``."""
    text = run_tool([require_tool("cuobjdump"), "-elf", path]).stdout
    return {m[1]: int(m[2]) for m in re.finditer(r"function: (\S+)\(0x[0-9a-f]+\)\s+register count: (\d+)", text)}


def _spill_refills(path: Path) -> dict[str, int]:
    """SpillRefill annotations per ``.nv.info.<f>`` section, as ``cuobjdump -elf`` lists them."""
    out: dict[str, int] = {}
    current = ""
    for line in run_tool([require_tool("cuobjdump"), "-elf", path]).stdout.splitlines():
        if line.startswith(".nv.info."):
            current = line[len(".nv.info."):].strip()
        elif not line.startswith(("\t", " ")):
            current = ""
        if current and "SpillRefill" in line:
            out[current] = out.get(current, 0) + 1
    return out


def _check_cubin(path: Path) -> list[Function]:
    """Every function's resources equal cuobjdump -res-usage's line for it; returns the functions."""
    functions = [f for co in _code_objects(path) for f in co.functions]
    theirs = _res_usage(path)
    by_name = {f.name: f for f in functions}  # a CodeObject keeps its functions by name
    assert len(by_name) == len(functions) and sorted(by_name) == sorted(name for name, _ in theirs), path
    regcount = _regcounts(path)
    for name, want in theirs:
        f = by_name[name]
        r = f.resources
        got = {"REG": r.registers, "STACK": r.stack if not r.dynamic_stack else 0xFFFFFFFF, "SHARED": r.shared,
               "LOCAL": r.local, **{f"CONSTANT[{b}]": s for b, s in r.constant_banks}}
        if r.stack is None and not r.dynamic_stack:
            got["STACK"] = 0  # no stack record: cuobjdump prints 0
        if not f.is_kernel and want["REG"] == 0 and name in regcount:
            # sm_90 and later keep a device function's registers only in EIATTR_REGCOUNT (the .text
            # sh_info byte, which cuobjdump prints, is 0): Resources gives the count the cubin records.
            want = {**want, "REG": regcount[name]}
        assert got == {k: v for k, v in want.items() if k not in ("TEXTURE", "SURFACE", "SAMPLER")}, (path, name)
    return functions


def test_cubin_resources_equal_cuobjdump(cubins: dict[str, Path], wide_cubins: dict[str, Path]) -> None:
    checked = 0
    for path in {**cubins, **wide_cubins}.values():
        checked += len(_check_cubin(path))
    assert checked > 40


@pytest.fixture(scope="session")
def spill_cubins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """spill.cu's PTX assembled by ptxas for sm_80 and sm_90, relocatable and executable, with ``-v``'s text."""
    ptxas = require_tool("ptxas")
    out = tmp_path_factory.mktemp("spill")
    built: dict[str, tuple[Path, str]] = {}
    for arch in ("sm_80", "sm_90"):
        for kind, opts in (("rdc", ["-c"]), ("exec", [])):
            cubin = out / f"spill.{arch}.{kind}.cubin"
            p = run_tool([ptxas, f"-arch={arch}", *opts, "-v", "-o", cubin, PTX_DIR / "spill.sm_80.ptx"])
            built[f"{arch}_{kind}"] = (cubin, p.stdout + p.stderr)
    return built


def _ptxas_spills(text: str) -> dict[str, int]:
    """Spill store + load bytes per function, from ``ptxas -v``."""
    out: dict[str, int] = {}
    current = ""
    for line in text.splitlines():
        if m := re.search(r"Function properties for (\S+)", line):
            current = m[1]
        elif m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
            out[current] = int(m[1]) + int(m[2])
    return out


def test_cubin_spills_equal_cuobjdump_and_ptxas(spill_cubins: dict[str, tuple[Path, str]]) -> None:
    for key, (path, verbose) in spill_cubins.items():
        functions = _check_cubin(path)
        marked, spilled = _spill_refills(path), _ptxas_spills(verbose)
        for f in functions:
            n = f.resources.spill_instructions
            assert n == marked.get(f.name, 0), (key, f.name)
            assert n == 0 or spilled.get(f.name, 0) > 0, (key, f.name, n, spilled)
        by_name = {f.name: f.resources for f in functions}
        pressure = by_name["pressure"]
        assert pressure.spill_instructions and pressure.registers == 32 and pressure.max_threads == 1024, key
        assert by_name["calm"].spill_instructions == 0, key
        if key.endswith("_rdc"):  # in an executable cubin descend is folded into recurse's code (no symbol)
            # ptxas -v reports spill bytes for the recursive function and marks none of them (docs/API.md ²)
            descend = by_name["descend"]
            assert spilled["descend"] > 0 and "descend" not in marked, (key, spilled)
            assert descend.spill_instructions == 0 and descend.frame, (key, descend)


def test_api_md_spill_footnote_states_what_the_cubin_records(spill_cubins: dict[str, tuple[Path, str]]) -> None:
    """docs/API.md's footnote on ``spill_instructions`` gives ptxas's numbers for ``descend`` (sm_80,
    relocatable) and its fields; main's footnote said the count is "non-zero exactly when ptxas reports
    spill bytes", which ``descend`` (20 bytes of spill stores, 0 marks) contradicts."""
    text = " ".join((Path(__file__).parent.parent / "docs" / "API.md").read_text().split())
    assert "exactly when ptxas reports spill bytes" not in text
    m = re.search(r"`descend` in `tests/sources/spill.cu`: `ptxas -arch=sm_80 -v` reports (\d+) bytes of spill "
                  r"stores and a (\d+)-byte frame; `spill_instructions` is (\d+), `frame` (\d+)", text)
    assert m, "API.md footnote 2 no longer names descend's numbers"
    path, verbose = spill_cubins["sm_80_rdc"]
    stores = re.search(r"Function properties for descend\s+(\d+) bytes stack frame, (\d+) bytes spill stores", verbose)
    assert stores and (int(m[1]), int(m[2])) == (int(stores[2]), int(stores[1]))
    (descend,) = [f.resources for co in _code_objects(path) for f in co.functions if f.name == "descend"]
    assert (int(m[3]), int(m[4])) == (descend.spill_instructions, descend.frame)


def test_cubin_resources_from_bytes_equal_from_path(spill_cubins: dict[str, tuple[Path, str]]) -> None:
    """bytes (what numba and cuda.core hold) give the same records as the path."""
    path, _ = spill_cubins["sm_90_exec"]
    from_path = [f.resources for co in _code_objects(path) for f in co.functions]
    co = devbin.open(path.read_bytes()).images[0].code_object()
    assert co is not None and [f.resources for f in co.functions] == from_path


def test_fatbin_resources_equal_cuobjdump(spill_cubins: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    """A compressed fatbin (two cubins and PTX) opened whole: its images in cuobjdump's order, PTX without a
    code object, every function of every cubin as cuobjdump -res-usage prints it."""
    fatbin = tmp_path / "spill.fatbin"
    run_tool([require_tool("fatbinary"), f"--create={fatbin}", "-64", "--compress-mode=size",
              f"--image3=kind=elf,sm=80,file={spill_cubins['sm_80_exec'][0]}",
              f"--image3=kind=elf,sm=90,file={spill_cubins['sm_90_exec'][0]}",
              f"--image3=kind=ptx,sm=80,file={PTX_DIR / 'spill.sm_80.ptx'}"])
    with devbin.open(fatbin) as src:
        assert [(i.kind, i.arch) for i in src.images] == [("cubin", "sm_80"), ("cubin", "sm_90"), ("ptx", "compute_80")]
        assert src.images[2].code_object() is None
        ours = []
        for image in src.images[:2]:
            co = image.code_object()
            assert co is not None
            ours.append({f.name: f.resources for f in co.functions})
    theirs = _res_usage(fatbin)  # one block per cubin, in file order
    assert len(theirs) == sum(len(o) for o in ours)
    for (name, want), block in zip(theirs, [o for o in ours for _ in o], strict=True):
        r = block[name]
        assert (r.stack, r.shared, r.local, r.constant(0)) == (want["STACK"], want["SHARED"], want["LOCAL"],
                                                                want.get("CONSTANT[0]", 0)), name


# --------------------------------------------------------------------------- AMDGPU

_NOTE_KEYS = {  # Resources field -> metadata note key
    "sgprs": ".sgpr_count", "vgprs": ".vgpr_count", "agprs": ".agpr_count", "local": ".private_segment_fixed_size",
    "shared": ".group_segment_fixed_size", "sgpr_spills": ".sgpr_spill_count", "vgpr_spills": ".vgpr_spill_count",
    "params": ".kernarg_segment_size", "max_threads": ".max_flat_workgroup_size",
}


def _note_kernels(path: Path) -> list[dict[str, Any]]:
    text = run_tool([require_tool("llvm-readelf-19"), "--notes", path]).stdout
    docs = [yaml.safe_load(d) for d in re.findall(r"^\s*---\n(.*?)^\s*\.\.\.\s*$", text, re.S | re.M)]
    return [k for d in docs for k in (d.get("amdhsa.kernels") or [])]


def _check_amdgpu(path: Path) -> dict[str, Function]:
    (co,) = _code_objects(path)
    functions = {f.name: f for f in co.functions}
    kernels = _note_kernels(path)
    assert sorted(f.name for f in functions.values() if f.is_kernel) == sorted(k[".name"] for k in kernels), path
    for k in kernels:
        r = functions[k[".name"]].resources
        got = {field: getattr(r, field) for field in _NOTE_KEYS}
        assert got == {field: k.get(key) for field, key in _NOTE_KEYS.items()}, (path, k[".name"])
        assert r.registers == k[".vgpr_count"] and r.dynamic_stack == bool(k.get(".uses_dynamic_stack")), path
        assert r.spill_instructions is None and r.constant_banks == (), path
    return functions


def test_amdgpu_resources_equal_readelf_notes(amdgpu_objects: dict[str, Path]) -> None:
    checked = 0
    for name, path in amdgpu_objects.items():
        if name.endswith(("_obj", "_so")) and name != "bundled_obj":
            checked += len(_check_amdgpu(path))
    assert checked >= 12


def test_amdgpu_spills_equal_readelf_notes(tmp_path: Path) -> None:
    clang = require_tool("clang-19")
    for gfx in ("gfx90a", "gfx1030"):
        obj = tmp_path / f"spill.{gfx}.o"
        run_tool([clang, "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-c", f"-mcpu={gfx}",
                  "-o", obj, SOURCES / "spill.cl"])
        functions = _check_amdgpu(obj)
        pressure, calm = functions["pressure"].resources, functions["calm"].resources
        assert pressure.vgpr_spills and pressure.local, gfx  # spilled into scratch
        assert calm.vgpr_spills == 0 and calm.sgpr_spills == 0 and calm.local == 0, gfx
