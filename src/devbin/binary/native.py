"""The compiled fast paths: which are used, and the switch that turns them off.

Some hot table decoders have a C twin (an optional extension module built by ``pip install``
where a C compiler is present, see ``setup.py``).  Every one of them has a pure-Python
implementation with the same signature and results, which is used when the extension is not
built, or always when the environment variable ``DEVBIN_PURE_PYTHON`` is set to a non-empty
value other than ``0`` (read once, when the module that uses the fast path is imported).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["PURE_PYTHON_ENV", "load_native", "pure_python_forced"]

PURE_PYTHON_ENV = "DEVBIN_PURE_PYTHON"


def pure_python_forced() -> bool:
    """True when ``DEVBIN_PURE_PYTHON`` asks for the pure-Python paths."""
    return os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")


def load_native(name: str) -> ModuleType | None:
    """The compiled module ``name`` (e.g. ``devbin.formats.elf._ctables``), or None when it is not built
    or the pure-Python paths are forced."""
    if pure_python_forced():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
