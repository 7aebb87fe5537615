"""devbin size against the vendor tools, on libraries, objects and archives built at test time.

* per-architecture uncompressed bytes = the sizes of the files ``cuobjdump -all -xelf all`` and
  ``-xptx all`` write;
* device section sizes = ``readelf -S``; stored + headers + padding = those sizes, the headers and the
  zero padding found by walking the section's bytes here with ``struct`` (not devbin's reader);
* function sizes = ``st_size`` in ``readelf -s`` of the extracted cubins and of AMDGPU objects;
* demangled names = ``c++filt``;
* duplicates on inputs built to hold them (the same kernel instantiated in two translation units, the
  same object twice in an archive, the library linked from those objects);
* ``--keep`` = what ``devbin prune`` reports; ``--budget`` and ``--diff`` on two builds of
  tests/sources/spill.cu (registers against ``cuobjdump -res-usage``).
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import struct
import zipfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import require_tool
from devbin.cli import schema_cmd
from devbin.images.address import escape
from devbin.size import measure
from devbin.size.account import demangle
from devbin.size.budget import parse_rule
from devbin.size.report import report_dict

from tests.runners import cli, cli_ok, run_devbin, run_tool
from tests.wheelbuild import build_wheel

SOURCES = Path(__file__).parent / "sources"
GENCODE = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]

A_CU = """template <int N> __global__ void scale(float *x) { x[threadIdx.x] *= N; }
template __global__ void scale<2>(float *);
namespace dup { struct S { int v; }; }
__global__ void only_a(float *x, float y, dup::S s) { x[threadIdx.x] += y * s.v; }
"""
B_CU = """template <int N> __global__ void scale(float *x) { x[threadIdx.x] *= N; }
template __global__ void scale<2>(float *);
__global__ void only_b(int *x) { x[threadIdx.x] ^= 7; }
"""


def _json(*argv: str, schema: str = "size") -> dict[str, Any]:
    code, text = cli(*argv, "--json")
    assert code == 0, text
    doc = json.loads(text)
    jsonschema.Draft202012Validator(json.loads(schema_cmd.text(schema))).validate(doc)
    return doc


@pytest.fixture(scope="module")
def dup(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libdup.so (a.cu + b.cu, both instantiating scale<2>), libdup.a (a.o, b.o and a.o again as c.o)."""
    nvcc = require_tool("nvcc")
    out = tmp_path_factory.mktemp("size-dup")
    (out / "a.cu").write_text(A_CU)
    (out / "b.cu").write_text(B_CU)
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda n: run_tool([nvcc, "-c", "-Xcompiler", "-fPIC", *GENCODE, f"{n}.cu", "-o", f"{n}.o"],
                                         out), ("a", "b")))
    run_tool([nvcc, "-shared", "a.o", "b.o", "-o", "libdup.so"], out)
    shutil.copy(out / "a.o", out / "c.o")
    run_tool([require_tool("ar"), "rcs", "libdup.a", "a.o", "b.o", "c.o"], out)
    return out


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two builds of tests/sources/spill.cu: old for sm_80; new for sm_80 and sm_90 with ptxas -O0 (other
    registers and stack)."""
    nvcc = require_tool("nvcc")
    out = tmp_path_factory.mktemp("size-builds")
    old, new = out / "old.o", out / "new.o"
    commands = [[nvcc, "-c", "-gencode", "arch=compute_80,code=sm_80", SOURCES / "spill.cu", "-o", old],
                [nvcc, "-c", "-Xptxas", "-O0", *GENCODE[:2], "-gencode", "arch=compute_90,code=sm_90",
                 SOURCES / "spill.cu", "-o", new]]
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(run_tool, commands))
    return old, new


# --------------------------------------------------------------------------- bytes


def _extracted(path: Path, where: Path) -> dict[tuple[str, str], int]:
    """(kind, sm) -> bytes of the files cuobjdump -all -xelf/-xptx all writes for ``path``."""
    cuobjdump = require_tool("cuobjdump")
    where.mkdir()
    run_tool([cuobjdump, "-all", "-xelf", "all", path.resolve()], where)
    run_tool([cuobjdump, "-all", "-xptx", "all", path.resolve()], where)
    out: Counter[tuple[str, str]] = Counter()
    for f in where.iterdir():
        m = re.search(r"\.(sm_\w+)\.(cubin|ptx)$", f.name)
        assert m, f.name
        out[(m.group(2), m.group(1))] += f.stat().st_size
    return dict(out)


def _ours(doc: dict[str, Any]) -> dict[tuple[str, str], int]:
    out: Counter[tuple[str, str]] = Counter()
    for f in doc["files"]:
        for i in f["images"]:
            arch = i["arch"].replace("compute_", "sm_")  # cuobjdump names a PTX file by its SM
            out[(i["kind"], arch)] += i["size"]
    return dict(out)


@pytest.mark.parametrize("name", ["libdup.so", "a.o", "libdup.a"])
def test_uncompressed_bytes_equal_cuobjdumps_files(dup: Path, tmp_path: Path, name: str) -> None:
    doc = _json("size", str(dup / name))
    assert _ours(doc) == _extracted(dup / name, tmp_path / "x")
    by_arch = {(a["vendor"], a["arch"]): a["size"] for a in doc["by_arch"]}
    assert sum(by_arch.values()) == doc["totals"]["size"] == sum(_ours(doc).values())


def _walk_fatbins(data: bytes) -> tuple[int, int, int, int]:
    """(payload bytes, header bytes, zero padding, fatbins) of fatbins back to back in ``data``, walked with
    struct."""
    pos = payload = headers = padding = count = 0
    while pos < len(data):
        if data[pos:pos + 4] != b"\x50\xed\x55\xba":
            assert data[pos] == 0, f"non-zero byte between fatbins at {pos:#x}"
            padding += 1
            pos += 1
            continue
        hsize, fat = struct.unpack_from("<HQ", data, pos + 6)
        headers += hsize
        count += 1
        e = pos + hsize
        while e < pos + hsize + fat:
            ehsize, esize = struct.unpack_from("<IQ", data, e + 4)
            headers += ehsize
            payload += esize
            e += ehsize + esize
        pos += hsize + fat
    return payload, headers, padding, count


def _readelf_sections(path: Path) -> dict[str, tuple[int, int]]:
    """name -> (offset, size) from readelf -S -W."""
    out = {}
    for line in run_tool([require_tool("readelf"), "-S", "-W", path]).stdout.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m:
            out[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
    return out


@pytest.mark.parametrize("name", ["libdup.so", "a.o"])
def test_every_device_section_byte_is_accounted_for(dup: Path, name: str) -> None:
    path = dup / name
    doc = _json("size", str(path))
    (f,) = doc["files"]
    sections = {n: v for n, v in _readelf_sections(path).items() if n in (".nv_fatbin", "__nv_relfatbin")}
    assert f["sections"] == {n: size for n, (_, size) in sections.items()}
    assert f["device_bytes"] == sum(size for _, size in sections.values())
    assert f["file_bytes"] == path.stat().st_size
    data = path.read_bytes()
    payload = headers = padding = fatbins = 0
    for off, size in sections.values():
        p, h, z, n = _walk_fatbins(data[off:off + size])
        payload, headers, padding, fatbins = payload + p, headers + h, padding + z, fatbins + n
    assert len(doc["by_container"]) == fatbins  # one container per fatbin (translation unit)
    assert sum(c["stored_size"] for c in doc["by_container"]) == f["stored_size"]
    assert f["stored_size"] == sum(i["stored_size"] for i in f["images"]) == payload
    assert f["headers"] == headers
    assert f["overhead"] == headers + padding
    assert f["stored_size"] + f["overhead"] == f["device_bytes"]


def _readelf_functions(path: Path) -> list[tuple[str, int]]:
    """(name, st_size) of the defined STT_FUNC entries of .symtab, by readelf -s -W."""
    out, in_symtab = [], False
    for line in run_tool([require_tool("readelf"), "-s", "-W", path]).stdout.splitlines():
        if line.startswith("Symbol table"):
            in_symtab = "'.symtab'" in line
            continue
        m = _SYM.match(line)
        if in_symtab and m and m.group(2) == "FUNC" and m.group(3) != "UND":
            out.append((m.group(4), int(m.group(1), 0)))
    return out


#: A readelf -s -W line: size, type, section index, name (NVIDIA's st_other prints as "[<other>: 10]").
_SYM = re.compile(r"\s*\d+:\s+[0-9a-f]+\s+(\S+)\s+(\w+)\s+\w+\s+\w+(?:\s+\[[^\]]*\])?\s+(\w+)\s+(\S+)$")


def test_function_sizes_equal_readelf_of_extracted_cubins(dup: Path, tmp_path: Path) -> None:
    cuobjdump = require_tool("cuobjdump")
    run_tool([cuobjdump, "-all", "-xelf", "all", (dup / "libdup.so").resolve()], tmp_path)
    theirs: Counter[tuple[str, str, int]] = Counter()
    for f in tmp_path.glob("*.cubin"):
        sm = f.name.split(".")[-2]
        theirs.update((sm, n, s) for n, s in _readelf_functions(f))
    ours: Counter[tuple[str, str, int]] = Counter()
    for f in measure([dup / "libdup.so"]):
        for i in f.images:
            ours.update((i.image.arch, fn.name, fn.size) for fn in i.functions)
    assert ours == theirs and ours


def test_function_sizes_equal_readelf_of_amdgpu_objects(amdgpu_objects: dict[str, Path]) -> None:
    for key in ("gfx90a_obj", "gfx942_obj", "gfx90a_so"):
        path = amdgpu_objects[key]
        (f,) = measure([path])
        (image,) = f.images
        assert [(fn.name, fn.size) for fn in image.functions] == _readelf_functions(path)
        assert f.device_bytes == f.file_bytes == path.stat().st_size and f.overhead == 0
        kernels = {fn.name for fn in image.functions if fn.kind == "kernel"}
        assert kernels and all(dict(fn.related)["descriptor"] == 64 for fn in image.functions if fn.kind == "kernel")


def test_bundles_and_offload_binaries_are_accounted_for(amdgpu_objects: dict[str, Path]) -> None:
    obj = amdgpu_objects["bundled_obj"]
    (f,) = measure([obj])
    sections = {n: s for n, (_, s) in _readelf_sections(obj).items() if n.startswith("__CLANG_OFFLOAD_BUNDLE__")}
    assert f.sections == sections and f.device_bytes == sum(sections.values())
    assert f.stored + f.overhead == f.device_bytes and f.overhead >= 0
    for key in ("hipfb", "offload_package"):
        (g,) = measure([amdgpu_objects[key]])
        assert g.device_bytes == amdgpu_objects[key].stat().st_size and g.overhead > 0
        assert {i.image.arch.split(":")[0] for i in g.images if i.image.arch} == {"gfx90a", "gfx942"}


def test_demangled_names_equal_cxxfilt(dup: Path) -> None:
    names = sorted({fn.name for f in measure([dup / "libdup.so"]) for i in f.images for fn in i.functions})
    names += ["_Z8gen_mtgpI17curandStateMtgp32jiXadL_Z15__curand_noargsIS0_EjPT_iEE10rng_configIS0_L14curandOrdering"
              "103EEEvS3_PT0_mmT1_", "_ZN9__gnu_cxx13new_allocatorIcE8allocateEmPKv", "_ZNKSt6vectorIiSaIiEE4sizeEv",
              "not_mangled", "_Z1fIJidEEvDpT_"]
    p = run_tool([require_tool("c++filt")], input="\n".join(names) + "\n")
    assert [demangle(n) for n in names] == p.stdout.splitlines()
    assert any("dup::S" in demangle(n) for n in names)


# --------------------------------------------------------------------------- duplicates


def test_duplicates_across_translation_units_members_and_files(dup: Path) -> None:
    doc = _json("size", str(dup / "libdup.so"), str(dup / "libdup.a"))
    d = doc["duplicates"]
    # a.o and c.o are the same object; the library was linked from a.o and b.o: each of their images
    # (sm_80, sm_90, compute_90) is there 3 (a) or 2 (b) times.
    copies = sorted((g["kind"], g["arch"], len(g["copies"])) for g in d["images"])
    assert copies == sorted([(k, a, n) for k, a in (("cubin", "sm_80"), ("cubin", "sm_90"), ("ptx", "compute_90"))
                             for n in (2, 3)])
    stored = {i["address"]: i["stored_size"] for f in doc["files"] for i in f["images"]}
    for g in d["images"]:
        assert g["wasted"] == sum(stored[a] for a in g["copies"][1:])
        assert "libdup.a!c.o" in " ".join(g["copies"]) or "libdup.a!b.o" in " ".join(g["copies"])
    # scale<2> is in a.cu and b.cu: one copy per architecture is extra; copies inside the extra images are not counted
    fns = {(g["arch"], g["demangled"]): g for g in d["functions"]}
    assert set(fns) == {("sm_80", "void scale<2>(float*)"), ("sm_90", "void scale<2>(float*)")}
    for g in fns.values():
        assert len(g["copies"]) == 2 and g["wasted"] == g["size"] > 0
        assert all("/libdup.so@" in c for c in g["copies"])
    assert doc["duplicate_bytes"] == sum(g["wasted"] for g in d["images"]) + sum(g["wasted"] for g in d["functions"])


def test_no_duplicates_in_one_translation_unit(dup: Path) -> None:
    doc = _json("size", str(dup / "a.o"))
    assert doc["duplicate_bytes"] == 0 and doc["duplicates"]["images"] == [] == doc["duplicates"]["functions"]


# --------------------------------------------------------------------------- --keep


@pytest.mark.parametrize("name", ["libdup.so", "a.o", "libdup.a"])
def test_keep_predicts_what_prune_saves(dup: Path, tmp_path: Path, name: str) -> None:
    doc = _json("size", str(dup / name), "--keep", "sm_90")
    code, text = cli("prune", str(dup / name), "--keep", "sm_90", "-o", str(tmp_path / name), "--json")
    assert code == 0, text
    pruned = json.loads(text)
    (f,) = [f for f in doc["files"]] if name != "libdup.a" else [{"savings": doc["savings"]}]
    assert f["savings"]["bytes"] == pruned["file_bytes_saved"] == (dup / name).stat().st_size - (
        tmp_path / name).stat().st_size
    assert f["savings"]["freed"] == pruned["container_bytes_freed"]
    assert f["savings"]["by_arch"] == pruned["saved_by_arch"] and pruned["saved_by_arch"]
    assert doc["savings"]["keep"] == ["sm_90"]


def test_keep_in_a_wheel_prunes_each_member(dup: Path, tmp_path: Path) -> None:
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.write(dup / "libdup.so", "pkg/lib/libdup.so")
        z.write(dup / "a.o", "pkg/a.o")
        z.writestr("pkg/__init__.py", "")
    doc = _json("size", str(whl), "--keep", "sm_80")
    paths = [f["path"] for f in doc["files"]]
    assert paths == [f"{whl}!pkg/lib/libdup.so", f"{whl}!pkg/a.o"]
    for f, member in zip(doc["files"], ("libdup.so", "a.o"), strict=True):
        code, text = cli("prune", str(dup / member), "--keep", "sm_80", "--dry-run", "--json")
        assert code == 0, text
        pruned = json.loads(text)
        # the zip entries are stored: the wheel saves what the file does
        assert f["savings"] == {"bytes": pruned["file_bytes_saved"], "freed": pruned["container_bytes_freed"],
                                "by_arch": pruned["saved_by_arch"], "wheel_bytes": pruned["file_bytes_saved"],
                                "fallback_images": pruned["fallback_images"],
                                "unloadable_containers": pruned["unloadable_containers"]}
    assert doc["savings"]["freed"] == sum(f["savings"]["freed"] for f in doc["files"]) > 0


def _installed(path: Path) -> int:
    """A wheel's members' uncompressed sizes summed, or a folder's files' sizes (backups left out)."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.name.endswith("-backup"))
    with zipfile.ZipFile(path) as z:
        return sum(i.file_size for i in z.infolist())


