"""The memory budget of one command: how many decoded bytes may be alive at once.

Compressed containers (fatbin entries, CCOB bundles, packed super-archive members, zip
members) say how large their contents are once decoded, and a few kilobytes can claim
gigabytes.  Every decode site asks the *current* budget for its output buffer before
decoding (:meth:`MemoryBudget.allocate`); the buffer is charged while it is alive and given
back when the last view of it goes (a ``weakref.finalize`` on the buffer), so a command
that decodes images one after another needs the largest, not the sum.  A decoder that allocates its
own output (libdeflate inflating a zip member, :mod:`devbin.formats.zipmember`) is charged the size
the container records for as long as its caller reads the output (:meth:`MemoryBudget.charged`).
A request over what is left raises :class:`~devbin.errors.LimitExceeded` naming the entry and the budget; an
allocation the system refuses (``MemoryError``) raises the same, never ``MemoryError``.

The budget is a context variable, so library code (layer 2 and up) consults it without
knowing who set it: ``devbin --max-memory 2G ...`` sets it for one command, a library user
with ``with budget.limit(2 << 30): ...``.  The default, :data:`DEFAULT_LIMIT` (4 GiB, or
``DEVBIN_MAX_MEMORY`` from the environment), admits several of the largest images seen in
practice alive together (the biggest fatbin entries of the CUDA math libraries decode to a
few hundred MB, and each container caps one image at 1 GiB) while keeping a decompression
bomb from taking more than a small machine has.

**Garbage is given back before a refusal, and after each unit of work.**  A parsed image is a
graph with reference cycles (an ELF file and its sections point at each other), so its buffer
outlives the last use until Python's cycle collector runs, which it does by object counts, not
bytes: four 1 GiB images could stay charged while a fifth was refused, under ``--jobs 1`` and
not under a pool.  :meth:`MemoryBudget.reserve` collects garbage before it refuses, so a request
fails only when what is *alive* leaves no room, and :meth:`MemoryBudget.unit` (each item of
:func:`devbin.images.parallel.ordered_map`, each image of ``inspect``, ``callgraph`` and ``size``)
collects when the block took bytes it did not give back, so a command holds one decoded image at a
time (per process).

**Pages of a spilled buffer are given back after each unit of work.**  A decoded buffer too large to
hold in the heap (a wheel's 716 MB library, :func:`devbin.formats.zipmember.load`) is written to an
unnamed temporary file and memory-mapped (:mod:`devbin.binary.mapped`, the one place such bytes are
kept), charged like a :class:`Decoded` buffer while its caller reads it.  The pages a reader touches
count in the process's resident set until they are dropped, so when a unit of work ends the pages of
every live map are given back (:func:`devbin.binary.mapped.drop_pages`): reading one costs the pages one
unit touched, not the buffer's size.

**One budget per command, across its processes.**  A pool's workers (forked by
:mod:`devbin.images.parallel`) draw from the command's budget, not each from a copy of it: the
pool's :class:`Shared` ledger (counters in shared memory under one lock, one slot per process)
holds what each process holds, and the rule is chosen so that the outcome is the one ``--jobs 1``
gives:

* *Refused or not: the rule of one process.*  A request is refused (:class:`~devbin.errors.LimitExceeded`)
  exactly when it does not fit beside what the requesting process holds (``in_use``: what the
  caller held when it forked, which the worker inherits, and the item's own buffers), as in one
  process doing the items one by one, each dropping its buffers before the next.  The message
  (``N bytes in use``) counts the same bytes.  Whether other workers hold memory never refuses a
  request: it only makes it wait.
* *Waiting cannot deadlock (wait-die).*  A request that fits that rule but not what the pool has
  free waits for others to give back.  A cycle of processes each holding memory and waiting for
  another's is what could block for ever; the order of the items breaks it, as the wait-die rule
  of database lock managers does with timestamps (Rosenkrantz, Stearns and Lewis, "System level
  concurrency control for distributed database systems", ACM TODS 3(2), 1978).  The process on the
  *oldest* item in progress (lowest index; the caller, while it asks, is older than all) may wait
  holding memory.  A younger one that holds memory and cannot be served, or would go before an
  older one waiting, *dies*: :class:`Retry` (a ``BaseException``, so no ``except Exception`` of
  a reader stops it) unwinds the item, which gives back all it held (writes through
  :mod:`devbin.binary.output` are discarded), and the item is run again from the start (its
  warnings from the dead attempt dropped).  A younger one that holds nothing waits.  So only the
  oldest waits while holding, and no cycle forms; what others hold only falls while the oldest
  waits (nobody younger is served before it), so it is served, as its request fits beside what
  it holds; then the next item is the oldest: every item completes.  The result is the item's
  result in one process: items are functions of their input (the retried attempt leaves nothing).
* *Never more than the budget.*  Every byte a process takes is taken from the ledger first, so the
  processes together hold at most the limit (a buffer inherited from the caller is counted once,
  in the caller's slot).  A worker that died (killed) has its slot cleared by the next waiter; a
  waiting worker whose caller died ends.  What a worker keeps past its item (a leak: nothing
  gives it back while the worker has no item) would make a waiter wait for ever: a request that
  only idle workers' bytes keep from being served is refused instead.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from devbin.binary import mapped
from devbin.errors import LimitExceeded, UsageError

__all__ = ["COLLECT_BYTES", "DEFAULT_LIMIT", "Decoded", "MemoryBudget", "Retry", "Shared", "current", "format_size",
           "limit", "parse_size"]

#: Decoded bytes a command may hold at once unless told otherwise (``--max-memory``).
DEFAULT_LIMIT = 4 << 30
#: Bytes a unit of work (:meth:`MemoryBudget.unit`) may leave to garbage before its end runs a full
#: collection (whose cost grows with the heap: worth it for a large image, not for each small one).
COLLECT_BYTES = 16 << 20

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


class Retry(BaseException):
    """Raised by a request of a pool's worker that must give back what it holds first (wait-die, see
    the module docstring); :func:`devbin.images.parallel.ordered_map` runs the item again."""


class MemoryBudget:
    """``limit`` decoded bytes alive at once; ``in_use`` now, ``peak`` the most seen.  ``shared``: the
    ledger of the pool this process belongs to, if any (:meth:`share`)."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        if limit <= 0:
            raise UsageError(f"the memory budget must be positive, not {limit}")
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self._lock = threading.Lock()
        self.shared: Shared | None = None
        self._depth = 0  # units open (:meth:`unit`) in this process

    def _fail(self, size: int, what: str, fmt: str, where: str, offset: int | None, *,
              taken: int = 0) -> LimitExceeded:
        """The refusal of ``size`` bytes (``taken``: of them, those charged here already)."""
        return LimitExceeded(
            f"{what} needs {size} bytes once decoded, over the memory budget of {format_size(self.limit)} "
            f"({self.in_use - taken} bytes in use; raise it with --max-memory)", fmt=fmt, where=where,
            offset=offset, value=size)

    def _take(self, size: int) -> bool:
        with self._lock:
            if size < 0 or size > self.limit - self.in_use:
                return False
            self.in_use += size
            self.peak = max(self.peak, self.in_use)
            return True

    def reserve(self, size: int, *, what: str = "image", fmt: str = "", where: str = "",
                offset: int | None = None) -> None:
        """Charge ``size`` bytes, or raise :class:`LimitExceeded` when they do not fit beside what this
        process holds alive (garbage is collected first); in a pool, wait for the others' room (or raise
        :class:`Retry`, see the module docstring)."""
        if not self._take(size):
            if size >= 0:
                gc.collect()  # buffers only a garbage cycle keeps are given back by their finalizers
            if not self._take(size):
                raise self._fail(size, what, fmt, where, offset)
        shared = self.shared
        if shared is not None and size:
            try:
                shared.take(size, lambda: self._fail(size, what, fmt, where, offset, taken=size))
            except BaseException:
                with self._lock:
                    self.in_use -= size
                raise

    def release(self, size: int, pid: int | None = None) -> None:
        """Give back ``size`` bytes charged by process ``pid`` (this one when None)."""
        with self._lock:
            self.in_use = max(0, self.in_use - size)
        shared = self.shared
        if shared is not None and size and (pid is None or pid == os.getpid()):
            shared.give(size)  # one a worker inherited from the caller stays the caller's

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
        weakref.finalize(buf, self.release, size, os.getpid())
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

    @contextlib.contextmanager
    def unit(self) -> Iterator[None]:
        """A unit of work (an item, an image) whose decoded buffers are given back when it ends: if it
        took bytes it did not give back, the garbage cycles holding them are collected: the young
        generations always; all of them (a full collection, whose cost grows with the heap) only where
        it can matter: from :data:`COLLECT_BYTES` kept, and in a pool where another process waits for
        room or where the unit is the outermost one (an item, after which the worker may stay idle: what
        an idle worker holds is never given back, :meth:`Shared.take`).  An image's unit inside an item
        may keep bytes that are alive (a buffer whose digest a second thread takes, a window kept for a
        twin): a full collection after every one of those cost minutes on a folder of wheels in a pool
        (``size``: 0.12 s each, behind every other image).  The pages of the live spilled maps are given
        back (:func:`devbin.binary.mapped.drop_pages`)."""
        before = self.in_use
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            mapped.drop_pages()
            if self.in_use > before:
                gc.collect(1)  # the unit's own objects, cheaply, where they are young still
                kept = self.in_use - before
                shared = self.shared
                if kept >= COLLECT_BYTES or (kept > 0 and shared is not None
                                             and (not self._depth or shared.waited_for())):
                    gc.collect()

    @contextlib.contextmanager
    def share(self, workers: int) -> Iterator[Shared]:
        """Make this (the caller's) budget the one of a pool of ``workers`` processes forked inside the
        block: it holds what the caller holds now; each worker joins it (:meth:`Shared.join`)."""
        if self.shared is not None:
            raise RuntimeError("this budget is shared already")
        with self._lock:
            self.shared = Shared(self.limit, workers, self.in_use)
        try:
            yield self.shared
        finally:
            self.shared = None


