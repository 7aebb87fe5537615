"""``devbin prune`` of Intel code: ocloc archives inside SYCL host libraries, and the SPIR-V policy.

Inputs are built at test time: the device images by ``ocloc`` from tests/sources/intel (tests/intelbuild.py:
``fat`` is ``ocloc -device acm-g10,pvc``'s archive of two zebins, ``12.55.8`` and ``12.60.7``, with
``generic_ir``), the host library by ``gcc -shared`` from C that lays the images out as DPC++'s offload
wrapper does (16-byte-aligned objects in ``__CLANG_OFFLOAD_BUNDLE__sycl-<target>`` sections, version-3
image descriptors whose pointers are ``R_X86_64_RELATIVE`` relocations, ``.tgtimg`` records, a local symbol
per image), so the library is a real one the dynamic loader maps and ``ctypes`` calls into.  Oracles: ``ar
t``/``ar p`` on each decoded archive, ``zstd -d`` on each frame, ``readelf -a -W`` (silent), ``ctypes.CDLL``.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
from pathlib import Path

import pytest
import zstandard

from devbin.binary import ByteView
from devbin.formats.elf.reader import ElfFile
from devbin.formats.sycl.reader import read_sycl_images
from devbin.targets.intel.fatarchive import prune_fat_archive

from tests.conftest import require_tool
from tests.intelbuild import build_intel
from tests.runners import cli_err, cli_ok, run_tool

GEN = "__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen"
JIT = "__CLANG_OFFLOAD_BUNDLE__sycl-spir64"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_intel(tmp_path_factory.mktemp("intel"))


def _array(name: str, data: bytes, section: str) -> str:
    body = ",".join(str(b) for b in data)
    return (f'__attribute__((section("{section}"), aligned(16), used)) static const unsigned char {name}[{len(data)}] '
            f"= {{{body}}};\n")


def sycl_library(out: Path, gen: list[tuple[bytes, bool]], jit: list[bytes]) -> Path:
    """``out`` (a shared library, gcc) holding ``gen`` images (bytes, zstd-compressed or stored as they are) in
    the ``spir64_gen`` section and ``jit`` SPIR-V modules (compressed) in the ``spir64`` one, each described
    as the offload wrapper describes it (module docstring); ``answer()`` returns 42."""
    src = ["#include <stdint.h>\n",
           "struct entry { void *addr; const char *name; uint64_t size; int32_t flags, reserved; };\n",
           "struct desc { uint16_t version; uint8_t kind, format; uint32_t pad; const char *target, *copts, *lopts;"
           " const unsigned char *start, *end; const struct entry *eb, *ee; const void *pb, *pe; };\n",
           "struct tgt { const void *start; uint64_t size; };\n",
           'static const struct entry entries[] = {{0, "vadd", 0, 0, 0}};\n']
    images: list[tuple[str, str, int, int]] = []  # name, target, format, decoded size
    for k, (data, compress) in enumerate(gen):
        stored = zstandard.ZstdCompressor(level=10).compress(data) if compress else data
        src.append(_array(f"gen{k}", stored, GEN))
        images.append((f"gen{k}", "spir64_gen", 4 if compress else 1, len(data)))
    for k, data in enumerate(jit):
        src.append(_array(f"jit{k}", zstandard.ZstdCompressor(level=10).compress(data), JIT))
        images.append((f"jit{k}", "spir64", 4, len(data)))
    descs = ",".join(f'{{3, 4, {fmt}, 0, "{target}", "", "", {n}, {n} + sizeof {n}, entries, entries + 1, 0, 0}}'
                     for n, target, fmt, _ in images)
    src.append(f"__attribute__((used)) static const struct desc descs[] = {{{descs}}};\n")
    recs = ",".join(f"{{{n}, {size}}}" for n, _, _, size in images)
    src.append(f'__attribute__((section(".tgtimg"), used)) static const struct tgt tgtimg[] = {{{recs}}};\n')
    src.append("int answer(void) { return 42; }\n")
    src.append(f"const struct desc *descriptors(int *n) {{ *n = {len(images)}; return descs; }}\n")
    c = out.with_suffix(".c")
    c.write_text("".join(src), encoding="utf-8")
    run_tool([require_tool("gcc"), "-shared", "-fPIC", "-O0", "-fno-toplevel-reorder", "-o", out, c])
    return out


def _archives(lib: Path, tmp: Path) -> list[list[str]]:
    """``ar t`` of each spir64_gen image of ``lib``, each frame decoded by the ``zstd`` CLI and by zstandard."""
    elf = ElfFile(ByteView(lib.read_bytes()))
    names = []
    for k, img in enumerate(i for i in read_sycl_images(elf) if i.section == GEN):
        ar = tmp / f"img{k}.a"
        if img.compressed:
            frame = tmp / f"img{k}.zst"
            frame.write_bytes(bytes(img.stored))
            run_tool([require_tool("zstd"), "-d", "-q", "-f", frame, "-o", ar])
            assert ar.read_bytes() == zstandard.ZstdDecompressor().decompress(bytes(img.stored))
        else:
            ar.write_bytes(bytes(img.stored))
        names.append(run_tool(["ar", "t", ar]).stdout.split())
    return names


def _quiet_readelf(lib: Path) -> None:
    got = subprocess.run(["readelf", "-a", "-W", str(lib)], capture_output=True, text=True, check=False)
    assert got.returncode == 0 and got.stderr == "", got.stderr


def _answer(lib: Path) -> int:
    return int(ctypes.CDLL(str(lib)).answer())


def _loaded_images(lib: Path) -> list[tuple[str, bytes]]:
    """Each image as the SYCL runtime reads it once the dynamic loader has mapped ``lib`` and applied its
    relocations: ``ImageEnd - ImageStart`` bytes from the descriptor, a compressed one (format 4) decoded as
    one whole zstd frame (``ZSTD_decompress`` of exactly those bytes: nothing may follow the frame)."""
    handle = ctypes.CDLL(str(lib))
    handle.descriptors.restype = ctypes.c_void_p
    n = ctypes.c_int()
    base = handle.descriptors(ctypes.byref(n))
    out = []
    for k in range(n.value):
        raw = ctypes.string_at(base + 80 * k, 80)
        fmt = raw[3]
        target = ctypes.string_at(int.from_bytes(raw[8:16], "little")).decode()
        start, end = int.from_bytes(raw[32:40], "little"), int.from_bytes(raw[40:48], "little")
        data = ctypes.string_at(start, end - start)
        if fmt == 4:
            d = zstandard.ZstdDecompressor().decompressobj()
            data, rest = d.decompress(data), d.unused_data
            assert rest == b"", f"image {k}: {len(rest)} bytes after the frame"
        out.append((target, data))
    return out


@pytest.fixture(scope="module")
def library(built: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two compressed fat archives and one stored as it is (its pvc zebin's 30 KB: whole pages to cut), and the
    SPIR-V module in the spir64 section."""
    fat = built["fat"].read_bytes()
    lib = tmp_path_factory.mktemp("sycl") / "libk.so"
    return sycl_library(lib, [(fat, True), (fat, False), (fat, True)], [built["spv"].read_bytes()])


