"""Discovery, listing and extraction of images in LLVM containers, checked against the LLVM 19 tools.

Containers: bare clang-offload-packager output, ``.llvm.offloading`` sections of a host
object, binary bundles, compressed (CCOB) bundles, object-type bundles, a host object with
two bundles back to back in ``.hip_fatbin``, an ``ar`` archive of bundled objects and a zip
holding some of them.  Oracles: ``clang-offload-bundler-19 --list``/``--unbundle``,
``llvm-objdump-19 --offloading`` and ``clang-offload-packager-19 --image=file=...``.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from conftest import SOURCES, require_tool
from devbin.images import Address, Entry, Image, Member, ScanReport, scan
from devbin.images.frame import Frame

from tests.runners import cli, cli_ok, run_tool

HOST = "host-x86_64-unknown-linux-gnu-"
GFX90A = "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-"
GFX1030 = "hipv4-amdgcn-amd-amdhsa--gfx1030"


def _pad(data: bytes, align: int = 4096) -> bytes:
    return data + b"\0" * (-len(data) % align)


@pytest.fixture(scope="module")
def llvm(amdgpu_objects: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture set plus containers built here (see the module docstring)."""
    clang = require_tool("clang-19")
    bundler = require_tool("clang-offload-bundler-19")
    objcopy = require_tool("objcopy")
    ar = require_tool("ar")
    out = tmp_path_factory.mktemp("llvm")
    host = out / "host.o"
    run_tool([clang, "-target", "x86_64-unknown-linux-gnu", "-O2", "-c", "-o", host, SOURCES / "host.c"])
    offl = out / "host_offload.o"
    run_tool([clang, "-target", "x86_64-unknown-linux-gnu", "-O2", "-c", "-Xclang",
              f"-fembed-offload-object={amdgpu_objects['offload_package']}", "-o", offl, SOURCES / "host.c"])
    ccob = out / "kernels.ccob"
    run_tool([bundler, "-type=o", "-compress", f"-targets={HOST[:-1]},{GFX90A},{GFX1030}", "-input=/dev/null",
              f"-input={amdgpu_objects['gfx90a_obj']}", f"-input={amdgpu_objects['gfx1030_obj']}", f"-output={ccob}"])
    bundled2 = out / "bundled2.o"
    run_tool([bundler, "-type=o", f"-targets={HOST[:-1]},{GFX1030}", f"-input={host}",
              f"-input={amdgpu_objects['gfx1030_obj']}", f"-output={bundled2}"])
    archive = out / "libbundles.a"
    bundled1 = out / "bundled1.o"
    shutil.copy(amdgpu_objects["bundled_obj"], bundled1)
    run_tool([ar, "rcs", archive, bundled1, bundled2])
    blob = out / "hip_fatbin.bin"
    blob.write_bytes(_pad(amdgpu_objects["hipfb"].read_bytes()) + _pad(ccob.read_bytes()))
    hipobj = out / "host_hip.o"
    run_tool([objcopy, f"--add-section=.hip_fatbin={blob}", "--set-section-flags=.hip_fatbin=alloc,readonly,data",
              "--set-section-alignment=.hip_fatbin=4096", host, hipobj])
    zpath = out / "some.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(offl, "lib/host_offload.o")
        z.write(ccob, "lib/kernels.ccob")
        z.write(amdgpu_objects["hipfb"], "kernels.hipfb")
    return {**amdgpu_objects, "host": host, "host_offload": offl, "ccob": ccob, "bundled2": bundled2,
            "archive": archive, "hip_obj": hipobj, "zip": zpath}


def _list_json(*paths: Path) -> dict[str, list[dict[str, object]]]:
    printed = cli_ok("list", "--json", *map(str, paths))
    data: dict[str, list[dict[str, object]]] = json.loads(printed)
    return data


def _bundler_ids(path: Path) -> list[str]:
    bundler = require_tool("clang-offload-bundler-19")
    return run_tool([bundler, "--list", "-type=o", f"-input={path}"]).stdout.split()


def _target_id(bundle_id: str) -> str:
    # <kind>-<arch>-<vendor>-<os>-<env>-<target id>; the target ID may itself contain '-'.
    return "-".join(bundle_id.split("-")[5:])


def _objdump_offloading(path: Path) -> list[tuple[str, str]]:
    objdump = require_tool("llvm-objdump-19")
    out, arch = [], None
    for line in run_tool([objdump, "--offloading", path]).stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "arch":
            arch = value.strip()
        elif key == "triple":
            out.append((value.strip(), arch or ""))
    return out


def _index(f: Image) -> int | None:
    return f.address.entry.container if f.address.entry else None


def _device(ids: list[str]) -> list[str]:
    return sorted(i for i in ids if not i.startswith("host-"))


