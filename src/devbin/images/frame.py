"""The file an image was found in: its address and what holds it."""

from __future__ import annotations

from dataclasses import dataclass

from devbin.images.address import Address
from devbin.images.record import Image

__all__ = ["Frame", "Hit"]


@dataclass(frozen=True, slots=True)
class Frame:
    """The innermost file being scanned.

    ``address`` is its address (every image in it extends it); ``origin`` what holds it:
    ``file`` (on disk, or the bytes given), ``ar`` (an archive member: cuobjdump numbers and
    heads an archive's images together), ``zip`` or ``wrapped``.
    """

    address: Address
    origin: str = "file"

    @property
    def where(self) -> str:
        """The file's address as text: the prefix of warnings."""
        return str(self.address)


#: An image and the file it was found in.
Hit = tuple[Image, Frame]
