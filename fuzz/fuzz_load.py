"""Fuzz target: the loader over any bytes.

Contract under test: for any bytes, loading them into an executable (simulated backend) for
an AMDGPU target and an NVIDIA target (each eager and lazy: lookups then map call-graph
closures), freezing, looking up and listing the symbols either succeeds or raises
:class:`devbin.errors.DeviceBinaryError`, and a failed load leaves the executable as it was
(it can still be frozen, and lists the same symbols as one that never saw the input).

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_load.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib

from devbin.errors import DeviceBinaryError
from devbin.load import Executable


def TestOneInput(data: bytes) -> None:  # atheris' required name
    for target, lazy in (("gfx90a", False), ("gfx90a", True), ("sm_90", False), ("sm_90", True)):
        exe = Executable(target, lazy=lazy)
        try:
            exe.load_code_object(data, name="fuzz")
        except DeviceBinaryError:
            assert not exe.code_objects  # a failed load leaves nothing behind
            continue
        with contextlib.suppress(DeviceBinaryError):
            exe.freeze()
            if lazy:  # the first lookups map call-graph closures
                for name in [s.name for s in exe.symbols()][:4]:
                    exe.symbol(name)
                exe.stats()
            for s in exe.symbols():
                s.to_dict()
            exe.to_dict()


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
