"""The file a scan is in: its address, and the names the old ``devbin.discover`` records gave it."""

from __future__ import annotations

from dataclasses import dataclass

from devbin.images.address import Address
from devbin.images.record import Image

__all__ = ["Frame", "Hit"]


@dataclass(frozen=True, slots=True)
class Frame:
    """The innermost file being scanned.

    ``address`` is its address (every image in it extends it).  ``display`` (``lib.a(k.o)``,
    ``w.whl!x.so``) and ``origin`` (what holds it: ``file``, ``ar``, ``zip``, ``wrapped``) are
    what :mod:`devbin.discover`, the compatibility shim, still reports to the consumers not yet
    ported to :class:`~devbin.images.Image`.
    """

    address: Address
    display: str
    origin: str = "file"

    @property
    def where(self) -> str:
        """The file's address as text: the prefix of warnings."""
        return str(self.address)


#: An image and the file it was found in.
Hit = tuple[Image, Frame]
