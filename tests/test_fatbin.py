"""Fatbin container: structural tests and checks against fatbinary, nvcc and cuobjdump.

Structural tests build fatbins with devbin's writer and break one field at a
time.  Real-tool tests build fatbins at test time (``nvcc -fatbin`` in every
compression mode, ``fatbinary`` directly with ``--ident``/``--cmdline``) from
``tests/sources/`` and compare devbin's entry list and extracted images with
``cuobjdump -lelf -lptx`` and ``-xelf all -xptx all`` byte for byte, and
devbin's uncompressed output with ``fatbinary``'s bytes.
"""

from __future__ import annotations

import os
import random
import re
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, PTX_DIR, SOURCES, require_tool
from devbin.binary import ByteView
from devbin.errors import DeviceBinaryError, FormatError, NotThisFormat, TruncatedError, UnsupportedVersion
from devbin.formats.fatbin import (
    Fatbin,
    FatbinImage,
    extract_name,
    iter_fatbins,
    parse_fatbin,
    parse_wrapper,
    ptx_version,
    squeeze_ptx,
    write_fatbin,
)
from devbin.formats.fatbin import constants as C
from devbin.formats.fatbin.compress import compress, decompress_lz4, decompress_zstd

from tests.runners import run_tool

CUBIN = (FIXTURES / "sample_sm90.cubin").read_bytes()
PTX = (FIXTURES / "sample.ptx").read_bytes()


def _small() -> bytes:
    return write_fatbin([FatbinImage(C.KIND_ELF, 90, CUBIN), FatbinImage(C.KIND_PTX, 90, PTX)])


def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into("<" + fmt, buf, offset, value)
    return bytes(buf)


# --------------------------------------------------------------------------- round trips


def test_round_trip_fields() -> None:
    images = [
        FatbinImage(C.KIND_ELF, 90, CUBIN, identifier="dir/k.cu"),
        FatbinImage(C.KIND_PTX, 90, PTX, options="-O3 -v", variant="a", compression="zstd"),
        FatbinImage(C.KIND_ELF, 90, CUBIN, compression="lz4", debug=True),
        FatbinImage(C.KIND_LTOIR, 100, b"\x01\x02irir", options="-ftz=0"),
    ]
    fb = parse_fatbin(write_fatbin(images))
    assert isinstance(fb, Fatbin) and fb.offset == 0 and fb.version == 1 and fb.header_size == 0x10
    e0, e1, e2, e3 = fb.entries
    assert (e0.kind_name, e0.arch_name, e0.identifier, e0.options_offset, e0.compression) == (
        "elf", "sm_90", "dir/k.cu", 0, "none")
    assert (e0.major, e0.minor, e0.flags) == (1, CUBIN[8], 0x11)
    assert e0.data() == CUBIN and bytes(e0.raw_payload) == CUBIN
    assert (e1.kind_name, e1.arch_name, e1.options, e1.compression, (e1.major, e1.minor)) == (
        "ptx", "compute_90a", "-O3 -v", "zstd", ptx_version(PTX))
    assert e1.data() == squeeze_ptx(PTX) and e1.uncompressed_size == len(squeeze_ptx(PTX)) + 1
    assert len(e1.raw_payload) == e1.compressed_size <= e1.payload_size and e1.payload_size % 8 == 0
    assert e2.compression == "lz4" and e2.is_debug and e2.is_64bit and e2.data() == CUBIN
    assert e3.kind_name == "ltoir" and e3.arch_name == "compute_100" and e3.flags & C.FLAG_LTO
    assert e3.data() == b"\x01\x02irir\0\0"  # LTO-IR comes back with the payload padding
    assert e3.offset == e2.offset + e2.header_size + e2.payload_size
    assert [f.index for f in fb.entries] == [0, 1, 2, 3]
    assert fb.size == len(write_fatbin(images))