def test_keep_predicts_each_file_the_wheel_and_the_installed_size(dup: Path, tmp_path: Path) -> None:
    """size --keep gives, for each file, the wheel (compressed) and the installed size, the before and after that
    prune then reports and writes, to the byte; prune of the installed folder reports its installed size too."""
    whl = build_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", {
        "pkg/lib/libdup.so": (dup / "libdup.so").read_bytes(), "pkg/a.o": (dup / "a.o").read_bytes(),
        "pkg/__init__.py": b"print('pkg')\n" * 100})
    doc = _json("size", str(whl), "--keep", "sm_80")
    (pkg,) = doc["savings"]["packages"]
    out = tmp_path / "out" / whl.name
    out.parent.mkdir()
    pruned = _json("prune", str(whl), "--keep", "sm_80", "-o", str(out), schema="prune")
    assert pkg == {"path": str(whl), "kind": "wheel", "package_size_before": whl.stat().st_size,
                   "package_size_after": out.stat().st_size, "installed_size_before": _installed(whl),
                   "installed_size_after": _installed(out)}
    assert pkg["package_size_after"] < pkg["package_size_before"]
    assert pkg["installed_size_after"] < pkg["installed_size_before"]
    p = pruned["package"]
    keys = ("package_size_before", "package_size_after", "installed_size_before", "installed_size_after")
    assert [p[k] for k in keys] == [pkg[k] for k in keys]  # one JSON shape per fact: prune's keys
    with zipfile.ZipFile(out) as z:
        after = {f"{whl}!{i.filename}": i.file_size for i in z.infolist()}
    for f in doc["files"]:  # each file: before -> after, as prune writes it
        assert f["file_bytes"] - f["savings"]["bytes"] == after[f["path"]] < f["file_bytes"]
    text = cli("size", str(whl), "--keep", "sm_80")[1]
    assert (f"wheel {whl}: {pkg['package_size_before']:,} -> {pkg['package_size_after']:,} bytes compressed, installed "
            f"{pkg['installed_size_before']:,} -> {pkg['installed_size_after']:,}") in text
    assert re.search(rf"!pkg/a\.o +{doc['files'][1]['file_bytes']:,} +{after[f'{whl}!pkg/a.o']:,} ", text)
    code, text = cli("prune", str(whl), "--keep", "sm_80", "--dry-run")
    assert code == 0 and f"installed: {pkg['installed_size_before']:,} -> {pkg['installed_size_after']:,} bytes" in text
    # the installed folder: its files (RECORD included) before and after; --no-backup: no backup row in the
    # RECORD (prune_tree adds one per backup), so its rows are the pruned wheel's
    site = tmp_path / "site"
    with zipfile.ZipFile(whl) as z:
        z.extractall(site)
    before = _installed(site)
    folder = _json("prune", str(site), "--keep", "sm_80", "--in-place", "--no-backup", schema="prune")["package"]
    assert (folder["installed_size_before"], folder["installed_size_after"]) == (before, _installed(site))
    assert folder["installed_size_after"] == pkg["installed_size_after"]  # the same files, the same RECORD rows
    # with backups (the default): size --keep of the folder predicts its installed size (one entry of
    # savings.packages, the RECORD grown by a row per backup) and prune reports it, to the byte
    env = tmp_path / "env"
    with zipfile.ZipFile(whl) as z:
        z.extractall(env)
    (predicted,) = _json("size", str(env), "--keep", "sm_80")["savings"]["packages"]
    text = cli("size", str(env), "--keep", "sm_80")[1]
    code, dry = cli("prune", str(env), "--keep", "sm_80", "--dry-run")
    folder = _json("prune", str(env), "--keep", "sm_80", "--in-place", schema="prune")["package"]
    assert predicted == {"path": str(env), "kind": "folder", "installed_size_before": before,
                         "installed_size_after": folder["installed_size_after"]}
    assert folder["installed_size_after"] == _installed(env) > pkg["installed_size_after"]  # the backups' rows
    assert f"folder {env}: installed {before:,} -> {_installed(env):,}\n" in text
    assert code == 0 and f"installed: {before:,} -> {_installed(env):,} bytes" in dry


