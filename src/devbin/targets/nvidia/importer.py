"""Import a cubin into the unified model (:class:`devbin.model.CodeObject`).

Standard attributes take what every architecture shares (registers, frame,
stack, shared/local/constant bytes, parameter layout, launch bounds); NVIDIA's
namespace (ids 0x100-0x1ff) keeps the rest, and ``nvidia.nv_info_records``
holds every ``.nv.info.<f>`` record not mapped to an attribute, verbatim, so
nothing a cubin says is dropped.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from devbin._version import __version__
from devbin.errors import DeviceBinaryError, FormatWarning
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.model import (
    UNKNOWN_PROTOTYPE,
    Applies,
    AttrForm,
    Attribute,
    CallConv,
    CallGraph,
    CodeObject,
    Function,
    FunctionKind,
    KernelParam,
    Metadata,
    Prototype,
    StdAttr,
    Target,
    TypeKind,
    encode_param_layout,
    register_vendor_attribute,
)
from devbin.model.resources import NV_CONSTANT_BANKS as NV_CONSTANT_BANKS  # re-exported: defined there
from devbin.model.resources import NV_SPILL_INSTRUCTIONS as NV_SPILL_INSTRUCTIONS
from devbin.model.resources import Resources, resources_of
from devbin.targets.nvidia import eiattr as E
from devbin.targets.nvidia.cubin import STACK_UNKNOWN, Cubin, CubinFunction
from devbin.targets.nvidia.notes import tkinfo
from devbin.targets.nvidia.nvcallgraph import decode_prototype

NV_CUDA_API_VERSION = 0x101
NV_CRS_STACK_SIZE = 0x102
NV_EXIT_OFFSETS = 0x103
NV_PARAM_CBANK_OFFSET = 0x104
NV_INFO_RECORDS = 0x1FF

register_vendor_attribute(NV_CUDA_API_VERSION, "nvidia.cuda_api_version", AttrForm.UINT, Applies.BOTH,
                          "EIATTR_CUDA_API_VERSION: CUDA version x10 the code was built for")
register_vendor_attribute(NV_CRS_STACK_SIZE, "nvidia.crs_stack_size", AttrForm.UINT, Applies.BOTH,
                          "EIATTR_CRS_STACK_SIZE (0xffffffff: not statically known)")
register_vendor_attribute(NV_EXIT_OFFSETS, "nvidia.exit_offsets", AttrForm.LIST, Applies.BOTH,
                          "EIATTR_EXIT_INSTR_OFFSETS: byte offsets of EXIT instructions in the function")
register_vendor_attribute(NV_PARAM_CBANK_OFFSET, "nvidia.param_cbank_offset", AttrForm.UINT, Applies.KERNEL,
                          "offset of the parameters in constant bank 0 (EIATTR_PARAM_CBANK)")
register_vendor_attribute(NV_CONSTANT_BANKS, "nvidia.constant_banks", AttrForm.LIST, Applies.BOTH,
                          "bank, bytes, bank, bytes ... of the function's .nv.constant<N> sections")
register_vendor_attribute(NV_SPILL_INSTRUCTIONS, "nvidia.spill_instructions", AttrForm.UINT, Applies.BOTH,
                          "spill and refill instructions ptxas marked (EIATTR_ANNOTATIONS, kind 1)")
register_vendor_attribute(NV_INFO_RECORDS, "nvidia.nv_info_records", AttrForm.BYTES, Applies.BOTH,
                          "every .nv.info.<f> record not mapped to another attribute, verbatim (TLV)")

_MAPPED = frozenset(E.CODES[n] for n in (
    "CBANK_PARAM_SIZE", "PARAM_CBANK", "KPARAM_INFO", "KPARAM_INFO_V2", "MAX_THREADS", "REQNTID", "CTA_PER_CLUSTER",
    "MAXREG_COUNT", "NUM_BARRIERS", "EXIT_INSTR_OFFSETS", "CRS_STACK_SIZE", "CUDA_API_VERSION",
))

Diag = Callable[[DeviceBinaryError], None]


def _raise(e: DeviceBinaryError) -> None:
    raise e


def _raw_record(rec_fmt: int, attr: int, value: int | None, payload: bytes) -> bytes:
    if rec_fmt == E.EIFMT_SVAL:
        return bytes([rec_fmt, attr]) + len(payload).to_bytes(2, "little") + payload
    if rec_fmt in (E.EIFMT_NVAL, E.EIFMT_HVAL, E.EIFMT_BVAL):
        v = value or 0
        return bytes([rec_fmt, attr]) + (v.to_bytes(2, "little") if rec_fmt != E.EIFMT_BVAL else bytes([v, 0]))
    return payload  # an unsizeable tail, kept as read


def cubin_function_resources(f: CubinFunction) -> Resources:
    """``f``'s :class:`Resources`, as ``Function.resources`` gives it after :func:`import_cubin`."""
    return resources_of(_attributes(f, None))


