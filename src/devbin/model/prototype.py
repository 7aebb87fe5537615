"""Function signatures at the ABI level: kinds, sizes and alignments.

A prototype says only what a caller and callee must agree on to exchange
values: for the return value and each parameter its :class:`TypeKind`, size in
bytes and alignment.  Source-level types (``int`` versus ``unsigned``) are not
kept; two functions with equal prototypes are ABI-compatible, which is what
indirect-call resolution and linking need.

:class:`KernelParam` is the kernel flavour: where each parameter sits in the
parameter block (constant bank / kernarg segment).  Its on-disk form is the
value of the ``param_layout`` attribute (see :func:`encode_param_layout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from devbin.binary import ByteView
from devbin.binary.writer import uleb
from devbin.errors import FormatError, UsageError

__all__ = [
    "CallConv",
    "KernelParam",
    "ParamType",
    "Prototype",
    "TypeKind",
    "UNKNOWN_PROTOTYPE",
    "decode_param_layout",
    "encode_param_layout",
    "enum_name",
    "type_text",
]

_U64 = 1 << 64
MAX_LOG2_ALIGN = 63


class TypeKind(IntEnum):
    VOID = 0
    INT = 1
    FLOAT = 2
    POINTER = 3
    AGGREGATE = 4
    VECTOR = 5
    BITS = 6  # untyped bits of a size class (PTX .b32/.b64), when the source type is not recorded


class CallConv(IntEnum):
    """Calling conventions (values of ``Prototype.callconv`` and the ``callconv`` attribute).

    ``DEFAULT`` is the vendor's device-function ABI; ``KERNEL`` the launch ABI;
    ``INTERNAL`` a convention private to one object (callable only from it).
    ``UNKNOWN`` marks a prototype the producer did not record (AMDGPU objects
    carry none): such a prototype matches every other one (see
    :meth:`Prototype.matches`), so resolving indirect calls stays conservative.
    """

    DEFAULT = 0
    KERNEL = 1
    INTERNAL = 2
    UNKNOWN = 3


def enum_name(value: int, enum: type[IntEnum]) -> str:
    """Lower-case name of a known enum value, ``"unknown"`` otherwise."""
    try:
        return enum(value).name.lower()
    except ValueError:
        return "unknown"


def _u8_kind(kind: object, what: str) -> TypeKind | int:
    if isinstance(kind, bool) or not isinstance(kind, int) or not 0 <= kind <= 0xFF:
        raise UsageError(f"{what}: kind must be an int 0..255, got {kind!r}")
    try:
        return TypeKind(kind)
    except ValueError:
        return int(kind)


def _uint(v: object, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < _U64:
        raise UsageError(f"{what}: expected an unsigned 64-bit int, got {v!r}")
    return v


def _align(v: object, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1) or v.bit_length() - 1 > MAX_LOG2_ALIGN:
        raise UsageError(f"{what}: alignment must be a power of two up to 2**63, got {v!r}")
    return v


@dataclass(frozen=True, slots=True)
class ParamType:
    """An ABI type: kind (unknown kinds are kept as ``int``), size and alignment in bytes."""

    kind: TypeKind | int
    size: int = 0
    align: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _u8_kind(self.kind, "param type"))
        _uint(self.size, "param type size")
        _align(self.align, "param type align")

    def sort_key(self) -> tuple[int, int, int]:
        return (int(self.kind), self.size, self.align)

    def __str__(self) -> str:
        return type_text(self.kind, self.size)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": enum_name(self.kind, TypeKind), "kind_raw": int(self.kind), "size": self.size,
                "align": self.align}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ParamType:
        """The inverse of :meth:`to_dict` (the raw kind is read, the name ignored)."""
        return cls(d["kind_raw"], d["size"], d["align"])


VOID = ParamType(TypeKind.VOID, 0, 1)


def type_text(kind: TypeKind | int, size: int) -> str:
    """The text of an ABI type: ``int32``, ``float64``, ``b32`` (untyped bits), ``b8[12]`` (an aggregate
    of 12 bytes), else the kind's name (``pointer``, ``void``, ``vector``; ``unknown`` for a raw kind)."""
    name = enum_name(kind, TypeKind)
    if kind in (TypeKind.INT, TypeKind.FLOAT):
        return f"{name}{size * 8}"
    if kind == TypeKind.BITS:
        return f"b{size * 8}"
    if kind == TypeKind.AGGREGATE:
        return f"b8[{size}]"
    return name


