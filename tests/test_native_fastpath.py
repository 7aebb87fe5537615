"""The compiled fast path (devbin.binary._cdecode) gives what the pure-Python decoders give.

Both implementations run on every test input (the fixtures, samples, crashers, the fuzz seeds and the
cubins and AMDGPU objects built here by the real tools), on mutations of them, and on random bytes
(hypothesis); results, warnings and errors must be equal.  CI builds the extension (``pip install .``
with a compiler): there these tests fail, not skip, when it is missing.  ``DEVBIN_PURE_PYTHON=1`` and
an install without a compiler are checked too.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from fuzz import fuzz_native
from fuzz.run_all import mutate, seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from devbin.formats.elf.tables import section_table_py

from tests.conftest import in_ci, require_tool
from tests.runners import run_tool

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _need_native() -> None:
    if fuzz_native.NATIVE is None:
        msg = "devbin.binary._cdecode is not built (pip install -e . or python setup.py build_ext --inplace)"
        if in_ci() and not os.environ.get("DEVBIN_PURE_PYTHON"):
            pytest.fail(msg + " -- CI must exercise the C fast path", pytrace=False)
        pytest.skip(msg)


SEEDS = list(seeds())


def _built_objects(tmp: Path) -> list[bytes]:
    """A cubin from nvcc and an AMDGPU object from clang-19, built now."""
    out = []
    src = ROOT / "tests" / "fixtures" / "sample.cu"
    nvcc = require_tool("nvcc")
    run_tool([nvcc, "-cubin", "-arch=sm_80", "-o", str(tmp / "k.cubin"), str(src)])
    out.append((tmp / "k.cubin").read_bytes())
    clang = require_tool("clang-19")
    run_tool([clang, "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx942", "-nogpulib", "-O2", "-c", "-o",
              str(tmp / "k.o"), str(ROOT / "tests" / "fixtures" / "sample.cl")])
    out.append((tmp / "k.o").read_bytes())
    return out


@pytest.mark.parametrize("index", range(len(SEEDS)))
def test_seed_inputs_same_with_both_paths(index: int) -> None:
    _need_native()
    data = SEEDS[index]
    fuzz_native.TestOneInput(data)  # both paths, both diagnostic modes, and the decoders alone
    rng = random.Random(index)
    for _ in range(40):
        fuzz_native.TestOneInput(mutate(rng, data, SEEDS))


def test_built_objects_same_with_both_paths(tmp_path: Path) -> None:
    _need_native()
    for data in _built_objects(tmp_path):
        with fuzz_native.implementation(True):
            fast = fuzz_native.outcome(data)
        with fuzz_native.implementation(False):
            pure = fuzz_native.outcome(data)
        assert fast == pure
        assert not isinstance(pure[-1], tuple), pure[-1]  # a real object reads without error


def test_a_cubin_exercises_the_fast_path() -> None:
    """The seeds do reach the fast decoders' well-formed answer (not only their 'None: take the careful
    path'), so the comparisons above compare decoded tables."""
    _need_native()
    data = (SRC / "devbin" / "samples" / "sample_sm90.cubin").read_bytes()
    from devbin.formats.elf.reader import ElfFile

    h = ElfFile(data).header
    args = (data, h.e_shoff, h.e_shnum, h.is64, h.little, (0, 8, 0x70000007, 0x70000009, 0x7000000A, 0x70000015),
            h.e_shstrndx)
    assert fuzz_native.NATIVE is not None
    got = fuzz_native.NATIVE.section_table(*args)
    assert got is not None and got == section_table_py(*args)
    assert ".nv.info" in got[2]


