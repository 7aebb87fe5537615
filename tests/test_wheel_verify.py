"""Wheels verified before devbin rewrites one, streamed while it does, and damaged wheels refused
(issue 24, defects 5, 8 and 9).

The wheels are built here with zipfile around a real host object carrying ``.nv_fatbin`` and
``.hip_fatbin`` (the CLI mutation harness's ``host`` seed, from devbin's ELF writer), their RECORD
written as ``wheel pack`` writes it; each test then tampers with one thing.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from devbin.errors import FormatError, UsageError
from devbin.formats import wheel as W
from devbin.formats import zipmember
from devbin.packaging.prune_packages import prune_wheel, record_hash

from tests.runners import TOOL_TIMEOUT, run_devbin

SRC = Path(__file__).resolve().parent.parent / "src"
META = "pkg-1.0.dist-info"
LIB = "pkg/lib/libk.so"


@pytest.fixture(scope="module")
def host() -> bytes:
    from fuzz.cli_seeds import build_seeds
    return next(s.data for s in build_seeds() if s.fmt == "host")


def _members(host: bytes) -> dict[str, bytes]:
    return {LIB: host, "pkg/__init__.py": b"x = 1\n" * 500, "pkg/data.bin": bytes(range(256)) * 64,
            f"{META}/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n"}


def _record(members: dict[str, bytes]) -> bytes:
    return ("".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in members.items() if not n.endswith("/"))
            + f"{META}/RECORD,,\n").encode()


def _wheel(path: Path, members: list[tuple[str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for i, (name, data) in enumerate(members):
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))
            info.compress_type = zipfile.ZIP_DEFLATED if i % 2 == 0 else zipfile.ZIP_STORED
            z.writestr(info, data)
    return path


def _good(path: Path, host: bytes, **extra: bytes) -> Path:
    members = {**_members(host), **extra}
    return _wheel(path, [*members.items(), (f"{META}/RECORD", _record(members))])


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(("name", "why"), [
    ("../../evil.py", "a '..' component"), ("/abs/evil.py", "an absolute path"), ("lib/../../x.so", "a '..' component"),
    ("C:/evil.py", "a drive letter"), ("pkg\\..\\evil.py", "a backslash in the name"), ("", "an empty name"),
    ("pkg/ok..py", ""), ("pkg/./x.py", ""), ("pkg/", ""),
])
def test_unsafe_name(name: str, why: str) -> None:
    assert W.unsafe_name(name).startswith(why) and bool(W.unsafe_name(name)) == bool(why)


@pytest.mark.parametrize("evil", ["../../evil.py", "/abs/evil.py", "lib/../../x.so"])
def test_unsafe_member_is_refused_even_with_force(host: bytes, tmp_path: Path, evil: str) -> None:
    """Defect 5: main kept the member (pip then refuses the output) and signed it with a new RECORD."""
    members = {**_members(host), evil: b"import os\n"}
    src = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl", [*members.items(), (f"{META}/RECORD", _record(members))])
    with pytest.raises(UsageError) as e:
        prune_wheel(src, tmp_path / "out.whl", drop="gfx90a", force=True)
    assert str(e.value) == (f"{src}!{evil}: unsafe member name: {W.unsafe_name(evil)}; refusing to rewrite the "
                            "wheel")
    for extra in (["-o", "out.whl"], ["-o", "out.whl", "--force"], ["--dry-run"]):
        r = run_devbin("prune", src.name, "--drop", "gfx90a", *extra, cwd=tmp_path)
        assert (r.returncode, r.stdout) == (1, "")
        assert r.stderr == f"devbin: error: {src.name}!{evil}: unsafe member name: {W.unsafe_name(evil)}; " \
                           "refusing to rewrite the wheel\n"
    assert not (tmp_path / "out.whl").exists()


def test_duplicate_member_is_refused(host: bytes, tmp_path: Path) -> None:
    """Defect 5: a duplicate non-library member gave two members and two RECORD rows for one path, and
    Python's two-line UserWarning on stderr."""
    members = _members(host)
    with pytest.warns(UserWarning, match="Duplicate name"):  # zipfile's, as it writes the test's wheel
        src = _wheel(tmp_path / "pkg.whl", [*members.items(), ("pkg/__init__.py", b"y = 2\n"),
                                            (f"{META}/RECORD", _record(members))])
    before = src.read_bytes()
    r = run_devbin("prune", "pkg.whl", "--drop", "gfx90a", "-o", "out.whl", "--force", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == ("devbin: error: pkg.whl!pkg/__init__.py: duplicate member name: 2 members of this path; "
                        "refusing to rewrite the wheel\n")
    assert not (tmp_path / "out.whl").exists() and src.read_bytes() == before


def test_one_record_at_the_top(host: bytes, tmp_path: Path) -> None:
    members = _members(host)
    src = _wheel(tmp_path / "pkg.whl", list(members.items()))
    with pytest.raises(UsageError, match=r"pkg\.whl: a wheel holds one top-level \*\.dist-info/RECORD; this one "
                                         r"holds 0; refusing"):
        prune_wheel(src, None, drop="gfx90a", force=True)


# --------------------------------------------------------------------------- RECORD


def _tampered(host: bytes, tmp_path: Path, edit: str) -> tuple[Path, str]:
    """A wheel whose RECORD is wrong in one way, and the check it must fail."""
    members = _members(host)
    rows = _record(members).decode()
    good = f"{LIB},{record_hash(host)},{len(host)}\n"
    if edit == "hash":
        wrong = record_hash(host + b"x")
        rows = rows.replace(good, f"{LIB},{wrong},{len(host)}\n")
        check = f"{LIB}: RECORD says '{wrong}' but the member hashes to {record_hash(host)}"
    elif edit == "size":
        rows = rows.replace(good, f"{LIB},{record_hash(host)},{len(host) + 1}\n")
        check = f"{LIB}: RECORD says size '{len(host) + 1}' but the member holds {len(host)} bytes"
    elif edit == "missing row":
        rows = rows.replace(good, "")
        check = f"{LIB}: no row in RECORD"
    elif edit == "extra row":
        rows += f"pkg/gone.py,{record_hash(b'')},0\n"
        check = "pkg/gone.py: RECORD has a row for it but the wheel has no such member"
    elif edit == "md5":
        rows = rows.replace(good, f"{LIB},md5=AAAA,{len(host)}\n")
        check = (f"{LIB}: RECORD's hash 'md5=AAAA': md5 is not permitted (the specification asks for sha256 or "
                 "stronger)")
    else:  # not UTF-8
        rows += "pkg/caf\xe9.py,,\n"
        check = f"{META}/RECORD: RECORD is not UTF-8 text (byte 0xe9 at {rows.index(chr(0xe9))})"
    data = rows.encode("latin-1")
    return _wheel(tmp_path / "pkg.whl", [*members.items(), (f"{META}/RECORD", data)]), check


@pytest.mark.parametrize("edit", ["hash", "size", "missing row", "extra row", "md5", "not utf-8"])
def test_record_that_does_not_match_is_refused_unless_forced(host: bytes, tmp_path: Path, edit: str) -> None:
    """Defect 5: a RECORD whose library hash is wrong, or whose row is missing, was silently regenerated:
    a file that failed its integrity check left devbin with a valid signature."""
    _, check = _tampered(host, tmp_path, edit)
    r = run_devbin("prune", "pkg.whl", "--drop", "gfx90a", "-o", "out.whl", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "") and not (tmp_path / "out.whl").exists()
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"devbin: error: pkg.whl!{check}")
    assert lines[0].endswith("; refusing to rewrite the wheel (--force to go on)")
    r = run_devbin("prune", "pkg.whl", "--drop", "gfx90a", "-o", "out.whl", "--force", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout)["notes"]
    assert (f"pkg.whl!{check}; --force: the new RECORD describes the members as they are" in notes)
    assert f"note: pkg.whl!{check}; --force" not in r.stderr  # --json: the notes are in the document
    with zipfile.ZipFile(tmp_path / "out.whl") as z:
        out = {i.filename: z.read(i) for i in z.infolist()}
    rows = list(csv.reader(io.StringIO(out[f"{META}/RECORD"].decode())))
    assert rows[-1] == [f"{META}/RECORD", "", ""]
    assert {n: (h, int(s)) for n, h, s in rows[:-1]} == {n: (record_hash(d), len(d)) for n, d in out.items()
                                                         if not n.endswith("RECORD")}
    assert W.verify(zipfile.ZipFile(tmp_path / "out.whl")).problems == []


