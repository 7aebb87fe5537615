"""A relocation as the loader applied it (:class:`AppliedReloc`): what a vendor's load back end
returns from applying or planning a code object's relocations (:class:`devbin.load.backend.LoadBackend`),
and what :class:`devbin.load.LoadedCodeObject` reports."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AppliedReloc"]


@dataclass(frozen=True, slots=True)
class AppliedReloc:
    """A relocation as applied: the ``value`` (``width`` bytes) written at device ``address``.

    ``symbol`` is the relocation's symbol (None for ``RELATIVE64``); ``target_object`` the code
    object that defines it (None for a weak reference left at 0).
    """

    address: int
    offset: int  # in the code object
    type_name: str
    width: int
    value: int
    symbol: str | None
    addend: int
    target_object: str | None
    site: str
