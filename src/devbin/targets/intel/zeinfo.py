"""A zebin's ``.ze_info`` section: kernels and functions with their execution environment.

The section (``sh_type`` ``SHT_ZEBIN_ZEINFO`` = 0xFF000011) is YAML text
(:mod:`devbin.targets.intel.yamlsubset`) whose top level holds ``version`` ("major.minor"),
``kernels`` and ``functions`` (lists of entries with a ``name`` and an ``execution_env``), and
other keys (``kernels_misc_info``, ``global_host_access_table`` ...) kept as parsed
(IGC ``IGC/ZEBinWriter/zebin/spec/zeinfo.md``; the runtime's reader is compute-runtime
``shared/source/device_binary_format/zebin/zeinfo_decoder.cpp``).  Every 1.x version is read: the
major version changes on incompatible changes, the minor on additions
(``IGC/ZEBinWriter/zebin/spec/version.md``), so keys a version lacks take the spec's defaults
(mostly 0/false: IGC leaves out zero values, ``barrier_count`` and ``slm_size`` among them).
Keys devbin does not know are kept (:attr:`ZeEntry.unknown_env`), never an error.

Per-thread memory (:meth:`ZeEntry.private_bytes`, :meth:`ZeEntry.spill_bytes`) follows the
runtime (``populateKernelPerThreadMemoryBuffer`` and the execution-environment population in
``zeinfo_decoder.cpp``): from version 1.39 on, ``execution_env.private_size`` and ``spill_size``
(bytes per hardware thread); before, ``per_thread_memory_buffers``: scratch slot 0 is spill (a
``single_space`` buffer holds privates and spills together: IGC writes one when only slot 0 is
used, ``IGC/AdaptorOCL/OCL/sp/zebin_builder.cpp`` ``addMemoryBuffer``), scratch slot 1 private, and a
``global``/``private_space`` buffer private (its size per work-item when ``is_simt_thread``, so
times ``simd_size``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from devbin.errors import FormatError
from devbin.targets.intel.yamlsubset import Value, parse_yaml

__all__ = ["KNOWN_ENV_KEYS", "MemoryBuffer", "ZeEntry", "ZeInfo", "read_zeinfo"]

#: The ``execution_env`` keys devbin reads into the model (the rest are kept as text).
KNOWN_ENV_KEYS: Final = frozenset({
    "grf_count", "simd_size", "barrier_count", "slm_size", "private_size", "spill_size", "eu_thread_count",
    "required_sub_group_size", "required_work_group_size", "has_stack_calls", "has_dpas",
})
#: ``version`` from which ``private_size``/``spill_size`` are the runtime's source (version.md, 1.39).
SIZES_IN_ENV: Final = (1, 39)


def _int(v: Value | None) -> int | None:
    if not isinstance(v, str):
        return None
    t = v.strip()
    neg = t.startswith("-")
    body = t[1:] if neg or t.startswith("+") else t
    try:
        n = int(body, 16) if body[:2] in ("0x", "0X") else int(body, 10) if body.isdigit() and body.isascii() else None
    except ValueError:
        return None
    return None if n is None else -n if neg else n


def _bool(v: Value | None) -> bool | None:
    if not isinstance(v, str):
        return None
    return {"true": True, "false": False}.get(v.strip().lower())


def _dims(v: Value | None) -> tuple[int, int, int] | None:
    if not isinstance(v, list) or len(v) != 3:
        return None
    d = [_int(x) for x in v]
    return (d[0], d[1], d[2]) if all(x is not None and x >= 0 for x in d) else None  # type: ignore[return-value]


def _text(v: Value) -> str:
    """A value as one line of YAML-like text (what an unknown key shows)."""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "[ " + ", ".join(_text(x) for x in v) + " ]"
    return "{ " + ", ".join(f"{k}: {_text(x)}" for k, x in v.items()) + " }"


@dataclass(frozen=True, slots=True)
class MemoryBuffer:
    """One ``per_thread_memory_buffers`` entry (``type``, ``usage``, ``size``, ``slot``, ``is_simt_thread``)."""

    type: str
    usage: str
    size: int
    slot: int = 0
    is_simt_thread: bool = False


@dataclass(frozen=True, slots=True)
class ZeEntry:
    """A ``kernels`` or ``functions`` entry: its ``execution_env`` and memory buffers, the rest raw."""

    name: str
    is_kernel: bool
    env: dict[str, Value]
    user_attributes: dict[str, Value]
    buffers: tuple[MemoryBuffer, ...]
    version: tuple[int, int]

    def int_env(self, key: str) -> int | None:
        return _int(self.env.get(key))

    def flag(self, key: str) -> bool:
        return _bool(self.env.get(key)) is True

    @property
    def grf_count(self) -> int | None:
        return self.int_env("grf_count")

    @property
    def simd_size(self) -> int | None:
        return self.int_env("simd_size")

    @property
    def barrier_count(self) -> int:
        return self.int_env("barrier_count") or 0

    @property
    def slm_size(self) -> int:
        return self.int_env("slm_size") or 0

    @property
    def eu_thread_count(self) -> int | None:
        return self.int_env("eu_thread_count")

    @property
    def required_sub_group_size(self) -> int | None:
        """``execution_env.required_sub_group_size``, else ``user_attributes.intel_reqd_sub_group_size``
        (IGC 2022 to 2026 write only the latter)."""
        v = self.int_env("required_sub_group_size")
        return v if v else _int(self.user_attributes.get("intel_reqd_sub_group_size")) or None

    @property
    def required_work_group_size(self) -> tuple[int, int, int] | None:
        d = _dims(self.env.get("required_work_group_size")) or _dims(self.user_attributes.get("reqd_work_group_size"))
        return d if d is not None and any(d) else None

    def _scratch(self, slot: int) -> int:
        return sum(b.size for b in self.buffers if b.type == "scratch" and b.slot == slot)

    def _global_private(self) -> int:
        simd = self.simd_size or 1
        return sum(b.size * (simd if b.is_simt_thread else 1) for b in self.buffers
                   if b.type == "global" and b.usage == "private_space")

    @property
    def sizes_in_env(self) -> bool:
        return self.version >= SIZES_IN_ENV or "private_size" in self.env or "spill_size" in self.env

    def private_bytes(self) -> int:
        """Private memory per hardware thread (module docstring)."""
        if self.sizes_in_env:
            return self.int_env("private_size") or 0
        return self._scratch(1) + self._global_private()

    def spill_bytes(self) -> int:
        """Spill/fill bytes per hardware thread (before 1.39: scratch slot 0, which a ``single_space``
        buffer shares with privates)."""
        if self.sizes_in_env:
            return self.int_env("spill_size") or 0
        return self._scratch(0)

    def scratch_bytes(self) -> int:
        """Every ``scratch`` buffer's bytes per hardware thread, as recorded (the runtime rounds each up)."""
        return sum(b.size for b in self.buffers if b.type == "scratch")

    def unknown_env(self) -> tuple[tuple[str, str], ...]:
        """``execution_env`` keys devbin does not map, with their text."""
        return tuple((k, _text(v)) for k, v in self.env.items() if k not in KNOWN_ENV_KEYS)