def test_keep_that_leaves_nothing_is_reported_as_refused(dup: Path) -> None:
    doc = _json("size", str(dup / "a.o"), "--keep", "gfx90a")
    assert doc["files"][0]["savings"]["bytes"] == 0 and "leaves no device image" in doc["files"][0]["savings"][
        "refused"]


# --------------------------------------------------------------------------- budgets and diffs


def test_budget_rules(builds: tuple[Path, Path]) -> None:
    old, new = builds
    assert cli("size", str(old), "--budget", "arch:sm_90=1", "--budget", "total=10M")[0] == 0
    code, text = cli("size", str(new), "--budget", "arch:sm_90=1", "--budget", "total=10M")
    assert code == 4 and "BUDGET EXCEEDED: 1 over" in text and "arch:sm_90=1: sm_90 is" in text
    code, text = cli("size", str(new), "--budget", "kernel:pressure=16", "--budget", "function=1G", "--json")
    assert code == 4
    doc = json.loads(text)
    v = doc["budget"]["violations"]
    assert {x["subject"].rsplit(":", 1)[1] for x in v} == {"pressure"} and len(v) == 2  # sm_80 and sm_90
    sizes = {(i["arch"], fn["name"]): fn["size"] for f in doc["files"] for i in f["images"] for fn in i["functions"]}
    assert sorted(x["bytes"] for x in v) == sorted(s for (_, n), s in sizes.items() if n == "pressure")
    (f,) = doc["files"]
    assert cli("size", str(new), f"--budget=file:*new.o={f['device_bytes'] - 1}")[0] == 4
    assert cli("size", str(new), f"--budget=file:*new.o={f['device_bytes']}")[0] == 0
    assert cli("size", str(new), "--budget=file:*other*=1")[0] == 0
    for bad in ("arch=", "nothing=1M", "total:x=1", "kernel"):
        assert cli("size", str(new), "--budget", bad)[0] == 2
    assert parse_rule("arch:sm_9*=1.5M").limit == 1572864