class Shared:
    """The ledger of one pool: what each of its processes holds, in shared memory (module docstring).

    Slot 0 is the caller's, 1 to ``workers`` the workers' (claimed by :meth:`join`); per slot the
    process id, the bytes it holds, the index of its item in progress (:data:`IDLE` when none; the
    caller counts as older than every item while it waits) and whether it waits.  Made before the
    workers are forked, which inherit it; one re-entrant lock (a condition) guards it all."""

    #: The item index of a process that is on no item.
    IDLE = 1 << 62
    #: How often a waiter looks for slots of processes that ended without giving back, and a worker
    #: whether its caller is still there (seconds).
    POLL = 0.5

    def __init__(self, limit: int, workers: int, held: int) -> None:
        import multiprocessing  # only where a pool runs

        ctx = multiprocessing.get_context("fork")
        self.limit = limit
        self.slot = 0
        # Re-entrant: a buffer's finalizer may give back (:meth:`give`) from a collection that runs
        # inside :meth:`take`, in the same thread.
        self._cond = ctx.Condition(ctx.RLock())
        n = workers + 1
        self._pid = ctx.RawArray("q", n)
        self._held = ctx.RawArray("q", n)
        self._item = ctx.RawArray("q", n)
        self._waiting = ctx.RawArray("b", n)
        self._pid[0], self._held[0] = os.getpid(), held
        for i in range(n):
            self._item[i] = self.IDLE

    def join(self, budget: MemoryBudget) -> None:
        """In a worker, once, before its first item: claim a slot; ``budget`` (the worker's copy of the
        caller's) gets a lock of its own (the inherited one may have been held by a thread at fork)."""
        budget._lock = threading.Lock()
        budget._depth = 0  # the caller's open units are not this worker's: each item is an outermost unit
        pid = os.getpid()
        with self._cond:
            for i in range(1, len(self._pid)):
                if self._pid[i] in (0, pid):
                    self._pid[i], self._held[i], self._item[i] = pid, 0, self.IDLE
                    self.slot = i
                    return
        raise RuntimeError("no free slot in the pool's memory ledger")

    def begin(self, index: int) -> None:
        with self._cond:
            self._item[self.slot] = index

    def end(self) -> None:
        with self._cond:
            self._item[self.slot] = self.IDLE
            self._cond.notify_all()

    def take(self, size: int, refuse: Callable[[], LimitExceeded]) -> None:
        """Hold ``size`` more bytes once the pool has room, waiting as the module docstring says;
        ``refuse()`` is raised where no wait can make room (a request over the limit beside what this
        process and the caller hold: only where a worker dropped its copies of the caller's buffers)."""
        me = self.slot
        with self._cond:
            mine = self._item[me] if me else -1  # the caller asking is older than every item
            try:
                while True:
                    held = self._held
                    if size > self.limit - held[me] - (held[0] if me else 0):
                        raise refuse()
                    older_waiting = any(self._waiting[i] and self._item[i] < mine for i in range(len(held))
                                        if i != me)
                    if not older_waiting and size <= self.limit - sum(held):
                        held[me] += size
                        return
                    oldest = all(self._item[i] >= mine for i in range(len(held)) if i != me)
                    if held[me] and not oldest:
                        raise Retry
                    if all(self._item[i] == self.IDLE and not self._waiting[i] for i in range(1, len(held))
                           if i != me):
                        raise refuse()  # what idle workers hold (a buffer kept past its item) never comes back
                    self._item[me] = mine
                    self._waiting[me] = 1
                    if not self._cond.wait(self.POLL):
                        self._clear_ended()
                        if me and not _alive(self._pid[0]):
                            os._exit(1)  # the caller is gone (killed): no one is left to give this worker room
            finally:
                self._waiting[me] = 0
                if not me:
                    self._item[0] = self.IDLE

    def waited_for(self) -> bool:
        """Whether another process of the pool waits for room now (read without the lock: a hint; one that
        begins to wait after is served by the next unit's end, or the item's)."""
        return any(self._waiting[i] for i in range(len(self._waiting)) if i != self.slot)

    def give(self, size: int) -> None:
        with self._cond:
            self._held[self.slot] = max(0, self._held[self.slot] - size)
            self._cond.notify_all()

    def _clear_ended(self) -> None:
        """Clear the slots of workers that ended (killed) holding bytes or an item (under the lock)."""
        for i in range(1, len(self._pid)):
            pid = self._pid[i]
            if pid and pid != os.getpid() and not _alive(pid):
                self._pid[i], self._held[i], self._item[i], self._waiting[i] = 0, 0, self.IDLE, 0


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True


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