def test_flags_and_names() -> None:
    assert C.flag_names(0x1100011 | 0x4000_0000) == ["64bit", "host-linux", "arch-specific", "compat-blob",
                                                      "0x40000000"]
    assert C.kind_name(2) == "elf" and C.kind_name(0x40) == "0x40"
    assert C.compression_name(C.FLAG_LZ4 | C.FLAG_ZSTD) == "0xa000"
    img = FatbinImage(0x40, 7, b"12345678", flags=0x1234_0000, major=3, minor=4)
    e = parse_fatbin(write_fatbin([img])).entries[0]
    assert (e.kind_name, e.flags, e.major, e.minor, e.data()) == ("0x40", 0x1234_0000, 3, 4, b"12345678")


_text = st.text(st.characters(min_codepoint=1, max_codepoint=0x2FF), max_size=24)


@st.composite
def _images(draw: st.DrawFn) -> FatbinImage:
    kind = draw(st.sampled_from([C.KIND_ELF, C.KIND_PTX, C.KIND_LTOIR, 0x40]))
    if kind == C.KIND_ELF:
        data = CUBIN
    elif kind == C.KIND_PTX:
        data = draw(st.binary(max_size=200)).replace(b"\0", b"x")
    else:
        data = draw(st.binary(max_size=200))
    return FatbinImage(
        kind, draw(st.integers(0, 0xFFFFFFFF)), data, identifier=draw(_text), options=draw(_text),
        variant=draw(st.sampled_from(["", "a", "f"])), debug=draw(st.booleans()),
        compression=draw(st.sampled_from(["none", "lz4", "zstd"])), major=draw(st.integers(0, 0xFFFF)),
        minor=draw(st.integers(0, 0xFFFF)), squeeze=draw(st.booleans()), compat=b"",
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(_images(), max_size=5))
def test_property_round_trip(images: list[FatbinImage]) -> None:
    blob = write_fatbin(images)
    fb = parse_fatbin(blob)
    assert fb.size == len(blob) and len(fb.entries) == len(images)
    two = list(iter_fatbins(blob + blob + bytes(16)))
    assert [f.offset for f in two] == [0, len(blob)]
    assert [e.offset - len(blob) for e in two[1].entries] == [e.offset for e in fb.entries]
    assert [bytes(e.raw_payload) for e in two[1].entries] == [bytes(e.raw_payload) for e in fb.entries]
    for img, e in zip(images, fb.entries, strict=True):
        assert (e.kind, e.arch, e.major, e.minor, e.identifier, e.compression) == (
            img.kind, img.arch, img.major, img.minor, img.identifier, img.compression)
        assert e.variant == img.variant and e.is_debug == img.debug
        if img.kind in (C.KIND_PTX, C.KIND_LTOIR) or img.options:
            assert e.options == img.options
        if img.kind == C.KIND_PTX:
            assert e.data() == (squeeze_ptx(img.data) if img.squeeze else img.data)
        elif img.kind == C.KIND_ELF:
            assert e.data() == img.data
        else:
            assert e.data().rstrip(b"\0") == img.data.rstrip(b"\0")
        assert e.offset % 8 == 0 and e.header_size % 8 == 0 and e.payload_size % 8 == 0
    assert write_fatbin(images) == blob  # deterministic


def test_iter_fatbins_back_to_back() -> None:
    a = _small()
    b = write_fatbin([FatbinImage(C.KIND_ELF, 80, CUBIN)])
    got = list(iter_fatbins(a + b + bytes(24)))
    assert [(f.offset, f.size, len(f.entries)) for f in got] == [(0, len(a), 2), (len(a), len(b), 1)]
    assert got[1].entries[0].offset == len(a) + 0x10
    assert list(iter_fatbins(b"")) == [] and list(iter_fatbins(bytes(64))) == []
    with pytest.raises(NotThisFormat):
        list(iter_fatbins(a + b"junkjunk"))