def _res_usage(path: Path) -> dict[tuple[str, str], tuple[int, int]]:
    """(sm, function) -> (REG, STACK) from cuobjdump -res-usage."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    arch = ""
    name = ""
    for line in run_tool([require_tool("cuobjdump"), "-res-usage", path]).stdout.splitlines():
        if m := re.match(r"arch = (sm_\d+)", line.strip()):
            arch = m.group(1)
        elif m := re.match(r"\s*Function (\S+):", line):
            name = m.group(1)
        elif m := re.search(r"REG:(\d+) STACK:(\d+)", line):
            out[(arch, name)] = int(m.group(1)), int(m.group(2))
    return out


def test_diff_of_two_builds(builds: tuple[Path, Path]) -> None:
    old, new = builds
    d = _json("size", "--diff", str(old), str(new), schema="size-diff")
    archs = {a["arch"]: a for a in d["by_arch"]}
    assert archs["sm_90"]["status"] == "added" and archs["sm_90"]["old"] == 0 < archs["sm_90"]["new"]
    assert set(archs) == {"sm_80", "sm_90"} and archs["sm_80"]["status"] == "changed"  # -O0
    old_doc, new_doc = _json("size", str(old)), _json("size", str(new))
    assert d["totals"]["device_bytes"] == {"old": old_doc["totals"]["device_bytes"],
                                           "new": new_doc["totals"]["device_bytes"],
                                           "delta": new_doc["totals"]["device_bytes"] - old_doc["totals"][
                                               "device_bytes"]}
    added = {(f["arch"], f["name"]) for f in d["functions"] if f["status"] == "added"}
    assert ("sm_90", "pressure") in added and ("sm_90", "calm") in added
    reg_old, reg_new = _res_usage(old), _res_usage(new)
    changed = {(r["arch"], r["name"]): r["changes"] for r in d["resources"]}
    for key in reg_old.keys() & reg_new.keys():
        for k, field in enumerate(("registers", "stack")):
            if reg_old[key][k] != reg_new[key][k]:
                assert changed[key][field] == {"old": reg_old[key][k], "new": reg_new[key][k]}
            else:
                assert field not in changed.get(key, {})
    assert any("registers" in c for c in changed.values()) and any("stack" in c for c in changed.values())
    code, text = cli("size", "--diff", str(old), str(new))
    assert code == 0 and text.startswith("### devbin size --diff")
    assert "| `sm_90` | 0 |" in text
    (arch, name), (o, n) = next((k, (reg_old[k][0], reg_new[k][0])) for k in sorted(reg_old.keys() & reg_new.keys())
                                if reg_old[k][0] != reg_new[k][0])
    assert f"| `{name}` | `{arch}` | registers {o} → {n}" in text


# --------------------------------------------------------------------------- outputs


def test_text_csv_and_filters(dup: Path) -> None:
    code, text = cli("size", str(dup / "libdup.so"), str(dup / "libdup.a"), "--top", "2")
    assert code == 0
    assert "void scale<2>(float*)" in text and "DUPLICATES:" in text and "sm_90" in text
    code, text = cli("size", str(dup / "libdup.so"), "--csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    doc = _json("size", str(dup / "libdup.so"))
    fns = [(fn["name"], fn["size"]) for f in doc["files"] for i in f["images"] for fn in i["functions"]]
    assert [(r["function"], int(r["function_size"])) for r in rows if r["function"]] == fns
    assert {r["address"] for r in rows} == {i["address"] for f in doc["files"] for i in f["images"]}
    only = _json("size", str(dup / "libdup.so"), "--arch", "sm_90")
    (f,) = only["files"]
    assert {i["arch"] for i in f["images"]} == {"sm_90", "compute_90"}
    assert f["stored_size"] + f["hidden"] + f["overhead"] == f["device_bytes"]
    assert f["overhead"] == doc["files"][0]["overhead"]


def test_no_device_code_and_bad_arguments(tmp_path: Path) -> None:
    host = tmp_path / "h.txt"
    host.write_text("nothing\n")
    assert cli("size", str(host))[0] == 3
    assert cli("size", str(host), "--top", "-1")[0] == 2
    with pytest.raises(SystemExit):
        cli("size", str(host), "--json", "--csv")


def test_report_dict_is_what_json_prints(dup: Path) -> None:
    files = measure([dup / "a.o"])
    doc = report_dict(files, top=20)
    assert {"schema": "devbin.size/1", **json.loads(json.dumps(doc))} == _json("size", str(dup / "a.o"))


def test_a_folder_is_measured_as_an_environment(dup: Path) -> None:
    doc = _json("size", str(dup))
    paths = [f["path"] for f in doc["files"]]
    assert paths == [str(dup / "a.o"), str(dup / "b.o"), str(dup / "c.o"), f"{dup / 'libdup.a'}!a.o",
                     f"{dup / 'libdup.a'}!b.o", f"{dup / 'libdup.a'}!c.o", str(dup / "libdup.so")]
    t = doc["totals"]
    assert t["device_bytes"] == sum(f["device_bytes"] for f in doc["files"]) == t["stored_size"] + t["overhead"]
    assert t["size"] == sum(a["size"] for a in doc["by_arch"]) == sum(k["size"] for k in doc["by_kind"])


def test_compressed_bundle_entries_share_its_bytes(amdgpu_objects: dict[str, Path], tmp_path: Path) -> None:
    bundler = require_tool("clang-offload-bundler-19")
    out = tmp_path / "k.ccob"
    run_tool([bundler, "-type=o", "-compress", "-bundle-align=4096",
              "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx942",
              "-input=/dev/null", f"-input={amdgpu_objects['gfx90a_obj']}", f"-input={amdgpu_objects['gfx942_obj']}",
              f"-output={out}"])
    (f,) = _json("size", str(out))["files"]
    assert f["device_bytes"] == out.stat().st_size == f["stored_size"] + f["overhead"]
    sizes = {i["arch"]: (i["size"], i["stored_size"], i["stored_exact"]) for i in f["images"]}
    assert {a: s for a, (s, _, _) in sizes.items()} == {
        "gfx90a": amdgpu_objects["gfx90a_obj"].stat().st_size, "gfx942": amdgpu_objects["gfx942_obj"].stat().st_size}
    assert all(not exact for _, _, exact in sizes.values())
    total = sum(s for s, _, _ in sizes.values())
    for size, stored, _ in sizes.values():  # shares in proportion to the uncompressed sizes, to the byte
        assert abs(stored - f["stored_size"] * size / total) < 1


def test_related_sections_of_cubin_functions() -> None:
    """What belongs to a cubin function beside its code, from its sections' names: every prefix of the
    module docstring, constant banks by number (bank 0 is ``constant_bank``), sizes summed per key, and
    names that only look alike (no function part, a bank that is no number, a NOBITS section) left out."""
    from devbin.formats.elf import constants as C
    from devbin.formats.elf.model import ElfModel, SectionSpec, SymbolSpec
    from devbin.formats.elf.reader import ElfFile
    from devbin.formats.elf.writer import write
    from devbin.size.account import functions_of

    m = ElfModel(elfclass=2, little=True, e_type=C.ET_EXEC, machine=C.EM_CUDA)
    code = bytes(range(64))
    m.sections = [
        SectionSpec(".text.k", flags=C.SHF_ALLOC | C.SHF_EXECINSTR, data=code[:32], align=4),
        SectionSpec(".text.f", flags=C.SHF_ALLOC | C.SHF_EXECINSTR, data=code[32:], align=4),
        SectionSpec(".nv.constant0.k", data=b"\0" * 10), SectionSpec(".nv.constant3.k", data=b"\0" * 3),
        SectionSpec(".nv.constantX.k", data=b"\0" * 5), SectionSpec(".nv.constant2.", data=b"\0" * 7),
        SectionSpec(".nv.info.k", data=b"\0" * 12), SectionSpec(".nv.info.", data=b"\0" * 4),
        SectionSpec(".rel.text.k", data=b"\0" * 16), SectionSpec(".rela.text.k", data=b"\0" * 24),
        SectionSpec(".nv.capmerc.text.k", data=b"\0" * 6), SectionSpec(".nv.merc.text.k", data=b"\0" * 2),
        SectionSpec(".nv.merc.nv.info.k", data=b"\0" * 1),
        SectionSpec(".nv.info.f", data=b"\0" * 8),
        SectionSpec(".nv.shared.f", sh_type=C.SHT_NOBITS, size=64),
        SectionSpec(".nv.constant0.f", sh_type=C.SHT_NOBITS, size=64),
    ]
    m.symbols = [SymbolSpec("k", 0, 32, type=C.STT_FUNC, other=0x10, section=".text.k"),
                 SymbolSpec("f", 0, 32, type=C.STT_FUNC, section=".text.f")]
    elf = ElfFile(write(m))
    k, f = functions_of(elf)
    assert (k.name, k.kind, k.size, f.name, f.kind, f.size) == ("k", "kernel", 32, "f", "function", 32)
    assert dict(k.related) == {"constant_bank": 10, "constant3": 3, "nv_info": 12, "relocations": 16 + 24,
                               "mercury": 6 + 2 + 1}
    assert dict(f.related) == {"nv_info": 8}
    assert k.digest != f.digest != 0  # the checksums of the two halves of ``code``


# --------------------------------------------------------------------------- text output (issue 27, items 8 and 10)


def test_top_zero_is_every_row_and_names_fit_the_columns(dup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--top 0`` is every row (bloaty's ``-n 0``; refused before); function names are cut to COLUMNS, to 80
    when stdout is no terminal and COLUMNS is unset, and never with ``--wide`` (always 100 before)."""
    lib = str(dup / "libdup.so")
    monkeypatch.delenv("COLUMNS", raising=False)
    doc = _json("size", lib, "--top", "0")
    code, text = cli("size", lib, "--top", "0")
    names = {fn["name"] for f in doc["files"] for i in f["images"] for fn in i["functions"]}
    assert code == 0 and len(doc["top_functions"]) == len(names) > 1 and len(_json("size", lib, "--top", "1")[
        "top_functions"]) == 1
    assert f"TOP {len(doc['top_functions'])} FUNCTIONS" in text
    assert "TOP 1 FUNCTIONS" in cli("size", lib, "--top", "1")[1]
    name = "only_a(float*, float, dup::S)"
    assert any(line.endswith(name) and len(line) <= 80 for line in text.splitlines())
    monkeypatch.setenv("COLUMNS", "50")
    narrow = cli("size", lib)[1].splitlines()
    (row,) = [line for line in narrow if line.endswith("...") and "only_a(" in line]
    assert len(row) == 50 and name.startswith(row.split(" kernel   ")[1][:-3])
    wide = cli("size", lib, "--wide")[1].splitlines()
    assert any(line.endswith(name) for line in wide) and not any("only_a(" in ln and "..." in ln for ln in wide)


