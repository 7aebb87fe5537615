"""devbin's wrapped single image: key/value metadata ahead of one device image.

See :mod:`devbin.formats.wrapped.layout` for the bytes and docs/FORMAT.md §15.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin._lazy import lazy_attributes

if TYPE_CHECKING:
    from devbin.formats.wrapped.layout import HEADER_ALIGN, MAGIC, VERSION
    from devbin.formats.wrapped.reader import WrappedImage, parse_wrapped
    from devbin.formats.wrapped.writer import write_wrapped

__all__ = ["HEADER_ALIGN", "MAGIC", "VERSION", "WrappedImage", "parse_wrapped", "write_wrapped"]

__getattr__ = lazy_attributes(__name__, {
    "HEADER_ALIGN": "layout",
    "MAGIC": "layout",
    "VERSION": "layout",
    "WrappedImage": "reader",
    "parse_wrapped": "reader",
    "write_wrapped": "writer",
})
