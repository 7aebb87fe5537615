"""The Mach-O universal ("fat") reader against clang-19 objects combined by llvm-lipo-19.

Oracles: ``llvm-lipo-19 -archs`` (arch names in table order), ``llvm-objdump-19 --macho
--universal-headers`` (offset, size and align of each slice; llvm-lipo 19 has no
``-detailed_info``) and ``llvm-lipo-19 -thin`` (a slice's bytes).  Both ``FAT_MAGIC``
and ``-fat64``'s ``FAT_MAGIC_64`` are covered.  Crafted, truncated and mutated inputs
must raise nothing but :class:`DeviceBinaryError`; a Java class file is NotThisFormat.
"""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devbin.errors import DeviceBinaryError, FormatError, NotThisFormat, TruncatedError
from devbin.formats.macho import FatFile, is_fat
from devbin.formats.macho.fat import FAT_MAGIC, FAT_MAGIC_64, arch_name

from tests.conftest import require_tool
from tests.expect import assert_located, outcome
from tests.runners import run_tool

SOURCE = "int devbin_fat(int x) { return x * 2; }\nint devbin_fat_data = 7;\n"
TARGETS = {"x86_64": "x86_64-apple-macos11", "arm64": "arm64-apple-macos11", "arm64e": "arm64e-apple-macos11",
           "i386": "i386-apple-macos10.12", "x86_64h": "x86_64h-apple-macos11"}


@pytest.fixture(scope="module")
def fat_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    clang = require_tool("clang-19")
    lipo = require_tool("llvm-lipo-19")
    out = tmp_path_factory.mktemp("fat")
    (out / "f.c").write_text(SOURCE)
    objs = []
    for arch, triple in TARGETS.items():
        run_tool([clang, "-target", triple, "-c", "f.c", "-o", f"{arch}.o"], out)
        objs.append(f"{arch}.o")
    run_tool([lipo, "-create", "x86_64.o", "arm64.o", "-output", "fat.o"], out)
    run_tool([lipo, "-create", "-fat64", "x86_64.o", "arm64.o", "-output", "fat64.o"], out)
    run_tool([lipo, "-create", *objs, "-output", "fat5.o"], out)
    return {"fat": out / "fat.o", "fat64": out / "fat64.o", "fat5": out / "fat5.o"}


def _universal_headers(path: Path) -> list[tuple[str, int, int, int]]:
    text = run_tool([require_tool("llvm-objdump-19"), "--macho", "--universal-headers", str(path)], path.parent).stdout
    rows = re.findall(r"architecture (\S+)\n(?:.*\n)*?\s+offset (\d+)\n\s+size (\d+)\n\s+align 2\^(\d+)", text)
    return [(a, int(o), int(s), int(al)) for a, o, s, al in rows]


@pytest.mark.parametrize("name", ["fat", "fat64", "fat5"])
def test_slices_match_lipo_and_objdump(fat_files: dict[str, Path], name: str) -> None:
    path = fat_files[name]
    data = path.read_bytes()
    assert is_fat(data)
    f = FatFile(data, where=path.name)
    assert f.is64 == (name == "fat64")
    archs = run_tool([require_tool("llvm-lipo-19"), "-archs", str(path)], path.parent).stdout.split()
    assert list(f.archs) == archs
    assert [(s.offset, s.size, s.align) for s in f.slices] == [(o, sz, al) for _, o, sz, al in
                                                                _universal_headers(path)]
    for s in f.slices:
        thin = path.parent / f"{name}-{s.arch}.thin"
        run_tool([require_tool("llvm-lipo-19"), str(path), "-thin", s.arch, "-output", str(thin)], path.parent)
        assert bytes(s.data) == thin.read_bytes() == (path.parent / f"{s.arch}.o").read_bytes()
        assert f.slice_for(s.arch) is s


def test_arch_names() -> None:
    assert arch_name(0x01000007, 3) == "x86_64"
    assert arch_name(0x01000007, 8) == "x86_64h"
    assert arch_name(0x0100000C, 0) == "arm64"
    assert arch_name(0x0100000C, 0x80000002) == "arm64e"  # capability bits are masked
    assert arch_name(7, 3) == "i386"
    assert arch_name(12, 9) == "armv7"
    assert arch_name(99, 1) == "unknown(99,1)"