def test_keep_result_comes_first_and_the_architecture_table_says_what_it_saves(dup: Path) -> None:
    """The ``--keep`` result is the second line (it was the last of the report, and its drops per
    architecture one long line); the architecture table has the SAVED column the HTML report has."""
    lib = str(dup / "libdup.so")
    doc = _json("size", lib, "--keep", "sm_90")
    code, text = cli("size", lib, "--keep", "sm_90")
    lines = text.splitlines()
    s = doc["savings"]
    total = doc["totals"]["file_bytes"]
    assert code == 0 and lines[1] == (f"--keep sm_90: `devbin prune` saves {s['bytes']:,} of {total:,} file bytes "
                                      f"({100 * s['bytes'] / total:.1f}%); the containers shrink by {s['freed']:,}")
    head = next(i for i, line in enumerate(lines) if line.startswith("VENDOR ARCH"))
    assert lines[head].split()[-1] == "SAVED"
    saved = {row.split()[1]: int(row.split()[-1].replace(",", "")) for row in lines[head + 1:head + 5]}
    assert saved == {a["arch"]: s["by_arch"].get(a["arch"], 0) for a in doc["by_arch"]} and saved["sm_80"] > 0
    assert "dropped images per architecture" not in text and max(map(len, lines)) < 200
    assert "SAVED" not in cli("size", lib)[1]