def _attributes(f: CubinFunction, proto_index: int | None) -> list[Attribute]:
    a: list[Attribute] = [Attribute(StdAttr.REGS_GENERAL, f.register_count)]
    if f.frame_size is not None:
        a.append(Attribute(StdAttr.FRAME_SIZE, f.frame_size))
    stack = f.min_stack_size if f.min_stack_size is not None else f.max_stack_size
    if stack == STACK_UNKNOWN:
        a.append(Attribute(StdAttr.DYNAMIC_STACK, True))
    elif stack is not None:
        a.append(Attribute(StdAttr.STACK_SIZE, stack))
    a.append(Attribute(StdAttr.SHARED_BYTES, f.shared))
    a.append(Attribute(StdAttr.PRIVATE_BYTES, f.local))
    other_banks = sum(size for bank, size in f.constant_banks.items() if bank != 0)
    if other_banks:
        a.append(Attribute(StdAttr.CONST_BYTES, other_banks))
    if f.constant_banks:
        a.append(Attribute(NV_CONSTANT_BANKS, tuple(x for kv in f.constant_banks.items() for x in kv)))
    if f.param_size is not None:
        a.append(Attribute(StdAttr.PARAM_BYTES, f.param_size))
    if f.params:
        layout = [KernelParam(TypeKind.BITS if p.size in (4, 8) else TypeKind.AGGREGATE, p.offset, p.size,
                              1 << p.log2_align if p.log2_align else min(p.size, 8) or 1) for p in f.params]
        a.append(Attribute(StdAttr.PARAM_LAYOUT, encode_param_layout(layout)))
    if f.param_cbank is not None:
        a.append(Attribute(NV_PARAM_CBANK_OFFSET, f.param_cbank[1]))
    for attr_id, dims in ((StdAttr.MAX_THREADS, f.max_threads), (StdAttr.REQD_BLOCK_SIZE, f.reqntid),
                          (StdAttr.CLUSTER_DIMS, f.cluster_dims)):
        if dims is not None:
            a.append(Attribute(attr_id, dims))
    if f.max_registers is not None:
        a.append(Attribute(StdAttr.MAX_REGS, f.max_registers))
    if f.num_barriers is not None:
        a.append(Attribute(StdAttr.NUM_BARRIERS, f.num_barriers))
    if f.is_entry:
        a.append(Attribute(StdAttr.WAVE_SIZE, 32))
    a.append(Attribute(StdAttr.CALLCONV, CallConv.KERNEL if f.is_entry else CallConv.DEFAULT))
    if proto_index is not None:
        a.append(Attribute(StdAttr.PROTOTYPE, proto_index))
    if f.cuda_api_version is not None:
        a.append(Attribute(NV_CUDA_API_VERSION, f.cuda_api_version))
    if f.crs_stack_size is not None:
        a.append(Attribute(NV_CRS_STACK_SIZE, f.crs_stack_size))
    if f.exit_offsets:
        a.append(Attribute(NV_EXIT_OFFSETS, tuple(f.exit_offsets)))
    if f.spill_instructions is not None:
        a.append(Attribute(NV_SPILL_INSTRUCTIONS, f.spill_instructions))
    rest = b"".join(_raw_record(r.fmt, r.attr, r.value, r.payload) for r in f.records if r.attr not in _MAPPED)
    if rest:
        a.append(Attribute(NV_INFO_RECORDS, rest))
    return a


