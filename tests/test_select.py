"""Image selection (`devbin select`, `devbin.select`): the driver's rules as a table, and real packages.

The table rows come from the vendors' documented rules:

NVIDIA (CUDA C++ Programming Guide, "Binary Compatibility", "PTX Compatibility",
"Feature Availability"; NVIDIA blog "NVIDIA Blackwell and NVIDIA CUDA 12.9 Introduce
Family-Specific Architecture Features"):
  [B] "a cubin object generated for compute capability X.y will only execute on devices of
      compute capability X.z where z >= y"
  [P] PTX for a compute capability can always be compiled to binary code of greater or equal
      compute capability (JIT by the driver)
  [A] arch-specific (a) code runs only on exactly its compute capability
  [F] family-specific (f) code runs on the same major with equal or higher minor
      (sm_100f on 10.0 and 10.3, sm_103f on 10.3 only, sm_120f on 12.0 and 12.1)
  [J] the driver JIT-compiles PTX only when no compatible cubin is present
AMD (shared/reference/llvm-amdgpu-formats.md):
  [X] §3.2: unspecified (any) object features match anything; a specified one must equal
      the device's (clang isCompatibleTargetID, ROCr Isa::IsCompatible)
  [G] §3.3: generic target of the device's family, generic version >= minimum (1)
  [O] §3.3/§6.5: prefer the exact processor, fall back to the family generic image
"""

from __future__ import annotations

import itertools
import json
import struct
from pathlib import Path

import pytest

import devbin
from conftest import PTX_DIR, SOURCES, require_tool
from devbin.errors import DeviceBinaryError, UsageError
from devbin.images import Address, BareElf, Entry, Image
from devbin.packaging.selection import (
    CHOSEN,
    OTHER,
    REJECTED,
    USABLE,
    Candidate,
    NoImageError,
    decide,
    module_of,
    parse_device,
)
from devbin.targets.amdgpu.mach import MACH_BY_NAME

from tests.runners import cli, run_tool

_ENTRY = itertools.count()
_SPEC: dict[str, str] = {}  # address -> the spec the table names the image by


def _amd_header(arch: str, generic_version: int) -> BareElf:
    """A code object v6 ELF header whose e_flags carry ``arch``'s mach and ``generic_version``."""
    flags = MACH_BY_NAME[arch.split(":", 1)[0]] | generic_version << 24
    head = b"\x7fELF\x02\x01\x01\x40\x04" + bytes(7) + struct.pack("<HHIQQQI", 1, 224, 1, 0, 0, 0, flags)
    return BareElf(224, 1, flags, 0x40, 4, len(head), memoryview(head))


def _img(spec: str, module: str = "m") -> Image:
    """``sm_80`` (SASS), ``compute_90a`` (PTX), ``lto_90`` (LTO-IR), ``gfx11-generic@2`` (AMD, generic v2):
    entry N of the fatbin or bundle ``module``."""
    arch, _, ver = spec.partition("@")
    vendor, container, native = "nvidia", "fatbin", None
    if arch.startswith("sm_"):
        kind = "cubin"
    elif arch.startswith("compute_"):
        kind = "ptx"
    elif arch.startswith("lto_"):
        kind, arch = "lto-ir", "compute_" + arch[4:]
    else:
        kind, vendor, container = "amdgpu", "amd", "bundle"
        native = _amd_header(arch, int(ver)) if ver else None
    address = Address(module, (Entry(0, next(_ENTRY)),))
    _SPEC[str(address)] = spec
    return Image(address, vendor, kind, arch, 64, 64, "none", container, "", 0, native=native)


def _name(c: Candidate | None) -> str | None:
    return None if c is None else _SPEC[c.name]


