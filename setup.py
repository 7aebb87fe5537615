"""The optional C fast path (``devbin.binary._cdecode``); everything else is in pyproject.toml.

The extension is built where a C compiler is present; where none is (or the build fails for any
other reason) the install goes on without it and devbin uses its pure-Python decoders, which give
the same results (``DEVBIN_PURE_PYTHON=1`` forces them where the extension is built).
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """``build_ext`` that never fails the install: a missing or broken compiler only leaves the fast path out."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - any failure here must leave the pure-Python install working
            self._skip(e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001
            self._skip(e)

    @staticmethod
    def _skip(e: BaseException) -> None:
        print(f"devbin: the C fast path was not built ({e}); the pure-Python decoders will be used",
              file=sys.stderr)


setup(
    ext_modules=[Extension("devbin.binary._cdecode", ["src/devbin/binary/_cdecode.c"], optional=True,
                           extra_compile_args=["-O2"] if sys.platform != "win32" else [])],
    cmdclass={"build_ext": OptionalBuildExt},
)
