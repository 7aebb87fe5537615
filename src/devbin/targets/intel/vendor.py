"""Intel's vendor descriptor (:class:`devbin.targets.vendor.Vendor`): zebins (Intel GPU native code).

The vendor is ``intel``; its device ELF is the zebin (``e_machine`` ``EM_INTELGT`` 205,
:mod:`devbin.targets.intel.zebin`), imported by :mod:`devbin.targets.intel.importer`.  Its
architectures are the names of :mod:`devbin.targets.intel.devices`: IP versions (``12.60.7``),
``ocloc`` acronyms (``acm-g10``, ``pvc``), generic and product-family acronyms (``dg2``).  A zebin's
header does not name its device (``e_flags`` is 0, IGC ``IGC/ZEBinWriter/zebin/spec/elf.md``): the
``.note.intelgt.compat`` notes do, so :meth:`IntelVendor.arch_from_header` answers ``""``;
:meth:`IntelVendor.arch_from_elf` and :meth:`IntelVendor.loader_arch` read the notes.

``--arch`` and ``prune --keep/--drop`` take a name as every binary built for a device the name
covers (:func:`devbin.targets.intel.devices.names_overlap`: ``dg2`` takes ``12.55.8`` and the
2022 zebins that name only the DG2 family).  What the runtime loads on a device, generic targets
included, is :func:`devbin.targets.intel.devices.match_rank` (compute-runtime
``zebin_decoder.cpp``, ``validateTargetDevice``; ``platforms.h``, ``compatibilityMapping``).  Native
code for Intel GPUs is ``spir64_gen`` in clang's and SYCL's triples (intel/llvm
``sycl/source/detail/compiler.hpp``), and SYCL its offload kind (LLVM ``OffloadBinary.h``: offload
kind 8, :mod:`devbin.formats.offload.constants`); 0x8086 is Intel's PCI vendor ID.  SPIR-V for
``spir64`` (SYCL's ``sycl-spir64`` images, an OffloadBinary's ``spir64-unknown-unknown``) is Intel's JIT
code, as PTX is NVIDIA's: :meth:`IntelVendor.owns_triple` claims it, and the driver compiles it for the
device when no native image fits (:meth:`IntelVendor.judge`).

What the runtime loads (``devbin select``): a bare zebin by :func:`~devbin.targets.intel.devices.match_rank`;
a member of an ``ocloc`` fat archive by its name first (:func:`devbin.targets.intel.fatarchive.member_match`,
compute-runtime ``device_binary_format_ar.cpp``), then by the zebin's own notes; ``generic_ir`` and SPIR-V
last, compiled for the device.  A SYCL program's native image (``spir64_gen``) is preferred over its
SPIR-V (``spir64``): the Level Zero adapter picks the ``spir64_gen`` binary first and falls back to
``spir64`` (intel/llvm ``unified-runtime/source/adapters/level_zero/device.cpp``, ``urDeviceSelectBinary``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from devbin.errors import DeviceBinaryError, UsageError
from devbin.formats.elf.constants import EM_INTELGT
from devbin.targets.vendor import Diag, Vendor

if TYPE_CHECKING:
    from devbin.binary import Buffer
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import CodeObject
    from devbin.targets.resource_records import ImageKeys, ImageResources
    from devbin.targets.vendor import ModelSource
    from devbin.targets.vendor_records import Device, ObjectFacts, Verdict

__all__ = ["INTEL", "JIT_TARGETS", "IntelVendor"]

_SPIRV = "spirv"  # devbin.images.record.SPIRV (images are above this layer)
_IR_RANK = 8  # a zebin's own SPIR-V, or generic_ir (then ordered by the member's filter): after native code
_SPIRV_RANK = 9  # a SPIR-V image: after every native image and generic_ir
_BUILD_OPTIONS = ".misc.buildOptions"  # SHT_ZEBIN_MISC: the options IGC was given (elf.md)
_SPIRV = "spirv"  # the image kind of a SPIR-V module (devbin.images.record.SPIRV, a layer above)
#: The super-archive target names of SPIR-V, the JIT fallback below every Intel device
#: (:meth:`IntelVendor.fallback_chain`): SYCL's target for SPIR-V images (intel/llvm
#: ``sycl/source/detail/compiler.hpp``, ``__SYCL_DEVICE_BINARY_TARGET_SPIRV64``), short and as a triple.
JIT_TARGETS: Final = ("spir64", "spir64-unknown-unknown")


def _built_for(name: str) -> str:
    """The architecture a target named ``name`` is built for, as :func:`match_rank` takes it: a device's
    acronym is its IP version; a generic or family acronym and an IP version stay as they are."""
    from devbin.targets.intel.devices import device_named

    d = device_named(name)
    return d.ip_version if d is not None else name.strip().lower()


class IntelVendor(Vendor):
    name = "intel"
    title = "Intel"
    e_machines = (EM_INTELGT,)
    #: The acronyms' stems; IP versions (``12.60.7``) have no prefix (:meth:`claims_arch` takes their shape).
    arch_prefixes = ("acm-", "dg2", "pvc", "mtl", "arl-", "bmg", "lnl-", "ptl", "skl", "tgllp", "dg1", "ats-")
    object_kind = "zebin"
    image_kinds = frozenset({"zebin"})
    triple_prefixes = ("spir64_gen", "spir_gen")
    attribute_namespace = 3  # devbin.model.attributes.Namespace.INTEL (the model is not imported here)
    attribute_prefix = "intel."
    pci_vendor_id = "0x8086"
    offload_kind = "sycl"
    default_triple = "spir64_gen-unknown-unknown"
    hue = 210
    #: Zebins, and SPIR-V: compiled for the device by the driver (JIT), the native images' fallback.
    loadable_kinds = frozenset({"zebin", "spirv"})
    #: ocloc's archive of zebins by device (:mod:`devbin.targets.intel.fatarchive`).
    device_archives = True
    #: ``--sort``: GRF, PRIVATE (stack and frame: private bytes per hardware thread), SPILL
    #: (:mod:`devbin.targets.intel.resources`).
    resource_sort_fields = MappingProxyType({"regs": "grf", "stack": "private", "frame": "private", "spill": "spill"})
    device_title = "Intel"
    toolkit = MappingProxyType({
        "ocloc": "apt-get install intel-opencl-icd (or bash scripts/setup-test-env.sh)",
        "iga64": "apt-get install libigc-tools",
    })

    #: IGC's relocation symbols (``visa/include/RelocationInfo.h``: ``CROSS_THREAD_OFF_R0_RELOCATION_NAME``,
    #: ``PER_THREAD_OFF_RELOCATION_NAME``), undefined in a zebin and patched by the runtime's linker
    #: (compute-runtime ``shared/source/compiler_interface/linker.h``).
    loader_symbols = frozenset({"__INTEL_PATCH_CROSS_THREAD_OFFSET_OFF_R0", "__INTEL_PER_THREAD_OFF"})
    pack_formats = MappingProxyType({"ocloc": "ocloc's fat archive: an ar of zebins named by IP version, and "
                                              "generic_ir (SPIR-V)"})

    # ------------------------------------------------------------------ architectures

    def owns_arch(self, arch: str) -> bool:
        """An IP version (``12.60.7``), a known acronym, or a raw ``PRODUCT_FAMILY_<n>``."""
        from devbin.targets.intel.devices import known_names, parse_ip

        a = arch.strip().lower()
        return parse_ip(a) is not None or a in known_names() or a.startswith("product_family_")

    def known_arch_names(self) -> tuple[str, ...]:
        """Acronyms, generic and product-family acronyms, then the IP versions of :data:`DEVICES`."""
        from devbin.targets.intel.devices import known_names

        return known_names()

    def claims_arch(self, text: str) -> bool:
        """An IP version's shape (three dotted numbers), a known name, or a name starting like an acronym."""
        from devbin.targets.intel.devices import known_names

        parts = text.split(".")
        return (len(parts) == 3 and all(p.isdigit() for p in parts)) or text in known_names() \
            or text.startswith(self.arch_prefixes)

    def check_arch(self, text: str) -> str:
        from devbin.targets.intel.devices import known_names, parse_ip

        if parse_ip(text) is not None or text in known_names():
            return text
        raise UsageError(f"no {self.title} device of that name (an IP version such as 12.60.7, or an ocloc acronym)")

    def arch_repairs(self, text: str) -> list[str]:
        """The letter O typed for a zero (``acm-g1o``), a space or underscore for the dash."""
        from devbin.targets.intel.devices import known_names

        return [r for r in (text.replace("o", "0"), text.replace(" ", "-").replace("_", "-"))
                if r != text and r in known_names()]

    def arch_from_header(self, e_flags: int, ei_osabi: int, ei_abiversion: int) -> str:
        """``""``: a zebin's header does not name its device (module docstring; :meth:`arch_from_elf`)."""
        return ""

    def arch_from_elf(self, elf: ElfFile) -> str:
        """The arch the notes name (:func:`devbin.targets.intel.zebin.zebin_arch`); ``""`` when unreadable."""
        from devbin.targets.intel.notes import COMPAT_SECTION, read_compat_notes
        from devbin.targets.intel.zebin import zebin_arch

        sec = elf.section(COMPAT_SECTION)
        try:
            return zebin_arch(read_compat_notes(elf.notes(sec))) if sec is not None else ""
        except DeviceBinaryError:
            return ""

    def owns_triple(self, triple: str) -> bool:
        """Native code (``spir64_gen``, ``spir_gen``) and SPIR-V for 64-bit SPIR devices (``spir64``,
        ``spir64-unknown-unknown``): SYCL's JIT images.  Not ``spir64_x86_64`` (CPU) or ``spir64_fpga``."""
        return triple.startswith(self.triple_prefixes) or triple == "spir64" or triple.startswith("spir64-")

    def option_matches(self, found: str, wanted: str) -> bool:
        from devbin.targets.intel.devices import names_overlap

        return names_overlap(found, wanted)

    def keep_matches(self, spec: str, arch: str) -> bool:
        from devbin.targets.intel.devices import names_overlap

        return names_overlap(arch, spec)

    def function_parts(self, elf: ElfFile, rows: Sequence[int], names: Sequence[str],
                       ) -> tuple[list[bool], dict[str, tuple[tuple[str, int], ...]]]:
        """Kernels are the functions with a ``.text.<name>`` section of their own (IGC's layout); nothing
        of a function lies in another section (``.ze_info`` describes them all at once)."""
        from devbin.targets.intel.zebin import ENTRY_SYMBOL, TEXT_PREFIX

        sections = set(elf.section_names)
        return [n != ENTRY_SYMBOL and TEXT_PREFIX + n in sections for n in names], {}

    # ------------------------------------------------------------------ what the runtime loads

    def owns_device(self, text: str) -> bool:
        return self.claims_arch(text)

    def parse_device(self, text: str, suggest: Callable[[str], list[str]]) -> Device:
        """An IP version or acronym naming one device; a generic acronym (``dg2``) is judged as the generic
        target's base device (:func:`~devbin.targets.intel.devices.selected_device`), with a note."""
        from devbin.targets.intel.devices import GENERIC_ACRONYMS, devices_named, known_names, parse_ip, selected_device
        from devbin.targets.vendor_records import Device

        if parse_ip(text) is None and text not in known_names():
            hint = suggest(text)
            raise UsageError(f"unknown device {text!r}" + (f"; did you mean {' or '.join(hint)}?" if hint else ""))
        d = selected_device(text)
        if d is None:
            several = ", ".join(f"{x.name} ({x.ip_version})" for x in devices_named(text))
            raise UsageError(f"{text} names several Intel devices ({several}); name one")
        note = ""
        if text in GENERIC_ACRONYMS:
            others = ", ".join(f"{x.name} ({x.ip_version})" for x in devices_named(text) if x is not d)
            note = (f"{text} is a generic target: judged as its base device {d.name} ({d.ip_version}), the one "
                    f"ocloc -device {text} compiles for; name {others} for another")
        return Device(text, self.name, note=note,
                      description=f"{text} ({self.device_title} {d.name}, IP {d.ip_version})")

    def loader_arch(self, kind: str, arch: str, head: Callable[[], Buffer], data: Callable[[], Buffer] | None,
                    ) -> tuple[str, int]:
        """A zebin's arch from its notes when the scan left it empty (:meth:`arch_from_elf`)."""
        if kind != self.object_kind or arch or data is None:
            return arch, 1
        from devbin.formats.elf.reader import ElfFile
        try:
            return self.arch_from_elf(ElfFile(data())), 1
        except DeviceBinaryError:
            return arch, 1

    def load_label(self, kind: str, jit: bool) -> str:
        """``SPIR-V, JIT-compiled`` (the runtime compiles it for the device); a zebin is a code object."""
        return "SPIR-V, JIT-compiled" if jit and kind == _SPIRV else super().load_label(kind, jit)

    def judge(self, kind: str, arch: str, device: Device, generic_version: int = 1) -> Verdict:
        """A zebin by :func:`~devbin.targets.intel.devices.match_rank` (ranks 0-2); SPIR-V always loads,
        compiled for the device (rank 9: after every native image)."""
        from devbin.targets.intel.devices import match_rank, selected_device
        from devbin.targets.vendor_records import Verdict

        d = selected_device(device.name)
        if d is None:
            return Verdict(False, f"unknown {self.device_title} device {device.name!r}")
        if kind == _SPIRV:
            return Verdict(True, "SPIR-V: the driver compiles it for the device", (_SPIRV_RANK,), jit=True)
        if not arch:
            return Verdict(False, "the zebin names no device", (_IR_RANK,))
        m = match_rank(arch, d)
        if m is None:
            return Verdict(False, f"built for {arch}, not {d.name} ({d.ip_version})", (_IR_RANK,))
        return Verdict(True, m[1], (m[0],))

    def refused_fallback(self, kind: str, refused: Verdict, data: Callable[[], Buffer] | None) -> Verdict:
        """A refused zebin that carries its SPIR-V (a ``SHT_ZEBIN_SPIRV`` section, ``.spv``: what ``ocloc compile``
        keeps) is compiled from it (compute-runtime ``device_binary_format_zebin.cpp``: a zebin not valid for
        the target with an intermediate representation is rebuilt from it), ranked by the refusal's rank."""
        from devbin.targets.vendor_records import Verdict

        if kind != self.object_kind or data is None or not refused.rank:
            return refused
        from devbin.formats.elf.reader import ElfFile
        from devbin.targets.intel.zebin import SHT_ZEBIN_SPIRV
        try:
            carries = bool(ElfFile(data()).sections_of_type(SHT_ZEBIN_SPIRV))
        except DeviceBinaryError:
            return refused
        if not carries:
            return refused
        return Verdict(True, f"{refused.reason}: the driver compiles the SPIR-V it carries (.spv)", refused.rank,
                       jit=True)

    def picks_member(self, name: str) -> bool:
        """Members named as ocloc names a fat archive's (``64.12.60.7``, ``64.dg2``, ``generic_ir``): the
        runtime picks one of them by name (:mod:`devbin.targets.intel.fatarchive`)."""
        from devbin.targets.intel.fatarchive import member_target

        return member_target(name)[0] in ("zebin", "generic_ir")

    def judge_member(self, member: str, kind: str, arch: str, device: Device, generic_version: int = 1) -> Verdict:
        """The runtime's rule for a fat archive (:func:`devbin.targets.intel.fatarchive.member_match`): the
        member's name must answer one of the names it looks for (ranked by which), then a zebin's notes must
        fit the device (:meth:`judge`); ``generic_ir``'s SPIR-V is compiled for the device."""
        from devbin.targets.intel.devices import selected_device
        from devbin.targets.intel.fatarchive import member_filters, member_match
        from devbin.targets.vendor_records import Verdict

        d = selected_device(device.name)
        if d is None:
            return Verdict(False, f"unknown {self.device_title} device {device.name!r}")
        hit = member_match(member, d)
        if hit is None:
            wanted = ", ".join(f[1] for f in member_filters(d))
            return Verdict(False, f"the runtime looks only for members named {wanted}")
        number, prefix, what = hit
        named = f"named {prefix} ({what}, the runtime's choice {number} of 5)"
        if kind == _SPIRV:
            return Verdict(True, f"{named}: SPIR-V the driver compiles for the device", (_IR_RANK, number), jit=True)
        v = self.judge(kind, arch, device, generic_version)
        if not v.ok:  # its .spv, if any, is compiled before generic_ir's (the runtime keeps the first IR it meets)
            return Verdict(False, f"{named}, but {v.reason}", (_IR_RANK, number))
        return Verdict(True, f"{named}; {v.reason}", (number,))

    def passed_over(self, chosen: Verdict, chosen_arch: str, other: Verdict, other_arch: str) -> str:
        if other.jit and not chosen.jit:
            return "native code is preferred over SPIR-V"
        if other.jit and chosen.rank < other.rank:
            return "the native image's own SPIR-V (a zebin's .spv, then generic_ir) is compiled first"
        if chosen.rank < other.rank:
            return f"{chosen_arch or 'the chosen image'} is a closer match (exact IP version, then generic target, " \
                   "then family; in a fat archive the runtime's order of member names)"
        return "an earlier image is taken"

    def fallback_chain(self, target: str, others: Sequence[str]) -> list[str] | None:
        """The targets among ``others`` whose code the runtime takes on the device ``target`` names, best
        first: zebins by :func:`devbin.targets.intel.devices.match_rank` (its own IP version, then generic
        targets, then its product family; a target named by an acronym counts as its device's IP version:
        ``acm-g10`` is ``12.55.8``, so it falls under ``acm-g11``), then the SPIR-V targets
        (:data:`JIT_TARGETS`: the JIT fallback; the SYCL runtime's Level Zero adapter prefers the
        ``spir64_gen`` image and takes ``spir64`` when there is none, ``urDeviceSelectBinary``, tested in
        intel/llvm ``unified-runtime/test/adapters/level_zero/urDeviceSelectBinary.cpp``).  A name of several
        devices (``dg2``) has only the SPIR-V levels."""
        from devbin.targets.intel.devices import device_named, match_rank

        if not self.owns_arch(target):
            return None
        d = device_named(target)
        ranked = [] if d is None else [
            (m[0], i, name) for i, name in enumerate(others)
            if self.owns_arch(name) and name != target and (m := match_rank(_built_for(name), d)) is not None]
        return [name for _, _, name in sorted(ranked)] + [name for name in others if name.lower() in JIT_TARGETS]

    def offered_symbols(self, elf: ElfFile) -> tuple[str, ...] | None:
        """A zebin's kernels and external functions (``.ze_info`` ``kernels`` and ``functions``; for a zebin
        without ``.ze_info``, the functions of their own ``.text.<name>`` section), then its other defined
        globals: what the runtime finds by name (``zeKernelCreate``, ``clCreateKernel``; external functions
        for ``zeModuleDynamicLink``).  IGC writes every kernel symbol ``STB_LOCAL`` (IGC
        ``IGC/ZEBinWriter/zebin/spec/elf.md``, "ZE symbols"), so ``ar s`` and ``llvm-ar s`` index nothing of a
        zebin; a patch-token binary (``e_machine`` 0) is not this vendor's machine and offers its globals."""
        from devbin.targets.intel.zebin import Zebin

        z = Zebin(elf, diag=lambda e: None)
        named = [f.name for f in z.functions if f.is_kernel]
        if z.zeinfo is not None:
            named += [e.name for e in z.zeinfo.functions]
        named += [sym.name for sym in elf.global_symbols(defined=True)]
        return tuple(dict.fromkeys(n for n in named if n))

    def write_container(self, format: str, images: Sequence[tuple[str, str, bytes]]) -> bytes:
        """``ocloc``: the fat archive ocloc writes (:func:`devbin.targets.intel.fatarchive.write_fat_archive`):
        each zebin as ``<pointer bits>.<IP version>`` in order, a SPIR-V module last as ``generic_ir`` with the
        first zebin's build options (``.misc.buildOptions``) as its ``BuildOptions``."""
        from devbin.errors import quote
        from devbin.formats.elf.reader import ElfFile
        from devbin.targets.intel import fatarchive as fat

        if format not in self.pack_formats:
            return super().write_container(format, images)
        members: list[tuple[str, bytes]] = []
        ir: list[bytes] = []
        options: list[bytes] = []
        for kind, arch, data in images:
            if kind == self.object_kind and arch:
                elf = ElfFile(data)
                members.append((fat.fat_member_name(arch, 64 if elf.header.is64 else 32), data))
                sec = elf.section(_BUILD_OPTIONS)
                options.append(bytes(sec.data) if sec is not None else b"")
            elif kind == _SPIRV and not ir:
                ir.append(data)
            else:
                what = "a second SPIR-V module" if kind == _SPIRV else f"{kind} for {quote(arch or 'no device')}"
                raise UsageError(f"an ocloc fat archive holds zebins of named devices and one SPIR-V module, not "
                                 f"{what}")
        # ocloc stores beside the SPIR-V the options its first device was built with (compute-runtime
        # shared/offline_compiler/source/ocloc_fatbinary.cpp, buildFatBinary: optionsForIr), which IGC records
        # in that zebin's .misc.buildOptions
        first = options[0] if options else b""
        fat.unique_member_names([name for name, _ in members])
        return fat.write_fat_archive([*members, *((fat.GENERIC_IR, fat.generic_ir(d, first)) for d in ir)])

    def prune_archive(self, data: Buffer, keeps: Callable[[str, int], bool], where: str) -> bytes | None:
        """An ``ocloc`` archive with the kept members, ``pad_`` members made anew as compute-runtime's
        ``ArEncoder`` makes them (:func:`devbin.targets.intel.fatarchive.prune_fat_archive`); None for an archive
        with a member whose name ocloc does not write (not its archive: ``ar rcs`` of zebins, a symbol table)."""
        from devbin.formats.ar import ArchiveFile
        from devbin.targets.intel.fatarchive import prune_fat_archive, read_fat_archive

        if len(ArchiveFile(data, where=where).members) != len(ArchiveFile(data, where=where).files) or any(
                m.role == "other" for m in read_fat_archive(data, where=where)):
            return None
        return prune_fat_archive(data, keeps, where)

    # ------------------------------------------------------------------ the unified model

    def import_code_object(self, elf: ElfFile, *, diag: Diag | None = None,
                           only: frozenset[str] | None = None) -> CodeObject:
        from devbin.targets.intel.importer import import_zebin

        return import_zebin(elf, diag=diag, only=only)

    def object_facts(self, elf: ElfFile) -> ObjectFacts:
        """The arch from the notes, ``spir64_gen`` (``spir_gen`` for ELF32), and the options of
        ``.misc.buildOptions`` where IGC wrote them; no producer of its own."""
        from devbin.targets.vendor_records import ObjectFacts

        sec = elf.section(_BUILD_OPTIONS)
        options = bytes(sec.data).split(b"\0", 1)[0].decode("utf-8", "backslashreplace").strip() if sec else ""
        triple = self.default_triple if elf.header.is64 else "spir_gen-unknown-unknown"
        return ObjectFacts(self.arch_from_elf(elf), triple, None, options)

    def resources_tables(self, elf: ElfFile, head: ImageKeys, model: ModelSource, *, json: bool, text: bool,
                         ) -> ImageResources | None:
        """Per function: GRFs, SIMD width, private/spill/scratch bytes per thread, SLM, barriers, required
        sizes (:func:`devbin.targets.intel.resources.resources_tables`; both records whatever is asked)."""
        from devbin.targets.intel.resources import resources_tables

        return resources_tables(elf, head, model)

    def load_attribute_names(self) -> None:
        import devbin.targets.intel.importer  # noqa: F401  (registers the intel.* ids at import)


#: The descriptor (registered in :mod:`devbin.targets.registry`).
INTEL = IntelVendor()
