"""The ``NT_AMDGPU_METADATA`` note: code object v3+ metadata as one MessagePack map.

On disk (in an ``SHT_NOTE`` section, usually ``.note``)::

    namesz = 7, name "AMDGPU\\0" (padded to 8), n_type = 32, desc = one msgpack map

Root keys: ``amdhsa.version`` ([major, minor]), ``amdhsa.target`` (the full target
id with triple), ``amdhsa.kernels`` (array of kernel maps), optional
``amdhsa.printf``.  Kernel map keys start with ``.`` (``.name``, ``.symbol``,
``.kernarg_segment_size`` ...); each argument is a map too.  Keys this version
does not know are kept in ``extra`` so nothing the compiler wrote is lost.

``ld.lld`` does not merge notes: a linked code object may carry one note per
input object (an object without kernels contributes ``amdhsa.kernels: []``), so
:func:`read_metadata` merges every note it finds.

The desc is untrusted: its size is capped (:data:`MAX_NOTE_BYTES`), msgpack
runs with length limits, and every msgpack/decoding exception becomes a
:class:`~devbin.errors.FormatError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack  # type: ignore[import-untyped]

from devbin.errors import FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Note

__all__ = [
    "MAX_NOTE_BYTES",
    "NT_AMDGPU_METADATA",
    "AmdgpuMetadata",
    "KernelArg",
    "KernelMeta",
    "decode_metadata",
    "metadata_notes",
    "read_metadata",
]

NT_AMDGPU_METADATA = 32
NOTE_OWNER = "AMDGPU"
MAX_NOTE_BYTES = 16 << 20
_FMT = "amdgpu-metadata"

_ARG_KEYS = (".name", ".type_name", ".size", ".offset", ".value_kind", ".address_space", ".access",
             ".actual_access", ".pointee_align", ".is_const", ".is_restrict", ".is_volatile", ".is_pipe")
_KERNEL_KEYS = (".name", ".symbol", ".kernarg_segment_size", ".kernarg_segment_align", ".group_segment_fixed_size",
                ".private_segment_fixed_size", ".wavefront_size", ".sgpr_count", ".vgpr_count", ".agpr_count",
                ".sgpr_spill_count", ".vgpr_spill_count", ".max_flat_workgroup_size", ".uses_dynamic_stack",
                ".language", ".language_version", ".reqd_workgroup_size", ".workgroup_size_hint",
                ".vec_type_hint", ".device_enqueue_symbol", ".workgroup_processor_mode",
                ".uniform_work_group_size", ".cluster_dims", ".kind", ".args")
_ROOT_KEYS = ("amdhsa.version", "amdhsa.target", "amdhsa.kernels", "amdhsa.printf")


def _where(ctx: str, key: str) -> str:
    return f"{ctx} {key}" if ctx else key


def _int(m: dict[Any, Any], key: str, ctx: str) -> int | None:
    v = m.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise FormatError(f"{_where(ctx, key)}: expected an integer", fmt=_FMT, value=repr(v)[:80])
    return v


def _str(m: dict[Any, Any], key: str, ctx: str) -> str | None:
    v = m.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise FormatError(f"{_where(ctx, key)}: expected a string", fmt=_FMT, value=repr(v)[:80])
    return v


def _bool(m: dict[Any, Any], key: str, ctx: str) -> bool | None:
    v = m.get(key)
    if v is None:
        return None
    if not isinstance(v, bool):
        raise FormatError(f"{_where(ctx, key)}: expected a boolean", fmt=_FMT, value=repr(v)[:80])
    return v


def _ints(m: dict[Any, Any], key: str, ctx: str) -> tuple[int, ...] | None:
    v = m.get(key)
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise FormatError(f"{_where(ctx, key)}: expected a list of integers", fmt=_FMT, value=repr(v)[:80])
    return tuple(v)


def _extra(m: dict[Any, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {str(k): v for k, v in m.items() if k not in known}


@dataclass(frozen=True, slots=True)
class KernelArg:
    """One entry of a kernel's ``.args``: where it sits in the kernarg segment and what it is."""

    offset: int | None
    size: int | None
    value_kind: str | None
    name: str | None = None
    type_name: str | None = None
    address_space: str | None = None
    access: str | None = None
    actual_access: str | None = None
    pointee_align: int | None = None
    is_const: bool | None = None
    is_restrict: bool | None = None
    is_volatile: bool | None = None
    is_pipe: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def hidden(self) -> bool:
        """True for the implicit arguments the runtime fills (``hidden_*`` value kinds)."""
        return bool(self.value_kind and self.value_kind.startswith("hidden_"))


