"""The records a vendor descriptor's methods return (:mod:`devbin.targets.vendor`): what a device ELF
says of itself (:class:`ObjectFacts`, ``devbin pack``), what a compile's assembly taught
(:class:`AssemblyFacts`, ``devbin cc``), a GPU to select or load for (:class:`Device`) and whether a
driver loads an image on it (:class:`Verdict`, ``devbin select``).

Apart from :mod:`devbin.targets.vendor` (which names them, :data:`~devbin.targets.vendor.__all__`)
so that importing the descriptors - every command does, through the registry - does not build these
classes: a scan asks a descriptor for none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from devbin.model import CodeObject
    from devbin.targets.amdgpu.targetid import TargetId

__all__ = ["AssemblyFacts", "Device", "ObjectFacts", "Verdict"]


@dataclass(frozen=True, slots=True)
class ObjectFacts:
    """What a vendor's device ELF says of itself (``devbin pack``'s facts, docs/PACK.md): its
    architecture as the loader reads it, its triple, the producer and compile options it records
    (``None``: the vendor keeps none of its own; the ELF's ``.comment`` then says), its code object
    version (``None`` where the vendor has none)."""

    arch: str
    triple: str
    producer: str | None = None
    compile_options: str = ""
    code_object_version: int | None = None


@dataclass(frozen=True, slots=True)
class AssemblyFacts:
    """What ``devbin cc`` learned from a compile's assembly (:meth:`Vendor.facts_from_assembly`): the
    object's model with them added, each function's facts as JSON, the functions that gained facts
    (``filled``), those checked against the object's own (``checked``), one line per value that
    differs (``disagreements``) and the functions the assembly says nothing about (``missing``)."""

    model: CodeObject
    functions: dict[str, dict[str, Any]]
    filled: tuple[str, ...]
    checked: tuple[str, ...]
    disagreements: tuple[str, ...]
    missing: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Device:
    """A GPU to select or load for, as a vendor's :meth:`Vendor.parse_device` reads its name: ``cc`` the
    compute capability of an NVIDIA device, ``target`` the target ID of an AMD one (features it does not
    state are unknown); ``vendor`` its vendor's canonical :attr:`Vendor.name` (``nvidia``, ``amd``,
    ``intel``); ``description`` one line for people; ``note`` what the name left open."""

    name: str
    vendor: str
    cc: tuple[int, int] | None = None
    target: TargetId | None = None
    note: str = ""
    description: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.name

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "vendor": self.vendor,
                "compute_capability": f"{self.cc[0]}.{self.cc[1]}" if self.cc else None,
                "target_id": str(self.target) if self.target is not None else None, "note": self.note}


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a driver loads an image on a device (:meth:`Vendor.judge`): ``reason`` one phrase, ``rank``
    a sort key among the images that load (smaller is better), ``jit`` compiled by the driver first.  A
    refusal's ``rank`` is where the image would rank if the driver compiled the IR it carries instead
    (:meth:`Vendor.refused_fallback`); empty where the driver never looks at it."""

    ok: bool
    reason: str
    rank: tuple[int, ...] = ()
    jit: bool = False
