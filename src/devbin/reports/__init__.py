"""The reports the CLI prints, as library functions returning typed records (issue 25, item 4).

Each report is computed here once and returned as typed records (``TypedDict`` shapes that are
the JSON documents of docs/JSON.md, checked against ``devbin/schemas/*.json`` by the tests); the
command-line modules parse their arguments, call these and render text or JSON, nothing else:

* :func:`resources_report` (:mod:`devbin.reports.resources`): per-function registers, stack, memory and
  spills of every code object under some paths (``devbin resources --json``'s document);
* :func:`inspect_report` (:mod:`devbin.reports.inspect`): what ``devbin inspect --json`` says of a
  file; :func:`inspect_elf` of one ELF; :func:`container_images`: which images of a file inspect and
  callgraph read;
* :func:`callgraph_report` (:mod:`devbin.reports.callgraph`): the call graph of each code object of a file
  (``devbin callgraph --json``'s document);
* the size report is :func:`devbin.size.report.size_report` (``devbin size --json``).

Every report reads a code object's model through :func:`devbin.importers.model_of`, so each file
has one answer whichever report asks.  Names are imported on first use (:mod:`devbin._lazy`):
``import devbin.reports`` imports no reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin._lazy import lazy_attributes

if TYPE_CHECKING:
    from devbin.reports.callgraph import callgraph_report
    from devbin.reports.inspect import container_images, inspect_elf, inspect_report
    from devbin.reports.resources import resources_report

__all__ = ["callgraph_report", "container_images", "inspect_elf", "inspect_report", "resources_report"]

# (a function is not named like its module: importing ``devbin.reports.resources`` sets the package's
# attribute ``resources`` to the module)
__getattr__ = lazy_attributes(__name__, {"callgraph_report": "callgraph", "container_images": "inspect",
                                         "inspect_elf": "inspect", "inspect_report": "inspect",
                                         "resources_report": "resources"})
