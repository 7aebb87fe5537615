"""SYCL host binaries of the old offload model (devbin.formats.sycl, devbin.images.sycl).

The host file is described structurally (``sycl_host``: a linked x86-64 library's sections as DPC++'s
offload wrapper lays them out: image sections of 16-byte-aligned bare zstd frames, ``.tgtimg``, version-3
image descriptors with 32-byte offload entries and a property set); its device images are what ocloc
builds at test time from tests/sources/intel (an ``ar`` of zebins and ``generic_ir``, SPIR-V).  Oracles:
``ar t``/``ar p`` on the archive, ``llvm-readelf -s`` on each member, ``spirv-dis`` on the SPIR-V.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
import zstandard

from devbin.binary import ByteView
from devbin.formats.elf import constants as C
from devbin.formats.elf.model import ElfModel, SectionSpec
from devbin.formats.elf.reader import ElfFile
from devbin.formats.elf.writer import write
from devbin.formats.sycl.reader import read_sycl_images
from devbin.images.scan import scan

from tests.conftest import require_tool
from tests.intelbuild import build_intel
from tests.runners import cli_ok, run_tool

GEN = "__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen"
JIT = "__CLANG_OFFLOAD_BUNDLE__sycl-spir64"
# Where the builder puts each section (a linked library's addresses; file offsets follow them).
ADDR = {GEN: 0x10000, JIT: 0x20000, ".rodata": 0x30000, ".data.rel.ro": 0x40000, ".tgtimg": 0x50000}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_intel(tmp_path_factory.mktemp("intel"))


def _pad(data: bytes, align: int = 16) -> bytes:
    return data + bytes(-len(data) % align)


def sycl_host(gen_images: list[bytes], jit_images: list[bytes], *, kernels: list[str], tgtimg: bool = True,
              descriptors: bool = True, level: int = 3, version: int = 3, sets: int = 1, props: int = 1,
              extra: tuple[SectionSpec, ...] = (), lead: int = 0) -> bytes:
    """A host ELF as the offload wrapper lays it out: each image compressed to one zstd frame when it is
    larger than 64 bytes (else stored raw), 16-byte aligned; ``.tgtimg`` {address, decoded size}; one
    descriptor per image (``version`` 3, or 2 with its null manifest pair; pointer fields stored as values:
    no relocation table) with offload
    entries named ``kernels`` and a property set ``SYCL/misc properties`` {optLevel: 2} (``sets`` such records
    all pointing at one array of ``props`` such properties); ``extra`` sections are added as given; ``lead`` zero
    bytes come before the first spir64_gen image (which then is not 16-aligned when ``lead`` is not)."""
    rodata = bytearray()

    def string(s: str) -> int:
        rodata.extend(s.encode() + b"\0")
        return ADDR[".rodata"] + len(rodata) - len(s) - 1

    secs: dict[str, bytearray] = {GEN: bytearray(), JIT: bytearray()}
    placed: list[tuple[str, int, int, int]] = []  # section, address, stored end, decoded size
    for name, images in ((GEN, gen_images), (JIT, jit_images)):
        secs[name].extend(bytes(lead if name == GEN else 0))
        for img in images:
            stored = zstandard.ZstdCompressor(level=level, write_checksum=False).compress(img) if len(img) > 64 else img
            start = ADDR[name] + len(secs[name])
            secs[name].extend(stored)
            secs[name].extend(bytes(-len(secs[name]) % 16))
            placed.append((name, start, start + len(stored), len(img)))
    data = bytearray()
    base = ADDR[".data.rel.ro"]
    names = [string(k) for k in kernels]
    entries_at = base + len(data)
    for n in names:
        data += struct.pack("<QQQii", 0, n, 0, 0, 0)
    entries_end = base + len(data)
    prop_at = base + len(data)
    data += struct.pack("<QQIIQ", string("optLevel"), 0, 1, 0, 2) * props
    set_at = base + len(data)
    data += struct.pack("<QQQ", string("SYCL/misc properties"), prop_at, prop_at + 32 * props) * sets
    for sec, start, end, _ in placed:
        if not descriptors:
            break
        target = string(sec.rpartition("-")[2])
        opts = string("-device pvc" if sec == JIT else "")
        manifest = (0, 0) if version == 2 else ()
        data += struct.pack("<HBBI", version, 4, 4, 0) + struct.pack(
            f"<{9 + len(manifest)}Q", target, opts, opts, *manifest, start, end, entries_at, entries_end, set_at,
            set_at + 24 * sets)
    model = ElfModel(e_type=C.ET_DYN, machine=C.EM_X86_64)
    model.sections = [SectionSpec(GEN, flags=C.SHF_ALLOC, data=bytes(secs[GEN]), addr=ADDR[GEN], align=16),
                      SectionSpec(JIT, flags=C.SHF_ALLOC, data=bytes(secs[JIT]), addr=ADDR[JIT], align=16),
                      SectionSpec(".rodata", flags=C.SHF_ALLOC, data=bytes(rodata), addr=ADDR[".rodata"]),
                      SectionSpec(".data.rel.ro", flags=C.SHF_ALLOC | C.SHF_WRITE, data=bytes(data),
                                  addr=ADDR[".data.rel.ro"], align=16)]
    if tgtimg:
        records = b"".join(struct.pack("<QQ", start, size) for _, start, _, size in placed)
        model.sections.append(SectionSpec(".tgtimg", flags=C.SHF_ALLOC | C.SHF_WRITE, data=records,
                                          addr=ADDR[".tgtimg"], align=16))
    model.sections.extend(extra)
    return write(model)


def _members(fat: Path) -> list[str]:
    return run_tool(["ar", "t", fat]).stdout.split()


def _functions(data: bytes, tmp: Path) -> dict[str, int]:
    """``llvm-readelf -s``: FUNC symbols and sizes."""
    path = tmp / "m.elf"
    path.write_bytes(data)
    out = run_tool([require_tool("llvm-readelf"), "-s", "-W", path]).stdout
    rows = [line.split() for line in out.splitlines()]
    return {r[7]: int(r[2]) for r in rows if len(r) >= 8 and r[0].endswith(":") and r[3] == "FUNC" and r[6] != "UND"}


def _entry_points(spv: bytes, tmp: Path) -> list[str]:
    path = tmp / "m.spv"
    path.write_bytes(spv)
    out = run_tool([require_tool("spirv-dis"), path]).stdout
    return re.findall(r'OpEntryPoint Kernel %\S+ "([^"]+)"', out)


def test_list_gives_each_zebin_in_each_archive_in_each_frame(built: dict[str, Path], tmp_path: Path) -> None:
    fat, spv = built["fat"].read_bytes(), built["spv"].read_bytes()
    host = tmp_path / "libk.so"
    host.write_bytes(sycl_host([fat, fat], [spv], kernels=["vadd", "reduce_slm"]))
    images = list(scan([host], all=True))
    members = _members(built["fat"])
    zebins = [m for m in members if m[:3] in ("64.", "32.")]
    assert zebins and "generic_ir" in members and any(m.startswith("pad_") for m in members)
    want = [f"{host}@{GEN}#0.{i}!{m}" for i in (0, 1) for m in [*zebins, "generic_ir@SPIRV Object"]]
    want.append(f"{host}@{JIT}#0.0")
    assert [str(i.address) for i in images] == want
    by_kind = {str(i.address): (i.vendor, i.kind, i.compression) for i in images}
    assert by_kind[f"{host}@{GEN}#0.0!{zebins[0]}"] == ("intel", "zebin", "zstd")
    assert by_kind[f"{host}@{GEN}#0.1!generic_ir@SPIRV Object"] == ("intel", "spirv", "zstd")
    assert by_kind[f"{host}@{JIT}#0.0"] == ("intel", "spirv", "zstd")  # sycl-spir64: Intel's JIT code
    for image in images:  # the bytes are ar's and the module spirv-dis reads
        if image.kind == "zebin":
            member = image.address.member
            assert member is not None
            assert bytes(image.data()) == run_tool_bytes(["ar", "p", built["fat"], member.name])
            assert image.arch  # from the zebin's notes
        else:
            assert _entry_points(bytes(image.data()), tmp_path) == _entry_points(spv, tmp_path) != []
    listed = json.loads(cli_ok("list", "--json", host))
    assert [i["address"] for i in listed["images"]] == want


def run_tool_bytes(argv: list[str | Path]) -> bytes:
    import subprocess
    return subprocess.run([str(a) for a in argv], capture_output=True, check=True).stdout


@pytest.mark.parametrize("version", [2, 3])
def test_descriptors_entries_and_properties(built: dict[str, Path], version: int) -> None:
    """Both descriptor layouts found in real libraries (DPC++ 2025: version 2, 2026: version 3)."""
    fat, spv = built["fat"].read_bytes(), built["spv"].read_bytes()
    tiny = spv[:20]  # under the compression threshold: stored raw
    data = sycl_host([fat], [spv, tiny], kernels=["vadd", "reduce_slm"], version=version)
    images = read_sycl_images(ElfFile(ByteView(data)))
    assert [(i.section, i.index, i.compressed, i.version, i.target) for i in images] == [
        (GEN, 0, True, version, "spir64_gen"), (JIT, 0, True, version, "spir64"), (JIT, 1, False, version, "spir64")]
    assert [bytes(i.image_data(1 << 30)) for i in images] == [fat, spv, tiny]
    assert images[0].decoded_size == len(fat) and len(images[0].stored) < len(fat)
    assert images[1].entries == ("vadd", "reduce_slm") and images[1].compile_options == "-device pvc"
    assert images[1].format_name == "compressed"
    (ps,) = images[0].property_sets
    assert ps.name == "SYCL/misc properties" and [(p.name, p.type, p.value) for p in ps.properties] == [
        ("optLevel", 1, 2)]


@pytest.mark.parametrize("tgtimg", [True, False])
def test_without_descriptors_the_frames_are_measured(built: dict[str, Path], tgtimg: bool) -> None:
    """No descriptor (or no .tgtimg either): a frame's stored length comes from its block headers."""
    fat, spv = built["fat"].read_bytes(), built["spv"].read_bytes()
    data = sycl_host([fat, fat], [spv], kernels=["vadd"], tgtimg=tgtimg, descriptors=False)
    images = read_sycl_images(ElfFile(ByteView(data)))
    frame = zstandard.ZstdCompressor(level=3, write_checksum=False).compress(fat)
    assert [(i.index, len(i.stored), i.version) for i in images[:2]] == [(0, len(frame), 0), (1, len(frame), 0)]
    assert [bytes(i.image_data(1 << 30)) for i in images] == [fat, fat, spv]


