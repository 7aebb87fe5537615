"""``devbin.images.scan`` on host files built at test time, checked against ``cuobjdump``.

Built from tests/sources/kernels.cu and extfn.cu with nvcc (sm_80; one object also has
compute_80 PTX and sm_90): a whole-program object, ``-rdc`` objects, a multi-arch object,
an executable, a shared library, a static library of two ``-rdc`` objects, ``nvcc -dlink``
output (version-2 wrapper), a bare fatbin and a bare cubin; with gcc: an object that keeps
the fatbin in ``.rodata`` (as libraries do for ``cuModuleLoadData``), one with two fatbins
and zero padding in ``.nv_fatbin``, and a negative object of random bytes holding the
fatbin magic at 8-aligned offsets.  Some go into a wheel (with a zip inside it) and a
folder.  ``cuobjdump -lelf -lptx`` lists what it finds in the same files: every image it
lists must be found, in its order and under the name it gives.
"""

from __future__ import annotations

import io
import os
import random
import re
import zipfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from devbin.errors import DeviceBinaryError
from devbin.formats.fatbin import extract_name
from devbin.images import BareElf, Image
from devbin.images.scan import scan, scan_bytes
from devbin.images.scanreport import ScanReport

from tests.conftest import SOURCES, require_tool
from tests.runners import run_tool


