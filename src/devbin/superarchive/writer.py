"""Emit a planned super-archive through the deterministic GNU ar writer.

The plan (:func:`devbin.superarchive.build.plan_superarchive`) fixes every member, its ar
name and the symbols the ``/`` index gives it (only the index target's, so GNU ld and
``nm -s`` see one coherent single-target library); :func:`devbin.formats.ar.writer.write_archive`
then plans offsets and emits through :class:`devbin.binary.Emitter`.  The manifest holds no
offsets, so nothing has to be patched after layout.  Same inputs, same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from devbin.formats.ar.writer import write_archive
from devbin.superarchive.build import StorageKind, SuperPlan, TargetInput, plan_superarchive
from devbin.superarchive.packed import PackOptions

__all__ = ["create", "write_superarchive"]


def write_superarchive(plan: SuperPlan) -> bytes:
    """The archive bytes of ``plan``: ``!<arch>``, optional ``/``, optional ``//``, manifest, members."""
    return write_archive(plan.ar_members)


def create(
    targets: Sequence[TargetInput],
    *,
    index: str | bool | None = None,
    extra: Mapping[str, Any] | None = None,
    storage: StorageKind = "plain",
    level: int = 19,
    delta: bool = True,
    max_depth: int = 3,
    layout: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> bytes:
    """Plan and write a super-archive of ``targets`` (see :func:`plan_superarchive` for ``index``).

    ``storage="packed"`` compresses members (zstd ``level``, deltas against siblings unless
    ``delta`` is False, chains at most ``max_depth`` long: reading one member decodes at most
    ``max_depth`` other members; ``layout`` 2 compresses whole members, 1 per-section frames;
    docs/FORMAT.md §16.6).  ``progress(done, total)`` is called while packing (it can take
    seconds per megabyte).
    """
    pack = PackOptions(level=level, delta=delta, max_depth=max_depth, layout=layout) \
        if storage == "packed" else None
    return write_superarchive(plan_superarchive(targets, index=index, extra=extra, storage=storage, pack=pack,
                                                progress=progress))
