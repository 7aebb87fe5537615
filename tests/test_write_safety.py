"""Never lose a byte: every command that writes a file, under every way a write can go wrong.

devbin writes every file through one path (:mod:`devbin.binary.output`).  These tests hold
each writing command to it, through the CLI in a subprocess, with inputs built from the
shipped samples (copied, except for the tour, whose inputs are the shipped files themselves):

* the output is one of the inputs: the same path, a symbolic link to it, a hard link to it:
  refused in one line naming both, every input byte-identical;
* the output's folder is read-only: a one-line error, nothing left;
* a file-size limit (``RLIMIT_FSIZE``) below the output's size: a one-line error naming the
  file, the old output (or none) left as it was, no temporary file;
* killed (``SIGKILL``) in the middle of writing the output (the ``DEVBIN_TEST_HOLD_WRITE``
  hook stops it there): the old output or none, never a part;
* symbolic links planted at the temporary names devbin used to use (``OUT.tmp``,
  ``.OUT.devbin-prune.tmp``): their targets untouched;
* two writers of one output, the first stopped mid-write while the second finishes: the
  result is the second writer's output whole, then the first's whole.

After each, every file in the work folder is an input as it was, the old content, or a whole
output equal to what the same command writes in a clean folder (outputs are byte-identical run
to run), and nothing else (no temporary file).  Then the defects of issue 18 one by one, and
the helper itself in-process.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import devbin.samples
from conftest import SOURCES, require_tool
from devbin.binary import output as output_mod
from devbin.binary.output import HOLD_ENV, Inputs, atomic_output, check_destination, write_file
from devbin.errors import OutputError

from tests.runners import TOOL_TIMEOUT, run_devbin

SRC = Path(__file__).resolve().parent.parent / "src"
SAMPLES = Path(devbin.samples.__file__).resolve().parent
OLD = b"the old output, which must survive a failed write\n"

# --------------------------------------------------------------------------- running devbin


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(HOLD_ENV, None)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def devbin_held(argv: list[str], cwd: Path, hold: Path) -> subprocess.Popen[str]:
    """devbin stopped in the middle of its first output (devbin.binary.output's test hook)."""
    proc = subprocess.Popen([sys.executable, "-m", "devbin", *argv], cwd=cwd, env=_env(**{HOLD_ENV: str(hold)}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(p.name.startswith("held-") and not p.name.endswith(".part") for p in hold.iterdir()):
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"devbin {' '.join(argv)} ended (status {proc.returncode}) without stopping mid-write: "
                        f"{err.strip()[-500:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("devbin did not reach its write within 120 s")
        time.sleep(0.01)
    return proc


def one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 1, (res.returncode, res.stdout[-500:], res.stderr[-2000:])
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("devbin: error: "), res.stderr
    return lines[0]


# --------------------------------------------------------------------------- inputs


def _copy(d: Path, *names: str) -> None:
    for n in names:
        shutil.copyfile(SAMPLES / n, d / n)


def _archive(path: Path, *members: tuple[str, bytes]) -> None:
    from devbin.formats.ar.writer import ArMember, write_archive

    path.write_bytes(write_archive([ArMember(n, data) for n, data in members]))


def _superarchive(path: Path, top: bool = False) -> None:
    import devbin.superarchive as sa

    def lib(name: str) -> tuple[sa.InputMember, ...]:
        return sa.members_from_archive((SAMPLES / name).read_bytes(), where=name)

    targets = [sa.TargetInput("gfx90a", lib("sample_layer_top.a" if top else "sample_layer_mid.a"), ("gfx90a", "base")),
               sa.TargetInput("base", lib("sample_layer_base.a"))]
    path.write_bytes(sa.create(targets))


def prep_samples(d: Path) -> None:
    _copy(d, "sample_sm90.cubin", "sample_sm90_rdc.cubin", "sample_gfx90a.o", "sample_layer_base.a",
          "sample_layer_mid.a", "sample_layer_top.a", "sample_link_kern.o", "sample_link_lib.o")


def prep_package(d: Path) -> None:
    from devbin.packaging import PackInput, pack

    prep_samples(d)
    imgs = [PackInput((SAMPLES / n).read_bytes(), n) for n in ("sample_sm90.cubin", "sample_gfx90a.o")]
    (d / "app.offload").write_bytes(pack(imgs).data)


def prep_wheel(d: Path) -> None:
    """pkg.whl: the CLI mutation harness's wheel (a host library with .nv_fatbin and .hip_fatbin, an
    OffloadBinary, a RECORD that vouches for them); pkg2.whl the same with another file beside."""
    import zipfile

    from fuzz.cli_seeds import build_seeds

    data = next(s.data for s in build_seeds() if s.fmt == "wheel")
    (d / "pkg.whl").write_bytes(data)
    (d / "pkg2.whl").write_bytes(data)
    with zipfile.ZipFile(d / "pkg2.whl", "a") as z:
        z.writestr("pkg/extra/", b"")


def prep_extract(d: Path) -> None:
    """An archive k.gfx90a.o holding a gfx90a object k.o: `devbin extract` names the image k.gfx90a.o."""
    _archive(d / "k.gfx90a.o", ("k.o", (SAMPLES / "sample_gfx90a.o").read_bytes()))
    _archive(d / "v.a", ("k.o", (SAMPLES / "sample_link_kern.o").read_bytes()))


def prep_superarchives(d: Path) -> None:
    prep_samples(d)
    _superarchive(d / "sa.a")
    _superarchive(d / "sa2.a", top=True)
    shutil.copyfile(SAMPLES / "sample_load_lib.so", d / "host.so")


def prep_cc(d: Path) -> None:
    shutil.copyfile(SOURCES / "amdgpu_lib.cl", d / "k.cl")
    shutil.copyfile(SOURCES / "amdgpu_kernels.cl", d / "k2.cl")


def prep_nothing(d: Path) -> None:
    pass


def _cc(out: str, src: str) -> list[str]:
    clang = require_tool("clang-19")
    return ["cc", "--", clang, "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib", "-cl-std=CL2.0", "-O2",
            "-c", "-o", out, src]


def _dir(out: str) -> str:
    return os.path.dirname(out) or "."


@dataclass(frozen=True)
class Case:
    """One writing command.  ``command(out, src)``: its argv writing ``out`` (a folder writer
    gets ``out``'s folder) with ``src`` in place of the input the aliasing tests point the output
    at (``victim``).  ``variant``: a second writer of the same output with other bytes.
    ``product``: the output the tests watch (a folder writer's first file)."""

    id: str
    prepare: Callable[[Path], None]
    command: Callable[[str, str], list[str]]
    inputs: tuple[str, ...]
    victim: str
    product: str = "out.bin"
    variant: Callable[[str, str], list[str]] | None = None
    tools: tuple[str, ...] = ()
    folder: bool = False
    alias: str | None = None  # the output to alias to the victim, when not the product
    compiler_writes_first: bool = False  # devbin cc: the compiler writes the object before devbin does

    def argv(self, out: str | None = None, src: str | None = None, variant: bool = False) -> list[str]:
        fn = self.variant if variant and self.variant is not None else self.command
        return fn(out or self.product, src or self.victim)

    def need_tools(self) -> None:
        for t in self.tools:
            require_tool(t)


def _tour_inputs() -> tuple[str, ...]:
    return tuple(str(p) for p in sorted(SAMPLES.iterdir()) if p.is_file() and p.suffix != ".py")


CASES = [
    Case("extract", prep_extract, lambda o, s: ["extract", s, "-o", _dir(o)], ("k.gfx90a.o",), "k.gfx90a.o",
         product="out/k.gfx90a.o", variant=lambda o, s: ["extract", "v.a", "-o", _dir(o)], folder=True),
    Case("annotate", prep_samples, lambda o, s: ["annotate", s, "-o", o], ("sample_sm90.cubin",), "sample_sm90.cubin",
         variant=lambda o, s: ["annotate", "sample_gfx90a.o", "-o", o]),
    Case("pack", prep_samples,
         lambda o, s: ["pack", "-o", o, "--image", f"file={s}", "--image", "file=sample_gfx90a.o"],
         ("sample_sm90.cubin", "sample_gfx90a.o"), "sample_sm90.cubin",
         variant=lambda o, s: ["pack", "-o", o, "--image", f"file={s}"]),
    Case("prune", prep_package, lambda o, s: ["prune", s, "--keep", "sm_90", "-o", o], ("app.offload",), "app.offload",
         variant=lambda o, s: ["prune", s, "--keep", "gfx90a", "-o", o]),
    Case("prune-wheel", prep_wheel, lambda o, s: ["prune", s, "--drop", "gfx90a", "-o", o], ("pkg.whl",), "pkg.whl",
         product="out.whl", variant=lambda o, s: ["prune", "pkg2.whl", "--drop", "gfx90a", "-o", o]),
    Case("ar-create", prep_samples,
         lambda o, s: ["ar", "create", "-o", o, "--target", "gfx90a=sample_layer_mid.a", "--target", f"base={s}"],
         ("sample_layer_mid.a", "sample_layer_base.a"), "sample_layer_base.a",
         variant=lambda o, s: ["ar", "create", "-o", o, "--target", f"base={s}"]),
    Case("ar-add", prep_superarchives,
         lambda o, s: ["ar", "add", s, "--target", "top=sample_layer_top.a", "-o", o],
         ("sa.a", "sample_layer_top.a"), "sa.a",
         variant=lambda o, s: ["ar", "add", s, "--target", "other=sample_layer_top.a", "-o", o]),
    Case("ar-remove", prep_superarchives, lambda o, s: ["ar", "remove", s, "gfx90a", "-o", o], ("sa.a",), "sa.a",
         variant=lambda o, s: ["ar", "remove", "sa2.a", "gfx90a", "-o", o]),
    Case("ar-extract", prep_superarchives, lambda o, s: ["ar", "extract", s, "--target", "gfx90a", "-o", o],
         ("sa.a",), "sa.a", variant=lambda o, s: ["ar", "extract", s, "--target", "base", "-o", o]),
    Case("ar-view-single", prep_superarchives,
         lambda o, s: ["ar", "view", s, "--target", "gfx90a", "--single", "-o", o], ("sa.a",), "sa.a",
         variant=lambda o, s: ["ar", "view", s, "--target", "base", "--single", "-o", o]),
    Case("ar-view", prep_superarchives, lambda o, s: ["ar", "view", s, "--target", "gfx90a", "-o", _dir(o)],
         ("sa.a",), "sa.a", product="out/1-gfx90a.a",
         variant=lambda o, s: ["ar", "view", "sa2.a", "--target", "gfx90a", "-o", _dir(o)], folder=True),
    Case("ar-embed", prep_superarchives, lambda o, s: ["ar", "embed", "sa.a", "--into", s, "-o", o],
         ("sa.a", "host.so"), "host.so",
         variant=lambda o, s: ["ar", "embed", "sa2.a", "--into", s, "-o", o]),
    Case("callgraph-svg", prep_samples, lambda o, s: ["callgraph", s, "--svg", "-o", o], ("sample_sm90_rdc.cubin",),
         "sample_sm90_rdc.cubin", variant=lambda o, s: ["callgraph", "sample_gfx90a.o", "--svg", "-o", o]),
    Case("size-html", prep_samples, lambda o, s: ["size", s, "--html", "-o", o], ("sample_sm90_rdc.cubin",),
         "sample_sm90_rdc.cubin", variant=lambda o, s: ["size", "sample_gfx90a.o", "--html", "-o", o]),
    Case("link-map", prep_samples, lambda o, s: ["link", "sample_link_kern.o", s, "--map", o],
         ("sample_link_kern.o", "sample_link_lib.o"), "sample_link_lib.o",
         variant=lambda o, s: ["link", "sample_link_kern.o", s, "--kernels", "kern_light", "--map", o]),
    Case("link-amdgpu", prep_samples, lambda o, s: ["link", "sample_link_kern.o", s, "-o", o],
         ("sample_link_kern.o", "sample_link_lib.o"), "sample_link_lib.o",
         variant=lambda o, s: ["link", s, "sample_link_kern.o", "-o", o], tools=("ld.lld-19",)),
    Case("link-nvidia", prep_samples, lambda o, s: ["link", s, "-o", o], ("sample_sm90_rdc.cubin",),
         "sample_sm90_rdc.cubin", tools=("nvlink",)),
    Case("cc", prep_cc, _cc, ("k.cl",), "k.cl", product="out.o", variant=lambda o, s: _cc(o, "k2.cl"),
         tools=("clang-19",), compiler_writes_first=True),
    Case("tour", prep_nothing, lambda o, s: ["tour", "--out", _dir(o)], _tour_inputs(),
         str(SAMPLES / "sample_sm90_rdc.cubin"), product="out/sample.o", folder=True,
         alias="out/sample_sm90_rdc.cubin"),
]
IDS = [c.id for c in CASES]


# --------------------------------------------------------------------------- what a folder holds


def snapshot(d: Path, extra: tuple[str, ...] = ()) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under ``d`` (relative name -> ('file', bytes) / ('link', target)), and ``extra`` files."""
    out: dict[str, tuple[str, bytes | str]] = {}
    for root, dirs, files in os.walk(d):
        for n in files + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            p = Path(root, n)
            rel = str(p.relative_to(d))
            out[rel] = ("link", os.readlink(p)) if p.is_symlink() else ("file", p.read_bytes())
    for e in extra:
        if os.path.isabs(e):
            out[e] = ("file", Path(e).read_bytes())
    return out


def assert_nothing_partial(d: Path, before: dict[str, tuple[str, bytes | str]], reference: dict[str, bytes],
                           case: Case, also: tuple[bytes, ...] = ()) -> None:
    """Every entry of ``d`` is as it was, or a whole output equal to ``reference``; inputs unchanged."""
    after = snapshot(d, tuple(i for i in case.inputs if os.path.isabs(i)))
    for name in case.inputs:
        key = name
        assert after.get(key) == before.get(key), f"input {name} changed"
    for name, (kind, value) in after.items():
        allowed = [before[name]] if name in before else []
        if name in reference:
            allowed.append(("file", reference[name]))
        allowed += [("file", a) for a in also if name == case.product]
        assert (kind, value) in allowed, (f"{name}: neither as it was nor a whole output "
                                          f"({kind}, {len(value)} bytes)")
    assert not [n for n in after if ".tmp" in n and n not in before], after.keys()


# --------------------------------------------------------------------------- the reference outputs


_REFERENCE: dict[tuple[str, bool], dict[str, bytes]] = {}


def reference(case: Case, tmp_root: Path, variant: bool = False) -> dict[str, bytes]:
    """The files ``case`` writes in a clean folder (relative name -> bytes)."""
    key = (case.id, variant)
    if key not in _REFERENCE:
        d = Path(tempfile.mkdtemp(dir=tmp_root))
        case.prepare(d)
        if case.folder:
            (d / _dir(case.product)).mkdir(exist_ok=True)
        before = snapshot(d)
        res = run_devbin(*case.argv(variant=variant), cwd=d)
        assert res.returncode == 0, (case.id, res.stderr[-2000:])
        _REFERENCE[key] = {n: v for n, (k, v) in snapshot(d).items()
                           if n not in before and k == "file" and isinstance(v, bytes)}
        assert case.product in _REFERENCE[key], (case.id, sorted(_REFERENCE[key]))
    return _REFERENCE[key]


def compiled(case: Case, tmp_root: Path) -> bytes:
    """devbin cc: what the compiler alone writes (the old content devbin replaces)."""
    d = Path(tempfile.mkdtemp(dir=tmp_root))
    case.prepare(d)
    argv = case.argv()
    # not run_tool: that marks every case of the tests calling this `tool`, and only `cc` cases compile
    subprocess.run(argv[2:], cwd=d, check=True, capture_output=True, timeout=TOOL_TIMEOUT)
    return (d / case.product).read_bytes()


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("write-safety-ref")


def setup_case(case: Case, d: Path, old: bool = True) -> None:
    case.need_tools()
    case.prepare(d)
    if case.folder:
        (d / _dir(case.product)).mkdir(exist_ok=True)
    if old:
        (d / case.product).write_bytes(OLD)


# --------------------------------------------------------------------------- the output is an input


def _aliasings() -> Iterator[object]:
    for c in CASES:
        for how in ("path", "symlink", "hardlink"):
            if how == "path" and c.id == "tour":
                continue  # the tour's inputs are the shipped samples; --out at their folder is the symlink case
            yield pytest.param(c, how, id=f"{c.id}-{how}")


@pytest.mark.parametrize(("case", "how"), list(_aliasings()))
def test_output_is_an_input(case: Case, how: str, tmp_path: Path, tmp_root: Path) -> None:
    """Defects 1 and 2: the output, when it is an input (by path, symlink or hard link), is refused."""
    setup_case(case, tmp_path, old=False)
    victim = case.victim
    if how == "path":
        if case.folder:  # the input itself where the command writes its output: the same name in the same folder
            dest = case.product
            os.replace(tmp_path / victim, tmp_path / dest)
            victim = dest
        else:
            dest = victim
    else:
        dest = case.alias or case.product
        (tmp_path / dest).parent.mkdir(exist_ok=True)
        if how == "symlink":
            os.symlink(os.path.relpath(Path(tmp_path, victim), (tmp_path / dest).parent), tmp_path / dest)
        else:
            os.link(tmp_path / victim, tmp_path / dest)
    before = snapshot(tmp_path, tuple(i for i in case.inputs if os.path.isabs(i)))
    res = run_devbin(*case.argv(dest, victim), cwd=tmp_path)
    line = one_line_error(res)
    assert "refusing to write over the input" in line and os.path.basename(victim) in line, line
    ref = reference(case, tmp_root) if case.id == "tour" else {}
    assert_nothing_partial(tmp_path, before, ref, case)


# --------------------------------------------------------------------------- read-only folder


def _no_dac_override() -> None:
    """In the child, as root: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set,
    so that root obeys a folder's permission bits like anyone else (prctl PR_CAPBSET_DROP)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_read_only_folder(case: Case, tmp_path: Path) -> None:
    """A folder devbin may not write into: a one-line error, nothing written, inputs intact.
    (As root, which writes anywhere, devbin runs without the capability to override permissions.)"""
    setup_case(case, tmp_path, old=False)
    product = case.product if case.folder else "ro/" + case.product
    ro = tmp_path / _dir(product)
    ro.mkdir(exist_ok=True)
    ro.chmod(0o555)
    try:
        before = snapshot(tmp_path, tuple(i for i in case.inputs if os.path.isabs(i)))
        res = run_devbin(*case.argv(product), cwd=tmp_path, preexec_fn=_no_dac_override if os.geteuid() == 0 else None)
        if case.compiler_writes_first:  # the compiler is the first to fail, with its own messages
            assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
        else:
            line = one_line_error(res)
            assert line == f"devbin: error: {product}: cannot write: Permission denied", line
    finally:
        ro.chmod(0o755)
    assert_nothing_partial(tmp_path, before, {}, case)


# --------------------------------------------------------------------------- file-size limit


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_file_size_limit(case: Case, tmp_path: Path, tmp_root: Path) -> None:
    """Defect 4: a write cut short by RLIMIT_FSIZE leaves the old output (no truncated one, no
    temporary file) and says which file could not be written."""
    setup_case(case, tmp_path)
    ref = reference(case, tmp_root)
    limit = len(ref[case.product]) - 1
    assert limit > len(OLD)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    before = snapshot(tmp_path, tuple(i for i in case.inputs if os.path.isabs(i)))
    res = run_devbin(*case.argv(), cwd=tmp_path, preexec_fn=limited)
    line = one_line_error(res)
    assert line == f"devbin: error: {case.product}: cannot write: File too large", line
    also = (compiled(case, tmp_root),) if case.compiler_writes_first else ()
    assert (tmp_path / case.product).read_bytes() in (OLD, *also)
    assert_nothing_partial(tmp_path, before, ref, case, also)


# --------------------------------------------------------------------------- killed mid-write


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_killed_mid_write(case: Case, tmp_path: Path, tmp_root: Path) -> None:
    """SIGKILL while half the output is written: the destination holds its old content, whole."""
    setup_case(case, tmp_path)
    ref = reference(case, tmp_root)
    hold = tmp_path.parent / f"{tmp_path.name}-hold"
    hold.mkdir()
    before = snapshot(tmp_path, tuple(i for i in case.inputs if os.path.isabs(i)))
    proc = devbin_held(case.argv(), tmp_path, hold)
    proc.kill()
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    also = (compiled(case, tmp_root),) if case.compiler_writes_first else ()
    assert (tmp_path / case.product).read_bytes() in (OLD, *also)
    assert_nothing_partial(tmp_path, before, ref, case, also)


# --------------------------------------------------------------------------- planted symlinks


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_planted_temporary_symlinks(case: Case, tmp_path: Path, tmp_root: Path) -> None:
    """Defect 3: symbolic links at the temporary names pack and prune used (OUT.tmp,
    .OUT.devbin-prune.tmp) are not followed: what they point at stays as it was."""
    setup_case(case, tmp_path)
    ref = reference(case, tmp_root)
    precious = tmp_path.parent / f"{tmp_path.name}-precious"
    precious.write_bytes(b"precious: not devbin's to write\n")
    out = tmp_path / case.product
    for name in (f"{out.name}.tmp", f".{out.name}.devbin-prune.tmp", f"{out.name}.devbin.tmp"):
        os.symlink(precious, out.parent / name)
    before = snapshot(tmp_path, tuple(i for i in case.inputs if os.path.isabs(i)))
    res = run_devbin(*case.argv(), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert precious.read_bytes() == b"precious: not devbin's to write\n"
    assert out.read_bytes() == ref[case.product]
    assert_nothing_partial(tmp_path, before, ref, case)
    for name in (f"{out.name}.tmp", f".{out.name}.devbin-prune.tmp"):
        assert os.readlink(out.parent / name) == str(precious)


# --------------------------------------------------------------------------- two writers


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_two_writers(case: Case, tmp_path: Path, tmp_root: Path) -> None:
    """Defect 5: writer A is stopped half-way through the output; writer B (other bytes) runs to
    the end: the output is B's, whole; A then finishes: the output is A's, whole."""
    setup_case(case, tmp_path)
    ref_a, ref_b = reference(case, tmp_root), reference(case, tmp_root, variant=True)
    hold = tmp_path.parent / f"{tmp_path.name}-hold"
    hold.mkdir()
    before = snapshot(tmp_path, tuple(i for i in case.inputs if os.path.isabs(i)))
    a = devbin_held(case.argv(), tmp_path, hold)
    try:
        b = run_devbin(*case.argv(variant=True), cwd=tmp_path)
        assert b.returncode == 0, b.stderr[-2000:]
        assert (tmp_path / case.product).read_bytes() == ref_b[case.product]
    finally:
        (hold / "release").touch()
        _, err = a.communicate(timeout=TOOL_TIMEOUT)
    assert a.returncode == 0, err[-2000:]
    for name, data in ref_a.items():
        assert (tmp_path / name).read_bytes() == data, name
    assert_nothing_partial(tmp_path, before, {**ref_b, **ref_a}, case)


# --------------------------------------------------------------------------- the defects one by one


def test_defect1_extract_archive_member_named_like_its_archive(tmp_path: Path) -> None:
    """Defect 1: an ar archive k.gfx90a.o holding a gfx90a object k.o extracts to k.gfx90a.o: in the
    archive's folder that was the archive itself, truncated to 0 bytes ("Bad address")."""
    prep_extract(tmp_path)
    data = (tmp_path / "k.gfx90a.o").read_bytes()
    line = one_line_error(run_devbin("extract", "k.gfx90a.o", cwd=tmp_path))
    assert line == ("devbin: error: k.gfx90a.o: refusing to write over the input k.gfx90a.o: the image "
                    "k.gfx90a.o!k.o (gfx90a) extracts to k.gfx90a.o, which is that file; extract into another "
                    "folder with -o DIR"), line
    assert (tmp_path / "k.gfx90a.o").read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.gfx90a.o", "v.a"]
    res = run_devbin("extract", "k.gfx90a.o", "-o", "out", cwd=tmp_path)  # elsewhere it extracts
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "k.gfx90a.o").read_bytes() == (SAMPLES / "sample_gfx90a.o").read_bytes()


def test_defect1_extract_fatbin_identifier_named_like_the_file(tmp_path: Path) -> None:
    """Defect 1: a fatbin kern.sm_90.cubin whose sm_90 entry has identifier kern.cu (cuobjdump's
    name: kern.sm_90.cubin), extracted in its folder, also through a folder walk."""
    from devbin.formats.fatbin import constants as FC
    from devbin.formats.fatbin.writer import FatbinImage, write_fatbin

    cubin = (SAMPLES / "sample_sm90.cubin").read_bytes()
    fatbin = write_fatbin([FatbinImage(FC.KIND_ELF, 90, cubin, identifier="src/kern.cu")])
    (tmp_path / "kern.sm_90.cubin").write_bytes(fatbin)
    for argv in (["extract", "kern.sm_90.cubin"], ["extract", ".", "-o", "."]):
        line = one_line_error(run_devbin(*argv, cwd=tmp_path))
        assert "refusing to write over the input" in line and "kern.sm_90.cubin" in line, line
        assert (tmp_path / "kern.sm_90.cubin").read_bytes() == fatbin
        assert [p.name for p in tmp_path.iterdir()] == ["kern.sm_90.cubin"]
    res = run_devbin("extract", "kern.sm_90.cubin", "-o", "x", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "x" / "kern.sm_90.cubin").read_bytes() == cubin


@pytest.mark.parametrize("option", ["-o", "--map"])
@pytest.mark.parametrize("how", ["path", "symlink"])
def test_defect2_link_output_or_map_is_an_input(option: str, how: str, tmp_path: Path) -> None:
    """Defect 2: `devbin link IN... -o IN` / `--map IN` (also through a symlink) replaced the input, exit 0.
    Refused before linking, so no vendor linker is needed to see it."""
    prep_samples(tmp_path)
    lib = tmp_path / "sample_link_lib.o"
    data = lib.read_bytes()
    dest = "sample_link_lib.o"
    if how == "symlink":
        os.symlink("sample_link_lib.o", tmp_path / "alias.o")
        dest = "alias.o"
    line = one_line_error(run_devbin("link", "sample_link_kern.o", "sample_link_lib.o", option, dest, cwd=tmp_path))
    assert f"{dest}: refusing to write over the input sample_link_lib.o" in line, line
    assert lib.read_bytes() == data


def test_link_map_and_output_the_same_file(tmp_path: Path) -> None:
    prep_samples(tmp_path)
    line = one_line_error(run_devbin("link", "sample_link_kern.o", "sample_link_lib.o", "-o", "x.so", "--map", "x.so",
                                     cwd=tmp_path))
    assert line == "devbin: error: x.so: --map and -o name the same file; give the map another name", line
    assert not (tmp_path / "x.so").exists()


@pytest.mark.parametrize(("case_id", "temp"), [("prune", ".out.bin.devbin-prune.tmp"), ("pack", "out.bin.tmp")])
def test_defect5_fixed_temporary_name_of_another_writer(case_id: str, temp: str, tmp_path: Path,
                                                        tmp_root: Path) -> None:
    """Defect 5: prune (and pack) wrote through one fixed temporary name, so a second writer of the
    same output truncated and renamed away the first one's half-written file (which then failed
    "No such file or directory").  Another writer's file at that name is now left alone."""
    case = next(c for c in CASES if c.id == case_id)
    setup_case(case, tmp_path, old=False)
    theirs = b"another writer's output, half written"
    (tmp_path / temp).write_bytes(theirs)
    res = run_devbin(*case.argv(), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / temp).read_bytes() == theirs
    assert (tmp_path / case.product).read_bytes() == reference(case, tmp_root)[case.product]


def test_defect5_nvidia_link_never_reads_its_output_back(tmp_path: Path, tmp_root: Path) -> None:
    """Defect 5: NVIDIA `link -o OUT` let nvlink write OUT, then read OUT back to add devbin's
    sections, so another writer's OUT in between was read ("not an ELF file").  Here nvlink is
    wrapped by a script that, once nvlink is done, writes OUT as another writer would: devbin's
    output is still its own, whole (nvlink writes in a private folder; OUT is written once)."""
    nvlink = require_tool("nvlink")
    case = next(c for c in CASES if c.id == "link-nvidia")
    setup_case(case, tmp_path, old=False)
    wrapper = tmp_path.parent / f"{tmp_path.name}-nvlink"
    wrapper.write_text(f'#!/bin/sh\n"{nvlink}" "$@" || exit $?\nprintf "another writer" > "$OTHER_WRITER"\n')
    wrapper.chmod(0o755)
    out = tmp_path / case.product
    res = run_devbin(*case.argv(), cwd=tmp_path, env=_env(DEVBIN_NVLINK=str(wrapper), OTHER_WRITER=str(out)))
    assert res.returncode == 0, res.stderr
    assert out.read_bytes() == reference(case, tmp_root)[case.product]


def test_defect4_error_names_the_file(tmp_path: Path) -> None:
    """Defect 4: "File too large" / "Bad address" named no file; now the output is named."""
    prep_samples(tmp_path)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    res = run_devbin("annotate", "sample_sm90.cubin", "-o", "a.cubin", cwd=tmp_path, preexec_fn=limited)
    assert one_line_error(res) == "devbin: error: a.cubin: cannot write: File too large"
    assert not (tmp_path / "a.cubin").exists()  # not 100 bytes of it
    res = run_devbin("annotate", "sample_sm90.cubin", "-o", "sub/a.cubin", cwd=tmp_path)
    assert one_line_error(res) == "devbin: error: sub/a.cubin: cannot write: the folder sub does not exist"


@pytest.mark.parametrize("how", ["traversal", "duplicate", "wrong hash", "missing row", "truncated"])
def test_tampered_wheel_leaves_the_old_output(how: str, tmp_path: Path) -> None:
    """Issue 24: a tampered wheel is refused before anything is written: the old output whole, the
    input byte-identical, no temporary file; -o naming the input itself still refused as an input."""
    import random

    from fuzz.cli_mutators import tamper_wheel

    prep_wheel(tmp_path)
    tampered = tamper_wheel(random.Random(how), (tmp_path / "pkg.whl").read_bytes(), how)
    assert tampered is not None
    (tmp_path / "pkg.whl").write_bytes(tampered[0])
    (tmp_path / "out.whl").write_bytes(OLD)
    before = _snapshot(tmp_path)
    fatal = how in ("traversal", "duplicate", "truncated")  # --force goes on past the others (test_wheel_verify)
    for extra in (["-o", "out.whl"], ["--in-place"], *([["-o", "out.whl", "--force"]] if fatal else [])):
        line = one_line_error(run_devbin("prune", "pkg.whl", "--drop", "gfx90a", *extra, cwd=tmp_path))
        if how == "truncated":
            assert "pkg.whl: not a zip file" in line
        else:
            assert line.endswith("; refusing to rewrite the wheel" + ("" if fatal else " (--force to go on)")), line
        assert _snapshot(tmp_path) == before


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- the helper itself




def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_helper_writes_whole_files_with_a_new_files_mode(flavour: str, tmp_path: Path) -> None:
    out = tmp_path / "a.bin"
    assert write_file(out, b"x" * 100_000) == 100_000
    assert out.read_bytes() == b"x" * 100_000
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()
    out.chmod(0o700)  # an existing file keeps its permissions, as when overwritten in place
    write_file(out, b"y")
    assert out.read_bytes() == b"y" and stat.S_IMODE(out.stat().st_mode) == 0o700
    write_file(out, b"z", mode=0o640)
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_helper_follows_a_symlinked_destination(flavour: str, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "t.bin").write_bytes(b"old")
    os.symlink("real/t.bin", tmp_path / "link.bin")
    write_file(tmp_path / "link.bin", b"new")
    assert (tmp_path / "link.bin").is_symlink() and (tmp_path / "real" / "t.bin").read_bytes() == b"new"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["t.bin"]


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_helper_removes_its_file_on_any_failure(flavour: str, exc: type[BaseException], tmp_path: Path) -> None:
    out = tmp_path / "a.bin"
    out.write_bytes(b"old")
    with pytest.raises(exc), atomic_output(out) as f:
        f.write(b"new, half")
        raise exc("stop")
    assert out.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_helper_refuses_inputs_naming_both(tmp_path: Path) -> None:
    src = tmp_path / "in.o"
    src.write_bytes(b"input")
    os.symlink("in.o", tmp_path / "sym.o")
    os.link(src, tmp_path / "hard.o")
    (tmp_path / "sub").mkdir()
    cases = {str(src): f"{src}: refusing to write over the input {src}; choose another output",
             str(tmp_path / "sym.o"): f"{tmp_path / 'sym.o'}: refusing to write over the input {src} "
                                      "(the same file, through a symbolic link or another path); choose another output",
             str(tmp_path / "hard.o"): f"{tmp_path / 'hard.o'}: refusing to write over the input {src} "
                                       "(the same file: a hard link to it); choose another output",
             str(tmp_path / "sub" / ".." / "in.o"): None}
    ins = Inputs([src])
    for dest, message in cases.items():
        with pytest.raises(OutputError) as e:
            write_file(dest, b"output", inputs=ins)
        if message is not None:
            assert str(e.value) == message
        with pytest.raises(OutputError):
            check_destination(dest, [str(src)])
    assert src.read_bytes() == b"input"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.o", "in.o", "sub", "sym.o"]
    assert check_destination(tmp_path / "other.o", ins) == str(tmp_path / "other.o")


def test_helper_errors_are_one_line_and_name_the_file(flavour: str, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(OutputError) as e:
        write_file(tmp_path / "d", b"x")  # a folder where the file should go
    assert str(e.value) == f"{tmp_path / 'd'}: cannot write: a folder; name a file in it"
    with pytest.raises(OutputError) as e:
        write_file(tmp_path / "missing" / "x", b"x")
    missing = tmp_path / "missing"
    assert str(e.value) == f"{missing / 'x'}: cannot write: the folder {missing} does not exist"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"] and not list((tmp_path / "d").iterdir())


def test_helper_file_size_limit_in_a_child(flavour: str, tmp_path: Path) -> None:
    """EFBIG (RLIMIT_FSIZE, SIGXFSZ ignored as Python ignores it) in a forked child: the old file
    stays, no temporary file, an OutputError naming the file."""
    out = tmp_path / "a.bin"
    out.write_bytes(b"old")
    pid = os.fork()
    if pid == 0:  # the child: exit status says what happened
        code = 3
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
            try:
                write_file(out, b"n" * 5000)
            except OutputError as e:
                code = 0 if str(e) == f"{out}: cannot write: File too large" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert out.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]


def test_helper_temporary_names_are_exclusive_and_unpredictable(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The named fallback: O_EXCL names with 64 random bits; a planted name is skipped, not opened."""
    monkeypatch.setattr(output_mod, "USE_O_TMPFILE", False)
    out = tmp_path / "a.bin"
    names = []
    for _ in range(2):
        o = output_mod.Output(str(out), str(out), None)
        names.append(o._name)
        o.discard()
    assert names[0] != names[1] and all(n and os.path.basename(n).startswith(".a.bin.") for n in names)
    planted = tmp_path / "precious"
    planted.write_bytes(b"precious")
    real_urandom = os.urandom
    draws = iter([bytes(8), bytes(8), b"\x01" * 8])  # the first name drawn twice: planted, then free
    monkeypatch.setattr(output_mod.os, "urandom", lambda n: next(draws) if n == 8 else real_urandom(n))
    os.symlink(planted, tmp_path / f".a.bin.{bytes(8).hex()}.tmp")
    write_file(out, b"data")
    assert out.read_bytes() == b"data" and planted.read_bytes() == b"precious"
    assert os.readlink(tmp_path / f".a.bin.{bytes(8).hex()}.tmp") == str(planted)


def test_helper_keeps_a_backup(flavour: str, tmp_path: Path) -> None:
    out, bak = tmp_path / "lib.so", tmp_path / "lib.so.orig"
    out.write_bytes(b"before")
    write_file(out, b"after", backup=bak)
    assert out.read_bytes() == b"after" and bak.read_bytes() == b"before"
    write_file(tmp_path / "new.so", b"x", backup=tmp_path / "new.so.orig")  # nothing to back up
    assert not (tmp_path / "new.so.orig").exists()
    with pytest.raises(OutputError):
        write_file(out, b"again", backup=out)
    assert out.read_bytes() == b"after"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib.so", "lib.so.orig", "new.so"]


def test_helper_no_space_left(tmp_path: Path) -> None:
    """ENOSPC from write(): the message names the file and nothing is left (a full disk is
    simulated by making os.write fail after the first chunk)."""
    out = tmp_path / "a.bin"
    calls = []
    real_write = os.write

    def full(fd: int, data: object) -> int:
        calls.append(fd)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, memoryview(data)[:10])  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(output_mod.os, "write", full)
        with pytest.raises(OutputError) as e:
            write_file(out, b"x" * 100)
    assert str(e.value) == f"{out}: cannot write: No space left on device"
    assert not list(tmp_path.iterdir())
