"""The command line: golden text and JSON, errors, pipes, the tour."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devbin.samples import sample_elf_bytes

from tests.runners import cli, run_devbin

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).parent / "fixtures"
UPDATE = bool(os.environ.get("DEVBIN_UPDATE_GOLDEN"))


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with DEVBIN_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"output differs from {path} (DEVBIN_UPDATE_GOLDEN=1 regenerates)"


@pytest.fixture()
def sample_o(tmp_path: Path) -> Path:
    p = tmp_path / "sample.o"
    p.write_bytes(sample_elf_bytes())
    return p


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("which", ["sample.o", "sample_sm90.cubin"])
def test_inspect_golden(which: str, fmt: str, sample_o: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = sample_o if which == "sample.o" else FIXTURES / which
    monkeypatch.chdir(path.parent)
    args = ["inspect", path.name] + (["--json"] if fmt == "json" else [])
    code, text = cli(*args)
    assert code == 0
    _golden(f"{which}.inspect.{'json' if fmt == 'json' else 'txt'}", text)


def test_json_and_text_show_the_same_facts(sample_o: Path) -> None:
    _, text = cli("inspect", str(sample_o))
    _, js = cli("inspect", str(sample_o), "--json")
    data = json.loads(js)["images"][0]  # one code object: one entry of "images" (devbin.inspect/1)
    for s in data["sections"]:
        assert s["name"] in text
    for f in data["devbin"]["functions"]:
        assert f" {f['name']}  [" in text
    assert data["devbin"]["target"]["target_id"] == "sample"
    assert isinstance(data["header"]["flags"], int) and data["header"]["machine_name"] == "EM_NONE"


def test_inspect_is_deterministic(sample_o: Path) -> None:
    assert cli("inspect", str(sample_o), "--json") == cli("inspect", str(sample_o), "--json")


@pytest.mark.parametrize("content,needle", [(b"\x7fELF\x02\x01\x01", "e_ident")])
def test_errors_are_one_line(tmp_path: Path, content: bytes, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "bad.bin"
    p.write_bytes(content)
    code, out = cli("inspect", str(p))
    err = capsys.readouterr().err
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("devbin: error: ") and needle in err


@pytest.mark.parametrize("content", [b"", b"hello world", b"!<arch>\n"])
def test_no_device_code_is_one_line_and_status_3(tmp_path: Path, content: bytes,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """An empty file, bytes of no known format, an empty archive: cuobjdump's "does not contain device code"."""
    p = tmp_path / "bad.bin"
    p.write_bytes(content)
    code, out = cli("inspect", str(p))
    err = capsys.readouterr().err
    assert code == 3 and out == ""
    assert err == f"devbin: {p}: does not contain device code\n"


def test_missing_file_and_truncated_elf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = cli("inspect", str(tmp_path / "nope.o"))
    err = capsys.readouterr().err
    assert code == 1 and "nope.o" in err and err.count("\n") == 1
    p = tmp_path / "cut.o"
    p.write_bytes(sample_elf_bytes()[:1500])
    code, _ = cli("inspect", str(p))
    err = capsys.readouterr().err
    assert code == 1 and "cut.o" in err and "offset" in err and err.count("\n") == 1


def test_traceback_flag_raises(tmp_path: Path) -> None:
    from devbin.errors import DeviceBinaryError

    p = tmp_path / "bad.bin"
    p.write_bytes(b"\x7fELF\x02\x01\x01")
    with pytest.raises(DeviceBinaryError):
        cli("--traceback", "inspect", str(p))


def test_closed_pipe_exits_quietly(sample_o: Path) -> None:
    cmd = f"{sys.executable} -m devbin inspect {sample_o} | head -n 1"
    p = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], capture_output=True, text=True, check=False,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert p.stdout.count("\n") == 1
    assert p.stderr == "" and p.returncode == 0