def test_absolute_offsets_in_sub_view() -> None:
    blob = b"\xff" * 0x100 + _patch(_small(), 0x10 + 4, "I", 0x20)
    with pytest.raises(FormatError) as ei:
        parse_fatbin(ByteView(blob).sub(0x100, len(blob) - 0x100), where="a.o(.nv_fatbin)")
    assert ei.value.offset == 0x114 and "a.o(.nv_fatbin): fatbin[0] sm_90" in str(ei.value)
    good = _small()
    fb = parse_fatbin(ByteView(bytes(8) + good).sub(8, len(good)))
    assert fb.offset == 0 and fb.entries[0].offset == 8 + 0x10


def test_wrapper() -> None:
    w = parse_wrapper(struct.pack("<IIQQ", C.WRAPPER_MAGIC, 2, 0x1000, 0x2000))
    assert (w.version, w.data_ptr, w.filename_or_fatbins, w.is_link) == (2, 0x1000, 0x2000, True)
    with pytest.raises(NotThisFormat):
        parse_wrapper(bytes(24))
    with pytest.raises(TruncatedError):
        parse_wrapper(struct.pack("<II", C.WRAPPER_MAGIC, 1))


# --------------------------------------------------------------------------- malformed input


def test_bad_magic_and_version() -> None:
    with pytest.raises(NotThisFormat):
        parse_fatbin(_patch(_small(), 0, "I", 0x1EE55A01))
    with pytest.raises(NotThisFormat):
        parse_fatbin(b"\x50\xed")
    with pytest.raises(UnsupportedVersion):
        parse_fatbin(_patch(_small(), 4, "H", 2))
    with pytest.raises(FormatError, match="header_size below"):
        parse_fatbin(_patch(_small(), 6, "H", 8))


_E0 = 0x10  # the first entry header


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "cls", "message"),
    [
        (8, "Q", 1 << 40, TruncatedError, "fat_size runs past"),
        (8, "Q", 0x38, TruncatedError, "entry header"),  # fat_size ends inside the first entry header
        (_E0 + 4, "I", 0x20, FormatError, "header_size below"),
        (_E0 + 4, "I", 0xFFFFFFF0, TruncatedError, "header_size runs past"),
        (_E0 + 8, "Q", 1 << 63, TruncatedError, "payload_size runs past"),
        (_E0 + 8, "Q", 8, FormatError, "entry header"),  # the next entry header lands in the cubin's bytes
        (_E0 + 0x20, "Q", (1 << 32) | 0x40, FormatError, "identifier runs past"),  # 1 byte at 0x40 of 0x40
        (_E0 + 0x24, "I", 0xFFFFFFFF, FormatError, "identifier runs past"),
    ],
)
def test_malformed_field(offset: int, fmt: str, value: int, cls: type[Exception], message: str) -> None:
    blob = write_fatbin([FatbinImage(C.KIND_ELF, 90, CUBIN)])
    with pytest.raises(cls, match=message):
        parse_fatbin(_patch(blob, offset, fmt, value))


def test_malformed_options_and_compression() -> None:
    blob = write_fatbin([FatbinImage(C.KIND_PTX, 90, PTX)])
    with pytest.raises(FormatError, match="options descriptor runs past"):
        parse_fatbin(_patch(blob, _E0 + 0x14, "I", 0x50))
    with pytest.raises(FormatError, match="options string runs past"):
        parse_fatbin(_patch(blob, _E0 + 0x40, "I", 0x51))
    with pytest.raises(FormatError, match="options string runs past"):
        parse_fatbin(_patch(blob, _E0 + 0x44, "I", 9))
    z = write_fatbin([FatbinImage(C.KIND_PTX, 90, PTX, compression="zstd")])
    with pytest.raises(FormatError, match="compressed_size exceeds"):
        parse_fatbin(_patch(z, _E0 + 0x10, "I", 0xFFFF))


