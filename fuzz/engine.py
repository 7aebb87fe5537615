"""The atheris entry every fuzz target runs as a script (``python fuzz/fuzz_elf.py CORPUS -runs=N``):
instrument the modules already imported (devbin's readers, which each target imports at its top),
then hand ``TestOneInput`` and libFuzzer's command line to atheris.  ``run_all.py`` puts the
repository and ``src/`` on ``PYTHONPATH``, which makes this module importable as ``fuzz.engine``."""

from __future__ import annotations

import sys
from collections.abc import Callable


def fuzz(test_one_input: Callable[[bytes], None]) -> None:
    import atheris  # type: ignore[import-untyped]  # only where fuzzing runs (the test extra, x86-64/AArch64)

    atheris.instrument_all()
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
