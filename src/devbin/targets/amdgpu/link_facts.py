"""Per-function resource facts of AMDGPU relocatable objects, and kernel totals across objects.

LLVM computes a kernel's registers and private segment over the callees it can see in one
module (reference §4.7): ``private = own frame + max(callee private)``, registers =
``max(own, callees)``, flags OR-ed.  A callee defined in another object is "unknown":
code object v5+ assumes 0 bytes of stack and no registers for it, but sets
``uses_dynamic_stack``.  ``ld.lld`` recomputes nothing, so the linked kernel keeps its own,
too-small numbers (llvm#139036).  This module redoes LLVM's propagation across objects.

The facts come from the unified model (:mod:`devbin.targets.amdgpu.importer`, or the devbin
sections that ``devbin cc`` writes, which add the device functions' numbers from clang's
``; Function info`` blocks; LLVM 19 objects alone know nothing about device functions, and
those stay ``None``).  Two values are derived here:

* ``own_private``: LLVM's per-function private size already includes the callees *in the
  same object*; the own frame is that size minus the largest such callee's size, so a
  callee reached through two objects is not counted twice;
* ``dynamic_stack = None`` ("cannot tell"): LLVM sets the flag both for the function's own
  dynamic allocas and recursion and for any call that leaves the object, so a true flag on
  a function that calls out of its object says nothing about the function itself.  The
  totals resolve it by source language: OpenCL C has neither variable-length arrays nor
  recursion (clang marks every OpenCL function ``norecurse``), so the flag can only come
  from the unknown callee and is dropped once the callee is known; for any other language
  it is kept (conservative: the runtime then reserves more scratch).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from devbin.analysis.propagation import Propagation, propagate
from devbin.errors import UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.importers import model_of
from devbin.model import CodeObject, Function, StdAttr
from devbin.model.reach import reachable
from devbin.targets.amdgpu.descriptor import vgpr_granule
from devbin.targets.amdgpu.mach import decode_flags, gfx_major

__all__ = ["FunctionFacts", "KernelTotals", "function_facts", "kernel_totals", "total_vgprs", "unified_vgprs"]

_AMD_USES_VCC = 0x209  # registered by devbin.targets.amdgpu.importer
_AMD_USES_FLAT_SCRATCH = 0x20A
_AMD_LANGUAGE = 0x20C
_OPENCL = "OpenCL C"


def unified_vgprs(processor: str) -> bool:
    """True where arch VGPRs and AGPRs share one file (GFX90A/GFX94x: granule 8 even in wave64)."""
    return vgpr_granule(processor, False) == 8


def total_vgprs(processor: str, arch: int, agpr: int) -> int:
    """What the note calls ``.vgpr_count`` (LLVM ``getTotalNumVGPRs``): on GFX90A/GFX94x the arch
    VGPRs rounded up to 4 plus the AGPRs, elsewhere the larger of the two."""
    if agpr and unified_vgprs(processor):
        return -(-arch // 4) * 4 + agpr
    return max(arch, agpr)


@dataclass(frozen=True, slots=True)
class FunctionFacts:
    """What one object says about one function; ``None``: the object does not say.

    ``vgpr`` has the note's meaning (:func:`total_vgprs`); ``arch_vgpr`` is derived from it
    and ``agpr``.  ``sgpr`` includes VCC, flat scratch and the XNACK mask, as the note's
    ``.sgpr_count``.  ``private_bytes`` is LLVM's number (own frame + callees in the same
    object); ``own_private`` the frame alone.  ``calls`` are the direct callees (keys of the
    mapping :func:`function_facts` returns), ``external_calls`` those not defined in the
    function's own object.
    """

    key: str
    name: str
    unit: str
    processor: str
    kernel: bool
    vgpr: int | None
    arch_vgpr: int | None
    agpr: int | None
    sgpr: int | None
    private_bytes: int | None
    own_private: int | None
    dynamic_stack: bool | None
    uses_vcc: bool | None
    uses_flat_scratch: bool | None
    calls: tuple[str, ...]
    external_calls: tuple[str, ...]
    language: str | None


@dataclass(frozen=True, slots=True)
class KernelTotals:
    """A kernel's resource usage over everything it can reach, as the loader must see it.

    ``reaches``: every function the kernel can call (directly or not), sorted.  ``unknown``:
    reachable functions without facts (their registers and stack cannot be counted, so the
    stack is marked dynamic, as LLVM does for a callee it cannot see: compile them with
    ``devbin cc``), ``unresolved``: callees no object defines.  ``reasons`` says why
    ``dynamic_stack`` is set.
    """

    private_segment: int
    arch_vgpr: int
    agpr: int
    sgpr: int
    dynamic_stack: bool
    reaches: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    def vgpr(self, processor: str) -> int:
        return total_vgprs(processor, self.arch_vgpr, self.agpr)


def _model(elf: ElfFile) -> CodeObject:
    return model_of(elf)


def _flag(fn: Function, attr_id: int, known: bool) -> bool | None:
    """A FLAG attribute: present is true; absent is false only where the producer is known to say."""
    if fn.has(attr_id):
        return True
    return False if known else None


def _language(fn: Function) -> str | None:
    v = fn.attr(_AMD_LANGUAGE)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v if isinstance(v, str) else None


def _object_facts(unit: str, elf: ElfFile, variables: Set[str] = frozenset()) -> list[FunctionFacts]:
    if elf.header.e_machine != C.EM_AMDGPU:
        raise UsageError(f"{unit}: not an AMDGPU object (e_machine {elf.header.e_machine})", fmt="link")
    obj = _model(elf)
    h = elf.header
    processor = decode_flags(h.e_flags, h.ei_osabi, h.ei_abiversion).processor
    funcs = {f.name: f for f in obj.functions}
    local = {f.name for f in obj.functions if f.binding == "local"}

    def key(name: str) -> str:
        return f"{unit}::{name}" if name in local else name

    langs = {lang for f in obj.functions if f.is_kernel and (lang := _language(f))}
    language = langs.pop() if len(langs) == 1 else None
    calls: dict[str, list[str]] = {}
    for caller, callee in obj.callgraph.direct:
        calls.setdefault(caller, [])
        if callee in variables and callee not in funcs:
            continue  # an external the object could not type (clang: STT_NOTYPE) that an object defines as data
        if callee not in calls[caller]:
            calls[caller].append(callee)
    out = []
    for f in obj.functions:
        callees = sorted(calls.get(f.name, ()))
        external = tuple(c for c in callees if c not in funcs)
        vgpr, agpr = f.uint(StdAttr.REGS_GENERAL), f.uint(StdAttr.REGS_ACCUM)
        arch = vgpr if vgpr is None or not agpr or not unified_vgprs(processor) else max(vgpr - agpr, 0)
        private = f.uint(StdAttr.PRIVATE_BYTES)
        inner = [funcs[c].uint(StdAttr.PRIVATE_BYTES) for c in callees if c in funcs and c != f.name]
        own = None if private is None or None in inner else max(private - max((i or 0 for i in inner), default=0), 0)
        # Kernels: the note always says (absent = false).  Device functions: only devbin cc facts.
        facts_known = f.is_kernel or vgpr is not None
        dyn = _flag(f, StdAttr.DYNAMIC_STACK, facts_known) or _flag(f, StdAttr.USES_RECURSION, facts_known)
        if dyn and external:
            dyn = None  # maybe only because of the call leaving the object
        out.append(FunctionFacts(
            key(f.name), f.name, unit, processor, f.is_kernel, vgpr, arch, agpr, f.uint(StdAttr.REGS_SCALAR),
            private, own, dyn, True if f.has(_AMD_USES_VCC) else None,
            True if f.has(_AMD_USES_FLAT_SCRATCH) else None, tuple(key(c) for c in callees), external,
            _language(f) or language))
    return out


def function_facts(objects: Sequence[bytes | ElfFile], names: Sequence[str] | None = None) -> dict[str, FunctionFacts]:
    """Per-function facts of AMDGPU relocatable objects (annotated by ``devbin cc`` or not).

    Keys are function names, and ``unit::name`` for local (``static``) functions, ``unit``
    being ``names[i]`` (default ``#i``).  A call edge to an undefined name that one of the
    objects defines as a variable (``STT_OBJECT``) is data, not a call: clang writes every
    external declaration as ``STT_NOTYPE``, and reads a variable through its GOT slot with the
    same relocations it uses to call a function.  A global defined twice keeps the first definition
    (command-line order); symbol resolution proper is the linker core's job.
    """
    out: dict[str, FunctionFacts] = {}
    elves = [(names[i] if names is not None and i < len(names) else f"#{i}", data) for i, data in enumerate(objects)]
    opened = [(unit, data if isinstance(data, ElfFile) else ElfFile(data, where=unit)) for unit, data in elves]
    variables = {s.name for _, elf in opened for s in elf.global_symbols(defined=True) if s.type == C.STT_OBJECT}
    for unit, elf in opened:
        for f in _object_facts(unit, elf, variables):
            out.setdefault(f.key, f)
    return out


def _sgpr_gap(f: FunctionFacts, processor: str) -> int:
    """SGPRs the kernel may need on top of ``f.sgpr``: the extras the kernel reserves (VCC, flat
    scratch, XNACK mask) that ``f``'s own count may lack, since LLVM adds the extras once, to the
    largest explicit count.  GFX8/9 reserve at most 6 (flat scratch implies all), GFX10+ only VCC
    (2).  Device functions rarely say which they use (LLVM 19 does not print it), so the bound
    is the full set: at most one SGPR granule more than LLVM's one-module number."""
    if f.kernel:
        return 0
    if (gfx_major(processor) or 0) >= 10:
        return 0 if f.uses_vcc else 2
    return 0 if f.uses_flat_scratch else 6


def kernel_totals(facts: Mapping[str, FunctionFacts], kernels: Iterable[str] | None = None, *,
                  stack_budget: int = 0) -> dict[str, KernelTotals]:
    """Each kernel's totals over the call graph: registers the maximum over everything it reaches,
    private segment its own frame plus the deepest call path, dynamic stack OR-ed.

    Recursion, calls no object defines and callees without facts make the stack dynamic; ``stack_budget`` bytes are
    then added to the private segment (reported in ``reasons``).  Values never go below what
    the kernel's own object says.  The arithmetic is :func:`devbin.analysis.propagation.propagate`
    (one pass over the call graph's components, shared with the linker's resources pass).
    """
    names = list(kernels) if kernels is not None else [k for k, f in facts.items() if f.kernel]
    for k in names:
        root = facts.get(k)
        if root is None or not root.kernel:
            raise UsageError(f"{k!r} is not a kernel of the linked objects", fmt="link")
    callees = {key: [c for c in f.calls if c in facts] for key, f in facts.items()}
    prop = propagate(list(facts), callees,
                     frame=lambda f: _own(facts[f]),
                     reported=lambda f: facts[f].private_bytes if facts[f].kernel else None,
                     values=lambda f: _values(facts[f]), names=_VALUES)
    return {k: _totals(facts[k], facts, callees, prop, stack_budget) for k in names}


_VALUES = ("arch_vgpr", "agpr", "sgpr")


def _own(f: FunctionFacts) -> int:
    """The function's own frame: LLVM's private size less its same-object callees' (or all of it)."""
    return f.own_private if f.own_private is not None else (f.private_bytes or 0)


def _values(f: FunctionFacts) -> dict[str, int | None]:
    return {"arch_vgpr": f.arch_vgpr, "agpr": f.agpr,
            "sgpr": (f.sgpr + _sgpr_gap(f, f.processor)) if f.sgpr else f.sgpr}


def _totals(root: FunctionFacts, facts: Mapping[str, FunctionFacts], callees: dict[str, list[str]],
            prop: Propagation[str], budget: int) -> KernelTotals:
    reach = set(reachable([c for c in root.calls if c in facts], callees.__getitem__))
    unresolved = {c for f in (root, *(facts[r] for r in reach)) for c in f.calls if c not in facts}
    c = prop.of(root.key)
    private = prop.stack[c]
    cyclic = prop.recurses[c]
    funcs = [root, *(facts[c] for c in sorted(reach))]
    unknown = tuple(f.key for f in funcs if f.vgpr is None)
    reasons: list[str] = []
    for f in funcs:
        if f.vgpr is None:
            continue
        d = f.dynamic_stack
        if d is None:
            d = (f.language or root.language) != _OPENCL
        if d:
            reasons.append(f"{f.key} uses a dynamic stack" + (
                " (or only calls out of its object: kept for a non-OpenCL source)" if f.dynamic_stack is None else ""))
    if unknown:
        reasons.append("no resource facts (compile with devbin cc) for: " + ", ".join(unknown))
    if cyclic:
        reasons.append("recursion in the call graph")
    if unresolved:
        reasons.append("calls to functions no object defines: " + ", ".join(sorted(unresolved)))
    dynamic = bool(reasons)
    if (cyclic or unresolved) and budget:
        private += budget
        reasons.append(f"stack budget of {budget} bytes added")
    m = prop.maxima[c]
    return KernelTotals(
        private_segment=private,
        arch_vgpr=m["arch_vgpr"] or 0,
        agpr=m["agpr"] or 0,
        sgpr=m["sgpr"] or 0,
        dynamic_stack=dynamic,
        reaches=tuple(sorted(reach)), unknown=unknown, unresolved=tuple(sorted(unresolved)),
        reasons=tuple(reasons))