def _c_array(name: str, data: bytes, section: str = "") -> str:
    attr = f'section("{section}"), aligned(8)' if section else "aligned(8)"
    body = ",".join(str(b) for b in data)
    return f"const unsigned char {name}[] __attribute__(({attr})) = {{{body}}};\n"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = require_tool("nvcc")
    gcc = require_tool("gcc")
    ar = require_tool("ar")
    out = tmp_path_factory.mktemp("discover")
    (out / "main.c").write_text("int main(void) { return 0; }\n")
    k, ext = SOURCES / "kernels.cu", SOURCES / "extfn.cu"
    arch = "-arch=sm_80"
    first: list[list[str | os.PathLike[str]]] = [
        [nvcc, arch, "-c", "-o", "whole.o", k],
        [nvcc, arch, "-c", "-rdc=true", "-o", "rdc.o", k],
        [nvcc, arch, "-c", "-rdc=true", "-o", "ext.o", ext],
        [nvcc, "-gencode", "arch=compute_80,code=[sm_80,compute_80]", "-gencode", "arch=compute_90,code=sm_90",
         "-c", "-o", "multi.o", k],
        [nvcc, arch, "-o", "exe", k, "main.c"],
        [nvcc, arch, "-shared", "-Xcompiler", "-fPIC", "-o", "libk.so", k],
        [nvcc, arch, "-fatbin", "-o", "k.fatbin", k],
        [nvcc, arch, "-cubin", "-o", "k.cubin", k],
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for f in [pool.submit(run_tool, c, out) for c in first]:
            f.result()
    run_tool([nvcc, arch, "-dlink", "-o", "dlink.o", "rdc.o", "ext.o"], out)
    run_tool([ar, "rcs", "libr.a", "rdc.o", "ext.o"], out)

    fatbin = (out / "k.fatbin").read_bytes()
    (out / "blob.c").write_text(_c_array("blob", fatbin) + "const char after_blob[3] = {1, 2, 3};\n")
    (out / "padded.c").write_text(_c_array("fb", fatbin + bytes(16) + fatbin, ".nv_fatbin"))
    (out / "noise.c").write_text(_c_array("noise", _noise(fatbin)))
    for name in ("blob", "padded", "noise"):
        run_tool([gcc, "-c", "-O2", "-o", f"{name}.o", f"{name}.c"], out)
    return {p.name: p for p in out.iterdir() if p.suffix != ".c"}


def _noise(fatbin: bytes) -> bytes:
    """Random bytes with the fatbin magic at 8-aligned offsets: alone, before a plausible
    16-byte header whose entry is garbage, and before a real header cut short."""
    rng = random.Random(5)
    buf = bytearray(rng.randbytes(16384))
    magic = b"\x50\xed\x55\xba"
    for off in range(0, len(buf), 512):
        buf[off:off + 4] = magic
    buf[4096:4112] = magic + b"\x01\x00\x10\x00" + (0x60).to_bytes(8, "little")  # fat_size 0x60 of garbage
    buf[8192:8192 + 200] = fatbin[:200]  # header and first entry header; payload overwritten below
    buf[8192 + 8:8192 + 16] = (200).to_bytes(8, "little")
    buf[12288:12304] = magic + b"\x01\x00\x10\x00" + bytes(8)  # an empty fatbin: no entries
    return bytes(buf)


# --------------------------------------------------------------------------- cuobjdump


def cuobjdump_list(path: Path) -> dict[str, list[tuple[str, str]]]:
    """``cuobjdump -lelf -lptx``: member ('' outside archives) -> [(kind, name)] in output order."""
    tool = require_tool("cuobjdump")
    proc = run_tool([tool, "-lelf", "-lptx", path.name], path.parent, check=False)
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    member = ""
    for line in proc.stdout.splitlines():
        m = re.match(r"member .*:(.+):$", line)
        if m:
            member = m.group(1)
            continue
        m = re.match(r"(ELF|PTX) file\s+\d+: (\S+)$", line)
        if m:
            out[member].append(("elf" if m.group(1) == "ELF" else "ptx", m.group(2)))
    return dict(out)


def ours_as_cuobjdump(found: list[Image], path: Path) -> dict[str, list[tuple[str, str]]]:
    """Our fatbin entries of the sections cuobjdump reads, named the way cuobjdump names them:
    in file order, numbered per kind (ELF, PTX) through the whole file, archive members included."""
    stem = path.stem
    per_member: dict[str, list[Image]] = defaultdict(list)
    for f in found:
        if f.entry is None or f.section not in (".nv_fatbin", "__nv_relfatbin", ""):
            continue
        m = re.match(re.escape(str(path)) + r"!(.+)$", f.path)
        per_member[m.group(1) if m else ""].append(f)
    numbers = {"cubin": 0, "ptx": 0}
    out: dict[str, list[tuple[str, str]]] = {}
    for member, items in per_member.items():
        rows = []
        for f in items:
            numbers[f.kind] += 1
            assert f.entry is not None
            rows.append(("elf" if f.kind == "cubin" else f.kind, extract_name(f.entry, stem, numbers[f.kind])))
        out[member] = rows
    return out


def _index(f: Image) -> int | None:
    """The container index of an image's address (None for a bare image)."""
    return f.address.entry.container if f.address.entry else None


HOST_FILES = ["whole.o", "rdc.o", "multi.o", "dlink.o", "exe", "libk.so", "libr.a", "k.fatbin", "padded.o"]


@pytest.mark.parametrize("name", HOST_FILES)
def test_images_match_cuobjdump(built: dict[str, Path], name: str) -> None:
    path = built[name]
    rep = ScanReport()
    found = list(scan([path], report=rep))
    assert rep.warnings == []
    theirs = cuobjdump_list(path)
    assert theirs, f"cuobjdump lists nothing in {name}"
    assert ours_as_cuobjdump(found, path) == theirs


def test_counts_per_kind_of_host_file(built: dict[str, Path]) -> None:
    """What each kind of host file holds (the facts cuobjdump confirms above)."""
    def summary(name: str) -> list[tuple[str, str, str, int | None]]:
        return [(f.section, f.kind, f.arch, _index(f)) for f in scan([built[name]])]

    assert summary("whole.o") == [(".nv_fatbin", "cubin", "sm_80", 0), (".nv_fatbin", "ptx", "compute_80", 0)]
    assert summary("rdc.o") == [("__nv_relfatbin", "cubin", "sm_80", 0), ("__nv_relfatbin", "ptx", "compute_80", 0)]
    assert summary("multi.o") == [(".nv_fatbin", "cubin", "sm_80", 0), (".nv_fatbin", "ptx", "compute_80", 0),
                                  (".nv_fatbin", "cubin", "sm_90", 0)]
    assert summary("dlink.o") == [(".nv_fatbin", "cubin", "sm_80", 0)]  # linked cubin only, no PTX
    # An executable and a shared library: nvcc links the CUDA runtime's own fatbin (one linked
    # sm_80 cubin, registered with a version-2 wrapper) before the program's.
    for name in ("exe", "libk.so"):
        assert summary(name) == [(".nv_fatbin", "cubin", "sm_80", 0), (".nv_fatbin", "cubin", "sm_80", 1),
                                 (".nv_fatbin", "ptx", "compute_80", 1)]
    assert [(Path(f.path).name, f.kind) for f in scan([built["libr.a"]])] == [
        ("libr.a!rdc.o", "cubin"), ("libr.a!rdc.o", "ptx"), ("libr.a!ext.o", "cubin"), ("libr.a!ext.o", "ptx")]
    assert summary("padded.o") == [(".nv_fatbin", "cubin", "sm_80", 0), (".nv_fatbin", "ptx", "compute_80", 0),
                                   (".nv_fatbin", "cubin", "sm_80", 1), (".nv_fatbin", "ptx", "compute_80", 1)]


def test_image_fields(built: dict[str, Path]) -> None:
    data = built["whole.o"].read_bytes()
    elf_img, ptx = list(scan([built["whole.o"]]))
    assert elf_img.entry is not None and ptx.entry is not None
    assert data[elf_img.offset:][:4] == b"\x50\xed\x55\xba"
    assert (elf_img.vendor, elf_img.container, elf_img.section) == ("nvidia", "fatbin", ".nv_fatbin")
    assert elf_img.compression == "none" and elf_img.size == len(elf_img.data()) <= elf_img.stored_size
    assert bytes(elf_img.data()) == elf_img.entry.data() and elf_img.entry.data()[:4] == b"\x7fELF"
    # nvcc's default compression mode compresses PTX (zstd) and leaves the whole-program ELF plain.
    assert ptx.compression == "zstd" and ptx.stored_size < ptx.size == ptx.entry.uncompressed_size
    assert ptx.entry.data().lstrip().startswith(b".version")
    assert bytes(ptx.data()) == ptx.entry.data()
    assert str(elf_img.address) == f"{built['whole.o']}@.nv_fatbin#0.0" and str(ptx.address).endswith("#0.1")
    assert elf_img.get("wrapper-version") == "1"
    assert ptx.get("ptxas-options").strip() == ptx.entry.options.strip()
    obj = elf_img.code_object()
    assert obj is not None and obj.functions and ptx.code_object() is None


def test_wrappers_are_reported_and_resolved(built: dict[str, Path]) -> None:
    expect = {"whole.o": [(1, ".nv_fatbin")], "rdc.o": [(1, "__nv_relfatbin")], "dlink.o": [(2, ".nv_fatbin")],
              "exe": [(2, ".nv_fatbin"), (1, ".nv_fatbin")], "libk.so": [(2, ".nv_fatbin"), (1, ".nv_fatbin")],
              "blob.o": [], "padded.o": []}
    for name, want in expect.items():
        rep = ScanReport()
        found = list(scan([built[name]], report=rep))
        assert [(w.version, w.target_section) for w in rep.wrappers] == want, name
        assert all(w.found for w in rep.wrappers), name
        offsets = {f.offset for f in found}
        assert {w.target_offset for w in rep.wrappers} <= offsets, name
        assert {f.get("wrapper-version") for f in found if f.section != ".rodata"} <= {"1", "2", ""}
    exe = list(scan([built["exe"]]))
    assert [f.get("wrapper-version") for f in exe] == ["2", "1", "1"]


def test_fatbin_in_rodata_is_found(built: dict[str, Path]) -> None:
    # cuobjdump does not look into .rodata (it reports "does not contain device code").
    proc = run_tool([require_tool("cuobjdump"), "-lelf", "-lptx", str(built["blob.o"])], check=False)
    assert "ELF file" not in proc.stdout
    found = list(scan([built["blob.o"]]))
    bare = list(scan([built["k.fatbin"]]))
    assert [(f.section, f.kind, f.arch, f.size, f.stored_size) for f in found] == [
        (".rodata", f.kind, f.arch, f.size, f.stored_size) for f in bare]
    assert [str(f.address).removeprefix(str(built["blob.o"])) for f in found] == ["@.rodata#0.0", "@.rodata#0.1"]
    assert [str(f.address).removeprefix(str(built["k.fatbin"])) for f in bare] == ["#0.0", "#0.1"]
    assert all(f.entry is not None and f.get("wrapper-version") == "" for f in found)
    assert bytes(found[0].entry.raw_payload) == bytes(bare[0].entry.raw_payload)  # type: ignore[union-attr]


def test_random_bytes_with_the_magic_are_not_reported(built: dict[str, Path]) -> None:
    rep = ScanReport()
    assert list(scan([built["noise.o"]], report=rep)) == []
    assert rep.warnings == []
    # The same bytes bare: a corrupt fatbin (it starts with the magic), so a warning and nothing else.
    noise = _noise((built["k.fatbin"]).read_bytes())
    rep = ScanReport()
    assert list(scan_bytes(noise, "noise.bin", report=rep)) == []
    assert len(rep.warnings) == 1 and "noise.bin" in rep.warnings[0]


def test_bare_cubins(cubins: dict[str, Path], built: dict[str, Path]) -> None:
    for name, path in cubins.items():
        (f,) = scan([path])
        sm = name.split("_")[1]
        assert (f.container, f.kind, f.arch, f.address.entry, f.entry) == ("file", "cubin", f"sm_{sm}", None, None)
        assert isinstance(f.native, BareElf) and f.native.machine == 190
        assert f.size == f.stored_size == f.native.size == path.stat().st_size == len(f.data())
        assert str(f.address) == str(path) and f.vendor == "nvidia" and f.offset == 0
    (f,) = scan([built["k.cubin"]])
    assert f.arch == "sm_80"
    assert [k for k, _ in cuobjdump_list(built["k.cubin"])[""]] == ["elf"]


def test_amdgpu_code_objects_are_listed(amdgpu_objects: dict[str, Path]) -> None:
    for gfx in ("gfx90a", "gfx1030", "gfx942"):
        for key in (f"{gfx}_obj", f"{gfx}_so"):
            (f,) = scan([amdgpu_objects[key]])
            assert (f.kind, f.arch, f.container, f.vendor) == ("amdgpu", gfx, "file", "amd")


# --------------------------------------------------------------------------- zips, folders, archives


@pytest.fixture(scope="module")
def wheel(built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(built["whole.o"], "deep/whole.o")
    whl = out / "pkg-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("pkg/__init__.py", "# nothing\n")
        z.writestr("pkg/lib/", "")
        z.write(built["libk.so"], "pkg/lib/libk.so")
        z.write(built["libr.a"], "pkg/lib/libr.a", compress_type=zipfile.ZIP_STORED)
        z.write(built["k.cubin"], "pkg/k.cubin")
        z.writestr("pkg/inner.zip", inner.getvalue())
        z.writestr("pkg/big.bin", bytes(1 << 20))
    return whl


def _strip(found: list[Image], prefix: str) -> list[tuple[object, ...]]:
    return [(str(f.address).removeprefix(prefix), f.container, f.section, f.kind, f.arch, f.size, f.stored_size,
             f.offset) for f in found]


def test_wheel_with_a_zip_inside(wheel: Path, built: dict[str, Path]) -> None:
    rep = ScanReport()
    found = list(scan([wheel], report=rep))
    assert rep.warnings == []
    w = str(wheel)
    paths = [f.path.removeprefix(w) for f in found]
    assert sorted(set(paths), key=paths.index) == [
        "!pkg/lib/libk.so", "!pkg/lib/libr.a!rdc.o", "!pkg/lib/libr.a!ext.o", "!pkg/k.cubin",
        "!pkg/inner.zip!deep/whole.o"]
    # Each member gives exactly what the same file gives on disk.
    for member, name in (("pkg/lib/libk.so", "libk.so"), ("pkg/k.cubin", "k.cubin")):
        mine = [f for f in found if f.path == f"{w}!{member}"]
        assert _strip(mine, f"{w}!{member}") == _strip(list(scan([built[name]])), str(built[name]))
    deep = [f for f in found if f.path.endswith("!deep/whole.o")]
    assert _strip(deep, deep[0].path) == _strip(list(scan([built["whole.o"]])), str(built["whole.o"]))
    assert [f.container for f in found if f.path.endswith("!pkg/k.cubin")] == ["file"]
    # Without a path: the same images, named after `where`.
    again = list(scan_bytes(wheel.read_bytes(), "pkg.whl"))
    assert [str(f.address).replace("pkg.whl", w, 1) for f in again] == [str(f.address) for f in found]


def test_folder_walk_sorted_symlinks_not_followed(built: dict[str, Path], wheel: Path, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "b" / "sub").mkdir(parents=True)
    (root / "a").mkdir()
    (root / "b" / "sub" / "rdc.o").write_bytes(built["rdc.o"].read_bytes())
    (root / "a" / "whole.o").write_bytes(built["whole.o"].read_bytes())
    (root / "notes.txt").write_text("no device code here\n")
    (root / "c.whl").write_bytes(wheel.read_bytes())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "dlink.o").write_bytes(built["dlink.o"].read_bytes())
    (root / "link_out").symlink_to(outside, target_is_directory=True)
    (root / "a" / "link_in.o").symlink_to(root / "a" / "whole.o")
    calls: list[tuple[int, int]] = []
    found = list(scan([root], progress=lambda d, t: calls.append((d, t))))
    files = sorted(dict.fromkeys(f.path.split("!")[0] for f in found))
    r = str(root)
    assert files == [f"{r}/a/whole.o", f"{r}/b/sub/rdc.o", f"{r}/c.whl"]
    order = list(dict.fromkeys(f.path.split("!")[0] for f in found))
    assert order == files  # sorted walk: a/, b/, c.whl
    # bytes: the 4 regular files' (links skipped), each file's end a step, the wheel's members steps inside it
    walked = sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names
                    if not os.path.islink(os.path.join(d, n)))
    sizes = [os.path.getsize(p) for p in walked]
    assert len(walked) == 4 and calls[0] == (0, sum(sizes)) and {t for _, t in calls} == {sum(sizes)}
    assert all((sum(sizes[:k]), sum(sizes)) in calls for k in range(1, 5)) and calls == sorted(calls)
    assert list(scan([root])) == found  # deterministic


