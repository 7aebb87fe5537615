"""The ``ar`` reader against archives made at test time by GNU ar and llvm-ar-19.

Flavours: GNU/SysV (``/`` index, ``//`` long names, odd sizes), ``/SYM64/``
(``SYM64_THRESHOLD=0 llvm-ar``), BSD (``llvm-ar --format=bsd``: ``#1/N`` names and
``__.SYMDEF``) and GNU thin (``ar rcT``).  Oracles: ``ar t``/``llvm-ar t`` for member
lists, the input files for sizes and bytes, ``llvm-nm --print-armap`` for the index.
Truncated and mutated archives must raise nothing but :class:`DeviceBinaryError`.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from devbin.errors import DeviceBinaryError, FormatError, NotThisFormat, TruncatedError, UsageError
from devbin.formats.ar import ArchiveFile, is_archive
from devbin.formats.ar import constants as C

from tests.conftest import require_tool
from tests.expect import assert_located, outcome
from tests.runners import run_tool

# name -> contents: odd and even sizes, a name of exactly 15 and one of 16+ characters,
# a name with a space, an empty member.
MEMBERS: dict[str, bytes] = {
    "odd.o": b"abc",
    "even.o": b"abcd",
    "fifteen_chars.o": bytes(range(33)),
    "a_very_long_member_name_here.o": bytes(101),
    "with space.o": b"x" * 7,
    "empty.o": b"",
}

HOST_C = {
    "one.c": "int devbin_one(int x) { return x + 1; }\nint devbin_shared_var = 3;\n",
    "two_with_a_long_file_name.c": "static int hidden(void) { return 2; }\nint devbin_two(void) { return hidden(); }\n",
}


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Archives of every flavour over the same members (plus two gcc objects for the index)."""
    ar = require_tool("ar")
    llvm_ar = require_tool("llvm-ar-19")
    gcc = require_tool("gcc")
    out = tmp_path_factory.mktemp("ar")
    for name, data in MEMBERS.items():
        (out / name).write_bytes(data)
    objs = []
    for name, text in HOST_C.items():
        (out / name).write_text(text)
        obj = name[:-2] + ".o"
        run_tool([gcc, "-c", "-O2", "-o", obj, name], out)
        objs.append(obj)
    names = list(MEMBERS)
    (out / "sub").mkdir()
    (out / "sub" / "nested.o").write_bytes(b"nested!")
    built = {
        "gnu": "gnu.a", "gnu_index": "gnu_index.a", "sym64": "sym64.a", "bsd": "bsd.a",
        "bsd_index": "bsd_index.a", "thin": "thin.a",
    }
    run_tool([ar, "rc", "gnu.a", *names], out)
    run_tool([ar, "rcs", "gnu_index.a", *objs, "odd.o"], out)
    run_tool([llvm_ar, "rcs", "sym64.a", *objs], out, env={"SYM64_THRESHOLD": "0"})
    run_tool([llvm_ar, "rc", "--format=bsd", "bsd.a", *names], out)
    run_tool([llvm_ar, "rcs", "--format=bsd", "bsd_index.a", *objs, "odd.o"], out)
    run_tool([ar, "rcT", "thin.a", "odd.o", "a_very_long_member_name_here.o", "sub/nested.o"], out)
    return {k: out / v for k, v in built.items()}


def _listing(tool: str, path: Path) -> list[str]:
    # Relative: for a thin archive GNU ar t prints each member joined to the archive path as given.
    return run_tool([tool, "t", path.name], path.parent).stdout.splitlines()


@pytest.mark.parametrize("flavour", ["gnu", "gnu_index", "sym64", "bsd", "bsd_index", "thin"])
def test_member_list_matches_ar_t(archives: dict[str, Path], flavour: str) -> None:
    # GNU ar does not know the BSD index and lists __.SYMDEF as a file; llvm-ar does not.
    tool = require_tool("llvm-ar-19") if flavour.startswith("bsd") else require_tool("ar")
    path = archives[flavour]
    a = ArchiveFile(path.read_bytes(), where=path.name)
    assert [m.name for m in a.files] == _listing(tool, path)
    assert a.flavour == {"gnu_index": "gnu", "sym64": "gnu", "bsd_index": "bsd"}.get(flavour, flavour)
    assert is_archive(path.read_bytes())


