"""Work spread over a pool of processes, results in the order one process gives them.

:func:`ordered_map` is the one helper every command that works on many files or many images
uses (``devbin list``, ``resources`` and ``extract`` with ``--jobs``; ``size`` and ``prune``).
It calls ``fn(item)`` for each item and returns the results in item order, exactly as
``[fn(x) for x in items]`` does, but in ``jobs`` worker processes:

* **fork, nothing pickled on the way in.**  The workers are forked from the caller after the
  work is set up, so ``fn`` (a closure is fine) and the items (images holding views of mapped
  files, open scanners) are inherited, not sent; only each result comes back, pickled, so a
  result must be plain data (text, numbers, records without their ``native`` views).  The
  first item runs in the caller before the fork, so that what ``fn`` imports on first use is
  imported once.  Where ``fork`` is not available, or for one job, or fewer items than
  ``min_items``, it runs in process.
* **Same order, same errors.**  The items go out in consecutive chunks; results are yielded
  chunk by chunk in item order.  An exception raised by ``fn`` in a worker is raised in the
  caller when its item's turn comes, after every earlier item's result, as in process (the
  exceptions of :mod:`devbin.errors` survive the trip with their message and fields).  Later
  items may have run already (a command that writes files may have written some of them).
* **Warnings travel too.**  Warnings a worker issues (``FormatWarning`` of a reader) are
  recorded there and issued again in the caller, in order, with the chunk's results, so the
  caller's warning filters (the CLI prints each distinct one once) see them as in process.
* **One memory budget, the result of one process.**  The workers draw from the caller's budget
  (:mod:`devbin.binary.budget`), shared for the pool's lifetime (:meth:`MemoryBudget.share`): the
  processes together never hold more decoded bytes than the budget, and a request is refused
  exactly when it would be in one process doing the items one by one, so the results, errors
  included, are the same whatever ``jobs``; a request that fits but finds the others holding the
  room waits, or, by the wait-die rule, its item gives back what it holds and runs again
  (:class:`~devbin.binary.budget.Retry`).  Each item is a unit of the budget
  (:meth:`MemoryBudget.unit`): what it decoded is given back before the next one starts.
  ``weights`` (the decoded bytes an item may hold at once, e.g. a compressed image's size) lower
  the number of workers until the ``jobs`` heaviest items fit the budget together, so that they
  seldom wait.

:func:`default_jobs` is what ``--jobs`` defaults to: the processors this process may run on.

**On a Dask cluster** (``client``, a ``dask.distributed.Client``; ``--scheduler ADDRESS``): the items
go to the cluster's workers instead, one task per item, and come back with the same guarantees: in
item order, each worker's warnings issued again here with its results, an exception raised at its
item's turn.  Nothing is inherited there, so ``fn`` and the items are pickled (cloudpickle: a closure
is fine) and must not hold open files or mapped views: an item is a work unit
(:mod:`devbin.images.units`: a file, or some images of a large file, named by path or URL), which
the worker opens itself.  Each worker has its own memory budget (the default of its process).
"""

from __future__ import annotations

import gc
import itertools
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from devbin.binary import budget

__all__ = ["default_jobs", "effective_jobs", "ordered_map", "pool_jobs"]

T = TypeVar("T")
R = TypeVar("R")

#: Chunks per worker: enough to even out items of different cost, few enough to keep the
#: per-chunk round trip small.
CHUNKS_PER_JOB = 4

#: Tasks in flight per Dask worker: enough to keep it busy while the caller gathers, few enough that the
#: results waiting to be gathered stay small.
TASKS_PER_WORKER = 4

# The work of the pool being run, set before the workers are forked (they inherit it).
_work: tuple[Callable[[Any], Any], Sequence[Any], budget.MemoryBudget] | None = None


def pool_jobs(jobs: int | None, sizes: Iterable[int], min_bytes: int) -> int | None:
    """``jobs`` for a pool over work of ``sizes`` bytes, or 1 (this process) below ``min_bytes`` in all,
    where forking and feeding workers costs more than they save (0: no floor)."""
    if not min_bytes or jobs == 1:
        return jobs
    return 1 if sum(sizes) < min_bytes else jobs