def test_budget_violations_name_their_architecture(builds: tuple[Path, Path]) -> None:
    """A function over budget in two cubins of one fatbin was two identical-looking lines
    (``new.o@.nv_fatbin#0.0:pressure``): each now says its architecture, in the text and the JSON."""
    _, new = builds
    code, text = cli("size", str(new), "--budget", "kernel:pressure=16")
    rows = [line for line in text.splitlines() if line.startswith("  kernel:pressure=16: ")]
    assert code == 4 and len(rows) == len(set(rows)) == 2
    assert {row.split(":pressure ")[1].split(")")[0] for row in rows} == {"(sm_80", "(sm_90"}
    code, js = cli("size", str(new), "--budget", "kernel:pressure=16", "--json")
    assert code == 4 and sorted(v["arch"] for v in json.loads(js)["budget"]["violations"]) == ["sm_80", "sm_90"]


def test_diff_applies_the_budget_to_new_and_names_both_builds(builds: tuple[Path, Path]) -> None:
    """``--budget`` with ``--diff`` was ignored (exit 0): it is checked against NEW; the header names OLD and
    NEW; an architecture only NEW has is one row, its functions left out of the function table."""
    old, new = builds
    code, text = cli("size", "--diff", str(old), str(new), "--budget", "arch:sm_90=1")
    assert code == 4 and "\nBUDGET EXCEEDED: 1 over their limit\n  arch:sm_90=1: sm_90 is " in text
    assert cli("size", "--diff", str(new), str(old), "--budget", "arch:sm_90=1")[0] == 0  # NEW is old.o
    code, js = cli("size", "--diff", str(old), str(new), "--budget", "total=1", "--json")
    d = json.loads(js)
    jsonschema.Draft202012Validator(json.loads(schema_cmd.text("size-diff"))).validate(d)
    assert code == 4 and d["budget"]["violations"][0]["subject"] == "total"
    assert f"old: `{old}`, new: `{new}`" in text.splitlines()[2]
    n = sum(1 for f in d["functions"] if f["arch"] == "sm_90")
    # spill.cu's five: gather, pressure, calm, descend, recurse
    assert n == 5 and f"| `sm_90` | 0 | {next(a['new'] for a in d['by_arch'] if a['arch'] == 'sm_90'):,} |" in text
    assert f"| added whole; functions: {n} |" in text
    table = text.split("#### Functions")[1].split("####")[0]
    assert "`sm_90`" in table.split("\n\n")[1] and "| `sm_90` |" not in table and "| `sm_80` |" in table


