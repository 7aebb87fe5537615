"""A progress bar on stderr for long scans and prunes, only when stderr is a terminal (rich draws it).

It counts bytes (the files' sizes, :class:`devbin.images.scan.ByteProgress`; a prune's libraries), not
files: a count of files read "0/1" for the whole of a one-wheel scan.  Nothing is drawn when stderr is a
pipe or a file, so what a command prints and writes is the same with or without it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def progress_bar(label: str, *, bytes: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """Yield a ``progress(done, total)`` callback, or None when stderr is not a terminal; ``bytes``: the
    counts are bytes (shown as KiB, MiB ...), else items (``3/40``)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console  # only for terminals
    from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn

    count = DownloadColumn(binary_units=True) if bytes else MofNCompleteColumn()
    # On stderr: rich's default console is stdout's, where the bar went into the results (and was never
    # drawn when stdout is a pipe, the terminal being stderr).
    bar = Progress(TextColumn(label), BarColumn(), count, transient=True, console=Console(stderr=True))
    task: list[Any] = []

    def update(done: int, total: int) -> None:
        if not task:
            task.append(bar.add_task(label, total=total))
        bar.update(task[0], completed=done, total=total)

    with bar:
        yield update