def test_size_accounts_every_byte_and_lists_kernels(built: dict[str, Path], tmp_path: Path) -> None:
    fat, spv = built["fat"].read_bytes(), built["spv"].read_bytes()
    host = tmp_path / "libk.so"
    host.write_bytes(sycl_host([fat], [spv], kernels=["vadd"]))
    report = json.loads(cli_ok("size", "--json", host))
    (f,) = report["files"]
    elf = ElfFile(ByteView(host.read_bytes()))
    sections = {s.name: s.file_size for s in elf.sections if s.name in (GEN, JIT)}
    assert f["device_bytes"] == sum(sections.values()) and f["overhead"] == 0
    assert f["stored_size"] == f["device_bytes"]
    for image in f["images"]:
        if image["kind"] != "zebin":
            continue
        member = image["address"].rpartition("!")[2]
        code = run_tool_bytes(["ar", "p", built["fat"], member])
        assert image["size"] == len(code)
        oracle = _functions(code, tmp_path)
        assert "vadd" in oracle and {fn["name"]: fn["size"] for fn in image["functions"]} == oracle


def test_new_offload_model_offload_binary_with_spir64_triples(built: dict[str, Path], tmp_path: Path) -> None:
    """The new model (clang-linker-wrapper): OffloadBinary entries with SYCL's offload kind and spir64
    triples in ``.llvm.offloading``, read by the existing reader; a zebin is Intel's by its machine and
    arch from its notes, the SPIR-V a module of the triple's vendor."""
    from devbin.formats.offload import constants as OC
    from devbin.formats.offload.writer import OffloadImage, write_offload_binary
    zebin, spv = built["zebin_pvc"].read_bytes(), built["spv"].read_bytes()
    blob = write_offload_binary([
        OffloadImage.of(zebin, image_kind=OC.IMG_OBJECT, offload_kind=OC.OFK_SYCL,
                        strings={"triple": "spir64_gen-unknown-unknown", "arch": "pvc"}),
        OffloadImage.of(spv, image_kind=OC.IMG_SPIRV, offload_kind=OC.OFK_SYCL,
                        strings={"triple": "spir64-unknown-unknown", "arch": ""})])
    model = ElfModel(e_type=C.ET_REL, machine=C.EM_X86_64)
    model.sections = [SectionSpec(".llvm.offloading", sh_type=OC.SHT_LLVM_OFFLOADING, data=blob, align=8)]
    host = tmp_path / "k.o"
    host.write_bytes(write(model))
    got = [(str(i.address), i.vendor, i.kind, i.arch, i.get("offload-kind")) for i in scan([host])]
    assert got == [(f"{host}@.llvm.offloading#0.0", "intel", "zebin", "pvc", "sycl"),
                   (f"{host}@.llvm.offloading#1.0", "intel", "spirv", "", "sycl")]  # version 1: a blob per image


