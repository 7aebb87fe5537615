#!/usr/bin/env python3
"""Bytes per kernel: devbin v1 versus NVIDIA ``.nv.info`` versus AMD's msgpack metadata note.

    PYTHONPATH=src python scripts/format_sizes.py

The "typical kernel" has 10 facts (attributes) and 4 parameters (two
pointers, two ints).  Each format is charged for the records it spends on the
facts it can express; facts a format cannot express cost it nothing, which
favours the vendors.  Section headers and string tables are not counted for
anyone.

* devbin: measured with the real encoder, as the marginal size of one more
  kernel record in ``.devbin.func`` (the symbol name lives in ``.symtab``).
* NVIDIA: computed from the ``.nv.info`` TLV layouts (4-byte record header;
  indexed records ``{u32 sym, u32 value}``; ``KPARAM_INFO`` 12-byte payload).
* AMD: the kernel map of the ``NT_AMDGPU_METADATA`` note, built and packed
  with the ``msgpack`` package (keys sorted, as LLVM writes them).

``--example`` prints the worked example of docs/FORMAT.md instead.
"""

from __future__ import annotations

import sys

import msgpack  # type: ignore[import-untyped]

from devbin.binary import ByteView
from devbin.formats.devsec import constants as C
from devbin.formats.devsec import decode, encode
from devbin.model import (
    Attribute,
    CodeObject,
    Function,
    FunctionKind,
    KernelParam,
    Metadata,
    StdAttr,
    Target,
    TypeKind,
    encode_param_layout,
)

PARAMS = (
    KernelParam(TypeKind.POINTER, 0, 8, 8),
    KernelParam(TypeKind.POINTER, 8, 8, 8),
    KernelParam(TypeKind.INT, 16, 4, 4),
    KernelParam(TypeKind.INT, 20, 4, 4),
)
FACTS: dict[str, int | tuple[int, int, int]] = {  # fact -> value, shared by the three encodings
    "regs_general": 40,
    "regs_scalar": 24,
    "stack_size": 16,
    "frame_size": 16,
    "shared_bytes": 4096,
    "param_bytes": 24,
    "max_threads": (256, 1, 1),
    "max_regs": 255,
    "wave_size": 64,
}
MAX_THREADS = (256, 1, 1)
assert FACTS["max_threads"] == MAX_THREADS


def typical_kernel(name: str) -> Function:
    attrs = [Attribute(StdAttr[k.upper()], v) for k, v in FACTS.items()]
    attrs.append(Attribute(StdAttr.PARAM_LAYOUT, encode_param_layout(PARAMS)))
    assert len(attrs) == 10
    return Function(name, FunctionKind.KERNEL, tuple(attrs))


def devbin_bytes_per_kernel() -> int:
    """Marginal size of one typical kernel record in ``.devbin.func``."""
    def size(n: int) -> int:
        names = [f"k{i}" for i in range(n)]
        obj = CodeObject(functions=tuple(typical_kernel(x) for x in names))
        secs = encode(obj, lambda s: names.index(s) + 1, n + 1)
        return sum(len(s.data) for s in secs if s.name == C.SEC_FUNC)

    return size(2) - size(1)


NV_RECORD_HEADER = 4  # u8 fmt, u8 attr, u16 value-or-size


def nvidia_bytes_per_kernel() -> tuple[int, dict[str, int]]:
    """``.nv.info`` bytes for the same facts, from the record layouts."""
    parts = {
        # global .nv.info, indexed EIFMT_SVAL records {u32 sym, u32 value}
        "REGCOUNT": NV_RECORD_HEADER + 8,
        "FRAME_SIZE": NV_RECORD_HEADER + 8,
        "MAX_STACK_SIZE": NV_RECORD_HEADER + 8,
        # per-function .nv.info.<f>
        "PARAM_CBANK": NV_RECORD_HEADER + 8,  # {u32 sym, u16 offset, u16 size}
        "CBANK_PARAM_SIZE": NV_RECORD_HEADER,  # EIFMT_HVAL
        "KPARAM_INFO x4": len(PARAMS) * (NV_RECORD_HEADER + 12),
        "MAX_THREADS": NV_RECORD_HEADER + 12,  # u32 x, y, z
        "MAXREG_COUNT": NV_RECORD_HEADER,  # EIFMT_HVAL
        # regs_scalar, wave_size: not recorded; shared_bytes: size of .nv.shared.<f> (a section header)
    }
    return sum(parts.values()), parts


def amd_kernel_map(name: str = "k0") -> dict[str, object]:
    def arg(p: KernelParam) -> dict[str, object]:
        if p.kind == TypeKind.POINTER:
            return {".address_space": "global", ".offset": p.offset, ".size": p.size, ".value_kind": "global_buffer"}
        return {".offset": p.offset, ".size": p.size, ".value_kind": "by_value"}

    m: dict[str, object] = {
        ".args": [arg(p) for p in PARAMS],
        ".group_segment_fixed_size": FACTS["shared_bytes"],
        ".kernarg_segment_align": 8,
        ".kernarg_segment_size": FACTS["param_bytes"],
        ".max_flat_workgroup_size": MAX_THREADS[0],
        ".name": name,
        ".private_segment_fixed_size": FACTS["stack_size"],
        ".sgpr_count": FACTS["regs_scalar"],
        ".symbol": f"{name}.kd",
        ".vgpr_count": FACTS["regs_general"],
        ".wavefront_size": FACTS["wave_size"],
        # frame_size, max_regs: not recorded
    }
    return dict(sorted(m.items()))


def amd_bytes_per_kernel() -> int:
    """One element of ``amdhsa.kernels``: the packed kernel map."""
    packed: bytes = msgpack.packb(amd_kernel_map(), use_bin_type=True)
    return len(packed)


# -- worked example of docs/FORMAT.md -------------------------------------------------

EXAMPLE_SYMBOLS = ("", "scale")  # .symtab: [0] null, [1] scale


def example_object() -> CodeObject:
    k = Function("scale", FunctionKind.KERNEL, (
        Attribute(StdAttr.REGS_GENERAL, 12),
        Attribute(StdAttr.PARAM_BYTES, 16),
        Attribute(StdAttr.PARAM_LAYOUT, encode_param_layout((
            KernelParam(TypeKind.POINTER, 0, 8, 8),
            KernelParam(TypeKind.FLOAT, 8, 4, 4),
        ))),
        Attribute(StdAttr.MAX_THREADS, (256, 1, 1)),
    ))
    return CodeObject(Target("nvidia", "sm_90"), (k,), metadata=Metadata.of(producer="devbin"))


def example_sections() -> dict[str, bytes]:
    obj = example_object()
    secs = encode(obj, EXAMPLE_SYMBOLS.index, len(EXAMPLE_SYMBOLS))
    out = {s.name: s.data for s in secs}
    assert decode({k: ByteView(v) for k, v in out.items()}, EXAMPLE_SYMBOLS.__getitem__, 2) == obj
    return out


def main(argv: list[str]) -> int:
    if "--example" in argv:
        for name, data in example_sections().items():
            print(f"{name} ({len(data)} bytes): {data.hex(' ')}")
        return 0
    nv, parts = nvidia_bytes_per_kernel()
    print("typical kernel: 10 attributes, 4 parameters")
    print(f"devbin v1 .devbin.func record: {devbin_bytes_per_kernel()} bytes")
    print(f"NVIDIA .nv.info records:       {nv} bytes ({', '.join(f'{k} {v}' for k, v in parts.items())})")
    print(f"AMD msgpack kernel map:        {amd_bytes_per_kernel()} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
