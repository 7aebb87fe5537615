"""Bounds-checked byte access (reading) and checked emission (writing)."""

from devbin.binary.view import Buffer, ByteView, Cursor, format_view, join_where
from devbin.binary.writer import Emitter, align_up, sleb, uleb

__all__ = ["Buffer", "ByteView", "Cursor", "Emitter", "align_up", "format_view", "join_where", "sleb", "uleb"]
