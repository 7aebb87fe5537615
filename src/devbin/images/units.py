"""Work units: what one task of a pool or of a Dask cluster works on, named so that any process can open it.

The commands spread their work two ways (:func:`devbin.images.parallel.ordered_map`):

* **by file**: the unit is the file itself, a :data:`~devbin.images.scan.ToScan` (the path as displayed,
  the path or URL, whether it was named explicitly): ``list`` and ``size`` scan each file in a task.
* **by image**: the unit is an :class:`ImageUnit`, some consecutive images of one file, found by a scan
  in the caller (``resources`` and ``extract``: the scan is cheap, the images' decoding is the work).
  A large file's images are cut into several units (:func:`image_units`), so that one 500 MB library
  keeps every worker busy.

An :class:`ImageUnit` holds images of one file and, where the file holds members (a wheel, an ``ar``
archive), of one of its top-level members; it names them by their place among that member's images in
the file's scan (the first is 0) and their address: a process that has the images (the caller, and the
workers of the local pool, forked from it) uses them as they are (:attr:`ImageUnit.held`); a process that
has not (a Dask worker, which gets the unit pickled: ``held`` does not travel, it holds views of the
caller's mapped files) scans the file again, with the same scope, and takes the images at those places
(:meth:`ImageUnit.images`).  In a zip only the unit's member is read again
(:attr:`devbin.images.scan.Scanner.only_member`: the other members are passed over unread, so a worker
inflates, or downloads, one library of a wheel, not the wheel).  A member of a file on disk is cut into
several units where it holds many bytes of images (each inflates it again, for the workers to share
it); one of a URL is not (each unit would download it again).  The same scan of the same bytes yields
the same images in the same order (:mod:`devbin.images.scan`), so the worker's image is the caller's;
its address is checked all the same (a file changed in between is an error, not another image's
result).

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
from devbin.images.address import Member
from devbin.images.scan import Scanner, ToScan
from devbin.images.scanreport import ScanReport

if TYPE_CHECKING:
    from devbin.images.record import Image

__all__ = ["ImageUnit", "check_address", "connect", "image_units", "run_unit", "unit_parts"]

R = TypeVar("R")

#: Units per Dask worker a large file's images are cut into: enough to even out images of different
#: cost, few enough that the file is not scanned again too often (each unit scans it once in a worker).
UNITS_PER_WORKER = 4
#: A file whose chosen images hold fewer bytes than this is one unit whatever ``parts`` says: scanning it
#: again in several workers costs more than they save.
MIN_SPLIT_BYTES = 8 << 20


@dataclass(frozen=True)
class ImageUnit:
    """Images ``places`` (their places among the images of ``member`` in the scan of ``file``, and their
    addresses; ``member`` None: among the file's images) of one file, scanned with ``all`` (cuobjdump's
    ``-all``).  ``held``: the images themselves, where this process has them (never pickled)."""

    file: ToScan
    all: bool
    places: tuple[tuple[int, str], ...]
    held: tuple[Image, ...] | None = field(default=None, compare=False, repr=False)
    member: Member | None = None

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
        scanner = Scanner(ScanReport(), all=self.all)
        scanner.only_member = self.member
        scan = cast("Generator[tuple[Image, Any], None, None]", scanner.one(self.file))
        try:
            place = -1
            for image, _ in scan:
                if _member(image) != self.member:
                    continue
                place += 1
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


def _member(image: Image) -> Member | None:
    """The top-level member ``image`` sits in (a wheel's library, an archive's object), if any."""
    steps = image.address.steps
    return steps[0] if steps and isinstance(steps[0], Member) else None


def _file_of(image: Image) -> ToScan:
    """The file ``image`` was found in, as the scan names it (its address's path)."""
    from devbin.images.remote import is_url
    path = image.address.path
    return (path, path if is_url(path) else Path(path), False)


def image_units(found: Sequence[Image], chosen: Sequence[Image], *, all: bool, parts: int = 0) -> list[ImageUnit]:
    """The images ``chosen`` (some of ``found``, the whole scan in its order, kept in that order) as units:
    consecutive images of one file's top-level member (or of the file), each member's cut into at most
    ``parts`` units of about equal bytes (one below :data:`MIN_SPLIT_BYTES`, and one for a URL; 0: one unit
    per image, what the local pool wants: its items are chunked
    by :func:`~devbin.images.parallel.ordered_map`)."""
    from devbin.images.remote import is_url
    wanted = {id(f) for f in chosen}
    groups: list[tuple[ToScan, Member | None, list[tuple[int, Image]]]] = []
    # A group is one member's images in one scan of one file.  A file named twice (or found in a folder and
    # named again after it) is scanned twice, its images one after the other under one path: its second
    # scan starts where an address of the scan so far comes again (one scan's addresses are distinct), and
    # its places count from 0 again, as a worker's scan of that file counts them.
    current: tuple[int, Member | None] | None = None
    scans, path, seen = 0, None, set[str]()
    place = 0
    for f in found:
        address = str(f.address)
        if f.address.path != path or address in seen:
            scans, path, seen = scans + 1, f.address.path, set()
        seen.add(address)
        key = (scans, _member(f))
        if key != current:
            current, place = key, 0
            groups.append((_file_of(f), key[1], []))
        if id(f) in wanted:
            groups[-1][2].append((place, f))
        place += 1
    units: list[ImageUnit] = []
    for file, member, taken in groups:
        for group in _cut(taken, 1 if parts and is_url(file[1]) else parts):
            units.append(ImageUnit(file, all, tuple((p, str(f.address)) for p, f in group),
                                   tuple(f for _, f in group), member))
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


#: The schemes of Dask's comm backends whose addresses are ``host:port``
#: (https://distributed.dask.org/en/stable/communications.html); the others (``inproc``, ``ucx``) are left to
#: the client to judge.
HOST_PORT_SCHEMES = frozenset({"tcp", "tls", "ws", "wss"})


def check_address(address: str) -> None:
    """Raise :class:`~devbin.errors.UsageError` (one line) unless ``address`` is a scheduler's address as
    Dask reads it (``distributed.comm.addressing``): a known scheme (none: ``tcp``) and, for the
    ``host:port`` schemes, a host and a port from 1 to 65535.  Nothing is checked where Dask is not
    installed (:func:`connect` says so)."""
    try:
        from distributed.comm.addressing import parse_address, parse_host_port
        from distributed.comm.registry import get_backend
    except ImportError:
        return
    expected = "expected tcp://HOST:PORT, such as tcp://127.0.0.1:8786"
    try:
        scheme, location = parse_address(address)
        get_backend(scheme)  # ValueError naming the known schemes
        if scheme in HOST_PORT_SCHEMES:
            host, port = parse_host_port(location)
            if not host:
                raise ValueError("no host")
            if not 0 < int(port) < 65536:
                raise ValueError(f"port {port} is not one of 1-65535")
    except (ValueError, TypeError) as e:
        raise UsageError(f"--scheduler {address!r}: not a Dask scheduler address ({e}); {expected}") from None


@contextlib.contextmanager
def connect(address: str | None) -> Iterator[Any]:
    """The ``dask.distributed.Client`` of the scheduler at ``address`` (``tcp://host:port``), closed on
    leaving; None for None (work in this machine's pool).  Raises :class:`~devbin.errors.UsageError` when
    Dask is not installed (one line naming the extra ``devbin[dask]``), the address is malformed
    (:func:`check_address`) or the scheduler cannot be reached."""
    if address is None:
        yield None
        return
    try:
        from distributed import Client as _Client
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'devbin[dask]' (dask, distributed, fsspec)") from None
    check_address(address)  # a Client made for a malformed one raises ValueError, then hangs in __del__
    try:
        make: Any = _Client  # typed loosely by distributed
        client = make(address, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise UsageError(f"cannot reach the Dask scheduler at {address}: {e}") from None
    try:
        yield client
    finally:
        client.close()
