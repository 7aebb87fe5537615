"""The architecture tables: one per vendor (targets/amdgpu/mach.py, targets/nvidia/archs.py).

Table-driven checks first (every AMDGPU name -> mach -> name, the generic families, NVIDIA
names parse and print back, both cubin header ABIs), then the tables against the real tools:
``llvm-readelf-19``/``-22 -h`` name exactly the mach numbers the table says they name,
``clang-19``/``clang-22`` accept each processor, write its mach number and accept exactly its
target-ID features, ``nvcc --list-gpu-code`` lists only known SM numbers; and code objects built
here with clang-19 are listed under their names and chosen by ``devbin select``, bare and in a
clang-offload-bundler-19 bundle.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import SOURCES, require_tool
from devbin.targets.amdgpu import mach
from devbin.targets.amdgpu.matching import match, parse_device
from devbin.targets.amdgpu.targetid import parse_target_id
from devbin.targets.nvidia import archs

from tests.runners import cli, run_tool

# --------------------------------------------------------------------------- AMDGPU, table-driven

#: The generic families as LLVM's AMDGPUUsage "Generic processors" table lists them for LLVM 19-22
#: (written out here, not derived, so a change to the table must be a deliberate one).
LLVM_GENERIC_FAMILIES = {
    "gfx9-generic": {"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"},
    "gfx9-4-generic": {"gfx940", "gfx941", "gfx942", "gfx950"},
    "gfx10-1-generic": {"gfx1010", "gfx1011", "gfx1012", "gfx1013"},
    "gfx10-3-generic": {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"},
    "gfx11-generic": {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"},
    "gfx12-generic": {"gfx1200", "gfx1201"},
}


def test_every_name_round_trips_through_its_mach() -> None:
    assert len({p.mach for p in mach.PROCESSORS}) == len(mach.PROCESSORS)
    assert len({p.name for p in mach.PROCESSORS}) == len(mach.PROCESSORS)
    for p in mach.PROCESSORS:
        assert mach.MACH_BY_NAME[p.name] == p.mach and mach.mach_name(p.mach) == p.name
        assert mach.processor(p.name) is p and 0 < p.mach <= 0xFF
        flags = mach.decode_flags(p.mach | 0x01000000 * p.generic_version, ei_abiversion=4)
        assert flags.processor == p.name and flags.is_generic == p.is_generic
        assert flags.generic_version == p.generic_version and flags.unknown_bits == 0
        for alias in p.aliases:
            assert alias not in mach.BY_NAME and mach.processor(alias) is p
    # the processors LLVM 19-22 name, by name (LLVM 22's llc -mcpu=help plus gfx940/gfx941 of LLVM 19)
    for name in ("gfx600", "gfx602", "gfx705", "gfx803", "gfx805", "gfx90a", "gfx90c", "gfx940", "gfx941",
                 "gfx942", "gfx950", "gfx1013", "gfx1036", "gfx1153", "gfx1201", "gfx1250", "gfx1251",
                 "gfx9-generic", "gfx9-4-generic", "gfx10-1-generic", "gfx10-3-generic", "gfx11-generic",
                 "gfx12-generic"):
        assert mach.processor(name) is not None, name


def test_unknown_mach_stays_raw() -> None:
    assert mach.decode_flags(0x300, ei_abiversion=2).processor == ""  # EF_AMDGPU_MACH_NONE
    for m in range(1, 0x100):
        if m not in mach.BY_MACH:
            assert mach.mach_name(m) == f"EF_AMDGPU_MACH_{m:#05x}"
            f = mach.decode_flags(m | 0x300, ei_abiversion=2)
            assert f.mach == m and f.processor == mach.mach_name(m) and f.raw == m | 0x300
            assert mach.readelf_flag_names(f) == ["xnack+"]
    assert mach.processor("gfx9999") is None and mach.supported_features("gfx9999") == ()
    assert mach.generic_of("gfx9999") is None and mach.gfx_major("gfx9999") == 99


def test_generic_families() -> None:
    fams = {g: set(m) for g, m in mach.GENERIC_FAMILIES.items()}
    for g, members in LLVM_GENERIC_FAMILIES.items():
        assert {m for m in fams[g] if mach.BY_NAME[m].named_by} == members, g
    assert fams["gfx12-5-generic"] == {"gfx1250", "gfx1251"}
    assert fams["gfx11-generic"] == LLVM_GENERIC_FAMILIES["gfx11-generic"] | {"gfx1154"}
    for p in mach.PROCESSORS:
        if p.generic is not None:
            g = mach.BY_NAME[p.generic]
            assert g.is_generic and not p.is_generic and g.gfx == p.gfx
            assert set(g.features) <= set(p.features), (p.name, g.name)  # generic code runs on every member
            assert mach.generic_of(p.name) == g.name
        if p.is_generic:
            assert p.generic_version == mach.GENERIC_MIN_VERSION[p.name] == 1 and mach.GENERIC_FAMILIES[p.name]
    assert mach.generic_of("gfx908") is None and mach.generic_of("gfx90a") is None  # no generic covers them


@pytest.mark.parametrize("generic", sorted(LLVM_GENERIC_FAMILIES))
def test_generic_object_matches_its_members_only(generic: str) -> None:
    image = parse_target_id(generic)
    for p in mach.PROCESSORS:
        if p.is_generic or p.is_r600:
            continue
        verdict = match(image, parse_device(p.name), generic_version=1)
        assert verdict.ok == (p.generic == generic), (generic, p.name, verdict.reason)
        if verdict.ok:
            assert not match(image, parse_device(p.name), generic_version=0).ok


def test_features_and_gfx_major() -> None:
    assert mach.supported_features("gfx90a") == ("sramecc", "xnack")
    assert mach.supported_features("gfx9-generic") == ("xnack",)
    assert mach.supported_features("gfx1101") == () and mach.supported_features("gfx1250") == ()
    assert mach.supported_features("carrizo") == ("xnack",)  # alternative name of gfx801
    assert [mach.gfx_major(n) for n in ("gfx90a", "gfx1151", "gfx10-3-generic", "gfx12-5-generic", "tahiti")] == [
        9, 11, 10, 12, 6]
    assert mach.gfx_major("r600") is None and mach.gfx_major("sm_90") is None
    assert {p.name for p in mach.PROCESSORS if p.unified_vgpr} == {"gfx90a", "gfx940", "gfx941", "gfx942", "gfx950",
                                                                    "gfx9-4-generic"}


# --------------------------------------------------------------------------- NVIDIA, table-driven


def _nv_names() -> Iterator[str]:
    for a in archs.SM_ARCHS.values():
        for v in a.variants:
            for prefix in ("sm", "compute", "lto"):
                yield f"{prefix}_{a.sm}{v}"


def test_nvidia_names_round_trip() -> None:
    names = list(_nv_names())
    assert {"sm_90a", "sm_100f", "compute_103f", "sm_110a", "sm_121f", "lto_89"} <= set(names)
    for name in names:
        a = archs.parse_arch(name)
        assert a.name == name == str(a) and a.known and archs.known_sm(a.sm)
        assert archs.try_parse_arch(name) == a and f"{a.major}{a.minor}" == str(a.sm)
    for bad in ("sm_9", "sm90", "gfx90a", "sm_90x", "compute_", ""):
        assert archs.try_parse_arch(bad) is None
    assert not archs.parse_arch("sm_89a").known and not archs.parse_arch("sm_90f").known
    assert not archs.parse_arch("sm_99").known  # parsed and kept, but not in the table


def test_nvidia_families() -> None:
    fam = {sm: a.family for sm, a in archs.SM_ARCHS.items()}
    assert fam[100] == fam[103] == 10 and fam[110] == 11 and fam[120] == fam[121] == 12
    assert archs.SM_ARCHS[90].variants == ("", "a") and archs.SM_ARCHS[100].variants == ("", "a", "f")
    assert archs.SM_ARCHS[86].variants == ("",)
    assert archs.runs_on(archs.parse_arch("sm_100f"), (10, 3))[0]
    assert not archs.runs_on(archs.parse_arch("sm_100f"), (11, 0))[0]


@pytest.mark.parametrize("sm", sorted(archs.SM_ARCHS))
def test_both_cubin_header_abis(sm: int) -> None:
    # old ABI (CUDA <= 12): EI_OSABI 0x33, ABI version 7, SM in bits 0..7 and EF_CUDA_ACCELERATORS for `a`
    old = sm | 0x400 | (sm << 16)
    assert archs.sm_from_e_flags(0x33, 7, old) == sm
    assert not archs.is_arch_specific(0x33, 7, old)
    assert archs.is_arch_specific(0x33, 7, old | archs.EF_CUDA_ACCELERATORS)
    # CUDA 13 ABI: EI_OSABI 0x41, ABI version 8, SM in bits 8..15; `a` only from .nv.compat attribute 0x09
    new = sm << 8 | 0x0C
    assert archs.sm_from_e_flags(archs.ELFOSABI_CUDA_V2, 8, new) == sm
    assert archs.is_cuda13_header(archs.ELFOSABI_CUDA_V2, 8) and not archs.is_cuda13_header(0x33, 7)
    assert not archs.is_arch_specific(0x41, 8, new | 0x800)  # bit 11 is no `a` flag in the new header
    assert archs.is_arch_specific(0x41, 8, new, [(0x09, 1)])
    assert not archs.is_arch_specific(0x41, 8, new, [(0x09, 0), (0x02, 1)])


# --------------------------------------------------------------------------- against the tools


def _elf_header(e_flags: int) -> bytes:
    ident = b"\x7fELF" + bytes([2, 1, 1, mach.ELFOSABI_AMDGPU_HSA, 4]) + bytes(7)
    return ident + struct.pack("<HHIQQQIHHHHHH", 1, 224, 1, 0, 0, 0, e_flags, 64, 0, 0, 64, 0, 0)


@pytest.mark.parametrize("version", [19, 22])
def test_readelf_names_the_table(version: int, tmp_path: Path) -> None:
    """llvm-readelf -h names exactly the mach numbers the table says that release names."""
    readelf = require_tool(f"llvm-readelf-{version}")
    files = []
    for m in range(0x100):
        f = tmp_path / f"m{m:02x}.o"
        f.write_bytes(_elf_header(m))
        files.append(f)
    out = run_tool([readelf, "-h", *map(str, files)]).stdout
    seen = dict(re.findall(r"File: \S*m([0-9a-f]{2})\.o\n(?:.*\n)*?\s*Flags:\s*0x[0-9A-Fa-f]+(?:, (\S+))?", out))
    assert len(seen) == 0x100
    for m in range(1, 0x100):
        p = mach.BY_MACH.get(m)
        want = p.name if p is not None and version in p.named_by else ""
        assert seen[f"{m:02x}"] == want, (hex(m), seen[f"{m:02x}"], want)


_TINY_CL = "kernel void k(global int *p) { *p = 1; }\n"


def _clang_ok(clang: str, mcpu: str, src: Path, out: Path | None) -> bool:
    cov = ["-mcode-object-version=6"] if "-generic" in mcpu else []
    argv = [clang, "--target=amdgcn-amd-amdhsa", f"-mcpu={mcpu}", *cov, "-nogpulib", "-c", str(src)]
    argv += ["-o", str(out)] if out is not None else ["-o", "/dev/null", "-###"]
    return run_tool(argv, check=False).returncode == 0


@pytest.mark.parametrize("version", [19, 22])
def test_clang_agrees_with_the_table(version: int, tmp_path: Path) -> None:
    """clang-N accepts every processor (and alternative name) the table gives LLVM N, writes its mach
    number, accepts exactly its features after the name, and rejects the names LLVM N lacks."""
    clang = require_tool(f"clang-{version}")
    src = tmp_path / "k.cl"
    src.write_text(_TINY_CL)
    obj = tmp_path / "k.o"
    for p in mach.PROCESSORS:
        if p.is_r600:
            continue
        if version not in p.named_by:
            assert not _clang_ok(clang, p.name, src, None), (version, p.name)
            continue
        for name in (p.name, *p.aliases):
            assert _clang_ok(clang, name, src, obj), (version, name)
            e_flags = struct.unpack_from("<I", obj.read_bytes(), 48)[0]
            assert mach.decode_flags(e_flags, mach.ELFOSABI_AMDGPU_HSA, obj.read_bytes()[8]).processor == p.name
            assert e_flags >> 24 == p.generic_version, name
        for feature in mach.FEATURES:
            assert _clang_ok(clang, f"{p.name}:{feature}+", src, None) == (feature in p.features), (p.name, feature)


def test_nvcc_lists_known_archs() -> None:
    nvcc = require_tool("nvcc")
    for flag in ("--list-gpu-code", "--list-gpu-arch"):
        out = run_tool([nvcc, flag]).stdout.split()
        for name in out:
            a = archs.parse_arch(name)
            assert a.known and a.name == name, name


# --------------------------------------------------------------------------- devbin on clang-19 objects

#: What clang-19 builds here, each with the device that must choose it.
OBJECTS = {"gfx803": "gfx803", "gfx900": "gfx900", "gfx1010": "gfx1010", "gfx1151": "gfx1151",
           "gfx1201": "gfx1201", "gfx9-generic": "gfx906", "gfx10-1-generic": "gfx1012",
           "gfx10-3-generic": "gfx1032", "gfx11-generic": "gfx1103", "gfx12-generic": "gfx1200"}


@pytest.fixture(scope="module")
def clang19_objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    clang = require_tool("clang-19")
    bundler = require_tool("clang-offload-bundler-19")
    out = tmp_path_factory.mktemp("arch_objects")
    built: dict[str, Path] = {}
    for cpu in OBJECTS:
        obj = out / f"k.{cpu}.o"
        cov = ["-mcode-object-version=6"] if cpu.endswith("-generic") else []
        run_tool([clang, "-target", "amdgcn-amd-amdhsa", f"-mcpu={cpu}", *cov, "-nogpulib", "-cl-std=CL2.0",
                  "-O2", "-c", "-o", str(obj), str(SOURCES / "amdgpu_kernels.cl")])
        built[cpu] = obj
    bundle = out / "all.hipfb"
    ids = ",".join(["host-x86_64-unknown-linux-gnu", *(f"hipv4-amdgcn-amd-amdhsa--{c}" for c in OBJECTS)])
    run_tool([bundler, "-type=o", f"-targets={ids}", "-input=/dev/null",
              *(f"-input={built[c]}" for c in OBJECTS), f"-output={bundle}"])
    built["bundle"] = bundle
    return built


def _readelf_name(path: Path) -> str:
    readelf = require_tool("llvm-readelf-19")
    out = run_tool([readelf, "-h", str(path)]).stdout
    m = re.search(r"Flags:\s*0x[0-9A-Fa-f]+, ([^,\s]+)", out)
    assert m is not None, out
    return m[1]


@pytest.mark.parametrize("cpu", list(OBJECTS))
def test_bare_object_listed_and_selected(clang19_objects: dict[str, Path], cpu: str) -> None:
    path = clang19_objects[cpu]
    assert _readelf_name(path) == cpu
    code, text = cli("list", "--json", str(path))
    images = json.loads(text)["images"]
    assert code == 0 and [(i["kind"], i["arch"].split(":")[0]) for i in images] == [("amdgpu", cpu)]
    devices = mach.GENERIC_FAMILIES[cpu] if cpu.endswith("-generic") else (cpu,)
    assert OBJECTS[cpu] in devices
    for device in devices:
        code, text = cli("select", str(path), "--device", device)
        assert code == 0 and text.strip() == f"{path}: {cpu} (code object)", (device, text)
    other = "gfx1030" if cpu != "gfx10-3-generic" else "gfx1100"
    code, _ = cli("select", str(path), "--device", other)
    assert code == 1


def test_bundle_listed_and_selected(clang19_objects: dict[str, Path]) -> None:
    bundle = clang19_objects["bundle"]
    code, text = cli("list", "--json", str(bundle))
    assert code == 0
    archs_listed = [i["arch"].split(":")[0] for i in json.loads(text)["images"] if i["kind"] == "amdgpu"]
    assert archs_listed == list(OBJECTS)
    for cpu, device in OBJECTS.items():
        code, text = cli("select", str(bundle), "--device", device)
        assert code == 0 and text.strip().endswith(f": {cpu} (code object)"), (device, text)
    # members without an exact image get their family's generic object; exact images win over generic ones
    for device, want in (("gfx1011", "gfx10-1-generic"), ("gfx1010", "gfx1010"), ("gfx1150", "gfx11-generic"),
                         ("gfx1151", "gfx1151"), ("gfx90c", "gfx9-generic"), ("gfx1036", "gfx10-3-generic")):
        code, text = cli("select", str(bundle), "--device", device)
        assert code == 0 and text.strip().endswith(f": {want} (code object)"), (device, text)
    code, _ = cli("select", str(bundle), "--device", "gfx90a")
    assert code == 1
