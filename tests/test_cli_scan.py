"""The scanning commands (list, extract, resources): exit status for bad files, the list path column.

A file named on the command line that gives no image and only warnings (truncated, corrupt)
exits 1 with one error line per file; the same file found while walking a folder or a zip
only adds a warning (exit 0).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from conftest import FIXTURES
from devbin.cli.list_cmd import fit_path
from devbin.cli.main import main
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.formats.bundle import write_bundle

from tests.runners import cli

AMD = (FIXTURES / "sample_gfx90a.o").read_bytes()
CUBIN = (FIXTURES / "sample_sm90.cubin").read_bytes()
COMMANDS = (["list"], ["list", "--json"], ["resources"], ["resources", "--json"],
            ["resources", "--format", "cuobjdump"], ["extract", "-o", "OUT"], ["extract", "--json", "-o", "OUT"],
            ["size"], ["size", "--json"])


def _run(argv: list[str], tmp: Path) -> tuple[int, str]:
    return cli(*[str(tmp / "out") if a == "OUT" else a for a in argv])


def _truncated(tmp: Path) -> dict[str, Path]:
    bundle = write_bundle([("hipv4-amdgcn-amd-amdhsa--gfx90a", AMD)], align=4096)
    files = {"elf": AMD[:len(AMD) // 2], "cubin": CUBIN[:200], "bundle": bundle[:len(bundle) - 100]}
    paths = {}
    for name, data in files.items():
        paths[name] = tmp / f"cut.{name}"
        paths[name].write_bytes(data)
    return paths


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_truncated_named_file_exits_1(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for path in _truncated(tmp_path).values():
        code, text = _run([*argv, str(path)], tmp_path)
        err = capsys.readouterr().err
        assert code == 1, (path, text)
        assert f"devbin: error: {path}: no device image could be read" in err
        assert str(path) in (text + err)  # the warning says what is wrong with it
        if "--json" in argv:
            assert json.loads(text)["warnings"]


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_bad_files_in_a_folder_or_zip_only_warn(argv: list[str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "tree"
    folder.mkdir()
    for name, path in _truncated(tmp_path).items():
        (folder / f"cut.{name}").write_bytes(path.read_bytes())
    with zipfile.ZipFile(tmp_path / "pkg.whl", "w") as z:
        for p in sorted(folder.iterdir()):
            z.write(p, f"lib/{p.name}")
    for where in (folder, tmp_path / "pkg.whl"):
        code, text = _run([*argv, str(where)], tmp_path)
        err = capsys.readouterr().err
        assert code == 0, (where, text, err)
        assert "cut.elf" in text + err and "devbin: error" not in err


@pytest.mark.parametrize("argv", [a for a in COMMANDS if a[0] != "extract"], ids=" ".join)  # extract: one PATH
def test_one_bad_file_beside_a_good_one(argv: list[str], tmp_path: Path) -> None:
    good = tmp_path / "good.o"
    good.write_bytes(AMD)
    cut = _truncated(tmp_path)["elf"]
    assert _run([*argv, str(good)], tmp_path)[0] == 0
    assert _run([*argv, str(good), str(cut)], tmp_path)[0] == 1  # the named bad file still fails


def test_archive_with_a_good_and_a_bad_member_only_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lib = tmp_path / "lib.a"
    lib.write_bytes(write_archive([ArMember("good.o", AMD), ArMember("bad.o", AMD[:len(AMD) // 2], symbols=())]))
    code, text = _run(["list", str(lib)], tmp_path)
    err = capsys.readouterr().err
    assert code == 0 and text.endswith("\n1 image\n") and "warning: " not in text  # warnings go to stderr
    assert "warning: " in err and "bad.o" in err
    lib.write_bytes(write_archive([ArMember("bad.o", AMD[:len(AMD) // 2], symbols=())]))
    assert _run(["list", str(lib)], tmp_path)[0] == 1


def test_help_states_the_exit_rule() -> None:
    from devbin.cli import extract_cmd, list_cmd, resources_cmd, size_cmd
    for mod in (list_cmd, extract_cmd, resources_cmd, size_cmd):
        assert mod.__doc__ is not None and "Exit status: 1" in mod.__doc__ and "folder" in mod.__doc__


# --------------------------------------------------------------------------- the path column


def test_fit_path_keeps_the_innermost_name() -> None:
    assert fit_path("short.o", 20) == "short.o"
    long_dir = "/very/long/folder/" * 5
    got = fit_path(f"{long_dir}lib.a!member.o@.nv_fatbin#0.1", 50)
    assert len(got) == 50 and got.endswith("...lib.a!member.o@.nv_fatbin#0.1") and got.startswith("/very/long")
    member = "b1-hipv4-amdgcn-amd-amdhsa--gfx90ab1.bc"
    got = fit_path(f"{long_dir}lib90a.a!{member}", 30)  # the name alone is longer than the column: kept whole
    assert got == f"...lib90a.a!{member}"
    assert fit_path(f"x.whl!{'d/' * 40}libk.so@.nv_fatbin#3.0", 30).endswith("...libk.so@.nv_fatbin#3.0")
    assert fit_path(f"{'d/' * 40}pkg.whl!lib/libk.so", 30).endswith("...libk.so")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_list_prints_whole_addresses_unless_on_a_terminal(tmp_path: Path) -> None:
    deep = tmp_path / ("folder-with-a-long-name-" * 3) / "lib"
    deep.mkdir(parents=True)
    names = ["k-hipv4-amdgcn-amd-amdhsa--gfx90a-with-a-long-member-name.o", "short.o"]
    lib = deep / "libk.a"
    lib.write_bytes(write_archive([ArMember(n, AMD) for n in names]))
    code, text = _run(["list", str(lib)], tmp_path)
    assert code == 0
    lines = text.splitlines()
    assert lines[0].split() == ["address", "vendor", "kind", "arch", "size", "stored", "compr.", "identifier"]
    for n in names:  # a pipe or a file gets every address whole
        line = next(x for x in lines if x.startswith(f"{lib}!{n} "))
        assert line.split()[1:4] == ["amd", "amdgpu", "gfx90a"]
    tty = _Tty()
    assert main(["list", str(lib)], tty) == 0
    rows = tty.getvalue().splitlines()[1:3]
    assert all(len(x.split(" amd ")[0].rstrip()) <= max(64, len(f"...libk.a!{names[0]}")) for x in rows)
    assert rows[0].split()[0] == f"...libk.a!{names[0]}" and rows[1].split()[0].endswith("...libk.a!short.o")
