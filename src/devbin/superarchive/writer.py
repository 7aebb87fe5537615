"""Emit a planned super-archive through the deterministic GNU ar writer.

The plan (:func:`devbin.superarchive.build.plan_superarchive`) fixes every member, its ar
name and the symbols the ``/`` index gives it (only the index target's, so GNU ld and
``nm -s`` see one coherent single-target library); :func:`devbin.formats.ar.writer.write_archive`
then plans offsets and emits through :class:`devbin.binary.Emitter`.  The manifest holds no
offsets, so nothing has to be patched after layout.  Same inputs, same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from devbin.formats.ar.writer import write_archive
from devbin.superarchive.build import SuperPlan, TargetInput, plan_superarchive

__all__ = ["create", "write_superarchive"]


def write_superarchive(plan: SuperPlan) -> bytes:
    """The archive bytes of ``plan``: ``!<arch>``, optional ``/``, optional ``//``, manifest, members."""
    return write_archive(plan.ar_members)


def create(
    targets: Sequence[TargetInput],
    *,
    index: str | bool = True,
    extra: Mapping[str, Any] | None = None,
) -> bytes:
    """Plan and write a super-archive of ``targets`` (see :func:`plan_superarchive` for ``index``)."""
    return write_superarchive(plan_superarchive(targets, index=index, extra=extra))