def test_the_usage_lines_pass_answers_for_real_cubins(tmp_path: Path) -> None:
    """``cubin_usage_lines`` answers (not only None) for the shipped cubins and one nvcc builds now, with the
    readers' lines, and declines what the readers reject: a symbol name cut short, a .nv.info record past
    its section, a non-printable function name (the text rule escapes it), a truncated file."""
    _need_native()
    assert fuzz_native.NATIVE is not None
    cubins = [p.read_bytes() for p in sorted((SRC / "devbin" / "samples").glob("*.cubin"))]
    cubins += [_built_objects(tmp_path)[0]]
    assert len(cubins) >= 2
    for data in cubins:
        fast = fuzz_native.NATIVE.cubin_usage_lines(data)
        assert fast is not None and fast == fuzz_native.usage_lines_by_reader(data)
        assert fast.startswith("\nResource usage:\n Common:\n  GLOBAL:") and " Function " in fast
    from devbin.formats.elf.reader import ElfFile

    data = cubins[-1]
    elf = ElfFile(data)
    info = elf.section(".nv.info")
    assert info is not None and elf.symtab is not None
    strtab = elf.sections[elf.symtab.section.sh_link]
    broken = {
        "cut": data[: len(data) // 2],
        # the first record's EIFMT_SVAL size made to run past the section
        "nvinfo": data[:info.sh_offset + 2] + b"\xff\xff" + data[info.sh_offset + 4:],
        # the symbol string table's last NUL gone: the last name runs past its table
        "symstr": data[:strtab.sh_offset + strtab.sh_size - 1] + b"x" + data[strtab.sh_offset + strtab.sh_size:],
    }
    for what, bad in broken.items():
        assert fuzz_native.NATIVE.cubin_usage_lines(bad) is None, what
        assert fuzz_native.usage_lines_agree(bad), what
    # a kernel's name with a control character: the reader's lines escape it, the pass declines
    fn = next(f for f in fuzz_native.cubin.Cubin(elf, records=False).functions if f.is_entry)
    at = strtab.sh_offset + elf.symtab.stored.st_name[fn.symbol]
    ctl = data[:at] + b"\x1b" + data[at + 1:]
    assert fuzz_native.NATIVE.cubin_usage_lines(ctl) is None
    assert "\\x1b" in (fuzz_native.usage_lines_by_reader(ctl) or "")


@pytest.mark.tool
def test_resources_cuobjdump_lines_same_with_the_pass_off(tmp_path: Path) -> None:
    """``devbin resources --format cuobjdump`` of a fat library prints the same bytes with the compiled pass
    (default) and without it (``DEVBIN_PURE_PYTHON=1``: the readers)."""
    _need_native()
    nvcc = require_tool("nvcc")
    lib = tmp_path / "libk.so"
    run_tool([nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
              "arch=compute_90,code=sm_90", "-o", str(lib), str(ROOT / "tests" / "fixtures" / "sample.cu")])
    outs = []
    for pure in ("1", "0"):
        env = {**os.environ, "PYTHONPATH": str(SRC), "DEVBIN_PURE_PYTHON": pure}
        r = subprocess.run([sys.executable, "-m", "devbin", "resources", "--format", "cuobjdump", "--jobs", "1",
                            str(lib)], env=env, capture_output=True, check=True)
        outs.append(r.stdout)
    assert outs[0].count(b"Resource usage:") >= 2 and b" Function " in outs[0]
    assert outs[1] == outs[0]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_same_with_both_paths(data: bytes) -> None:
    _need_native()
    fuzz_native.TestOneInput(data)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(SEEDS) - 1), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)),
                                                 max_size=12))
def test_patched_seeds_same_with_both_paths(index: int, patches: list[tuple[int, int]]) -> None:
    """Seeds with bytes overwritten anywhere (header fields, section headers, string tables)."""
    _need_native()
    data = bytearray(SEEDS[index])
    for at, value in patches:
        if data:
            data[at % len(data)] = value
    fuzz_native.TestOneInput(bytes(data))


def test_pure_python_forced_by_environment() -> None:
    code = ("from devbin.formats.elf import tables; from devbin.targets.nvidia import nvinfo; "
            "print(tables.NATIVE, tables.section_table is tables.section_table_py, "
            "nvinfo.indexed_records is nvinfo.indexed_records_py)")
    env = {**os.environ, "PYTHONPATH": str(SRC), "DEVBIN_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True"]
    if fuzz_native.NATIVE is not None:
        env["DEVBIN_PURE_PYTHON"] = "0"
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True).stdout
        assert out.split() == ["True", "False", "False"]


@pytest.mark.tool  # pip and a C compiler, ~10 s: not in the quick tier
@pytest.mark.parametrize("compiler", ["/bin/false", None])
def test_pip_install_builds_the_fast_path_or_falls_back(tmp_path: Path, compiler: str | None) -> None:
    """``pip install .`` of a copy of the tree into a fresh venv: with a C compiler the extension is built
    and used; with ``CC=/bin/false`` (no working compiler) the install still succeeds, without it, and devbin
    reads a cubin with the pure-Python decoders."""
    if compiler is None and shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC")
                                         else "cc") is None:
        pytest.skip("no C compiler here")
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.so", "build", "*.egg-info",
                                                               ".hypothesis", "fuzz", "tests", "benchmarks"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    py = env_dir / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": "", "DEVBIN_PURE_PYTHON": ""}
    if compiler is not None:
        env.update(CC=compiler, LDSHARED=f"{compiler} -shared")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(tree)],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    code = ("import sys, devbin; from devbin.formats.elf import tables; "
            "from devbin.targets.nvidia.cubin import Cubin; from devbin.formats.elf.reader import ElfFile; "
            "c = Cubin(ElfFile(open(sys.argv[1], 'rb').read())); "
            "print(devbin.__file__, tables.NATIVE, len(c.functions))")
    out = subprocess.run([str(py), "-c", code, str(SRC / "devbin" / "samples" / "sample_sm90.cubin")],
                         env=env, capture_output=True, text=True, check=True, cwd=tmp_path).stdout.split()
    assert Path(out[0]).is_relative_to(env_dir), out
    assert out[1] == ("False" if compiler else "True") and int(out[2]) > 0
