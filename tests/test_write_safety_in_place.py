"""The writer-safety harness for ``devbin prune --in-place`` (issue 24): a file, a wheel, a folder.

What docs/PRUNE.md ("Safety") promises of ``--in-place``, one test each, through the CLI in a
subprocess (the helpers of tests/test_write_safety.py) or in process where a failure must be made
to happen at one exact step:

* a backup that exists is never replaced: it is the first original (defect 1);
* a folder's backups are not its libraries: a second prune and ``devbin size`` skip them (defect 2);
* one devbin at a time: a second one stops at once, in one line, and changes nothing (defect 3);
* a folder is written all or nothing: a write refused (read-only folder, file-size limit, a rename
  refused) puts every file back and says so in one line; a kill between two renames is undone by
  the next in-place prune of the folder (defect 4);
* RECORD files are read as bytes, before the first write: an odd RECORD of another package never
  ends in a traceback and is never rewritten; an odd line of one's own stays byte for byte.

Inputs are fatbins built at test time from the fixtures (an sm_70, sm_80 and sm_90 cubin and a
compute_90 PTX each), in a folder laid out as an installed package with its RECORD.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from devbin.binary import output as output_mod
from devbin.binary.lock import LOCK_NAME, Busy, exclusive, lock_path
from devbin.binary.output import BACKUP_SUFFIX, HOLD_ENV, HOLD_POINT_ENV
from devbin.errors import OutputError
from devbin.formats.fatbin import FatbinImage, write_fatbin
from devbin.formats.fatbin import constants as FC
from devbin.packaging.prune_packages import prune_tree, record_hash
from devbin.packaging.pruning import prune
from devbin.packaging.transaction import JOURNAL_NAME, undo_name

from tests.runners import TOOL_TIMEOUT, run_devbin
from tests.test_write_safety import _env, _no_dac_override, one_line_error

FIXTURES = Path(__file__).parent / "fixtures"
LIBS = ("pkg/a.fatbin", "pkg/sub/b.fatbin", "pkg/c.fatbin")
RECORD = "pkg-1.0.dist-info/RECORD"
OTHER_RECORD = "other-1.0.dist-info/RECORD"
#: Another package's RECORD that is not UTF-8 and holds a NUL (defect 4's traceback).
ODD_RECORD = b"other/x.py,sha256=abc,3\nother/\xff\xfe.py,,\n\x00\x00\nother-1.0.dist-info/RECORD,,\n"


def fatbin(tag: bytes, pad: int = 0) -> bytes:
    """sm_70, sm_80 and sm_90 cubins and compute_90 PTX; ``tag`` (the entries' identifier) and
    ``pad`` bytes of comment in the PTX (stored unsqueezed) make each library's bytes its own."""
    cubin = (FIXTURES / "sample_sm90.cubin").read_bytes()
    noise = b"".join(hashlib.sha256(tag + bytes([i % 256, i // 256])).hexdigest().encode() for i in range(pad // 64))
    ptx = b"// " + noise + b"\n" + (FIXTURES / "sample.ptx").read_bytes().rstrip(b"\0")
    name = tag.decode()
    return write_fatbin([FatbinImage(FC.KIND_ELF, 70, cubin, name, minor=0), FatbinImage(FC.KIND_ELF, 80, cubin, name),
                         FatbinImage(FC.KIND_ELF, 90, cubin, name),
                         FatbinImage(FC.KIND_PTX, 90, ptx, name, squeeze=False)])


def site(d: Path, *, big_b: bool = False) -> dict[str, bytes]:
    """An installed package under ``d``: three libraries, its RECORD, another package's odd RECORD.
    Returns every file's bytes by relative name."""
    files = {"pkg/__init__.py": b"", "pkg/a.fatbin": fatbin(b"a"),
             "pkg/sub/b.fatbin": fatbin(b"b", 60000 if big_b else 0), "pkg/c.fatbin": fatbin(b"c")}
    rows = [f"{n},{record_hash(v)},{len(v)}\n".encode() for n, v in files.items()]
    files[RECORD] = b"".join(rows) + f"{RECORD},,\r\n".encode()
    files[OTHER_RECORD] = ODD_RECORD
    for name, data in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    return files


def tree(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` by relative name (the lock file and hold markers excluded: none should be)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def pruned_site(before: dict[str, bytes], keep: str, *, backup: bool = True) -> dict[str, bytes]:
    """What a successful in-place prune of :func:`site` leaves: libraries pruned, their backups (the
    originals), the package's RECORD rows of the libraries updated, each followed by its backup's row (so
    that pip uninstall removes the backup with the package: docs/PRUNE.md), the other RECORD as it was."""
    out = dict(before)
    record = before[RECORD]
    for name in LIBS:
        new = prune(before[name], keep=keep).data
        out[name] = new
        old_row = f"{name},{record_hash(before[name])},{len(before[name])}"
        new_row = f"{name},{record_hash(new)},{len(new)}"
        if backup:
            out[name + BACKUP_SUFFIX] = before[name]
            new_row += f"\n{name}{BACKUP_SUFFIX},{old_row.split(',', 1)[1]}"
        record = record.replace(old_row.encode(), new_row.encode())
    out[RECORD] = record
    return out


def held(argv: list[str], cwd: Path, hold: Path, point: str = "write") -> subprocess.Popen[str]:
    """devbin stopped at a test hook (``point``: ``write`` mid-write, ``between-renames`` in a folder prune)."""
    proc = subprocess.Popen([sys.executable, "-m", "devbin", *argv], cwd=cwd,
                            env=_env(**{HOLD_ENV: str(hold), HOLD_POINT_ENV: point}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(p.name.startswith("held-") and not p.name.endswith(".part") for p in hold.iterdir()):
        if proc.poll() is not None:
            pytest.fail(f"devbin {' '.join(argv)} ended without stopping: {proc.communicate()[1][-500:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("devbin did not stop within 120 s")
        time.sleep(0.01)
    return proc


def _wheel(path: Path) -> bytes:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        data = fatbin(b"a")
        z.writestr("pkg/a.fatbin", data)
        z.writestr("pkg-1.0.dist-info/RECORD", f"pkg/a.fatbin,{record_hash(data)},{len(data)}\n"
                   "pkg-1.0.dist-info/RECORD,,\n")
    return path.read_bytes()


# --------------------------------------------------------------------------- defect 1: backups never replaced


@pytest.mark.parametrize("kind", ["file", "wheel", "folder"])
def test_defect1_second_in_place_prune_keeps_the_first_original(kind: str, tmp_path: Path) -> None:
    """--keep sm_80,sm_90 --in-place, then --keep sm_90 --in-place: the backup still holds the
    original (on main the second run replaced it with the first run's output), and the second run
    says the original was kept already."""
    if kind == "folder":
        before = site(tmp_path / "site")
        target, backups = tmp_path / "site", {n: tmp_path / "site" / (n + BACKUP_SUFFIX) for n in LIBS}
        originals = {n: before[n] for n in LIBS}
    else:
        target = tmp_path / ("pkg-1.0-py3-none-any.whl" if kind == "wheel" else "libk.fatbin")
        if kind == "wheel":
            original = _wheel(target)
        else:
            original = fatbin(b"k")
            target.write_bytes(original)
        backups, originals = {"x": Path(str(target) + BACKUP_SUFFIX)}, {"x": original}
    first = run_devbin("prune", str(target), "--keep", "sm_80,sm_90", "--in-place", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = run_devbin("prune", str(target), "--keep", "sm_90", "--in-place", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    for name, backup in backups.items():
        assert backup.read_bytes() == originals[name], name
        assert not Path(str(backup) + BACKUP_SUFFIX).exists()
    assert second.stderr.count("is already kept as") == len(backups), second.stderr
    assert "original kept as" not in "".join(ln for ln in second.stderr.splitlines() if "already" not in ln)
    if kind == "file":
        assert target.read_bytes() == prune(prune(originals["x"], keep="sm_80,sm_90").data, keep="sm_90").data
    assert not list(tmp_path.rglob(f"*{LOCK_NAME}")) and not list(tmp_path.rglob(f"*{JOURNAL_NAME}"))


# --------------------------------------------------------------------------- defect 2: backups are no inputs


def test_defect2_folder_prune_again_skips_its_backups(tmp_path: Path) -> None:
    """A second folder prune neither lists nor rewrites the backups (on main it wrote
    libk.so.devbin-backup.devbin-backup and the original was gone); devbin size and list skip them."""
    d = tmp_path / "site"
    before = site(d)
    assert run_devbin("prune", "site", "--keep", "sm_80,sm_90", "--in-place", cwd=tmp_path).returncode == 0
    res = run_devbin("prune", "site", "--keep", "sm_90", "--in-place", "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [f["name"] for f in doc["files"]] == sorted(f"site/{n}" for n in LIBS)
    after = tree(d)
    assert not [n for n in after if n.endswith(BACKUP_SUFFIX + BACKUP_SUFFIX)]
    assert {n: after[n + BACKUP_SUFFIX] for n in LIBS} == {n: before[n] for n in LIBS}
    size = json.loads(run_devbin("size", "site", "--json", cwd=tmp_path).stdout)
    listed = run_devbin("list", "site", cwd=tmp_path).stdout
    assert BACKUP_SUFFIX not in json.dumps(size) and BACKUP_SUFFIX not in listed
    # the same folder without its backups gives the same sizes
    for n in LIBS:
        os.unlink(d / (n + BACKUP_SUFFIX))
    assert json.loads(run_devbin("size", "site", "--json", cwd=tmp_path).stdout) == size
    # a backup named on the command line is a file like any other
    assert run_devbin("list", str(tmp_path / "site" / LIBS[0]), cwd=tmp_path).returncode == 0


# --------------------------------------------------------------------------- defect 3: one devbin at a time


@pytest.mark.parametrize("kind", ["file", "wheel", "folder"])
def test_defect3_a_second_in_place_prune_stops_at_once(kind: str, tmp_path: Path) -> None:
    """Devbin A is stopped in the middle of its write, holding the lock; devbin B stops at once
    with one line naming A's pid and changes nothing; A then finishes; the backup is the original
    (on main both ran, and every backup ended holding pruned content)."""
    if kind == "folder":
        before = site(tmp_path / "site")
        target = tmp_path / "site"
    elif kind == "wheel":
        target = tmp_path / "pkg-1.0-py3-none-any.whl"
        before = {"": _wheel(target)}
    else:
        target = tmp_path / "libk.fatbin"
        before = {"": fatbin(b"k")}
        target.write_bytes(before[""])
    hold = tmp_path / "hold"
    hold.mkdir()
    a = held(["prune", str(target), "--keep", "sm_90", "--in-place"], tmp_path, hold)
    try:
        snap = tree(target) if kind == "folder" else {"": target.read_bytes()}
        b = run_devbin("prune", str(target), "--keep", "sm_80,sm_90", "--in-place", cwd=tmp_path)
        line = one_line_error(b)
        assert line == (f"devbin: error: another devbin is pruning {target} in place (pid {a.pid}); "
                        "try again when it ends"), line
        assert (tree(target) if kind == "folder" else {"": target.read_bytes()}) == snap
    finally:
        (hold / "release").touch()
        _, err = a.communicate(timeout=TOOL_TIMEOUT)
    assert a.returncode == 0, err
    if kind == "folder":
        assert tree(target) == pruned_site(before, "sm_90")
    else:
        assert Path(str(target) + BACKUP_SUFFIX).read_bytes() == before[""]
    assert not list(tmp_path.rglob(f"*{LOCK_NAME}"))


@pytest.mark.parametrize("kind", ["file", "wheel"])
def test_in_place_killed_mid_write_keeps_the_input(kind: str, tmp_path: Path) -> None:
    """SIGKILL in the middle of writing the new file: the input whole as it was, no backup made, no
    temporary file; the lock file left is harmless (the next in-place prune takes it and succeeds)."""
    target = tmp_path / ("pkg-1.0-py3-none-any.whl" if kind == "wheel" else "libk.fatbin")
    if kind == "wheel":
        original = _wheel(target)
    else:
        original = fatbin(b"k")
        target.write_bytes(original)
    hold = tmp_path / "hold"
    hold.mkdir()
    proc = held(["prune", target.name, "--keep", "sm_90", "--in-place"], tmp_path, hold)
    proc.kill()
    proc.communicate()
    assert target.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["hold", target.name, Path(lock_path(target)).name])
    res = run_devbin("prune", target.name, "--keep", "sm_90", "--in-place", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert Path(str(target) + BACKUP_SUFFIX).read_bytes() == original
    assert not Path(lock_path(target)).exists()


def test_defect3_racing_in_place_prunes(tmp_path: Path) -> None:
    """Four rounds of two in-place prunes of one file started together (no hook): each ends 0, or
    1 with the lock's one line; the backup always holds the original and the file its pruned bytes."""
    original = fatbin(b"k")
    want = prune(original, keep="sm_90").data
    for i in range(4):
        f = tmp_path / f"r{i}" / "libk.fatbin"
        f.parent.mkdir()
        f.write_bytes(original)
        procs = [subprocess.Popen([sys.executable, "-m", "devbin", "prune", str(f), "--keep", "sm_90", "--in-place"],
                                  env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=TOOL_TIMEOUT)
            assert p.returncode == 0 or (p.returncode == 1 and "another devbin is pruning" in err), err
        assert Path(str(f) + BACKUP_SUFFIX).read_bytes() == original
        assert f.read_bytes() == want
        assert sorted(p.name for p in f.parent.iterdir()) == ["libk.fatbin", "libk.fatbin" + BACKUP_SUFFIX]


def test_lock_left_by_a_killed_devbin_is_taken_and_removed(tmp_path: Path) -> None:
    """A lock file whose holder died (it holds a pid, no lock) does not stop the next devbin."""
    f = tmp_path / "libk.fatbin"
    f.write_bytes(fatbin(b"k"))
    Path(lock_path(f)).write_text("999999\n")
    res = run_devbin("prune", str(f), "--keep", "sm_90", "--in-place", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert not Path(lock_path(f)).exists()
    (tmp_path / "link.fatbin").symlink_to(f.name)
    with exclusive(f) as name:  # in process: held, a second taker is refused, by any name of the file
        assert Path(name).read_text() == f"{os.getpid()}\n"
        with pytest.raises(Busy, match=rf"pid {os.getpid()}"), exclusive(f):
            pass
        with pytest.raises(Busy), exclusive(tmp_path / "link.fatbin"):
            pass
    assert not Path(name).exists()


# --------------------------------------------------------------------------- defect 4: all or nothing


def _assert_unchanged(d: Path, before: dict[str, bytes]) -> None:
    assert tree(d) == before, sorted(set(tree(d)) ^ set(before))


def test_defect4_read_only_folder_of_library_b_changes_nothing(tmp_path: Path) -> None:
    """b's folder may not be written: one line naming b, and a, c and RECORD as they were (on main a
    was pruned and stayed pruned, the error naming b only)."""
    d = tmp_path / "site"
    before = site(d)
    (d / "pkg" / "sub").chmod(0o555)
    try:
        res = run_devbin("prune", "site", "--keep", "sm_90", "--in-place", cwd=tmp_path,
                         preexec_fn=_no_dac_override if os.geteuid() == 0 else None)
    finally:
        (d / "pkg" / "sub").chmod(0o755)
    line = one_line_error(res)
    assert line == "devbin: error: site/pkg/sub/b.fatbin: cannot write: Permission denied; nothing was changed", line
    _assert_unchanged(d, before)


def test_defect4_file_size_limit_on_library_b_changes_nothing(tmp_path: Path) -> None:
    """RLIMIT_FSIZE between a's and b's pruned sizes: b cannot be written; nothing changed."""
    d = tmp_path / "site"
    before = site(d, big_b=True)
    limit = len(prune(before["pkg/sub/b.fatbin"], keep="sm_90").data) - 1
    assert limit > max(len(prune(before[n], keep="sm_90").data) for n in LIBS if n != "pkg/sub/b.fatbin")

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    line = one_line_error(run_devbin("prune", "site", "--keep", "sm_90", "--in-place", cwd=tmp_path,
                                     preexec_fn=limited))
    assert line == "devbin: error: site/pkg/sub/b.fatbin: cannot write: File too large; nothing was changed", line
    _assert_unchanged(d, before)


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4])
def test_defect4_a_rename_refused_puts_back_what_was_renamed(fail_at: int, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The rename of the n-th file (a, b, c, RECORD) is refused (as an immutable file's would be), after the files
    before it were renamed in: every file is put back, the backups made are removed, one error says
    so; then the same prune succeeds."""
    d = tmp_path / "site"
    before = site(d)
    calls = []
    real = output_mod.Output.commit

    def commit(self: output_mod.Output, backup: object = None) -> None:
        if not self._shown.endswith(JOURNAL_NAME):
            calls.append(self._shown)
            if len(calls) == fail_at:
                raise OutputError("cannot write: Operation not permitted", where=self._shown)
        real(self)

    monkeypatch.setattr(output_mod.Output, "commit", commit)
    with pytest.raises(OutputError, match="every file was put back as it was") as info:
        prune_tree(d, keep="sm_90")
    assert "\n" not in str(info.value) and info.value.where == calls[-1]
    _assert_unchanged(d, before)
    monkeypatch.setattr(output_mod.Output, "commit", real)
    prune_tree(d, keep="sm_90")
    assert tree(d) == pruned_site(before, "sm_90")


def test_defect4_killed_between_two_libraries_is_undone_by_the_next_run(tmp_path: Path) -> None:
    """SIGKILL after a is renamed in, before b: the journal and the undo links keep every original
    (size skips them); the next in-place prune of the folder puts a back, says so, then prunes."""
    d = tmp_path / "site"
    before = site(d)
    hold = tmp_path / "hold"
    hold.mkdir()
    proc = held(["prune", "site", "--keep", "sm_80,sm_90", "--in-place"], tmp_path, hold, "between-renames")
    proc.kill()
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert (d / JOURNAL_NAME).exists()
    assert (d / "pkg/a.fatbin").read_bytes() == prune(before["pkg/a.fatbin"], keep="sm_80,sm_90").data
    assert Path(undo_name(str(d / "pkg/a.fatbin"))).read_bytes() == before["pkg/a.fatbin"]
    size = run_devbin("size", "site", "--json", cwd=tmp_path)
    assert size.returncode == 0 and BACKUP_SUFFIX not in size.stdout
    snap = tree(d)
    dry = run_devbin("prune", "site", "--keep", "sm_90", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0 and f"{JOURNAL_NAME}: an in-place prune was interrupted here" in dry.stderr, dry.stderr
    assert tree(d) == snap
    res = run_devbin("prune", "site", "--keep", "sm_90", "--in-place", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (f"note: site: an interrupted in-place prune (pid {proc.pid}) was undone: "
            f"{len(LIBS) + 1} file(s) put back as they were before it") in res.stderr, res.stderr
    assert tree(d) == pruned_site(before, "sm_90")


def test_defect4_killed_while_staging_changes_nothing(tmp_path: Path) -> None:
    """SIGKILL in the middle of writing the first new file: no file changed, no journal."""
    d = tmp_path / "site"
    before = site(d)
    hold = tmp_path / "hold"
    hold.mkdir()
    proc = held(["prune", "site", "--keep", "sm_90", "--in-place"], tmp_path, hold)
    proc.kill()
    proc.communicate()
    after = {n: v for n, v in tree(d).items() if not n.endswith(LOCK_NAME)}  # the dead holder's: harmless
    assert after == before


def test_defect4_odd_records_are_read_as_bytes(tmp_path: Path) -> None:
    """Another package's RECORD that is not UTF-8 and holds a NUL stays byte-identical (on main: a
    UnicodeDecodeError traceback after the libraries were rewritten); in the package's own RECORD a
    line that is not UTF-8 stays byte for byte beside the rows updated, line endings kept."""
    d = tmp_path / "site"
    before = site(d)
    odd = b"pkg/\xe9t\xe9.py,sha256=x,1\n"
    (d / RECORD).write_bytes(odd + before[RECORD])
    before[RECORD] = odd + before[RECORD]
    res = run_devbin("prune", "site", "--keep", "sm_90", "--in-place", cwd=tmp_path)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    want = pruned_site(before, "sm_90")
    assert tree(d) == want
    assert want[RECORD].startswith(odd) and want[RECORD].endswith(f"{RECORD},,\r\n".encode())
    assert (d / OTHER_RECORD).read_bytes() == ODD_RECORD


def test_no_backup_folder_rollback_keeps_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--no-backup: a refused rename is put back from the undo links alone; on success nothing is
    left beside the libraries."""
    d = tmp_path / "site"
    before = site(d)
    real = output_mod.Output.commit
    calls = []

    def commit(self: output_mod.Output, backup: object = None) -> None:
        calls.append(self._shown)
        if len(calls) == 3:  # the journal, a, then b
            raise OSError(errno.EPERM, "Operation not permitted")
        real(self)

    monkeypatch.setattr(output_mod.Output, "commit", commit)
    with pytest.raises(OutputError, match="nothing changed"):
        prune_tree(d, keep="sm_90", backup=False)
    _assert_unchanged(d, before)
    monkeypatch.setattr(output_mod.Output, "commit", real)
    prune_tree(d, keep="sm_90", backup=False)
    want = pruned_site(before, "sm_90", backup=False)
    assert tree(d) == want


def test_a_journal_naming_files_outside_the_folder_is_refused(tmp_path: Path) -> None:
    """A journal is read from disk: one that would move a file from outside the folder is refused in
    one line, and nothing is changed."""
    d = tmp_path / "site"
    before = site(d)
    outside = tmp_path / "precious"
    outside.write_bytes(b"not the folder's\n")
    entry = {"path": "../precious", "undo": undo_name("../precious")}
    (d / JOURNAL_NAME).write_text(json.dumps({"pid": 1, "files": [entry]}))
    before[JOURNAL_NAME] = (d / JOURNAL_NAME).read_bytes()
    line = one_line_error(run_devbin("prune", "site", "--keep", "sm_90", "--in-place", cwd=tmp_path))
    assert "an interrupted prune's journal cannot be read (a path outside the folder: '../precious')" in line, line
    _assert_unchanged(d, before)
    assert outside.read_bytes() == b"not the folder's\n"


def test_a_file_that_cannot_be_put_back_is_named_with_its_original(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """c's rename is refused and then a's put-back is refused too: the one-line error names a and
    the undo link holding its original, the journal stays, and the next prune_tree puts a back."""
    d = tmp_path / "site"
    before = site(d)
    real_commit, real_replace = output_mod.Output.commit, os.replace
    calls: list[str] = []
    refused: list[str] = []

    def commit(self: output_mod.Output, backup: object = None) -> None:
        if not self._shown.endswith(JOURNAL_NAME):
            calls.append(self._shown)
            if len(calls) == 3:
                raise OutputError("cannot write: Operation not permitted", where=self._shown)
        real_commit(self)

    def replace(src: str, dst: str) -> None:
        if str(src).endswith(".pre-prune" + BACKUP_SUFFIX) and not refused:
            refused.append(str(dst))
            raise OSError(errno.EPERM, "Operation not permitted")
        real_replace(src, dst)

    monkeypatch.setattr(output_mod.Output, "commit", commit)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OutputError) as info:
        prune_tree(d, keep="sm_90")
    a = str(d / "pkg/a.fatbin")
    assert refused == [a]
    assert (f"NOT put back: {a} (its original is {undo_name(a)}: Operation not permitted)"
            in info.value.message), info.value.message
    assert (d / JOURNAL_NAME).exists() and Path(undo_name(a)).read_bytes() == before["pkg/a.fatbin"]
    monkeypatch.setattr(os, "replace", real_replace)
    monkeypatch.setattr(output_mod.Output, "commit", real_commit)
    r = prune_tree(d, keep="sm_90")
    assert any("was undone" in n for n in r.notes)
    assert tree(d) == pruned_site(before, "sm_90")


@pytest.mark.parametrize("first", ["folder", "file"])
def test_a_folder_prune_and_a_file_prune_inside_it_exclude_each_other(first: str, tmp_path: Path) -> None:
    """A folder prune and an in-place prune of one library in it take different locks; whichever comes
    second sees the first's and stops in one line, changing nothing (review of issue 24: both ran)."""
    before = site(tmp_path / "site")
    folder, lib = tmp_path / "site", tmp_path / "site" / "pkg" / "a.fatbin"
    hold = tmp_path / "hold"
    hold.mkdir()
    one, other = (folder, lib) if first == "folder" else (lib, folder)
    a = held(["prune", str(one), "--keep", "sm_90", "--in-place"], tmp_path, hold)
    try:
        snap = tree(folder)
        b = run_devbin("prune", str(other), "--keep", "sm_80,sm_90", "--in-place", cwd=tmp_path)
        line = one_line_error(b)
        assert line.startswith("devbin: error: another devbin is pruning ") and f"(pid {a.pid})" in line, line
        assert tree(folder) == snap
    finally:
        (hold / "release").touch()
        _, err = a.communicate(timeout=TOOL_TIMEOUT)
    assert a.returncode == 0, err
    if first == "folder":
        assert tree(folder) == pruned_site(before, "sm_90")
    assert not list(tmp_path.rglob(f"*{LOCK_NAME}"))