def test_a_bad_array_pointer_gives_nothing_not_a_long_walk(built: dict[str, Path]) -> None:
    """An EntriesEnd (or property-set end) far past the file is no array: read as none, at once."""
    data = bytearray(sycl_host([built["fat"].read_bytes()], [], kernels=["vadd"]))
    sec = ElfFile(ByteView(bytes(data))).section(".data.rel.ro")
    assert sec is not None
    desc = sec.sh_offset + 32 + 32 + 24  # after one entry, one property, one property set
    assert struct.unpack_from("<H", data, desc)[0] == 3
    struct.pack_into("<Q", data, desc + 56, 0x7FFF_FFFF_FFFF_FFE0)  # EntriesEnd
    struct.pack_into("<Q", data, desc + 72, 0x7FFF_FFFF_FFFF_FFE0)  # PropertySetsEnd
    (image,) = read_sycl_images(ElfFile(ByteView(bytes(data))))
    assert image.version == 3 and image.entries == () and image.property_sets == ()


def test_a_descriptor_cut_by_its_section_end_is_none() -> None:
    """A version word in a section's last two bytes whose ImageStart field (32 bytes on) lies in the next
    section: no descriptor (its Kind and Format bytes are past the end), the image read as one without
    (it runs to its section's end)."""
    image = bytes(range(40))  # stored raw: under the builder's compression threshold
    x = 0x60010  # the next section; the ImageStart slot at x + 24, so the version word at x - 8
    head = SectionSpec(".data.a", flags=C.SHF_ALLOC | C.SHF_WRITE, data=bytes(8) + struct.pack("<H", 3),
                       addr=x - 16, align=16)
    slot = SectionSpec(".data.b", flags=C.SHF_ALLOC | C.SHF_WRITE, addr=x, align=16,
                       data=bytes(24) + struct.pack("<QQ", ADDR[GEN], ADDR[GEN] + len(image)))
    data = sycl_host([image], [], kernels=["vadd"], descriptors=False, extra=(head, slot))
    (img,) = read_sycl_images(ElfFile(ByteView(data)))
    assert (img.version, img.kind, img.format, bytes(img.stored)) == (0, -1, -1, _pad(image))  # to the end