NVIDIA_ROWS: list[tuple[list[str], str, str | None]] = [
    # [B] same major, equal or higher minor; the closest (highest) SASS wins
    (["sm_80", "sm_86", "compute_80"], "sm_86", "sm_86"),
    (["sm_80", "sm_86"], "sm_89", "sm_86"),
    (["sm_86", "sm_80"], "sm_87", "sm_86"),
    (["sm_80"], "sm_86", "sm_80"),
    (["sm_86"], "sm_80", None),  # [B] lower minor does not run
    (["sm_80"], "sm_90", None),  # [B] another major never runs
    (["sm_100", "sm_103"], "sm_103", "sm_103"),
    (["sm_100"], "sm_103", "sm_100"),
    # [J] SASS before PTX; [P] PTX JIT on any cc >= its own, the highest one not above the device
    (["sm_80", "compute_80"], "sm_90", "compute_80"),
    (["compute_70", "compute_80", "sm_80"], "sm_90", "compute_80"),
    (["compute_80", "compute_90"], "sm_86", "compute_80"),
    (["compute_90"], "sm_86", None),
    (["sm_75", "compute_75"], "sm_80", "compute_75"),
    (["compute_100"], "sm_120", "compute_100"),
    (["sm_90", "compute_90"], "sm_90", "sm_90"),
    # [A] a variants: only exactly that compute capability, SASS and PTX alike
    (["sm_90a"], "sm_90", "sm_90a"),
    (["sm_90a"], "sm_90a", "sm_90a"),
    (["sm_90a", "compute_90a"], "sm_100", None),
    (["sm_90a", "compute_90"], "sm_100", "compute_90"),
    (["compute_90a", "compute_80"], "sm_90", "compute_90a"),
    (["compute_90a", "compute_80"], "sm_100", "compute_80"),
    (["sm_100a"], "sm_103", None),
    (["sm_100a"], "sm_100f", "sm_100a"),  # a device named sm_100f is the 10.0 GPU
    (["sm_90", "sm_90a"], "sm_90", "sm_90a"),  # tie at one cc: the more specific variant (documented choice)
    # [F] f variants: the family = same major, minor >= own
    (["sm_100f"], "sm_100", "sm_100f"),
    (["sm_100f"], "sm_103", "sm_100f"),
    (["sm_103f"], "sm_100", None),
    (["sm_100f"], "sm_120", None),
    (["sm_120f", "compute_120f"], "sm_121", "sm_120f"),
    (["compute_100f"], "sm_103", "compute_100f"),
    (["compute_100f"], "sm_120", None),  # f PTX does not cross majors, plain PTX does
    (["compute_100f", "compute_90"], "sm_120", "compute_90"),
    (["sm_110f"], "sm_110", "sm_110f"),
    # LTO-IR is not loaded by the driver
    (["lto_90"], "sm_90", None),
    (["lto_90", "compute_90"], "sm_90", "compute_90"),
]


@pytest.mark.parametrize(("images", "device", "expected"), NVIDIA_ROWS)
def test_nvidia_rules(images: list[str], device: str, expected: str | None) -> None:
    sel = decide([_img(s) for s in images], device)
    got = _name(sel.chosen)
    assert got == expected, "\n".join(sel.explain())
    assert sel.ok == (expected is not None)
    if expected is not None:
        assert sel.chosen is not None
        assert sel.jit == expected.startswith("compute_")
        assert sum(c.verdict == CHOSEN for c in sel.candidates) == 1
    else:
        assert all(c.verdict == REJECTED for c in sel.candidates)
        assert isinstance(sel.error(), NoImageError)


