"""devbin: device binaries (cubins, AMDGPU code objects, containers, archives).

Two API levels, by a naming rule: the unified, vendor-neutral level lives in
:mod:`devbin.model` (``CodeObject``, ``Function``, ``CallGraph`` ...); the
format level lives under :mod:`devbin.formats` with one package per on-disk
format (``formats.elf``, ``formats.devsec`` ...), each exposing the raw,
spec-named fields.  A unified object can always be traced back to the format
objects it came from.

Entry points: :func:`devbin.open` (any file devbin reads, a folder, or bytes: its device
images as :class:`devbin.images.Image` records, docs/API.md); the reports the CLI prints
(:func:`devbin.resources_report`, :func:`devbin.inspect_report`, :func:`devbin.callgraph_report`,
:func:`devbin.size_report`: typed records, the JSON documents of docs/JSON.md); and at the ELF level
:func:`devbin.open_elf` (a path, memory-mapped, as a context manager) and
:func:`devbin.parse_elf` (bytes or a memoryview).  ``devbin.open_file`` and ``devbin.parse``,
their names in devbin 0.1, work for one more release and warn (``DeprecationWarning``).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from devbin._version import __version__

if TYPE_CHECKING:
    from devbin.entry.elf import open_elf, parse_elf
    from devbin.entry.source import Source, open
    from devbin.reports import callgraph_report, inspect_report, resources_report
    from devbin.size.report import size_report

__all__ = ["Source", "__version__", "callgraph_report", "inspect_report", "open", "open_elf", "pack", "parse_elf",
           "prune", "resources_report", "select", "size_report"]

#: Names of devbin 0.1 kept for one release: old name -> new name (docs/API.md, "The ELF level").
DEPRECATED_NAMES = {"open_file": "open_elf", "parse": "parse_elf"}

#: The reports the CLI prints, as library functions (docs/API.md, "Reports"): name -> module.
_REPORTS = {"resources_report": "devbin.reports.resources", "inspect_report": "devbin.reports.inspect",
            "callgraph_report": "devbin.reports.callgraph", "size_report": "devbin.size.report"}


def __getattr__(name: str) -> Any:
    """Every public name but ``__version__`` is imported on first use (``import devbin`` imports
    no reader: the CLI's start-up, ``devbin --version``, pays only for what a command uses)."""
    if name in DEPRECATED_NAMES:
        new = DEPRECATED_NAMES[name]
        warnings.warn(f"devbin.{name} is deprecated, use devbin.{new} (it reads one ELF file; devbin.open reads "
                      f"any container); devbin.{name} goes in the next release", DeprecationWarning, stacklevel=2)
        name = new
    if name in ("open_elf", "parse_elf"):
        from devbin.entry import elf
        return getattr(elf, name)
    if name in ("open", "Source"):
        from devbin.entry import source
        return getattr(source, name)
    if name == "pack":
        from devbin.packaging import pack
        return pack
    if name == "prune":
        from devbin.packaging.pruning import prune
        return prune
    if name == "select":
        from devbin.packaging.selection import select
        return select
    if name in _REPORTS:
        import importlib
        return getattr(importlib.import_module(_REPORTS[name]), name)
    raise AttributeError(f"module 'devbin' has no attribute {name!r}")
