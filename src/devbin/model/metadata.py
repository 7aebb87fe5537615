"""Free-form key/value metadata of a code object.

An ordered list of ``(key, value)`` entries; keys are non-empty strings and
**unique** (a mapping, so that ``get`` has one answer; a reader that meets a
key twice reports a malformed section instead of guessing which one counts).
Values are ``str``, ``int`` (unsigned, 64-bit) or ``bytes``.  Order is kept as
given: it is part of the on-disk canonical form.

Standard keys: ``producer``, ``compile-options``, ``link-options``,
``target-id``, ``vendor``, ``triple``.  The last three mirror
:class:`~devbin.model.target.Target` (see :class:`~devbin.model.CodeObject`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from devbin.errors import UsageError

__all__ = ["MetaValue", "Metadata", "STANDARD_KEYS", "TARGET_KEYS"]

MetaValue = str | int | bytes

STANDARD_KEYS = ("producer", "compile-options", "link-options", "target-id", "vendor", "triple")
TARGET_KEYS = ("vendor", "target-id", "triple")


def _check(key: object, value: object) -> tuple[str, MetaValue]:
    if not isinstance(key, str) or not key:
        raise UsageError(f"metadata key must be a non-empty string, got {key!r}")
    if isinstance(value, bool) or not isinstance(value, str | int | bytes | bytearray | memoryview):
        raise UsageError(f"metadata {key!r}: value must be str, int or bytes, got {value!r}")
    if isinstance(value, int) and not 0 <= value < (1 << 64):
        raise UsageError(f"metadata {key!r}: integer out of the unsigned 64-bit range")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(f"metadata {key!r}: string is not encodable as UTF-8") from None
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"metadata key {key!r} is not encodable as UTF-8") from None
    return key, bytes(value) if isinstance(value, bytearray | memoryview) else value


@dataclass(frozen=True, slots=True)
class Metadata:
    entries: tuple[tuple[str, MetaValue], ...] = ()

    def __post_init__(self) -> None:
        out = []
        seen: set[str] = set()
        for e in self.entries:
            if not isinstance(e, tuple) or len(e) != 2:
                raise UsageError(f"metadata entry must be a (key, value) pair, got {e!r}")
            k, v = _check(*e)
            if k in seen:
                raise UsageError(f"metadata key {k!r} given twice")
            seen.add(k)
            out.append((k, v))
        object.__setattr__(self, "entries", tuple(out))

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, MetaValue]] = (), **kw: MetaValue) -> Metadata:
        """Build from pairs and keyword arguments (``_`` in a keyword becomes ``-``)."""
        return cls((*tuple(pairs), *((k.replace("_", "-"), v) for k, v in kw.items())))

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self.entries)

    def __contains__(self, key: object) -> bool:
        return any(k == key for k, _ in self.entries)

    def __getitem__(self, key: str) -> MetaValue:
        for k, v in self.entries:
            if k == key:
                return v
        raise KeyError(key)

    def get(self, key: str, default: MetaValue | None = None) -> MetaValue | None:
        for k, v in self.entries:
            if k == key:
                return v
        return default

    def keys(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.entries)

    def items(self) -> tuple[tuple[str, MetaValue], ...]:
        return self.entries

    def set(self, key: str, value: MetaValue) -> Metadata:
        """A copy with ``key`` replaced in place, or appended if absent."""
        if key in self:
            return Metadata(tuple((k, value if k == key else v) for k, v in self.entries))
        return Metadata((*self.entries, (key, value)))

    def without(self, *keys: str) -> Metadata:
        return Metadata(tuple(e for e in self.entries if e[0] not in keys))

    def to_dict(self) -> list[dict[str, Any]]:
        """JSON-ready list (order matters, so not a JSON object)."""
        out: list[dict[str, Any]] = []
        for k, v in self.entries:
            if isinstance(v, str):
                out.append({"key": k, "type": "string", "value": v})
            elif isinstance(v, int):
                out.append({"key": k, "type": "uint", "value": v})
            else:
                out.append({"key": k, "type": "bytes", "value": v.hex()})
        return out