AMD_ROWS: list[tuple[list[str], str, str | None]] = [
    # [X] any matches either setting; set must equal the device's
    (["gfx90a"], "gfx90a:xnack+", "gfx90a"),
    (["gfx90a"], "gfx90a:xnack-", "gfx90a"),
    (["gfx90a:xnack+"], "gfx90a:xnack-", None),
    (["gfx90a:xnack+"], "gfx90a:xnack+", "gfx90a:xnack+"),
    (["gfx90a:sramecc-"], "gfx90a:sramecc+:xnack+", None),
    (["gfx90a:sramecc+"], "gfx90a:sramecc+:xnack+", "gfx90a:sramecc+"),
    (["gfx90a"], "gfx908", None),
    # most specific match first
    (["gfx90a", "gfx90a:xnack+"], "gfx90a:xnack+", "gfx90a:xnack+"),
    (["gfx90a:xnack-", "gfx90a:sramecc+:xnack-"], "gfx90a:sramecc+:xnack-", "gfx90a:sramecc+:xnack-"),
    (["gfx942:sramecc+:xnack-", "gfx942"], "gfx942:sramecc+:xnack+", "gfx942"),
    # device features not given = unknown: a sure (any) match first, then the ROCm default xnack-
    (["gfx90a:xnack+", "gfx90a"], "gfx90a", "gfx90a"),
    (["gfx90a:xnack+", "gfx90a:xnack-"], "gfx90a", "gfx90a:xnack-"),
    (["gfx942:xnack+"], "gfx942", "gfx942:xnack+"),
    # processors without the features: moot
    (["gfx1101"], "gfx1101", "gfx1101"),
    (["gfx1100"], "gfx1101", None),
    # [G][O] exact processor, then the family's generic target with a high enough generic version
    (["gfx1100", "gfx11-generic"], "gfx1100", "gfx1100"),
    (["gfx1100", "gfx11-generic"], "gfx1101", "gfx11-generic"),
    (["gfx11-generic@0"], "gfx1101", None),
    (["gfx11-generic@1", "gfx11-generic@2"], "gfx1151", "gfx11-generic@2"),
    (["gfx10-3-generic"], "gfx1031", "gfx10-3-generic"),
    (["gfx10-3-generic", "gfx10-1-generic"], "gfx1010", "gfx10-1-generic"),
    (["gfx12-generic"], "gfx1201", "gfx12-generic"),
    (["gfx12-generic"], "gfx1101", None),
    (["gfx9-generic"], "gfx906:xnack-", "gfx9-generic"),
    (["gfx9-generic"], "gfx90a", None),  # gfx90a is in no generic family
    (["gfx9-generic:xnack+"], "gfx906:xnack-", None),
    (["gfx9-generic:xnack-", "gfx906:xnack+"], "gfx906:xnack-", "gfx9-generic:xnack-"),
    (["gfx9-4-generic"], "gfx942:sramecc+:xnack-", "gfx9-4-generic"),
]


@pytest.mark.parametrize(("images", "device", "expected"), AMD_ROWS)
def test_amd_rules(images: list[str], device: str, expected: str | None) -> None:
    sel = decide([_img(s) for s in images], device)
    got = _name(sel.chosen)
    assert got == expected, "\n".join(sel.explain())
    assert sel.ok == (expected is not None)
    assert sel.jit is False


def test_verdicts_and_reasons() -> None:
    sel = decide([_img("sm_80"), _img("sm_86"), _img("compute_80"), _img("sm_90a"), _img("gfx90a")], "sm_86")
    verdicts = {_name(c): c.verdict for c in sel.candidates}
    assert verdicts == {"sm_80": USABLE, "sm_86": CHOSEN, "compute_80": USABLE, "sm_90a": REJECTED, "gfx90a": OTHER}
    reasons = {_name(c): c.reason for c in sel.candidates}
    assert "closer" in reasons["sm_80"]
    assert "SASS preferred over PTX" in reasons["compute_80"]
    assert "exactly 9.0" in reasons["sm_90a"]
    assert "AMDGPU" in reasons["gfx90a"]
    lines = sel.explain()
    assert len(lines) == 5
    assert all(c.verdict in ln and c.arch in ln for c, ln in zip(sel.candidates, lines, strict=True))


def test_per_module_choice_and_error() -> None:
    imgs = [_img("sm_80", "a"), _img("compute_80", "a"), _img("sm_90", "b"), _img("gfx90a", "c")]
    sel = decide(imgs, "sm_86")
    assert [_name(m.chosen) for m in sel.modules] == ["sm_80", None, None]
    assert [m.name for m in sel.modules] == ["a#0", "b#0", "c#0"]  # the fatbin or bundle: the address less the entry
    assert [m.relevant for m in sel.modules] == [True, True, False]  # an AMD bundle is not a failure on NVIDIA
    err = sel.error()
    assert isinstance(err, NoImageError) and isinstance(err, UsageError)
    assert "in b#0" in str(err) and "sm_90" in str(err)
    ok = decide(imgs[:2] + imgs[3:], "sm_86")
    assert ok.ok and ok.error() is None
    none = decide([_img("gfx90a")], "sm_86")
    assert "no NVIDIA image for sm_86; it holds gfx90a" in str(none.error())