def import_cubin(elf: ElfFile, *, diag: Diag | None = None, only: frozenset[str] | None = None) -> CodeObject:
    """The unified model of a cubin: functions, call graph, prototypes, metadata.

    ``only``: just the functions of these names (each record equal to the one the whole import
    gives; only their ``.nv.info.<f>`` records are read), the whole call graph and prototypes
    (``.nv.callgraph``; of the ``EIATTR_EXTERNS`` of each function, only these functions' join the
    external callees): what a lazy loader needs for one kernel."""
    diag_given = diag
    diag = diag or _raise
    cubin = Cubin(elf, only=only)
    protos: list[Prototype] = []

    undecoded: list[str] = []

    def proto(text: str) -> Prototype | None:
        if not text:  # string offset 0: no prototype recorded (a kernel launched from the device)
            p = UNKNOWN_PROTOTYPE
        else:
            try:
                p = decode_prototype(text)
            except DeviceBinaryError as e:
                # Never fatal: the function keeps an unknown prototype (matching every call site,
                # so indirect-call reachability stays conservative) and the string is kept raw.
                if text not in undecoded:
                    undecoded.append(text)
                    if diag_given is not None:
                        diag_given(e)
                    else:
                        warnings.warn(FormatWarning(f"{e} (kept raw, read as an unknown prototype)"), stacklevel=3)
                p = UNKNOWN_PROTOTYPE
        if p not in protos:
            protos.append(p)
        return p

    indirect: list[tuple[str, Prototype]] = []
    taken: list[tuple[str, Prototype]] = []
    direct: list[tuple[str, str]] = []
    cg = cubin.callgraph
    if cg is not None:
        direct = list(dict.fromkeys(cg.direct))
        for caller, text in cg.indirect:
            if (p := proto(text)) is not None:
                indirect.append((caller, p))
        for fn, text in cg.address_taken:
            if (p := proto(text)) is not None:
                taken.append((fn, p))
    fn_proto: dict[str, Prototype] = {}
    for name, text in cubin.prototypes.items():
        if (p := proto(text)) is not None:
            fn_proto[name] = p
    for name, p in taken:
        fn_proto.setdefault(name, p)
    defined = {f.name for f in cubin.functions}
    address_taken_names = {n for n, _ in taken}
    functions = []
    for f in cubin.functions:
        if only is not None and f.name not in only:
            continue
        kind = FunctionKind.KERNEL if f.is_entry else (
            FunctionKind.INDIRECT_TARGET if f.name in address_taken_names else FunctionKind.DEVICE)
        p = fn_proto.get(f.name)
        sym = cubin.symtab[f.symbol] if 0 < f.symbol < len(cubin.symtab) else None
        functions.append(Function(f.name, kind, tuple(_attributes(f, protos.index(p) if p else None)),
                                  section=elf.sections[f.text_section].name, size=f.size,
                                  offset=sym.st_value if sym else 0,
                                  binding=C.binding_word(sym.bind) if sym else "global",
                                  visibility=C.visibility_word(sym.visibility) if sym else "default"))
    external = {callee for _, callee in direct if callee not in defined}
    for f in cubin.functions:
        external.update(e for e in f.externs if e not in defined)  # (unread for a function ``only`` leaves out)
    meta: list[tuple[str, str | int | bytes]] = [("vendor", "nvidia"), ("target-id", cubin.arch)]
    info = tkinfo(elf)
    if info is not None:
        meta.append(("producer", f"{info.tool_name} ({info.tool_version})".strip()))
        if info.tool_options:
            meta.append(("compile-options", info.tool_options.strip()))
    meta.append(("importer", f"devbin {__version__}"))
    if cubin.virtual_arch:
        meta.append(("nvidia.virtual-arch", cubin.virtual_arch))
    meta += [("nvidia.undecoded-prototype", text) for text in undecoded]
    callgraph = CallGraph(direct=tuple(direct), indirect_sites=tuple(indirect), address_taken=tuple(taken),
                          external=tuple(sorted(external)))
    return CodeObject(Target("nvidia", cubin.arch, (), "nvptx64-nvidia-cuda"), tuple(functions), callgraph,
                      Metadata.of(meta), tuple(protos))