def test_a_shared_property_array_is_read_once() -> None:
    """Every property-set record pointing at one property array: the array is read once and shared (work
    sets + properties, not sets x properties)."""
    data = sycl_host([bytes(40)], [], kernels=["vadd"], sets=300, props=300)
    (img,) = read_sycl_images(ElfFile(ByteView(data)))
    assert len(img.property_sets) == 300 and len(img.property_sets[0].properties) == 300
    assert all(ps.properties is img.property_sets[0].properties for ps in img.property_sets)


def test_too_many_property_references_is_a_format_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the per-file cap on what the descriptors reference, a FormatError names the limit."""
    from devbin.errors import FormatError
    from devbin.formats.sycl import reader
    monkeypatch.setattr(reader, "MAX_RECORDS", 1000)
    data = sycl_host([bytes(40)], [], kernels=["vadd"], sets=40, props=30)  # 1 entry + 1200 properties
    with pytest.raises(FormatError, match="reference more than 1000 offload entries and properties "
                                          r"\(the limit per file\)"):
        read_sycl_images(ElfFile(ByteView(data)))
    monkeypatch.setattr(reader, "MAX_RECORDS", 1201)
    (img,) = read_sycl_images(ElfFile(ByteView(data)))
    assert sum(len(ps.properties) for ps in img.property_sets) == 1200 and img.entries == ("vadd",)


def test_too_many_property_value_bytes_is_a_format_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Properties that each point at a large block: past the per-file cap on value bytes, a FormatError."""
    from devbin.errors import FormatError
    from devbin.formats.sycl import reader
    blob = SectionSpec(".rodata.blob", flags=C.SHF_ALLOC, data=bytes(4096), addr=0x70000)
    data = bytearray(sycl_host([bytes(40)], [], kernels=["vadd"], props=8, extra=(blob,)))
    sec = ElfFile(ByteView(bytes(data))).section(".data.rel.ro")
    assert sec is not None
    for k in range(8):  # each property a byte array (type 2) of 4,000 bytes at the blob
        struct.pack_into("<QIIQ", data, sec.sh_offset + 32 + 32 * k + 8, 0x70000 + k, 2, 0, 4000)
    monkeypatch.setattr(reader, "MAX_VALUE_BYTES", 31_999)
    with pytest.raises(FormatError, match=r"properties hold more than 31999 bytes of values \(the limit per file\)"):
        read_sycl_images(ElfFile(ByteView(bytes(data))))
    monkeypatch.setattr(reader, "MAX_VALUE_BYTES", 32_000)
    (img,) = read_sycl_images(ElfFile(ByteView(bytes(data))))
    assert [len(p.value) for p in img.property_sets[0].properties] == [3992] * 8  # the bit length dropped


