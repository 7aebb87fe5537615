"""AMD's vendor descriptor (:class:`devbin.targets.vendor.Vendor`): AMDGPU code objects.

The vendor is ``amd`` (LLVM's triple vendor, ``amdgcn-amd-amdhsa``); ``amdgpu`` is the LLVM target
and the image kind of its code objects.  Architectures are target IDs (LLVM AMDGPUUsage, "Target
ID"): a processor from :mod:`devbin.targets.amdgpu.mach` and optional ``xnack``/``sramecc``
settings.  Both ``--arch`` and ``prune --keep/--drop`` take a processor name without features as
every target ID of that processor (``gfx90a`` takes ``gfx90a:xnack+``) and a name with features as
itself only.  The loader's rule (target-ID compatibility, generic targets) is
:mod:`devbin.targets.amdgpu.matching`.  Its private segment (LLVM's ScratchSize,
``private_segment_fixed_size``) is the per-thread stack when no stack size is recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin.formats.elf.constants import EM_AMDGPU
from devbin.targets.amdgpu.mach import EF_AMDGPU_MACH, mach_name
from devbin.targets.vendor import Diag, ObjectFacts, Vendor

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import CodeObject

__all__ = ["AMD", "AmdVendor"]


class AmdVendor(Vendor):
    name = "amd"
    title = "AMD"
    e_machines = (EM_AMDGPU,)
    arch_prefixes = ("gfx",)
    object_kind = "amdgpu"
    image_kinds = frozenset({"amdgpu"})
    triple_prefixes = ("amdgcn", "r600")
    pci_vendor_id = "0x1002"
    offload_kind = "hip"
    default_triple = "amdgcn-amd-amdhsa"
    hue = 5
    attribute_namespace = 2  # devbin.model.attributes.Namespace.AMDGPU (the model is not imported here)
    attribute_prefix = "amdgpu."
    private_segment_is_stack = True

    def owns_arch(self, arch: str) -> bool:
        """``gfx`` processors and generic targets, with or without target-ID features."""
        return arch.startswith("gfx")

    def arch_from_header(self, e_flags: int, ei_osabi: int, ei_abiversion: int) -> str:
        """The processor of ``EF_AMDGPU_MACH`` (unknown numbers stay raw: ``EF_AMDGPU_MACH_0x..``)."""
        return mach_name(e_flags & EF_AMDGPU_MACH)

    def option_matches(self, found: str, wanted: str) -> bool:
        return found == wanted or (":" not in wanted and found.split(":", 1)[0] == wanted)

    def keep_matches(self, spec: str, arch: str) -> bool:
        return spec == arch if ":" in spec else arch.split(":", 1)[0] == spec

    def import_code_object(self, elf: ElfFile, *, diag: Diag | None = None,
                           only: frozenset[str] | None = None) -> CodeObject:
        from devbin.targets.amdgpu.importer import import_amdgpu

        return import_amdgpu(elf, diag=diag, only=only)

    def object_facts(self, elf: ElfFile) -> ObjectFacts:
        """Target ID and triple from the metadata note (else ``e_flags``), the code object version; no
        producer of its own (the ELF's ``.comment`` says)."""
        from devbin.targets.amdgpu.importer import code_object_facts

        facts = code_object_facts(elf, diag=lambda e: None)
        return ObjectFacts(facts.target_id, facts.triple, None, "", facts.flags.code_object_version)

    def load_attribute_names(self) -> None:
        import devbin.targets.amdgpu.importer  # noqa: F401  (registers the amdgpu.* ids at import)


#: The descriptor (registered in :mod:`devbin.targets.registry`).
AMD = AmdVendor()