@pytest.mark.parametrize("flavour", ["gnu", "bsd"])
def test_member_bytes_and_headers(archives: dict[str, Path], flavour: str) -> None:
    path = archives[flavour]
    data = path.read_bytes()
    a = ArchiveFile(data, where=path.name)
    assert len(a.files) == len(MEMBERS)
    for m in a.files:
        assert bytes(m.data) == MEMBERS[m.name], m.name
        assert m.size == len(MEMBERS[m.name])
        assert data[m.offset:m.offset + m.size] == MEMBERS[m.name]
        assert m.offset % 2 == 0 or flavour == "bsd"  # BSD data follows the name, at any offset
        assert m.header_offset % 2 == 0
        assert m.mode_value == 0o644 and m.mtime_value == 0  # deterministic archives
        assert not m.thin and not m.is_symbol_table
    long = next(m for m in a.members if m.name == "a_very_long_member_name_here.o")
    fifteen = next(m for m in a.members if m.name == "fifteen_chars.o")
    if flavour == "gnu":
        assert long.raw_name == "/0" and fifteen.raw_name == "fifteen_chars.o/"  # GNU: 16+ characters go to //
    else:
        # llvm-ar stores every BSD name as #1/N, NUL-padded so that the data lands 8-aligned.
        assert long.raw_name.startswith("#1/") and int(long.raw_name[3:]) >= len(long.name)
        assert fifteen.raw_name.startswith("#1/")
    if flavour == "gnu":
        assert a.members[0].name == "//" and a.members[0].kind == C.KIND_STRTAB
        assert next(m for m in a.members if m.name == "odd.o").raw_name == "odd.o/"


def _armap(path: Path) -> list[tuple[str, str]]:
    nm = require_tool("llvm-nm-19")
    out = run_tool([nm, "--print-armap", str(path)], path.parent).stdout
    pairs = []
    for line in out.split("\n\n")[0].splitlines()[1:]:
        sym, _, member = line.rpartition(" in ")
        pairs.append((sym, member))
    return pairs


@pytest.mark.parametrize("flavour,table", [("gnu_index", "/"), ("sym64", "/SYM64/"), ("bsd_index", "__.SYMDEF")])
def test_symbol_index_matches_llvm_nm(archives: dict[str, Path], flavour: str, table: str) -> None:
    path = archives[flavour]
    a = ArchiveFile(path.read_bytes(), where=path.name)
    idx = a.symbol_table
    assert idx is not None and idx.name == table and idx.is_symbol_table and idx is a.members[0]
    ours = []
    for s in a.symbols:
        m = a.member_at(s.header_offset)
        assert m is not None, s
        ours.append((s.name, m.name))
    assert ours == _armap(path)
    assert {"devbin_one", "devbin_shared_var", "devbin_two"} <= {n for n, _ in ours}


def test_thin_archive(archives: dict[str, Path]) -> None:
    path = archives["thin"]
    a = ArchiveFile(path.read_bytes(), where="thin.a")
    assert a.thin and all(m.thin for m in a.files)
    assert [m.name for m in a.files] == ["odd.o", "a_very_long_member_name_here.o", "sub/nested.o"]
    for m in a.files:
        target = a.thin_member_path(m, path)
        assert m.size == target.stat().st_size
        assert bytes(m.data) == b""
    # Nothing of the members is stored: the archive is magic + // + three headers.
    names = next(m for m in a.members if m.kind == C.KIND_STRTAB)
    assert path.stat().st_size == 8 + 60 + names.size + names.size % 2 + 3 * 60


def test_thin_member_outside_the_folder_is_refused(tmp_path: Path) -> None:
    ar = require_tool("ar")
    (tmp_path / "outside.o").write_bytes(b"out")
    (tmp_path / "lib").mkdir()
    run_tool([ar, "rcT", "lib/t.a", "outside.o"], tmp_path)
    # GNU ar stores the path relative to the archive's folder.
    a = ArchiveFile((tmp_path / "lib" / "t.a").read_bytes(), where="t.a")
    (m,) = a.files
    assert m.name == "../outside.o"
    with pytest.raises(UsageError, match="outside the archive's folder"):
        a.thin_member_path(m, tmp_path / "lib" / "t.a")
    assert a.thin_member_path(m, tmp_path / "lib" / "t.a", allow_outside=True).resolve() == tmp_path / "outside.o"


# --------------------------------------------------------------------------- hand-made and broken archives


def _hdr(name: str, size: int, *, fmag: bytes = C.FMAG, size_field: str | None = None) -> bytes:
    fields = [(name, 16), ("0", 12), ("0", 6), ("0", 6), ("644", 8), (size_field or str(size), 10)]
    raw = b"".join(v.encode().ljust(w, b" ") for v, w in fields) + fmag
    assert len(raw) == 60
    return raw


