"""The examples of docs/PRUNE.md, docs/PACKAGING.md, docs/LOADER.md, docs/IMAGES.md and README.md, as written.

Each fenced block is read out of the document (``blocks``): the ``devbin ...`` lines of a plain block
run through the CLI (``python -m devbin``, the same argv), the ``python`` blocks run as scripts, in a
folder holding the files they name, built here: ``libx.so`` (nvcc, sm_80 and sm_90), a wheel
``pkg.whl`` and a folder ``site-packages/`` holding it, ``k.sm_80.cubin``/``k.sm_90.cubin``/``k.ptx``
(ptxas, from tests/sources/ptx), ``k.gfx90a.o``, ``kernel.cubin``, ``user.so`` and ``libfns.so`` (the
shipped samples).  Each line must exit 0 and
write what it says; the checks are on what it wrote.  docs/API.md's examples run as doctests
(tests/test_api_docs.py); docs/PRUNE.md's figures for a real wheel from PyPI are a measurement, not run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

import devbin
from devbin.formats.devsec.elf import read_code_object
from devbin.images.address import Address, escape, unescape
from devbin.packaging.pruning import prune_file
from devbin.samples import sample_path
from devbin.targets.nvidia import code_object_from_symbols

from tests.conftest import PTX_DIR, require_tool
from tests.runners import run_devbin, run_tool
from tests.test_prune_linked import LIB_CU
from tests.wheelbuild import build_wheel

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def blocks(doc: str, lang: str = "") -> list[str]:
    """The fenced blocks of docs/``doc`` (README.md: the README) whose info string is ``lang`` (``""``: a
    plain fence), in order."""
    found: list[str] = []
    body: list[str] | None = None
    info = ""
    for line in (ROOT / (doc if doc == "README.md" else f"docs/{doc}")).read_text().splitlines():
        if body is None and line.startswith("```"):
            body, info = [], line[3:].strip()
        elif body is not None and line == "```":
            if info == lang:
                found.append("\n".join(body) + "\n")
            body = None
        elif body is not None:
            body.append(line)
    return found


def devbin_lines(block: str) -> list[list[str]]:
    """The argv (after ``devbin``) of each command of a shell block; ``\\`` continues a line, ``#`` starts
    a comment."""
    lines = block.replace("\\\n", " ").splitlines()
    return [shlex.split(ln, comments=True)[1:] for ln in lines if ln.startswith("devbin ")]


def devbin_ok(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``devbin *argv`` in a child process (tools on this PATH), which must succeed."""
    r = run_devbin(*argv, cwd=cwd, env={"PATH": os.environ["PATH"]})
    assert r.returncode == 0, (argv, r.stderr)
    return r


@pytest.fixture(scope="module")
def libx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CUDA shared library with sm_80 and sm_90 cubins in its .nv_fatbin."""
    out = tmp_path_factory.mktemp("docs-libx")
    (out / "lib.cu").write_text(LIB_CU)
    run_tool([require_tool("nvcc"), "-gencode", "arch=compute_80,code=sm_80", "-gencode",
              "arch=compute_90,code=sm_90", "-shared", "-Xcompiler", "-fPIC", "lib.cu", "-o", "libx.so"], out)
    return out / "libx.so"


def _prune_folder(libx: Path, where: Path) -> Path:
    """A folder with what PRUNE.md's examples name: libx.so, pkg.whl, site-packages/, slim/."""
    where.mkdir()
    shutil.copy(libx, where / "libx.so")
    build_wheel(where / "pkg.whl", {"pkg/__init__.py": b"", "pkg/lib/libx.so": libx.read_bytes()})
    with zipfile.ZipFile(where / "pkg.whl") as z:
        z.extractall(where / "site-packages")
    (where / "slim").mkdir()
    return where


def _archs(path: Path) -> list[str]:
    with devbin.open(path) as src:
        return sorted({i.arch for i in src.images})


