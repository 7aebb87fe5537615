"""Where an extracted member may be written: member names are untrusted input.

An archive member's name is whatever its writer put there: GNU long names (``//``)
and BSD ``#1/N`` names may hold ``/``, ``..`` or an absolute path, and a thin
archive's names are paths by design.  ``ar x`` of such a member would write outside
the folder the user chose (the "zip slip" problem; binutils ar refuses absolute
paths and ``..`` components since 2.36 for the same reason).  Anything that writes
members to disk goes through :func:`safe_member_path`.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from devbin.errors import UsageError, quote

__all__ = ["safe_member_path"]


def _refuse(name: str, folder: Path, why: str) -> UsageError:
    return UsageError(f"refusing to extract member {quote(name)}: {why}; it would not stay inside {str(folder)!r}",
                      fmt="ar")


def safe_member_path(name: str, folder: str | Path, *, allow_subfolders: bool = False) -> Path:
    """The path under ``folder`` to write member ``name`` to; :class:`UsageError` when it would leave ``folder``.

    Refused: an empty name, ``.``/``..``, NUL or other control characters, a backslash
    or drive letter (a separator on Windows), an absolute path, and — unless
    ``allow_subfolders`` — any ``/``.  With ``allow_subfolders`` a relative path such as
    ``sub/k.o`` is kept, but no component may be ``..`` and the resolved target must
    still lie inside ``folder`` (a symlinked subfolder pointing out is refused).
    """
    base = Path(folder)
    if not name or name in (".", ".."):
        raise _refuse(name, base, "the name is empty, '.' or '..'")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise _refuse(name, base, "the name holds a control character")
    if "\\" in name or (len(name) >= 2 and name[1] == ":" and name[0].isalpha()):
        raise _refuse(name, base, "the name holds a backslash or a drive letter")
    pure = PurePosixPath(name)
    if pure.is_absolute():
        raise _refuse(name, base, "the name is an absolute path")
    if "/" in name and not allow_subfolders:
        raise _refuse(name, base, "the name holds '/'")
    if any(part == ".." for part in pure.parts) or not pure.parts:
        raise _refuse(name, base, "the name has a '..' component")
    target = base.joinpath(*pure.parts)
    try:
        inside = target.resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError, ValueError):
        inside = False
    if not inside:
        raise _refuse(name, base, "the resolved path leaves the folder")
    return target
