"""Intel's vendor descriptor (:class:`devbin.targets.vendor.Vendor`): zebins (Intel GPU native code).

The vendor is ``intel``; its device ELF is the zebin (``e_machine`` ``EM_INTELGT`` 205,
:mod:`devbin.targets.intel.zebin`), imported by :mod:`devbin.targets.intel.importer`.  Its
architectures are the names of :mod:`devbin.targets.intel.devices`: IP versions (``12.60.7``),
``ocloc`` acronyms (``acm-g10``, ``pvc``), generic and product-family acronyms (``dg2``).  A zebin's
header does not name its device (``e_flags`` is 0, IGC ``elf.md``): the ``.note.intelgt.compat``
notes do, so :meth:`IntelVendor.arch_from_header` answers ``""`` and the importer reads the notes.

``--arch`` and ``prune --keep/--drop`` take a name as every binary built for a device the name
covers (:func:`devbin.targets.intel.devices.names_overlap`: ``dg2`` takes ``12.55.8`` and the
2022 zebins that name only the DG2 family).  The runtime's load rule, generic targets included,
is :func:`devbin.targets.intel.devices.runs_on`.  Native code for Intel GPUs is ``spir64_gen`` in
clang's and SYCL's triples (intel/llvm ``sycl/source/detail/compiler.hpp``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin.formats.elf.constants import EM_INTELGT
from devbin.targets.intel.devices import known_names, names_overlap, parse_ip
from devbin.targets.vendor import Diag, Vendor

if TYPE_CHECKING:
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import CodeObject

__all__ = ["INTEL", "IntelVendor"]


class IntelVendor(Vendor):
    name = "intel"
    title = "Intel"
    e_machines = (EM_INTELGT,)
    object_kind = "zebin"
    image_kinds = frozenset({"zebin"})
    triple_prefixes = ("spir64_gen", "spir_gen")
    attribute_namespace = 3  # devbin.model.attributes.Namespace.INTEL (the model is not imported here)
    attribute_prefix = "intel."

    def owns_arch(self, arch: str) -> bool:
        """An IP version (``12.60.7``), a known acronym, or a raw ``PRODUCT_FAMILY_<n>``."""
        a = arch.strip().lower()
        return parse_ip(a) is not None or a in known_names() or a.startswith("product_family_")

    def arch_from_header(self, e_flags: int, ei_osabi: int, ei_abiversion: int) -> str:
        """``""``: a zebin's header does not name its device (module docstring)."""
        return ""

    def option_matches(self, found: str, wanted: str) -> bool:
        return names_overlap(found, wanted)

    def keep_matches(self, spec: str, arch: str) -> bool:
        return names_overlap(arch, spec)

    def import_code_object(self, elf: ElfFile, *, diag: Diag | None = None,
                           only: frozenset[str] | None = None) -> CodeObject:
        from devbin.targets.intel.importer import import_zebin

        return import_zebin(elf, diag=diag, only=only)

    def load_attribute_names(self) -> None:
        import devbin.targets.intel.importer  # noqa: F401  (registers the intel.* ids at import)


#: The descriptor (registered in :mod:`devbin.targets.registry`).
INTEL = IntelVendor()
