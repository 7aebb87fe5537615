"""The one way devbin writes a file: whole or not at all, and never over one of its inputs.

Every file devbin writes, from the library and from the CLI, goes through :func:`write_file`
or :func:`atomic_output`:

1. **Inputs are refused.**  The destination is refused when it is one of the command's
   inputs: the same path, the same file through a symbolic link, or a hard link to it (same
   ``st_dev``/``st_ino``).  The :class:`~devbin.errors.OutputError` names both files.  A
   symbolic link at the destination is followed as any writer follows it: the file it points
   at is replaced (in that file's folder) and the link stays.
2. **A new file in the destination's folder** (the same file system, so that the rename is
   atomic).  On Linux it is an unnamed ``O_TMPFILE`` file, which no other process can see or
   open and which vanishes by itself when the process dies; elsewhere, or on a file system
   without ``O_TMPFILE``, a file created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``)
   under an unpredictable name ``.<name>.<16 random hex digits>.tmp``.  Nothing planted at
   any name (a file, a symbolic link) is ever opened or followed.  The new file has the
   permissions of a new file (``0o666`` less the umask) or, when the destination exists, the
   destination's permission bits (as an overwrite in place keeps them); ``mode=`` sets them.
3. **Written, flushed, renamed** over the destination (``os.replace``; an
   ``O_TMPFILE`` file first gets its unpredictable name through ``linkat``).  Readers see
   the old file or the new one, never a part of one; of two processes writing the same
   destination, the last rename wins and the file is that writer's output, whole.  An
   ``O_TMPFILE`` file whose destination does not exist is linked straight at the destination's
   name (``linkat`` fails with ``EEXIST`` when another writer made it meanwhile: then the
   temporary name and the rename), so it never has a temporary name at all.
4. **Removed on any failure**: an ``OSError`` (disk full, file-size limit, permissions), an
   exception raised by the caller inside ``with atomic_output(...)``, ``KeyboardInterrupt``.
   The destination is then left as it was.  System errors become a one-line
   :class:`~devbin.errors.OutputError` naming the destination and the cause
   (``out.a: cannot write: No space left on device``).
5. **Killed outright** (``SIGKILL``): never a partial destination.  An ``O_TMPFILE`` file
   killed before it has a name vanishes with the process (open(2), ``O_TMPFILE``).  A
   temporary name exists only while it is needed: with ``O_TMPFILE`` between ``linkat`` and
   the rename of a file that replaces one (microseconds), with the named fallback for the
   whole write.  A writer killed in that moment leaves its hidden
   ``.<name>.<16 hex digits>.tmp`` (whole, or part of it with the named fallback).  Every
   writer holds an exclusive ``flock`` on its file from before it has a name until after the
   rename, and the kernel drops the lock when the process dies (flock(2): the lock belongs to
   the open file description, released when its last descriptor closes).  A process lists
   the temporary names in a folder at its first write there (once: ``extract`` writes
   thousands of files into one folder); each of its writes, once it has renamed its own file,
   removes those of the same destination that it can lock (their writer is dead), and none
   that another devbin is still writing.  So the next command that writes the destination
   removes the leftover.  What can stay: the leftover of a destination never written again,
   one that appeared after the process writing the destination listed its folder, or one
   devbin cannot open, lock or remove (permissions, a file system without ``flock``).

Commands that write several files (``devbin extract``, ``devbin ar view``) write each one
this way: every file is whole or absent, but a failure part-way leaves the files written
before it.  ``backup=`` keeps the destination's previous content under another name (a hard
link to it when the file system allows, else a copy written the same way), for commands that
rewrite a file in place; a backup that exists already is never replaced (it holds the first
original, which a caller that says where the original is must check first).

Not durable across a power cut: a file that replaces an existing one is fsync'd before the
rename (so the old content is never traded for blocks not yet on disk), the folder is not.  A
new file is not fsync'd: a crash then loses only the new file, and a command writing many
(``extract`` of a 150-image library) would spend a third of its time in ``fsync``.  The destination is
replaced by a new file: other hard links to the old one keep the old content, and the new
file is owned by whoever wrote it.

For tests only: with ``DEVBIN_TEST_HOLD_WRITE`` set to a folder, each output stops after its
first half is written, creates ``held-<pid>-<n>`` in that folder (holding the destination's
path) and waits, for a minute at most, until a file named ``release`` appears there.  The
write-safety tests use it to kill a writer mid-write, and to let a second writer finish while
the first is in the middle of its file.  With ``DEVBIN_TEST_HOLD_POINT=rename`` it stops instead
when the whole file has its temporary name, just before the rename (outputs that get no
temporary name, a new destination linked at its name, do not stop).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys
import time
from collections.abc import Iterable, Iterator

if sys.platform != "win32":
    import fcntl

from devbin.errors import InputClash, OutputError

__all__ = ["BACKUP_SUFFIX", "HOLD_ENV", "HOLD_POINT_ENV", "Inputs", "Output", "Sink", "atomic_output",
           "check_destination", "destination", "hold_for_test", "keep_backup", "names_open_file",
           "write_file"]

PathLike = str | os.PathLike[str]

#: The test hook's environment variable (see the module docstring).
HOLD_ENV = "DEVBIN_TEST_HOLD_WRITE"
#: What ``--in-place`` appends to a file's name to keep its original (:func:`keep_backup`); every
#: folder scan skips such names (devbin.images.scan).
BACKUP_SUFFIX = ".devbin-backup"
#: Where the test hook stops: ``write`` (mid-write, the default), ``rename`` (named, before the rename) or
#: ``between-renames`` (after each rename of a folder prune's transaction but the last).
HOLD_POINT_ENV = "DEVBIN_TEST_HOLD_POINT"

#: Whether to try ``O_TMPFILE`` first (Linux); the tests turn it off to check the named fallback.
USE_O_TMPFILE = sys.platform.startswith("linux") and hasattr(os, "O_TMPFILE")

_CHUNK = 1 << 24
_NAME_TRIES = 100
# errno values by which a kernel or file system says it has no O_TMPFILE (then: a named file)
_NO_TMPFILE = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL})
_holds = 0


class Inputs:
    """The files a command reads, so that none of them is written over.

    Each is known by its resolved path and, for a regular file that exists, by its device and
    inode, so a destination naming it through a symbolic link or a hard link is recognised.
    Build one per command and pass it to every write (it stats each input once).
    """

    def __init__(self, paths: Iterable[PathLike] = ()) -> None:
        self._ids: dict[tuple[int, int], str] = {}
        self._real: dict[str, str] = {}
        for p in paths:
            self.add(p)

    def add(self, path: PathLike) -> None:
        name = os.fspath(path)
        self._real.setdefault(os.path.realpath(name), name)
        try:
            st = os.stat(name)
        except OSError:
            return  # a missing input fails where it is read
        if stat.S_ISREG(st.st_mode):
            self._ids.setdefault((st.st_dev, st.st_ino), name)

    def __len__(self) -> int:
        return len(self._real)

    def match(self, destination: PathLike) -> str | None:
        """The input (as it was named) that ``destination`` is, or None."""
        real = os.path.realpath(os.fspath(destination))
        hit = self._real.get(real)
        if hit is not None or not self._ids:
            return hit
        try:
            st = os.stat(real)
        except OSError:
            return None
        return self._ids.get((st.st_dev, st.st_ino))


def _inputs(inputs: Inputs | Iterable[PathLike]) -> Inputs:
    return inputs if isinstance(inputs, Inputs) else Inputs(inputs)


def check_destination(path: PathLike, inputs: Inputs | Iterable[PathLike] = ()) -> str:
    """``path`` resolved (symbolic links followed); :class:`OutputError` when it is one of ``inputs``,
    names a folder (an existing one, or a name ending in ``/``: :func:`destination` puts a file
    in it), or lies in a folder that does not exist or this process cannot create files in.

    Commands call it before long work, so a bad ``-o`` fails at once (not with "Is a directory" or
    "No such file or directory" after the work); :func:`atomic_output` calls it again.
    """
    shown = os.fspath(path)
    if shown.endswith(("/", os.sep)) or os.path.isdir(shown):
        raise OutputError("cannot write: a folder; name a file in it", where=shown)
    parent = os.path.dirname(os.path.realpath(shown))
    if not os.path.isdir(parent):
        raise OutputError(f"cannot write: the folder {os.path.dirname(shown) or parent} does not exist",
                          where=shown)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write: {os.strerror(errno.EACCES)}", where=shown)  # as open(2) would say
    hit = _inputs(inputs).match(path)
    if hit is not None:
        if hit == shown:
            how = ""
        elif os.path.realpath(hit) == os.path.realpath(shown):
            how = " (the same file, through a symbolic link or another path)"
        else:
            how = " (the same file: a hard link to it)"
        raise InputClash(f"refusing to write over the input {hit}{how}; choose another output", where=shown)
    return os.path.realpath(shown)


def destination(path: PathLike, named_after: PathLike, inputs: Inputs | Iterable[PathLike] = ()) -> str:
    """Where ``-o path`` writes the output made from the input ``named_after``: ``path`` itself, or
    ``path/<name of named_after>`` when ``path`` ends in ``/`` or is an existing folder (as ``cp``
    does; a wheel must keep its name for pip, PEP 427).  A folder named with ``/`` must exist.
    Checked at once (:func:`check_destination`)."""
    shown = os.fspath(path)
    if shown.endswith(("/", os.sep)) or os.path.isdir(shown):
        if not os.path.isdir(shown):
            raise OutputError("cannot write: no such folder (a name ending in / names a folder)", where=shown)
        shown = os.path.join(shown, os.path.basename(os.path.normpath(os.fspath(named_after))))
    check_destination(shown, inputs)
    return shown


def _error(shown: str, e: OSError) -> OutputError:
    return OutputError(f"cannot write: {e.strerror or e}", where=shown)


def _hold(dest: str) -> None:
    """The test hook (module docstring)."""
    folder = os.environ.get(HOLD_ENV)
    if not folder:
        return
    global _holds
    _holds += 1
    marker = os.path.join(folder, f"held-{os.getpid()}-{_holds}")
    with open(marker + ".part", "w", encoding="utf-8") as f:
        f.write(dest)
    os.replace(marker + ".part", marker)
    release = os.path.join(folder, "release")
    deadline = time.monotonic() + 60
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.01)


def _hold_point() -> str:
    """Where the test hook stops ("" when it is off)."""
    return os.environ.get(HOLD_POINT_ENV, "write") if os.environ.get(HOLD_ENV) else ""


def hold_for_test(point: str, dest: str) -> None:
    """The test hook at a point of a writer outside this module (``between-renames``: a folder prune's
    transaction, devbin.packaging.transaction): it stops there when HOLD_POINT_ENV names ``point``."""
    if _hold_point() == point:
        _hold(dest)


def _temp_name(folder: str, dest: str) -> str:
    """``.<name>.<16 random hex digits>.tmp`` beside ``dest`` (the name cut to 100 characters)."""
    return os.path.join(folder, f".{os.path.basename(dest)[:100]}.{os.urandom(8).hex()}.tmp")


_TEMP = re.compile(r"\..+\.[0-9a-f]{16}\.tmp", re.S)


def _is_temp_of(name: str, prefix: str | None = None) -> bool:
    """Whether ``name`` is a temporary name ``.<name>.<16 lowercase hex digits>.tmp``; with ``prefix``
    (``.<name>.``), one of that destination's."""
    return _TEMP.fullmatch(name) is not None and (
        prefix is None or (name.startswith(prefix) and len(name) == len(prefix) + 20))


