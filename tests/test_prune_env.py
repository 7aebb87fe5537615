"""A whole environment pruned in place (issue 28, item 5): ``devbin prune SITE-PACKAGES --keep ... --in-place``
over a venv holding several GPU wheels.

The wheels are the project's own, built here: two CUDA libraries (nvcc, several architectures each) and a
HIP library (clang-19 ``--offload-arch``, three AMD targets), each in a wheel (tests/wheelbuild.py) with a
tiny module that loads its library with ctypes and calls it.  They are installed with pip into a fresh
venv (``python3 -m venv``, which brings pip and setuptools: their RECORDs must not change), the
site-packages is pruned in place, and then what pip relies on is checked: every RECORD row names a file
whose hash and size it gives (and every file is in a RECORD, backups included, so that ``pip uninstall``
leaves nothing behind: docs/PRUNE.md "Environments"), ``pip check``, the imports, INSTALLER /
direct_url.json / METADATA / WHEEL byte-identical, and ``devbin size SITE --keep`` predicting the
environment's bytes after.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

import pytest

from devbin.binary.output import BACKUP_SUFFIX
from devbin.formats.wheel import record_hash

from tests.conftest import require_tool
from tests.runners import run_devbin, run_tool
from tests.test_docs_examples import blocks, devbin_lines
from tests.wheelbuild import build_wheel

# Enough device code per architecture that a dropped image frees whole pages of the library.
KERNEL_CU = r"""
__global__ void k(float *p) {
#pragma unroll
  for (int i = 0; i < 2048; ++i) p[i * 3 + threadIdx.x] = p[i * 7] * (float)i + 1.0f;
}
extern "C" int env_value(void) { return VALUE; }
"""
HIP_KERNEL = r"""
#define __global__ __attribute__((global))
struct dim3 { unsigned x, y, z; };
extern "C" int hipLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, unsigned long shm, void *stream);
extern "C" __global__ void twice(float *p) {
#pragma unroll
  for (int i = 0; i < 1024; ++i) p[i * 3] = p[i * 7] * (float)i + 1.0f;
}
"""
# The HIP runtime entry points clang's host code calls (its module constructor registers the fat binary):
# there is no ROCm here, and the library must load for the import check.  env_value says the constructor ran.
HIP_HOST = r"""
static const void *registered;
void **__hipRegisterFatBinary(const void *wrapper) { registered = wrapper; return (void **)&registered; }
void __hipRegisterFunction(void **h, const void *f, char *a, const char *b, unsigned t, void *c, void *d, void *e,
                           void *g, int *s) {}
void __hipUnregisterFatBinary(void **h) {}
int __hipPopCallConfiguration(void *g, void *b, void *s, void *t) { return 1; }
int __hipPushCallConfiguration(void *g, void *b, unsigned long s, void *t) { return 1; }
int hipLaunchKernel(const void *f, void *g, void *b, void **a, unsigned long s, void *t) { return 1; }
int env_value(void) { return registered != 0 ? 7 : -1; }
"""
INIT = 'import ctypes, os\nvalue = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "{lib}")).env_value()\n'
KEEP = "sm_90,gfx90a"
# name -> (library path in the wheel, what env_value returns)
DISTS = {"nvone": ("nvone/libnvone.so", 42), "nvtwo": ("nvtwo/lib/libnvtwo.so", 43), "amdone": ("amdone/libamd.so", 7)}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("env_wheels")
    nvcc, clang = require_tool("nvcc"), require_tool("clang-19")
    (out / "k.cu").write_text(KERNEL_CU)
    (out / "k.hip").write_text(HIP_KERNEL)
    (out / "hiprt.c").write_text(HIP_HOST)
    gencode = {"nvone": ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80",
                         "-gencode", "arch=compute_90,code=[sm_90,compute_90]"],
               "nvtwo": ["-gencode", "arch=compute_80,code=sm_86", "-gencode", "arch=compute_90,code=sm_90"]}
    libs: dict[str, Path] = {}
    for name, flags in gencode.items():
        libs[name] = out / f"lib{name}.so"
        run_tool([nvcc, *flags, f"-DVALUE={DISTS[name][1]}", "-shared", "-Xcompiler", "-fPIC", "k.cu", "-o",
                  libs[name]], out)
    run_tool([clang, "-x", "hip", "-nogpuinc", "-nogpulib", "--offload-arch=gfx90a", "--offload-arch=gfx942",
              "--offload-arch=gfx1100", "-fPIC", "-O1", "-c", "k.hip", "-o", "k.o"], out)
    run_tool([clang, "-fPIC", "-O1", "-c", "hiprt.c", "-o", "hiprt.o"], out)
    libs["amdone"] = out / "libamd.so"
    run_tool([clang, "-shared", "k.o", "hiprt.o", "-o", libs["amdone"]], out)
    built = []
    for name, (member, _) in DISTS.items():
        pkg = member.split("/")[0]
        lib = member.split("/", 1)[1]
        built.append(build_wheel(out / f"{name}-1.0-py3-none-any.whl",
                                 {member: libs[name].read_bytes(), f"{pkg}/__init__.py": INIT.format(lib=lib).encode()},
                                 name=name))
    return built


def _files(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


def _record_rows(site: Path) -> dict[str, list[list[str]]]:
    """Every dist's RECORD rows, by dist-info folder."""
    return {r.parent.name: list(csv.reader(r.read_text().splitlines()))
            for r in sorted(site.glob("*.dist-info/RECORD"))}


