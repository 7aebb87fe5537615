"""``devbin size``: where the bytes of device code go, from one kernel to a whole environment.

* :mod:`devbin.size.account`: files -> images -> functions, every device-section byte accounted for.
* :mod:`devbin.size.report`: the one report dict (``devbin size --json``, the HTML report) with
  ``--keep`` savings from :func:`devbin.packaging.pruning.prune` itself, and
  :func:`~devbin.size.report.duplicates`: identical images and functions and what their copies cost.
* :mod:`devbin.size.budget`: ``--budget`` rules; :mod:`devbin.size.diff`: two builds compared.
"""

from __future__ import annotations

from devbin.size.account import FileSize, FunctionSize, ImageSize, demangle, measure, measure_bytes

__all__ = ["FileSize", "FunctionSize", "ImageSize", "demangle", "measure", "measure_bytes"]