def test_corrupt_members_become_warnings(built: dict[str, Path], tmp_path: Path) -> None:
    ar = require_tool("ar")
    whole = built["whole.o"].read_bytes()
    (tmp_path / "broken.o").write_bytes(whole[:3000])  # section headers cut off
    (tmp_path / "whole.o").write_bytes(whole)
    run_tool([ar, "rc", "mixed.a", "broken.o", "whole.o"], tmp_path)
    rep = ScanReport()
    found = list(scan([tmp_path / "mixed.a"], report=rep))
    assert {f.path for f in found} == {f"{tmp_path / 'mixed.a'}!whole.o"}
    assert len(found) == 2
    assert len(rep.warnings) == 1 and "mixed.a!broken.o" in rep.warnings[0]

    # A zip whose one member is corrupt (CRC): the other members are still read.
    zpath = tmp_path / "z.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_STORED) as z:
        z.writestr("a/broken.o", whole)
        z.writestr("b/whole.o", whole)
    raw = bytearray(zpath.read_bytes())
    at = raw.find(whole[5000:5100])
    raw[at] ^= 0xFF
    zpath.write_bytes(bytes(raw))
    rep = ScanReport()
    found = list(scan([zpath], report=rep))
    assert {f.path for f in found} == {f"{zpath}!b/whole.o"}
    assert len(rep.warnings) == 1 and "z.zip!a/broken.o" in rep.warnings[0]

    with pytest.raises(FileNotFoundError):
        list(scan([tmp_path / "missing.o"]))


