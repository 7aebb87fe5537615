"""Replace several files of a folder all or nothing: the write of an in-place folder prune.

:func:`replace_all` takes the new content of every file (the pruned libraries and the rewritten
``RECORD`` files, all computed before it is called) and:

1. **stages** each new file, whole, in its target's folder (:class:`devbin.binary.output.Output`:
   an unnamed ``O_TMPFILE`` file on Linux, which vanishes if the process dies).  A write refused
   here (a read-only folder, an immutable file's folder, a file-size limit, a full disk) removes
   every staged file: nothing changed.
2. writes the **journal** ``FOLDER/.devbin-prune-journal`` (JSON: the pid and, per file, its path
   relative to the folder, its undo link and its backup), atomically;
3. keeps each file's current content under an **undo link**, a hard link
   ``.NAME.pre-prune.devbin-backup`` beside it (a copy where hard links are refused), and its
   **backup** ``NAME.devbin-backup`` where one is asked for and none exists
   (:func:`devbin.binary.output.keep_backup`: an existing backup is the first original and stays);
4. **renames** each staged file over its target, one after the other;
5. removes the journal (the commit point), then the undo links.

On any failure in 2-4 every file is put back from its undo link, the backups this run made are
removed, and the error says that nothing changed.  A process killed between two renames cannot
put anything back: the journal stays, and the next ``devbin prune FOLDER --in-place`` (which takes
the folder's lock, :mod:`devbin.binary.lock`) finds it, puts every file back as :func:`recover`
does, says so in a note, and only then prunes.  Until then the folder is half-pruned; every
original is in its undo link.  Undo links end in ``.devbin-backup``, so no scan reads them as
libraries (devbin.images.scan).  A file that cannot be put back (its rename back refused) is named
in the error with its undo link, and the journal stays for the next run.  A kill after the commit
point leaves undo links of the new state's originals: hidden, never read, and replaced by the next
transaction that changes the same file.

Not durable across a power cut: the folder is not fsync'd between the steps (as in
devbin.binary.output).

For tests only: devbin.binary.output's hook (``DEVBIN_TEST_HOLD_WRITE`` naming a folder) with
``DEVBIN_TEST_HOLD_POINT=between-renames`` stops the process after each rename but the last.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from devbin.binary.lock import fitted
from devbin.binary.output import BACKUP_SUFFIX, Output, check_destination, hold_for_test, keep_backup, write_file
from devbin.errors import OutputError, UsageError

__all__ = ["JOURNAL_NAME", "Change", "recover", "replace_all", "undo_name"]

JOURNAL_NAME = ".devbin-prune-journal"
_UNDO = ".pre-prune" + BACKUP_SUFFIX


@dataclass(frozen=True)
class Change:
    """One file to replace: its path, its new bytes, its permission bits, and whether to keep its
    original as ``path + BACKUP_SUFFIX``."""

    path: str
    data: bytes
    mode: int
    backup: bool = False


def undo_name(path: str) -> str:
    """The undo link of ``path`` (step 3 of the module docstring); a name too long to carry the suffix
    is cut and told apart by a digest of the whole (two long names sharing a beginning never share one)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{fitted(name)}{_UNDO}")


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except FileExistsError:
        raise
    except OSError:  # no hard links here: a copy, written whole
        with open(src, "rb") as f:
            write_file(dst, f.read(), mode=os.stat(src).st_mode & 0o777)


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _put_back(root: str, entries: Iterable[dict[str, str]]) -> list[str]:
    """Every file of a journal's ``entries`` back from its undo link; the backups made by the same
    run (hard links to the same original) removed.  Returns what could not be put back, one
    phrase each."""
    left: list[str] = []
    for e in entries:
        path, undo = os.path.join(root, e["path"]), os.path.join(root, e["undo"])
        backup = os.path.join(root, e["backup"]) if e.get("backup") else None
        if not os.path.lexists(undo):
            continue  # not reached: the file was never replaced
        try:
            if backup is not None and _same(backup, undo):
                os.unlink(backup)
            if _same(undo, path):
                os.unlink(undo)  # never replaced (rename onto a link of the same file does nothing)
            else:
                os.replace(undo, path)
        except OSError as err:
            left.append(f"{path} (its original is {undo}: {err.strerror or err})")
    return left


def _check_entry(e: dict[str, str]) -> None:
    """ValueError unless a journal entry names a file inside the folder, its own undo link and backup
    (a journal is read from disk: it must not move files anywhere else)."""
    path = e["path"]
    if os.path.isabs(path) or os.path.normpath(path).split(os.sep)[0] in ("..", "") or "\0" in path:
        raise ValueError(f"a path outside the folder: {path!r}")
    if e["undo"] != undo_name(path) or e.get("backup", path + BACKUP_SUFFIX) != path + BACKUP_SUFFIX:
        raise ValueError(f"not the undo link and backup of {path!r}")


