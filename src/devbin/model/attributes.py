"""Typed function attributes: one id space shared by every vendor.

An attribute id is an unsigned integer.  Its high bits name a *namespace*
(``namespace = id >> 8``): 0 is the standard space defined by devbin's format
spec, 1 NVIDIA, 2 AMDGPU, 3 Intel, 0x7f experimental/private.  A vendor
package adds names for ids in its own namespace with
:func:`register_vendor_attribute` at import time; nothing here changes.

Every attribute value has a *form*, the shape of its value, which is also how
it is sized on disk (see ``docs/FORMAT.md``):

====== ======= ===========================================
form   name    Python value
====== ======= ===========================================
0      UINT    ``int`` in ``[0, 2**64)``
1      SINT    ``int`` in ``[-2**63, 2**63)``
2      BYTES   ``bytes`` (a ``str`` is stored as its UTF-8)
3      FLAG    ``True`` (presence means true)
4      DIM3    ``tuple[int, int, int]`` (x, y, z)
5      LIST    ``tuple[int, ...]``
6, 7   --      reserved: a reader cannot size them; the value is the raw
               ``bytes`` of the rest of the record (kept and re-emitted)
====== ======= ===========================================

Because the form travels with every attribute, an id that this version of
devbin does not know is still decoded, kept and written back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Any

from devbin.errors import UsageError

__all__ = [
    "MAX_ATTR_ID",
    "Applies",
    "AttrForm",
    "AttrId",
    "AttrInfo",
    "AttrValue",
    "Attribute",
    "Namespace",
    "StdAttr",
    "attr_by_name",
    "attr_info",
    "namespace_of",
    "registered_attributes",
    "register_vendor_attribute",
]

AttrId = int
AttrValue = int | bool | bytes | tuple[int, ...]

MAX_ATTR_ID = (1 << 61) - 1  # the on-disk key is (id << 3) | form in 64 bits
_U64 = 1 << 64
_S64 = 1 << 63


class AttrForm(IntEnum):
    """The shape (and on-disk encoding) of an attribute value."""

    UINT = 0
    SINT = 1
    BYTES = 2
    FLAG = 3
    DIM3 = 4
    LIST = 5
    RESERVED6 = 6
    RESERVED7 = 7

    @property
    def opaque(self) -> bool:
        """True for the reserved forms a reader cannot size."""
        return self >= AttrForm.RESERVED6


class Namespace(IntEnum):
    STANDARD = 0
    NVIDIA = 1
    AMDGPU = 2
    INTEL = 3
    EXPERIMENTAL = 0x7F


def namespace_of(attr_id: int) -> int:
    return attr_id >> 8


class Applies(IntFlag):
    """Which kinds of function an attribute describes.

    ``FUNCTION`` covers device functions and indirect-call targets.
    """

    KERNEL = 1
    FUNCTION = 2
    BOTH = 3


class StdAttr(IntEnum):
    """Standard attribute ids (namespace 0).

    Ids below 16 have a one-byte key on disk; they were given to the facts
    nearly every function carries.
    """

    REGS_GENERAL = 1
    REGS_SCALAR = 2
    STACK_SIZE = 3
    FRAME_SIZE = 4
    SHARED_BYTES = 5
    PRIVATE_BYTES = 6
    PARAM_BYTES = 7
    PARAM_LAYOUT = 8
    MAX_THREADS = 9
    MAX_REGS = 10
    WAVE_SIZE = 11
    DYNAMIC_STACK = 12
    NUM_BARRIERS = 13
    PROTOTYPE = 14
    CALLCONV = 15
    REGS_ACCUM = 16
    REGS_PREDICATE = 17
    CONST_BYTES = 18
    REQD_BLOCK_SIZE = 19
    MIN_BLOCKS_PER_MP = 20
    CLUSTER_DIMS = 21
    USES_RECURSION = 22
    SPILL_BYTES = 23


@dataclass(frozen=True, slots=True)
class AttrInfo:
    """What the registry knows about one attribute id."""

    id: int
    name: str
    form: AttrForm
    applies: Applies
    doc: str = ""

    @property
    def namespace(self) -> int:
        return namespace_of(self.id)


_BY_ID: dict[int, AttrInfo] = {}
_BY_NAME: dict[str, AttrInfo] = {}

_K, _F, _B = Applies.KERNEL, Applies.FUNCTION, Applies.BOTH
_STANDARD: tuple[tuple[StdAttr, AttrForm, Applies, str], ...] = (
    (StdAttr.REGS_GENERAL, AttrForm.UINT, _B, "general-purpose registers per thread (NVIDIA R, AMD VGPR)"),
    (StdAttr.REGS_SCALAR, AttrForm.UINT, _B, "scalar/uniform registers (AMD SGPR, NVIDIA UR)"),
    (StdAttr.STACK_SIZE, AttrForm.UINT, _B, "stack bytes per thread including callees"),
    (StdAttr.FRAME_SIZE, AttrForm.UINT, _B, "this function's own frame bytes per thread"),
    (StdAttr.SHARED_BYTES, AttrForm.UINT, _B, "static shared/LDS bytes per block"),
    (StdAttr.PRIVATE_BYTES, AttrForm.UINT, _B, "local/private bytes per thread outside the stack"),
    (StdAttr.PARAM_BYTES, AttrForm.UINT, _B, "total parameter bytes"),
    (StdAttr.PARAM_LAYOUT, AttrForm.BYTES, _K, "kernel parameter layout (see KernelParam)"),
    (StdAttr.MAX_THREADS, AttrForm.DIM3, _K, "maximum threads per block (launch bounds)"),
    (StdAttr.MAX_REGS, AttrForm.UINT, _B, "register cap the compiler was given"),
    (StdAttr.WAVE_SIZE, AttrForm.UINT, _K, "wavefront/warp size"),
    (StdAttr.DYNAMIC_STACK, AttrForm.FLAG, _B, "stack size not statically known (recursion, alloca)"),
    (StdAttr.NUM_BARRIERS, AttrForm.UINT, _B, "named barriers used"),
    (StdAttr.PROTOTYPE, AttrForm.UINT, _F, "index into the prototype table"),
    (StdAttr.CALLCONV, AttrForm.UINT, _F, "calling convention (CallConv)"),
    (StdAttr.REGS_ACCUM, AttrForm.UINT, _B, "accumulator registers (AMD AGPR)"),
    (StdAttr.REGS_PREDICATE, AttrForm.UINT, _B, "predicate registers"),
    (StdAttr.CONST_BYTES, AttrForm.UINT, _B, "constant memory bytes"),
    (StdAttr.REQD_BLOCK_SIZE, AttrForm.DIM3, _K, "required block size"),
    (StdAttr.MIN_BLOCKS_PER_MP, AttrForm.UINT, _K, "minimum resident blocks per multiprocessor"),
    (StdAttr.CLUSTER_DIMS, AttrForm.DIM3, _K, "thread-block cluster dimensions"),
    (StdAttr.USES_RECURSION, AttrForm.FLAG, _B, "the function is (mutually) recursive"),
    (StdAttr.SPILL_BYTES, AttrForm.UINT, _B, "bytes per thread used by register spill/fill (Intel: spill_size)"),
)


def _add(info: AttrInfo) -> AttrInfo:
    old = _BY_ID.get(info.id)
    if old is not None:
        if old == info:
            return old  # re-registration of the same definition (module reload)
        raise UsageError(f"attribute id {info.id:#x} is already registered as {old.name!r}")
    if info.name in _BY_NAME:
        raise UsageError(f"attribute name {info.name!r} is already registered for id {_BY_NAME[info.name].id:#x}")
    _BY_ID[info.id] = info
    _BY_NAME[info.name] = info
    return info


for _sid, _form, _applies, _doc in _STANDARD:
    _add(AttrInfo(int(_sid), _sid.name.lower(), _form, _applies, _doc))


def register_vendor_attribute(
    attr_id: int, name: str, form: AttrForm | int, kinds: Applies | int, doc: str = ""
) -> AttrInfo:
    """Name an attribute id of a vendor namespace (1 and up); idempotent for equal definitions.

    Names should carry the vendor as a prefix (``nvidia.crs_stack_size``) so
    that names stay unique across vendors; a clash is an error.
    """
    if isinstance(attr_id, bool) or not isinstance(attr_id, int) or not 0 <= attr_id <= MAX_ATTR_ID:
        raise UsageError(f"attribute id out of range: {attr_id!r}")
    if namespace_of(attr_id) == Namespace.STANDARD:
        raise UsageError(f"attribute id {attr_id:#x} is in the standard namespace; vendors use namespaces >= 1")
    if not isinstance(name, str) or not name:
        raise UsageError("attribute name must be a non-empty string")
    try:
        f = AttrForm(form)
    except ValueError:
        raise UsageError(f"attribute form out of range: {form!r}") from None
    if f.opaque:
        raise UsageError("reserved forms 6 and 7 cannot be registered")
    k = Applies(int(kinds) & 3)
    if not k:
        raise UsageError("an attribute must apply to kernels, functions or both")
    return _add(AttrInfo(attr_id, name, f, k, doc))


def attr_info(attr_id: int) -> AttrInfo | None:
    return _BY_ID.get(attr_id)


def attr_by_name(name: str) -> AttrInfo | None:
    return _BY_NAME.get(name)


def registered_attributes() -> tuple[AttrInfo, ...]:
    """Every registered attribute, by id."""
    return tuple(sorted(_BY_ID.values(), key=lambda i: i.id))


def _is_uint(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _U64


def _check_value(attr_id: int, form: AttrForm, value: object) -> AttrValue:
    """Validate ``value`` for ``form`` and return its canonical Python form."""
    what = f"attribute {attr_id:#x} ({form.name})"
    if form == AttrForm.UINT:
        if _is_uint(value):
            return value  # type: ignore[return-value]
    elif form == AttrForm.SINT:
        if isinstance(value, int) and not isinstance(value, bool) and -_S64 <= value < _S64:
            return value
    elif form == AttrForm.BYTES or form.opaque:
        if isinstance(value, str) and form == AttrForm.BYTES:
            return value.encode("utf-8")
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
    elif form == AttrForm.FLAG:
        if value is True:
            return True
    elif form == AttrForm.DIM3:
        if isinstance(value, tuple | list) and len(value) == 3 and all(_is_uint(v) for v in value):
            return tuple(value)
    elif form == AttrForm.LIST and isinstance(value, tuple | list) and all(_is_uint(v) for v in value):
        return tuple(value)
    raise UsageError(f"{what}: bad value {value!r}")


@dataclass(frozen=True, slots=True, init=False)
class Attribute:
    """One attribute: an id, its value and the form of that value.

    ``form`` may be left out for a registered id; it is then taken from the
    registry.  After construction ``form`` is always an :class:`AttrForm` and
    ``value`` is in its canonical Python type (``str`` becomes UTF-8 ``bytes``,
    lists become tuples), so equality does not depend on how it was built or
    on which vendor packages are imported.
    """

    id: int
    value: AttrValue
    form: AttrForm

    def __init__(self, id: int, value: AttrValue | str | list[int], form: AttrForm | int | None = None) -> None:
        if isinstance(id, bool) or not isinstance(id, int) or not 0 <= id <= MAX_ATTR_ID:
            raise UsageError(f"attribute id out of range: {id!r}")
        if form is None:
            info = _BY_ID.get(id)
            if info is None:
                raise UsageError(f"attribute {id:#x} is not registered: give its form")
            form = info.form
        try:
            f = AttrForm(form)
        except (ValueError, TypeError):
            raise UsageError(f"attribute {id:#x}: form out of range: {form!r}") from None
        # ``StdAttr.X`` is an int subclass; store the plain int so reprs and dicts stay simple.
        object.__setattr__(self, "id", int(id))
        object.__setattr__(self, "form", f)
        object.__setattr__(self, "value", _check_value(id, f, value))

    @property
    def info(self) -> AttrInfo | None:
        return _BY_ID.get(self.id)

    @property
    def name(self) -> str | None:
        info = _BY_ID.get(self.id)
        return info.name if info is not None else None

    @property
    def namespace(self) -> int:
        return namespace_of(self.id)

    @property
    def text(self) -> str | None:
        """A BYTES value as text, if it is valid UTF-8."""
        if self.form != AttrForm.BYTES or not isinstance(self.value, bytes):
            return None
        try:
            return self.value.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def to_dict(self) -> dict[str, Any]:
        v = self.value
        value: Any = v.hex() if isinstance(v, bytes) else list(v) if isinstance(v, tuple) else v
        return {"id": self.id, "name": self.name, "form": self.form.name.lower(), "form_raw": int(self.form),
                "value": value}
