"""Per-function resource usage of a cubin, as data and as ``cuobjdump -res-usage`` prints it.

cuobjdump's block for one cubin (checked line for line in the tests)::

    <empty line>
    Resource usage:
     Common:
      GLOBAL:28 CONSTANT[4]:16
     Function apply_op:
      REG:24 STACK:0 SHARED:0 LOCAL:0 CONSTANT[2]:32 CONSTANT[0]:384 TEXTURE:0 SURFACE:0 SAMPLER:0

Functions come in ``.text.<f>`` section order; constant banks in section
order; ``CONSTANT[n]`` entries appear only for banks the function has.
TEXTURE/SURFACE/SAMPLER count bound texture, surface and sampler references,
which CUDA 12+ code does not have (they are bindless): devbin prints 0, as
cuobjdump does for every cubin in the test corpus.  A stack size that is not
statically known (``EIATTR_MIN_STACK_SIZE`` 0xFFFFFFFF: nvlink writes it for a
kernel that reaches recursion or an indirect call it cannot bound, and warns
"Stack size for entry function ... cannot be statically determined") prints
``STACK:UNKNOWN``, as cuobjdump prints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from devbin.escape.text import visible
from devbin.targets.resource_records import (
    ImageKeys,
    ImageResources,
    NvidiaCommon,
    NvidiaImage,
    NvidiaRow,
    NvidiaTable,
)

if TYPE_CHECKING:
    from devbin.binary import Buffer
    from devbin.formats.elf.reader import ElfFile
    from devbin.targets.nvidia.cubin import Cubin, CubinFunction
    from devbin.targets.vendor import ModelSource


def function_usage(f: CubinFunction) -> dict[str, Any]:
    return {
        "name": f.name,
        "kind": "kernel" if f.is_entry else "device",
        "registers": f.registers,
        "regcount": f.regcount,
        "stack": f.stack,
        "frame": f.frame_size,
        "shared": f.shared,
        "local": f.local,
        "constant": [{"bank": b, "size": s} for b, s in f.constant_banks.items()],
        "texture": 0,
        "surface": 0,
        "sampler": 0,
    }


def usage(cubin: Cubin) -> dict[str, Any]:
    """Resource usage of every function, plus module-wide GLOBAL and constant banks."""
    return {
        "arch": cubin.arch,
        "common": {
            "global": cubin.global_bytes,
            "constant": [{"bank": b, "size": s} for b, s in cubin.common_constant_banks.items()],
        },
        "functions": [function_usage(f) for f in cubin.functions],
    }


def usage_lines(data: Buffer) -> str | None:
    """What :func:`format_cuobjdump` prints for the :func:`usage` of cubin ``data`` (an image's bytes), from
    one compiled pass over them (``devbin.binary._cdecode.cubin_usage_lines``: the section headers, the two
    symbol fields it needs and the global ``.nv.info`` stack and register records, no Python object per
    function or record: 15x faster than the readers on cuFFT's 4,620 cubins, 9x on libcurand's 143,
    ``benchmarks/bench_large.py --pass``).  None where the pass is not
    built or is turned off (``DEVBIN_PURE_PYTHON``), and for any cubin but the plain well-formed case (the
    pass declines what the reader would report, and anything it does not handle, e.g. names the text rule
    escapes): the reader's path (:func:`resources_tables`) then gives the lines or the error.  Both give the
    same lines wherever the pass answers (tests/test_native_fastpath.py, fuzz/fuzz_native.py)."""
    from devbin.binary.native import load_native
    native = load_native("devbin.binary._cdecode")
    if native is None:
        return None
    got: str | None = native.cubin_usage_lines(data)
    return got


def format_cuobjdump(u: dict[str, Any]) -> str:
    """The lines ``cuobjdump -res-usage`` prints for one cubin (starting with its empty line)."""
    from devbin.targets.nvidia.cubin import STACK_UNKNOWN
    common = " ".join([f"GLOBAL:{u['common']['global']}"]
                      + [f"CONSTANT[{c['bank']}]:{c['size']}" for c in u["common"]["constant"]])
    lines = ["", "Resource usage:", " Common:", f"  {common}"]
    for f in u["functions"]:
        banks = "".join(f" CONSTANT[{c['bank']}]:{c['size']}" for c in f["constant"])
        lines.append(f" Function {visible(f['name'])}:")  # the text rule: a name read from the file
        stack = "UNKNOWN" if f["stack"] == STACK_UNKNOWN else f["stack"]
        lines.append(f"  REG:{f['registers']} STACK:{stack} SHARED:{f['shared']} LOCAL:{f['local']}{banks} "
                     f"TEXTURE:{f['texture']} SURFACE:{f['surface']} SAMPLER:{f['sampler']}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- devbin resources (the report's records)


def table_row(fn: CubinFunction) -> NvidiaRow:
    """One row of the NVIDIA text table, from the cubin's records as ``Function.resources`` reads them, but
    STACK only where the cubin gives the kernel's whole stack (``EIATTR_MIN_STACK_SIZE``: linked or
    whole-program cubins); a relocatable cubin's ``EIATTR_MAX_STACK_SIZE`` is 0 whatever the frame (the
    call chains are summed by nvlink), so there STACK is ``None`` and FRAME says what the function needs."""
    from devbin.targets.nvidia.cubin import STACK_UNKNOWN
    stack: int | Literal["unknown"] | None = "unknown" if fn.min_stack_size == STACK_UNKNOWN else fn.min_stack_size
    return {"name": fn.name, "kind": "kernel" if fn.is_entry else "device", "registers": fn.register_count,
            "stack": stack, "frame": fn.frame_size, "spill": fn.spill_instructions, "shared": fn.shared,
            "local": fn.local, "constant": [{"bank": b, "size": n} for b, n in fn.constant_banks.items()]}


def resources_tables(elf: ElfFile, head: ImageKeys, model: ModelSource, as_json: bool, text: bool) -> ImageResources:
    """``devbin resources`` of a cubin (:meth:`devbin.targets.vendor.Vendor.resources_tables`): the JSON record,
    the text table (cuobjdump's numbers, :func:`table_row`) and cuobjdump ``-res-usage``'s numbers (:func:`usage`)."""
    from devbin.formats.devsec.elf import devbin_sections
    from devbin.targets.nvidia.cubin import Cubin
    from devbin.targets.nvidia.importer import cubin_function_resources
    # The JSON and the text table report spills (and the JSON launch bounds), which need every
    # per-function record; --format cuobjdump needs the resource records alone (cuobjdump's numbers).
    cubin = Cubin(elf, records=as_json or text)
    u = usage(cubin)
    image: NvidiaImage | None = None
    if as_json:
        common: NvidiaCommon = {"global": u["common"]["global"], "constant_banks": u["common"]["constant"]}
        if devbin_sections(elf):  # the one model: devbin sections first (devbin.importers.model_of)
            found = {fn.name: fn.resources for fn in model()[0].functions}
            res = {fn.name: found[fn.name].to_dict() if fn.name in found else None for fn in cubin.functions}
        else:  # the same records model_of's importer reads (Function.resources after import_cubin), read once
            res = {fn.name: cubin_function_resources(fn).to_dict() for fn in cubin.functions}
        image = NvidiaImage(**head, common=common, functions=[
            {"name": fn.name, "kind": "kernel" if fn.is_entry else "device", "resources": res[fn.name]}
            for fn in cubin.functions])
    table = NvidiaTable(**head, common=u["common"], functions=[table_row(fn) for fn in cubin.functions]) if text \
        else None
    return ImageResources(image=image, table=table, usage=u)
