"""NVIDIA ``.nv.callgraph`` and ``.nv.prototype`` sections, and prototype strings.

``.nv.callgraph`` (entsize 8): ``{u32 a, i32 b}`` pairs in four blocks, each
opened by a marker ``{0, -N}`` that is present even when the block is empty
(as nvdisasm and ``nvlink --dump-callgraph`` show it; an empty graph is the 32 bytes
``0 -1 0 -2 0 -3 0 -4``, e.g. mikex86/LibreCuda ``tests/many_kernels_launch/empty_kernel.asm``):

* ``-1`` direct calls: ``a`` calls ``b`` (symbol indices);
* ``-2`` address-taken functions: ``a`` with ``b`` = ``.strtab`` offset of its prototype string;
* ``-3`` functions making indirect calls: ``a`` with ``b`` = offset of the call site's prototype string;
* ``-4`` address references: ``a`` materialises the address of ``b``.

A marker of a block this version does not know opens a block that is kept
raw.  ``.nv.prototype`` (entsize 8): ``{u32 sym, u32 strtab offset}``.

Prototype strings: ``#`` then one item for the return value and one per
parameter, by PTX size class: ``v`` nothing, ``i`` a ``.b32``, ``l`` a ``.b64``,
``b<N>`` an ``.b8`` array of N bytes (aggregates).  So ``#liib16b32`` is a
``.b64`` return and parameters ``.b32, .b32, .b8[16], .b8[32]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devbin.binary import ByteView
from devbin.errors import FormatError
from devbin.model import CallConv, ParamType, Prototype, TypeKind

BLOCK_DIRECT, BLOCK_ADDRESS_TAKEN, BLOCK_INDIRECT, BLOCK_ADDRESS_REFS = -1, -2, -3, -4


@dataclass(slots=True)
class NvCallGraph:
    direct: list[tuple[int, int]] = field(default_factory=list)
    address_taken: list[tuple[int, int]] = field(default_factory=list)  # (sym, strtab offset)
    indirect: list[tuple[int, int]] = field(default_factory=list)  # (sym, strtab offset)
    address_refs: list[tuple[int, int]] = field(default_factory=list)
    unknown: list[tuple[int, list[tuple[int, int]]]] = field(default_factory=list)  # (marker, pairs)


def parse_callgraph(view: ByteView) -> NvCallGraph:
    cg = NvCallGraph()
    blocks = {BLOCK_DIRECT: cg.direct, BLOCK_ADDRESS_TAKEN: cg.address_taken, BLOCK_INDIRECT: cg.indirect,
              BLOCK_ADDRESS_REFS: cg.address_refs}
    current: list[tuple[int, int]] | None = None
    for a, b in view.iter_unpack("Ii", 0, len(view) // 8, ".nv.callgraph entries"):
        if a == 0 and b < 0:
            if b in blocks:
                current = blocks[b]
            else:
                cg.unknown.append((b, []))
                current = cg.unknown[-1][1]
            continue
        if current is None:
            raise view.error(".nv.callgraph entry before the first block marker", None, a)
        current.append((a, b))
    return cg


def parse_prototype_section(view: ByteView) -> list[tuple[int, int]]:
    return [(s, o) for s, o in view.iter_unpack("II", 0, len(view) // 8, ".nv.prototype entries")]


_B32 = ParamType(TypeKind.BITS, 4, 4)
_B64 = ParamType(TypeKind.BITS, 8, 8)
_VOID = ParamType(TypeKind.VOID, 0, 1)


def decode_prototype(text: str, *, callconv: int = CallConv.DEFAULT) -> Prototype:
    """Decode ``#liib16`` into a :class:`Prototype` (size classes as ``TypeKind.BITS``/``AGGREGATE``)."""
    if not text.startswith("#"):
        raise FormatError("prototype string does not start with '#'", fmt="cubin", value=text)
    items: list[ParamType] = []
    i = 1
    while i < len(text):
        c = text[i]
        i += 1
        if c == "v":
            items.append(_VOID)
        elif c == "i":
            items.append(_B32)
        elif c == "l":
            items.append(_B64)
        elif c == "b":
            j = i
            while j < len(text) and text[j].isdigit():
                j += 1
            if j == i:
                raise FormatError("prototype string: 'b' without a size", fmt="cubin", value=text)
            items.append(ParamType(TypeKind.AGGREGATE, int(text[i:j]), 1))
            i = j
        else:
            raise FormatError(f"prototype string: unknown type letter {c!r}", fmt="cubin", value=text)
    if not items:
        raise FormatError("prototype string has no return type", fmt="cubin", value=text)
    if any(p.kind == TypeKind.VOID for p in items[1:]):
        raise FormatError("prototype string: 'v' as a parameter", fmt="cubin", value=text)
    return Prototype(items[0], tuple(items[1:]), callconv)