def test_prune_text_is_an_aligned_table_with_separators(dup: Path, tmp_path: Path) -> None:
    """``prune`` printed the address first (rows as wide as the longest address), numbers without
    separators and notes in ELF jargon: rows are now action, arch, kind, bytes, then the address."""
    site = tmp_path / "site-packages" / "a_package_with_a_long_name" / "lib"
    site.mkdir(parents=True)
    shutil.copy(dup / "libdup.so", site / "libdup.so")
    for target in (site / "libdup.so", tmp_path / "site-packages"):
        lines = cli_ok("prune", target, "--keep", "sm_90", "--dry-run").splitlines()
        assert lines[0] == "action arch       kind           bytes  image"
        rows = [line for line in lines[1:] if line[:5] in ("keep ", "drop ")]
        at = len(lines[0]) - len("image")  # every address starts under "image", every size ends under "bytes"
        assert len(rows) == 7 and all(r[at:].startswith(f"{target}@.nv_fatbin#") or r[at:].startswith(
            f"{site / 'libdup.so'}@.nv_fatbin#") for r in rows)
        assert rows[1].startswith("drop   sm_80      cubin          4,904  ")
        (arch,) = [line for line in lines if line.startswith("sm_80 ")]
        assert arch.split() == ["sm_80", "9,680", "0", "9,680"]
        assert any(line.startswith(("file: 1,011,112 -> ", "files: 1,011,112 -> ")) for line in lines)
        assert not any(line.startswith("saved ") for line in lines)
    src = tmp_path / "p.so"
    code = run_devbin("prune", site / "libdup.so", "--keep", "sm_90", "-o", src)
    assert code.returncode == 0 and "cut out of the file" in code.stderr
    assert "program-header table" not in code.stderr and "compacted;" not in code.stderr


