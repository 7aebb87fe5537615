"""Real HIP fat binaries: ``.hip_fatbin`` and ``.hipFatBinSegment`` made by clang-19's HIP driver.

Built at test time from tests/sources/hip_kernels.hip (no HIP headers needed).  Two
translation units, one compressed, linked into one ``.so``: its ``.hip_fatbin`` holds
two bundles back to back, each 4096-aligned, which clang-offload-bundler reads only one
at a time.  Oracles: clang-offload-bundler-19 on each bundle cut out of the section,
readelf's section table and dynamic relocations.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from devbin.formats.elf.reader import ElfFile
from devbin.images import Image, ScanReport, scan

from tests.conftest import SOURCES, require_tool
from tests.runners import cli_ok, run_tool

ARCHS = ("gfx90a:xnack+", "gfx1030")
IDS = {f"hipv4-amdgcn-amd-amdhsa--{a}" for a in ARCHS}


@pytest.fixture(scope="module")
def hip(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("hip")
    clang = require_tool("clang-19")
    base = [clang, "-x", "hip", "-nogpuinc", "-nogpulib", *(f"--offload-arch={a}" for a in ARCHS), "-fPIC", "-O2",
            "-c", str(SOURCES / "hip_kernels.hip")]
    built = {"square_o": out / "square.o", "cube_o": out / "cube.o", "so": out / "libhip.so"}
    run_tool([*base, "-DNAME=square", "-o", str(built["square_o"])])
    run_tool([*base, "-DNAME=cube", "--offload-compress", "-o", str(built["cube_o"])])
    run_tool([clang, "-shared", "-o", str(built["so"]), str(built["square_o"]), str(built["cube_o"])])
    return built


def _index(f: Image) -> int | None:
    return f.address.entry.container if f.address.entry else None


def _bundler(*args: str) -> str:
    return run_tool([require_tool("clang-offload-bundler-19"), *args]).stdout


def test_two_bundles_in_one_section(hip: dict[str, Path], tmp_path: Path) -> None:
    rep = ScanReport()
    found = list(scan([hip["so"]], report=rep))
    assert not rep.warnings
    assert [(_index(f), f.get("bundle-id"), f.compression) for f in found] == [
        (0, "hipv4-amdgcn-amd-amdhsa--gfx1030", "none"), (0, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", "none"),
        (1, "hipv4-amdgcn-amd-amdhsa--gfx1030", "zstd"), (1, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", "zstd")]
    elf = ElfFile(hip["so"].read_bytes())
    sec = next(s for s in elf.sections if s.name == ".hip_fatbin")
    section = bytes(sec.data)
    starts = sorted({f.offset - sec.sh_offset for f in found})
    assert starts[0] == 0 and all(s % 4096 == 0 for s in starts)
    # Each bundle cut out of the section: the bundler lists the same IDs and unbundles the same bytes.
    ends = [*starts[1:], len(section)]
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        piece = tmp_path / f"bundle{index}.hipfb"
        piece.write_bytes(section[start:end])
        listed = set(_bundler("--list", "--type=o", f"--input={piece}").split())
        assert listed - {"host-x86_64-unknown-linux--"} == IDS
        for f in (f for f in found if _index(f) == index):
            assert f.get("bundle-id")
            out = tmp_path / f"{index}.{f.arch}.o"
            bid = f.get("bundle-id")
            _bundler("--unbundle", "--type=o", f"--input={piece}", f"--targets={bid}", f"--output={out}")
            assert out.read_bytes() == bytes(f.data()), (index, f.arch)
    # The bundler reads only the first bundle of the whole section.
    whole = tmp_path / "whole.hipfb"
    whole.write_bytes(section)
    assert set(_bundler("--list", "--type=o", f"--input={whole}").split()) - {"host-x86_64-unknown-linux--"} \
        == IDS


def _relative_relocs(so: Path) -> dict[int, int]:
    text = run_tool([require_tool("readelf"), "-rW", str(so)]).stdout
    return {int(o, 16): int(a, 16) for o, a in re.findall(r"^([0-9a-f]+)\s+\S+\s+R_X86_64_RELATIVE\s+([0-9a-f]+)$",
                                                          text, re.M)}


def test_hip_wrappers_point_at_the_bundles(hip: dict[str, Path]) -> None:
    for key, n in (("so", 2), ("square_o", 1), ("cube_o", 1)):
        rep = ScanReport()
        found = list(scan([hip[key]], report=rep))
        ws = [w for w in rep.wrappers if w.section == ".hipFatBinSegment"]
        assert len(ws) == n and all(w.found and w.version == 1 and w.target_section == ".hip_fatbin" for w in ws)
        assert sorted(w.target_offset for w in ws) == sorted({f.offset for f in found})
        assert all(f.get("wrapper-version") == "1" for f in found)
    # In the .so each wrapper's data pointer is a R_X86_64_RELATIVE whose addend is the bundle's address.
    elf = ElfFile(hip["so"].read_bytes())
    seg = next(s for s in elf.sections if s.name == ".hipFatBinSegment")
    fb = next(s for s in elf.sections if s.name == ".hip_fatbin")
    relocs = _relative_relocs(hip["so"])
    rep = ScanReport()
    list(scan([hip["so"]], report=rep))
    for w in rep.wrappers:
        addend = relocs[seg.sh_addr + (w.offset - seg.sh_offset) + 8]
        assert w.target_offset == addend - fb.sh_addr + fb.sh_offset


def test_prune_real_hip_library_shrinks(hip: dict[str, Path], tmp_path: Path) -> None:
    # Pruning a linked .so keeps every virtual address: the bundles are rewritten and packed at the start of
    # .hip_fatbin (4096-aligned; the wrappers moved with them), and the freed whole pages leave the file.
    from devbin.packaging.pruning import prune_file
    out = tmp_path / "libhip.gfx1030.so"
    res = prune_file(hip["so"], out, keep="gfx1030")
    assert res.file_bytes_saved > 0 and res.file_bytes_saved % 4096 == 0
    assert out.stat().st_size == hip["so"].stat().st_size - res.file_bytes_saved
    old, new = ElfFile(hip["so"].read_bytes()), ElfFile(out.read_bytes())
    assert [(s.name, s.sh_addr) for s in new.sections] == [(s.name, s.sh_addr) for s in old.sections]
    rep = ScanReport()
    found = list(scan([out], report=rep))
    assert not rep.warnings
    assert [(_index(f), f.arch, f.compression) for f in found] == [(0, "gfx1030", "none"),
                                                                         (1, "gfx1030", "zstd")]
    assert all(w.found for w in rep.wrappers)  # the wrappers still point at bundle starts
    before = {f.compression: bytes(f.data()) for f in scan([hip["so"]]) if f.arch == "gfx1030"}
    assert {f.compression: bytes(f.data()) for f in found} == before
    assert [(str(i.address), kept) for i, kept in res.images] == [
        (f"{hip['so']}@.hip_fatbin#{c}.{e}", arch == "gfx1030") for c in (0, 1) for e, arch in
        ((1, "gfx1030"), (2, "gfx90a:xnack+"))]  # entry 0: the empty host entry, no image
    run_tool([require_tool("readelf"), "-a", "-W", str(out)])


def test_load_real_hip_library(hip: dict[str, Path]) -> None:
    """`devbin load` on a host .so: the loader takes the code object devbin select chooses from each
    bundle of its .hip_fatbin (the scan's images), named by their addresses."""
    from devbin.load import Executable
    loaded = Executable("gfx1030").load(hip["so"])
    chosen = [i for i in scan([hip["so"]]) if i.arch == "gfx1030"]
    assert [o.name for o in loaded] == [str(i.address) for i in chosen] == [
        f"{hip['so']}@.hip_fatbin#0.1", f"{hip['so']}@.hip_fatbin#1.1"]
    printed = cli_ok("load", "--target", "gfx1030", "--json", str(hip["so"]))
    names = {s["name"] for s in json.loads(printed)["symbols"]}
    assert {"square", "cube"} <= names, names
