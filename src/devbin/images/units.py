"""Work units: what one task of a pool or of a Dask cluster works on, named so that any process can open it.

The commands spread their work two ways (:func:`devbin.images.parallel.ordered_map`):

* **by file**: the unit is the file itself, a :data:`~devbin.images.scan.ToScan` (the path as displayed,
  the path or URL, whether it was named explicitly): ``list`` and ``size`` scan each file in a task.
* **by image**: the unit is an :class:`ImageUnit`, some consecutive images of one file, found by a scan
  in the caller (``resources`` and ``extract``: the scan is cheap, the images' decoding is the work).
  A large file's images are cut into several units (:func:`image_units`), so that one 500 MB library
  keeps every worker busy.

An :class:`ImageUnit` names its images by their place in the file's scan (the first image the scan of the
file yields is 0) and their address: a process that has the images (the caller, and the workers of the
local pool, forked from it) uses them as they are (:attr:`ImageUnit.held`); a process that has not (a
Dask worker, which gets the unit pickled: ``held`` does not travel, it holds views of the caller's mapped
files) scans the file again, with the same scope, and takes the images at those places
(:meth:`ImageUnit.images`).  The same scan of the same bytes yields the same images in the same order
(:mod:`devbin.images.scan`), so the worker's image is the caller's; its address is checked all the same
(a file changed in between is an error, not another image's result).

:func:`connect` opens the Dask client of ``--scheduler ADDRESS``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from devbin.binary import budget
from devbin.errors import FormatError, UsageError
from devbin.images.scan import Scanner, ToScan
from devbin.images.scanreport import ScanReport

if TYPE_CHECKING:
    from devbin.images.record import Image

__all__ = ["ImageUnit", "connect", "image_units", "run_unit", "unit_parts"]

R = TypeVar("R")

#: Units per Dask worker a large file's images are cut into: enough to even out images of different
#: cost, few enough that the file is not scanned again too often (each unit scans it once in a worker).
UNITS_PER_WORKER = 4
#: A file whose chosen images hold fewer bytes than this is one unit whatever ``parts`` says: scanning it
#: again in several workers costs more than they save.
MIN_SPLIT_BYTES = 8 << 20


@dataclass(frozen=True)
class ImageUnit:
    """Images ``places`` (their places in the scan of ``file``, and their addresses) of one file, scanned
    with ``all`` (cuobjdump's ``-all``).  ``held``: the images themselves, where this process has them
    (never pickled)."""

    file: ToScan
    all: bool
    places: tuple[tuple[int, str], ...]
    held: tuple[Image, ...] | None = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["held"] = None  # views of this process's mapped files: the receiver scans the file itself
        return state

    @property
    def size(self) -> int:
        """The images' bytes (decoded), where they are held (0 otherwise)."""
        return sum(f.size for f in self.held or ())

    def images(self) -> Iterator[Image]:
        """The unit's images: those held, else those at its places in a new scan of its file."""
        if self.held is not None:
            yield from self.held
            return
        wanted = dict(self.places)
        last = max(wanted)
        scan = cast("Generator[tuple[Image, Any], None, None]", Scanner(ScanReport(), all=self.all).one(self.file))
        try:
            for place, (image, _) in enumerate(scan):
                if place in wanted:
                    if str(image.address) != wanted[place]:
                        raise FormatError(f"the file changed since it was scanned: image {place} is "
                                          f"{image.address}, not {wanted[place]}", where=self.file[0])
                    yield image
                if place >= last:
                    return
        finally:
            scan.close()
        raise FormatError(f"the file changed since it was scanned: it holds fewer than {last + 1} images",
                          where=self.file[0])


def run_unit(fn: Callable[[Image], R], unit: ImageUnit) -> list[R]:
    """``fn(image)`` for each image of ``unit``, in order, each image a unit of the memory budget (what it
    decoded is given back before the next one)."""
    out: list[R] = []
    for image in unit.images():
        with budget.current().unit():
            out.append(fn(image))
    return out


def _file_of(image: Image) -> ToScan:
    """The file ``image`` was found in, as the scan names it (its address's path)."""
    from devbin.images.remote import is_url
    path = image.address.path
    return (path, path if is_url(path) else Path(path), False)


def image_units(found: Sequence[Image], chosen: Sequence[Image], *, all: bool, parts: int = 0) -> list[ImageUnit]:
    """The images ``chosen`` (some of ``found``, the whole scan in its order, kept in that order) as units:
    consecutive images of one file, each file's cut into at most ``parts`` units of about equal bytes (one
    below :data:`MIN_SPLIT_BYTES`; 0: one unit per image, what the local pool wants: its items are chunked
    by :func:`~devbin.images.parallel.ordered_map`)."""
    wanted = {id(f) for f in chosen}
    per_file: list[tuple[ToScan, list[tuple[int, Image]]]] = []
    current: str | None = None
    place = 0
    for f in found:
        path = f.address.path
        if path != current:
            current, place = path, 0
            per_file.append((_file_of(f), []))
        if id(f) in wanted:
            per_file[-1][1].append((place, f))
        place += 1
    units: list[ImageUnit] = []
    for file, taken in per_file:
        for group in _cut(taken, parts):
            units.append(ImageUnit(file, all, tuple((p, str(f.address)) for p, f in group),
                                   tuple(f for _, f in group)))
    return units


def _cut(taken: list[tuple[int, Image]], parts: int) -> list[list[tuple[int, Image]]]:
    """``taken`` in at most ``parts`` consecutive groups of about equal bytes (0: one per image)."""
    if not taken:
        return []
    if parts <= 0:
        return [[t] for t in taken]
    total = sum(max(f.size, 1) for _, f in taken)
    if total < MIN_SPLIT_BYTES:
        return [taken]
    share = total / parts
    groups: list[list[tuple[int, Image]]] = [[]]
    done = 0
    for t in taken:
        if groups[-1] and done >= share * len(groups):
            groups.append([])
        groups[-1].append(t)
        done += max(t[1].size, 1)
    return groups


def unit_parts(client: Any) -> int:
    """How many units a large file's images are cut into on the cluster of ``client``
    (:data:`UNITS_PER_WORKER` per worker)."""
    return max(1, len(client.scheduler_info().get("workers", {}))) * UNITS_PER_WORKER


@contextlib.contextmanager
def connect(address: str | None) -> Iterator[Any]:
    """The ``dask.distributed.Client`` of the scheduler at ``address`` (``tcp://host:port``), closed on
    leaving; None for None (work in this machine's pool).  Raises :class:`~devbin.errors.UsageError` when
    Dask is not installed (one line naming the extra ``devbin[dask]``) or the scheduler cannot be reached."""
    if address is None:
        yield None
        return
    try:
        from distributed import Client as _Client
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'devbin[dask]' (dask, distributed, fsspec)") from None
    try:
        make: Any = _Client  # typed loosely by distributed
        client = make(address, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise UsageError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    try:
        yield client
    finally:
        client.close()
