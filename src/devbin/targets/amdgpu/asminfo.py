"""Per-function resource facts from the AMDGPU assembly clang prints (``-S``).

LLVM 19 objects carry resource usage only for kernels (the metadata note); the
per-function numbers exist only as comments in the assembly output (reference
§4.7).  What clang-19 and clang-22 print, as observed (gfx90a, ``-O2``):

* after each function, in ``.AMDGPU.csdata``, a block introduced by
  ``; Kernel info:`` (kernels) or ``; Function info:`` (device functions)::

      ; codeLenInByte = 12
      ; NumSgprs: 36            (clang-22: "; TotalNumSgprs: 36")
      ; NumVgprs: 1
      ; NumAgprs: 0
      ; TotalNumVgprs: 1
      ; ScratchSize: 0
      ; MemoryBound: 0

  and for kernels further ``FloatMode``, ``IeeeMode``, ``LDSByteSize: N
  bytes/workgroup (compile time only)``, ``SGPRBlocks``, ``VGPRBlocks``,
  ``NumSGPRsForWavesPerEU``, ``NumVGPRsForWavesPerEU``, ``AccumOffset``,
  ``Occupancy``, ``WaveLimiterHint``, ``COMPUTE_PGM_RSRC*:FIELD: N``.
  ``NumSgprs``/``TotalNumSgprs`` include VCC, flat scratch and XNACK mask (as
  the note's ``.sgpr_count``); ``TotalNumVgprs`` is what the note calls
  ``.vgpr_count`` (on gfx90a the VGPRs rounded to 4 plus the AGPRs);
* per kernel, an ``.amdhsa_kernel NAME`` block with ``.amdhsa_uses_dynamic_stack``,
  ``.amdhsa_reserve_vcc``, ``.amdhsa_reserve_flat_scratch`` ...;
* the metadata YAML (``.amdgpu_metadata``) with each kernel's
  ``.sgpr_spill_count``/``.vgpr_spill_count``/``.uses_dynamic_stack``.

Device functions get no spill counts, dynamic-stack or VCC facts in the text:
those stay ``None`` (unknown).  Lines the parser does not know are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from devbin.errors import DeviceBinaryError, FormatError
from devbin.model import Attribute, CodeObject, Function, StdAttr
from devbin.model.resources import AMD_SGPR_SPILL, AMD_VGPR_SPILL
from devbin.targets.amdgpu.resources import RESOURCE_SYMBOL_SUFFIXES

__all__ = ["AsmFunctionInfo", "MergeReport", "attributes_from", "merge_asm_info", "parse_asm_info"]

Diag = Callable[[DeviceBinaryError], None]

# Vendor attribute ids registered by devbin.targets.amdgpu.importer (imported there, at module load).
_AMD_USES_VCC = 0x209
_AMD_USES_FLAT_SCRATCH = 0x20A


@dataclass(slots=True)
class AsmFunctionInfo:
    """What the assembly says about one function; ``None``: not printed."""

    name: str
    kind: str  # "kernel" ("; Kernel info:") or "device" ("; Function info:")
    code_bytes: int | None = None
    sgpr: int | None = None  # NumSgprs / TotalNumSgprs (with VCC, flat scratch, XNACK)
    vgpr: int | None = None  # NumVgprs (architected VGPRs)
    agpr: int | None = None  # NumAgprs
    total_vgpr: int | None = None  # TotalNumVgprs (the note's .vgpr_count)
    scratch: int | None = None  # ScratchSize: private bytes per lane, callees included
    memory_bound: int | None = None
    lds: int | None = None  # LDSByteSize (kernels)
    occupancy: int | None = None  # waves per SIMD (kernels)
    accum_offset: int | None = None
    dynamic_stack: bool | None = None  # .amdhsa_uses_dynamic_stack / metadata (kernels)
    uses_vcc: bool | None = None  # .amdhsa_reserve_vcc (kernels)
    uses_flat_scratch: bool | None = None  # .amdhsa_reserve_flat_scratch (kernels)
    sgpr_spill: int | None = None  # metadata .sgpr_spill_count (kernels)
    vgpr_spill: int | None = None
    other: dict[str, str] = field(default_factory=dict)  # every other "; Key: value" line of the block
    # LLVM 20+: ``.set f.num_vgpr, 1``-style resource symbols whose value is a plain number
    # (an expression over callees, e.g. ``max(44, amdgpu.max_num_vgpr)``, is left out).
    symbols: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_NAME = r'(?:"(?P<q>[^"]*)"|(?P<n>[^\s,"]+))'
_TYPE_RE = re.compile(r"^\s*\.type\s+" + _NAME + r"\s*,\s*@function")
_BEGIN_RE = re.compile(r";\s*-- Begin function\s+(?P<n>\S+)")
_INFO_RE = re.compile(r"^\s*;\s*(Kernel|Function) info:\s*$")
_FIELD_RE = re.compile(r"^\s*;\s*([A-Za-z_][\w:]*(?:\s[A-Za-z_]\w*)*)\s*(?:=|:)\s*(.*?)\s*$")
_KD_RE = re.compile(r"^\s*\.amdhsa_kernel\s+" + _NAME)
_KD_FIELD_RE = re.compile(r"^\s*\.amdhsa_(\w+)\s+(-?\d+)\s*$")
_MD_KEY_RE = re.compile(r"^(?P<ind>\s*)(?:- )?\.(?P<k>\w+):\s*(?P<v>.*?)\s*$")
_SET_RE = re.compile(r"^\s*\.set\s+(?P<f>\S+)\.(?P<s>" + "|".join(RESOURCE_SYMBOL_SUFFIXES)
                     + r")\s*,\s*(?P<v>-?\d{1,30})\s*$")
_INT_RE = re.compile(r"^(-?\d{1,30})(?:\s|$)")  # a number, not the start of an expression ("16+max(...)")

_INT_FIELDS = {"codeLenInByte": "code_bytes", "NumSgprs": "sgpr", "TotalNumSgprs": "sgpr", "NumVgprs": "vgpr",
               "NumAgprs": "agpr", "TotalNumVgprs": "total_vgpr", "ScratchSize": "scratch",
               "MemoryBound": "memory_bound", "LDSByteSize": "lds", "Occupancy": "occupancy",
               "AccumOffset": "accum_offset"}


def _name(m: re.Match[str]) -> str:
    q = m.group("q")
    return q if q is not None else m.group("n")


def _int(v: str) -> int | None:
    m = _INT_RE.match(v)
    return int(m.group(1)) if m else None


def _bool(v: str) -> bool | None:
    return {"true": True, "false": False, "1": True, "0": False}.get(v.strip().lower())


def parse_asm_info(text: str) -> dict[str, AsmFunctionInfo]:
    """``{function: facts}`` for every function with a ``Kernel info``/``Function info`` block."""
    out: dict[str, AsmFunctionInfo] = {}
    current: str | None = None  # the function whose body we are in or just left
    block: AsmFunctionInfo | None = None
    kd: AsmFunctionInfo | None = None
    kd_fields: dict[str, str] = {}
    in_md = False
    md_entry: dict[str, str] = {}
    md_entries: list[dict[str, str]] = []
    for line in text.splitlines():
        if in_md:
            if line.strip() == ".end_amdgpu_metadata":
                in_md = False
                if md_entry:
                    md_entries.append(md_entry)
                continue
            m = _MD_KEY_RE.match(line)
            if m is not None and len(m.group("ind")) == 2 and line.lstrip().startswith("- "):
                if md_entry:
                    md_entries.append(md_entry)
                md_entry = {m.group("k"): m.group("v")}
            elif m is not None and len(m.group("ind")) == 4 and md_entry is not None:
                md_entry[m.group("k")] = m.group("v")
            elif line and not line.startswith(" ") and md_entry:
                md_entries.append(md_entry)
                md_entry = {}
            continue
        s = line.strip()
        if s == ".amdgpu_metadata":
            in_md, md_entry = True, {}
            continue
        if kd is not None:
            if s == ".end_amdhsa_kernel":
                kd.dynamic_stack = _bool(kd_fields.get("uses_dynamic_stack", ""))
                kd.uses_vcc = _bool(kd_fields.get("reserve_vcc", ""))
                kd.uses_flat_scratch = _bool(kd_fields.get("reserve_flat_scratch", ""))
                kd = None
                continue
            m = _KD_FIELD_RE.match(line)
            if m is not None:
                kd_fields[m.group(1)] = m.group(2)
            continue
        m = _SET_RE.match(line)
        if m is not None:
            fname = m.group("f")
            sym_info = out.setdefault(fname, AsmFunctionInfo(fname, "device"))
            sym_info.symbols[m.group("s")] = int(m.group("v"))
            continue
        m = _KD_RE.match(line)
        if m is not None:
            name = _name(m)
            kd = out.setdefault(name, AsmFunctionInfo(name, "kernel"))
            kd_fields = {}
            block = None
            continue
        m = _BEGIN_RE.search(line) or _TYPE_RE.match(line)
        if m is not None:
            current = m.group("n") if "q" not in m.re.groupindex else _name(m)
            block = None
            continue
        m = _INFO_RE.match(line)
        if m is not None:
            if current is None:
                continue
            kind = "kernel" if m.group(1) == "Kernel" else "device"
            block = out.setdefault(current, AsmFunctionInfo(current, kind))
            block.kind = kind
            continue
        if block is None:
            continue
        if not s.startswith(";"):
            if s and not s.startswith("."):
                block = None  # code: the block is over
            continue
        m = _FIELD_RE.match(line)
        if m is None:
            continue
        key, value = m.group(1).strip(), m.group(2)
        attr = _INT_FIELDS.get(key)
        if attr is not None:
            setattr(block, attr, _int(value))
        else:
            block.other[key] = value
    for e in md_entries:
        name = e.get("name", "").strip("'\"")
        info = out.get(name)
        if not name or info is None:
            continue
        if "sgpr_spill_count" in e:
            info.sgpr_spill = _int(e["sgpr_spill_count"])
        if "vgpr_spill_count" in e:
            info.vgpr_spill = _int(e["vgpr_spill_count"])
        if info.dynamic_stack is None and "uses_dynamic_stack" in e:
            info.dynamic_stack = _bool(e["uses_dynamic_stack"])
    for info in out.values():  # device functions: the flags only LLVM 20+ prints (as symbols)
        sy = info.symbols
        if info.uses_vcc is None and "uses_vcc" in sy:
            info.uses_vcc = bool(sy["uses_vcc"])
        if info.uses_flat_scratch is None and "uses_flat_scratch" in sy:
            info.uses_flat_scratch = bool(sy["uses_flat_scratch"])
        if info.dynamic_stack is None and "has_dyn_sized_stack" in sy and "has_recursion" in sy:
            info.dynamic_stack = bool(sy["has_dyn_sized_stack"] or sy["has_recursion"])
    return out


def attributes_from(info: AsmFunctionInfo) -> list[Attribute]:
    """The model attributes the facts support (nothing for what the assembly did not print).

    ``REGS_GENERAL`` is ``TotalNumVgprs`` (what the note records for kernels), ``REGS_ACCUM``
    ``NumAgprs``, ``REGS_SCALAR`` ``NumSgprs`` and ``PRIVATE_BYTES`` ``ScratchSize``.
    """
    out: list[Attribute] = []
    for attr_id, v in ((StdAttr.REGS_SCALAR, info.sgpr),
                       (StdAttr.REGS_GENERAL, info.total_vgpr if info.total_vgpr is not None else info.vgpr),
                       (StdAttr.REGS_ACCUM, info.agpr), (StdAttr.PRIVATE_BYTES, info.scratch),
                       (AMD_SGPR_SPILL, info.sgpr_spill), (AMD_VGPR_SPILL, info.vgpr_spill)):
        if v is not None and 0 <= v < (1 << 64):
            out.append(Attribute(attr_id, v))
    # FLAG attributes are written when true; a known false is represented by absence.
    for attr_id, flag in ((StdAttr.DYNAMIC_STACK, info.dynamic_stack), (_AMD_USES_VCC, info.uses_vcc),
                          (_AMD_USES_FLAT_SCRATCH, info.uses_flat_scratch)):
        if flag:
            out.append(Attribute(attr_id, True))
    return out


@dataclass(frozen=True, slots=True)
class MergeReport:
    """What :func:`merge_asm_info` did."""

    filled: tuple[str, ...]  # device functions that gained facts
    checked: tuple[str, ...]  # kernels whose note totals were compared with the assembly
    disagreements: tuple[str, ...]  # one line per differing value
    missing: tuple[str, ...]  # functions of the object the assembly says nothing about


# Kernel values compared with the note.  VCC/flat-scratch are left out: the descriptor's
# reserve bits are not the note's (LLVM 19 has no such note field at all).
_KERNEL_CHECKED = frozenset({StdAttr.REGS_SCALAR, StdAttr.REGS_GENERAL, StdAttr.REGS_ACCUM, StdAttr.PRIVATE_BYTES,
                             StdAttr.DYNAMIC_STACK, AMD_SGPR_SPILL, AMD_VGPR_SPILL})


def _disagree(fn: Function, new: list[Attribute], what: str) -> list[str]:
    out = []
    for a in new:
        old = fn.attr(a.id)
        if a.form.name == "FLAG":
            if bool(old) != bool(a.value):
                out.append(f"{fn.name}: {what} {a.info.name if a.info else hex(a.id)} is {bool(old)}, "
                           f"assembly says {bool(a.value)}")
        elif old is not None and old != a.value:
            out.append(f"{fn.name}: {what} {a.info.name if a.info else hex(a.id)} is {old!s}, "
                       f"assembly says {a.value!s}")
    return out


def merge_asm_info(obj: CodeObject, infos: dict[str, AsmFunctionInfo], *,
                   diag: Diag | None = None) -> tuple[CodeObject, MergeReport]:
    """``obj`` with the assembly's facts added to its device functions.

    Kernels keep the note's totals; every assembly number that differs from them is a
    disagreement (reported through ``diag`` as a :class:`FormatError`, and in the report).
    Device functions take the assembly's numbers (they replace LLVM 20+ symbol values, whose
    ``numbered_sgpr`` leaves out VCC/flat scratch/XNACK); a differing VGPR/AGPR/private value
    is reported too.
    """
    funcs: list[Function] = []
    filled: list[str] = []
    checked: list[str] = []
    bad: list[str] = []
    missing: list[str] = []
    for fn in obj.functions:
        info = infos.get(fn.name)
        if info is None:
            missing.append(fn.name)
            funcs.append(fn)
            continue
        new = attributes_from(info)
        if fn.is_kernel:
            checked.append(fn.name)
            bad += _disagree(fn, [a for a in new if a.id in _KERNEL_CHECKED], "note")
            if info.lds is not None and fn.uint(StdAttr.SHARED_BYTES) not in (None, info.lds):
                bad.append(f"{fn.name}: note group segment is {fn.uint(StdAttr.SHARED_BYTES)}, "
                           f"assembly says {info.lds}")
            funcs.append(fn)
            continue
        compare = [a for a in new if a.id in (StdAttr.REGS_ACCUM, StdAttr.PRIVATE_BYTES)]
        bad += _disagree(fn, compare, "object")
        funcs.append(fn.with_attributes(*new))
        filled.append(fn.name)
    if diag is not None:
        for line in bad:
            diag(FormatError(line, fmt="amdgpu-asm"))
    return replace(obj, functions=tuple(funcs)), MergeReport(tuple(filled), tuple(checked), tuple(bad),
                                                             tuple(missing))