@dataclass(frozen=True, slots=True)
class KernelMeta:
    """One kernel map of ``amdhsa.kernels`` (None where a key is absent)."""

    name: str | None
    symbol: str | None
    kernarg_segment_size: int | None
    kernarg_segment_align: int | None
    group_segment_fixed_size: int | None
    private_segment_fixed_size: int | None
    wavefront_size: int | None
    sgpr_count: int | None
    vgpr_count: int | None
    agpr_count: int | None
    sgpr_spill_count: int | None
    vgpr_spill_count: int | None
    max_flat_workgroup_size: int | None
    uses_dynamic_stack: bool | None
    language: str | None
    language_version: tuple[int, ...] | None
    reqd_workgroup_size: tuple[int, ...] | None
    workgroup_size_hint: tuple[int, ...] | None
    vec_type_hint: str | None
    device_enqueue_symbol: str | None
    workgroup_processor_mode: int | None
    uniform_work_group_size: int | None
    cluster_dims: tuple[int, ...] | None
    kind: str | None
    args: tuple[KernelArg, ...]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AmdgpuMetadata:
    """The merged metadata of a code object (every note's kernels, in note order)."""

    version: tuple[int, ...] | None
    target: str | None
    kernels: tuple[KernelMeta, ...]
    printf: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def kernel(self, name: str) -> KernelMeta | None:
        for k in self.kernels:
            if k.name == name:
                return k
        return None


def _arg(m: object, ctx: str) -> KernelArg:
    if not isinstance(m, dict):
        raise FormatError(f"{ctx}: argument is not a map", fmt=_FMT)
    return KernelArg(
        _int(m, ".offset", ctx), _int(m, ".size", ctx), _str(m, ".value_kind", ctx), _str(m, ".name", ctx),
        _str(m, ".type_name", ctx), _str(m, ".address_space", ctx), _str(m, ".access", ctx),
        _str(m, ".actual_access", ctx), _int(m, ".pointee_align", ctx), _bool(m, ".is_const", ctx),
        _bool(m, ".is_restrict", ctx), _bool(m, ".is_volatile", ctx), _bool(m, ".is_pipe", ctx),
        _extra(m, _ARG_KEYS))


def _intish(m: dict[Any, Any], key: str, ctx: str) -> int | None:
    v = m.get(key)
    if isinstance(v, bool):  # LLVM writes an integer 0/1; accept a boolean too
        return int(v)
    return _int(m, key, ctx)


def _kernel(m: object, index: int) -> KernelMeta:
    ctx = f"amdhsa.kernels[{index}]"
    if not isinstance(m, dict):
        raise FormatError(f"{ctx}: kernel is not a map", fmt=_FMT)
    args = m.get(".args", [])
    if not isinstance(args, list):
        raise FormatError(f"{ctx} .args: expected a list", fmt=_FMT)
    return KernelMeta(
        _str(m, ".name", ctx), _str(m, ".symbol", ctx), _int(m, ".kernarg_segment_size", ctx),
        _int(m, ".kernarg_segment_align", ctx), _int(m, ".group_segment_fixed_size", ctx),
        _int(m, ".private_segment_fixed_size", ctx), _int(m, ".wavefront_size", ctx), _int(m, ".sgpr_count", ctx),
        _int(m, ".vgpr_count", ctx), _int(m, ".agpr_count", ctx), _int(m, ".sgpr_spill_count", ctx),
        _int(m, ".vgpr_spill_count", ctx), _int(m, ".max_flat_workgroup_size", ctx),
        _bool(m, ".uses_dynamic_stack", ctx), _str(m, ".language", ctx), _ints(m, ".language_version", ctx),
        _ints(m, ".reqd_workgroup_size", ctx), _ints(m, ".workgroup_size_hint", ctx),
        _str(m, ".vec_type_hint", ctx), _str(m, ".device_enqueue_symbol", ctx),
        _intish(m, ".workgroup_processor_mode", ctx),
        _intish(m, ".uniform_work_group_size", ctx), _ints(m, ".cluster_dims", ctx),
        _str(m, ".kind", ctx), tuple(_arg(a, f"{ctx}.args[{i}]") for i, a in enumerate(args)),
        _extra(m, _KERNEL_KEYS))