def test_the_archive_comes_back_byte_for_byte(built: dict[str, Path], tmp_path: Path) -> None:
    """Keeping every member writes ocloc's archive again byte for byte (its pad_ members where ArEncoder puts
    them); dropping one leaves the others byte-identical (``ar p``), each 8-aligned again."""
    fat = built["fat"].read_bytes()
    assert prune_fat_archive(fat, lambda name, n: True) == fat
    out = tmp_path / "x.a"
    out.write_bytes(prune_fat_archive(fat, lambda name, n: name != "64.12.60.7"))
    assert [m for m in run_tool(["ar", "t", out]).stdout.split() if not m.startswith("pad_")] == [
        "64.12.55.8", "generic_ir"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    run_tool(["ar", "x", out], cwd=tmp_path / "a")
    run_tool(["ar", "x", built["fat"]], cwd=tmp_path / "b")
    for m in ("64.12.55.8", "generic_ir"):
        assert (tmp_path / "a" / m).read_bytes() == (tmp_path / "b" / m).read_bytes()
    from devbin.formats.ar import ArchiveFile
    assert all(m.offset % 8 == 0 for m in ArchiveFile(out.read_bytes()).files if not m.name.startswith("pad_"))


def test_a_repeated_member_name_kept_twice(built: dict[str, Path], tmp_path: Path) -> None:
    """An ocloc archive holding two members of one name (``64.12.55.8`` twice, ArEncoder's layout): keeping
    every member gives it back byte for byte, ``--keep dg2`` keeps both copies (``ar t``), each as it was, and
    drops the pvc zebin; ``--drop dg2 --image <archive>!64.12.55.8;2`` drops the second copy only."""
    from devbin.formats.ar import ArchiveFile
    from devbin.targets.intel.fatarchive import write_fat_archive
    members = [(m.name, bytes(m.data)) for m in ArchiveFile(built["fat"].read_bytes()).files
               if not m.name.startswith("pad_")]
    twice = [members[0], (members[0][0], members[0][1] + b"\0" * 8), *members[1:]]
    dup = tmp_path / "dup.ar"
    dup.write_bytes(write_fat_archive(twice))
    assert prune_fat_archive(dup.read_bytes(), lambda name, n: True) == dup.read_bytes()
    out = tmp_path / "out.ar"
    cli_ok("prune", "--keep", "dg2", str(dup), "-o", str(out))
    assert [m for m in run_tool(["ar", "t", out]).stdout.split() if not m.startswith("pad_")] == [
        "64.12.55.8", "64.12.55.8", "generic_ir"]
    kept = [bytes(m.data) for m in ArchiveFile(out.read_bytes()).files if m.name == "64.12.55.8"]
    assert kept == [twice[0][1], twice[1][1]]
    # the second copy by its address (numbered as the scan numbers it: formats.ar.numbered), the first stays
    cli_ok("prune", "--drop", "dg2", "--image", f"{dup}!64.12.55.8;2", str(dup), "-o", str(out))
    assert [bytes(m.data) for m in ArchiveFile(out.read_bytes()).files if not m.name.startswith("pad_")] == [
        twice[0][1], *(d for _, d in twice[2:])]


def test_keep_one_device_in_a_sycl_library(library: Path, tmp_path: Path) -> None:
    """``--keep acm-g10``: the pvc zebins go from each archive (frames compressed again, the stored archive
    rewritten), the section is packed and its freed whole pages cut; the library still loads and runs,
    readelf is silent, devbin lists the kept images only, and ``size --keep`` predicted it to the byte."""
    (tmp_path / "in").mkdir()
    assert _answer(library) == 42 and all("64.12.60.7" in m for m in _archives(library, tmp_path / "in"))
    predicted = json.loads(cli_ok("size", str(library), "--keep", "acm-g10", "--json"))
    out = tmp_path / "libk.so"
    doc = json.loads(cli_ok("prune", str(library), "--keep", "acm-g10", "-o", str(out), "--json"))
    assert doc["spirv_policy"] == "kept" and doc["output_size"] == out.stat().st_size
    (f,) = predicted["files"]
    assert f["savings"]["bytes"] == doc["file_bytes_saved"] == library.stat().st_size - out.stat().st_size
    assert doc["file_bytes_saved"] > 0 and doc["file_bytes_saved"] % 4096 == 0  # whole pages
    assert sorted({i["arch"] for i in doc["images"] if not i["kept"]}) == ["pvc"]  # ocloc 22.43's notes: family names
    assert _answer(out) == 42
    loaded = _loaded_images(out)
    assert [t for t, _ in loaded] == ["spir64_gen"] * 3 + ["spir64"]
    assert all(d.startswith(b"!<arch>\n") for _, d in loaded[:3]) and loaded[3] == _loaded_images(library)[3]
    _quiet_readelf(out)
    for members in _archives(out, tmp_path):
        assert [m for m in members if not m.startswith("pad_")] == ["64.12.55.8", "generic_ir"]
    listed = json.loads(cli_ok("list", str(out), "--json"))["images"]
    assert [(i["kind"], i["arch"]) for i in listed] == [("zebin", "dg2"), ("spirv", "")] * 3 + [("spirv", "")]
    assert all(i.get("metadata", {}).get("descriptor-version") == "3" for i in listed)  # descriptors still found
    before = {i["address"].split("@", 1)[1]: i for i in json.loads(cli_ok("list", str(library), "--json"))["images"]}
    for i in listed:  # the kept members are the original's (prune checked them byte for byte)
        assert i["size"] == before[i["address"].split("@", 1)[1]]["size"]
    again = tmp_path / "again.so"  # the pruned file can be pruned again (to nothing more: the same bytes)
    cli_ok("prune", str(out), "--keep", "acm-g10", "-o", str(again))
    assert again.read_bytes() == out.read_bytes()


def test_spirv_none_drops_generic_ir_and_says_what_stays(library: Path, tmp_path: Path) -> None:
    """``--spirv none`` (and ``--jit-ir none``) drop each archive's generic_ir; the spir64 section's module is a
    SYCL image itself, which prune keeps whole: a note says so."""
    out = tmp_path / "libk.so"
    code, _, err = cli_err("prune", str(library), "--keep", "acm-g10", "--spirv", "none", "-o", str(out))
    assert code == 0, err
    assert "--spirv none: 1 SPIR-V image(s) of 4 stay" in err
    for members in _archives(out, tmp_path):
        assert [m for m in members if not m.startswith("pad_")] == ["64.12.55.8"]
    assert _answer(out) == 42
    _quiet_readelf(out)
    doc = json.loads(cli_ok("prune", str(library), "--keep", "acm-g10", "--jit-ir", "none", "--dry-run", "--json"))
    assert doc["spirv_policy"] == doc["ptx_policy"] == "none" and doc["output_size"] == out.stat().st_size
    kept = json.loads(cli_ok("prune", str(library), "--keep", "acm-g10", "--jit-ir", "none", "--spirv", "kept",
                             "--dry-run", "--json"))
    assert kept["spirv_policy"] == "kept" and kept["output_size"] > out.stat().st_size


def test_spirv_none_without_a_module_left_warns(built: dict[str, Path], tmp_path: Path) -> None:
    """With no SPIR-V image of its own, ``--spirv none`` leaves the library no SPIR-V: the note names the devices
    that still run it."""
    lib = sycl_library(tmp_path / "libg.so", [(built["fat"].read_bytes(), True)], [])
    code, _, err = cli_err("prune", str(lib), "--keep", "pvc", "--spirv", "none", "-o", str(tmp_path / "o.so"))
    assert code == 0, err
    assert "--spirv none: no SPIR-V kept (the input had 1 SPIR-V module(s)); devices other than pvc" in err
    _, _, err = cli_err("prune", str(lib), "--keep", "pvc", "-o", str(tmp_path / "p.so"))
    assert "SPIR-V" not in err  # kept: every module stays, nothing to say


def test_a_relocatable_object_is_refused(built: dict[str, Path], tmp_path: Path) -> None:
    """The descriptors of an object are relocations against symbols, not addresses: prune refuses it in one line."""
    src = tmp_path / "k.c"
    frame = zstandard.ZstdCompressor(level=10).compress(built["fat"].read_bytes())
    src.write_text(_array("img", frame, GEN), encoding="utf-8")
    obj = tmp_path / "k.o"
    run_tool([require_tool("gcc"), "-c", "-o", obj, src])
    assert "12.60.7" in cli_ok("list", str(obj))
    code, _, err = cli_err("prune", str(obj), "--keep", "pvc", "-o", str(tmp_path / "o.o"))
    assert code != 0 and "in a relocatable object cannot be pruned" in err and not (tmp_path / "o.o").exists()


def test_an_archives_members_are_one_module(library: Path) -> None:
    """The runtime hands a SYCL image over whole and the device's loader picks one member of its archive: the
    members are one module (select, and what prune keeps for a kept device).  The SYCL runtime picks one image
    among those holding a kernel, so images of the same kernels (here all three, and the SPIR-V) are one module,
    named by the kernels (tests/test_intel_select.py)."""
    from devbin.images.scan import scan
    from devbin.packaging.selection import module_of

    images = [i for i in scan([library], all=True) if i.section == GEN]
    assert {module_of(i) for i in images} == {f"{library}@__CLANG_OFFLOAD_BUNDLE__sycl-*[vadd]"}
    doc = json.loads(cli_ok("select", str(library), "--device", "pvc", "--json"))
    assert [c["address"].rsplit("!", 1)[1] for c in doc["choices"]] == ["64.12.60.7"]


def test_size_keep_predicts_the_wheel_and_the_installed_size(library: Path, tmp_path: Path) -> None:
    """A wheel holding the library: ``size --keep`` gives the library's, the wheel's (compressed) and the
    installed size after, to the byte what prune then writes (``--spirv none`` through prune's own report)."""
    import zipfile

    from tests.wheelbuild import build_wheel

    whl = build_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", {"pkg/libk.so": library.read_bytes(),
                                                               "pkg/__init__.py": b""})
    doc = json.loads(cli_ok("size", str(whl), "--keep", "acm-g10", "--json"))
    (pkg,) = doc["savings"]["packages"]
    out = tmp_path / "out" / whl.name
    out.parent.mkdir()
    pruned = json.loads(cli_ok("prune", str(whl), "--keep", "acm-g10", "-o", str(out), "--json"))
    with zipfile.ZipFile(out) as z:
        installed = sum(i.file_size for i in z.infolist())
        lib = z.read("pkg/libk.so")
    assert pkg["package_size_after"] == out.stat().st_size == pruned["package"]["package_size_after"]
    assert pkg["installed_size_after"] == installed == pruned["package"]["installed_size_after"]
    assert pkg["installed_size_after"] < pkg["installed_size_before"]
    (f,) = [f for f in doc["files"] if f["path"].endswith("libk.so")]
    assert f["savings"]["bytes"] == library.stat().st_size - len(lib) > 0
    none = json.loads(cli_ok("prune", str(whl), "--keep", "acm-g10", "--spirv", "none", "--dry-run", "--json"))
    assert none["spirv_policy"] == "none" and none["output_size"] < out.stat().st_size


