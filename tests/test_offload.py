"""LLVM OffloadBinary: structural tests and checks against clang-offload-packager, llvm-objdump and clang.

Real-tool tests pack the ``amdgpu_objects`` code objects (and arbitrary bytes as
a cubin) with ``clang-offload-packager-19``/``-22``, compare devbin's reading
and devbin's writer with the packager byte for byte, let ``llvm-objdump-19``
and ``-22 --offloading`` list what devbin writes, extract images with the
packager and embed blobs in host objects with ``clang-19``.  Structural tests
break one field at a time and cut the blob at every byte.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import require_tool
from devbin.binary import ByteView
from devbin.errors import DeviceBinaryError, FormatError, NotThisFormat, TruncatedError, UnsupportedVersion
from devbin.formats.elf import ElfFile
from devbin.formats.offload import (
    OffloadImage,
    build_string_table,
    find_in_elf,
    iter_offload_binaries,
    parse_offload_binary,
    write_offload_binary,
)
from devbin.formats.offload import constants as C

from tests.expect import assert_located, outcome
from tests.runners import run_tool

GFX = ("gfx90a", "gfx942")
FAKE_CUBIN = bytes(range(37))


def _images(amd: dict[str, bytes] | None = None, *, hip: int = C.OFK_HIP_LEGACY) -> list[OffloadImage]:
    amd = amd if amd is not None else {"gfx90a": b"\x7fELF" + bytes(20), "gfx942": b"\x7fELF" + bytes(9)}
    imgs = [OffloadImage.of(data, offload_kind=hip, strings={"arch": gfx, "triple": "amdgcn-amd-amdhsa"})
            for gfx, data in amd.items()]
    imgs.append(OffloadImage.of(FAKE_CUBIN, image_kind=C.IMG_CUBIN, offload_kind=C.OFK_CUDA,
                                strings={"arch": "sm_90", "triple": "nvptx64-nvidia-cuda"}))
    return imgs


def _objdump(tool: str, path: Path) -> list[dict[str, str]]:
    out = run_tool([tool, "--offloading", str(path)], path.parent).stdout
    found: list[dict[str, str]] = []
    for block in re.split(r"OFFLOADING IMAGE \[\d+\]:", out)[1:]:
        rec: dict[str, str] = {}
        for line in block.strip().splitlines():
            if line.strip():
                key, _, val = line.strip().partition(" ")
                rec[key] = val.strip()
        found.append(rec)
    return found


# -- layout, exactly as observed ---------------------------------------------------------------------------

def test_v1_layout_of_one_small_image() -> None:
    data = write_offload_binary([OffloadImage.of(b"hello world!!", offload_kind=3,
                                                 strings={"arch": "gfx1030", "triple": "amdgcn-amd-amdhsa"})])
    magic, version, size, entries_at, entry_size = struct.unpack_from("<4sIQQQ", data)
    assert (magic, version, size, entries_at, entry_size) == (C.MAGIC, 1, len(data), 32, 40)
    assert size % 8 == 0
    kinds = struct.unpack_from("<HHIQQQQ", data, 32)
    assert kinds[:5] == (1, 3, 0, 72, 2)
    table_at = 72 + 2 * 16
    assert data[table_at:table_at + 1] == b"\0"
    assert kinds[5] % 8 == 0 and kinds[5] >= table_at and kinds[6] == 13
    assert data[kinds[5]:kinds[5] + 13] == b"hello world!!"


def test_string_table_is_suffix_merged_in_reversed_order() -> None:
    table, offs = build_string_table([b"mykey", b"arch", b"myvalue", b"triple", b"amdgcn-amd-amdhsa", b"gfx90a",
                                      b"e", b"a", b""])
    assert table == b"\0mykey\0arch\0myvalue\0triple\0amdgcn-amd-amdhsa\0gfx90a\0"
    assert offs[b"e"] == offs[b"triple"] + 5 and offs[b"a"] == offs[b"gfx90a"] + 5 and offs[b""] == 0


def test_read_write_round_trip_v1_and_v2() -> None:
    imgs = _images()
    v1 = write_offload_binary(imgs)
    blobs = list(iter_offload_binaries(v1))
    assert [b.version for b in blobs] == [1, 1, 1]
    assert all(b.offset % 8 == 0 for b in blobs)
    got = [e for b in blobs for e in b.entries]
    assert [(e.image_kind, e.offload_kind, e.strings, e.image_bytes) for e in got] == [
        (i.image_kind, i.offload_kind, i.strings, i.image) for i in imgs]
    assert [e.producer for e in got] == ["hip", "hip", "cuda"]
    v2 = write_offload_binary(imgs, version=2)
    ob = parse_offload_binary(v2)
    assert (ob.version, ob.entry_field, ob.size) == (2, 3, len(v2))
    assert [(e.strings, e.image_bytes, e.image_offset % 8) for e in ob.entries] == [
        (i.strings, i.image, 0) for i in imgs]
    assert write_offload_binary(imgs, version=2) == v2  # deterministic


def test_offload_kind_numberings() -> None:
    def entry(kind: int, version: int = 1) -> tuple[str, str, str, str]:
        e = parse_offload_binary(write_offload_binary([OffloadImage.of(b"x", offload_kind=kind)],
                                                      version=version)).entries[0]
        return e.numbering, e.producer, e.producer_legacy, e.producer_mask

    assert entry(3) == (C.NUMBERING_LEGACY, "hip", "hip", "none")
    assert entry(4) == (C.NUMBERING_MASK, "hip", "none", "hip")
    assert entry(8) == (C.NUMBERING_MASK, "sycl", "none", "sycl")
    assert entry(2) == (C.NUMBERING_BOTH, "cuda", "cuda", "cuda")
    assert entry(0x30) == (C.NUMBERING_UNKNOWN, "none", "none", "none")
    assert entry(4, 2)[0] == C.NUMBERING_MASK
    assert parse_offload_binary(write_offload_binary([OffloadImage.of(b"", offload_kind=0xBEEF)])).entries[
        0].offload_kind == 0xBEEF


def test_v2_values_may_hold_nul_but_v1_may_not() -> None:
    img = OffloadImage.of(b"abc", strings={"blob": "a\0b"})
    assert parse_offload_binary(write_offload_binary([img], version=2)).entries[0].get("blob") == "a\0b"
    with pytest.raises(DeviceBinaryError):
        write_offload_binary([img])
    with pytest.raises(DeviceBinaryError):
        write_offload_binary([img], version=3)


def test_iter_stops_at_zero_padding_and_where_strings() -> None:
    data = write_offload_binary(_images()) + bytes(24)
    blobs = list(iter_offload_binaries(data))
    assert len(blobs) == 3
    assert blobs[0].entries[0].where == "offload #0: offload[0] gfx90a"


# -- malformed input, one field at a time ------------------------------------------------------------------

def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into("<" + fmt, out, offset, value)
    return bytes(out)


ONE = write_offload_binary([OffloadImage.of(b"0123456789", offload_kind=3, strings={"arch": "gfx90a", "k": "v"})])
TWO = write_offload_binary(_images(), version=2)


@pytest.mark.parametrize(("offset", "fmt", "value", "exc"), [
    (0, "I", 0xDEADBEEF, NotThisFormat),
    (4, "I", 3, UnsupportedVersion),
    (4, "I", 0xFFFFFFFF, UnsupportedVersion),
    (4, "I", 0, FormatError),
    (8, "Q", len(ONE) + 8, TruncatedError),
    (8, "Q", 1 << 63, TruncatedError),
    (8, "Q", 8, FormatError),
    (16, "Q", len(ONE), TruncatedError),
    (16, "Q", (1 << 64) - 1, TruncatedError),
    (32 + 8, "Q", len(ONE), TruncatedError),
    (32 + 16, "Q", (1 << 64) - 1, TruncatedError),
    (32 + 24, "Q", len(ONE) - 4, TruncatedError),
    (32 + 32, "Q", (1 << 64) - 1, TruncatedError),
    (72, "Q", len(ONE) + 100, FormatError),
    (80, "Q", (1 << 63), FormatError),
])
def test_v1_broken_fields(offset: int, fmt: str, value: int, exc: type[Exception]) -> None:
    with pytest.raises(exc):
        parse_offload_binary(_patch(ONE, offset, fmt, value))


@pytest.mark.parametrize(("offset", "fmt", "value"), [
    (24, "Q", (1 << 64) - 1), (24, "Q", 1 << 40), (24, "Q", 4), (16, "Q", len(TWO) - 39),
    (32 + 40 + 16, "Q", 1 << 60), (32 + 40 + 24, "Q", len(TWO) - 1),
])
def test_v2_broken_fields(offset: int, fmt: str, value: int) -> None:
    with pytest.raises(DeviceBinaryError):
        parse_offload_binary(_patch(TWO, offset, fmt, value))


def test_v2_value_size_past_end() -> None:
    first_str = struct.unpack_from("<Q", TWO, 32 + 8)[0]
    with pytest.raises(TruncatedError):
        parse_offload_binary(_patch(TWO, first_str + 16, "Q", len(TWO)))


def test_missing_nul_in_key() -> None:
    data = bytearray(ONE)
    key_off = struct.unpack_from("<Q", data, 72)[0]
    end = data.index(b"\0", key_off)
    data[end:] = b"x" * (len(data) - end)
    with pytest.raises(DeviceBinaryError):
        parse_offload_binary(bytes(data))


@pytest.mark.parametrize("blob", [ONE, TWO], ids=["v1", "v2"])
def test_truncation_at_every_byte(blob: bytes) -> None:
    for cut in range(len(blob)):
        with pytest.raises(DeviceBinaryError):
            parse_offload_binary(blob[:cut])
        with pytest.raises(DeviceBinaryError):
            list(iter_offload_binaries(blob + blob[:cut] if cut else blob + b"\x10"))


def test_errors_carry_absolute_offsets_in_a_sub_view() -> None:
    data = bytes(16) + _patch(ONE, 8, "Q", len(ONE) + 8)
    with pytest.raises(TruncatedError) as info:
        parse_offload_binary(ByteView(data).sub(16, len(ONE)))
    assert info.value.offset == 16 + 8


# -- hypothesis ---------------------------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=12)
_image = st.builds(
    OffloadImage.of, st.binary(max_size=64), image_kind=st.integers(0, 0xFFFF),
    offload_kind=st.integers(0, 0xFFFF), flags=st.integers(0, 0xFFFFFFFF),
    strings=st.dictionaries(_text, _text, max_size=4),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_image, max_size=4), st.sampled_from([1, 2]))
def test_round_trip_property(imgs: list[OffloadImage], version: int) -> None:
    data = write_offload_binary(imgs, version=version)
    assert len(data) % 8 == 0
    entries = [e for b in iter_offload_binaries(data) for e in b.entries]
    assert [(e.image_kind, e.offload_kind, e.flags, e.strings, e.image_bytes) for e in entries] == [
        (i.image_kind, i.offload_kind, i.flags, i.strings, i.image) for i in imgs]
    again = write_offload_binary([OffloadImage.of(e.image_bytes, image_kind=e.image_kind,
                                                  offload_kind=e.offload_kind, flags=e.flags, strings=e.strings)
                                  for e in entries], version=version)
    assert again == data


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 400), st.binary(min_size=1, max_size=8))
def test_random_corruption_only_raises_devbin_errors(junk: bytes, at: int, patch: bytes) -> None:
    for base in (ONE, TWO):
        data = bytearray(base)
        at_ = at % len(data)
        data[at_:at_ + len(patch)] = patch
        for blob in (bytes(data), C.MAGIC + junk):
            def read(buf: bytearray) -> None:
                for ob in iter_offload_binaries(buf):
                    for e in ob.entries:
                        _ = (e.string_map, e.producer, e.objdump_kind, e.image_kind_name)
                        # An image read is the stored range of its blob, inside the bytes given.
                        assert e.image_bytes == bytes(buf[ob.offset + e.image_offset:][:e.image_size])
                        assert len(e.image_bytes) == e.image_size

            err = outcome(read, blob)
            if err is not None:
                assert_located(err, fmts={"offload"}, size=len(blob))


# -- real tools ---------------------------------------------------------------------------------------------

def _pack_args(objs: dict[str, Path], cubin: Path, kind: str = "hip") -> list[str]:
    args = [f"--image=file={objs[f'{g}_obj']},triple=amdgcn-amd-amdhsa,arch={g},kind={kind}" for g in GFX]
    return [*args, f"--image=file={cubin},triple=nvptx64-nvidia-cuda,arch=sm_90,kind=cuda"]


@pytest.mark.parametrize("llvm", ["19", "22"])
def test_reads_and_rewrites_what_the_packager_writes(amdgpu_objects: dict[str, Path], tmp_path: Path,
                                                     llvm: str) -> None:
    packager = require_tool(f"clang-offload-packager-{llvm}")
    cubin = tmp_path / "fake.cubin"
    cubin.write_bytes(FAKE_CUBIN)
    out = tmp_path / "packed.bin"
    run_tool([packager, "-o", str(out), *_pack_args(amdgpu_objects, cubin), ], tmp_path)
    data = out.read_bytes()
    blobs = list(iter_offload_binaries(data))
    entries = [e for b in blobs for e in b.entries]
    assert [b.version for b in blobs] == [1, 1, 1]
    hip = C.OFK_HIP_LEGACY if llvm == "19" else C.OFK_HIP
    assert [(e.image_kind, e.offload_kind, e.arch, e.triple) for e in entries] == [
        (1, hip, "gfx90a", "amdgcn-amd-amdhsa"), (1, hip, "gfx942", "amdgcn-amd-amdhsa"),
        (3, C.OFK_CUDA, "sm_90", "nvptx64-nvidia-cuda")]
    assert [e.producer for e in entries] == ["hip", "hip", "cuda"]
    assert entries[0].numbering == (C.NUMBERING_LEGACY if llvm == "19" else C.NUMBERING_MASK)
    expected = [amdgpu_objects[f"{g}_obj"].read_bytes() for g in GFX] + [FAKE_CUBIN]
    assert [e.image_bytes for e in entries] == expected
    # devbin's writer, given the same images and string order, writes the same bytes.
    again = write_offload_binary([OffloadImage.of(e.image_bytes, image_kind=e.image_kind,
                                                  offload_kind=e.offload_kind, flags=e.flags, strings=e.strings)
                                  for e in entries])
    assert again == data


@pytest.mark.parametrize("version", [1, 2])
def test_objdump_lists_what_devbin_writes(amdgpu_objects: dict[str, Path], tmp_path: Path, version: int) -> None:
    amd = {g: amdgpu_objects[f"{g}_obj"].read_bytes() for g in GFX}
    for llvm, hip in (("19", C.OFK_HIP_LEGACY), ("22", C.OFK_HIP)):
        objdump = require_tool(f"llvm-objdump-{llvm}")
        path = tmp_path / f"devbin{llvm}.v{version}.bin"
        path.write_bytes(write_offload_binary(_images(amd, hip=hip), version=version))
        if version == 2:
            # LLVM 19 and 22 know only version 1: both refuse the blob as a whole.
            r = run_tool([objdump, "--offloading", str(path)], check=False)
            assert r.returncode != 0 and "Invalid data" in r.stderr
            continue
        listed = _objdump(objdump, path)
        assert [(d["kind"], d["arch"], d["triple"], d["producer"]) for d in listed] == [
            ("elf", "gfx90a", "amdgcn-amd-amdhsa", "hip"), ("elf", "gfx942", "amdgcn-amd-amdhsa", "hip"),
            ("cubin", "sm_90", "nvptx64-nvidia-cuda", "cuda")]
        other = require_tool(f"llvm-objdump-{'22' if llvm == '19' else '19'}")
        # The other LLVM reads the HIP value in its own numbering: "none".
        assert [d["producer"] for d in _objdump(other, path)] == ["none", "none", "cuda"]


def test_packager_extracts_what_devbin_writes(amdgpu_objects: dict[str, Path], tmp_path: Path) -> None:
    packager = require_tool("clang-offload-packager-19")
    amd = {g: amdgpu_objects[f"{g}_obj"].read_bytes() for g in GFX}
    packed = tmp_path / "devbin.bin"
    packed.write_bytes(write_offload_binary(_images(amd)))
    for arch, want in [*amd.items(), ("sm_90", FAKE_CUBIN)]:
        out = tmp_path / f"out.{arch}.o"
        run_tool([packager, str(packed), f"--image=file={out},arch={arch}"], tmp_path)
        assert out.read_bytes() == want


def test_host_object_carries_blob_in_llvm_offloading(amdgpu_objects: dict[str, Path], tmp_path: Path) -> None:
    clang = require_tool("clang-19")
    objdump = require_tool("llvm-objdump-19")
    amd = {g: amdgpu_objects[f"{g}_obj"].read_bytes() for g in GFX}
    packed = tmp_path / "devbin.bin"
    blob = write_offload_binary(_images(amd))
    packed.write_bytes(blob)
    src = tmp_path / "host.c"
    src.write_text("int main(void) { return 0; }\n")
    host = tmp_path / "host.o"
    run_tool([clang, "-c", str(src), "-o", str(host), "-Xclang", f"-fembed-offload-object={packed}"], tmp_path)
    elf = ElfFile(host.read_bytes(), where="host.o")
    sec = elf.section(C.SECTION_NAME)
    assert sec is not None
    assert (sec.sh_type, sec.sh_flags, sec.sh_addralign) == (C.SHT_LLVM_OFFLOADING, 0x80000000, 8)
    assert bytes(sec.data) == blob
    found = find_in_elf(elf)
    direct = [e for b in iter_offload_binaries(blob) for e in b.entries]
    got = [e for b in found for e in b.entries]
    assert [(e.strings, e.image_bytes, e.offload_kind) for e in got] == [
        (e.strings, e.image_bytes, e.offload_kind) for e in direct]
    assert got[0].offset == sec.sh_offset + 32
    assert len(_objdump(objdump, host)) == 3


def test_nothing_found_in_plain_host_object(tmp_path: Path) -> None:
    clang = require_tool("clang-19")
    src = tmp_path / "host.c"
    src.write_text("int f(void) { return 1; }\n")
    run_tool([clang, "-c", str(src), "-o", str(tmp_path / "h.o")], tmp_path)
    assert find_in_elf(ElfFile((tmp_path / "h.o").read_bytes())) == []


def test_fixture_package_from_conftest(amdgpu_objects: dict[str, Path]) -> None:
    data = amdgpu_objects["offload_package"].read_bytes()
    entries = [e for b in iter_offload_binaries(data) for e in b.entries]
    assert [e.arch for e in entries] == list(GFX)
    assert [e.image_bytes for e in entries] == [amdgpu_objects[f"{g}_obj"].read_bytes() for g in GFX]