@pytest.mark.parametrize("bad", ["", "sm_8", "sm_86x", "nvidia", "gfx9-generic", "gfx1030:xnack+", "gfx90a:foo+",
                                 "compute_86"])
def test_bad_device(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_device(bad)


def test_device_names() -> None:
    assert parse_device("sm_90a").cc == (9, 0)
    assert parse_device("sm_100f").cc == (10, 0)
    assert parse_device("sm_120").cc == (12, 0)
    assert parse_device("8.6").cc == (8, 6)
    assert "describes code" in parse_device("sm_90a").note
    d = parse_device("gfx90a:xnack+")
    assert d.target is not None and d.target.xnack is True and d.target.sramecc is None
    assert parse_device("gfx1101").note == ""


# --------------------------------------------------------------------------- real tools


@pytest.fixture(scope="module")
def nv_package(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A fatbin made by the real fatbinary: SASS sm_80, sm_86, sm_90a, sm_100f and PTX compute_80, compute_90."""
    ptxas, fatbinary = require_tool("ptxas"), require_tool("fatbinary")
    out = tmp_path_factory.mktemp("select_nv")
    ptx80, ptx90 = PTX_DIR / "kernels-whole.sm_80.ptx", PTX_DIR / "kernels-whole.sm_90.ptx"
    cubins = {}
    for arch in ("sm_80", "sm_86", "sm_90a", "sm_100f"):
        cubins[arch] = out / f"k.{arch}.cubin"
        run_tool([ptxas, f"-arch={arch}", "-o", str(cubins[arch]), str(ptx80)])
    fb = out / "pkg.fatbin"
    images = [f"--image3=kind=elf,sm={a[3:]},file={p}" for a, p in cubins.items()]
    images += [f"--image3=kind=ptx,sm=80,file={ptx80}", f"--image3=kind=ptx,sm=90,file={ptx90}"]
    run_tool([fatbinary, "-64", f"--create={fb}", *images])
    return {"fatbin": fb, **cubins}


@pytest.mark.parametrize(("device", "arch", "jit"), [
    ("sm_80", "sm_80", False), ("sm_86", "sm_86", False), ("sm_89", "sm_86", False), ("sm_90", "sm_90a", False),
    ("sm_90a", "sm_90a", False), ("sm_100", "sm_100f", False), ("sm_103", "sm_100f", False),
    ("sm_100f", "sm_100f", False), ("sm_120", "compute_90", True), ("sm_121", "compute_90", True),
])
def test_fatbin_selection(nv_package: dict[str, Path], device: str, arch: str, jit: bool) -> None:
    sel = devbin.select(nv_package["fatbin"], device)
    assert sel.chosen is not None and sel.chosen.arch == arch and sel.jit is jit
    assert len(sel.candidates) == 6
    code, text = cli("select", str(nv_package["fatbin"]), "--device", device)
    assert code == 0 and text.strip().endswith(f": {arch} ({'PTX, JIT-compiled' if jit else 'SASS'})")


def test_fatbin_explain_json_and_bytes(nv_package: dict[str, Path]) -> None:
    fb = nv_package["fatbin"]
    code, text = cli("select", str(fb), "--device", "sm_120", "--explain")
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == "device: sm_120 (NVIDIA, compute capability 12.0)"
    rows = [ln for ln in lines if ln.startswith(str(fb)) and "  " in ln]
    assert len(rows) == 6
    assert any("sm_100f" in r and "rejected" in r and "family-specific" in r for r in rows)
    assert any("compute_90" in r and "chosen" in r and "JIT" in r for r in rows)
    assert any("compute_80" in r and "usable" in r for r in rows)
    code, js = cli("select", str(fb), "--device", "sm_86", "--json")
    data = json.loads(js)
    assert data["ok"] and data["chosen"]["arch"] == "sm_86" and data["jit"] is False
    assert [c["verdict"] for c in data["candidates"]] == ["usable", "chosen", "rejected", "rejected", "usable",
                                                          "rejected"]
    assert all(c["reason"] for c in data["candidates"])
    assert set(data["chosen"]) == {"address", "vendor", "kind", "arch", "size", "stored_size", "compression", "module",
                                   "verdict", "reason", "jit"}
    assert data["chosen"]["address"] == f"{fb}#0.1" and data["chosen"]["module"] == f"{fb}#0"
    assert data["chosen"]["kind"] == "cubin" and data["chosen"]["vendor"] == "nvidia"
    # `select` names the image by the address `list` prints for it
    _, listing = cli("list", "--json", str(fb))
    assert json.loads(listing)["images"][1]["address"] == data["chosen"]["address"]
    _, text = cli("select", str(fb), "--device", "sm_86")
    assert text == f"{fb}#0.1: sm_86 (SASS)\n"
    sel = devbin.select(fb.read_bytes(), "sm_86", name="pkg")
    assert sel.chosen is not None and sel.chosen.arch == "sm_86" and sel.source == "pkg"


def test_fatbin_no_match(nv_package: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    fb = nv_package["fatbin"]
    with pytest.raises(NoImageError, match=r"sm_75.*holds sm_80, sm_86, sm_90a, sm_100f, compute_80, compute_90"):
        devbin.select(fb, "sm_75")
    code, _ = cli("select", str(fb), "--device", "sm_75")
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and err.startswith("devbin: error: ") and "sm_75" in err
    code, js = cli("select", str(fb), "--device", "sm_75", "--json")
    assert code == 1 and json.loads(js)["ok"] is False and json.loads(js)["chosen"] is None
    code, _ = cli("select", str(fb), "--device", "sm_8x")
    assert code == 2 and "not an NVIDIA" in capsys.readouterr().err  # a --device devbin cannot read: usage


def test_bare_arch_specific_cubin(nv_package: dict[str, Path]) -> None:
    """A bare sm_90a cubin: CUDA 13 marks `a` only in .nv.compat (reference §1.4); it runs on 9.0 only."""
    cubin = nv_package["sm_90a"]
    sel = devbin.select(cubin, "sm_90")
    assert sel.chosen is not None and sel.chosen.arch == "sm_90a"
    with pytest.raises(NoImageError):
        devbin.select(cubin, "sm_100")


@pytest.fixture(scope="module")
def amd_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HIP fat binary from clang-offload-bundler-19: gfx90a:xnack+, gfx90a:xnack-, gfx11-generic (COV6), gfx1030."""
    clang, bundler = require_tool("clang-19"), require_tool("clang-offload-bundler-19")
    out = tmp_path_factory.mktemp("select_amd")
    cflags = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-c"]
    targets = ["gfx90a:xnack+", "gfx90a:xnack-", "gfx11-generic", "gfx1030"]
    objs = []
    for i, t in enumerate(targets):
        obj = out / f"k{i}.o"
        extra = ["-mcode-object-version=6"] if t.endswith("generic") else []
        run_tool([clang, *cflags, f"-mcpu={t}", *extra, "-o", str(obj), str(SOURCES / "amdgpu_kernels.cl")])
        objs.append(obj)
    hipfb = out / "pkg.hipfb"
    ids = ",".join(["host-x86_64-unknown-linux-gnu", *(f"hipv4-amdgcn-amd-amdhsa--{t}" for t in targets)])
    run_tool([bundler, "-type=o", "-bundle-align=4096", f"-targets={ids}", "-input=/dev/null",
              *(f"-input={o}" for o in objs), f"-output={hipfb}"])
    return hipfb


@pytest.mark.parametrize(("device", "arch"), [
    ("gfx90a:xnack+", "gfx90a:xnack+"), ("gfx90a:xnack-", "gfx90a:xnack-"),
    ("gfx90a:sramecc+:xnack+", "gfx90a:xnack+"),
    ("gfx90a", "gfx90a:xnack-"),  # unknown xnack: ROCm's default (off)
    ("gfx1030", "gfx1030"), ("gfx1101", "gfx11-generic"), ("gfx1151", "gfx11-generic"),
])
def test_bundle_selection(amd_bundle: Path, device: str, arch: str) -> None:
    sel = devbin.select(amd_bundle, device)
    assert sel.chosen is not None and sel.chosen.arch == arch and not sel.jit
    code, text = cli("select", str(amd_bundle), "--device", device)
    assert code == 0 and text.strip().endswith(f": {arch} (code object)")


def test_bundle_generic_version_from_eflags(amd_bundle: Path) -> None:
    sel = devbin.select(amd_bundle, "gfx1101")
    assert sel.chosen is not None and sel.chosen.generic_version == 1
    _, js = cli("select", str(amd_bundle), "--device", "gfx1101", "--json")
    data = json.loads(js)
    assert data["chosen"]["generic_version"] == 1
    # since select/2: the device's vendor is the one canonical name, as its images' (select/1 said "amdgpu")
    assert (data["schema"], data["device"]["vendor"], data["chosen"]["vendor"]) == ("devbin.select/3", "amd", "amd")


def test_bundle_explain_and_errors(amd_bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = cli("select", str(amd_bundle), "--device", "gfx90a:xnack+", "--explain")
    assert code == 0
    rows = [ln for ln in text.splitlines() if ln.startswith(str(amd_bundle)) and "  " in ln]
    assert len(rows) == 4
    assert "chosen" in rows[0] and "rejected" in rows[1] and "xnack-, device has xnack+" in rows[1]
    assert "gfx11-generic covers" in rows[2] and "rejected" in rows[3]
    code, _ = cli("select", str(amd_bundle), "--device", "gfx1031")
    err = capsys.readouterr().err
    assert code == 1 and "gfx90a:xnack+, gfx90a:xnack-, gfx11-generic, gfx1030" in err
    code, _ = cli("select", str(amd_bundle), "--device", "sm_90")
    assert code == 1 and "no NVIDIA image for sm_90" in capsys.readouterr().err
    code, _ = cli("select", str(amd_bundle), "--device", "gfx11-generic")
    assert code == 2 and "generic code target" in capsys.readouterr().err


def test_conftest_bundle_any_features(amdgpu_objects: dict[str, Path]) -> None:
    """The fixture bundle's gfx90a/gfx942 code objects leave xnack/sramecc any: they match every setting."""
    for dev, arch in [("gfx942:sramecc+:xnack-", "gfx942"), ("gfx90a:xnack+", "gfx90a"), ("gfx90a", "gfx90a")]:
        sel = devbin.select(amdgpu_objects["hipfb"], dev)
        assert sel.chosen is not None and sel.chosen.arch == arch
    with pytest.raises(DeviceBinaryError, match="gfx1030"):
        devbin.select(amdgpu_objects["hipfb"], "gfx1030")


@pytest.mark.parametrize(("address", "container", "module"), [
    ("k.cubin", "file", "k.cubin"),
    ("lib.a!k.o@__nv_relfatbin#1.3", "fatbin", "lib.a!k.o@__nv_relfatbin#1"),
    ("x.o@.llvm.offloading#2.0", "offload", "x.o@.llvm.offloading"),  # OffloadBinaries back to back: one module
    ("p.offload#0.1", "offload", "p.offload"),
    ("x.so@.hip_fatbin#1.2", "bundle", "x.so@.hip_fatbin#1"),
    ("k.o@__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx90a", "bundle", "k.o@__CLANG_OFFLOAD_BUNDLE__*"),
    ("k.wrapped", "wrapped", "k.wrapped"),
])
def test_module_of_address(address: str, container: str, module: str) -> None:
    img = Image(Address.parse(address), "amd", "amdgpu", "gfx90a", 1, 1, "none", container, "", 0)
    assert module_of(img) == module
