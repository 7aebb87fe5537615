"""Sample data shipped with devbin, for ``devbin tour`` and as fuzz seeds.

* :func:`sample_code_object`: a small device library described in the unified
  model: two kernels, four device functions, an indirect call through a
  table of function pointers, a call to an external function, prototypes and
  metadata.  It is synthetic: the facts are realistic, the code bytes are not
  (the object's ``.text`` holds zero bytes of the declared sizes), so it is
  written for ``EM_NONE`` and no vendor tool will try to run it.
* ``sample_sm90.cubin`` and ``sample_sm90_rdc.cubin``: real cubins, built by
  ``ptxas -arch=sm_90`` (and ``-c``, relocatable, which keeps the device
  function separate, with a call graph) from the committed ``sample.ptx``
  (``tests/fixtures/make-fixtures.sh``): the tour imports their metadata and
  annotates them without disturbing what the driver reads.
* ``sample_intel.ar``: an ``ocloc`` fat archive of ``tests/fixtures/sample_intel.cl`` (zebins for two Intel
  GPUs named by IP version, ``pad_*`` members and ``generic_ir``, the SPIR-V), built by
  ``tests/fixtures/make-fixtures.sh``: the tour selects from it (:data:`INTEL_JIT_DEVICE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from devbin.formats.elf import constants as C
from devbin.formats.elf.model import ElfModel, SectionSpec, SymbolSpec
from devbin.model import (
    Attribute,
    CallConv,
    CallGraph,
    CodeObject,
    Function,
    FunctionKind,
    KernelParam,
    Metadata,
    ParamType,
    Prototype,
    StdAttr,
    Target,
    TypeKind,
    encode_param_layout,
)

if TYPE_CHECKING:
    from devbin.targets.vendor import Vendor

__all__ = ["INTEL_JIT_DEVICE", "JIT_GENERATION", "SampleArchs", "sample_amdgpu_bytes", "sample_archs",
           "sample_code_object", "sample_cubin_bytes", "sample_elf_bytes", "sample_elf_model", "sample_path"]

_I32 = ParamType(TypeKind.INT, 4, 4)
_F32 = ParamType(TypeKind.FLOAT, 4, 4)
_PTR = ParamType(TypeKind.POINTER, 8, 8)
BINOP = Prototype(_I32, (_I32, _I32), CallConv.DEFAULT)
LOGF = Prototype(_F32, (_F32,), CallConv.DEFAULT)

_SIZES = {"saxpy": 384, "reduce_sum": 640, "warp_sum": 96, "apply_op": 160, "op_add": 32, "op_mul": 32}


def _kernel(name: str, params: list[KernelParam], *extra: Attribute) -> Function:
    attrs = [
        Attribute(StdAttr.REGS_GENERAL, 24 if name == "saxpy" else 32),
        Attribute(StdAttr.STACK_SIZE, 0 if name == "saxpy" else 16),
        Attribute(StdAttr.FRAME_SIZE, 0),
        Attribute(StdAttr.SHARED_BYTES, 0 if name == "saxpy" else 1024),
        Attribute(StdAttr.PRIVATE_BYTES, 0),
        Attribute(StdAttr.PARAM_BYTES, max(p.offset + p.size for p in params)),
        Attribute(StdAttr.PARAM_LAYOUT, encode_param_layout(params)),
        Attribute(StdAttr.MAX_REGS, 255),
        Attribute(StdAttr.NUM_BARRIERS, 0 if name == "saxpy" else 1),
        Attribute(StdAttr.CALLCONV, CallConv.KERNEL),
        *extra,
    ]
    return Function(name, FunctionKind.KERNEL, tuple(attrs), section=f".text.{name}", size=_SIZES[name])


def _device(name: str, kind: FunctionKind, regs: int, frame: int, proto_index: int | None) -> Function:
    attrs = [Attribute(StdAttr.REGS_GENERAL, regs), Attribute(StdAttr.FRAME_SIZE, frame),
             Attribute(StdAttr.STACK_SIZE, frame), Attribute(StdAttr.CALLCONV, CallConv.DEFAULT)]
    if proto_index is not None:
        attrs.append(Attribute(StdAttr.PROTOTYPE, proto_index))
    return Function(name, kind, tuple(attrs), section=f".text.{name}", size=_SIZES[name])


def sample_code_object() -> CodeObject:
    """The sample device library in the unified model."""
    saxpy = _kernel("saxpy", [KernelParam(TypeKind.INT, 0, 4, 4), KernelParam(TypeKind.FLOAT, 4, 4, 4),
                              KernelParam(TypeKind.POINTER, 8, 8, 8), KernelParam(TypeKind.POINTER, 16, 8, 8)],
                    Attribute(StdAttr.MAX_THREADS, (256, 1, 1)))
    reduce_sum = _kernel("reduce_sum", [KernelParam(TypeKind.POINTER, 0, 8, 8), KernelParam(TypeKind.POINTER, 8, 8, 8),
                                        KernelParam(TypeKind.INT, 16, 4, 4)],
                         Attribute(StdAttr.REQD_BLOCK_SIZE, (128, 1, 1)))
    functions = [
        saxpy,
        reduce_sum,
        _device("warp_sum", FunctionKind.DEVICE, 12, 0, None),
        _device("apply_op", FunctionKind.DEVICE, 16, 16, 0),
        _device("op_add", FunctionKind.INDIRECT_TARGET, 4, 0, 0),
        _device("op_mul", FunctionKind.INDIRECT_TARGET, 4, 0, 0),
    ]
    callgraph = CallGraph(
        direct=(("reduce_sum", "warp_sum"), ("reduce_sum", "apply_op"), ("saxpy", "ext_logf")),
        indirect_sites=(("apply_op", BINOP),),
        address_taken=(("op_add", BINOP), ("op_mul", BINOP)),
        external=("ext_logf",),
    )
    metadata = Metadata.of([
        ("producer", "devbin sample 0.1"),
        ("compile-options", "-O3 -arch=sample"),
        ("vendor", "generic"),
        ("target-id", "sample"),
    ])
    return CodeObject(Target("generic", "sample"), tuple(functions), callgraph, metadata, (BINOP, LOGF))


def sample_elf_model(obj: CodeObject | None = None) -> ElfModel:
    """A relocatable ``EM_NONE`` object with one ``.text.<f>`` section and symbol per function."""
    obj = obj or sample_code_object()
    m = ElfModel(e_type=C.ET_REL, machine=C.EM_NONE)
    for f in obj.functions:
        m.sections.append(SectionSpec(f.section, C.SHT_PROGBITS, C.SHF_ALLOC | C.SHF_EXECINSTR, bytes(f.size),
                                      align=128 if f.kind == FunctionKind.KERNEL else 16))
        m.symbols.append(SymbolSpec(f.name, 0, f.size, C.STB_GLOBAL, C.STT_FUNC, section=f.section))
    for name in obj.callgraph.external:
        m.symbols.append(SymbolSpec(name, type=C.STT_FUNC))
    return m


def sample_elf_bytes() -> bytes:
    """The sample code object written as a new ELF file with the devbin sections."""
    from devbin.formats.devsec.elf import with_devbin_sections
    from devbin.formats.elf.writer import write

    obj = sample_code_object()
    return write(with_devbin_sections(sample_elf_model(obj), obj))


def sample_amdgpu_bytes() -> bytes:
    """The shipped AMDGPU code object (gfx90a, code object v5) built by clang-19 from ``sample.cl``."""
    return resources.files(__package__).joinpath("sample_gfx90a.o").read_bytes()


def sample_cubin_bytes(relocatable: bool = False) -> bytes:
    """A shipped sm_90 cubin built by ptxas from ``sample.ptx``: executable, or relocatable (``ptxas -c``)."""
    name = "sample_sm90_rdc.cubin" if relocatable else "sample_sm90.cubin"
    return resources.files(__package__).joinpath(name).read_bytes()


def sample_path(name: str) -> Path:
    """The path of shipped sample file ``name`` (``sample_sm90.cubin``, ``sample_gfx90a.o``,
    ``sample_layer_base.a`` ...), for APIs that take a path; FileNotFoundError for no such sample."""
    path = Path(str(resources.files(__package__).joinpath(name)))
    if not path.is_file():
        raise FileNotFoundError(f"devbin ships no sample named {name!r}")
    return path


#: The generation (:meth:`devbin.targets.vendor.Vendor.generation`) of the GPU the tour asks to load the
#: shipped cubin's package: one its SASS does not run on, so the driver JIT-compiles the PTX.
JIT_GENERATION = 120
#: An Intel GPU (IP version; Meteor Lake's ``mtl-u``) none of ``sample_intel.ar``'s zebins is built for: its
#: ``generic_ir`` is compiled for it.
INTEL_JIT_DEVICE = "12.70.4"


@dataclass(frozen=True)
class SampleArchs:
    """The architectures of the shipped samples, as the files and their vendors' descriptors give them:
    what ``devbin tour`` packs, selects, prunes, archives and loads, named without naming a vendor."""

    #: ``sample_sm90.cubin``'s architecture (its ELF header, through its vendor's descriptor).
    cubin: str
    #: The virtual architecture of ``sample.ptx`` (the cubin's, :meth:`Vendor.virtual_arch`).
    ptx: str
    #: A newer GPU of the cubin's vendor that loads the package's PTX (:data:`JIT_GENERATION`).
    jit_device: str
    #: ``sample_gfx90a.o``'s architecture (also that of the loader and layer samples).
    code_object: str
    #: The target ID the top level of the layer samples was built for (``sample_layer_top.a``).
    layer_top: str


def _header_arch(name: str) -> tuple[Vendor, str]:
    """``(vendor, architecture)`` of the shipped device ELF ``name``, from its vendor's descriptor."""
    from devbin.formats.elf.reader import ElfFile
    from devbin.targets.registry import vendor_for_machine

    elf = ElfFile(resources.files(__package__).joinpath(name).read_bytes(), where=name)
    vendor = vendor_for_machine(elf.header.e_machine)
    if vendor is None:
        raise ValueError(f"sample {name} is not a device ELF of a vendor devbin knows")
    return vendor, vendor.arch_from_elf(elf)


@cache
def sample_archs() -> SampleArchs:
    """The architectures of the shipped samples (:class:`SampleArchs`), read from the files."""
    from devbin.entry.source import open as open_source

    vendor, cubin = _header_arch("sample_sm90.cubin")
    _, code_object = _header_arch("sample_gfx90a.o")
    with open_source(sample_path("sample_layer_top.a")) as top:
        model = top.images[0].code_object()
    if model is None or model.target is None:
        raise ValueError("the shipped samples do not say their architectures")
    return SampleArchs(cubin=cubin, ptx=vendor.virtual_arch(cubin),
                       jit_device=vendor.format_arch(JIT_GENERATION), code_object=code_object,
                       layer_top=model.target.target_id)