def test_prune_md_commands(libx: Path, tmp_path: Path) -> None:
    (block, *_) = blocks("PRUNE.md")
    commands = devbin_lines(block)
    assert [c[:1] for c in commands] == [["prune"]] * 5
    work = _prune_folder(libx, tmp_path / "work")
    assert _archs(work / "libx.so") == ["sm_80", "sm_90"]
    wheel_before = (work / "pkg.whl").read_bytes()
    outputs = [devbin_ok(argv, work).stdout for argv in commands]
    # 1: a new file, the input untouched
    assert _archs(work / "libx.sm90.so") == ["sm_90"] and _archs(work / "libx.so") == ["sm_80", "sm_90"]
    assert (work / "libx.sm90.so").stat().st_size < (work / "libx.so").stat().st_size
    # 2 and 5: a new wheel (the same bytes with --jobs 4), the input untouched
    assert (work / "pkg.whl").read_bytes() == wheel_before
    assert _archs(work / "slim" / "pkg.whl") == ["sm_90"]
    # 3: every library in place, a backup kept
    lib = work / "site-packages" / "pkg" / "lib" / "libx.so"
    assert _archs(lib) == ["sm_90"]
    assert [p.name for p in lib.parent.iterdir() if p.name != "libx.so"], "no backup kept"
    # 4: what would go, as JSON, nothing written
    doc = json.loads(outputs[3])
    assert doc["schema"].startswith("devbin.prune/")
    assert _archs(work / "libx.so") == ["sm_80", "sm_90"]


