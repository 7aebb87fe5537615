"""Shared pytest helpers and session fixtures that build real device binaries.

Helpers
    ``require_tool(name)`` returns the path of an external tool; when it is missing
    the test is skipped, except in CI (environment variable ``CI`` set, as CI
    services do), where it fails: oracle tests must never silently skip there.
    Import it with ``from conftest import require_tool``, or use the ``tool``
    fixture, which is the same function.

Session fixtures (built once per session into a temporary folder, from the
project's own sources in ``tests/sources/``; see its README.md)
    ``cubins``          dict name -> Path, for ``sm`` in ``CUBIN_ARCHS`` (80, 90):
                        ``sm_XX_rdc``        kernels.cu, relocatable (ET_REL, -rdc=true)
                        ``sm_XX_exec``       kernels.cu, executable (ET_EXEC, whole program)
                        ``sm_XX_extfn_rdc``  extfn.cu, relocatable
                        ``sm_XX_linked``     nvlink of sm_XX_rdc + sm_XX_extfn_rdc (ET_EXEC)
                        Built with nvcc; without nvcc (only the PyPI nvidia-cuda-nvcc
                        wheel, which has no cicc) or with ``DEVBIN_TEST_FROM_PTX=1``,
                        with ptxas from the committed PTX in tests/sources/ptx/.
    ``amdgpu_objects``  dict name -> Path, for ``gfx`` in ``AMDGPU_ARCHS``:
                        ``<gfx>_obj``        amdgpu_kernels.cl (ET_REL, undefined lib_scale)
                        ``<gfx>_lib_obj``    amdgpu_lib.cl (ET_REL)
                        ``<gfx>_so``         ld.lld-19 -shared of the two (ET_DYN)
                        ``hipfb``            clang-offload-bundler binary bundle (gfx90a +
                                             gfx942 code objects, empty host entry)
                        ``bundled_obj``      clang-offload-bundler -type=o: host ELF with
                                             the same two code objects in sections
                        ``offload_package``  clang-offload-packager image (same two)
    ``host_objects``    dict name -> Path: ``x86_64_obj``, ``x86_64_so``, ``x86_64_archive``
                        (ar of the .o), and ``i386_obj`` when ``gcc -m32`` works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import settings

from devbin.tools import find_tool, install_hint

# CI runs the property tests derandomized: the same examples every run, so a submission's CI
# result does not depend on luck; locally they draw new examples each run (and find new bugs).
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

SOURCES = Path(__file__).parent / "sources"
PTX_DIR = SOURCES / "ptx"
FIXTURES = Path(__file__).parent / "fixtures"

CUBIN_ARCHS: tuple[str, ...] = ("80", "90")
AMDGPU_ARCHS: tuple[str, ...] = ("gfx90a", "gfx1030", "gfx942")
BUNDLE_ARCHS: tuple[str, ...] = ("gfx90a", "gfx942")

_JOBS = max(1, min(4, os.cpu_count() or 1))


def in_ci() -> bool:
    """True when running under CI (``CI`` set to anything but empty, ``0`` or ``false``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_tool(name: str, *, versions: Sequence[str] = ()) -> str:
    """Return the path of tool ``name``; skip the test when missing, or fail under CI.

    ``versions`` is passed to :func:`devbin.tools.find_tool`; by default the name is
    looked up as given (write ``"llvm-readelf-19"`` for a specific version).
    """
    path = find_tool(name, versions=versions)
    if path is None:
        hint = install_hint(name)
        msg = f"required tool {name!r} not found" + (f" ({hint}; or run scripts/setup-test-env.sh)" if hint else "")
        if in_ci():
            pytest.fail(msg + " -- oracle tests must not skip in CI", pytrace=False)
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def tool() -> Callable[..., str]:
    """The :func:`require_tool` function, as a fixture."""
    return require_tool


# --------------------------------------------------------------------------- building


def _run(argv: Sequence[str | os.PathLike[str]], cwd: Path) -> None:
    """Run one build command; a failure fails the requesting test with the tool's output."""
    args = [os.fspath(a) for a in argv]
    try:
        proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"fixture build command could not run: {' '.join(args)}: {e}", pytrace=False)
    if proc.returncode != 0:
        out = (proc.stderr + proc.stdout).strip()
        pytest.fail(f"fixture build command failed ({proc.returncode}): {' '.join(args)}\n{out}", pytrace=False)


def _run_all(commands: Sequence[Sequence[str | os.PathLike[str]]], cwd: Path) -> None:
    """Run independent build commands in parallel (a few threads; each is a subprocess)."""
    with ThreadPoolExecutor(max_workers=_JOBS) as pool:
        for future in [pool.submit(_run, c, cwd) for c in commands]:
            future.result()


def _check_built(built: dict[str, Path]) -> dict[str, Path]:
    for name, path in built.items():
        if not path.is_file() or path.stat().st_size == 0:
            pytest.fail(f"fixture {name!r}: {path} was not produced", pytrace=False)
    return built