@dataclass(frozen=True, slots=True)
class Prototype:
    """Return type, parameter types and calling convention (``CallConv`` value or a raw int)."""

    ret: ParamType = VOID
    params: tuple[ParamType, ...] = ()
    callconv: int = CallConv.DEFAULT

    def __post_init__(self) -> None:
        if not isinstance(self.ret, ParamType) or not all(isinstance(p, ParamType) for p in self.params):
            raise UsageError("prototype: ret and params must be ParamType")
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "callconv", int(_uint(self.callconv, "prototype callconv")))

    def sort_key(self) -> tuple[Any, ...]:
        return (self.callconv, self.ret.sort_key(), len(self.params), tuple(p.sort_key() for p in self.params))

    @property
    def is_unknown(self) -> bool:
        return self.callconv == CallConv.UNKNOWN

    def matches(self, other: Prototype) -> bool:
        """Whether an indirect call through one may reach a function of the other.

        Equal prototypes match; an unknown one (``CallConv.UNKNOWN``) matches any,
        because nothing rules the call out.
        """
        return self == other or self.is_unknown or other.is_unknown

    def __str__(self) -> str:
        """``int32(int32, pointer) [default]``: return type, parameter types (:func:`type_text`) and
        calling convention; a prototype the producer did not record is ``void() [unknown]``."""
        return f"{self.ret}({', '.join(str(p) for p in self.params)}) [{enum_name(self.callconv, CallConv)}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "callconv": enum_name(self.callconv, CallConv),
            "callconv_raw": self.callconv,
            "ret": self.ret.to_dict(),
            "params": [p.to_dict() for p in self.params],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Prototype:
        """The inverse of :meth:`to_dict` (raw values are read, names ignored)."""
        return cls(ParamType.from_dict(d["ret"]), tuple(ParamType.from_dict(p) for p in d["params"]),
                   d["callconv_raw"])


@dataclass(frozen=True, slots=True)
class KernelParam:
    """One kernel parameter: its kind and where it sits in the parameter block."""

    kind: TypeKind | int
    offset: int
    size: int
    align: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _u8_kind(self.kind, "kernel param"))
        _uint(self.offset, "kernel param offset")
        _uint(self.size, "kernel param size")
        _align(self.align, "kernel param align")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": enum_name(self.kind, TypeKind), "kind_raw": int(self.kind), "offset": self.offset,
                "size": self.size, "align": self.align}


def encode_param_layout(params: tuple[KernelParam, ...] | list[KernelParam]) -> bytes:
    """The ``param_layout`` attribute value: uleb count, then per parameter
    u8 kind, uleb offset, uleb size, u8 log2(align)."""
    out = bytearray(uleb(len(params)))
    for p in params:
        out.append(int(p.kind))
        out += uleb(p.offset)
        out += uleb(p.size)
        out.append(p.align.bit_length() - 1)
    return bytes(out)


def decode_param_layout(data: ByteView | bytes) -> tuple[KernelParam, ...]:
    """Decode a ``param_layout`` value; the bytes must be consumed exactly."""
    view = data if isinstance(data, ByteView) else ByteView(data, fmt="devsec", where="param_layout")
    cur = view.cursor()
    n = cur.count(4, "parameter count")
    out: list[KernelParam] = []
    for _ in range(n):
        kind = cur.u8()
        offset = cur.uleb("parameter offset")
        size = cur.uleb("parameter size")
        at = cur.pos
        log2 = cur.u8()
        if log2 > MAX_LOG2_ALIGN:
            raise view.error("parameter alignment: log2 above 63", at, log2)
        out.append(KernelParam(kind, offset, size, 1 << log2))
    if not cur.at_end():
        raise view.error("param_layout: trailing bytes", cur.pos, cur.remaining, cls=FormatError)
    return tuple(out)


UNKNOWN_PROTOTYPE = Prototype(callconv=CallConv.UNKNOWN)
"""The prototype of a function or call site whose signature the producer did not record."""