def test_thin_archive_members(built: dict[str, Path], tmp_path: Path) -> None:
    ar = require_tool("ar")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "rdc.o").write_bytes(built["rdc.o"].read_bytes())
    (tmp_path / "ext.o").write_bytes(built["ext.o"].read_bytes())
    run_tool([ar, "rcT", "lib/thin.a", "lib/rdc.o", "ext.o"], tmp_path)
    thin = tmp_path / "lib" / "thin.a"
    rep = ScanReport()
    found = list(scan([thin], report=rep))
    assert {f.path for f in found} == {f"{thin}!rdc.o"}
    assert len(rep.warnings) == 1 and "outside the archive's folder" in rep.warnings[0]
    found = list(scan([thin], follow_thin_outside=True))
    assert [f.path for f in found] == [f"{thin}!rdc.o"] * 2 + [f"{thin}!../ext.o"] * 2
    rep = ScanReport()
    assert list(scan_bytes(thin.read_bytes(), "thin.a", report=rep)) == []
    assert len(rep.warnings) == 2


def test_truncated_and_mutated_archive_scans_only_warn(built: dict[str, Path]) -> None:
    data = built["libr.a"].read_bytes()
    rng = random.Random(11)
    cuts = sorted({rng.randrange(len(data)) for _ in range(150)} | set(range(0, 200)))
    for cut in cuts:
        rep = ScanReport()
        try:
            list(scan_bytes(data[:cut], "libr.a", report=rep))
        except DeviceBinaryError as e:  # pragma: no cover - scan_bytes turns these into warnings
            pytest.fail(f"cut {cut}: {e}")
    for _ in range(300):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        list(scan_bytes(bytes(buf), "libr.a", report=ScanReport()))