def test_verify_reads_members_in_pieces(host: bytes, tmp_path: Path) -> None:
    src = _good(tmp_path / "pkg.whl", host)
    with zipfile.ZipFile(src) as z:
        v = W.verify(z, "pkg.whl")
    assert v.problems == [] and v.record == f"{META}/RECORD"
    assert v.digests == {n: (record_hash(d), len(d)) for n, d in _members(host).items()}


# --------------------------------------------------------------------------- streaming


def test_output_is_the_same_written_kept_or_counted(host: bytes, tmp_path: Path) -> None:
    """The new wheel written to -o, kept in memory (keep_data) and counted for --dry-run: the same bytes,
    the same size, run to run."""
    src = _good(tmp_path / "pkg.whl", host, **{"pkg/empty/": b""})
    kept = prune_wheel(src, None, drop="gfx90a", keep_data=True)
    counted = prune_wheel(src, None, drop="gfx90a")
    written = prune_wheel(src, tmp_path / "out.whl", drop="gfx90a")
    again = prune_wheel(src, tmp_path / "out2.whl", drop="gfx90a")
    assert counted.data == b""
    assert kept.data == (tmp_path / "out.whl").read_bytes() == (tmp_path / "out2.whl").read_bytes()
    assert kept.output_size == counted.output_size == written.output_size == again.output_size == len(kept.data)
    with zipfile.ZipFile(io.BytesIO(kept.data)) as z:
        assert z.read("pkg/data.bin") == _members(host)["pkg/data.bin"] and len(z.read(LIB)) < len(host)