def cubins_from_ptx() -> bool:
    """True when the cubin fixtures are built by ptxas from the committed PTX instead of by nvcc."""
    return bool(os.environ.get("DEVBIN_TEST_FROM_PTX")) or find_tool("nvcc", versions=()) is None


def build_cubins(out: Path, *, from_ptx: bool) -> dict[str, Path]:
    """Build the ``cubins`` fixture set into ``out`` (see the module docstring for the names)."""
    nvlink = require_tool("nvlink")
    nvcc = None if from_ptx else require_tool("nvcc")
    built: dict[str, Path] = {}
    commands: list[list[str | os.PathLike[str]]] = []
    for a in CUBIN_ARCHS:
        arch = f"sm_{a}"
        rdc, exe, ext = (
            out / f"kernels.{arch}.rdc.cubin",
            out / f"kernels.{arch}.cubin",
            out / f"extfn.{arch}.rdc.cubin",
        )
        if nvcc is not None:
            commands += [
                [nvcc, f"-arch={arch}", "-cubin", "-rdc=true", "-o", rdc, SOURCES / "kernels.cu"],
                [nvcc, f"-arch={arch}", "-cubin", "-o", exe, SOURCES / "kernels.cu"],
                [nvcc, f"-arch={arch}", "-cubin", "-rdc=true", "-o", ext, SOURCES / "extfn.cu"],
            ]
        else:
            ptxas = require_tool("ptxas")
            commands += [
                [ptxas, f"-arch={arch}", "-c", "-o", rdc, PTX_DIR / f"kernels.{arch}.ptx"],
                [ptxas, f"-arch={arch}", "-o", exe, PTX_DIR / f"kernels-whole.{arch}.ptx"],
                [ptxas, f"-arch={arch}", "-c", "-o", ext, PTX_DIR / f"extfn.{arch}.ptx"],
            ]
        built |= {f"{arch}_rdc": rdc, f"{arch}_exec": exe, f"{arch}_extfn_rdc": ext}
    _run_all(commands, out)
    links: list[list[str | os.PathLike[str]]] = []
    for a in CUBIN_ARCHS:
        arch = f"sm_{a}"
        linked = out / f"linked.{arch}.cubin"
        links.append([nvlink, f"-arch={arch}", "-o", linked, built[f"{arch}_rdc"], built[f"{arch}_extfn_rdc"]])
        built[f"{arch}_linked"] = linked
    _run_all(links, out)
    return _check_built(built)