@pytest.mark.parametrize("key", ["hipfb", "bundled_obj", "ccob", "bundled2"])
def test_bundles_match_bundler_list(llvm: dict[str, Path], key: str) -> None:
    images = _list_json(llvm[key])["images"]
    ids = _device(_bundler_ids(llvm[key]))
    assert sorted(str(i["metadata"]["bundle-id"]) for i in images) == ids
    assert sorted(str(i["arch"]) for i in images) == sorted(_target_id(i) for i in ids)
    assert {(i["kind"], i["vendor"]) for i in images} == {("amdgpu", "amd")}
    assert all(i["container"] == "bundle" for i in images)
    want_compr = "zstd" if key == "ccob" else "none"
    assert {i["compression"] for i in images} == {want_compr}


@pytest.mark.parametrize("key", ["offload_package", "host_offload"])
def test_offload_binaries_match_objdump(llvm: dict[str, Path], key: str) -> None:
    data = _list_json(llvm[key])
    images = data["images"]
    assert not data["warnings"]
    assert sorted((str(i["metadata"]["triple"]), str(i["arch"])) for i in images) == sorted(
        _objdump_offloading(llvm[key]))
    assert {i["kind"] for i in images} == {"amdgpu"}
    assert {(i["container"], i["section"]) for i in images} == {
        ("offload", "" if key == "offload_package" else ".llvm.offloading")}
    assert all(i["address"].endswith(f"#{n}.0") for n, i in enumerate(images))  # LLVM 19: one image per blob


def test_hip_fatbin_section_with_two_bundles(llvm: dict[str, Path]) -> None:
    found = list(scan([llvm["hip_obj"]]))
    expected = _bundler_ids(llvm["hipfb"]), _bundler_ids(llvm["ccob"])
    assert [(f.container, f.section) for f in found] == [("bundle", ".hip_fatbin")] * len(found)
    assert sorted(f.get("bundle-id") for f in found if _index(f) == 0) == _device(expected[0])
    assert sorted(f.get("bundle-id") for f in found if _index(f) == 1) == _device(expected[1])
    assert {f.compression for f in found if _index(f) == 1} == {"zstd"}
    assert all(str(f.address).startswith(f"{llvm['hip_obj']}@.hip_fatbin#") for f in found)
    # Images equal to what the bundler unbundles from each source bundle.
    for f in found:
        src = llvm["hipfb"] if _index(f) == 0 else llvm["ccob"]
        assert bytes(f.data()) == _unbundle(src, f.get("bundle-id"), llvm["hip_obj"].parent)


def test_archive_and_zip(llvm: dict[str, Path]) -> None:
    images = _list_json(llvm["archive"])["images"]
    want = _device(_bundler_ids(llvm["bundled_obj"]) + _bundler_ids(llvm["bundled2"]))
    assert sorted(str(i["metadata"]["bundle-id"]) for i in images) == want
    assert {Address.parse(i["address"]).member for i in images} == {Member("bundled1.o"), Member("bundled2.o")}
    zimages = _list_json(llvm["zip"])["images"]
    by_member: dict[str, int] = {}
    for i in zimages:
        name = Address.parse(i["address"]).file.steps[0].name
        by_member[name] = by_member.get(name, 0) + 1
    assert by_member == {
        "lib/host_offload.o": len(_objdump_offloading(llvm["host_offload"])),
        "lib/kernels.ccob": len(_device(_bundler_ids(llvm["ccob"]))),
        "kernels.hipfb": len(_device(_bundler_ids(llvm["hipfb"]))),
    }


def _unbundle(path: Path, bundle_id: str, tmp: Path) -> bytes:
    bundler = require_tool("clang-offload-bundler-19")
    out = tmp / f"unbundled.{abs(hash((str(path), bundle_id)))}"
    run_tool([bundler, "--unbundle", "-type=o", f"-targets={bundle_id}", f"-input={path}", f"-output={out}"])
    return out.read_bytes()


def _extract(path: Path, folder: Path) -> list[dict[str, str]]:
    printed = cli_ok("extract", "--json", "-o", str(folder), str(path))
    written: list[dict[str, str]] = json.loads(printed)["written"]
    return written


@pytest.mark.parametrize("key", ["hipfb", "bundled_obj", "ccob"])
def test_extract_bundles_byte_identical(llvm: dict[str, Path], key: str, tmp_path: Path) -> None:
    written = _extract(llvm[key], tmp_path / "out")
    ids = _device(_bundler_ids(llvm[key]))
    assert len(written) == len(ids)
    stem = llvm[key].stem
    names = sorted(Path(w["file"]).name for w in written)
    assert names == sorted(f"{stem}.{n}.{_target_id(i).replace(':', '_')}.o"
                           for n, i in enumerate(_ordered_ids(llvm[key]), 1))
    found = list(scan([llvm[key]]))
    for w, f in zip(written, found, strict=True):
        assert w["address"] == str(f.address)
        assert Path(w["file"]).read_bytes() == _unbundle(llvm[key], f.get("bundle-id"), tmp_path)