@pytest.mark.parametrize("algo", ["lz4", "zstd"])
def test_decompression_bomb_and_corruption(algo: str) -> None:
    blob = write_fatbin([FatbinImage(C.KIND_ELF, 90, CUBIN, compression=algo)])
    bomb = parse_fatbin(_patch(blob, _E0 + 0x38, "Q", 1 << 40)).entries[0]
    with pytest.raises(FormatError, match="decompression bomb"):
        bomb.data()
    with pytest.raises(FormatError, match="decompression bomb"):
        parse_fatbin(blob).entries[0].data(max_size=100)
    short = parse_fatbin(_patch(blob, _E0 + 0x38, "Q", len(CUBIN) - 1)).entries[0]
    with pytest.raises(FormatError):
        short.data()
    longer = parse_fatbin(_patch(blob, _E0 + 0x38, "Q", len(CUBIN) + 100)).entries[0]
    with pytest.raises(FormatError):
        longer.data()
    e = parse_fatbin(blob).entries[0]
    buf = bytearray(blob)
    start = e.payload_offset
    for i in range(e.compressed_size // 2, e.compressed_size):
        buf[start + i] ^= 0xA5
    with pytest.raises(FormatError):
        parse_fatbin(bytes(buf)).entries[0].data()


def test_decompress_direct() -> None:
    data = b"abc" * 1000
    assert decompress_lz4(compress("lz4", data), len(data)) == data
    assert decompress_zstd(compress("zstd", data), len(data)) == data
    for garbage in (b"", b"\xff" * 40, b"\x28\xb5\x2f\xfd" + b"\xff" * 20):
        with pytest.raises(FormatError):
            decompress_zstd(garbage, 10)
        with pytest.raises(FormatError):
            decompress_lz4(garbage, 10)


def test_truncation_at_every_byte() -> None:
    blob = write_fatbin([
        FatbinImage(C.KIND_ELF, 90, CUBIN[:512], identifier="k.cu", compat=b""),
        FatbinImage(C.KIND_PTX, 90, PTX[:300], options="-O1", compression="zstd", major=8, minor=0),
        FatbinImage(C.KIND_PTX, 90, PTX[:300], compression="lz4", major=8, minor=0),
    ])
    parse_fatbin(blob)
    for n in range(len(blob)):
        with pytest.raises(DeviceBinaryError):
            parse_fatbin(blob[:n])
        if n:
            with pytest.raises(DeviceBinaryError):
                list(iter_fatbins(blob[:n]))


def test_elf_data_trimmed_to_elf_end() -> None:
    e = parse_fatbin(write_fatbin([FatbinImage(C.KIND_ELF, 90, CUBIN + b"abc")])).entries[0]
    assert e.payload_size == (len(CUBIN) + 3 + 7) // 8 * 8 and e.data() == CUBIN
    e = parse_fatbin(write_fatbin([FatbinImage(C.KIND_ELF, 90, b"not an elf!", minor=0)])).entries[0]
    assert e.data() == b"not an elf!\0\0\0\0\0"


# --------------------------------------------------------------------------- PTX squeeze


@pytest.mark.parametrize(
    ("text", "squeezed"),
    [  # each pair observed from fatbinary (CUDA 13.0) with --compress-mode=none
        (b"  // lead\n.version 8.5\n.target sm_90   // x\n", b" \n.version 8.5\n.target sm_90 \n"),
        (b"\t.reg .f32 \t%f<5>;\n\t{ // callseq 0, 0\n", b"\t.reg .f32 %f<5>;\n{ \n"),  # the first run keeps a char
        (b"/* block\n  c */ .global .b8 s[4];  \n", b" .global .b8 s[4]; \n"),
        (b'.file 1 "/a//b  c\tx.cu"\n\t.pragma  "nounroll  //x";\r\n',
         b'.file 1 "/a//b  c\tx.cu"\n.pragma "nounroll  //x";\r\n'),
        (b"x  /*in*/ y\t\t z \n   \n\tend", b"x  y\tz \n\nend"),
        (b"sm_90\r\n  \tx \r\n\t\ty \"a\\\"b  //c\"  z\n", b"sm_90\r\nx \r\ny \"a\\\"b  //c\" z\n"),
        (b"// c\r\n  a / b  //x\r\nq", b"\r\na / b \r\nq"),
        (b"a /* x\n y */   \n  b\n/* unterminated", b"a  \nb\n"),
        (b"a \x0b\x0c b \xc3\xa9  \"open  \n  c", b"a \x0b\x0cb \xc3\xa9 \"open  \n  c"),
        (b"a/**/b //x\x0cy\n//z\x0bw", b"ab \n"),
        (b"*/*/ \x0c//\"\\ \r\n/", b"* \x0c\r\n/"),
        (b'"a\\\\"  b  //c\n  q', b'"a\\\\"  b  //c\n  q'),  # a quote after a backslash never closes
        (b'x\\"  y  "z  //w\n  q', b'x\\" y "z  //w\n  q'),  # ... nor opens
        (b'"\\\\\\"  a  " b  //c\n  d', b'"\\\\\\"  a  " b \nd'),
    ],
)
def test_squeeze_ptx(text: bytes, squeezed: bytes) -> None:
    assert squeeze_ptx(text) == squeezed


def test_ptx_version_rule() -> None:
    assert ptx_version(b".version 8.5\n") == (8, 5)
    assert ptx_version(b".version 10.12\n") == (10, 1)  # fatbinary keeps one minor digit
    assert ptx_version(b"//.version 7.0\n.version 8.7\n") == (7, 0)  # and looks inside comments
    assert ptx_version(b".version 8\n") is None


# --------------------------------------------------------------------------- real tools


_LIST = re.compile(r"^(ELF|PTX) file\s+(\d+): (\S+)$", re.M)


def _listing(cuobjdump: str, path: Path) -> list[tuple[str, str]]:
    out = run_tool([cuobjdump, "-lelf", "-lptx", os.fspath(path)]).stdout
    return [(m.group(1), m.group(3)) for m in _LIST.finditer(out)]


def _devbin_listing(fb: Fatbin, stem: str) -> list[tuple[str, str]]:
    counts = {C.KIND_ELF: 0, C.KIND_PTX: 0}
    out = []
    for e in fb.entries:
        if e.kind in counts:
            counts[e.kind] += 1
            out.append(("ELF" if e.kind == C.KIND_ELF else "PTX", extract_name(e, stem, counts[e.kind])))
    return out


def _check_against_cuobjdump(path: Path, tmp: Path) -> Fatbin:
    """devbin's list equals cuobjdump's, and every image equals what cuobjdump extracts."""
    cuobjdump = require_tool("cuobjdump")
    fb = parse_fatbin(path.read_bytes())
    listing = _devbin_listing(fb, path.stem)
    assert listing == _listing(cuobjdump, path)
    out = tmp / f"x-{path.name}"
    out.mkdir()
    run_tool([cuobjdump, "-xelf", "all", "-xptx", "all", os.fspath(path)], cwd=out)
    assert sorted(p.name for p in out.iterdir()) == sorted(name for _, name in listing)
    by_name = {name: e for (_, name), e in zip(listing, [e for e in fb.entries if e.kind in (1, 2)], strict=True)}
    for name, e in by_name.items():
        assert (out / name).read_bytes() == e.data(), name
    return fb


_GENCODES = [
    "arch=compute_80,code=sm_80",
    "arch=compute_90,code=[sm_90,compute_90]",
    "arch=compute_90a,code=sm_90a",
    "arch=compute_100,code=[sm_100,compute_100]",
    "arch=compute_120,code=sm_120",
]
_MODES = {
    "default": [],
    "size": ["--compress-mode=size"],
    "speed": ["--compress-mode=speed"],
    "compress_all": ["-Xfatbin", "-compress-all"],
    "none": ["--no-compress"],
}
_EXPECTED = [("elf", "sm_80"), ("elf", "sm_90"), ("ptx", "compute_90"), ("elf", "sm_90a"), ("elf", "sm_100"),
             ("ptx", "compute_100"), ("elf", "sm_120")]


@pytest.fixture(scope="module")
def nvcc_fatbins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = require_tool("nvcc")
    out = tmp_path_factory.mktemp("fatbins")
    gencode = [a for g in _GENCODES for a in ("-gencode", g)]
    paths = {mode: out / f"kernels_{mode}.fatbin" for mode in _MODES}
    cmds = [[nvcc, "-fatbin", *gencode, *flags, "-o", os.fspath(paths[m]), os.fspath(SOURCES / "kernels.cu")]
            for m, flags in _MODES.items()]
    with ThreadPoolExecutor(max_workers=5) as pool:
        list(pool.map(run_tool, cmds))
    return paths


@pytest.mark.parametrize("mode", list(_MODES))
def test_nvcc_fatbin_matches_cuobjdump(mode: str, nvcc_fatbins: dict[str, Path], tmp_path: Path) -> None:
    fb = _check_against_cuobjdump(nvcc_fatbins[mode], tmp_path)
    assert [(e.kind_name, e.arch_name) for e in fb.entries] == _EXPECTED
    comp = {e.arch_name: e.compression for e in fb.entries}
    if mode == "none":
        assert set(comp.values()) == {"none"}
    elif mode == "speed":
        assert comp["compute_90"] == "lz4" and comp["sm_90"] == "none"
    elif mode in ("size", "compress_all"):
        assert comp["sm_90"] == comp["compute_90"] == "zstd"
    else:
        assert comp["compute_90"] == "zstd" and comp["sm_90"] == "none"
    for e in fb.entries:
        assert e.is_64bit and e.flags & C.FLAG_HOST_LINUX
        assert bool(e.flags & C.FLAG_COMPAT_BLOB) == (e.kind == C.KIND_ELF and e.arch >= 100)
        if e.kind == C.KIND_ELF:
            assert (e.major, e.minor) == (1, e.data()[8])


@pytest.fixture(scope="module")
def ptx90() -> bytes:
    return (PTX_DIR / "kernels.sm_90.ptx").read_bytes()


@pytest.mark.parametrize(
    "extra",
    [[], ["--ident=src/kernels.cu"], ["--cmdline=-O3 -v"], ["--ident=abcdefgh", "--cmdline=12345678"], ["-g"]],
)
def test_fatbinary_layout_equals_devbin(extra: list[str], cubins: dict[str, Path], ptx90: bytes,
                                        tmp_path: Path) -> None:
    fatbinary = require_tool("fatbinary")
    cub80, cub90 = cubins["sm_80_exec"], cubins["sm_90_rdc"]
    ptx = tmp_path / "k.ptx"
    ptx.write_bytes(ptx90)
    ident = next((a.split("=", 1)[1] for a in extra if a.startswith("--ident=")), "")
    cmdline = next((a.split("=", 1)[1] for a in extra if a.startswith("--cmdline=")), "")
    debug = "-g" in extra
    for mode in ("none", "default"):
        path = tmp_path / f"f_{mode}.fatbin"
        run_tool([fatbinary, f"--create={path}", "-64", f"--compress-mode={mode}", *extra,
                  f"--image3=kind=elf,sm=80,file={cub80}", f"--image3=kind=ptx,sm=90,file={ptx}",
                  f"--image3=kind=elf,sm=90,file={cub90}"])
        images = [
            FatbinImage(C.KIND_ELF, 80, cub80.read_bytes(), identifier=ident, debug=debug),
            FatbinImage(C.KIND_PTX, 90, ptx90, identifier=ident, options=cmdline, debug=debug),
            FatbinImage(C.KIND_ELF, 90, cub90.read_bytes(), identifier=ident, debug=debug),
        ]
        fb = _check_against_cuobjdump(path, tmp_path)
        if mode == "none":
            assert write_fatbin(images) == path.read_bytes()
        else:
            assert fb.entries[1].compression == "zstd"
            mine = parse_fatbin(write_fatbin(images)).entries
            assert [e.data() for e in fb.entries] == [e.data() for e in mine]
        assert fb.entries[1].options == cmdline and fb.entries[0].identifier == ident


def test_fatbinary_sm100_compat_blob(tmp_path: Path) -> None:
    nvcc = require_tool("nvcc")
    fatbinary = require_tool("fatbinary")
    images, args = [], []
    for arch, variant in ((100, ""), (100, "a"), (120, "")):
        cub = tmp_path / f"k{arch}{variant}.cubin"
        run_tool([nvcc, f"-arch=sm_{arch}{variant}", "-cubin", "-o", os.fspath(cub), os.fspath(SOURCES / "kernels.cu")])
        images.append(FatbinImage(C.KIND_ELF, arch, cub.read_bytes(), variant=variant))
        args.append(f"--image3=kind=elf,sm={arch}{variant},file={cub}")
    path = tmp_path / "f100.fatbin"
    run_tool([fatbinary, f"--create={path}", "-64", "--compress-mode=none", *args])
    assert write_fatbin(images) == path.read_bytes()
    fb = _check_against_cuobjdump(path, tmp_path)
    assert [e.arch_name for e in fb.entries] == ["sm_100", "sm_100a", "sm_120"]
    assert all(e.options_raw[:1] == b"\0" and e.flags & C.FLAG_COMPAT_BLOB for e in fb.entries)


def test_squeeze_matches_fatbinary_on_random_text(tmp_path: Path) -> None:
    fatbinary = require_tool("fatbinary")
    rng = random.Random(7)
    atoms = [b" ", b"\t", b"\n", b"\r", b"\r\n", b"//", b"/*", b"*/", b'"', b"\\", b"x", b"ld.f32", b";", b"/",
             b"\x0b", b"\x0c", b"*"]
    texts = [b".version 8.5\n.target sm_90\n" + b"".join(rng.choice(atoms) for _ in range(rng.randint(0, 60)))
             for _ in range(300)]
    args = []
    for i, t in enumerate(texts):
        p = tmp_path / f"r{i}.ptx"
        p.write_bytes(t)
        args.append(f"--image3=kind=ptx,sm=90,file={p}")
    path = tmp_path / "r.fatbin"
    run_tool([fatbinary, f"--create={path}", "-64", "--compress-mode=none", *args])
    got = parse_fatbin(path.read_bytes())
    assert [e.data() for e in got.entries] == [squeeze_ptx(t) for t in texts]
    assert write_fatbin([FatbinImage(C.KIND_PTX, 90, t) for t in texts]) == path.read_bytes()


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_devbin_fatbins_accepted_by_cuobjdump(compression: str, cubins: dict[str, Path], ptx90: bytes,
                                              tmp_path: Path) -> None:
    cub80, cub90 = cubins["sm_80_exec"].read_bytes(), cubins["sm_90_linked"].read_bytes()
    images = [
        FatbinImage(C.KIND_ELF, 80, cub80, compression=compression),
        FatbinImage(C.KIND_PTX, 90, ptx90, compression=compression, options="-O2 -lineinfo", identifier="my.cu"),
        FatbinImage(C.KIND_ELF, 90, cub90, compression=compression, identifier="other/linked.cu"),
    ]
    path = tmp_path / f"devbin_{compression}.fatbin"
    path.write_bytes(write_fatbin(images))
    cuobjdump = require_tool("cuobjdump")
    fb = _check_against_cuobjdump(path, tmp_path)
    assert [e.data() for e in fb.entries] == [cub80, squeeze_ptx(ptx90), cub90]
    assert sorted(p.name for p in (tmp_path / f"x-{path.name}").iterdir()) == [
        "devbin_" + compression + ".1.sm_80.cubin", "linked.sm_90.cubin", "my.sm_90.ptx"]
    text = run_tool([cuobjdump, os.fspath(path)]).stdout
    assert text.count("compressed") == (0 if compression == "none" else 3)
    assert "ptxasOptions = -O2 -lineinfo" in text
