"""Functions of a code object: kernels, device functions, indirect-call targets.

A :class:`Function` is keyed by its symbol name.  ``section``, ``offset``,
``size``, ``binding`` and ``visibility`` describe the symbol and are filled by
the ELF layer from the symbol table; the devbin sections do not repeat them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from devbin.errors import UsageError
from devbin.model.attributes import Applies, Attribute, AttrValue, StdAttr
from devbin.model.prototype import KernelParam, decode_param_layout, enum_name
from devbin.model.resources import Resources, resources_of

__all__ = ["Function", "FunctionKind"]


class FunctionKind(IntEnum):
    DEVICE = 0
    KERNEL = 1
    INDIRECT_TARGET = 2


@dataclass(frozen=True, slots=True)
class Function:
    """One function and its attributes.

    ``kind`` is a :class:`FunctionKind`, or a plain ``int`` (0..255) for a kind
    this version does not know.  ``attributes`` are kept sorted by id, one per
    id; an attribute of a reserved form (whose value is the raw rest of the
    record) must have the highest id.
    """

    name: str
    kind: FunctionKind | int
    attributes: tuple[Attribute, ...] = ()
    section: str = ""
    offset: int = 0
    size: int = 0
    binding: str = "global"
    visibility: str = "default"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise UsageError(f"function name must be a string, got {self.name!r}")
        k = self.kind
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 0xFF:
            raise UsageError(f"function {self.name!r}: kind must be an int 0..255, got {k!r}")
        try:
            object.__setattr__(self, "kind", FunctionKind(k))
        except ValueError:
            object.__setattr__(self, "kind", int(k))
        attrs = tuple(sorted(_as_attrs(self.attributes, self.name), key=lambda a: a.id))
        for i, a in enumerate(attrs):
            if i and attrs[i - 1].id == a.id:
                raise UsageError(f"function {self.name!r}: attribute {a.id:#x} given twice")
            if a.form.opaque and i != len(attrs) - 1:
                raise UsageError(f"function {self.name!r}: opaque attribute {a.id:#x} must have the highest id")
        object.__setattr__(self, "attributes", attrs)

    # -- typed access ----------------------------------------------------------
    @property
    def is_kernel(self) -> bool:
        return self.kind == FunctionKind.KERNEL

    @property
    def applies(self) -> Applies:
        return Applies.KERNEL if self.is_kernel else Applies.FUNCTION

    def attribute(self, attr_id: int) -> Attribute | None:
        for a in self.attributes:
            if a.id == attr_id:
                return a
        return None

    def attr(self, attr_id: int) -> AttrValue | None:
        """The value of attribute ``attr_id``, or ``None`` if absent."""
        a = self.attribute(attr_id)
        return None if a is None else a.value

    def has(self, attr_id: int) -> bool:
        return self.attribute(attr_id) is not None

    def uint(self, attr_id: int, default: int | None = None) -> int | None:
        """An integer attribute (UINT/SINT form), else ``default``."""
        v = self.attr(attr_id)
        return v if isinstance(v, int) and not isinstance(v, bool) else default

    @property
    def resources(self) -> Resources:
        """Registers, stack, shared/local memory, spills ... as one typed record
        (:class:`devbin.model.resources.Resources`; ``None`` fields: the file does not say)."""
        return resources_of(self.attributes)

    def params(self) -> tuple[KernelParam, ...] | None:
        """The decoded ``param_layout`` attribute (raises FormatError if malformed)."""
        v = self.attr(StdAttr.PARAM_LAYOUT)
        return decode_param_layout(v) if isinstance(v, bytes) else None

    def misplaced_attributes(self) -> tuple[Attribute, ...]:
        """Registered attributes that the spec does not allow on this kind of function."""
        return tuple(a for a in self.attributes if a.info is not None and not a.info.applies & self.applies)

    def with_attributes(self, *attrs: Attribute) -> Function:
        """A copy with ``attrs`` added or replacing those with the same id."""
        ids = {a.id for a in attrs}
        kept = [a for a in self.attributes if a.id not in ids]
        return Function(self.name, self.kind, (*kept, *attrs), self.section, self.offset, self.size, self.binding,
                        self.visibility)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": enum_name(self.kind, FunctionKind),
            "kind_raw": int(self.kind),
            "section": self.section,
            "offset": self.offset,
            "size": self.size,
            "binding": self.binding,
            "visibility": self.visibility,
            "attributes": [a.to_dict() for a in self.attributes],
            "resources": self.resources.to_dict(),
        }


def _as_attrs(attrs: Iterable[Attribute], name: str) -> tuple[Attribute, ...]:
    out = tuple(attrs)
    for a in out:
        if not isinstance(a, Attribute):
            raise UsageError(f"function {name!r}: attributes must be Attribute, got {a!r}")
    return out