def _ordered_ids(path: Path) -> list[str]:
    return [f.get("bundle-id") for f in scan([path])]


@pytest.mark.parametrize("key", ["offload_package", "host_offload"])
def test_extract_offload_byte_identical(llvm: dict[str, Path], key: str, tmp_path: Path) -> None:
    packager = require_tool("clang-offload-packager-19")
    written = _extract(llvm[key], tmp_path / "out")
    found = list(scan([llvm[key]]))
    assert len(written) == len(found) == len(_objdump_offloading(llvm[key]))
    ref = tmp_path / "ref"
    ref.mkdir()
    for w, f in zip(written, found, strict=True):
        target = ref / f"{f.arch}.o"
        run_tool([packager, llvm[key], f"--image=file={target},triple={f.triple},arch={f.arch}"])
        assert Path(w["file"]).read_bytes() == target.read_bytes()
    # The names are the packager's own defaults (what it writes when no file= is given).
    default = tmp_path / "default"
    default.mkdir()
    run_tool([packager, llvm[key], "--image=kind=hip"], cwd=default)
    assert sorted(Path(w["file"]).name for w in written) == sorted(p.name for p in default.iterdir())


def test_extract_refuses_duplicates_and_keeps_names_inside(llvm: dict[str, Path], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "two"
    folder.mkdir()
    for name in ("a", "b"):
        (folder / name).mkdir()
        shutil.copy(llvm["ccob"], folder / name / "kernels.ccob")
    assert cli("extract", "-o", str(tmp_path / "out"), str(folder))[0] != 0
    assert "both be written" in capsys.readouterr().err
    from devbin.cli.extract_cmd import names
    evil = Image(address=Address("x.bin", (Entry(0, 0),)), vendor="amd", kind="amdgpu", arch="../../gfx90a:xnack-",
                 size=0, stored_size=0, compression="none", container="bundle", section="", offset=0,
                 metadata=(("triple", "amdgcn/amd"),))
    (name,) = names([(evil, Frame(Address("x.bin")))])
    assert "/" not in name and name.startswith("x.1.")


def _corrupt_inputs(llvm: dict[str, Path]) -> dict[str, bytes]:
    ccob = llvm["ccob"].read_bytes()
    hipfb = llvm["hipfb"].read_bytes()
    pkg = llvm["offload_package"].read_bytes()
    bad_hash = bytearray(ccob)
    bad_hash[16] ^= 0xFF  # the v2 hash field
    bad_count = bytearray(hipfb)
    bad_count[24:32] = (1 << 40).to_bytes(8, "little")
    bad_offload = bytearray(pkg)
    bad_offload[8:16] = (1 << 40).to_bytes(8, "little")  # blob size beyond the buffer
    return {"trunc.ccob": ccob[: len(ccob) // 2], "badhash.ccob": bytes(bad_hash), "count.hipfb": bytes(bad_count),
            "size.offload": bytes(bad_offload), "trunc.hipfb": hipfb[:100]}


def test_corrupt_members_give_warnings(llvm: dict[str, Path], tmp_path: Path) -> None:
    ar = require_tool("ar")
    bad = _corrupt_inputs(llvm)
    members = []
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
        members.append(tmp_path / name)
    good = tmp_path / "good.hipfb"
    shutil.copy(llvm["hipfb"], good)
    archive = tmp_path / "mixed.a"
    run_tool([ar, "rc", archive, *members, good])
    zpath = tmp_path / "mixed.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        for name, data in bad.items():
            z.writestr(name, data)
        z.write(good, "good.hipfb")
    for container in (archive, zpath):
        report = ScanReport()
        found = list(scan([container], report=report))
        assert {f.address.member for f in found} == {Member("good.hipfb")}
        assert len(found) == len(_device(_bundler_ids(llvm["hipfb"])))
        assert len(report.warnings) >= len(bad), report.warnings
        for name in bad:
            assert any(name in w for w in report.warnings), (name, report.warnings)
    # Garbage after the first bundle of a .hip_fatbin: its images are kept, the rest is a warning.
    objcopy = require_tool("objcopy")
    blob = tmp_path / "blob.bin"
    blob.write_bytes(_pad(llvm["hipfb"].read_bytes()) + b"garbage!" * 64)
    obj = tmp_path / "garbage_hip.o"
    run_tool([objcopy, f"--add-section=.hip_fatbin={blob}", llvm["host"], obj])
    report = ScanReport()
    found = list(scan([obj], report=report))
    assert len(found) == len(_device(_bundler_ids(llvm["hipfb"])))
    assert any(".hip_fatbin" in w for w in report.warnings), report.warnings