def test_tour(tmp_path: Path) -> None:
    code, text = cli("tour", "--out", str(tmp_path))
    assert code == 0
    assert "decoded model equals the original" in text
    assert "every loadable byte, symbol and relocation unchanged" in text
    assert (tmp_path / "sample.o").exists() and (tmp_path / "sample_sm90_rdc.annotated.cubin").exists()
    code, js = cli("tour", "--out", str(tmp_path), "--json")
    data = json.loads(js)
    assert code == 0 and data["sample"]["round_trip_equal"] and data["cubin"]["loader_differences"] == []
    assert data["amdgpu"]["round_trip_equal"] and data["amdgpu"]["loader_differences"] == []
    assert data["amdgpu"]["callgraph"]["nodes"][1]["calls"] == ["axpy_one"]
    assert data["cubin"]["round_trip_equal"] and data["cubin"]["callgraph"]["nodes"][1]["calls"] == ["axpy_one"]
    sa = data["superarchive"]
    assert sa["saved_bytes"] == len((Path(__file__).parents[1] / "src/devbin/samples/sample.ptx").read_bytes())
    assert sa["targets"]["sm_90"]["chain"] == ["sm_90", "compute_90"]
    assert [(r["symbol"], r["taken"]) for r in sa["resolve"]["explain_cos16"]] == [
        ("cos16", "base(cos16.o)"), ("cos8", "gfx90a(cos8.o)"), ("cos1", "gfx90a:xnack+(cos1.o)")]
    assert "bytes saved" in text and "devbin ar resolve --explain cos16" in text
    usage = {u["kernel"]: u for u in data["link"]["resources"]}
    # AMDGPU: the stack is the private segment, resources' "local" (own and through the call graph)
    assert usage["kern_main"]["own"]["local"] == 0 and usage["kern_main"]["total"]["local"] == 68
    assert {r["name"] for r in data["link"]["removed"]} >= {"unused_fn", "helper_fn"}
    assert "kern_main: stack 0->68" in text
    load = data["load"]
    assert load["before_lookup"] == {"bytes_mapped": 0, "functions_loaded": 0}
    assert load["kernel"]["name"] == "user_kern" and load["kernel"]["kind"] == "kernel"
    assert {s["name"] for s in load["closure"]} == {"user_kern", "user_helper", "lib_scale", "lib_offset",
                                                    "user_table", "lib_counter", "lib_factor"}
    assert load["got_slot"]["target_object"] == "sample_load_lib.so"
    assert load["got_slot"]["value"] == next(s["address"] for s in load["closure"] if s["name"] == "lib_scale")
    assert load["stats"]["functions_loaded"] == 4 and load["stats"]["lazy"]
    assert "13. loaded the sample user object and device-function library lazily" in text
    assert "lazy: 4 of 7 functions" in text and "16. devbin inspect" not in text
    intel = data["zebin"]  # step 15: the member named for each IP version; generic_ir on a GPU none is built for
    assert [(p["device"], (p["chosen"] or "").rpartition("!")[2], p["jit"]) for p in intel["select"]] == [
        ("12.55.8", "64.12.55.8", False), ("12.60.7", "64.12.60.7", False),
        ("12.70.4", "generic_ir@SPIRV Object", True)]
    assert {f["name"] for f in intel["functions"]} == {"saxpy"} and "15. the shipped Intel sample" in text
    # the summary first: each code object on one line, the ELF tables only with --details (they were 250 lines)
    assert text.count("\n") < 120 and f"   {tmp_path / 'sample_gfx90a.annotated.o'}: EM_AMDGPU ET_REL, " in text
    code, details = cli("tour", "--out", str(tmp_path), "--details")
    assert code == 0 and details.startswith(text.split("16. ")[0]) and "16. devbin inspect" in details
    assert details.count("\n") > text.count("\n") + 200 and cli("tour", "--out", str(tmp_path))[1] == text
    assert "14. devbin size --keep sm_90" in text and data["size"]["files"][0]["savings"]["bytes"] == (
        data["packaging"]["prune"]["input_size"] - data["packaging"]["prune"]["output_size"]) > 0
    again = cli("tour", "--out", str(tmp_path), "--json")[1]
    assert again == js  # the tour prints the same bytes every run


