"""Names in messages and super-archive target names (issue 18, defect 8).

On main: `ar create` accepted target names with `../` or `/`; a name from a file was echoed
whole (a 500-character bundle ID made a 600-character error); an entry ID holding a newline
split `devbin select`'s error over two lines.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

import devbin.superarchive as sa
from devbin.errors import NAME_LIMIT, FormatError, UsageError, quote, short
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.formats.bundle import write_bundle, write_compressed_bundle
from devbin.formats.fatbin import constants as FC
from devbin.formats.fatbin.writer import FatbinImage, write_fatbin
from devbin.formats.offload.writer import OffloadImage, write_offload_binary
from devbin.superarchive.build import MAX_TARGET_NAME, check_target_name

from tests.elfbuild import patch_header, small_elf
from tests.runners import run_devbin

ROOT = Path(__file__).resolve().parent.parent
LONG_ID = "hipv4-amdgcn-amd-amdhsa--gfx90a\n" + "x" * 500


def _one_line(stderr: str) -> str:
    """The one ``devbin: error:`` line of ``stderr``; warnings and notes (which go to stderr too) are
    each one line of their own, and nothing else is there."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    errors = [line for line in lines if line.startswith("devbin: error: ")]
    others = [line for line in lines if not line.startswith("devbin: error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], stderr
    assert all(line.startswith(("warning: ", "note: ")) for line in others), stderr
    return errors[0]


# --------------------------------------------------------------------------- the helpers


def test_short_and_quote_cut_long_names_and_escape_control_characters() -> None:
    assert short("gfx90a") == "gfx90a" and quote("gfx90a") == "'gfx90a'"
    assert short("a\nb\x00c\x7f") == "a\\nb\\x00c\\x7f"
    long = "n" * 5000
    assert short(long) == "n" * NAME_LIMIT + "... (5000 chars)"
    assert quote(long) == repr("n" * NAME_LIMIT) + "... (5000 chars)"


def test_an_error_renders_on_one_line_with_its_location_cut() -> None:
    e = FormatError("bad\nsize", fmt="ar", where=f"lib.a({'m' * 300}\n)", value="v" * 300)
    text = str(e)
    assert "\n" not in text and len(text) < 3 * NAME_LIMIT
    assert "... (302 chars)" in text and "bad\\nsize" in text


# --------------------------------------------------------------------------- target names


@pytest.mark.parametrize("name,why", [("", "empty"), ("../x", "'/'"), ("a/b", "'/'"), ("a\\b", "'/' or '\\'"),
                                      ("x..y", "'..'"), ("a\0b", "control character"),
                                      ("a\nb", "control character"), ("a\x7f", "control character"),
                                      ("g" * (MAX_TARGET_NAME + 1), f"longer than {MAX_TARGET_NAME}")])
def test_target_names_refused(name: str, why: str) -> None:
    with pytest.raises(UsageError, match=re.escape(why)):
        check_target_name(name)
    member = sa.member_from_object("k.o", small_elf())
    with pytest.raises(UsageError):
        sa.create([sa.TargetInput(name, (member,))])


@pytest.mark.parametrize("name", ["gfx90a", "gfx90a:xnack+", "gfx942:sramecc+:xnack-", "sm_90a", "generic",
                                  "nvptx64-nvidia-cuda--sm_90", "g" * MAX_TARGET_NAME])
def test_target_names_accepted(name: str) -> None:
    check_target_name(name)


@pytest.mark.parametrize("name", ["../up", "/abs", "a/b", "x..y", "a\tb", "g" * 300])
def test_ar_create_and_add_refuse_bad_target_names(tmp_path: Path, name: str) -> None:
    (tmp_path / "k.o").write_bytes(small_elf())
    r = run_devbin("ar", "create", "-o", "lib.a", "--target", f"{name}=k.o", cwd=tmp_path)
    assert r.returncode == 1
    line = _one_line(r.stderr)
    assert "target name" in line and "a target name is one plain word" in line and len(line) < 300
    assert not (tmp_path / "lib.a").exists()
    ok = run_devbin("ar", "create", "-o", "lib.a", "--target", "gfx90a=k.o", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    r = run_devbin("ar", "add", "lib.a", "--target", f"{name}=k.o", "-o", "lib2.a", cwd=tmp_path)
    assert r.returncode == 1 and "target name" in _one_line(r.stderr)
    assert not (tmp_path / "lib2.a").exists()


# --------------------------------------------------------------------------- every error one line


def _malformed(d: Path) -> list[str]:
    """Inputs that each command refuses: names with newlines and 500 characters, sizes that lie."""
    bad = bytearray(write_bundle([(LONG_ID, b"\x7fELF" + bytes(60))], host=None))
    struct.pack_into("<Q", bad, 32 + 8, 1 << 40)  # the entry's size runs past the end
    (d / "bundle-past-end.bin").write_bytes(bad)
    ccob = bytearray(write_compressed_bundle([(LONG_ID, b"\x7fELF" + bytes(100))], version=3, host=None))
    ccob[24] ^= 1  # the hash
    (d / "ccob-bad-hash.bin").write_bytes(ccob)
    (d / "no-image-for-device.bin").write_bytes(write_bundle([(LONG_ID, bytes(64))], host=None))
    elf = small_elf()
    (d / "truncated.o").write_bytes(elf[:100])
    (d / "shoff-past-end.o").write_bytes(patch_header(elf, e_shoff=1 << 40))
    archive = write_archive([ArMember("m" * 300 + ".o", elf)])
    (d / "archive-cut.a").write_bytes(archive[:-40])
    fatbin = write_fatbin([FatbinImage(FC.KIND_ELF, 90, elf, identifier="k\n" + "i" * 300 + ".cu", major=1,
                                       minor=8)])
    (d / "fatbin-cut.fatbin").write_bytes(fatbin[:-16])
    offload = write_offload_binary([OffloadImage.of(elf, strings={"triple": "amdgcn-amd-amdhsa\n" + "t" * 300,
                                                                  "arch": "gfx90a"})])
    (d / "offload-cut.bin").write_bytes(offload[:-8])
    lib = bytearray(sa.create([sa.TargetInput("gfx90a", (sa.member_from_object("k.o", elf),))]))
    lib[-20] ^= 0x20  # a member byte: the archive no longer matches its manifest (stale)
    (d / "superarchive-stale.a").write_bytes(lib)
    return sorted(p.name for p in d.iterdir())


COMMANDS = [["inspect"], ["list"], ["extract", "-o", "out"], ["resources"], ["callgraph"],
            ["select", "--device", "gfx90a"], ["link", "-o", "out.o"], ["prune", "--keep", "gfx90a", "-o", "out.o"],
            ["ar", "list"], ["ar", "extract", "--target", "gfx90a", "-o", "out.a"], ["load"]]


@pytest.mark.slow  # a child process per command, ~10 s: not in the quick tier
def test_every_error_is_one_line(tmp_path: Path) -> None:
    failed: dict[str, int] = {}
    for name in _malformed(tmp_path):
        for cmd in COMMANDS:
            args = [*cmd[:1], name, *cmd[1:]] if cmd[0] != "ar" else [*cmd[:2], name, *cmd[2:]]
            r = run_devbin(*args, cwd=tmp_path)
            assert "Traceback" not in r.stderr, (args, r.stderr)
            if r.returncode == 0:
                continue
            if r.returncode == 3:  # no device code in it (the stale super-archive's member is a host ELF)
                assert r.stdout == "" and r.stderr == f"devbin: {name}: does not contain device code\n", (args, r)
                continue
            assert r.returncode == 1, (args, r.stderr)
            line = _one_line(r.stderr)
            assert len(line) < 600, (args, line)  # names from the file are cut
            failed[cmd[0]] = failed.get(cmd[0], 0) + 1
    assert set(failed) == {c[0] for c in COMMANDS}  # every command refused at least one input


def test_select_error_names_a_newline_id_on_one_line(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(write_bundle([(LONG_ID, bytes(64))], host=None))
    r = run_devbin("select", "--device", "gfx90a", "b.bin", cwd=tmp_path)
    assert r.returncode == 1
    line = _one_line(r.stderr)
    # "data <target id>": the kind and the ID's target part, newline escaped, cut with its length
    shown = len("data " + LONG_ID) - len("hipv4-amdgcn-amd-amdhsa--")
    assert "\\n" + "x" * 10 in line and f"... ({shown} chars)" in line
