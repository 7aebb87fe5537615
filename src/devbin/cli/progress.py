"""A progress bar on stderr for long scans, only when stderr is a terminal (rich draws it)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """Yield a ``progress(done, total)`` callback, or None when stderr is not a terminal."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # only for terminals

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), transient=True, console=None)
    task: list[Any] = []

    def update(done: int, total: int) -> None:
        if not task:
            task.append(bar.add_task(label, total=total))
        bar.update(task[0], completed=done, total=total)

    with bar:
        yield update