def test_module_entry_flushes_its_output_and_keeps_the_status(tmp_path: Path) -> None:
    """The console entry ends the process without the interpreter's teardown (os._exit): what it wrote
    is all there, and the exit status is the command's."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    (tmp_path / "notes.txt").write_text("no device code\n")
    cubin = Path(__file__).parents[1] / "src/devbin/samples/sample_sm90.cubin"
    runs = {}
    for name, argv in (("ok", ["list", "--json", str(cubin)]), ("missing", ["list", str(tmp_path / "gone.o")]),
                       ("none", ["list", str(tmp_path / "notes.txt")])):
        with open(tmp_path / f"{name}.out", "w") as out:
            p = subprocess.run([sys.executable, "-m", "devbin", *argv], stdout=out, stderr=subprocess.PIPE,
                               text=True, check=False, env=env)
        runs[name] = (p.returncode, (tmp_path / f"{name}.out").read_text(), p.stderr)
    code, out, err = runs["ok"]
    assert code == 0 and err == "" and out.endswith("}\n")
    assert json.loads(out) == json.loads(cli("list", "--json", str(cubin))[1])
    assert runs["missing"][0] == 1 and runs["missing"][2].count("\n") == 1 and "gone.o" in runs["missing"][2]
    assert runs["none"][0] == 3 and "does not contain device code" in runs["none"][2]


def test_help_and_module_entry() -> None:
    p = run_devbin("--help")
    assert p.returncode == 0 and "inspect" in p.stdout and "tour" in p.stdout


def test_help_shows_no_sphinx_markup_and_every_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    """``devbin --help`` showed ``:class:`devbin.errors.FormatWarning` `` and reST ````literals````, and
    left out exit status 4 (``size --budget``); every command's --help is rendered by the same rule."""
    from devbin.cli.main import COMMANDS
    for argv in (["--help"], *([name, "--help"] for name in COMMANDS)):
        with pytest.raises(SystemExit):
            cli(*argv)
        text = capsys.readouterr().out
        for markup in (":class:`", ":func:`", ":mod:`", ":data:`", ":meth:`", ":attr:`", "``"):
            assert markup not in text, (argv, markup)
    with pytest.raises(SystemExit):
        cli("--help")
    text = capsys.readouterr().out
    assert "4 a `devbin size --budget` rule is exceeded" in text
    assert "`devbin size --html -o report.html`" in text and "`devbin callgraph FILE --svg -o graph.svg`" in text


def test_pictures_are_written_to_dash_o(tmp_path: Path, sample_o: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One output convention: ``size --html -o OUT`` and ``callgraph --svg -o OUT`` (they took ``--html OUT``
    and ``--svg OUT``, unlike every other writer); the old spelling still writes the same file, with a note."""
    from devbin.samples import sample_path
    cubin = str(sample_path("sample_sm90_rdc.cubin"))
    new, old = tmp_path / "new.svg", tmp_path / "old.svg"
    assert cli("callgraph", cubin, "--svg", "-o", str(new))[0] == 0
    assert capsys.readouterr().err == ""
    assert cli("callgraph", cubin, "--svg", str(old))[0] == 0
    assert "note: --svg OUT is the old spelling of --svg -o OUT" in capsys.readouterr().err
    assert new.read_bytes() == old.read_bytes() and new.read_bytes().startswith(b"<svg")
    page = tmp_path / "r.html"
    assert cli("size", cubin, "--html", "-o", str(page))[0] == 0 and page.read_bytes().startswith(b"<!DOCTYPE html")
    for bad in (["size", cubin, "--html"], ["size", cubin, "-o", str(page)], ["size", cubin, "--html", "x", "-o", "y"],
                ["callgraph", cubin, "-o", str(new)]):
        assert cli(*bad)[0] == 2, bad


def test_readme_command_rows_name_real_flags() -> None:
    """Every flag the README's command table gives `devbin size`, `callgraph`, `prune` and `list` is one
    their parser accepts, and each writer's file is spelled ``-o OUT`` (the convention `devbin --help` states)."""
    from devbin.cli.main import build_parser
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for name in ("size", "callgraph", "prune", "list"):
        (row,) = [ln for ln in readme.splitlines() if ln.startswith(f"| `devbin {name} ")]
        usage = row.split("` |")[0]
        sub = build_parser(name)._subparsers._group_actions[0].choices[name]  # type: ignore[union-attr]
        known = {s for a in sub._actions for s in a.option_strings}
        flags = set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", usage))
        assert flags and flags <= known, (name, flags - known)
        assert "--html OUT" not in row and "--svg OUT" not in row
