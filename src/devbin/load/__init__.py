"""``devbin.load``: an executable of several device code objects, resolved against each other.

Modelled on the HSA executable API (``hsa.h``; reference ``llvm-amdgpu-formats.md`` §5), with
device functions as first-class symbols (what ROCR-Runtime#203 asks for)::

    from devbin.load import Executable, SymbolKind
    exe = Executable("gfx90a")                  # hsa_executable_create_alt + the agent's ISA
    exe.load_code_object("user.so")             # hsa_code_object_reader_create_from_memory
    exe.load_code_object(lib_bytes, name="lib") #   + hsa_executable_load_agent_code_object
    exe.freeze()                                # hsa_executable_freeze
    k = exe.symbol("user_kern")                 # hsa_executable_get_symbol_by_name
    for s in exe.symbols():                     # hsa_executable_iterate_agent_symbols
        print(s.kind.word, hex(s.address), s.name, s.registers, s.stack_bytes, s.callconv)
    exe.u64(k.address + 16)                     # device memory, bounds-checked

==========================================  ==============================================
HSA / ROCr                                  devbin.load
==========================================  ==============================================
``hsa_executable_create_alt(profile, ...)`` ``Executable(target)``: ``gfx90a``,
                                            ``gfx90a:xnack+``, ``sm_90`` (the agent is the
                                            target; the backend is the device memory)
``hsa_executable_load_agent_code_object``   ``load_code_object(path | bytes)``,
                                            ``load_package(path | bytes)`` (the image
                                            :func:`devbin.select` picks),
                                            ``load_superarchive_member(archive, member)``
``hsa_executable_agent_global_variable_``   (not needed: a variable defined by any loaded
``define``                                  code object resolves the others' references)
``hsa_executable_freeze``                   ``freeze()``: every reference resolved, or
                                            :class:`UnresolvedSymbolsError` listing each
                                            missing symbol and who needs it
``hsa_executable_get_symbol_by_name``       ``symbol(name, code_object=None)``; a kernel by
                                            ``k`` or ``k.kd``
``hsa_executable_iterate_agent_symbols``    ``symbols(kind=None)``
``hsa_executable_symbol_get_info``          :class:`LoadedSymbol` fields: ``kind``,
                                            ``address`` (``KERNEL_OBJECT`` /
                                            ``VARIABLE_ADDRESS``), ``size``, ``linkage``,
                                            ``registers``, ``stack_bytes``, ``callconv``,
                                            ``function`` (the unified model record)
``HSA_SYMBOL_KIND_VARIABLE/KERNEL/``        ``SymbolKind.VARIABLE/KERNEL/INDIRECT_FUNCTION``
``INDIRECT_FUNCTION`` (ROCr: only the       (implemented) and ``DEVICE_FUNCTION`` (devbin's
first two)                                  addition)
``HSA_STATUS_ERROR_FROZEN_EXECUTABLE``,     :class:`devbin.errors.UsageError` (a load after
``..._INCOMPATIBLE_ARGUMENTS``,             freeze, an incompatible target, a duplicate
``..._VARIABLE_ALREADY_DEFINED``,           definition: :class:`DuplicateSymbolError`),
``..._INVALID_CODE_OBJECT``                 :class:`devbin.errors.FormatError` (bad or
                                            truncated code object, unsupported relocation)
==========================================  ==============================================

Differences from ROCr, on purpose: functions (``STT_FUNC``) are symbols, kernels keep their
plain name (``k.kd`` also finds them), undefined references are resolved against *every*
loaded code object's exports (ROCr: only kernels and variables already loaded), and
freeze is where resolution happens, so load order does not matter.  Every public call is
transactional: when it raises, the executable is unchanged.

The default backend, :class:`SimulatedDevice`, is a deterministic address space in host
memory (first code object at ``0x7f00_0000_0000``): AMDGPU code objects are mapped and
relocated as ROCr does (:mod:`devbin.load.indexed`, :mod:`devbin.targets.amdgpu.load_relocs`); cubins
are mapped section by section and their symbols resolved, but their ``R_CUDA_*`` relocations
in SASS are left to the driver (recorded in ``LoadedCodeObject.nv_relocations``).
See docs/LOADER.md.
"""

from __future__ import annotations

from devbin.load.executable import (
    DuplicateSymbolError,
    Executable,
    LoadedCodeObject,
    ResolvedNvReloc,
    Unresolved,
    UnresolvedSymbolsError,
    code_object_target,
    is_device_elf,
)
from devbin.load.simulated import DEFAULT_BASE, SimulatedDevice
from devbin.load.symbols import LoadedSymbol, SymbolKind

__all__ = [
    "DEFAULT_BASE",
    "DuplicateSymbolError",
    "Executable",
    "LoadedCodeObject",
    "LoadedSymbol",
    "ResolvedNvReloc",
    "SimulatedDevice",
    "SymbolKind",
    "Unresolved",
    "UnresolvedSymbolsError",
    "code_object_target",
    "is_device_elf",
]
