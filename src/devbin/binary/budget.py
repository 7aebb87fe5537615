"""The memory budget of one command: how many decoded bytes may be alive at once.

Compressed containers (fatbin entries, CCOB bundles, packed super-archive members, zip
members) say how large their contents are once decoded, and a few kilobytes can claim
gigabytes.  Every decode site asks the *current* budget for its output buffer before
decoding (:meth:`MemoryBudget.allocate`); the buffer is charged while it is alive and given
back when the last view of it goes (a ``weakref.finalize`` on the buffer), so a command
that decodes images one after another needs the largest, not the sum.  A decoder that allocates its
own output (libdeflate inflating a zip member, :mod:`devbin.formats.zipmember`) is charged the size
the container records for as long as its caller reads the output (:meth:`MemoryBudget.charged`); a
reader that keeps such a buffer beyond that charges it itself (``devbin size``'s duplicate finder,
:class:`devbin.size.account._Twins`).  A request over what
is left raises :class:`~devbin.errors.LimitExceeded` naming the entry and the budget; an
allocation the system refuses (``MemoryError``) raises the same, never ``MemoryError``.

The budget is a context variable, so library code (layer 2 and up) consults it without
knowing who set it: ``devbin --max-memory 2G ...`` sets it for one command, a library user
with ``with budget.limit(2 << 30): ...``.  The default, :data:`DEFAULT_LIMIT` (4 GiB, or
``DEVBIN_MAX_MEMORY`` from the environment), admits several of the largest images seen in
practice alive together (the biggest fatbin entries of the CUDA math libraries decode to a
few hundred MB, and each container caps one image at 1 GiB) while keeping a decompression
bomb from taking more than a small machine has.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import weakref
from collections.abc import Iterator
from contextvars import ContextVar

from devbin.errors import LimitExceeded, UsageError

__all__ = ["DEFAULT_LIMIT", "Decoded", "MemoryBudget", "current", "format_size", "limit", "parse_size"]

#: Decoded bytes a command may hold at once unless told otherwise (``--max-memory``).
DEFAULT_LIMIT = 4 << 30

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"2G"``, ``"512M"``, ``"64KiB"``, ``"1000"`` -> bytes (binary units); anything else is a UsageError."""
    m = _SIZE_RE.fullmatch(text)
    if m is None:
        raise UsageError(f"not a size: {text[:40]!r} (expected a number with an optional K, M, G or T suffix)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_size(n: int) -> str:
    """``4 GiB``, ``64 MiB``, ``1000 bytes``: the largest binary unit that divides ``n`` exactly."""
    for unit, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} bytes"


class Decoded(bytearray):
    """A buffer charged to a budget until it is collected (views of it keep it alive)."""

    __slots__ = ("__weakref__",)


class MemoryBudget:
    """``limit`` decoded bytes alive at once; ``in_use`` now, ``peak`` the most seen."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit <= 0:
            raise UsageError(f"the memory budget must be positive, not {limit}")
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self._lock = threading.Lock()

    def _fail(self, size: int, what: str, fmt: str, where: str, offset: int | None) -> LimitExceeded:
        return LimitExceeded(
            f"{what} needs {size} bytes once decoded, over the memory budget of {format_size(self.limit)} "
            f"({self.in_use} bytes in use; raise it with --max-memory)", fmt=fmt, where=where, offset=offset,
            value=size)

    def reserve(self, size: int, *, what: str = "image", fmt: str = "", where: str = "",
                offset: int | None = None) -> None:
        """Charge ``size`` bytes, or raise :class:`LimitExceeded` when they do not fit."""
        with self._lock:
            if size < 0 or size > self.limit - self.in_use:
                raise self._fail(size, what, fmt, where, offset)
            self.in_use += size
            self.peak = max(self.peak, self.in_use)

    def release(self, size: int) -> None:
        with self._lock:
            self.in_use = max(0, self.in_use - size)

    def allocate(self, size: int, *, what: str = "image", fmt: str = "", where: str = "",
                 offset: int | None = None) -> Decoded:
        """A zeroed buffer of ``size`` bytes, charged until it is collected."""
        self.reserve(size, what=what, fmt=fmt, where=where, offset=offset)
        try:
            buf = Decoded(size)
        except MemoryError:
            self.release(size)
            raise LimitExceeded(f"{what} needs {size} bytes once decoded and the system has not that much memory "
                                "free", fmt=fmt, where=where, offset=offset, value=size) from None
        weakref.finalize(buf, self.release, size)
        return buf

    @contextlib.contextmanager
    def charged(self, size: int, *, what: str = "image", fmt: str = "", where: str = "",
                offset: int | None = None) -> Iterator[None]:
        """Charge ``size`` bytes for the duration of a block (a decoder that allocates its own output)."""
        self.reserve(size, what=what, fmt=fmt, where=where, offset=offset)
        try:
            yield
        finally:
            self.release(size)


def _default_limit() -> int:
    env = os.environ.get("DEVBIN_MAX_MEMORY")
    if env:
        with contextlib.suppress(UsageError):
            return parse_size(env)
    return DEFAULT_LIMIT


_current: ContextVar[MemoryBudget | None] = ContextVar("devbin_memory_budget", default=None)
_process_default: list[MemoryBudget] = []


def current() -> MemoryBudget:
    """The budget in force: the innermost :func:`limit`, else one process-wide default budget."""
    b = _current.get()
    if b is not None:
        return b
    if not _process_default:
        _process_default.append(MemoryBudget(_default_limit()))
    return _process_default[0]


@contextlib.contextmanager
def limit(max_bytes: int | MemoryBudget) -> Iterator[MemoryBudget]:
    """Run a block under a fresh budget of ``max_bytes`` (or the given budget); yields it."""
    b = max_bytes if isinstance(max_bytes, MemoryBudget) else MemoryBudget(max_bytes)
    token = _current.set(b)
    try:
        yield b
    finally:
        _current.reset(token)