# folder -> the temporary names found there by this process's first write into it, not yet removed
_found: dict[str, set[str]] = {}


def _lock(fd: int) -> bool:
    """An exclusive ``flock`` on ``fd``'s file without waiting: True when taken.  A writer holds one on
    its file while it lives (module docstring, 5); a file whose lock can be taken has no live writer."""
    if sys.platform == "win32":
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def names_open_file(path: str, fd: int) -> bool:
    """Whether ``path`` (not followed if a link) still names the file open as ``fd``: a file locked after
    it was opened by name may since have been removed or replaced at that name by the process that held
    the lock before (this module's sweep, devbin.binary.lock's release)."""
    try:
        return os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _sweep(dest: str) -> None:
    """Remove the temporary files of ``dest`` that killed writers left (module docstring, 5).  Never
    fails: a file that cannot be opened, locked or removed stays."""
    folder = os.path.dirname(dest) or "."
    found = _found.get(folder)
    if found is None:  # listed once per process and folder: extract writes thousands of files into one
        try:
            with os.scandir(folder) as entries:
                found = {e.name for e in entries if _is_temp_of(e.name) and e.is_file(follow_symlinks=False)}
        except OSError:
            found = set()
        _found[folder] = found
    prefix = f".{os.path.basename(dest)[:100]}."
    for name in [n for n in found if _is_temp_of(n, prefix)]:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            if _lock(fd) and names_open_file(path, fd):
                os.unlink(path)
                found.discard(name)
        except OSError:
            pass
        finally:
            os.close(fd)