def test_each_library_is_let_go_once_written(host: bytes, tmp_path: Path) -> None:
    """The libraries are pruned as the writer reaches them and the report keeps their figures, not their
    bytes (main kept every pruned library's bytes until the wheel was written): one library is alive at
    a time."""
    from devbin.packaging.pruning import prune

    libs = {f"pkg/lib/lib{i}.so": host for i in range(3)}
    src = _good(tmp_path / "pkg.whl", host, **libs)
    r = prune_wheel(src, tmp_path / "out.whl", drop="gfx90a")
    want = prune(host, drop="gfx90a")
    assert [f.name for f in r.files] == [LIB, *libs]
    for f in r.files:
        assert f.result is not None and f.result.data == b"" and f.result.written_size == want.output_size
        got = {k: v for k, v in f.result.to_dict().items() if k != "images"}
        assert got == {k: v for k, v in want.to_dict().items() if k != "images"}
    with zipfile.ZipFile(tmp_path / "out.whl") as z:
        assert all(z.read(n) == want.data for n in [LIB, *libs])


def test_in_place_and_force_arguments(host: bytes, tmp_path: Path) -> None:
    """--in-place rewrites the wheel it reads from (the new file renamed over it at the end, the old kept
    as the backup); --force goes with a wheel only."""
    src = _good(tmp_path / "pkg.whl", host)
    before = src.read_bytes()
    r = run_devbin("prune", "pkg.whl", "--drop", "gfx90a", "--in-place", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "pkg.whl.devbin-backup").read_bytes() == before != src.read_bytes()
    assert prune_wheel(_good(tmp_path / "again.whl", host), None, drop="gfx90a").output_size == src.stat().st_size
    with zipfile.ZipFile(src) as z:
        assert W.verify(z).problems == []
    (tmp_path / "k.o").write_bytes(host)
    for path in ("k.o", "."):
        r = run_devbin("prune", path, "--drop", "gfx90a", "--dry-run", "--force", cwd=tmp_path)
        assert (r.returncode, r.stderr) == (2, "devbin: error: --force goes with a wheel\n")


