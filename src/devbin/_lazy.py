"""Package attributes imported on first use (PEP 562), so that importing a package imports
none of its modules: a read path pays only for the readers it meets, never for a writer.

A package lists where each public name lives and assigns the returned function to its
``__getattr__``; for type checkers it imports the same names under ``TYPE_CHECKING``::

    __getattr__ = lazy_attributes(__name__, {"write_fatbin": "writer", "compress": None})

A value of None names a submodule itself; any other submodule is imported when asked for by name
(``package.reader``).  ``from package import name`` works as before.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, where: Mapping[str, str | None]) -> Callable[[str], Any]:
    """``__getattr__`` for ``package``: ``name`` from submodule ``where[name]`` (None: the submodule ``name``)."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            # Any other submodule, as importing the package used to import them all (``pkg.reader``).
            if name.startswith("_") or importlib.util.find_spec(f"{package}.{name}") is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            return importlib.import_module(f"{package}.{name}")
        sub = where[name]
        module = importlib.import_module(f"{package}.{name if sub is None else sub}")
        value = module if sub is None else getattr(module, name)
        setattr(sys.modules[package], name, value)  # the next access is a plain attribute
        return value

    return __getattr__