def test_keep_reads_files_whose_names_hold_reserved_characters(dup: Path, tmp_path: Path) -> None:
    """A file's path in the report is its address, reserved characters escaped (``lib@k.so`` ->
    ``lib%40k.so``, docs/IMAGES.md): --keep reads the file the address names, so it predicts what prune
    saves, a file's, an archive member's and the folder's."""
    env = tmp_path / "e!nv"
    env.mkdir()
    shutil.copy(dup / "libdup.so", env / "lib@k;1.so")
    shutil.copy(dup / "libdup.a", env / "lib#k%.a")
    doc = _json("size", str(env), "--keep", "sm_90")
    files = {f["path"]: f["savings"] for f in doc["files"]}
    assert f"{tmp_path}/e%21nv/lib%40k%3B1.so" in files
    assert not [s for s in files.values() if "refused" in s]
    for name in ("lib@k;1.so", "lib#k%.a"):
        pruned = _json("prune", str(env / name), "--keep", "sm_90", "--dry-run", schema="prune")
        mine = [s for p, s in files.items() if p.startswith(f"{tmp_path}/e%21nv/{escape(name)}")]
        assert sum(s["bytes"] for s in mine) == pruned["file_bytes_saved"] > 0
    (predicted,) = doc["savings"]["packages"]
    folder = _json("prune", str(env), "--keep", "sm_90", "--in-place", schema="prune")["package"]
    assert predicted["installed_size_after"] == folder["installed_size_after"] < predicted["installed_size_before"]