def test_unchanged_members_keep_their_compressed_bytes(host: bytes, tmp_path: Path) -> None:
    """Issue 28 item 2: a member prune does not change is copied, its compressed bytes as they are (main
    inflated it and deflated it again at zipfile's level 6, other bytes for a wheel deflated at level 1);
    the pruned library and RECORD are written as before.  The wheel stays valid for ``python -m zipfile
    -t``, ``pip install`` and ``wheel unpack``, and the same run to run."""
    text = b" ".join(b"w%d" % (i * 7919 % 1000) for i in range(20000))
    members = {**_members(host), "pkg/words.txt": text,
               f"{META}/WHEEL": b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    src = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(src, "w") as z:
        for name, data in [*members.items(), (f"{META}/RECORD", _record(members))]:
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data, compresslevel=1)
    out = tmp_path / "out" / src.name
    out.parent.mkdir()
    prune_wheel(src, out, drop="gfx90a")
    assert prune_wheel(src, None, drop="gfx90a", keep_data=True).data == out.read_bytes()
    whole, new = src.read_bytes(), out.read_bytes()

    def raw(data: bytes, z: zipfile.ZipFile, name: str) -> bytes:
        start, length = zipmember.data_span(data, z.getinfo(name))
        return data[start:start + length]

    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(out) as zo:
        words = zi.getinfo("pkg/words.txt")
        again = zipfile.ZipFile(io.BytesIO(), "w", zipfile.ZIP_DEFLATED)
        again.writestr("x", text)  # what main wrote: deflated again at level 6
        assert words.compress_type == zipfile.ZIP_DEFLATED
        assert again.getinfo("x").compress_size != words.compress_size  # level 1 is not level 6
        for name in members:
            if name != LIB:
                assert raw(new, zo, name) == raw(whole, zi, name), name
        assert zo.testzip() is None and W.verify(zo).problems == []
        assert len(zo.read(LIB)) < len(host)
    r = subprocess.run([sys.executable, "-m", "zipfile", "-t", str(out)], capture_output=True, text=True)
    assert r.returncode == 0 and "Done testing" in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target",
                        str(tmp_path / "site"), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "site" / "pkg" / "words.txt").read_bytes() == text
    pytest.importorskip("wheel")  # in the test extra
    r = subprocess.run([sys.executable, "-m", "wheel", "unpack", "-d", str(tmp_path / "un"), str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "un" / "pkg-1.0" / "pkg" / "words.txt").read_bytes() == text


BIG = 512 << 20


def test_prune_streams_a_large_member(host: bytes, tmp_path: Path) -> None:
    """Defect 8: main read every member whole (and held the new wheel in memory): a wheel with a 512 MiB
    member of zeros (deflated to half a megabyte) needs more than 1 GiB there, so it fails under an
    address-space limit of 1 GiB that the streaming code does not come near (nor a budget of 64 MiB)."""
    members = _members(host)
    zeros = bytes(1 << 20)
    import hashlib
    h = hashlib.sha256()
    for _ in range(BIG >> 20):
        h.update(zeros)
    rows = _record(members).decode().replace(f"{META}/RECORD,,",
                                             f"pkg/zeros.bin,sha256={W.encode_digest(h.digest())},{BIG}\n"
                                             f"{META}/RECORD,,")
    src = tmp_path / "big.whl"
    with zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
        with z.open("pkg/zeros.bin", "w") as f:
            for _ in range(BIG >> 20):
                f.write(zeros)
        z.writestr(f"{META}/RECORD", rows)
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from devbin.cli.main import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for argv in (["prune", "big.whl", "--drop", "gfx90a", "--dry-run"],
                 ["--max-memory", "64M", "prune", "big.whl", "--drop", "gfx90a", "-o", "out.whl"]):
        r = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=TOOL_TIMEOUT)
        assert r.returncode == 0, r.stderr
    with zipfile.ZipFile(tmp_path / "out.whl") as z:
        assert z.getinfo("pkg/zeros.bin").file_size == BIG
        assert W.verify(z).problems == []


# --------------------------------------------------------------------------- damaged inputs


@pytest.mark.parametrize("argv", [["list"], ["resources"], ["size", "--budget", "total=1K"], ["inspect"],
                                  ["extract", "-o", "x"], ["prune", "--keep", "sm_90", "--dry-run"],
                                  ["size", "--diff", "good.whl"], ["size", "--keep", "sm_90"]])
def test_damaged_wheel_is_an_error_in_every_command(host: bytes, tmp_path: Path, argv: list[str]) -> None:
    """Defect 9: a truncated wheel gave a warning, "0 files" and exit 0 (size --diff took it as empty);
    a .whl that is no zip said "does not contain device code" (exit 3)."""
    good = _good(tmp_path / "good.whl", host).read_bytes()
    (tmp_path / "cut.whl").write_bytes(good[:len(good) // 2])
    (tmp_path / "text.whl").write_bytes(b"<html>404 Not Found</html>\n")
    for name in ("cut.whl", "text.whl"):
        cmd = [*argv[:1], name, *argv[1:]] if argv[0] != "size" or "--diff" not in argv else [*argv, name]
        r = run_devbin(*cmd, cwd=tmp_path)
        assert (r.returncode, r.stdout) == (1, ""), (cmd, r.stderr)
        assert r.stderr.startswith(f"devbin: error: zip: {name}: not a zip file (") and r.stderr.count("\n") == 1


def test_damaged_wheel_in_a_folder_is_a_warning(host: bytes, tmp_path: Path) -> None:
    """A folder scan warns about the damaged files it skips, a damaged wheel among them (docs/IMAGES.md)."""
    (tmp_path / "site").mkdir()
    good = _good(tmp_path / "site" / "good.whl", host)
    (tmp_path / "site" / "cut.whl").write_bytes(good.read_bytes()[:100])
    r = run_devbin("list", "site", cwd=tmp_path)
    assert r.returncode == 0 and "good.whl!pkg/lib/libk.so" in r.stdout
    assert r.stderr == "warning: site/cut.whl: not a zip file (BadZipFile: File is not a zip file)\n"


def test_open_zip_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "a.zip").write_bytes(b"PK\x03\x04" + bytes(10))
    with pytest.raises(FormatError, match=r"^zip: a\.zip: not a zip file \(BadZipFile: "):
        zipmember.open_zip(str(tmp_path / "a.zip"), "a.zip")
    with pytest.raises(FileNotFoundError):
        zipmember.open_zip(str(tmp_path / "none.zip"), "none.zip")