def test_a_bare_ocloc_archive(built: dict[str, Path], tmp_path: Path) -> None:
    """``ocloc -device acm-g10,pvc``'s archive itself: ``--keep pvc`` drops the acm-g10 zebin (ArEncoder's layout,
    ``generic_ir`` kept, the pvc member byte-identical: ``ar x``); an archive ocloc did not write (``ar rc`` of
    zebins under their file names) is refused, not rewritten.  (``size --keep`` measures such an archive member
    by member, and predicts nothing for it yet: docs/PRUNE.md.)"""
    out = tmp_path / "pvc.ar"
    doc = json.loads(cli_ok("prune", str(built["fat"]), "--keep", "pvc", "-o", str(out), "--json"))
    from devbin.formats.ar import ArchiveFile
    (gone,) = [m for m in ArchiveFile(built["fat"].read_bytes()).files if m.name == "64.12.55.8"]
    saved = doc["file_bytes_saved"]
    assert saved == built["fat"].stat().st_size - out.stat().st_size  # the member, its header, pads of <= 68 each
    assert gone.size + 60 <= saved <= gone.size + 60 + 2 * (60 + 8)
    assert [(i["arch"], i["kept"]) for i in doc["images"]] == [("dg2", False), ("pvc", True)]
    assert run_tool(["ar", "t", out]).stdout.split() == ["pad_0", "64.12.60.7", "pad_1", "generic_ir"]
    for name, path in (("a", out), ("b", built["fat"])):
        (tmp_path / name).mkdir()
        run_tool(["ar", "x", path], cwd=tmp_path / name)
    for m in ("64.12.60.7", "generic_ir"):
        assert (tmp_path / "a" / m).read_bytes() == (tmp_path / "b" / m).read_bytes()
    plain = tmp_path / "plain.a"  # the archive's zebins (no .spv: a zebin carrying one would load on pvc from it)
    for m, file in (("64.12.55.8", "a.zebin"), ("64.12.60.7", "b.zebin")):
        (tmp_path / file).write_bytes((tmp_path / "b" / m).read_bytes())
    run_tool(["ar", "rc", plain, tmp_path / "a.zebin", tmp_path / "b.zebin"])
    code, _, err = cli_err("prune", str(plain), "--keep", "pvc", "-o", str(tmp_path / "p.a"))
    assert code == 1 and "not one its tools write" in err and not (tmp_path / "p.a").exists()


