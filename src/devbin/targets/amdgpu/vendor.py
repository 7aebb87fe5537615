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

from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING

from devbin.errors import DeviceBinaryError, UsageError
from devbin.formats.elf.constants import EM_AMDGPU
from devbin.targets.vendor import Diag, Vendor

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from devbin.binary import Buffer
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import CodeObject
    from devbin.targets.resource_records import ImageKeys, ImageResources
    from devbin.targets.vendor import ModelSource
    from devbin.targets.vendor_records import AssemblyFacts, Device, ObjectFacts, Verdict

__all__ = ["AMD", "AmdVendor"]


@cache
def _processor(e_flags: int) -> str:
    """:meth:`AmdVendor.arch_from_header`, asked for every code object a scan lists: the processor table
    (:mod:`devbin.targets.amdgpu.mach`) imported on the first, each flags word's answer kept."""
    from devbin.targets.amdgpu.mach import EF_AMDGPU_MACH, mach_name

    return mach_name(e_flags & EF_AMDGPU_MACH)


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
    loadable_kinds = frozenset({"amdgpu"})
    #: ``--sort``: VGPR, PRIVATE (stack and frame), VSPILL (:mod:`devbin.targets.amdgpu.resources_table`).
    resource_sort_fields = MappingProxyType({"regs": "vgpr", "stack": "private_segment", "frame": "private_segment",
                                             "spill": "vgpr_spill"})
    device_title = "AMDGPU"
    imported_from = "imported from the code object's AMDGPU metadata note and symbols"
    attribute_namespace = 2  # devbin.model.attributes.Namespace.AMDGPU (the model is not imported here)
    attribute_prefix = "amdgpu."
    private_segment_is_stack = True
    reads_assembly = True
    link_backend = "devbin.targets.amdgpu.link"
    load_backend = "devbin.targets.amdgpu.load"

    def owns_arch(self, arch: str) -> bool:
        """``gfx`` processors and generic targets, with or without target-ID features."""
        return arch.startswith("gfx")

    def known_arch_names(self) -> tuple[str, ...]:
        """The ``gfx`` processors and generic targets of :data:`~devbin.targets.amdgpu.mach.PROCESSORS`."""
        from devbin.targets.amdgpu.mach import PROCESSORS

        return tuple(p.name for p in PROCESSORS if p.name.startswith(self.arch_prefixes))

    def claims_arch(self, text: str) -> bool:
        return text.startswith(self.arch_prefixes)

    def check_arch(self, text: str) -> str:
        """A target ID (:func:`~devbin.targets.amdgpu.targetid.parse_target_id`) of a known processor with
        features it has."""
        from devbin.targets.amdgpu.mach import supported_features
        from devbin.targets.amdgpu.targetid import parse_target_id

        try:
            tid = parse_target_id(text)
        except DeviceBinaryError as e:
            raise UsageError(e.message) from None
        if tid.processor not in self.known_arch_names():
            raise UsageError(f"no {self.title} processor {tid.processor}")
        bad = tid.unsupported_features()
        if bad:
            have = supported_features(tid.processor)
            raise UsageError(f"{tid.processor} has no {', '.join(bad)} feature"
                             + (f" (it has {', '.join(have)})" if have else " (it has none)"))
        return str(tid)

    def arch_from_header(self, e_flags: int, ei_osabi: int, ei_abiversion: int) -> str:
        """The processor of ``EF_AMDGPU_MACH`` (unknown numbers stay raw: ``EF_AMDGPU_MACH_0x..``)."""
        return _processor(e_flags)

    def option_matches(self, found: str, wanted: str) -> bool:
        return found == wanted or (":" not in wanted and found.split(":", 1)[0] == wanted)

    def keep_matches(self, spec: str, arch: str) -> bool:
        return spec == arch if ":" in spec else arch.split(":", 1)[0] == spec

    def function_parts(self, elf: ElfFile, rows: Sequence[int], names: Sequence[str],
                       ) -> tuple[list[bool], dict[str, tuple[tuple[str, int], ...]]]:
        """Kernels are the functions with a kernel descriptor, the ``<f>.kd`` object symbol (LLVM
        AMDGPUUsage, "Kernel Descriptor"), whose size is reported as the kernel's ``descriptor``."""
        from devbin.formats.elf.constants import STT_OBJECT

        st = elf.symtab
        assert st is not None
        info, shndx, sizes = st.columns.st_info, st.columns.st_shndx, st.columns.st_size
        kd = [i for i in range(1, len(st)) if info[i] & 0xF == STT_OBJECT and shndx[i]]
        descriptors = {name[:-3]: sizes[i] for i, name in zip(kd, st.names(kd), strict=True) if name.endswith(".kd")}
        return [n in descriptors for n in names], {n: (("descriptor", d),) for n, d in descriptors.items()}

    # devbin select: the rules are matching.match (ROCr/CLR: target-ID compatibility, generic targets)

    def owns_device(self, text: str) -> bool:
        return text.startswith("gfx")

    def parse_device(self, text: str, suggest: Callable[[str], list[str]]) -> Device:
        from devbin.targets.amdgpu.mach import supported_features
        from devbin.targets.amdgpu.matching import parse_device as parse_target_device
        from devbin.targets.vendor_records import Device

        target = parse_target_device(text)
        unknown = [f for f in supported_features(target.processor) if target.feature(f) is None]
        note = (f"{'/'.join(unknown)} not given: unknown, so images that set it load only conditionally"
                if unknown else "")
        return Device(text, self.name, target=target, note=note,
                      description=f"{text} ({self.device_title} {target})")

    def loader_arch(self, kind: str, arch: str, head: Callable[[], Buffer], data: Callable[[], Buffer] | None,
                    ) -> tuple[str, int]:
        """The code object's target ID with its features as the loader reads them from ``e_flags`` (COV3+),
        and its generic version (``e_flags`` bits 24..31; :func:`devbin.targets.amdgpu.mach.decode_flags`)."""
        from devbin.targets.amdgpu.mach import FeatureSetting, decode_flags
        from devbin.targets.amdgpu.targetid import TargetId, parse_target_id

        if kind != self.object_kind:
            return arch, 1
        try:
            tid = parse_target_id(arch)
        except DeviceBinaryError:
            return arch, 1
        facts = _elf_flags(head)
        if facts is None:
            return str(tid), 1
        flags = decode_flags(facts[2], facts[0], facts[1])
        cov = flags.code_object_version

        def setting(s: FeatureSetting, named: bool | None) -> bool | None:
            if cov is not None and cov < 3:
                return named  # v2: no feature fields
            if s == FeatureSetting.ON:
                return True
            if cov == 3:
                return named  # v3: a clear bit says nothing (only "on" is expressible)
            return {FeatureSetting.OFF: False, FeatureSetting.ANY: None}.get(s, named)

        sramecc, xnack = setting(flags.sramecc, tid.sramecc), setting(flags.xnack, tid.xnack)
        version = flags.generic_version if tid.is_generic else 1
        return str(TargetId(tid.processor, sramecc, xnack)), version

    def judge(self, kind: str, arch: str, device: Device, generic_version: int = 1) -> Verdict:
        from devbin.targets.amdgpu.matching import match
        from devbin.targets.amdgpu.targetid import parse_target_id
        from devbin.targets.vendor_records import Verdict

        assert device.target is not None
        try:
            t = parse_target_id(arch)
        except DeviceBinaryError:
            return Verdict(False, f"unrecognised {self.device_title} target {arch!r}")
        m = match(t, device.target, generic_version=generic_version)
        return Verdict(m.ok, m.reason, m.rank)

    def passed_over(self, chosen: Verdict, chosen_arch: str, other: Verdict, other_arch: str) -> str:
        # rank: (generic tier, conditional count, -pinned, off-default count, -generic version, ...)
        a, b = chosen.rank, other.rank
        if a[0] != b[0]:
            return f"the exact processor image {chosen_arch} comes before the generic target"
        if a[1] != b[1]:
            return f"{chosen_arch} matches for sure"
        if a[2] != b[2]:
            return f"{chosen_arch} is a more specific match"
        if a[3] != b[3]:
            return f"{chosen_arch} matches ROCm's default (XNACK off unless HSA_XNACK=1)"
        if a[4] != b[4]:
            return f"{chosen_arch} has the higher generic version"
        return "an earlier image is taken"

    def fallback_chain(self, target: str, others: Sequence[str]) -> list[str] | None:
        from devbin.targets.amdgpu.mach import FEATURES
        from devbin.targets.amdgpu.matching import match
        from devbin.targets.amdgpu.targetid import parse_target_id

        if not self.owns_arch(target):
            return None
        try:
            device = parse_target_id(target)
        except DeviceBinaryError:
            return None
        ranked: list[tuple[tuple[int, ...], int, str]] = []
        for i, name in enumerate(others):
            if not self.owns_arch(name):
                continue
            try:
                image = parse_target_id(name)
            except DeviceBinaryError:
                continue
            if device.is_generic:
                ok = image.processor == device.processor and all(
                    image.feature(f) is None or image.feature(f) == device.feature(f) for f in FEATURES)
                if ok:
                    ranked.append(((0, -len(image.features)), i, name))
                continue
            verdict = match(image, device)
            if verdict.ok and not verdict.conditional:
                ranked.append((verdict.rank, i, name))
        return [name for _, _, name in sorted(ranked)]

    def import_code_object(self, elf: ElfFile, *, diag: Diag | None = None,
                           only: frozenset[str] | None = None) -> CodeObject:
        from devbin.targets.amdgpu.importer import import_amdgpu

        return import_amdgpu(elf, diag=diag, only=only)

    def object_facts(self, elf: ElfFile) -> ObjectFacts:
        """Target ID and triple from the metadata note (else ``e_flags``), the code object version; no
        producer of its own (the ELF's ``.comment`` says)."""
        from devbin.targets.amdgpu.importer import code_object_facts
        from devbin.targets.vendor_records import ObjectFacts

        facts = code_object_facts(elf, diag=lambda e: None)
        return ObjectFacts(facts.target_id, facts.triple, None, "", facts.flags.code_object_version)

    def facts_from_assembly(self, elf: ElfFile, assembly: str, *, diag: Diag | None = None) -> AssemblyFacts:
        """The ``; Function info:``/``; Kernel info:`` blocks (and LLVM 20+ ``.set f.num_vgpr, N`` lines)
        clang prints (:mod:`devbin.targets.amdgpu.asminfo`): device functions gain them, kernels are checked
        against the metadata note."""
        from devbin.targets.amdgpu.asminfo import merge_asm_info, parse_asm_info
        from devbin.targets.amdgpu.importer import import_amdgpu
        from devbin.targets.vendor_records import AssemblyFacts

        infos = parse_asm_info(assembly)
        merged, report = merge_asm_info(import_amdgpu(elf, diag=diag), infos, diag=diag)
        return AssemblyFacts(merged, {n: {k: v for k, v in i.to_dict().items() if k != "other"}
                                      for n, i in infos.items()},
                             report.filled, report.checked, report.disagreements, report.missing)

    def resources_tables(self, elf: ElfFile, head: ImageKeys, model: ModelSource, *, json: bool, text: bool,
                         ) -> ImageResources | None:
        """Per function: the devbin sections' facts, else the metadata note's and resource symbols'
        (:func:`devbin.targets.amdgpu.resources_table.resources_tables`; both records whatever is asked)."""
        from devbin.targets.amdgpu.resources_table import resources_tables

        return resources_tables(elf, head, model)

    def load_attribute_names(self) -> None:
        import devbin.targets.amdgpu.importer  # noqa: F401  (registers the amdgpu.* ids at import)


def _elf_flags(head: Callable[[], Buffer]) -> tuple[int, int, int] | None:
    """(EI_OSABI, EI_ABIVERSION, e_flags) of a code object's ELF header, or None when unreadable (a
    compressed bundle's entry is not decoded whole for it: ``head()`` gives its first 64 bytes)."""
    from devbin.binary import ByteView
    try:
        v = ByteView(head(), fmt="elf")
        if not v.startswith(b"\x7fELF"):
            return None
        return v.u8(7), v.u8(8), v.u32(48 if v.u8(4) == 2 else 36)
    except DeviceBinaryError:
        return None


#: The descriptor (registered in :mod:`devbin.targets.registry`).
AMD = AmdVendor()