@pytest.fixture(scope="session")
def cubins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Cubins (sm_80, sm_90; relocatable, executable, linked) built from tests/sources/*.cu."""
    return build_cubins(tmp_path_factory.mktemp("cubins"), from_ptx=cubins_from_ptx())


WIDE_ARCHS = ("sm_75", "sm_86", "sm_90a", "sm_100", "sm_120")


def build_wide_cubins(out: Path, *, from_ptx: bool) -> dict[str, Path]:
    """Relocatable and executable cubins of tests/sources/kernels.cu for more architectures.

    With nvcc: every arch in WIDE_ARCHS.  From PTX only (no cicc): ptxas assembles the sm_80 PTX for
    the archs at or above sm_80 that need no arch-specific PTX (sm_86, sm_100, sm_120).
    """
    built: dict[str, Path] = {}
    commands: list[list[str | os.PathLike[str]]] = []
    for arch in WIDE_ARCHS:
        rdc, exe = out / f"kernels.{arch}.rdc.cubin", out / f"kernels.{arch}.cubin"
        if not from_ptx:
            nvcc = require_tool("nvcc")
            gencode = f"-gencode=arch=compute_{arch[3:]},code={arch}"
            commands += [[nvcc, gencode, "-cubin", "-rdc=true", "-o", rdc, SOURCES / "kernels.cu"],
                         [nvcc, gencode, "-cubin", "-o", exe, SOURCES / "kernels.cu"]]
        elif not arch.endswith("a") and int(arch[3:]) >= 80:
            ptxas = require_tool("ptxas")
            commands += [[ptxas, f"-arch={arch}", "-c", "-o", rdc, PTX_DIR / "kernels.sm_80.ptx"],
                         [ptxas, f"-arch={arch}", "-o", exe, PTX_DIR / "kernels-whole.sm_80.ptx"]]
        else:
            continue
        built |= {f"{arch}_rdc": rdc, f"{arch}_exec": exe}
    _run_all(commands, out)
    return _check_built(built)


@pytest.fixture(scope="session")
def wide_cubins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Cubins for sm_75, sm_86, sm_90a, sm_100, sm_120 (see build_wide_cubins)."""
    return build_wide_cubins(tmp_path_factory.mktemp("wide"), from_ptx=cubins_from_ptx())


@pytest.fixture(scope="session")
def amdgpu_objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """AMDGPU code objects (.o, linked .so, bundles) built from tests/sources/*.cl with LLVM 19."""
    return build_amdgpu_objects(tmp_path_factory.mktemp("amdgpu"))


def build_amdgpu_objects(out: Path) -> dict[str, Path]:
    """Build the ``amdgpu_objects`` fixture set into ``out``."""
    clang = require_tool("clang-19")
    lld = require_tool("ld.lld-19")
    bundler = require_tool("clang-offload-bundler-19")
    packager = require_tool("clang-offload-packager-19")
    cflags = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-c"]
    built: dict[str, Path] = {}
    commands: list[list[str | os.PathLike[str]]] = []
    for gfx in AMDGPU_ARCHS:
        obj, lib = out / f"kernels.{gfx}.o", out / f"lib.{gfx}.o"
        commands += [
            [clang, *cflags, f"-mcpu={gfx}", "-o", obj, SOURCES / "amdgpu_kernels.cl"],
            [clang, *cflags, f"-mcpu={gfx}", "-o", lib, SOURCES / "amdgpu_lib.cl"],
        ]
        built |= {f"{gfx}_obj": obj, f"{gfx}_lib_obj": lib}
    _run_all(commands, out)

    targets = ",".join(f"hipv4-amdgcn-amd-amdhsa--{gfx}" for gfx in BUNDLE_ARCHS)
    inputs = [f"-input={built[f'{gfx}_obj']}" for gfx in BUNDLE_ARCHS]
    host_triple = "host-x86_64-unknown-linux-gnu"
    host_c = out / "bundle_host.o"
    hipfb, bundled, package = out / "kernels.hipfb", out / "bundled.o", out / "kernels.offload.bin"
    images = [
        f"--image=file={built[f'{gfx}_obj']},triple=amdgcn-amd-amdhsa,arch={gfx},kind=hip" for gfx in BUNDLE_ARCHS
    ]
    _run([clang, "-target", "x86_64-unknown-linux-gnu", "-O2", "-c", "-o", host_c, SOURCES / "host.c"], out)
    commands = [
        [lld, "-shared", "-o", out / f"kernels.{gfx}.so", built[f"{gfx}_obj"], built[f"{gfx}_lib_obj"]]
        for gfx in AMDGPU_ARCHS
    ]
    commands += [
        # The HIP fat binary layout: binary bundle, empty host entry, 4 KiB-aligned code objects.
        [
            bundler,
            "-type=o",
            "-bundle-align=4096",
            f"-targets={host_triple},{targets}",
            "-input=/dev/null",
            *inputs,
            f"-output={hipfb}",
        ],
        # -type=o with a real host object: an x86-64 ELF with __CLANG_OFFLOAD_BUNDLE__* sections.
        [bundler, "-type=o", f"-targets={host_triple},{targets}", f"-input={host_c}", *inputs, f"-output={bundled}"],
        [packager, "-o", package, *images],
    ]
    _run_all(commands, out)
    built |= {f"{gfx}_so": out / f"kernels.{gfx}.so" for gfx in AMDGPU_ARCHS}
    built |= {"hipfb": hipfb, "bundled_obj": bundled, "offload_package": package}
    return _check_built(built)


def _gcc_m32_works(gcc: str, cwd: Path) -> bool:
    probe = cwd / "m32_probe.c"
    probe.write_text("int devbin_probe(int x) { return x + 1; }\n")
    try:
        proc = subprocess.run(
            [gcc, "-m32", "-c", "-o", os.fspath(cwd / "m32_probe.o"), os.fspath(probe)],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


@pytest.fixture(scope="session")
def host_objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Host (non-device) ELF files built with gcc from tests/sources/host.c."""
    return build_host_objects(tmp_path_factory.mktemp("host"))


def build_host_objects(out: Path) -> dict[str, Path]:
    """Build the ``host_objects`` fixture set into ``out``."""
    gcc = require_tool("gcc")
    ar = require_tool("ar")
    obj, so, archive = out / "host.o", out / "libhost.so", out / "libhost.a"
    _run([gcc, "-O2", "-fPIC", "-c", "-o", obj, SOURCES / "host.c"], out)
    commands: list[list[str | os.PathLike[str]]] = [
        [gcc, "-shared", "-o", so, obj],
        [ar, "rcs", archive, obj],
    ]
    built = {"x86_64_obj": obj, "x86_64_so": so, "x86_64_archive": archive}
    if _gcc_m32_works(gcc, out):  # -m32 -c needs no multilib libraries, only the compiler
        obj32 = out / "host.i386.o"
        commands.append([gcc, "-m32", "-O2", "-c", "-o", obj32, SOURCES / "host.c"])
        built["i386_obj"] = obj32
    _run_all(commands, out)
    return _check_built(built)


@pytest.fixture(scope="session")
def sample_cubin() -> Path:
    """The committed tiny sm_90 cubin (tests/fixtures/sample_sm90.cubin)."""
    return FIXTURES / "sample_sm90.cubin"


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Show in the header which CUDA front end the cubin fixtures will use."""
    mode = "ptxas on committed PTX" if cubins_from_ptx() else f"nvcc ({find_tool('nvcc', versions=())})"
    return [f"devbin: cubin fixtures via {mode}; CI={'yes' if in_ci() else 'no'}; gcc={shutil.which('gcc')}"]