def test_images_that_would_grow_are_refused(built: dict[str, Path], tmp_path: Path) -> None:
    """A frame compressed at a higher level than prune's may come back larger: when the section cannot hold the
    rewritten images, nothing is written (one line, exit 1)."""
    from devbin.formats.sycl.prune import prune_section

    lib = sycl_library(tmp_path / "libz.so", [(built["fat"].read_bytes(), True)], [])
    elf = ElfFile(ByteView(lib.read_bytes()))
    (img,) = read_sycl_images(elf)
    sec = elf.section(GEN)
    assert sec is not None
    buf = bytearray(lib.read_bytes())
    got = prune_section(elf, buf, sec, [img], {img.index: (bytes(sec.file_size + 1), 0)})
    assert got.reason is not None and "more than" in got.reason and buf == lib.read_bytes()


def test_a_container_lost_to_spirv_none_names_it() -> None:
    """Where a kept device loaded SPIR-V (the runtime JIT-compiles it) and ``--spirv none`` took it, the note
    names that policy, not ``--drop``."""
    from devbin.images.address import Address
    from devbin.images.record import Image
    from devbin.packaging.load_fallback import Fallback

    spv = Image(address=Address("lib.so"), vendor="", kind="spirv", arch="", size=4, stored_size=4,
                compression="none", container="sycl", section="", offset=0)
    fb = Fallback(lost=("lib.so@s#0.0",), lost_images=(spv,), lost_for=("pvc",))
    (line,) = fb.notes("kept", "none")
    assert "went by --spirv none" in line and "--drop" not in line
    (line,) = fb.notes("kept")
    assert "went by --drop" in line


def test_a_library_of_spirv_only_says_so(built: dict[str, Path], tmp_path: Path) -> None:
    """oneMKL's SYCL library holds SPIR-V images only (3,708): no name can match, and the refusal says what the
    file holds instead of an empty list."""
    lib = sycl_library(tmp_path / "libs.so", [], [built["spv"].read_bytes()])
    code, _, err = cli_err("prune", str(lib), "--keep", "pvc", "-o", str(tmp_path / "o.so"))
    assert code == 1 and err.rstrip().endswith("keep pvc matches no image; the file holds no image of an "
                                               "architecture (1 spirv)")
