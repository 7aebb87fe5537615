"""The ``ar`` writer's flavours against GNU ar and llvm-ar-19, plus round trips through devbin's reader.

Oracles (run at test time):

* bytes: ``ar rcsD`` and ``llvm-ar-19 rcsD --format=gnu`` (flavour ``gnu``),
  ``llvm-ar-19 rcsD --format=bsd`` / ``--format=darwin`` (``bsd``, ``darwin``) and
  ``SYM64_THRESHOLD=0 llvm-ar-19 rcsD`` (``gnu64``; ``darwin`` past the threshold gives
  ``__.SYMDEF_64``) over the same files, in the same order;
* listings of what only devbin writes (``bsd`` past the threshold): ``llvm-ar-19 t`` and
  ``llvm-nm-19 --print-armap``; binutils' ``ar t`` and ``nm -s`` for ``/SYM64/``.

Known, documented differences: for an object without global symbols llvm-ar writes
GNU tables with llvm's ``"\\0\\0\\0"`` string table, binutils (and devbin's GNU
flavours) do not; llvm-ar switches ``--format=bsd`` to GNU's ``/SYM64/`` past 4 GiB,
devbin to ``__.SYMDEF_64``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devbin.errors import UsageError
from devbin.formats.ar import ArchiveFile, safe_member_path
from devbin.formats.ar.writer import FLAVOURS, ArMember, Flavour, plan_archive, write_archive

from tests.conftest import require_tool
from tests.expect import assert_located, outcome
from tests.runners import run_tool

C_FILES = {
    "one.c": "int devbin_one(int x) { return x + 1; }\nint devbin_shared_var = 3;\n",
    "two_with_a_long_file_name.c": "static int hidden(void) { return 2; }\nint devbin_two(void) { return hidden(); }\n",
    "s4.c": "int abcd(void) { return 1; }\n",  # an odd-sized GNU symbol table
    "s5.c": "int abcde(void) { return 1; }\n",
    "nosyms.c": "static int q;\nstatic int *p(void) { return &q; }\n",  # an object without global symbols
}
PLAIN = {"odd.o": b"abc", "with space.o": b"x" * 7, "empty.o": b"", "fifteen_chars.o": bytes(range(33)),
         "a_very_long_member_name_here.o": bytes(101)}

CASES = {
    "mixed": ["one.o", "two_with_a_long_file_name.o", "odd.o", "with space.o", "empty.o", "fifteen_chars.o",
              "a_very_long_member_name_here.o"],
    "odd_symtab": ["s4.o", "odd.o"],
    "even_symtab": ["s5.o", "one.o"],
    "no_symbols": ["nosyms.o", "odd.o"],
    "no_objects": ["odd.o", "empty.o"],
    "duplicates": ["odd.o", "dup/odd.o", "one.o", "dup/odd.o"],
    "empty": [],
}

# (flavour, argv after the tool, environment, tool) per oracle.
ORACLES: dict[str, tuple[Flavour, list[str], dict[str, str], str]] = {
    "gnu-binutils": ("gnu", ["rcsD"], {}, "ar"),
    "gnu-llvm": ("gnu", ["rcsD", "--format=gnu"], {}, "llvm-ar-19"),
    "bsd": ("bsd", ["rcsD", "--format=bsd"], {}, "llvm-ar-19"),
    "darwin": ("darwin", ["rcsD", "--format=darwin"], {}, "llvm-ar-19"),
    "gnu64": ("gnu64", ["rcsD", "--format=gnu"], {"SYM64_THRESHOLD": "0"}, "llvm-ar-19"),
    "gnu-threshold": ("gnu", ["rcsD", "--format=gnu"], {"SYM64_THRESHOLD": "0"}, "llvm-ar-19"),
    "darwin64": ("darwin", ["rcsD", "--format=darwin"], {"SYM64_THRESHOLD": "0"}, "llvm-ar-19"),
}
# llvm-ar's "\0\0\0" string table for objects without symbols in GNU tables (binutils writes none).
KNOWN_DIFFERENCES = {("gnu-llvm", "no_symbols"), ("gnu64", "no_symbols"), ("gnu-threshold", "no_symbols")}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = require_tool("gcc")
    out = tmp_path_factory.mktemp("arw")
    for name, text in C_FILES.items():
        (out / name).write_text(text)
        run_tool([gcc, "-c", "-O2", "-o", name[:-2] + ".o", name], out)
    for name, data in PLAIN.items():
        (out / name).write_bytes(data)
    (out / "dup").mkdir()
    (out / "dup" / "odd.o").write_bytes(b"other odd")
    return out


def _members(folder: Path, paths: list[str]) -> list[ArMember]:
    return [ArMember(os.path.basename(p), (folder / p).read_bytes()) for p in paths]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("oracle", list(ORACLES))
def test_bytes_match_the_tools(inputs: Path, oracle: str, case: str) -> None:
    flavour, argv, env, tool = ORACLES[oracle]
    exe = require_tool(tool)
    out = inputs / f"{oracle}-{case}.a"
    out.unlink(missing_ok=True)
    run_tool([exe, *argv, out.name, *CASES[case]], inputs, env=env)
    mine = write_archive(_members(inputs, CASES[case]), flavour=flavour,
                         sym64_threshold=0 if env else 1 << 32)
    if (oracle, case) in KNOWN_DIFFERENCES:
        assert mine != out.read_bytes()
        return
    assert mine == out.read_bytes()


def _armap(path: Path) -> list[tuple[str, str]]:
    text = run_tool([require_tool("llvm-nm-19"), "--print-armap", str(path)], path.parent).stdout
    rows = []
    for line in text.split("\n\n", 1)[0].splitlines():
        if " in " in line:
            sym, member = line.rsplit(" in ", 1)
            rows.append((sym.strip(), member.strip()))
    return rows


def _expected_armap(members: list[ArMember]) -> list[tuple[str, str]]:
    from devbin.formats.ar.writer import elf_global_symbols
    return [(s, m.name) for m in members for s in elf_global_symbols(m.data)]


@pytest.mark.parametrize("flavour", ["gnu64", "bsd-wide", "darwin-wide"])
def test_wide_tables_read_by_the_tools(inputs: Path, flavour: str) -> None:
    members = _members(inputs, CASES["mixed"])
    name = flavour.split("-")[0]
    data = write_archive(members, flavour=name, sym64_threshold=0)  # type: ignore[arg-type]
    path = inputs / f"wide-{flavour}.a"
    path.write_bytes(data)
    a = ArchiveFile(data)
    assert a.members[0].name == {"gnu64": "/SYM64/", "bsd": "__.SYMDEF_64", "darwin": "__.SYMDEF_64"}[name]
    listed = run_tool([require_tool("llvm-ar-19"), "t", path.name], inputs).stdout
    assert listed.splitlines() == [m.name for m in members]
    assert _armap(path) == _expected_armap(members)
    if name == "gnu64":  # binutils reads /SYM64/ too
        assert run_tool([require_tool("ar"), "t", path.name], inputs).stdout.splitlines() == [m.name for m in members]
        nm = run_tool([require_tool("nm"), "-s", path.name], inputs).stdout
        for sym, member in _expected_armap(members):
            assert f"{sym} in {member}" in nm


def test_automatic_sym64_switch_and_plan() -> None:
    members = [ArMember("k.o", b"data", symbols=("f", "g"))]
    assert plan_archive(members).flavour == "gnu"
    assert plan_archive(members, sym64_threshold=0).flavour == "gnu64"
    assert plan_archive(members, flavour="bsd", sym64_threshold=0).flavour == "bsd64"
    plain = [ArMember("k.txt", b"data")]
    assert plan_archive(plain, sym64_threshold=0).flavour == "gnu"  # no table, nothing to widen
    wide = ArchiveFile(write_archive(members, sym64_threshold=0))
    assert wide.members[0].name == "/SYM64/"
    assert [(s.name, wide.member_at(s.header_offset).name) for s in wide.symbols] == [("f", "k.o"), ("g", "k.o")]


def test_darwin_duplicate_names_get_fake_dates() -> None:
    data = write_archive([ArMember("a.o", b"1"), ArMember("b.o", b"2"), ArMember("a.o", b"3")], flavour="darwin")
    assert [m.mtime for m in ArchiveFile(data).files] == ["1", "0", "2"]


def test_refusals() -> None:
    with pytest.raises(UsageError):
        write_archive([ArMember("k.o", b"")], flavour="coff")  # type: ignore[arg-type]
    for flavour in FLAVOURS:
        for bad in ("", "a/b.o", "new\nline", "nul\0", "__.SYMDEF", "__.SYMDEF_64 SORTED", "ARFILENAMES"):
            with pytest.raises(UsageError):
                write_archive([ArMember(bad, b"")], flavour=flavour)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        write_archive([ArMember("bad.o", b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x01")])


_NAME = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789._- "), min_size=1, max_size=40)
_SYMBOL = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz_0123456789$."), min_size=1, max_size=30)
_MEMBERS = st.lists(
    st.tuples(_NAME, st.binary(max_size=70), st.lists(_SYMBOL, max_size=4)).map(
        lambda t: ArMember(t[0], t[1], tuple(t[2]) if t[2] else None)).filter(
        # a member whose symbols the writer must read is refused when it is a corrupt ELF (test_refusals)
        lambda m: m.symbols is not None or not bytes(m.data).startswith(b"\x7fELF")),
    max_size=6)


@pytest.mark.parametrize("flavour", FLAVOURS)
@settings(max_examples=60, deadline=None)
@given(members=_MEMBERS, wide=st.booleans())
def test_round_trip(flavour: Flavour, members: list[ArMember], wide: bool) -> None:
    threshold = 0 if wide else 1 << 32
    data = write_archive(members, flavour=flavour, sym64_threshold=threshold)
    assert data == write_archive(members, flavour=flavour, sym64_threshold=threshold)
    a = ArchiveFile(data, where="rt.a")
    assert [m.name for m in a.files] == [m.name for m in members]
    for got, want in zip(a.files, members, strict=True):
        body = bytes(got.data)
        if flavour == "darwin":  # data is "\n"-padded to a multiple of 8 inside ar_size, as llvm-ar writes it
            assert body[:len(want.data)] == want.data and set(body[len(want.data):]) <= {0x0A}
            assert len(body) == len(want.data) + (-len(want.data) % 8)
        else:
            assert body == want.data
        assert got.mode == "644" and got.uid == "0" and got.gid == "0"
        if flavour in ("bsd", "darwin"):
            assert got.offset % 8 == 0
    expected = [(s, i) for i, m in enumerate(members) for s in (m.symbols or ())]
    got_syms = []
    for s in a.symbols:
        member = a.member_at(s.header_offset)
        assert member is not None
        got_syms.append((s.name, a.files.index(member)))
    assert got_syms == expected
    if expected:
        assert a.flavour == ("bsd" if flavour in ("bsd", "darwin") else "gnu")


def test_truncated_writer_output_raises_devbin_errors() -> None:
    """A cut inside any member or table of the writer's output is a located ar FormatError; a cut on a
    member boundary reads as the members before it, byte for byte."""
    members = [ArMember("k.o", b"abc", ("f",)), ArMember("a_long_member_name.o", b"x" * 9, ("g", "h"))]
    for flavour in FLAVOURS:
        data = write_archive(members, flavour=flavour)  # type: ignore[arg-type]
        whole = ArchiveFile(data)
        # A last member without its padding byte is a warning (diag), so both ends of a member read.
        ends = {8: -1} | {m.offset + m.size + pad: i for i, m in enumerate(whole.members) for pad in (0, m.size & 1)}
        for cut in range(8, len(data)):
            def read(buf: bytearray) -> list[bytes]:
                a = ArchiveFile(buf, diag=lambda e: None)
                _ = a.symbols
                return [bytes(m.data) for m in a.members]

            err = outcome(read, data[:cut])
            if cut in ends:
                assert err is None, (flavour, cut, err)
                assert read(bytearray(data[:cut])) == [bytes(m.data) for m in whole.members[:ends[cut] + 1]]
            else:
                assert err is not None, (flavour, cut)
                assert_located(err, fmts={"ar"}, size=cut)


# -------------------------------------------------------------------------- extraction safety


@pytest.mark.parametrize("name", ["", ".", "..", "../x.o", "a/../../x.o", "/etc/passwd", "sub/x.o", "c:x.o",
                                  "a\\b.o", "new\nline.o", "nul\0.o"])
def test_safe_member_path_refuses_escapes(tmp_path: Path, name: str) -> None:
    with pytest.raises(UsageError):
        safe_member_path(name, tmp_path)


def test_safe_member_path_accepts_plain_and_sub_folders(tmp_path: Path) -> None:
    assert safe_member_path("k.o", tmp_path) == tmp_path / "k.o"
    assert safe_member_path("with space.o", tmp_path) == tmp_path / "with space.o"
    assert safe_member_path("sub/k.o", tmp_path, allow_subfolders=True) == tmp_path / "sub" / "k.o"
    for bad in ("../k.o", "sub/../../k.o", "/abs/k.o"):
        with pytest.raises(UsageError):
            safe_member_path(bad, tmp_path, allow_subfolders=True)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "link").symlink_to(outside)
    with pytest.raises(UsageError):
        safe_member_path("link/k.o", tmp_path, allow_subfolders=True)


def test_crafted_member_names_are_refused_on_extraction(tmp_path: Path) -> None:
    """A GNU long name and a BSD ``#1/N`` name may hold anything; the reader keeps it, extraction refuses it."""
    def hdr(name: str, size: int) -> bytes:
        return (name.ljust(16) + "0".ljust(12) + "0".ljust(6) + "0".ljust(6) + "644".ljust(8)
                + str(size).ljust(10)).encode() + b"`\n"
    long_names = b"../../evil.o/\n"
    gnu = b"!<arch>\n" + hdr("//", len(long_names)) + long_names + hdr("/0", 2) + b"hi"
    bsd_name = b"/tmp/evil.o\0"
    bsd = b"!<arch>\n" + hdr(f"#1/{len(bsd_name)}", len(bsd_name) + 2) + bsd_name + b"hi"
    for data, name in ((gnu, "../../evil.o"), (bsd, "/tmp/evil.o")):
        (member,) = ArchiveFile(data).files
        assert member.name == name
        with pytest.raises(UsageError):
            safe_member_path(member.name, tmp_path)