def _fat(entries: list[tuple[int, int, int, int, int]], *, wide: bool = False, size: int = 0x2000) -> bytes:
    head = struct.pack(">II", FAT_MAGIC_64 if wide else FAT_MAGIC, len(entries))
    for cpu, sub, off, sz, al in entries:
        if wide:
            head += struct.pack(">iiQQII", cpu, sub, off, sz, al, 0)
        else:
            head += struct.pack(">iiIII", cpu, sub, off, sz, al)
    return head.ljust(size, b"\0")


def test_crafted_inputs() -> None:
    ok = _fat([(0x01000007, 3, 0x1000, 0x10, 12), (0x0100000C, 0, 0x1010, 0x10, 4)])
    assert FatFile(ok).archs == ("x86_64", "arm64")
    unknown = FatFile(_fat([(1234, 5, 0x1000, 4, 0)]))
    assert (unknown.slices[0].cputype, unknown.slices[0].cpusubtype, unknown.archs) == (1234, 5, ("unknown(1234,5)",))
    bad = {
        "overlap": _fat([(0x01000007, 3, 0x1000, 0x20, 4), (0x0100000C, 0, 0x1010, 0x10, 4)]),
        "overlap past an empty slice": _fat([(0x01000007, 3, 0x1000, 0x100, 4), (7, 3, 0x1010, 0, 4),
                                             (0x0100000C, 0, 0x1020, 0x10, 4)]),
        "duplicate": _fat([(0x01000007, 3, 0x1000, 0x10, 4), (0x01000007, 3, 0x1010, 0x10, 4)]),
        "misaligned": _fat([(0x01000007, 3, 0x1001, 0x10, 4)]),
        "inside header": _fat([(0x01000007, 3, 0x10, 0x10, 0)]),
        "align too large": _fat([(0x01000007, 3, 0x10000, 0x10, 16)], size=0x10010),
        "past the end": _fat([(0x01000007, 3, 0x1000, 0x2000, 12)]),
        "wide past the end": _fat([(0x01000007, 3, 0x1000, 1 << 40, 12)], wide=True),
    }
    for what, data in bad.items():
        with pytest.raises(FormatError):
            FatFile(data)
        assert what
    with pytest.raises(TruncatedError):
        FatFile(_fat([(0x01000007, 3, 0x1000, 0x10, 4)] * 3, size=40))  # table cut short
    with pytest.raises(TruncatedError):
        FatFile(b"\xca\xfe\xba\xbe\0\0")


def test_java_class_files_are_not_fat() -> None:
    java = b"\xca\xfe\xba\xbe\x00\x00\x00\x34" + bytes(64)  # minor 0, major 52 (Java 8)
    assert not is_fat(java)
    with pytest.raises(NotThisFormat):
        FatFile(java)
    assert not is_fat(b"\xca\xfe\xba\xbe\x00\x03\x00\x2d")  # minor 3, major 45
    with pytest.raises(NotThisFormat):
        FatFile(b"\x7fELF" + bytes(60))
    assert not is_fat(b"\xca\xfe")


def _exercise(data: bytes) -> DeviceBinaryError | None:
    """Read every slice: a slice read lies inside the file; a refusal is a located macho-fat FormatError."""

    def read(buf: bytearray) -> None:
        f = FatFile(buf)
        for s in f.slices:
            got = bytes(s.data)
            assert len(got) == s.size and s.offset + s.size <= len(buf)
            assert got == bytes(buf[s.offset:s.offset + s.size])
            _ = s.arch

    err = outcome(read, data)
    if err is not None:
        assert_located(err, fmts={"macho-fat"}, size=len(data))
    return err


@pytest.mark.parametrize("name", ["fat", "fat64"])
def test_truncation_and_mutation_give_only_devbin_errors(fat_files: dict[str, Path], name: str) -> None:
    data = fat_files[name].read_bytes()
    head = len(data) if len(data) < 256 else 256
    for cut in range(head):
        assert _exercise(data[:cut]) is not None, cut  # the header and slice table cut: always refused
    assert isinstance(_exercise(data[: len(data) // 2]), TruncatedError)
    rng = random.Random(4)
    for _ in range(400):
        buf = bytearray(data[:0x80])
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] = rng.choice((0, 0xFF, rng.randrange(256)))
        _exercise(bytes(buf) + data[0x80:])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.booleans())
def test_any_bytes_behind_the_magic(tail: bytes, wide: bool) -> None:
    _exercise(struct.pack(">I", FAT_MAGIC_64 if wide else FAT_MAGIC) + tail)
