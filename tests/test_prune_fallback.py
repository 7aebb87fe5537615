"""prune never silently takes from a kept GPU the last image it loads in a container
(devbin.packaging.load_fallback; docs/PRUNE.md, "What a kept GPU loads").

cuFFT 11.4.1.4 holds thousands of fatbins whose only image a sm_90 GPU loads is low PTX (compute_50,
compute_70 ...), JIT-compiled by the driver; ``--keep sm_90`` used to empty them.  Inputs are built with
``write_fatbin`` from the fixture cubin and PTX, and with nvcc (two translation units: one PTX-only, one
sm_90 cubin), checked with cuobjdump.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devbin.formats.ar.writer import ArMember, write_archive
from devbin.formats.fatbin import FatbinImage, write_fatbin
from devbin.formats.fatbin import constants as FC
from devbin.images import scan_bytes
from devbin.packaging.pruning import prune
from devbin.size.report import file_savings

from tests.conftest import require_tool
from tests.runners import cli_err, run_tool

FIXTURES = Path(__file__).parent / "fixtures"
CUBIN = (FIXTURES / "sample_sm90.cubin").read_bytes()
PTX = (FIXTURES / "sample.ptx").read_bytes()


def _fatbin(sass: tuple[int, ...] = (), ptx: tuple[int, ...] = (), lto: tuple[int, ...] = ()) -> bytes:
    return write_fatbin([FatbinImage(FC.KIND_ELF, sm, CUBIN) for sm in sass]
                        + [FatbinImage(FC.KIND_PTX, sm, PTX) for sm in ptx]
                        + [FatbinImage(FC.KIND_LTOIR, sm, PTX) for sm in lto])


def _kept(data: bytes) -> list[str]:
    return [i.arch for i in scan_bytes(data, "x", all=True)]


# a.fatbin: sm_90 code; b.fatbin: only compute_50 PTX (cuFFT's case); c.fatbin: sm_80 SASS and PTX a sm_90
# GPU JITs (compute_60 is its choice: the highest not above it)
LIB = write_archive([ArMember("a.fatbin", _fatbin((90,), (90,))), ArMember("b.fatbin", _fatbin((), (50,))),
                     ArMember("c.fatbin", _fatbin((80,), (50, 60)))])


def test_kept_keeps_the_ptx_a_kept_gpu_jits() -> None:
    r = prune(LIB, keep="sm_90")
    assert _kept(r.data) == ["sm_90", "compute_90", "compute_50", "compute_60"]
    assert (r.fallback_images, r.unloadable_containers) == (2, 0)
    assert r.notes == ["input: kept 2 image(s) the selection drops (1 compute_50 PTX, 1 compute_60 PTX): the code "
                       "sm_90 loads from their containers (the driver's choice there, JIT-compiled); --ptx none drops "
                       "the PTX among them"]
    assert r.to_dict()["fallback_images"] == 2 and r.to_dict()["unloadable_containers"] == 0


def test_highest_keeps_them_by_its_own_rule() -> None:
    r = prune(LIB, keep="sm_90", ptx="highest")
    assert _kept(r.data) == ["sm_90", "compute_90", "compute_50", "compute_60"]
    assert (r.fallback_images, r.unloadable_containers, r.notes) == (0, 0, [])


def test_highest_ptx_above_the_gpu_does_not_count() -> None:
    """The highest PTX of a container (compute_100) does not JIT on sm_90: its compute_50 is kept too."""
    r = prune(write_archive([ArMember("a.fatbin", _fatbin((90,))), ArMember("b.fatbin", _fatbin((), (50, 100)))]),
              keep="sm_90", ptx="highest")
    assert _kept(r.data) == ["sm_90", "compute_50", "compute_100"] and r.fallback_images == 1


def test_none_drops_them_and_counts_the_containers() -> None:
    r = prune(LIB, keep="sm_90", ptx="none")
    assert _kept(r.data) == ["sm_90"]
    assert (r.fallback_images, r.unloadable_containers) == (0, 2)
    assert r.notes[-1] == ("input: 2 container(s) no longer hold code sm_90 can load: what it loaded there (1 "
                           "compute_50 PTX, 1 compute_60 PTX) went by --ptx none; those kernels fail to load on it")


def test_sass_a_kept_gpu_runs_is_kept_under_every_policy() -> None:
    """sm_86 runs sm_80 SASS (same major, lower minor): a container holding only sm_80 keeps it, also under
    --ptx none (which is about PTX)."""
    lib = write_archive([ArMember("a.fatbin", _fatbin((86,))), ArMember("b.fatbin", _fatbin((80,), (80,)))])
    for ptx in ("kept", "none", "highest"):
        r = prune(lib, keep="sm_86", ptx=ptx)
        assert _kept(r.data)[:2] == ["sm_86", "sm_80"] and r.unloadable_containers == 0, ptx
    assert _kept(prune(lib, keep="sm_86", ptx="highest").data) == ["sm_86", "sm_80", "compute_80"]  # no JIT


def test_drop_keeps_what_the_remaining_gpus_load_unless_it_names_the_image() -> None:
    """--drop sm_50 names compute_50 only through nvprune's sm_NN rule: sm_90 still loads it (c.fatbin's
    compute_50 goes: sm_80 loads its SASS, sm_90 its compute_60).  --drop compute_50 names the image itself:
    it goes, and the note counts the container."""
    r = prune(LIB, drop="sm_50")
    assert _kept(r.data) == ["sm_90", "compute_90", "compute_50", "sm_80", "compute_60"]
    assert r.fallback_images == 1 and r.notes[-1].startswith("input: kept 1 image(s) the selection drops "
                                                             "(1 compute_50 PTX): the code sm_90 loads from")
    r = prune(LIB, drop="compute_50")
    assert "compute_50" not in _kept(r.data) and r.unloadable_containers == 1
    assert r.notes[-1] == ("input: 1 container(s) no longer hold code sm_90, sm_80 can load: what they loaded "
                           "there (1 compute_50 PTX) went by --drop; those kernels fail to load on them")


def test_a_container_nothing_kept_loads_before_is_not_counted() -> None:
    """sm_90 loads neither sm_80 SASS nor compute_100 PTX: nothing lost, nothing to keep."""
    lib = write_archive([ArMember("a.fatbin", _fatbin((90,))), ArMember("b.fatbin", _fatbin((80,), (100,)))])
    r = prune(lib, keep="sm_90")
    assert _kept(r.data) == ["sm_90"] and (r.fallback_images, r.unloadable_containers) == (0, 0)


def test_emptied_lto_ir_is_said() -> None:
    """No driver loads LTO-IR, so no kept GPU lost it by the load rule; a library may link it at run time
    (cuFFT's 11,651 compute_50 LTO-IR fatbins): the note names it and how to keep it."""
    lib = write_archive([ArMember("a.fatbin", _fatbin((90,))), ArMember("b.fatbin", _fatbin(lto=(50,)))])
    r = prune(lib, keep="sm_90")
    assert _kept(r.data) == ["sm_90"]
    assert r.notes[-1] == ("input: emptied 1 container(s) that held LTO-IR (1 compute_50 LTO-IR): no driver loads "
                           "LTO-IR, but a library may link it at run time (nvJitLink; cuFFT's LTO callbacks do); to "
                           "keep it, keep compute_50 too")
    assert _kept(prune(lib, keep="sm_90,compute_50").data) == ["sm_90", "compute_50"]


def test_cli_json_and_size_predict_the_same(tmp_path: Path) -> None:
    lib = tmp_path / "lib.a"
    lib.write_bytes(LIB)
    code, out, err = cli_err("prune", lib, "--keep", "sm_90", "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["fallback_images"] == 2 and doc["unloadable_containers"] == 0
    assert doc["files"][0]["fallback_images"] == 2
    code, out, err = cli_err("prune", lib, "--keep", "sm_90", "--ptx", "none", "--dry-run")
    assert code == 0 and "2 container(s) no longer hold code sm_90 can load" in err
    saved = file_savings(str(lib), ["sm_90"])
    assert (saved["fallback_images"], saved["bytes"]) == (2, doc["file_bytes_saved"])
    code, out, err = cli_err("size", lib, "--keep", "sm_90", "--json")
    size = json.loads(out)
    assert code == 0 and size["savings"]["fallback_images"] == 2 and size["savings"]["unloadable_containers"] == 0
    assert size["savings"]["bytes"] == doc["file_bytes_saved"]
    code, out, err = cli_err("size", lib, "--keep", "sm_90")
    assert code == 0 and ("it keeps 2 images no name keeps (what a kept GPU loads from their containers), and 0 "
                          "containers no longer load on a kept GPU") in out


# --------------------------------------------------------------------------- nvcc


A_CU = "__global__ void jit_only(float *p) { p[threadIdx.x] = 1.0f; }\n"
B_CU = "__global__ void sass_only(float *p) { p[threadIdx.x] = 2.0f; }\n"


@pytest.fixture(scope="module")
def two_units(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shared library of two translation units: ``jit_only`` as PTX only (compute_75, the lowest nvcc 13
    builds; it dropped compute_50), ``sass_only`` as an sm_90 cubin only: on sm_90 the first runs by JIT."""
    nvcc = require_tool("nvcc")
    out = tmp_path_factory.mktemp("fallback")
    (out / "a.cu").write_text(A_CU)
    (out / "b.cu").write_text(B_CU)
    run_tool([nvcc, "-gencode", "arch=compute_75,code=compute_75", "-Xcompiler", "-fPIC", "-c", "a.cu", "-o", "a.o"],
             cwd=out)
    run_tool([nvcc, "-gencode", "arch=compute_90,code=sm_90", "-Xcompiler", "-fPIC", "-c", "b.cu", "-o", "b.o"],
             cwd=out)
    run_tool([nvcc, "-shared", "a.o", "b.o", "-o", "libab.so"], cwd=out)
    return out / "libab.so"


def _listing(path: Path) -> list[str]:
    """``cuobjdump -lelf -lptx``'s kinds and archs (``ELF sm_90``, ``PTX sm_75``: it names PTX by the SM)."""
    done = run_tool([require_tool("cuobjdump"), "-lelf", "-lptx", path], check=False)
    return sorted(f"{line.split()[0]} {line.rsplit('.', 2)[-2]}" for line in done.stdout.splitlines()
                  if line.startswith(("ELF file", "PTX file")))


@pytest.mark.parametrize(("ptx", "want", "lost"), [
    ("kept", ["ELF sm_90", "PTX sm_75"], 0),
    ("highest", ["ELF sm_90", "PTX sm_75"], 0),
    ("none", ["ELF sm_90"], 1),
])
def test_nvcc_ptx_only_unit_is_kept_for_sm_90(two_units: Path, tmp_path: Path, ptx: str, want: list[str],
                                              lost: int) -> None:
    before = _listing(two_units)
    assert "PTX sm_75" in before and "ELF sm_90" in before
    out = tmp_path / f"libab.{ptx}.so"
    code, doc_text, _err = cli_err("prune", two_units, "--keep", "sm_90", "--ptx", ptx, "-o", out, "--json")
    doc = json.loads(doc_text)
    assert code == 0 and _listing(out) == want
    assert doc["unloadable_containers"] == lost
    assert doc["fallback_images"] == (1 if ptx == "kept" else 0)


def test_a_choice_asked_away_falls_to_the_next() -> None:
    """sm_52 loads sm_50 SASS first, else compute_50 PTX: --drop sm_50 names the cubin itself (it goes) and
    the PTX only through the sm_NN rule, so sm_52 keeps the PTX; with --ptx none nothing is left for it."""
    lib = write_archive([ArMember("a.fatbin", _fatbin((52,))), ArMember("b.fatbin", _fatbin((50,), (50,)))])
    r = prune(lib, drop="sm_50")
    assert _kept(r.data) == ["sm_52", "compute_50"] and (r.fallback_images, r.unloadable_containers) == (1, 0)
    r = prune(lib, drop="sm_50", ptx="none")
    assert _kept(r.data) == ["sm_52"] and r.unloadable_containers == 1
    assert "(1 sm_50 cubin) went by --drop" in r.notes[-1]