def test_prune_keeps_an_unaligned_first_image_where_it_is() -> None:
    """A first image 8 bytes into its section (not 16-aligned): prune rewrites it in place, the next image
    16-aligned by address after it, and every descriptor and ``.tgtimg`` record points at the new bytes (the
    images read back are the new ones)."""
    import random

    from devbin.formats.sycl.prune import compress_image, prune_section
    a, b = random.Random(1).randbytes(600), random.Random(2).randbytes(500)  # frames no smaller than the data
    host = sycl_host([a, b], [], kernels=["k"], lead=8)
    elf = ElfFile(ByteView(host))
    first, second = read_sycl_images(elf)
    sec = elf.section(GEN)
    assert sec is not None and first.offset - sec.sh_offset == 8
    small = compress_image(a[:99])
    buf = bytearray(host)
    got = prune_section(elf, buf, sec, [first, second], {first.index: (small, 99)})
    assert got.reason is None and got.freed > 0
    after = read_sycl_images(ElfFile(ByteView(bytes(buf))))
    assert [bytes(i.stored) for i in after] == [small, bytes(second.stored)]
    assert [i.decoded_size for i in after] == [99, len(b)]
    assert after[0].offset == first.offset and (after[1].offset - sec.sh_offset + sec.sh_addr) % 16 == 0
    assert after[1].offset < second.offset