def _member(name: str, data: bytes) -> bytes:
    return _hdr(name, len(data)) + data + (b"\n" if len(data) % 2 else b"")


def test_error_messages_name_the_member() -> None:
    good = C.MAGIC + _member("k.o/", b"abc")
    assert [m.name for m in ArchiveFile(good).files] == ["k.o"]
    with pytest.raises(FormatError, match=r"lib\.a\(k\.o/\).*`") as e:
        ArchiveFile(C.MAGIC + _hdr("k.o/", 3, fmag=b"xx") + b"abc\n", where="lib.a")
    assert e.value.offset == 8 + 58
    with pytest.raises(FormatError, match="not a decimal"):
        ArchiveFile(C.MAGIC + _hdr("k.o/", 3, size_field="0x3") + b"abc\n", where="lib.a")
    with pytest.raises(TruncatedError, match=r"lib\.a\(k\.o\).*past the end"):
        ArchiveFile(C.MAGIC + _hdr("k.o/", 300) + b"abc\n", where="lib.a")
    with pytest.raises(TruncatedError, match="header needs 60"):
        ArchiveFile(good + b"junk", where="lib.a")
    with pytest.raises(FormatError, match="no '//' member"):
        ArchiveFile(C.MAGIC + _member("/0", b"ab"), where="lib.a")
    with pytest.raises(FormatError, match="outside the '//' member"):
        ArchiveFile(C.MAGIC + _member("//", b"long_name.o/\n") + _member("/99", b"ab"), where="lib.a")
    with pytest.raises(FormatError, match="not terminated"):
        ArchiveFile(C.MAGIC + _member("//", b"long_name.o") + _member("/0", b"ab"), where="lib.a")
    with pytest.raises(FormatError, match="BSD long name of 9 bytes"):
        ArchiveFile(C.MAGIC + _member("#1/9", b"abc"), where="lib.a")
    with pytest.raises(NotThisFormat):
        ArchiveFile(b"!<arch>")


def test_names_and_padding_rules() -> None:
    data = (C.MAGIC + _member("//", b"long name with space.o/\nsecond.o/\n") + _member("/0", b"a")
            + _member("/24", b"bc") + _member("#1/4", b"x.o\0data") + _member("plain", b"")
            + _member("/<ECSYMBOLS>/", b"s"))
    a = ArchiveFile(data, where="lib.a")
    assert [(m.name, bytes(m.data)) for m in a.files] == [
        ("long name with space.o", b"a"), ("second.o", b"bc"), ("x.o", b"data"), ("plain", b"")]
    assert [m.kind for m in a.members if m.is_special] == [C.KIND_STRTAB, C.KIND_SPECIAL]
    # A missing final pad after an odd member and a pad byte other than "\n" are non-critical.
    seen: list[DeviceBinaryError] = []
    short = C.MAGIC + _hdr("k.o/", 3) + b"abc"
    assert [m.name for m in ArchiveFile(short, diag=seen.append).files] == ["k.o"]
    assert "no padding byte" in str(seen[-1])
    with pytest.raises(FormatError, match="no padding byte"):
        ArchiveFile(short)
    odd_pad = C.MAGIC + _hdr("k.o/", 3) + b"abcX" + _member("j.o/", b"xy")
    assert [m.name for m in ArchiveFile(odd_pad, diag=seen.append).files] == ["k.o", "j.o"]
    assert "neither '\\n' nor NUL" in str(seen[-1])
    # ocloc's fat archives pad with NUL (its ArEncoder zero-fills): read without a word
    nul_pad = C.MAGIC + _hdr("64.12.60.7/", 3) + b"abc\0" + _member("pad_0/", b"xy")
    quiet: list[DeviceBinaryError] = []
    a = ArchiveFile(nul_pad, diag=quiet.append)
    assert [(m.name, bytes(m.data)) for m in a.files] == [("64.12.60.7", b"abc"), ("pad_0", b"xy")]
    assert quiet == []


def test_corrupt_symbol_tables_raise_format_errors() -> None:
    import struct

    bad_count = C.MAGIC + _member("/", struct.pack(">I", 1000) + b"\0" * 8)
    with pytest.raises(FormatError):
        _ = ArchiveFile(bad_count).symbols
    no_names = C.MAGIC + _member("/", struct.pack(">II", 1, 8))
    with pytest.raises(FormatError):
        _ = ArchiveFile(no_names).symbols
    bsd = C.MAGIC + _member("#1/12", b"__.SYMDEF\0\0\0" + struct.pack("<I", 7) + b"\0" * 8)
    with pytest.raises(FormatError, match="multiple of 8"):
        _ = ArchiveFile(bsd).symbols