# --------------------------------------------------------------------------- addresses of a real scan


def test_addresses_of_hostile_and_repeated_member_names(tmp_path: Path) -> None:
    from devbin.formats.ar.writer import ArMember, write_archive
    from devbin.formats.fatbin import FatbinImage, write_fatbin
    from devbin.formats.fatbin import constants as FC
    from devbin.images import Address, Entry, Member, find_image

    from tests.conftest import FIXTURES

    cubin = (FIXTURES / "sample_sm90.cubin").read_bytes()
    amd = (FIXTURES / "sample_gfx90a.o").read_bytes()
    fatbin = write_fatbin([FatbinImage(FC.KIND_ELF, 90, cubin), FatbinImage(FC.KIND_ELF, 80, cubin)])
    lib = write_archive([ArMember("k.o", amd), ArMember("k.o", cubin, symbols=()), ArMember("a#1@b!c%d;e.o", amd)])
    whl = tmp_path / "odd name #1.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("lib/libk.a", lib)
        z.writestr("lib/x!y@z.fatbin", fatbin)
        with pytest.warns(UserWarning, match="Duplicate name"):
            z.writestr("lib/x!y@z.fatbin", fatbin)  # a zip may hold two members of one name
    images = list(scan([whl]))
    w = "odd name %231.whl"
    assert [str(i.address).removeprefix(str(tmp_path) + "/") for i in images] == [
        f"{w}!lib/libk.a!k.o", f"{w}!lib/libk.a!k.o;2", f"{w}!lib/libk.a!a%231%40b%21c%25d%3Be.o",
        f"{w}!lib/x%21y%40z.fatbin#0.0", f"{w}!lib/x%21y%40z.fatbin#0.1",
        f"{w}!lib/x%21y%40z.fatbin;2#0.0", f"{w}!lib/x%21y%40z.fatbin;2#0.1"]
    assert [i.kind for i in images] == ["amdgpu", "cubin", "amdgpu", "cubin", "cubin", "cubin", "cubin"]
    assert images[2].address.member == Member("a#1@b!c%d;e.o")
    assert images[4].address == Address(str(whl), (Member("lib/x!y@z.fatbin"), Entry(0, 1)))
    for image in images:  # every address reads back, and names its image alone
        text = str(image.address)
        assert Address.parse(text) == image.address
        assert find_image(images, text) is image
    assert len({i.address for i in images}) == len(images)
    assert [i.address for i in scan([whl])] == [i.address for i in images]  # stable run to run
    assert bytes(find_image(images, images[1].address).data()) == cubin