def _assert_records_true(site: Path) -> set[str]:
    """Every RECORD row with a hash names a file of that hash and size; returns every path named (as the
    path under ``site``)."""
    named: set[str] = set()
    for dist, rows in _record_rows(site).items():
        assert [f"{dist}/RECORD", "", ""] in rows, dist  # RECORD's own row, without hash and size
        for path, digest, size in rows:
            where = (site / path).resolve()
            named.add(os.path.relpath(where, site.resolve()))
            if digest:
                data = where.read_bytes()
                assert (record_hash(data), len(data)) == (digest, int(size)), f"{dist}: {path}"
    return named


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def test_a_venv_of_gpu_wheels_pruned_in_place(wheels: list[Path], tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run_tool([sys.executable, "-m", "venv", venv])
    py = _venv_python(venv)
    (site,) = venv.glob("lib/python*/site-packages")
    empty = _files(site)
    # -I (isolated): the venv sees itself only, not the checkout conftest puts on PYTHONPATH
    pip = [py, "-I", "-m", "pip", "--disable-pip-version-check", "--no-input"]
    run_tool([*pip, "install", "--no-index", "--no-deps", *wheels])
    installed = _files(site)
    assert set(installed) - set(empty) and _assert_records_true(site) >= set(installed)
    # What pip wrote beside RECORD, and the RECORDs of the packages without device code (pip, setuptools).
    untouched = {n: d for n, d in installed.items()
                 if n.endswith((".dist-info/INSTALLER", ".dist-info/direct_url.json", ".dist-info/METADATA",
                                ".dist-info/WHEEL"))
                 or (n.endswith(".dist-info/RECORD") and not n.startswith(tuple(DISTS)))}
    assert sum(n.endswith("direct_url.json") for n in untouched) == len(DISTS)

    # docs/PRUNE.md "Environments": its commands, as written, on this venv
    (block,) = [b for b in blocks("PRUNE.md", "sh") if "$SITE" in b]
    assert f"pip uninstall -y {' '.join(DISTS)}" in block
    size_argv, prune_argv = ([str(site) if a == "$SITE" else a for a in argv] for argv in devbin_lines(block))
    assert size_argv == ["size", str(site), "--keep", KEEP]
    assert prune_argv == ["prune", str(site), "--keep", KEEP, "--in-place"]
    predicted = run_devbin(*size_argv, "--json")
    assert predicted.returncode == 0, predicted.stderr
    r = run_devbin(*prune_argv, "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    after = _files(site)

    for name, (member, _) in DISTS.items():
        assert len(after[member]) < len(installed[member]), name  # every library lost whole pages
        assert after[member + BACKUP_SUFFIX] == installed[member]  # the original, beside it
    assert {n for n in after if n.endswith(BACKUP_SUFFIX)} == {m + BACKUP_SUFFIX for m, _ in DISTS.values()}
    assert not [n for n in after if ".devbin-lock" in n or ".devbin-prune-journal" in n or ".pre-prune" in n]
    assert {n: after[n] for n in untouched} == untouched
    # Every row true, and every file in a RECORD: the backups too (pip uninstall removes what RECORD names).
    assert _assert_records_true(site) >= set(after)
    package = report["package"]
    assert (package["files_size_before"], package["files_size_after"]) == (
        sum(len(installed[m]) for m, _ in DISTS.values()), sum(len(after[m]) for m, _ in DISTS.values()))
    # The environment's size: every file but the backups, as `size --keep` predicted it to the byte.
    folder = sum(len(d) for n, d in after.items() if not n.endswith(BACKUP_SUFFIX))
    assert (package["installed_size_before"], package["installed_size_after"]) == (
        sum(map(len, installed.values())), folder)
    (predicted_folder,) = json.loads(predicted.stdout)["savings"]["packages"]  # no wheel: the folder alone
    assert predicted_folder == {"path": str(site), "kind": "folder",
                                "installed_size_before": package["installed_size_before"],
                                "installed_size_after": folder}
    check = run_tool([*pip, "check"])
    assert "No broken requirements found" in check.stdout
    values = run_tool([py, "-I", "-c", "import nvone, nvtwo, amdone; print(nvone.value, nvtwo.value, amdone.value)"],
                      tmp_path)
    assert values.stdout.split() == [str(v) for _, v in DISTS.values()]

    # Pruned again: nothing left to drop, nothing written (no second backup row, the first original kept).
    again = run_devbin(*prune_argv)
    assert again.returncode == 0, again.stderr
    assert _files(site) == after

    run_tool([*pip, "uninstall", "-y", *DISTS])
    assert set(_files(site)) == set(empty)  # nothing left: no library, no backup, no RECORD