def recover(root: str, notes: list[str]) -> None:
    """Put back the files of an interrupted :func:`replace_all` under ``root`` (its journal), if any;
    a note says what was done.  The caller holds the folder's lock."""
    journal = os.path.join(root, JOURNAL_NAME)
    if not os.path.lexists(journal):
        return
    try:
        with open(journal, "rb") as f:
            doc = json.loads(f.read())
        entries = [{k: str(v) for k, v in e.items() if v is not None} for e in doc["files"]]
        pid = int(doc["pid"])
        for e in entries:
            _check_entry(e)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise UsageError(f"{journal}: an interrupted prune's journal cannot be read ({err}); "
                         "the originals are the *.pre-prune.devbin-backup files beside the libraries") from None
    left = _put_back(root, entries)
    if left:
        raise OutputError(f"an interrupted prune (pid {pid}) cannot be undone: {'; '.join(left)}", where=journal)
    try:
        os.unlink(journal)
    except OSError as e:
        raise OutputError(f"the files were put back, but the journal cannot be removed: {e.strerror or e}",
                          where=journal) from None
    notes.append(f"{root}: an interrupted in-place prune (pid {pid}) was undone: "
                 f"{len(entries)} file(s) put back as they were before it")


def replace_all(root: str, changes: list[Change], notes: list[str]) -> list[str]:
    """Replace every file of ``changes`` (under the folder ``root``) all or nothing (the module
    docstring).  Returns the backups made; a note per file whose backup existed already."""
    if not changes:
        return []
    staged: list[tuple[Change, Output]] = []
    try:
        for c in changes:
            out = Output(check_destination(c.path), c.path, c.mode)
            staged.append((c, out))
            out.write(c.data)
    except BaseException as e:
        for _, out in staged:
            out.discard()
        if isinstance(e, OutputError):
            raise OutputError(f"{e.message}; nothing was changed", where=e.where) from None
        raise
    journal = os.path.join(root, JOURNAL_NAME)
    entries: list[dict[str, str]] = []
    for c, _ in staged:
        entry = {"path": os.path.relpath(c.path, root), "undo": os.path.relpath(undo_name(c.path), root)}
        if c.backup:
            entry["backup"] = os.path.relpath(c.path + BACKUP_SUFFIX, root)
        entries.append(entry)
    made: list[str] = []
    try:
        for c, _ in staged:  # left by a run that ended after its commit point: not these files' originals,
            with contextlib.suppress(FileNotFoundError):  # and a put-back must never take one for them
                os.unlink(undo_name(c.path))
        write_file(journal, json.dumps({"pid": os.getpid(), "files": entries}, indent=1).encode() + b"\n")
        for c, _ in staged:
            _link_or_copy(c.path, undo_name(c.path))
            if c.backup:
                if keep_backup(os.path.realpath(c.path), c.path + BACKUP_SUFFIX):
                    made.append(c.path + BACKUP_SUFFIX)
                else:
                    notes.append(f"{c.path}: the original is already kept as {c.path}{BACKUP_SUFFIX} "
                                 "(by an earlier in-place prune); left as it was")
        for i, (c, out) in enumerate(staged):
            out.commit()
            if i + 1 < len(staged):
                hold_for_test("between-renames", c.path)
    except BaseException as e:
        for _, out in staged:
            out.discard()
        left = _put_back(root, entries)
        if not left:
            with contextlib.suppress(OSError):
                os.unlink(journal)
        if not isinstance(e, OSError | OutputError):
            raise
        what = e.message if isinstance(e, OutputError) else f"cannot write: {e.strerror or e}"
        where = e.where if isinstance(e, OutputError) else (e.filename or root)
        if left:
            raise OutputError(f"{what}; NOT put back: {'; '.join(left)} (journal {journal}); every other "
                              "file is as it was", where=str(where)) from None
        raise OutputError(f"{what}; every file was put back as it was (nothing changed)", where=str(where)) from None
    try:
        os.unlink(journal)  # the commit point
    except OSError as e:  # the files are pruned; a journal left would make the next run undo them
        raise OutputError(f"every file was replaced, but the journal cannot be removed ({e.strerror or e}); "
                          "remove it before the next in-place prune, or that prune puts the originals back",
                          where=journal) from None
    for c, _ in staged:
        with contextlib.suppress(OSError):
            os.unlink(undo_name(c.path))
    return made
