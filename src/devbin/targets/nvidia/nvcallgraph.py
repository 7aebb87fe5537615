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

Prototype strings (``.strtab``; worked out from ptxas 13.0 output for sm_80-sm_120, nvcc
and hand-written PTX; ``cuobjdump -elf`` and ``nvdisasm`` print them as stored)::

    prototype = "#" ret *param ["|" abi]
    ret       = "v" / type                    ; "v": no return value
    param     = type
    type      = "i"                           ; a .b32 (int, float, char, short, bool: promoted)
              / "l"                           ; a .b64 (pointer, long, double)
              / "x"                           ; a .b128
              / "f" / "d"                     ; a .f32 / .f64: ptxas's own routines (the math
                                              ; slow paths it calls at -O0 or -G, such as
                                              ; __cuda_sm20_div_rn_f64_full "#ddd")
              / "b" 1*DIGIT                   ; a .b8 array of that many bytes (structs, vectors,
                                              ; __half; "b0": the unsized varargs array %VAParam[])
    abi       = [count "p" first] ["r" reg / "u" reg] *scratch
    count     = 1*DIGIT                       ; registers holding the parameters ...
    first     = 1*DIGIT                       ; ... from R<first>
    reg       = 1*DIGIT                       ; return address in R<reg>:R<reg+1> ("u": in a
                                              ; uniform register; in ptxas's format strings,
                                              ; never seen written)
    scratch   = "s" class "x" 1*HEXDIG        ; registers of the class the callee may clobber, a
    class     = 1*UPPER                       ; bit mask, highest register first: "B" convergence
                                              ; barriers (8 digits), "R" R0-R255 (64 digits)

The ``|abi`` part states a call ABI of its own: the CUDA runtime's system calls (``vprintf``,
``malloc``, ``free``, ``__assertfail``: ``#ill|12p4r20sRx0...0fff9``: 12 parameter registers
from R4, return address in R20, scratch R0 and R3-R15) and functions declared with PTX's
``.abi_preserve N`` (R16 to R16+N-1 preserved, clear in the ``sRx`` mask; the return address
in the top pair of them, R14 for N < 2; the parameters move up, ``14p32``, when R4 on would
reach them) or ``.abi_preserve_control N`` (``sBx`` with the low N bits set).  Alignment is
not recorded (an ``alignas(16)`` struct of 16 bytes is ``b16`` as a ``float4`` is).
``.nv.callgraph``'s address-taken block names a kernel (device-side launch) with string
offset 0: the empty string, no prototype.
"""

from __future__ import annotations

import re
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
_B128 = ParamType(TypeKind.BITS, 16, 16)
_F32 = ParamType(TypeKind.FLOAT, 4, 4)
_F64 = ParamType(TypeKind.FLOAT, 8, 8)
_VOID = ParamType(TypeKind.VOID, 0, 1)
_LETTERS = {"v": _VOID, "i": _B32, "l": _B64, "x": _B128, "f": _F32, "d": _F64}
_TYPE_RE = re.compile(r"[vilxfd]|b[0-9]+")
_ABI_RE = re.compile(r"(?:([0-9]+)p([0-9]+))?(?:([ru])([0-9]+))?((?:s[A-Z]+x[0-9a-fA-F]+)*)")
_SCRATCH_RE = re.compile(r"s([A-Z]+)x([0-9a-fA-F]+)")


@dataclass(frozen=True, slots=True)
class NvCallAbi:
    """The ``|abi`` part of a prototype string: a call ABI of the callee's own (module docstring).

    ``scratch`` holds ``(class, mask, digits)`` per ``s<class>x<hex>`` item in stored order;
    ``digits`` keeps the hex width, so :meth:`text` writes the bytes back exactly.
    """

    param_count: int | None = None
    first_param: int | None = None
    return_address: int | None = None
    return_address_uniform: bool = False
    scratch: tuple[tuple[str, int, int], ...] = ()

    def text(self) -> str:
        out = f"{self.param_count}p{self.first_param}" if self.param_count is not None else ""
        if self.return_address is not None:
            out += f"{'u' if self.return_address_uniform else 'r'}{self.return_address}"
        return out + "".join(f"s{c}x{mask:0{digits}x}" for c, mask, digits in self.scratch)

    def scratch_registers(self, cls: str) -> tuple[int, ...]:
        """Register numbers of class ``cls`` (``R``, ``B``) the callee may clobber."""
        for c, mask, _ in self.scratch:
            if c == cls:
                return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)
        return ()


@dataclass(frozen=True, slots=True)
class NvPrototype:
    """A prototype string, decoded: ``types`` as stored (return first), and the ABI part if any."""

    types: tuple[str, ...]  # "v", "i", "l", "x", "f", "d" or "b<N>"
    abi: NvCallAbi | None = None

    def text(self) -> str:
        """The string back, byte for byte as ptxas writes it."""
        return "#" + "".join(self.types) + ("" if self.abi is None else "|" + self.abi.text())

    def prototype(self, callconv: int = CallConv.DEFAULT) -> Prototype:
        """The unified-model prototype (size classes as ``TypeKind.BITS``/``AGGREGATE``).

        The ABI part does not enter it: a custom ABI changes registers, not what the
        caller and callee exchange, and indirect-call matching stays conservative.
        """
        items = [_LETTERS[t] if t in _LETTERS else ParamType(TypeKind.AGGREGATE, int(t[1:]), 1) for t in self.types]
        return Prototype(items[0], tuple(items[1:]), callconv)


def parse_prototype_string(text: str) -> NvPrototype:
    """Decode a prototype string (grammar in the module docstring); :class:`FormatError` if it is none."""
    if not text.startswith("#"):
        raise FormatError("prototype string does not start with '#'", fmt="cubin", value=text)
    body, bar, abi_text = text[1:].partition("|")
    types: list[str] = []
    i = 0
    while i < len(body):
        m = _TYPE_RE.match(body, i)
        if m is None:
            what = "'b' without a size" if body[i] == "b" else f"unknown type letter {body[i]!r}"
            raise FormatError(f"prototype string: {what}", fmt="cubin", value=text)
        types.append(m.group())
        i = m.end()
    if not types:
        raise FormatError("prototype string has no return type", fmt="cubin", value=text)
    if "v" in types[1:]:
        raise FormatError("prototype string: 'v' as a parameter", fmt="cubin", value=text)
    abi = None
    if bar:
        m = _ABI_RE.fullmatch(abi_text)
        if m is None or not abi_text:
            raise FormatError("prototype string: unreadable ABI part after '|'", fmt="cubin", value=text)
        count, first, ra_kind, ra, scratch = m.groups()
        abi = NvCallAbi(
            param_count=None if count is None else int(count), first_param=None if first is None else int(first),
            return_address=None if ra is None else int(ra), return_address_uniform=ra_kind == "u",
            scratch=tuple((c, int(h, 16), len(h)) for c, h in _SCRATCH_RE.findall(scratch)))
        if abi.text() != abi_text:  # leading zeros in a number: not ptxas's form, so not decoded
            raise FormatError("prototype string: ABI part not in ptxas's form", fmt="cubin", value=text)
    return NvPrototype(tuple(types), abi)


def decode_prototype(text: str, *, callconv: int = CallConv.DEFAULT) -> Prototype:
    """Decode ``#liib16`` (or ``#ill|12p4r20sRx...``) into a :class:`Prototype`."""
    return parse_prototype_string(text).prototype(callconv)