def unpack(desc: bytes | memoryview) -> object:
    """msgpack-decode a note desc under size limits; every failure is a FormatError."""
    n = len(desc)
    if n > MAX_NOTE_BYTES:
        raise FormatError("metadata note larger than the cap", fmt=_FMT, value=n)
    try:
        return msgpack.unpackb(bytes(desc), raw=False, strict_map_key=False, use_list=True,
                               max_str_len=n, max_bin_len=n, max_array_len=n,
                               max_map_len=n, max_ext_len=n)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError, UnicodeDecodeError,
            msgpack.exceptions.UnpackException) as e:
        raise FormatError(f"bad MessagePack in metadata note: {type(e).__name__}: {str(e)[:120]}",
                          fmt=_FMT) from None


def _wanted(m: object, only: frozenset[str] | None) -> bool:
    """Convert this kernel map?  With ``only``, a well-formed map naming another kernel is skipped
    (unchecked); anything malformed is still converted, so that it fails as it would in full."""
    if only is None or not isinstance(m, dict):
        return True
    name = m.get(".name")
    return not isinstance(name, str) or name in only


def decode_metadata(desc: bytes | memoryview, *, only: frozenset[str] | None = None) -> AmdgpuMetadata:
    """Decode one ``NT_AMDGPU_METADATA`` desc; ``only``: convert just the kernels of these names."""
    root = unpack(desc)
    if not isinstance(root, dict):
        raise FormatError("metadata root is not a map", fmt=_FMT)
    kernels = root.get("amdhsa.kernels", [])
    if not isinstance(kernels, list):
        raise FormatError("amdhsa.kernels: expected a list", fmt=_FMT)
    printf = root.get("amdhsa.printf", [])
    if not isinstance(printf, list) or not all(isinstance(p, str) for p in printf):
        raise FormatError("amdhsa.printf: expected a list of strings", fmt=_FMT)
    return AmdgpuMetadata(_ints(root, "amdhsa.version", ""), _str(root, "amdhsa.target", ""),
                          tuple(_kernel(k, i) for i, k in enumerate(kernels) if _wanted(k, only)), tuple(printf),
                          _extra(root, _ROOT_KEYS))


def metadata_notes(elf: ElfFile) -> list[Note]:
    """Every ``AMDGPU``/32 note in the file's ``SHT_NOTE`` sections, in section order."""
    out: list[Note] = []
    for sec in elf.sections:
        if sec.sh_type == C.SHT_NOTE:
            out.extend(n for n in elf.notes(sec) if n.name == NOTE_OWNER and n.n_type == NT_AMDGPU_METADATA)
    return out


def read_metadata(elf: ElfFile, *, only: frozenset[str] | None = None) -> AmdgpuMetadata | None:
    """The metadata of a code object, every note merged; None without a metadata note.

    ``only``: convert just the kernel maps of these names (the rest are skipped unchecked), for
    a loader that needs one kernel's records out of thousands."""
    notes = metadata_notes(elf)
    if not notes:
        return None
    parts = [decode_metadata(n.desc, only=only) for n in notes]
    first = next((p for p in parts if p.kernels), parts[0])
    extra: dict[str, Any] = {}
    for p in parts:
        extra.update(p.extra)
    return AmdgpuMetadata(first.version, first.target, tuple(k for p in parts for k in p.kernels),
                          tuple(s for p in parts for s in p.printf), extra)
