"""Per-function resource usage of a cubin, as data and as ``cuobjdump -res-usage`` prints it.

cuobjdump's block for one cubin (checked line for line in the tests)::

    <empty line>
    Resource usage:
     Common:
      GLOBAL:28 CONSTANT[4]:16
     Function apply_op:
      REG:24 STACK:0 SHARED:0 LOCAL:0 CONSTANT[2]:32 CONSTANT[0]:384 TEXTURE:0 SURFACE:0 SAMPLER:0

Functions come in ``.text.<f>`` section order; constant banks in section
order; ``CONSTANT[n]`` entries appear only for banks the function has.
TEXTURE/SURFACE/SAMPLER count bound texture, surface and sampler references,
which CUDA 12+ code does not have (they are bindless): devbin prints 0, as
cuobjdump does for every cubin in the test corpus.  A stack size that is not
statically known (``EIATTR_MIN_STACK_SIZE`` 0xFFFFFFFF: nvlink writes it for a
kernel that reaches recursion or an indirect call it cannot bound, and warns
"Stack size for entry function ... cannot be statically determined") prints
``STACK:UNKNOWN``, as cuobjdump prints it.
"""

from __future__ import annotations

from typing import Any

from devbin.escape.text import visible
from devbin.targets.nvidia.cubin import STACK_UNKNOWN, Cubin, CubinFunction


def function_usage(f: CubinFunction) -> dict[str, Any]:
    return {
        "name": f.name,
        "kind": "kernel" if f.is_entry else "device",
        "registers": f.registers,
        "regcount": f.regcount,
        "stack": f.stack,
        "frame": f.frame_size,
        "shared": f.shared,
        "local": f.local,
        "constant": [{"bank": b, "size": s} for b, s in f.constant_banks.items()],
        "texture": 0,
        "surface": 0,
        "sampler": 0,
    }


def usage(cubin: Cubin) -> dict[str, Any]:
    """Resource usage of every function, plus module-wide GLOBAL and constant banks."""
    return {
        "arch": cubin.arch,
        "common": {
            "global": cubin.global_bytes,
            "constant": [{"bank": b, "size": s} for b, s in cubin.common_constant_banks.items()],
        },
        "functions": [function_usage(f) for f in cubin.functions],
    }


def format_cuobjdump(u: dict[str, Any]) -> str:
    """The lines ``cuobjdump -res-usage`` prints for one cubin (starting with its empty line)."""
    common = " ".join([f"GLOBAL:{u['common']['global']}"]
                      + [f"CONSTANT[{c['bank']}]:{c['size']}" for c in u["common"]["constant"]])
    lines = ["", "Resource usage:", " Common:", f"  {common}"]
    for f in u["functions"]:
        banks = "".join(f" CONSTANT[{c['bank']}]:{c['size']}" for c in f["constant"])
        lines.append(f" Function {visible(f['name'])}:")  # the text rule: a name read from the file
        stack = "UNKNOWN" if f["stack"] == STACK_UNKNOWN else f["stack"]
        lines.append(f"  REG:{f['registers']} STACK:{stack} SHARED:{f['shared']} LOCAL:{f['local']}{banks} "
                     f"TEXTURE:{f['texture']} SURFACE:{f['surface']} SAMPLER:{f['sampler']}")
    return "\n".join(lines) + "\n"
