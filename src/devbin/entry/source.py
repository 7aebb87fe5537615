"""``devbin.open()``: every device image of a file, folder or buffer, as :class:`~devbin.images.Image` records.

::

    with devbin.open("libk.so") as src:            # any file devbin reads, a folder, or bytes
        for image in src.images:                   # what `devbin list` prints, in its order
            print(image.address, image.kind, image.arch)
        cubin = src.image("libk.so@.nv_fatbin#0.1")   # an address `devbin list` printed
        model = cubin.code_object()                # the unified CodeObject (None for PTX, bitcode ...)

The scan is the one :mod:`devbin.images.scan` does for ``devbin list``: the same images, the
same addresses, the same default scope (cuobjdump's; ``all=True`` is ``devbin list --all``).

Lifetime: a file is memory-mapped while it is scanned, and the images of a file stored plain
are windows on that map (zero-copy: :meth:`Image.data` returns a ``memoryview``).  Leaving the
``with`` block (or :meth:`Source.close`) drops this object's images, so the maps are unmapped
unless the caller still holds an image or a view taken from one: those keep their map, and
stay valid, for as long as they live.  Keep ``bytes(image.data())`` to hold an image's bytes
independently of the file.  For ``bytes`` given by the caller nothing is mapped: the images are
views on those bytes (do not change a ``bytearray`` while they are used).
"""

from __future__ import annotations

import mmap
import os
from types import TracebackType

from devbin.binary import Buffer
from devbin.errors import FormatError, UsageError
from devbin.images.address import Address
from devbin.images.record import Image, find_image
from devbin.images.scan import scan, scan_bytes
from devbin.images.scanreport import ScanReport

__all__ = ["BYTES_NAME", "Source", "open"]

#: The path of the addresses of images read from a buffer, unless ``name=`` gives another.
BYTES_NAME = "<bytes>"


class Source:
    """What :func:`open` read: its device images (``images``), found by address (``image``)."""

    def __init__(self, source: str | os.PathLike[str] | Buffer, *, all: bool = False, name: str | None = None) -> None:
        self.report = ScanReport()
        self.all = all
        if isinstance(source, bytes | bytearray | memoryview | mmap.mmap):
            self.name = name or BYTES_NAME
            images = list(scan_bytes(source, self.name, all=all, report=self.report))
            failed = not images and bool(self.report.warnings)
        elif isinstance(source, str | os.PathLike):
            if name is not None:
                raise UsageError("name= is for bytes; a path names itself")
            self.name = os.fspath(source)
            images = list(scan([self.name], all=all, report=self.report))
            failed = bool(self.report.failed)
        else:
            raise UsageError(f"devbin.open() takes a path or bytes, not {type(source).__name__}")
        if failed:
            raise FormatError(f"{self.name}: no device image could be read: {'; '.join(self.report.warnings)}",
                              fmt="scan", where=self.name)
        self._images: list[Image] | None = images

    # -- what it holds ------------------------------------------------------------------
    @property
    def images(self) -> list[Image]:
        """Every device image, in ``devbin list`` order (empty when the input holds no device code)."""
        if self._images is None:
            raise UsageError(f"{self.name}: devbin.open() was closed")
        return self._images

    @property
    def warnings(self) -> list[str]:
        """What the scan skipped and why (corrupt members, unreadable files), as ``devbin list`` warns."""
        return self.report.warnings

    def image(self, address: Address | str) -> Image:
        """The image at ``address`` (an :class:`~devbin.images.Address` or its text, as ``devbin list``
        prints it; text starting with ``!``, ``@`` or ``#`` is taken after the opened path, so
        ``src.image("#0.1")`` names entry 1 of a bare fatbin).  UsageError naming the address and
        the addresses there are when no image is at it."""
        if isinstance(address, str) and address[:1] in ("!", "@", "#"):
            address = str(Address(self.name)) + address
        return find_image(self.images, address)

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        """Drop the images (see the module docstring: maps go with the last view on them)."""
        self._images = None

    def __enter__(self) -> Source:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._images is None else f"{len(self._images)} images"
        return f"<devbin.Source {self.name!r}: {state}>"


def open(source: str | os.PathLike[str] | Buffer, *, all: bool = False, name: str | None = None) -> Source:
    """Every device image in ``source``: a path (host ELF, cubin, AMDGPU code object, fatbin,
    OffloadBinary, clang offload bundle, devbin wrapped image, ``ar`` archive or super-archive,
    wheel or zip, folder) or the bytes of one (``bytes``, ``bytearray``, ``memoryview``; their
    addresses start with ``name``, ``<bytes>`` by default).

    The images are those ``devbin list`` prints, in its order and scope (``all=True``: ``--all``).
    Use it as a context manager (see the module docstring on the lifetime of views).  Raises
    OSError for a path that cannot be read, FormatError when the input is a device binary that
    gives no image, only errors (truncated, corrupt); input with no device code gives no images.
    """
    return Source(source, all=all, name=name)
