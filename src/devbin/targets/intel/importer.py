"""Import a zebin into the unified model (:class:`~devbin.model.CodeObject`).

* target: vendor ``intel``, arch the IP version or product-family acronym
  (:func:`devbin.targets.intel.zebin.zebin_arch`), triple ``spir64_gen`` (the SYCL/clang name of
  Intel GPU native code; ``spir`` for a 32-bit zebin);
* functions: every kernel of ``.ze_info`` and every other defined ``STT_FUNC`` symbol (stack-called
  and external functions), each with its symbol's section, offset and size (the code size, not the
  zero-padded section size);
* attributes, from each entry's ``execution_env`` (:mod:`devbin.targets.intel.zeinfo`):

  ================================ =============================================================
  ``regs_general``                 ``grf_count``: GRF registers per hardware thread
  ``wave_size``                    ``simd_size``
  ``private_bytes``                private bytes per hardware thread (``private_size``, else the
                                   memory buffers; what Level Zero reports as ``privateMemSize``)
  ``spill_bytes``                  spill bytes per hardware thread (``spill_size``, else scratch
                                   slot 0)
  ``shared_bytes``                 ``slm_size`` (static SLM; ``__local`` arguments add at launch)
  ``num_barriers``                 ``barrier_count``
  ``reqd_block_size``              ``required_work_group_size`` / ``reqd_work_group_size``
  ``intel.grf_bytes``              bytes of one GRF for the core family (32 to Xe-HPG, 64 after)
  ``intel.required_sub_group_size`` ``required_sub_group_size`` / ``intel_reqd_sub_group_size``
  ``intel.eu_thread_count``        ``eu_thread_count`` (hardware threads per EU)
  ``intel.scratch_bytes``          every scratch buffer's bytes per hardware thread
  ``intel.has_stack_calls``        ``has_stack_calls``; ``intel.has_dpas``: ``has_dpas``
  ``intel.execution_env``          the keys not mapped above, ``key: value`` lines (kept raw)
  ================================ =============================================================

  Functions that ``.ze_info`` does not list (stack-called subroutines inside a kernel's section)
  carry no attributes: the file records none for them.
* call graph: relocation edges (:meth:`devbin.targets.intel.zebin.Zebin.call_edges`).
* metadata: ``zebin-version``, ``product-family``, ``core-family``, ``ip-version`` where present.
"""

from __future__ import annotations

from collections.abc import Callable

from devbin.errors import DeviceBinaryError
from devbin.formats.elf.reader import ElfFile
from devbin.model import (
    Applies,
    AttrForm,
    Attribute,
    CallGraph,
    CodeObject,
    Function,
    FunctionKind,
    Metadata,
    StdAttr,
    Target,
    register_vendor_attribute,
)
from devbin.model.metadata import MetaValue
from devbin.targets.intel.devices import CORE_FAMILIES, device_by_ip, devices_named, ip_from_gmdid, ip_text
from devbin.targets.intel.zebin import Zebin, ZebinFunction
from devbin.targets.intel.zeinfo import ZeEntry

__all__ = [
    "INTEL_EU_THREADS", "INTEL_EXEC_ENV", "INTEL_GRF_BYTES", "INTEL_HAS_DPAS", "INTEL_HAS_STACK_CALLS",
    "INTEL_REQD_SUB_GROUP", "INTEL_SCRATCH_BYTES", "grf_bytes_of", "import_zebin",
]

Diag = Callable[[DeviceBinaryError], None]

INTEL_GRF_BYTES = 0x301
INTEL_REQD_SUB_GROUP = 0x302
INTEL_EU_THREADS = 0x303
INTEL_SCRATCH_BYTES = 0x304
INTEL_HAS_STACK_CALLS = 0x305
INTEL_HAS_DPAS = 0x306
INTEL_EXEC_ENV = 0x307

for _id, _name, _form, _ap, _doc in (
    (INTEL_GRF_BYTES, "intel.grf_bytes", AttrForm.UINT, Applies.BOTH, "bytes of one GRF register (core family)"),
    (INTEL_REQD_SUB_GROUP, "intel.required_sub_group_size", AttrForm.UINT, Applies.KERNEL,
     "required sub-group size (intel_reqd_sub_group_size)"),
    (INTEL_EU_THREADS, "intel.eu_thread_count", AttrForm.UINT, Applies.BOTH, "hardware threads per EU"),
    (INTEL_SCRATCH_BYTES, "intel.scratch_bytes", AttrForm.UINT, Applies.BOTH,
     "scratch bytes per hardware thread, every scratch buffer"),
    (INTEL_HAS_STACK_CALLS, "intel.has_stack_calls", AttrForm.FLAG, Applies.BOTH, "uses stack calls"),
    (INTEL_HAS_DPAS, "intel.has_dpas", AttrForm.FLAG, Applies.BOTH, "uses DPAS (XMX) instructions"),
    (INTEL_EXEC_ENV, "intel.execution_env", AttrForm.BYTES, Applies.BOTH,
     "execution_env keys devbin does not map, 'key: value' lines"),
):
    register_vendor_attribute(_id, _name, _form, _ap, _doc)