class Output:
    """The file being written inside :func:`atomic_output`: call :meth:`write` with its bytes."""

    def __init__(self, dest: str, shown: str, mode: int | None) -> None:
        self._dest = dest
        self._shown = shown
        self._dir = os.path.dirname(dest) or "."
        self._name: str | None = None  # the temporary file's name, once it has one
        self._fd = -1
        self._held = False
        self._replacing = False  # an existing file is replaced: fsync before the rename
        self.size = 0  # the file's length: the end of the furthest write
        self._pos = 0  # where the next write goes (:meth:`seek` moves it back, as zipfile does)
        try:
            self._open(mode)
        except OSError as e:
            self.discard()
            raise _error(shown, e) from None

    def _open(self, mode: int | None) -> None:
        try:
            st = os.stat(self._dest)
            existing = st.st_mode & 0o777 if stat.S_ISREG(st.st_mode) else None
        except FileNotFoundError:
            existing = None
        self._replacing = existing is not None
        if USE_O_TMPFILE and os.path.isdir("/proc/self/fd"):
            try:
                self._fd = os.open(self._dir, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666)
            except OSError as e:
                if e.errno not in _NO_TMPFILE:
                    raise
            else:
                _lock(self._fd)  # before it has a name: no sweep ever takes it for a leftover
        if self._fd < 0:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
            for _ in range(_NAME_TRIES):
                name = _temp_name(self._dir, self._dest)
                try:
                    fd = os.open(name, flags, 0o666)
                except FileExistsError:
                    continue
                _lock(fd)
                if not names_open_file(name, fd):  # a sweep took it for a leftover before the lock: another name
                    os.close(fd)
                    continue
                self._fd = fd
                self._name = name
                break
            else:
                raise FileExistsError(errno.EEXIST, "no free temporary name", self._dir)
        perm = mode if mode is not None else existing
        if perm is not None:
            os.fchmod(self._fd, perm)

    def _write_all(self, view: memoryview) -> None:
        while view:
            n = os.write(self._fd, view[:_CHUNK])
            view = view[n:]
            self._pos += n
            self.size = max(self.size, self._pos)

    def tell(self) -> int:
        """Where the next write goes."""
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        """Move where the next write goes (a writer that fills in a header after the data, as
        :mod:`zipfile` does for each member it writes to a seekable file)."""
        try:
            self._pos = os.lseek(self._fd, offset, whence)
        except OSError as e:
            raise _error(self._shown, e) from None
        return self._pos

    def flush(self) -> None:
        """Nothing to do: every write goes straight to the file (``os.write``)."""

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append ``data``; :class:`OutputError` naming the destination on a system error."""
        view = memoryview(data).cast("B")
        try:
            if not self._held and len(view) > 1 and _hold_point() == "write":
                half = len(view) // 2
                self._write_all(view[:half])
                self._held = True
                _hold(self._shown)
                view = view[half:]
            self._write_all(view)
        except OSError as e:
            raise _error(self._shown, e) from None
        return len(data)

    def commit(self, backup: PathLike | None = None) -> None:
        """fsync when an existing file is replaced, then rename over the destination (keeping its old
        content as ``backup``); then remove the destination's leftovers of killed writers."""
        try:
            if not self._held and _hold_point() == "write":
                self._held = True
                _hold(self._shown)
            if self._replacing:
                os.fsync(self._fd)  # the new content on disk before the old is unlinked (see the module docstring)
            if backup is not None:
                keep_backup(self._dest, backup)
            if self._name is None and not self._replacing and self._link_new():
                pass  # a new destination: the file linked straight at its name, no temporary name
            else:
                if self._name is None:
                    self._name = self._link_tmpfile()
                if not self._held and _hold_point() == "rename":
                    self._held = True
                    _hold(self._shown)
                os.replace(self._name, self._dest)
                self._name = None
            os.close(self._fd)  # the lock held until the file is at its name (module docstring, 5)
            self._fd = -1
        except OSError as e:
            raise _error(self._shown, e) from None
        _sweep(self._dest)

    def _link_at(self, name: str, dir_fd: int) -> bool:
        """Give the ``O_TMPFILE`` file the name ``name`` in its folder (``linkat`` through /proc);
        False when that name exists."""
        try:
            # src_dir_fd makes CPython call linkat(..., AT_SYMLINK_FOLLOW): the /proc link is
            # followed to the open file (plain link() would try to link the /proc entry itself)
            os.link(f"/proc/self/fd/{self._fd}", os.path.basename(name), src_dir_fd=dir_fd,
                    dst_dir_fd=dir_fd, follow_symlinks=True)
        except FileExistsError:
            return False
        return True

    def _link_new(self) -> bool:
        """Link the ``O_TMPFILE`` file straight at the destination's name; False when it exists."""
        dir_fd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            return self._link_at(self._dest, dir_fd)
        finally:
            os.close(dir_fd)

    def _link_tmpfile(self) -> str:
        """Give the ``O_TMPFILE`` file an unpredictable temporary name in its folder."""
        dir_fd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for _ in range(_NAME_TRIES):
                name = _temp_name(self._dir, self._dest)
                if self._link_at(name, dir_fd):
                    return name
            raise FileExistsError(errno.EEXIST, "no free temporary name", self._dir)
        finally:
            os.close(dir_fd)

    def discard(self) -> None:
        """Close and remove the new file (the destination stays as it was)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
        if self._name is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._name)
            self._name = None


class Sink:
    """A seekable output that keeps nothing: ``--dry-run`` writes to it what it would write, and
    :attr:`size` is then the file's length, to the byte (:mod:`zipfile` writes to a seekable file as
    to :class:`Output`, headers filled in afterwards, so the length is the same)."""

    def __init__(self) -> None:
        self.size = 0
        self._pos = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        n = memoryview(data).nbytes
        self._pos += n
        self.size = max(self.size, self._pos)
        return n

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def flush(self) -> None:
        """Nothing kept, nothing to flush."""


def keep_backup(dest: str, backup: PathLike) -> bool:
    """``dest``'s current content as ``backup``, unless ``backup`` exists: a backup is never replaced
    (it holds an older original than ``dest`` does: the first in-place rewrite's input).  True when
    a backup was made; False when ``dest`` does not exist or ``backup`` was there already (left as
    it was).  A hard link made at the name itself (``link`` fails on an existing name, so no other
    writer's backup is ever replaced), else a copy written the same way under a temporary name and
    renamed there if the name is still free."""
    if not os.path.lexists(dest):
        return False
    target = os.path.realpath(os.fspath(backup))
    if target == dest:
        raise OutputError("the backup is the file being replaced; choose another backup name",
                          where=os.fspath(backup))
    if os.path.lexists(target):
        return False
    try:
        os.link(dest, target)
        return True
    except FileExistsError:
        return False
    except OSError:
        pass  # another file system, or no hard links: copy instead
    folder = os.path.dirname(target) or "."
    temp = os.path.join(folder, f".{os.path.basename(target)[:100]}.{os.urandom(8).hex()}.tmp")
    with open(dest, "rb") as src, atomic_output(temp) as out:
        while chunk := src.read(_CHUNK):
            out.write(chunk)
    try:
        if os.path.lexists(target):
            return False
        os.replace(temp, target)  # no hard links here: the check above is the best there is
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)




@contextlib.contextmanager
def atomic_output(path: PathLike, *, inputs: Inputs | Iterable[PathLike] = (), mode: int | None = None,
                  backup: PathLike | None = None) -> Iterator[Output]:
    """Write ``path`` whole or not at all (module docstring): ``with atomic_output(p, inputs=[...]) as f:
    f.write(...)``.  The file appears when the block ends without an exception; ``mode``: its
    permission bits; ``backup``: where the destination's previous content is kept."""
    shown = os.fspath(path)
    dest = check_destination(path, inputs)
    out = Output(dest, shown, mode)
    try:
        yield out
        out.commit(backup)
    except BaseException:
        out.discard()
        raise


def write_file(path: PathLike, data: bytes | bytearray | memoryview, *,
               inputs: Inputs | Iterable[PathLike] = (), mode: int | None = None,
               backup: PathLike | None = None) -> int:
    """Write ``data`` to ``path`` through :func:`atomic_output`; returns the bytes written."""
    with atomic_output(path, inputs=inputs, mode=mode, backup=backup) as out:
        out.write(data)
    return out.size
