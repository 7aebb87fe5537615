"""Forgiving input, exact errors (issue 27, items 1-3 and the prune parts of 11).

Every input is built here: fatbins from the fixture cubin and PTX with ``write_fatbin`` (each entry's
header names its architecture), wheels of them with a RECORD that vouches for every member.  Each test
says what ``main`` did before the change (the defect) in a comment.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from devbin.errors import UsageError
from devbin.formats.fatbin import FatbinImage, write_fatbin
from devbin.formats.fatbin import constants as FC
from devbin.formats.offload.writer import OffloadImage, write_offload_binary
from devbin.packaging.prune_packages import prune_wheel

from tests.runners import cli_err
from tests.wheelbuild import build_wheel

FIXTURES = Path(__file__).parent / "fixtures"
CUBIN = (FIXTURES / "sample_sm90.cubin").read_bytes()
PTX = (FIXTURES / "sample.ptx").read_bytes()


def _fatbin(path: Path, sass: tuple[int, ...], ptx: tuple[int, ...] = ()) -> Path:
    images = [FatbinImage(FC.KIND_ELF, sm, CUBIN) for sm in sass] + [FatbinImage(FC.KIND_PTX, sm, PTX) for sm in ptx]
    path.write_bytes(write_fatbin(images))
    return path






def _kept(doc: dict[str, object]) -> list[str]:
    images = doc["images"]
    assert isinstance(images, list)
    return sorted(i["arch"] for i in images if i["kept"])


# --------------------------------------------------------------------------- item 1: architecture lists


def test_one_parser_repeatable_and_commas_canonical() -> None:
    from devbin.targets.archnames import parse_arch_list  # new: the one parser (here so the file runs on main)

    assert parse_arch_list(["sm_80", "SM_90,gfx90A", "sm_80"]) == ("sm_80", "sm_90", "gfx90a")
    assert parse_arch_list("gfx90a:XNACK+,compute_100F") == ("gfx90a:xnack+", "compute_100f")
    for bad, meant in [("sm90", "sm_90"), ("90", "sm_90"), ("9.0", "sm_90"), ("compute90", "compute_90"),
                       ("gfx90a:xnack", "gfx90a")]:
        with pytest.raises(UsageError, match=f"did you mean {meant}\\?$"):
            parse_arch_list(bad, option="--keep")
    with pytest.raises(UsageError, match=r"^--arch sm_900: no NVIDIA architecture of that name; did you mean sm_90 "):
        parse_arch_list("sm_900", option="--arch")
    with pytest.raises(UsageError, match=r"^gfx9000: no AMD processor gfx9000; did you mean gfx900 "):
        parse_arch_list("gfx9000")
    with pytest.raises(UsageError, match="empty architecture name"):
        parse_arch_list("sm_90,")


def test_keep_repeated_keeps_every_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fb = _fatbin(tmp_path / "k.fatbin", (80, 86, 90))
    # before: --keep sm_80 --keep sm_90 kept sm_90 only (argparse kept the last value)
    code, out, err = cli_err("prune", fb, "--keep", "sm_80", "--keep", "sm_90", "--dry-run", "--json")
    assert code == 0, err
    assert _kept(json.loads(out)) == ["sm_80", "sm_90"]
    code, out, err = cli_err("prune", fb, "--drop", "sm_80", "--drop", "SM_86", "--dry-run", "--json")
    assert code == 0 and _kept(json.loads(out)) == ["sm_90"], err


def test_arch_takes_commas_and_any_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fb = _fatbin(tmp_path / "k.fatbin", (80, 90))
    # before: --arch sm_80,sm_90 was a usage error; --arch SM_90 too
    code, out, err = cli_err("list", "--json", "--arch", "sm_80,SM_90", fb)
    assert code == 0, err
    assert sorted(i["arch"] for i in json.loads(out)["images"]) == ["sm_80", "sm_90"]
    ob = tmp_path / "k.offload"
    ob.write_bytes(write_offload_binary([OffloadImage.of(b"x" * 40, strings={"arch": "gfx90a"})]))
    # before: --arch gfx90A printed nothing, exit 0
    code, out, err = cli_err("list", "--json", "--arch", "gfx90A", ob)
    assert code == 0 and [i["arch"] for i in json.loads(out)["images"]] == ["gfx90a"], err


@pytest.mark.parametrize(("given", "meant"), [("sm90", "sm_90"), ("90", "sm_90"), ("sm_900", "sm_90")])
def test_not_an_architecture_says_which_one(given: str, meant: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    fb = _fatbin(tmp_path / "k.fatbin", (80, 90))
    # before: sm90 and 90 were usage errors without a suggestion; sm_900 listed nothing, exit 0
    code, out, err = cli_err("list", "--arch", given, fb)
    assert (code, out) == (2, "")
    assert err.startswith(f"devbin: error: --arch {given}: ") and f"did you mean {meant}" in err
    assert err.count("\n") == 1
    # before: prune --keep sm90,sm_80 wrote an sm_80-only file, exit 0
    dest = tmp_path / "out.fatbin"
    code, out, err = cli_err("prune", fb, "--keep", f"{given},sm_80", "-o", dest)
    assert code == 2 and f"--keep {given}: " in err and f"did you mean {meant}" in err
    assert not dest.exists()


def test_select_device_any_case_and_the_one_meant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fb = _fatbin(tmp_path / "k.fatbin", (80, 90))
    # before: SM_90 was "unknown device", exit 2
    code, out, err = cli_err("select", fb, "--device", "SM_90")
    assert code == 0 and "#0.1: sm_90 (SASS)" in out, err
    # before: sm90 and 90 named no device meant; sm_900 looked for a 90.0 GPU (exit 1)
    for given in ("sm90", "90", "sm_900"):
        code, out, err = cli_err("select", fb, "--device", given)
        assert code == 2 and out == "" and "did you mean sm_90" in err and err.count("\n") == 1, err


def test_arch_filter_that_takes_nothing_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fb = _fatbin(tmp_path / "k.fatbin", (90,), (90,))
    # before: empty output, exit 0 (as cuobjdump -arch, which prints nothing)
    code, out, err = cli_err("list", "--arch", "sm_80", fb)
    assert (code, out) == (1, "")
    assert err == "devbin: error: --arch sm_80 matches no image; the input holds compute_90, sm_90\n"


def test_keep_of_an_absent_architecture_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fb = _fatbin(tmp_path / "k.fatbin", (80, 90))
    dest = tmp_path / "out.fatbin"
    # before: exit 0, an sm_90-only file written, a note at the end
    code, _out, err = cli_err("prune", fb, "--keep", "sm_70,sm_90", "-o", dest)
    assert code == 1 and not dest.exists()
    assert err == f"devbin: error: {fb}: keep sm_70 matches no image; the file holds sm_80, sm_90\n"


# --------------------------------------------------------------------------- item 2: one library stops a wheel


def _fft_wheel(tmp_path: Path) -> tuple[Path, bytes]:
    """A CUDA FFT-like wheel: ``cufft`` holds sm_80 and sm_90, ``cufftw`` sm_52 only."""
    narrow = _fatbin(tmp_path / "w.fatbin", (52,)).read_bytes()
    wide = _fatbin(tmp_path / "f.fatbin", (80, 90)).read_bytes()
    files = {"pkg/cufft.fatbin": wide, "pkg/cufftw.fatbin": narrow}
    return build_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", files), narrow


def test_wheel_library_without_the_kept_arch_stays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whl, narrow = _fft_wheel(tmp_path)
    (tmp_path / "slim").mkdir()
    # before: exit 1 "the selection sm_90 leaves no device image", nothing written
    code, out, err = cli_err("prune", whl, "--keep", "sm_90", "-o", tmp_path / "slim", "--json")
    assert code == 0, err
    dest = tmp_path / "slim" / whl.name
    with zipfile.ZipFile(dest) as z:
        assert z.read("pkg/cufftw.fatbin") == narrow
    files = {f["name"]: f for f in json.loads(out)["files"]}
    assert files["pkg/cufftw.fatbin"]["untouched"] == "no image of sm_90 in it (sm_52 only); kept byte-identical"
    assert files["pkg/cufft.fatbin"]["untouched"] == "" and files["pkg/cufft.fatbin"]["file_bytes_saved"] > 0
    assert (f"{whl}!pkg/cufftw.fatbin: no image of sm_90 in it (sm_52 only); kept byte-identical"
            in json.loads(out)["notes"])


def test_wheel_missing_fail_fails_before_the_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    whl, _ = _fft_wheel(tmp_path)
    import devbin.packaging.prune_packages as pp

    def no_work(*a: object, **k: object) -> object:
        raise AssertionError("a library was pruned before the check")

    monkeypatch.setattr(pp, "prune", no_work)
    dest = tmp_path / "out.whl"
    code, _out, err = cli_err("prune", whl, "--keep", "sm_90", "--missing", "fail", "-o", dest)
    assert code == 1 and not dest.exists()
    assert err == (f"devbin: error: {whl}: the selection sm_90 leaves no device image in pkg/cufftw.fatbin (sm_52); "
                   "nothing was written (missing=keep leaves such a library as it is)\n")
    # a kept name no library holds: refused before the work too
    with pytest.raises(UsageError, match=r"keep sm_70 matches no image; the package holds sm_52, sm_80, sm_90$"):
        prune_wheel(whl, dest, keep="sm_70,sm_90")


# --------------------------------------------------------------------------- item 3: -o DIR/


def test_output_folder_names_the_file_after_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    whl, _ = _fft_wheel(tmp_path)
    # before: -o slim/ with no folder slim wrote a file named "slim"
    code, _out, err = cli_err("prune", whl, "--keep", "sm_80", "-o", f"{tmp_path / 'slim'}/")
    assert code == 1 and not (tmp_path / "slim").exists()
    assert err == (f"devbin: error: {tmp_path / 'slim'}/: cannot write: no such folder "
                   "(a name ending in / names a folder)\n")
    # before: an existing folder failed "Is a directory" after the work
    (tmp_path / "slim").mkdir()
    code, _out, err = cli_err("prune", whl, "--keep", "sm_80", "-o", f"{tmp_path / 'slim'}/")
    assert code == 0, err
    assert [p.name for p in (tmp_path / "slim").iterdir()] == [whl.name]
    # before: a missing parent failed only after the work
    code, _out, err = cli_err("prune", whl, "--keep", "sm_80", "-o", tmp_path / "no" / "x.whl")
    assert code == 1 and err == f"devbin: error: {tmp_path / 'no' / 'x.whl'}: cannot write: the folder " \
                                f"{tmp_path / 'no'} does not exist\n"


def test_annotate_into_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "d").mkdir()
    # before: "d: cannot write: Is a directory"
    code, _out, err = cli_err("annotate", FIXTURES / "sample_sm90.cubin", "-o", tmp_path / "d")
    assert code == 0, err
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["sample_sm90.cubin"]


def test_output_over_the_input_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fb = _fatbin(tmp_path / "k.fatbin", (80, 90))
    before = fb.read_bytes()
    # before: "... choose another output, or pass --in-place (in_place=True)"
    for dest in (fb, tmp_path):  # the file itself; its folder (-o DIR: DIR/k.fatbin, the input again)
        code, _out, err = cli_err("prune", fb, "--keep", "sm_90", "-o", dest)
        assert code == 1 and fb.read_bytes() == before
        assert err == (f"devbin: error: {fb}: refusing to write over the input {fb}; choose another output, "
                       "or pass --in-place\n")


# --------------------------------------------------------------------------- item 11: the only PTX dropped


def test_prune_says_when_the_result_keeps_no_ptx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fb = _fatbin(tmp_path / "k.fatbin", (80, 90), (100,))
    warning = (f"{fb}: the result keeps no PTX: GPUs newer than sm_90 cannot JIT it (the input had "
               "compute_100 PTX); to keep it, keep sm_90,compute_100 or pass --ptx highest")
    # before: the compute_100 PTX dropped without a word
    code, out, err = cli_err("prune", fb, "--keep", "sm_90", "--dry-run", "--json")
    assert code == 0 and warning in json.loads(out)["notes"]
    code, out, err = cli_err("prune", fb, "--keep", "sm_90", "--dry-run")
    assert code == 0 and f"note: {warning}\n" in err
    code, out, err = cli_err("prune", fb, "--keep", "sm_90,compute_100", "--dry-run")
    assert code == 0 and "PTX" not in err
