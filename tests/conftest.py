"""Shared pytest helpers and session fixtures that build real device binaries.

Tiers
    Every test that needs an external tool is marked ``tool``, automatically (see
    ``pytest_collection_modifyitems``): it uses a fixture that builds with a tool (``cubins``,
    ``amdgpu_objects``, ``host_objects``, the ``tool`` fixture, or a test module's fixture that
    does), or its code reaches ``require_tool``/``tool``/``runners.run_tool`` (read with ``ast``,
    through the module's own functions and those of the helper modules).  ``pytest --quick``
    (``scripts/test.sh --quick``) leaves out the tests marked ``tool`` or ``slow``; in that mode
    ``require_tool`` *fails* a test that is not marked ``tool``, so a marker the scan missed
    shows at once instead of letting the quick tier run nvcc, and every property test draws at
    most ``QUICK_MAX_EXAMPLES`` examples.  CI runs everything, with each test's own settings.

Helpers
    ``require_tool(name)`` returns the path of an external tool; when it is missing
    the test is skipped, except in CI (environment variable ``CI`` set, as CI
    services do), where it fails: oracle tests must never silently skip there.
    Import it with ``from tests.conftest import require_tool`` (or ``from conftest
    import ...``: both names are the one module pytest loaded), or use the ``tool``
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

import ast
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import settings

from devbin.tools import find_tool, install_hint

from tests.runners import run_tool

# Child processes (``python -m devbin`` through run_tool) import the checkout under test, as this
# process does (pyproject's ``pythonpath``), never whichever devbin happens to be installed: a
# worktree's tests would otherwise run another tree's code, or fail where none is installed.
_SRC = str(Path(__file__).resolve().parent.parent / "src")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH", "")) if p)

# pytest loads this file as the module ``conftest`` (tests/ is no package: pyproject's pythonpath puts
# the root and tests/ on sys.path).  ``from tests.conftest import require_tool`` would otherwise load a
# second copy, whose run state (_QUICK, _CURRENT_ITEM) pytest never sets: under --quick its require_tool
# never failed an unmarked test.  Both names are this one module.
sys.modules.setdefault("tests.conftest" if __name__ == "conftest" else "conftest", sys.modules[__name__])

# CI runs the property tests derandomized: the same examples every run, so a submission's CI
# result does not depend on luck; locally they draw new examples each run (and find new bugs).
settings.register_profile("ci", derandomize=True, print_blob=True)
# --quick (the inner loop) draws at most this many examples per property test (see
# pytest_collection_modifyitems); the full run, and CI, draw what each test asks for.
QUICK_MAX_EXAMPLES = 25
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
    looked up as given (write ``"llvm-readelf-19"`` for a specific version).  Under
    ``--quick`` a test not marked ``tool`` fails here: its marker is missing.
    """
    item = _CURRENT_ITEM[0]
    if _QUICK[0] and item is not None and item.get_closest_marker("tool") is None:
        pytest.fail(f"{item.nodeid} needs tool {name!r} but is not marked 'tool': the quick tier must not "
                    "run it (add @pytest.mark.tool, or reach the tool through require_tool/run_tool "
                    "so that conftest.py sees it)", pytrace=False)
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


# --------------------------------------------------------------------------- tiers

# Names whose call means "this needs an external tool"; the scan adds every function that calls one.
_TOOL_CALLS = frozenset({"require_tool", "tool", "run_tool"})
# The test being run (set in pytest_runtest_setup) and whether this is a --quick run.
_CURRENT_ITEM: list[pytest.Item | None] = [None]
_QUICK: list[bool] = [False]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--quick``: the inner loop (no test marked ``tool`` or ``slow``)."""
    parser.addoption("--quick", action="store_true",
                     help="leave out tests marked 'tool' or 'slow'; fail a test that reaches a tool unmarked")


def pytest_configure(config: pytest.Config) -> None:
    """Under --quick, require_tool checks the running test's marker."""
    if config.getoption("quick"):
        _QUICK[0] = True


def _called_names(node: ast.AST) -> set[str]:
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if isinstance(f, ast.Name):
                names.add(f.id)
            elif isinstance(f, ast.Attribute):
                names.add(f.attr)
    return names


@functools.cache
def _tool_functions(path: Path, seeds: frozenset[str]) -> frozenset[str]:
    """Names of the functions in ``path`` that call, directly or through each other, a name in ``seeds``."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return frozenset()
    calls: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            calls.setdefault(node.name, set()).update(_called_names(node))
    marked = set(seeds)
    while True:
        more = {name for name, called in calls.items() if name not in marked and called & marked}
        if not more:
            return frozenset(marked & calls.keys())
        marked |= more


@functools.cache
def _helper_tool_functions() -> frozenset[str]:
    """Public functions of conftest.py and the helper modules (not test_*.py) that reach a tool.

    Private names (``_run``) stay private: a test module's own ``_run`` is not conftest's.
    """
    found: set[str] = set()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        if not path.name.startswith("test_"):
            found |= {name for name in _tool_functions(path, _TOOL_CALLS) if not name.startswith("_")}
    return frozenset(found)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``tool`` every test that needs an external tool; under ``--quick`` leave out ``tool`` and ``slow``."""
    helpers = _helper_tool_functions()
    seeds = _TOOL_CALLS | helpers
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        marked = _tool_functions(Path(str(item.path)), seeds) | helpers
        if {item.originalname, *item.fixturenames} & (marked | {"tool"}):
            item.add_marker(pytest.mark.tool)
    if config.getoption("quick"):
        _cap_examples(items)
        keep, dropped = [], []
        for i in items:
            quick = i.get_closest_marker("tool") is None and i.get_closest_marker("slow") is None
            (keep if quick else dropped).append(i)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep


def _cap_examples(items: list[pytest.Item]) -> None:
    """Cap every property test at QUICK_MAX_EXAMPLES, its own ``@settings(max_examples=...)`` included.

    A profile cannot do it: a test's own settings win over the profile.  Hypothesis reads the settings
    from this attribute of the test function when it runs.
    """
    for item in items:
        fn = getattr(item, "obj", None)
        own = getattr(fn, "_hypothesis_internal_use_settings", None)
        if isinstance(own, settings) and own.max_examples > QUICK_MAX_EXAMPLES:
            fn._hypothesis_internal_use_settings = settings(own, max_examples=QUICK_MAX_EXAMPLES)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Remember the running test, for require_tool's check of its marker."""
    _CURRENT_ITEM[0] = item


# --------------------------------------------------------------------------- building


def _run_all(commands: Sequence[Sequence[str | os.PathLike[str]]], cwd: Path) -> None:
    """Run independent build commands in parallel (a few threads; each is a subprocess)."""
    with ThreadPoolExecutor(max_workers=_JOBS) as pool:
        for future in [pool.submit(run_tool, c, cwd) for c in commands]:
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
    run_tool([clang, "-target", "x86_64-unknown-linux-gnu", "-O2", "-c", "-o", host_c, SOURCES / "host.c"], out)
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
    run_tool([gcc, "-O2", "-fPIC", "-c", "-o", obj, SOURCES / "host.c"], out)
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


@pytest.fixture(params=["O_TMPFILE", "named"])
def flavour(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways devbin.binary.output makes its new file: unnamed (Linux O_TMPFILE) and the named fallback."""
    from devbin.binary import output as output_mod

    if request.param == "named":
        monkeypatch.setattr(output_mod, "USE_O_TMPFILE", False)
    elif not output_mod.USE_O_TMPFILE:
        pytest.skip("no O_TMPFILE on this platform")
    return str(request.param)