def default_jobs() -> int:
    """The processors this process may run on (``--jobs``' default)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def effective_jobs(jobs: int, n_items: int, weights: Sequence[int] | None = None, *, min_items: int = 2,
                   limit: int | None = None) -> int:
    """How many processes :func:`ordered_map` uses: ``jobs``, no more than there are items, 1 below
    ``min_items`` or where ``fork`` is missing, and no more than the number of the heaviest items
    whose ``weights`` fit the memory ``limit`` together (the budget in force by default)."""
    if jobs <= 1 or n_items < max(min_items, 2):
        return 1
    import multiprocessing  # only where a pool may run: a one-file command does not import it

    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    n = min(jobs, n_items)
    if weights:
        cap = budget.current().limit if limit is None else limit
        heaviest = sorted(weights, reverse=True)
        total = 0
        for k, w in enumerate(heaviest[:n]):
            total += w
            if total > cap:
                n = max(1, k)
                break
    return n


def ordered_map(fn: Callable[[T], R], items: Sequence[T], *, jobs: int | None = None,
                weights: Sequence[int] | None = None, min_items: int = 2, client: Any = None) -> Iterator[R]:
    """``fn(item)`` for each of ``items``, in item order, in up to ``jobs`` processes (default: every
    processor, :func:`default_jobs`), or on the workers of the Dask ``client`` (then ``jobs``, ``weights``
    and ``min_items`` do not apply); see the module docstring.  A generator: the pool starts
    at the first ``next()`` and is shut down when the generator ends or is closed."""
    if client is not None:
        yield from _distributed(fn, items, client)
        return
    n = effective_jobs(default_jobs() if jobs is None else jobs, len(items), weights, min_items=min_items)
    if n <= 1:
        for item in items:
            with budget.current().unit():
                result = fn(item)
            yield result
        return
    yield from _pooled(fn, items, n)


def _chunks(n_items: int, jobs: int) -> list[tuple[int, int]]:
    count = min(n_items, jobs * CHUNKS_PER_JOB)
    bounds = [n_items * i // count for i in range(count + 1)]
    return [(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]


def _pooled(fn: Callable[[T], R], items: Sequence[T], jobs: int) -> Iterator[R]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _work
    mine = budget.current()
    if _work is not None or mine.shared is not None:  # a pool inside a pool's item: no second level
        for item in items:
            with mine.unit():
                result = fn(item)
            yield result
        return
    # The first item runs here, before the workers are forked: what ``fn`` imports on first use
    # (a reader, a decoder, the resource tables) is imported once and inherited, not once per worker.
    with mine.unit():
        first = fn(items[0])
    yield first
    items = items[1:]
    if not items:
        return
    _work = (fn, items, mine)
    try:
        with mine.share(jobs), \
                ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(_run_chunk, lo, hi) for lo, hi in _chunks(len(items), jobs)]
            _work = None  # the workers have it (forked at the first submit), this process needs it no more
            try:
                for future in futures:
                    results, caught, error = future.result()
                    for w in caught:
                        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
                    yield from results
                    if error is not None:
                        raise error
            finally:
                for future in futures:
                    future.cancel()
    finally:
        _work = None


def _distributed(fn: Callable[[T], R], items: Sequence[T], client: Any) -> Iterator[R]:
    """:func:`ordered_map` on a Dask cluster: one task per item (``pure=False``: two equal items are two
    tasks), gathered in item order, no more than :data:`TASKS_PER_WORKER` per worker in flight (the
    results not yet gathered wait in the workers' memory: an extract's decoded images); the futures not
    yet gathered are cancelled when the generator ends or is closed (an error, a caller that stops
    early)."""
    if not items:
        return
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    window = workers * TASKS_PER_WORKER
    futures: list[Any] = []
    try:
        for k in range(len(items)):
            while len(futures) < min(len(items), k + window):
                futures.append(client.submit(_run_remote, fn, items[len(futures)], pure=False))
            result, caught, error = futures[k].result()
            futures[k] = None  # gathered: its result goes from the worker
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            if error is not None:
                raise error
            yield result
    finally:
        client.cancel([f for f in futures if f is not None])


def _run_remote(fn: Callable[[Any], Any], item: Any) -> tuple[Any, list[warnings.WarningMessage],
                                                              BaseException | None]:
    """In a Dask worker: ``fn(item)``, the warnings it issued and the exception that stopped it (raised
    again in the caller at the item's turn, as a pool's are), under the worker's own memory budget."""
    error: BaseException | None = None
    result: Any = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with budget.current().unit():
                result = fn(item)
        except Exception as e:
            error = e
    return result, [_plain(w) for w in caught], error


def _run_chunk(lo: int, hi: int) -> tuple[list[Any], list[warnings.WarningMessage], BaseException | None]:
    """In a worker: the results of items ``lo`` to ``hi``, the warnings they issued, and the
    exception that stopped the chunk (the results before it are kept)."""
    assert _work is not None, "ordered_map's work is inherited by forking"
    fn, items, mine = _work
    shared = mine.shared
    assert shared is not None, "the caller's budget is shared while its pool runs"
    if not shared.slot:
        shared.join(mine)
    results: list[Any] = []
    error: BaseException | None = None
    with budget.limit(mine), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for i in range(lo, hi):
                results.append(_run_item(fn, items[i], i, shared, caught))
        except Exception as e:  # raised again in the caller, at this item's turn
            error = e
    return results, [_plain(w) for w in caught], error


def _run_item(fn: Callable[[Any], Any], item: Any, index: int, shared: budget.Shared,
              caught: list[warnings.WarningMessage]) -> Any:
    """``fn(item)`` in a worker, item ``index`` of the pool (its age in the wait-die rule), run again
    from the start while a memory request orders it to give back what it holds (its warnings kept
    from the last run only)."""
    mine = budget.current()
    while True:
        mark = len(caught)
        shared.begin(index)
        try:
            with mine.unit():
                return fn(item)
        except budget.Retry:
            del caught[mark:]
        finally:
            shared.end()
        gc.collect()  # what the dead run held (its frames are gone with the exception)


def _plain(w: warnings.WarningMessage) -> warnings.WarningMessage:
    """A warning that pickles (its message as an instance of its category, no source object)."""
    return warnings.WarningMessage(w.message, w.category, w.filename, w.lineno)