def _exercise(data: bytes, multiline: list[str] | None = None) -> DeviceBinaryError | None:
    """Read everything; a refusal must be a located ar FormatError, an archive read must hold its members."""

    def read(buf: bytearray) -> None:
        a = ArchiveFile(buf, where="lib.a")
        for m in a.members:
            got = bytes(m.data)
            assert m.header_offset + 60 <= m.offset <= len(buf), (m.name, m.offset)
            assert len(got) == (0 if m.thin else m.size) and m.offset + len(got) <= len(buf), (m.name, m.size)
            assert got == bytes(buf[m.offset:m.offset + len(got)]), m.name
            m.mode_value, m.mtime_value  # noqa: B018
        _ = a.symbols  # read as stored: a symbol may name a member the cut removed

    err = outcome(read, data)
    if err is not None:
        assert_located(err, fmts={"ar"}, size=len(data), top="lib.a", multiline=multiline)
        assert err.where.startswith("lib.a"), err
    return err


@pytest.mark.parametrize("flavour", ["gnu", "gnu_index", "sym64", "bsd", "bsd_index", "thin"])
def test_truncation_gives_only_device_binary_errors(archives: dict[str, Path], flavour: str) -> None:
    """Every cut short of the whole archive but the 8-byte magic alone is refused with a located error
    (a cut on a member boundary is a shorter, valid archive, and reads)."""
    data = archives[flavour].read_bytes()
    boundaries = {0, 8} | {m.offset + m.size + (m.size & 1) for m in ArchiveFile(data).members if not m.thin}
    boundaries |= {m.offset + m.size for m in ArchiveFile(data).members if not m.thin}
    boundaries |= {m.offset for m in ArchiveFile(data).members if m.thin}
    for cut in range(len(data)):
        err = _exercise(data[:cut])
        if cut not in boundaries:
            assert err is not None, f"a cut at {cut:#x} read as an archive"


@pytest.mark.parametrize("flavour", ["gnu", "gnu_index", "sym64", "bsd", "bsd_index", "thin"])
def test_mutation_gives_only_device_binary_errors(archives: dict[str, Path], flavour: str) -> None:
    _mutate_headers(archives, flavour, [])


@pytest.mark.parametrize("flavour", ["gnu", "bsd"])
def test_mutation_errors_are_one_line(archives: dict[str, Path], flavour: str) -> None:
    multiline: list[str] = []
    _mutate_headers(archives, flavour, multiline)
    assert not multiline, multiline[:3]


def _mutate_headers(archives: dict[str, Path], flavour: str, multiline: list[str]) -> None:
    data = archives[flavour].read_bytes()
    rng = random.Random(flavour)
    # Header bytes (names, sizes, terminators), BSD names and symbol tables are where mutations matter.
    hot = [0, 7]
    for m in ArchiveFile(data).members:
        hot += range(m.header_offset, m.header_offset + 60)
        end = m.header_offset + 60 + (4096 if m.is_special else 48)
        hot += range(m.header_offset + 60, min(m.offset + m.size, end, len(data)))
    for _ in range(3000):
        buf = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            i = rng.choice(hot)
            buf[i] = rng.choice((0, 0x20, 0x2F, 0x30, 0x39, 0x0A, 0x60, 0xFF, rng.randrange(256)))
        _exercise(bytes(buf), multiline)


def test_members_of_one_name_are_numbered_as_addresses_name_them() -> None:
    """``numbered``: the N-th member of a name is ``;N`` (from 1), each name counted on its own, every file
    member counted (the symbol table is no file); scan, prune and select number members through it."""
    from devbin.formats.ar import numbered
    from devbin.formats.ar.writer import ArMember, write_archive

    data = write_archive([ArMember("k.o", b"a"), ArMember("j.o", b"b"), ArMember("k.o", b"c"), ArMember("k.o", b"d")],
                         symtab=True)
    got = [(m.name, n, bytes(m.data)) for m, n in numbered(ArchiveFile(data).files)]
    assert got == [("k.o", 1, b"a"), ("j.o", 1, b"b"), ("k.o", 2, b"c"), ("k.o", 3, b"d")]
