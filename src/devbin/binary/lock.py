"""One devbin at a time on a file or folder it rewrites in place: an exclusive lock.

:func:`exclusive` takes an advisory ``flock(2)`` lock (``LOCK_EX | LOCK_NB``) on a small lock file
that is never replaced (the file being rewritten cannot carry the lock: it is replaced by a rename,
and a lock on the old inode would not stop a process that opens the new one):

* for a file ``DIR/NAME`` (a library, a wheel): ``DIR/.NAME.devbin-lock``;
* for a folder: ``FOLDER/.devbin-lock``.

A second devbin that finds the lock taken **does not wait**: it stops at once with one line,
``another devbin is rewriting X in place (pid N); try again when it ends`` (exit 1), before it has
read anything, so two install hooks or a re-run never both prune the same bytes.  The lock file
holds the holder's pid (for that message only).

The lock file is removed when the lock is released, while it is still held; a process that opened
the old file before the removal finds, once it holds the lock, that its file is no longer the one at
that name (``st_ino`` differs) and starts again.  A process killed outright leaves the lock file
behind: it is empty or holds a pid, holds no device code, is not locked (the kernel releases
``flock`` locks of a dead process), and the next devbin takes it and removes it.

``flock`` locks are advisory: they stop other devbin processes, not other programs.  On NFS they
are emulated with ``fcntl`` byte-range locks (Linux since 2.6.12, flock(2) NOTES).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from collections.abc import Iterator

from devbin.binary.output import names_open_file
from devbin.errors import OutputError, UsageError

__all__ = ["LOCK_NAME", "Busy", "exclusive", "fitted", "lock_path", "refuse_if_held"]

#: The lock file inside a folder; a file's is ``.NAME`` + this beside it.
LOCK_NAME = ".devbin-lock"
_TRIES = 100


class Busy(UsageError):
    """Another devbin holds the lock: try again when it ends."""


def lock_path(path: str | os.PathLike[str]) -> str:
    """The lock file of ``path`` (see the module docstring)."""
    p = os.path.realpath(os.fspath(path))  # one lock whatever link or spelling names the file
    if os.path.isdir(p):
        return os.path.join(p, LOCK_NAME)
    folder, name = os.path.split(p)
    return os.path.join(folder, f".{fitted(name)}{LOCK_NAME}")


def fitted(name: str, room: int = 200) -> str:
    """``name`` as it is when it has at most ``room`` characters, else cut and followed by a digest of the
    whole, so that a suffix still fits in a file name (255 bytes on most file systems) and two long
    names that share their first characters stay apart."""
    if len(name) <= room:
        return name
    return name[:room - 17] + "-" + hashlib.sha1(name.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return f" (pid {text})" if text.isdigit() else ""


@contextlib.contextmanager
def exclusive(path: str | os.PathLike[str], what: str = "rewriting") -> Iterator[str]:
    """Hold the lock of ``path`` for the ``with`` block (yields the lock file's path); :class:`Busy`
    naming the holder's pid when another process holds it, :class:`OutputError` when the lock file
    cannot be made (a read-only folder)."""
    shown = os.fspath(path)
    name = lock_path(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(_TRIES):
        try:
            fd = os.open(name, flags, 0o644)
        except OSError as e:
            raise OutputError(f"cannot take the lock {name}: {e.strerror or e}", where=shown) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            who = _holder(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise Busy(f"another devbin is {what} {shown} in place{who}; try again when it ends") from None
            raise OutputError(f"cannot take the lock {name}: {e.strerror or e}", where=shown) from None
        try:
            if not os.path.isdir(os.fspath(path)):  # a folder prune above the file holds the folder's lock
                for folder in _folders_above(os.fspath(path)):
                    refuse_if_held(folder, what)
            same = names_open_file(name, fd)
        except OSError:
            same = False
        except Busy:
            with contextlib.suppress(OSError):
                os.unlink(name)  # still held: no other process can have it open and locked
            os.close(fd)
            raise
        if not same:  # the holder before us removed it: lock the file now at that name
            os.close(fd)
            continue
        break
    else:
        raise OutputError(f"cannot take the lock {name}: it keeps being replaced", where=shown)
    try:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield name
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
        os.close(fd)


def _folders_above(path: str) -> list[str]:
    """The folders that hold ``path``, innermost first (its real path's)."""
    out: list[str] = []
    folder = os.path.dirname(os.path.realpath(path))
    while True:
        out.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            return out
        folder = parent


def refuse_if_held(path: str | os.PathLike[str], what: str = "pruning") -> None:
    """:class:`Busy` when another process holds the lock of ``path`` (a file or a folder); nothing is
    created: a lock file that does not exist is held by nobody.

    A folder prune and an in-place prune of one file in it take different locks; each, once it holds its
    own, asks this of the other's (the file's lock, the lock of every folder above the file), so of two
    that overlap, the second to take its lock always sees the first."""
    name = lock_path(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise Busy(f"another devbin is {what} {os.fspath(path)} in place{_holder(fd)}; try again when it "
                       "ends") from None
    finally:
        os.close(fd)
