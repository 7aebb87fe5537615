"""The lean read path (issue 17): what importing devbin and scanning import, and where the scan looks.

* ``import devbin`` imports nothing but the version; every public name still resolves (lazily).
* The format packages resolve their names on first use; a scan imports the readers of the
  containers it meets, and no writer.
* ``devbin --version`` imports no command's module.
* The fatbin-magic search of data sections runs only in files without ``.nvFatBinSegment``
  wrappers (built with nvcc and gcc: an executable with wrappers and an object without, both
  holding the same fatbin in ``.rodata``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import devbin
from devbin.images.scan import scan
from devbin.samples import __file__ as samples_init

from tests.conftest import SOURCES, require_tool
from tests.runners import TOOL_TIMEOUT, run_tool

SRC = Path(__file__).resolve().parent.parent / "src"
SAMPLES = Path(samples_init).parent


def _modules_after(code: str) -> list[str]:
    """The modules a fresh interpreter has imported after running ``code`` (which may not print)."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, env=env, check=True, timeout=TOOL_TIMEOUT).stdout
    return list(json.loads(out.splitlines()[-1]))


def test_import_devbin_imports_nothing_heavy() -> None:
    mods = _modules_after("import devbin")
    assert [m for m in mods if m.startswith("devbin")] == ["devbin", "devbin._version"]


def test_every_public_name_still_resolves() -> None:
    for name in devbin.__all__:
        assert getattr(devbin, name) is not None, name
    from devbin.formats import ar, bundle, fatbin, offload, wrapped
    for package in (ar, bundle, fatbin, offload, wrapped):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
        with pytest.raises(AttributeError):
            package.no_such_name  # noqa: B018
    assert fatbin.writer.write_fatbin is not None and bundle.reader.parse_bundle is not None  # submodules by name
    from devbin.formats.fatbin import write_fatbin  # from-imports go through the same lookup
    from devbin.images import Native
    assert callable(write_fatbin) and Native is not None


def test_a_scan_imports_only_the_readers_it_meets() -> None:
    mods = _modules_after(f"from devbin.images.scan import scan\nlist(scan([{str(SAMPLES / 'sample_sm90.cubin')!r}]))")
    assert "devbin.formats.elf.reader" in mods
    for absent in ("devbin.formats.bundle.reader", "devbin.formats.offload.reader", "devbin.formats.ar.reader",
                   "devbin.formats.wrapped.reader", "devbin.formats.fatbin.compress", "zstandard", "lz4"):
        assert absent not in mods, absent
    assert not [m for m in mods if m.startswith("devbin.formats.") and m.endswith(".writer")]
    # An archive brings the ar reader, and still no writer.
    mods = _modules_after(f"from devbin.images.scan import scan\n"
                          f"list(scan([{str(SAMPLES / 'sample_layer_base.a')!r}]))")
    assert "devbin.formats.ar.reader" in mods and "devbin.formats.bundle.reader" not in mods
    assert not [m for m in mods if m.startswith("devbin.formats.") and m.endswith(".writer")]


def test_version_imports_no_command() -> None:
    mods = _modules_after("from devbin.cli.main import main\n"
                          "try:\n    main(['--version'])\nexcept SystemExit:\n    pass")
    assert not [m for m in mods if m.startswith("devbin.cli.") and m.endswith(("_cmd", "tour"))]
    assert "dataclasses" not in mods or "dataclasses" in _modules_after("pass")


def _c_array(name: str, data: bytes) -> str:
    return f"const unsigned char {name}[] __attribute__((aligned(8))) = {{{','.join(str(b) for b in data)}}};\n"


@pytest.fixture(scope="module")
def rodata_fatbins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc, gcc = require_tool("nvcc"), require_tool("gcc")
    out = tmp_path_factory.mktemp("lean")

    run_tool([nvcc, "-arch=sm_80", "-fatbin", "-o", "k.fatbin", SOURCES / "kernels.cu"], out)
    (out / "blob.c").write_text(_c_array("blob", (out / "k.fatbin").read_bytes()))
    (out / "main.c").write_text("extern const unsigned char blob[];\nint main(void) { return blob[0] == 0; }\n")
    run_tool([gcc, "-c", "-O2", "-o", "blob.o", "blob.c"], out)
    run_tool([nvcc, "-arch=sm_80", "-o", "exe", SOURCES / "kernels.cu", "main.c", "blob.o"], out)
    return {"blob.o": out / "blob.o", "exe": out / "exe"}


def test_the_magic_search_runs_only_without_wrappers(rodata_fatbins: dict[str, Path]) -> None:
    # No wrappers: the fatbin a library keeps in .rodata for cuModuleLoadData is found by its magic.
    loose = list(scan([rodata_fatbins["blob.o"]]))
    assert loose and {i.section for i in loose} == {".rodata"}
    # With wrappers (the runtime registers the program's fatbins): those are the images, no search.
    registered = list(scan([rodata_fatbins["exe"]]))
    assert registered and {i.section for i in registered} == {".nv_fatbin"}
    assert all(i.get("wrapper-version") for i in registered)