@dataclass(frozen=True, slots=True)
class ZeInfo:
    """The parsed section: ``version``, its entries and the whole tree (:attr:`tree`)."""

    version_text: str
    version: tuple[int, int]
    kernels: tuple[ZeEntry, ...]
    functions: tuple[ZeEntry, ...]
    tree: dict[str, Value]

    def entry(self, name: str) -> ZeEntry | None:
        return next((e for e in (*self.kernels, *self.functions) if e.name == name), None)


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    a, b = _int(major), _int(minor)
    return (a, b) if a is not None and b is not None and a >= 0 and b >= 0 else (0, 0)


def _buffers(v: Value | None) -> tuple[MemoryBuffer, ...]:
    if not isinstance(v, list):
        return ()
    out = []
    for b in v:
        if isinstance(b, dict):
            t, u = b.get("type", ""), b.get("usage", "")
            out.append(MemoryBuffer(t if isinstance(t, str) else "", u if isinstance(u, str) else "",
                                    max(_int(b.get("size")) or 0, 0), max(_int(b.get("slot")) or 0, 0),
                                    _bool(b.get("is_simt_thread")) is True))
    return tuple(out)


def _entries(v: Value | None, is_kernel: bool, version: tuple[int, int], where: str) -> tuple[ZeEntry, ...]:
    if v is None or v == "":
        return ()
    what = "kernels" if is_kernel else "functions"
    if not isinstance(v, list):
        raise FormatError(f"{what} is not a sequence", fmt="ze_info", where=where)
    out = []
    for i, e in enumerate(v):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not e.get("name"):
            raise FormatError(f"{what}[{i}] has no name", fmt="ze_info", where=where)
        env, ua = e.get("execution_env", {}), e.get("user_attributes", {})
        out.append(ZeEntry(str(e["name"]), is_kernel, env if isinstance(env, dict) else {},
                           ua if isinstance(ua, dict) else {}, _buffers(e.get("per_thread_memory_buffers")),
                           version))
    return tuple(out)


def read_zeinfo(data: bytes | memoryview, *, where: str = "") -> ZeInfo:
    """Parse ``.ze_info`` bytes; FormatError on text that is not this YAML or has no mapping at its top."""
    tree = parse_yaml(bytes(data), where=where)
    if not isinstance(tree, dict):
        raise FormatError("the top level is not a mapping", fmt="ze_info", where=where)
    vt = tree.get("version", "")
    version_text = vt if isinstance(vt, str) else ""
    version = _version(version_text)
    return ZeInfo(version_text, version, _entries(tree.get("kernels"), True, version, where),
                  _entries(tree.get("functions"), False, version, where), tree)