def run_script(block: str, where: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run a ``python`` block as a script in ``where``; its globals."""
    monkeypatch.chdir(where)
    scope: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(block, name, "exec"), scope)
    return scope


def test_prune_md_python(libx: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = blocks("PRUNE.md", "python")
    work = _prune_folder(libx, tmp_path / "work")
    scope = run_script(block, work, "docs/PRUNE.md", monkeypatch)
    r, w, t = scope["r"], scope["w"], scope["t"]
    written = prune_file(work / "libx.so", tmp_path / "out.so", keep="sm_90")
    assert r.data == written.data == (tmp_path / "out.so").read_bytes()
    assert r.file_bytes_saved == (work / "libx.so").stat().st_size - len(r.data) > 0
    assert set(r.bytes_by_arch()) >= {"sm_80"}
    assert _archs(work / "slim" / "pkg.whl") == ["sm_90"]
    assert w.output_size == (work / "slim" / "pkg.whl").stat().st_size < w.input_size
    assert _archs(work / "site-packages" / "pkg" / "lib" / "libx.so") == ["sm_90"]
    assert t is not None


def test_packaging_md_command(cubins: dict[str, Path], tmp_path: Path) -> None:
    (block, *_) = blocks("PACKAGING.md")
    (argv,) = devbin_lines(block)
    assert argv[:3] == ["pack", "-o", "app.offload"]
    shutil.copy(cubins["sm_80_exec"], tmp_path / "k.sm_80.cubin")
    shutil.copy(cubins["sm_90_exec"], tmp_path / "k.sm_90.cubin")
    shutil.copy(PTX_DIR / "kernels-whole.sm_80.ptx", tmp_path / "k.ptx")
    shutil.copy(sample_path("sample_gfx90a.o"), tmp_path / "k.gfx90a.o")
    devbin_ok(argv, tmp_path)
    with devbin.open(tmp_path / "app.offload") as src:
        got = [(i.kind, i.arch, i.get("Team")) for i in src.images]
        keys = [[k for k, _ in i.metadata] for i in src.images]
    # PACKAGING.md "Metadata": LLVM's triple and arch, then these in this order, then the user's keys
    order = ["triple", "arch", "Producer", "CompileOptions", "LinkOptions", "TargetID", "VendorId", "VendorName"]
    assert all(k[:len(order)] == order for k in keys), keys
    assert keys[3][len(order)] == "Team", keys[3]
    assert got == [("cubin", "sm_80", ""), ("cubin", "sm_90", ""), ("ptx", "compute_80", ""),
                   ("amdgpu", "gfx90a", "kernels")]


def test_prune_md_refusal_and_force_note(libx: Path, tmp_path: Path) -> None:
    """PRUNE.md's refusal line (a RECORD hash that is not the member's: exit 1, nothing written) and the
    note ``--force`` gives for a member without a row, each as the document shows it (``…``: elided)."""
    (line,) = blocks("PRUNE.md")[1].splitlines()
    lib = libx.read_bytes()
    wheel = build_wheel(tmp_path / "pkg.whl", {"pkg/__init__.py": b"", "pkg/lib/libk.so": lib})
    with zipfile.ZipFile(wheel) as z:
        members = {n: z.read(n) for n in z.namelist()}
    record = "pkg-1.0.dist-info/RECORD"
    rows = members[record].decode().splitlines()
    bad = [re.sub(r"^(pkg/lib/libk\.so),sha256=[^,]+,", r"\1,sha256=" + "A" * 43 + ",", r) for r in rows]
    unrowed = [r for r in rows if not r.startswith("pkg/lib/libk.so,")]
    for name, new_rows in (("bad.whl", bad), ("unrowed.whl", unrowed)):
        with zipfile.ZipFile(tmp_path / name, "w", zipfile.ZIP_DEFLATED) as z:
            for n, d in members.items():
                z.writestr(n, "\n".join(new_rows) + "\n" if n == record else d)
    shutil.move(tmp_path / "bad.whl", tmp_path / "pkg.whl")
    (tmp_path / "slim").mkdir()  # an output folder that does not exist is refused first (before the wheel is read)
    r = run_devbin("prune", "pkg.whl", "--keep", "sm_90", "-o", "slim/pkg.whl", cwd=tmp_path)
    assert r.returncode == 1 and not any((tmp_path / "slim").iterdir()), r.stderr
    pattern = re.sub(r"sha256=\w*…", lambda _: r"sha256=[\w-]{43}", re.escape(line))  # a digest, elided in the doc
    assert re.fullmatch(pattern, r.stderr.strip()), (line, r.stderr)
    prose = " ".join((ROOT / "docs" / "PRUNE.md").read_text().split())
    note = re.search(r"`(pkg\.whl!pkg/lib/libk\.so: no row in RECORD; --force: [^`]*)`", prose)
    assert note, "PRUNE.md no longer shows the --force note"
    shutil.move(tmp_path / "unrowed.whl", tmp_path / "pkg.whl")
    r = devbin_ok(["prune", "pkg.whl", "--keep", "sm_90", "-o", "slim/pkg.whl", "--force"], tmp_path)
    assert note[1] in r.stderr, (note[1], r.stderr)
    assert _archs(tmp_path / "slim" / "pkg.whl") == ["sm_90"]


def test_loader_md_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """LOADER.md's two blocks on the shipped user object and device-function library: the kernel's addresses
    and registers printed, the GOT slot holding lib_scale's address; lazily, the lookup maps user_kern's
    closure only (the README's tour: 4 of 7 functions, 700 of 12,096 bytes)."""
    eager, lazy = blocks("LOADER.md", "python")
    shutil.copy(sample_path("sample_load_user.so"), tmp_path / "user.so")
    shutil.copy(sample_path("sample_load_lib.so"), tmp_path / "libfns.so")
    scope = run_script(eager, tmp_path, "docs/LOADER.md", monkeypatch)
    k = scope["k"]
    assert capsys.readouterr().out == f"{k.address:#x} {k.code_address:#x} {k.registers} 0 kernel\n"
    assert k.registers == {"general": 43, "scalar": 54, "accum": 0}
    (cmd,) = devbin_lines(blocks("LOADER.md")[0])
    assert cmd[:3] == ["load", "user.so", "libfns.so"]
    out = devbin_ok(["load", "user.so", "libfns.so", "--device", "gfx90a", "--kernel", "user_kern"], tmp_path).stdout
    assert f"address      {k.address:#x}" in out
    # the page's second block goes on from the first's import
    scope = run_script("from devbin.load import Executable\n" + lazy, tmp_path, "docs/LOADER.md", monkeypatch)
    stats = scope["exe"].stats()
    assert (stats["functions_loaded"], stats["functions_total"], stats["bytes_mapped"], stats["bytes_total"]) == \
        (4, 7, 700, 12096)


def test_readme_elf_level_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The README's "At the ELF level" block on ``kernel.cubin`` (the sm_90 sample): one line per section,
    no devbin sections to read, and the annotated cubin (bytes) reads back as the imported model."""
    block = blocks("README.md", "python")[-1]
    shutil.copy(sample_path("sample_sm90.cubin"), tmp_path / "kernel.cubin")
    scope = run_script(block, tmp_path, "README.md", monkeypatch)
    lines = capsys.readouterr().out.splitlines()
    with devbin.open_elf(tmp_path / "kernel.cubin") as elf:
        assert lines == [f"{s.index} {s.name} {s.sh_type:#x} {s.sh_size}" for s in elf.sections]
    assert scope["obj"] is None and isinstance(scope["out"], bytes)
    read_back = read_code_object(devbin.parse_elf(scope["out"]))
    with devbin.open_elf(tmp_path / "kernel.cubin") as elf:
        imported = code_object_from_symbols(elf)
    assert read_back is not None  # the model, less where each function sits (the ELF symbols say that)
    assert [(f.name, f.kind, f.attributes) for f in read_back.functions] == \
        [(f.name, f.kind, f.attributes) for f in imported.functions]


def test_readme_using_it_commands(libx: Path, tmp_path: Path) -> None:
    """The README's "Using it" lines: inspect as text and the same facts as JSON; --traceback prints the
    Python stack where the plain command prints the one-line error (exit 1); --max-memory extracts a .so."""
    (block,) = [b for b in blocks("README.md", "sh") if b.startswith("devbin inspect")]
    commands = devbin_lines(block)
    assert commands == [["inspect", "kernel.cubin"], ["inspect", "kernel.cubin", "--json"],
                        ["--traceback", "inspect", "broken.o"], ["--max-memory", "1G", "extract", "lib.so"]]
    shutil.copy(sample_path("sample_sm90.cubin"), tmp_path / "kernel.cubin")
    (tmp_path / "broken.o").write_bytes(sample_path("sample_sm90.cubin").read_bytes()[:100])
    shutil.copy(libx, tmp_path / "lib.so")
    text = devbin_ok(commands[0], tmp_path).stdout
    doc = json.loads(devbin_ok(commands[1], tmp_path).stdout)
    assert doc["schema"].startswith("devbin.inspect/") and "saxpy" in text and "saxpy" in json.dumps(doc)
    plain = run_devbin(*commands[2][1:], cwd=tmp_path)
    traced = run_devbin(*commands[2], cwd=tmp_path)
    assert plain.returncode == traced.returncode == 1
    (line,) = plain.stderr.splitlines()
    # the README's form: devbin: error: <where>: <message> (at offset 0x.., value 0x..)
    assert re.fullmatch(r"devbin: error: [^:]*:? ?broken\.o: .+ \(at offset 0x[0-9a-f]+, value 0x[0-9a-f]+\)",
                        line), line
    assert "Traceback (most recent call last):" in traced.stderr
    devbin_ok(commands[3], tmp_path)
    extracted = [p.name for p in tmp_path.glob("*.cubin") if p.name != "kernel.cubin"]
    assert {re.findall(r"sm_\d+", n)[-1] for n in extracted} == {"sm_80", "sm_90"}, extracted


def test_images_md_addresses_parse_as_described() -> None:
    """IMAGES.md's example addresses parse into the steps their descriptions name and print back as
    written; its escaping example holds."""
    (block,) = [b for b in blocks("IMAGES.md") if b.startswith("k.cubin")]
    rows = [ln.split(None, 1) for ln in block.splitlines()]
    assert len(rows) == 14 and all(len(r) == 2 for r in rows)
    for text, what in rows:
        a = Address.parse(text)
        assert str(a) == text, (text, str(a))
        m = re.search(r"entry (\d+)", what)
        if m and a.entry is not None:
            assert a.entry.entry == int(m[1]), (text, what)
    assert str(Address.parse("libk.a!k.o;2").member) == "!k.o;2"
    assert escape("a!b.o") == "a%21b.o" and escape("50%") == "50%25" and unescape("a%21b.o") == "a!b.o"


def test_images_md_damaged_wheel_lines(tmp_path: Path) -> None:
    """IMAGES.md's two error lines: a truncated wheel and a wheel that is an HTML page, each one line,
    exit status 1, for ``list``, ``resources`` and ``size``."""
    (block,) = [b for b in blocks("IMAGES.md") if b.startswith("devbin: error: zip:")]
    truncated, html = block.splitlines()
    build_wheel(tmp_path / "good.whl", {"pkg/__init__.py": b"", "pkg/x.py": b"x = 1\n"})
    for want, data in ((truncated, (tmp_path / "good.whl").read_bytes()[:-30]),
                       (html, b"<html><body>404 Not Found</body></html>\n")):
        (tmp_path / "pkg.whl").write_bytes(data)
        for command in (["list"], ["resources"], ["size"]):
            r = run_devbin(*command, "pkg.whl", cwd=tmp_path)
            assert (r.returncode, r.stderr) == (1, want + "\n"), (command, r.stderr)


def test_images_md_scan_python(libx: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    """IMAGES.md's scanning block: ``torch-2.5.whl`` (a wheel holding the nvcc .so) listed image by image,
    and ``libk.a!k.o@__nv_relfatbin#0.1`` found with ``all=True`` in an archive of an ``nvcc -rdc`` object
    for sm_80 and sm_90: the sm_90 cubin, whose model has the kernel."""
    (block,) = [b for b in blocks("IMAGES.md", "python") if "scan(" in b]
    build_wheel(tmp_path / "torch-2.5.whl", {"pkg/__init__.py": b"", "torch/lib/libx.so": libx.read_bytes()})
    (tmp_path / "k.cu").write_text(LIB_CU)
    run_tool([require_tool("nvcc"), "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
              "-rdc=true", "-Xcompiler", "-fPIC", "-c", "k.cu", "-o", "k.o"], tmp_path)
    run_tool([require_tool("ar"), "rcs", "libk.a", "k.o"], tmp_path)
    scope = run_script(block, tmp_path, "docs/IMAGES.md", monkeypatch)
    printed = capsys.readouterr().out.splitlines()
    with devbin.open("torch-2.5.whl") as src:  # still in tmp_path, where the block ran
        assert printed == [f"{i.address} {i.kind} {i.arch} {i.size}" for i in src.images] and printed
    image, cubin, model = scope["image"], scope["cubin"], scope["model"]
    assert (image.kind, image.arch, len(cubin)) == ("cubin", "sm_90", image.size)
    assert any(f.is_kernel for f in model.functions)


def test_json_md_schema_table_is_what_devbin_schema_lists(tmp_path: Path) -> None:
    """JSON.md's table names every schema ``devbin schema`` lists, and no other; its example object is the
    shape ``devbin list --json`` prints (``schema`` first, then ``images`` and ``warnings``)."""
    text = (ROOT / "docs" / "JSON.md").read_text()
    table = text.split("| schema | command |", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"`(devbin\.[a-z-]+/\d+)`", table))
    listed = {ln.split()[1] for ln in devbin_ok(["schema"], tmp_path).stdout.splitlines()}
    assert documented == listed, (documented ^ listed)
    (example,) = blocks("JSON.md", "json")
    want = list(json.loads(example.replace("[...]", "[]")))
    doc = json.loads(devbin_ok(["list", "--json", str(sample_path("sample_sm90.cubin"))], tmp_path).stdout)
    assert list(doc) == want and doc["schema"] == "devbin.list/1"


def test_readme_command_table_matches_the_cli(tmp_path: Path) -> None:
    """The README's command table has one row per ``devbin`` command (``ar``: its actions) and every flag a
    row shows is one that command's ``--help`` documents (for ``a|b|c`` actions: one of them)."""
    from devbin.cli.main import COMMANDS
    rows = re.findall(r"^\| `devbin ([^`]+)` \|", (ROOT / "README.md").read_text(), re.M)
    assert {r.split()[0] for r in rows} == set(COMMANDS)
    ar_help = devbin_ok(["ar", "--help"], tmp_path).stdout.split("positional arguments:", 1)[1]
    ar_actions = set(re.findall(r"^    ([a-z]+)(?:  |$)", ar_help, re.M))
    assert len(ar_actions) >= 9, ar_help
    shown: set[str] = set()
    for row in rows:
        words = row.split()
        variants = [[words[0], a] for a in words[1].split("\\|")] if words[0] == "ar" else [[words[0]]]
        shown.update(v[1] for v in variants if len(v) > 1)
        helps = [devbin_ok([*v, "--help"], tmp_path).stdout for v in variants]
        for flag in set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", row)):
            assert any(re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", h) for h in helps), (row, flag)
    # add and remove are named in the create row's description ("`add`, `remove` a target later")
    assert shown | {"add", "remove"} == ar_actions, (shown, ar_actions)


@pytest.mark.parametrize(("policy", "kept", "warns"), [
    (None, ["compute_90"], False), ("highest", ["compute_90"], False), ("lowest", ["compute_80"], False),
    ("all", ["compute_80", "compute_90"], False), ("none", [], True), ("sm_80", ["compute_80"], False),
    ("sm_70", None, False)])
def test_packaging_md_ptx_policy(tmp_path: Path, policy: str | None, kept: list[str] | None, warns: bool) -> None:
    """PACKAGING.md's PTX policies on one unit of loose images (an sm_90 cubin, compute_80 and compute_90
    PTX): highest is the default; none warns that no newer GPU could JIT; a list naming no PTX there is an
    error (exit 1, nothing written)."""
    text = " ".join((ROOT / "docs" / "PACKAGING.md").read_text().split())
    assert "**`highest` (default)**" in text and "A list policy (`sm_80,sm_90`) is an error only when no unit" in text
    shutil.copy(sample_path("sample_sm90.cubin"), tmp_path / "k.sm_90.cubin")
    shutil.copy(PTX_DIR / "kernels-whole.sm_80.ptx", tmp_path / "a.ptx")
    shutil.copy(PTX_DIR / "kernels-whole.sm_90.ptx", tmp_path / "b.ptx")
    argv = ["pack", "-o", "p.offload", "--image", "file=k.sm_90.cubin", "--image", "file=a.ptx", "--image",
            "file=b.ptx", *(["--ptx", policy] if policy else [])]
    r = run_devbin(*argv, cwd=tmp_path)
    if kept is None:
        assert r.returncode == 1 and not (tmp_path / "p.offload").exists(), r.stderr
        return
    assert r.returncode == 0, r.stderr
    with devbin.open(tmp_path / "p.offload") as src:
        assert [i.arch for i in src.images] == ["sm_90", *kept]
    assert ("no PTX that a GPU newer than the highest SASS (sm_90) could JIT" in r.stderr) == warns, r.stderr


def test_architecture_md_layer_map_names_files_that_exist() -> None:
    """Every ``devbin/...`` path of ARCHITECTURE.md's layer map exists under src/, and every ``*.py``/``*.c``
    file a line names is in the package that line (or the line above it) describes, or at devbin's top."""
    (block,) = [b for b in blocks("ARCHITECTURE.md") if b.startswith("cli ")]
    top = SRC / "devbin"
    package = top
    checked = 0
    for line in block.splitlines():
        paths = re.findall(r"(devbin/[\w/]*\w(?:\.py)?/?)", line)
        for path in paths:
            assert (SRC / path).exists(), path
            checked += 1
        if paths and paths[0].endswith("/"):
            package = SRC / paths[0]
        for name in re.findall(r"(?<![\w./])(\w+\.(?:py|c))\b", line):
            if f"devbin/{name}" in line or any(p.endswith(name) for p in paths):
                continue
            found = [*package.rglob(name), *top.glob(name)]
            assert found, (name, package, line)
            checked += 1
    assert checked > 40
