"""prune's PTX policy (issue 28 item 4): ``--ptx kept|none|highest``, pack's vocabulary (docs/PRUNE.md).

Inputs are built here with ``write_fatbin`` from the fixture cubin and PTX; the byte comparison with
``nvprune -arch`` is in tests/test_prune_linked.py (it needs nvcc).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from devbin.errors import UsageError
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.formats.fatbin import FatbinImage, write_fatbin
from devbin.formats.fatbin import constants as FC
from devbin.formats.wheel import record_hash
from devbin.images import scan_bytes
from devbin.packaging.prune_packages import prune_wheel
from devbin.packaging.pruning import PRUNE_PTX_POLICIES, prune

from tests.runners import cli_err

FIXTURES = Path(__file__).parent / "fixtures"
CUBIN = (FIXTURES / "sample_sm90.cubin").read_bytes()
PTX = (FIXTURES / "sample.ptx").read_bytes()


def _fatbin(sass: tuple[int, ...], ptx: tuple[int, ...] = ()) -> bytes:
    return write_fatbin([FatbinImage(FC.KIND_ELF, sm, CUBIN) for sm in sass]
                        + [FatbinImage(FC.KIND_PTX, sm, PTX) for sm in ptx])


def _kept(data: bytes) -> list[str]:
    return [i.arch for i in scan_bytes(data, "x", all=True)]




def test_each_policy_on_a_fatbin() -> None:
    data = _fatbin((80, 90), (80, 90, 100))
    kept = prune(data, keep="sm_90")
    assert _kept(kept.data) == ["sm_90", "compute_90"]
    assert prune(data, keep="sm_90", ptx="kept").data == kept.data  # the default: outputs as before
    assert _kept(prune(data, keep="sm_90", ptx="none").data) == ["sm_90"]  # nvprune -arch sm_90's rule
    assert _kept(prune(data, keep="sm_90", ptx="highest").data) == ["sm_90", "compute_90", "compute_100"]
    assert _kept(prune(data, drop="sm_80", ptx="none").data) == ["sm_90"]
    assert _kept(prune(data, drop="sm_90,sm_100", ptx="highest").data) == ["sm_80", "compute_80", "compute_100"]


def test_highest_is_per_container() -> None:
    """Each fatbin is its own code: one whose highest PTX is compute_90 keeps it, beside one with compute_100."""
    ar = write_archive([ArMember("a.fatbin", _fatbin((80, 90), (80, 90))),
                        ArMember("b.fatbin", _fatbin((80, 90), (80, 100)))])
    out = prune(ar, keep="sm_80", ptx="highest")
    assert _kept(out.data) == ["sm_80", "compute_80", "compute_90", "sm_80", "compute_80", "compute_100"]
    assert not out.notes
    assert _kept(prune(ar, keep="sm_80").data) == ["sm_80", "compute_80", "sm_80", "compute_80"]


def test_policies_and_their_notes() -> None:
    data = _fatbin((80, 90), (100,))
    assert prune(data, keep="sm_90").notes == [
        "input: the result keeps no PTX: GPUs newer than sm_90 cannot JIT it (the input had compute_100 PTX); "
        "to keep it, keep sm_90,compute_100 or pass --ptx highest"]
    assert prune(data, keep="sm_90", ptx="none").notes == [
        "input: --ptx none: no PTX kept (the input had compute_100 PTX); GPUs newer than sm_90 cannot run the result"]
    assert prune(data, keep="sm_90", ptx="highest").notes == []
    assert prune(_fatbin((80, 90)), keep="sm_90", ptx="none").notes == []  # no PTX to lose: nothing to say


def test_contradictions_and_bad_names_are_refused() -> None:
    data = _fatbin((90,), (90,))
    with pytest.raises(UsageError, match="keep compute_90 names PTX/LTO-IR only, which --ptx none drops"):
        prune(data, keep="sm_90,compute_90", ptx="none")
    with pytest.raises(UsageError, match="ptx='newest': expected one of kept, none, highest"):
        prune(data, keep="sm_90", ptx="newest")
    with pytest.raises(UsageError, match="leaves no device image"):
        prune(_fatbin((), (90,)), drop="sm_80", ptx="none")


def test_cli_ptx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fb = tmp_path / "k.fatbin"
    fb.write_bytes(_fatbin((80, 90), (90, 100)))
    code, out, err = cli_err("prune", fb, "--keep", "sm_90", "--ptx", "highest", "-o", tmp_path / "h.fatbin")
    assert code == 0 and _kept((tmp_path / "h.fatbin").read_bytes()) == ["sm_90", "compute_90", "compute_100"]
    code, out, err = cli_err("prune", fb, "--keep", "sm_90", "--ptx", "none", "--dry-run", "--json")
    doc = json.loads(out)
    assert code == 0 and [i["arch"] for i in doc["images"] if i["kept"]] == ["sm_90"] and doc["ptx_policy"] == "none"
    assert doc["notes"] == [f"{fb}: --ptx none: no PTX kept (the input had compute_90, compute_100 PTX); GPUs "
                            "newer than sm_90 cannot run the result"]
    code, out, err = cli_err("prune", fb, "--keep", "sm_90", "--ptx", "newest", "--dry-run")
    assert code == 2 and "invalid choice: 'newest' (choose from 'kept', 'none', 'highest')" in err


def test_cli_choices_are_the_library_policies() -> None:
    import argparse

    from devbin.cli import prune_cmd
    p = argparse.ArgumentParser()
    prune_cmd.add_arguments(p)
    for dest in ("ptx", "spirv", "jit_ir"):  # None: not given (--jit-ir, then "kept", decide)
        action = next(a for a in p._actions if a.dest == dest)
        assert tuple(action.choices or ()) == PRUNE_PTX_POLICIES and action.default is None


def test_wheel_keeps_its_only_ptx_with_highest(tmp_path: Path) -> None:
    """The issue's case: a wheel whose only PTX is compute_100, pruned to sm_90, could not JIT on newer GPUs."""
    lib = _fatbin((80, 90), (100,))
    meta = "pkg-1.0.dist-info"
    files = {"pkg/k.fatbin": lib, f"{meta}/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
             f"{meta}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-any\n"}
    rows = [f"{n},{record_hash(d)},{len(d)}" for n, d in files.items()] + [f"{meta}/RECORD,,"]
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{meta}/RECORD", "\n".join(rows) + "\n")
    for ptx, want in (("kept", ["sm_90"]), ("highest", ["sm_90", "compute_100"]), ("none", ["sm_90"])):
        dst = tmp_path / ptx / whl.name
        dst.parent.mkdir()
        result = prune_wheel(whl, dst, keep="sm_90", ptx=ptx)
        with zipfile.ZipFile(dst) as zf:
            assert _kept(zf.read("pkg/k.fatbin")) == want, ptx
        assert any("compute_100" in n for n in result.notes) == (ptx != "highest")