def grf_bytes_of(zebin: Zebin) -> int | None:
    """GRF size from the core-family note, else from the device the IP version or product family names."""
    n = zebin.notes
    core = CORE_FAMILIES.get(n.core_family or 0)
    if core is not None:
        return core.grf_bytes
    if n.product_config is not None:
        d = device_by_ip(ip_from_gmdid(n.product_config))
        if d is not None:
            return d.grf_bytes
    sizes = {d.grf_bytes for d in devices_named(zebin.arch)} if zebin.arch else set()
    return sizes.pop() if len(sizes) == 1 else None


def _attributes(e: ZeEntry, grf_bytes: int | None) -> list[Attribute]:
    out: list[Attribute] = []

    def uint(attr_id: int, v: int | None) -> None:
        if v is not None and v >= 0:
            out.append(Attribute(attr_id, v))

    uint(StdAttr.REGS_GENERAL, e.grf_count)
    uint(StdAttr.WAVE_SIZE, e.simd_size)
    uint(StdAttr.PRIVATE_BYTES, e.private_bytes())
    uint(StdAttr.SPILL_BYTES, e.spill_bytes())
    uint(StdAttr.SHARED_BYTES, e.slm_size)
    uint(StdAttr.NUM_BARRIERS, e.barrier_count)
    uint(INTEL_SCRATCH_BYTES, e.scratch_bytes())
    if e.grf_count is not None:
        uint(INTEL_GRF_BYTES, grf_bytes)
    uint(INTEL_EU_THREADS, e.eu_thread_count)
    if e.is_kernel:
        wg = e.required_work_group_size
        if wg is not None:
            out.append(Attribute(StdAttr.REQD_BLOCK_SIZE, wg))
        uint(INTEL_REQD_SUB_GROUP, e.required_sub_group_size)
    if e.flag("has_stack_calls"):
        out.append(Attribute(INTEL_HAS_STACK_CALLS, True))
    if e.flag("has_dpas"):
        out.append(Attribute(INTEL_HAS_DPAS, True))
    unknown = e.unknown_env()
    if unknown:
        out.append(Attribute(INTEL_EXEC_ENV, "\n".join(f"{k}: {v}" for k, v in unknown)))
    return out


def _function(f: ZebinFunction, zebin: Zebin, grf_bytes: int | None) -> Function:
    entry = zebin.zeinfo.entry(f.name) if zebin.zeinfo is not None else None
    attrs = _attributes(entry, grf_bytes) if entry is not None else []
    kind = FunctionKind.KERNEL if f.is_kernel else FunctionKind.DEVICE
    return Function(f.name, kind, tuple(attrs), f.section, f.offset, f.size, "local" if f.is_kernel else "global")


def _metadata(zebin: Zebin) -> Metadata:
    n = zebin.notes
    items: list[tuple[str, MetaValue]] = []
    version = zebin.zeinfo.version_text if zebin.zeinfo is not None else n.zebin_version
    if version:
        items.append(("zebin-version", version))
    if n.product_family is not None:
        items.append(("product-family", n.product_family))
    if n.core_family:
        items.append(("core-family", n.core_family))
    if n.product_config is not None:
        items.append(("ip-version", ip_text(ip_from_gmdid(n.product_config))))
    return Metadata(tuple(items))


def import_zebin(elf: ElfFile, *, diag: Diag | None = None, only: frozenset[str] | None = None) -> CodeObject:
    """The model of a zebin (module docstring); ``only``: just the functions of these names."""
    zebin = Zebin(elf, diag=diag)
    grf = grf_bytes_of(zebin)
    funcs = [_function(f, zebin, grf) for f in zebin.functions if only is None or f.name in only]
    graph = CallGraph(direct=tuple(zebin.call_edges())) if only is None else CallGraph()
    arch = zebin.arch
    triple = "spir64_gen" if elf.header.is64 else "spir_gen"
    target = Target("intel", arch, (), triple) if arch else None
    return CodeObject(target=target, functions=tuple(funcs), callgraph=graph, metadata=_metadata(zebin))
