"""The vendor descriptor: everything devbin knows of one GPU vendor, behind one interface.

Generic code (the scanner, pack/select/prune, size, the CLI) never names a vendor, an
``e_machine`` or an architecture prefix: it asks the registry (:mod:`devbin.targets.registry`)
for the :class:`Vendor` of an ELF machine, an architecture name, an image kind or a name, and
asks that descriptor.  A vendor is one folder ``targets/<vendor>/`` whose ``vendor.py`` defines
one subclass of :class:`Vendor` and one instance of it, plus one line in the registry.

What a descriptor holds (each item is the one place devbin writes that rule):

* ``name``: the canonical vendor name, one spelling (the image record, the model's
  :class:`~devbin.model.Target`, JSON): ``nvidia``, ``amd`` (LLVM's triple vendor,
  ``amdgcn-amd-amdhsa``; ``amdgpu`` is the LLVM *target*, devbin's AMD image kind), the
  :class:`Device` of select and load and the loader's index (``Device.vendor``; select/2, load/2);
* ``e_machines``: the ELF machines of its device code objects (``EM_CUDA`` 190, ``EM_AMDGPU`` 224);
* the image kinds and triple prefixes that are its code (what the scanner's vendor column says), its
  PCI vendor ID, LLVM offload kind and default triple (what ``devbin pack`` writes), what its device
  ELF says of itself (:meth:`Vendor.object_facts`), its virtual architectures (:meth:`Vendor.virtual_arch`);
* architectures: which names are its (:meth:`Vendor.owns_arch`), the name from an ELF header
  (:meth:`Vendor.arch_from_header`), the matching rules of ``--arch`` (cuobjdump's ``-arch``:
  :meth:`Vendor.option_matches`) and of ``prune --keep/--drop`` (nvprune's rule:
  :meth:`Vendor.keep_matches`);
* the unified model: the importer (:meth:`Vendor.import_code_object`), the vendor attribute
  namespace (:attr:`Vendor.attribute_namespace`, :class:`devbin.model.attributes.Namespace`) and
  the per-thread stack convention (:meth:`Vendor.stack_bytes`);
* the resources report's records of one code object (:meth:`Vendor.resources_tables`) and the row field
  each ``--sort`` key orders by (:attr:`Vendor.resource_sort_fields`);
* what a driver loads (``devbin select``: :meth:`Vendor.parse_device`, :meth:`Vendor.judge`), the
  super-archive's default chains (:meth:`Vendor.fallback_chain`) and symbol tables
  (:meth:`Vendor.offered_symbols`), its own containers ``devbin pack`` writes
  (:attr:`Vendor.pack_formats`, :meth:`Vendor.write_container`), function sizes
  (:meth:`Vendor.function_parts`), its tools (:attr:`Vendor.toolkit`), the facts its compilers print
  (:meth:`Vendor.facts_from_assembly`, ``devbin cc``);
* the link and load back ends, as module paths (:attr:`Vendor.link_backend`,
  :attr:`Vendor.load_backend`): ``devbin.link``/``devbin.load`` (layer 5) import them on use;
  this package (layer 3) never imports them (tests/test_layers.py).

A descriptor module is cheap to import: the registry imports every vendor's (its questions - an
``e_machine``, an image kind, a triple - are answered by class attributes), so a file of one vendor
must not pay for another's tables, and the image scanner asks a descriptor for every image it lists
and must not pay for the importer, the model or msgpack.  Those are imported inside the methods
that need them: AMD's ``mach``, ``targetid`` and ``matching``, Intel's ``devices``, every vendor's
importer.  NVIDIA's ``archs`` comes with its descriptor (:func:`~devbin.targets.registry.guess_vendor`
asks NVIDIA first of every architecture name).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from pathlib import Path

    from devbin.binary import Buffer
    from devbin.errors import DeviceBinaryError
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import CodeObject, Function
    from devbin.targets.resource_records import ImageKeys, ImageResources
    from devbin.targets.vendor_records import AssemblyFacts, Device, ObjectFacts, Verdict

__all__ = ["DEVBIN_SECTIONS", "VENDOR", "AssemblyFacts", "Device", "Diag", "ModelSource", "ObjectFacts", "Vendor",
           "Verdict", "generic_load_label"]


def generic_load_label(jit: bool) -> str:
    """How a driver loads an image no vendor names more exactly (:meth:`Vendor.load_label`)."""
    return "the IR it carries, JIT-compiled" if jit else "code object"

#: Where an importer reports what it tolerated (a :class:`~devbin.errors.DeviceBinaryError` per finding).
Diag = Callable[["DeviceBinaryError"], None]

#: The one model of a device ELF and where it came from (``devbin-sections`` or ``vendor``), computed when
#: called: :func:`devbin.importers.model_and_source` as the resources report asks it
#: (:meth:`Vendor.resources_tables`; the importers are a layer above the descriptors).
ModelSource = Callable[[], "tuple[CodeObject, str]"]
#: Where the model came from (:data:`ModelSource`'s string; :func:`devbin.importers.model_and_source`):
#: devbin's own sections, or the vendor's metadata.
DEVBIN_SECTIONS = "devbin-sections"
VENDOR = "vendor"


def __getattr__(name: str) -> Any:
    """The records the descriptors' methods return (:class:`Device`, :class:`Verdict`, :class:`ObjectFacts`,
    :class:`AssemblyFacts`), from :mod:`devbin.targets.vendor_records` on first use: a scan imports every
    descriptor and asks none of them for these, so it does not pay for building their classes."""
    if name in _RECORDS:
        from devbin.targets import vendor_records

        return getattr(vendor_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_RECORDS = frozenset({"AssemblyFacts", "Device", "ObjectFacts", "Verdict"})


class Vendor(ABC):
    """One GPU vendor (module docstring).  Subclasses set the class attributes and the methods."""

    #: The canonical vendor name (``nvidia``, ``amd``): the one spelling of every record and JSON value.
    name: ClassVar[str]
    #: The vendor as prose writes it (``NVIDIA``, ``AMD``).
    title: ClassVar[str]
    #: ``e_machine`` values of its device ELF files (the first is the one its code objects carry).
    e_machines: ClassVar[tuple[int, ...]]
    #: The prefixes of its architecture names (``sm_``, ``compute_``, ``lto_``; ``gfx``): what a name
    #: starts with when :meth:`owns_arch` holds (tests/test_layers.py looks for them outside targets/).
    arch_prefixes: ClassVar[tuple[str, ...]]
    #: The image kind of its device ELF code object (``cubin``, ``amdgpu``).
    object_kind: ClassVar[str]
    #: Every image kind that is this vendor's code (its code object, PTX, LTO-IR, its fat container).
    image_kinds: ClassVar[frozenset[str]]
    #: Triple prefixes of its device code (``nvptx``; ``amdgcn``, ``r600``): an LLVM container's
    #: bitcode or SPIR-V entry belongs to a vendor by its triple.
    triple_prefixes: ClassVar[tuple[str, ...]]
    #: The model's attribute namespace of its attributes (:class:`devbin.model.attributes.Namespace`):
    #: ids ``namespace << 8 | n``, named ``<name>.<attribute>``.
    attribute_namespace: ClassVar[int]
    #: The prefix of its attribute names (``nvidia.``, ``amdgpu.``).
    attribute_prefix: ClassVar[str]
    #: Its PCI vendor ID as OffloadBinary metadata writes it (``VendorId``: ``0x10de``, ``0x1002``).
    pci_vendor_id: ClassVar[str]
    #: The LLVM offload kind of its images (an OffloadBinary's producer: ``cuda``, ``hip``).
    offload_kind: ClassVar[str]
    #: The triple of its device code where an image states none (``nvptx64-nvidia-cuda``).
    default_triple: ClassVar[str]
    #: The hue (0-359) of its images in the size report's treemap (docs/REPORT.md).
    hue: ClassVar[int]
    #: The image kinds its driver may load (code, not containers): what :meth:`judge` is asked about.
    loadable_kinds: ClassVar[frozenset[str]]
    #: Its devices and images as select's messages name them (``NVIDIA``, ``AMDGPU``).
    device_title: ClassVar[str]
    #: Its own tools that devbin finds outside ``PATH`` too (:meth:`toolkit_dirs`), each with how to install
    #: it (:func:`devbin.tools.find_tool`, :func:`devbin.tools.install_hint`).
    toolkit: ClassVar[Mapping[str, str]] = MappingProxyType({})
    #: Whether its compiler prints per-function facts in the assembly that devbin reads (``devbin cc``,
    #: :meth:`facts_from_assembly`).
    reads_assembly: ClassVar[bool] = False
    #: Whether its private (scratch) segment is the per-thread stack when no stack size is recorded
    #: (:meth:`stack_bytes`).
    private_segment_is_stack: ClassVar[bool] = False
    #: Whether an ``ar`` archive of its code objects is a multi-device archive, whose runtime loads the one member
    #: that fits the device (Intel's ocloc archive): ``devbin prune`` drops members of one (:meth:`prune_archive`).
    device_archives: ClassVar[bool] = False
    #: The module of its device-link back end, imported by ``devbin.link`` on use ("" when none).
    link_backend: ClassVar[str] = ""
    #: The module of its load back end, imported by ``devbin.load`` on use ("" when none).
    load_backend: ClassVar[str] = ""
    #: The module of its real-driver back end (``driver_report(files, target, kernel, lazy)``: ``devbin load
    #: --backend <offload_kind>``, JSON schema ``load-<offload_kind>``), imported on use ("" when none).
    driver_backend: ClassVar[str] = ""

    #: Undefined symbols of its code objects that its loader defines when it loads them (a super-archive's
    #: resolution does not look them up; Intel: the relocation symbols the runtime patches).
    loader_symbols: ClassVar[frozenset[str]] = frozenset()
    #: ``devbin pack --format`` names of the vendor's own multi-device containers, each with what it is
    #: (Intel: ``ocloc``, the fat archive); :meth:`write_container` writes them.
    pack_formats: ClassVar[Mapping[str, str]] = MappingProxyType({})

    #: ``devbin resources --sort``'s keys (``regs``, ``stack``, ``frame``, ``spill``) -> the field of its text
    #: table's rows each orders by (:meth:`resources_tables`; ``name`` sorts by name whatever the vendor).
    resource_sort_fields: ClassVar[Mapping[str, str]] = MappingProxyType({})

    #: ``devbin inspect``'s ``devbin_source`` for a model its importer built from the vendor's own metadata
    #: (:meth:`import_code_object`; the model of devbin sections says ``devbin sections``).
    imported_from: ClassVar[str] = "imported from the vendor's metadata"
    #: The key of the vendor's own record in each ``devbin inspect`` image report (docs/JSON.md; ``nvidia``:
    #: :meth:`inspect_record`), ``null`` in the reports of other files; "" when the vendor has none.
    inspect_key: ClassVar[str] = ""

    def __repr__(self) -> str:
        return f"<vendor {self.name}>"

    # ------------------------------------------------------------------ architectures

    @abstractmethod
    def owns_arch(self, arch: str) -> bool:
        """Whether ``arch`` (an architecture or target-ID name as images carry it) is this vendor's."""

    @abstractmethod
    def known_arch_names(self) -> tuple[str, ...]:
        """Every architecture name its tables know, as ``--arch``/``--keep`` take them (lower case)."""

    @abstractmethod
    def claims_arch(self, text: str) -> bool:
        """Whether ``text`` (lower case, stripped) is meant as one of its architecture names, known or not:
        what :meth:`check_arch` then judges (NVIDIA: it starts ``sm``, ``compute`` or ``lto``)."""

    @abstractmethod
    def check_arch(self, text: str) -> str:
        """``text`` (claimed, lower case) as the tables spell it; UsageError saying why it names none
        (:func:`devbin.targets.archnames.canonical_arch` adds the names probably meant)."""

    def arch_repairs(self, text: str) -> list[str]:
        """Obvious repairs of a misspelt name (NVIDIA: ``sm90`` -> ``sm_90``), best first; none by default."""
        return []

    @abstractmethod
    def arch_from_header(self, e_flags: int, ei_osabi: int, ei_abiversion: int) -> str:
        """The architecture an ELF header of one of :attr:`e_machines` names (the header alone)."""

    def arch_from_elf(self, elf: ElfFile) -> str:
        """The architecture of a device ELF of one of :attr:`e_machines`, where the header does not say it
        all (Intel: the ``.note.intelgt.compat`` notes name the device); by default :meth:`arch_from_header`."""
        h = elf.header
        return self.arch_from_header(h.e_flags, h.ei_osabi, h.ei_abiversion)

    @abstractmethod
    def option_matches(self, found: str, wanted: str) -> bool:
        """Whether an image of architecture ``found`` is one ``--arch wanted`` takes (the inspection
        commands' filter; NVIDIA: cuobjdump ``-arch``'s rule).  ``wanted`` is this vendor's."""

    @abstractmethod
    def keep_matches(self, spec: str, arch: str) -> bool:
        """Whether ``prune --keep/--drop spec`` names an image of architecture ``arch`` (NVIDIA:
        nvprune's rule).  ``arch`` is non-empty."""

    def virtual_arch(self, arch: str) -> str:
        """The virtual (JIT-compiled) architecture of the same target as ``arch`` (NVIDIA: ``sm_90`` ->
        ``compute_90``, as PTX filed under its SASS name is), or ``""`` where the vendor has none."""
        return ""

    def is_virtual_arch(self, arch: str) -> bool:
        """Whether ``arch`` names virtual code only (NVIDIA: ``compute_NN``/``lto_NN``: PTX and LTO-IR)."""
        return False

    def generation(self, arch: str) -> tuple[int, str] | None:
        """The generation number and variant of one of its architecture names, which orders its virtual
        code (NVIDIA: ``sm_90a``/``compute_90a`` -> ``(90, "a")``); None where the vendor has none."""
        return None

    def format_arch(self, generation: int, variant: str = "", *, virtual: bool = False) -> str:
        """The name of an architecture by :meth:`generation` (NVIDIA: ``90`` -> ``sm_90``, virtual
        ``compute_90``); UsageError where the vendor has no generation numbers."""
        from devbin.errors import UsageError

        raise UsageError(f"{self.title} architectures have no generation numbers")

    def owns_triple(self, triple: str) -> bool:
        """Whether an LLVM triple (``nvptx64-nvidia-cuda``, ``amdgcn-amd-amdhsa``) is this vendor's."""
        return triple.startswith(self.triple_prefixes)

    def toolkit_dirs(self, tool: str) -> Iterator[Path]:
        """Folders besides ``PATH`` that may hold ``tool`` (one of :attr:`toolkit`), most specific first."""
        return iter(())

    @abstractmethod
    def function_parts(self, elf: ElfFile, rows: Sequence[int], names: Sequence[str],
                       ) -> tuple[list[bool], dict[str, tuple[tuple[str, int], ...]]]:
        """For ``devbin size`` (from the symbol and section tables alone, no import): per function symbol
        (``rows``: symbol indices of ``elf.symtab``, named ``names``) whether it is a kernel, and per function
        name what belongs to it beside its code, ``(key, bytes)`` pairs (docs/JSON.md, ``related``)."""

    # ------------------------------------------------------------------ what a driver loads (devbin select)

    @abstractmethod
    def owns_device(self, text: str) -> bool:
        """Whether ``text`` (lower case, stripped) is meant as one of this vendor's devices."""

    @abstractmethod
    def parse_device(self, text: str, suggest: Callable[[str], list[str]]) -> Device:
        """The device ``text`` names (:meth:`owns_device` holds; a name starting with one of
        :attr:`arch_prefixes` is a known architecture: :func:`devbin.packaging.selection.parse_device`
        checked it); UsageError for a name of no device, naming what was probably meant (``suggest``:
        :func:`devbin.targets.archnames.suggestions`)."""

    def loader_arch(self, kind: str, arch: str, head: Callable[[], Buffer], data: Callable[[], Buffer] | None,
                    ) -> tuple[str, int]:
        """An image's architecture as the driver sees it, and its generic version (1 where the vendor has
        none): ``head()`` gives the image's first 64 bytes, ``data()`` (None unless the image is a bare
        code object) all of them.  By default the scanned ``arch`` as is."""
        return arch, 1

    @abstractmethod
    def judge(self, kind: str, arch: str, device: Device, generic_version: int = 1) -> Verdict:
        """Whether the driver loads an image of ``kind`` (one of :attr:`loadable_kinds`) and ``arch`` (as
        :meth:`loader_arch` gives it) on ``device`` (this vendor's), and its rank among those that load."""

    def refused_fallback(self, kind: str, refused: Verdict, data: Callable[[], Buffer] | None) -> Verdict:
        """What the driver does with an image :meth:`judge` or :meth:`judge_member` refused, whose bytes ``data()``
        gives (None: not at hand): by default nothing, the refusal stands (Intel: a zebin that carries its
        SPIR-V is compiled from it)."""
        return refused

    def picks_member(self, name: str) -> bool:
        """Whether an archive member named ``name`` is one of the variants its runtime picks one from (Intel:
        an ``ocloc`` fat archive's ``64.12.60.7``, ``generic_ir``): the members so named make one module, judged
        by :meth:`judge_member`.  False by default: each member of an archive is a module of its own."""
        return False

    def judge_member(self, member: str, kind: str, arch: str, device: Device, generic_version: int = 1) -> Verdict:
        """:meth:`judge` for an image that is the archive member ``member`` (:meth:`picks_member` holds), whose
        name the runtime may match first; by default the name plays no part."""
        return self.judge(kind, arch, device, generic_version)

    @abstractmethod
    def passed_over(self, chosen: Verdict, chosen_arch: str, other: Verdict, other_arch: str) -> str:
        """Why an image that loads (``other``) is not the one chosen (``chosen``, ranked first): one phrase."""

    @abstractmethod
    def fallback_chain(self, target: str, others: Sequence[str]) -> list[str] | None:
        """The targets among ``others`` (a super-archive's, docs/FORMAT.md §16.5) whose code runs where
        ``target``'s does, best first: the default fallback chain below ``target``; None when ``target`` is
        no architecture of this vendor's."""

    def prune_archive(self, data: Buffer, keeps: Callable[[str, int], bool], where: str) -> bytes | None:
        """A multi-device archive of this vendor's code objects (what a runtime picks one member of by the
        device's name: Intel's ``ocloc`` archive) written again with the members ``keeps(name, n)`` accepts
        (``n``: the member's number among those of its name, from 1), as the vendor's tool writes it; None
        where the vendor has no such archive (``devbin prune`` then refuses to rewrite one)."""
        return None

    def load_label(self, kind: str, jit: bool) -> str:
        """How its driver loads a chosen image of ``kind`` (select's text, the tour): the IR named and
        ``JIT-compiled`` when ``jit``, else what the machine code is (NVIDIA: ``SASS``); the default
        :func:`generic_load_label`."""
        return generic_load_label(jit)

    def write_container(self, format: str, images: Sequence[tuple[str, str, bytes]]) -> bytes:
        """The container ``format`` (one of :attr:`pack_formats`) of ``images``, each ``(image kind, arch,
        bytes)`` in order; a UsageError for an image it cannot hold."""
        from devbin.errors import UsageError

        raise UsageError(f"{self.title} writes no container {format!r}")

    def offered_symbols(self, elf: ElfFile) -> tuple[str, ...] | None:
        """The names a member ``elf`` (one of :attr:`e_machines`) offers to a lookup by name, in symbol-table
        order, where they are not its defined global symbols (what ``ar s`` indexes and a linker pulls a member
        for): a super-archive's per-target symbol table (docs/FORMAT.md §16).  None (the default): its
        defined globals."""
        return None

    # ------------------------------------------------------------------ the unified model

    @abstractmethod
    def import_code_object(self, elf: ElfFile, *, diag: Diag | None = None,
                           only: frozenset[str] | None = None) -> CodeObject:
        """The vendor metadata of ``elf`` (one of :attr:`e_machines`) as a :class:`~devbin.model.CodeObject`;
        ``only``: just the functions of these names (the lazy loader's partial import)."""

    @abstractmethod
    def object_facts(self, elf: ElfFile) -> ObjectFacts:
        """What ``elf`` (one of :attr:`e_machines`) says of itself (:class:`ObjectFacts`); FormatError when
        it cannot be read as this vendor's code object."""

    def facts_from_assembly(self, elf: ElfFile, assembly: str, *, diag: Diag | None = None) -> AssemblyFacts:
        """``elf`` imported, with the per-function facts its compile's ``assembly`` (``-S``) prints added
        (where :attr:`reads_assembly`); ``diag`` hears of what does not fit."""
        from devbin.errors import UsageError

        raise UsageError(f"{self.title}: devbin reads no facts from its compilers' assembly")

    def resources_tables(self, elf: ElfFile, head: ImageKeys, model: ModelSource, *, json: bool, text: bool,
                         ) -> ImageResources | None:
        """``devbin resources`` of ``elf``, one of this vendor's code objects (:attr:`object_kind`) whose image
        has the keys ``head``: the JSON record (``json``), the text table's rows (``text``) and, where the
        vendor has a tool's numbers to print as its lines, those (NVIDIA: cuobjdump ``-res-usage``); None
        where the vendor has no resources report.  ``model`` gives the one model (:data:`ModelSource`).
        Raises :class:`~devbin.errors.DeviceBinaryError` for a file that cannot be read."""
        return None

    def format_resource_usage(self, usage: dict[str, Any]) -> str:
        """The lines its own tool prints for :meth:`resources_tables`' ``usage`` (``devbin resources --format
        <tool>``; NVIDIA: ``cuobjdump -res-usage``); ``""`` where the vendor gives no ``usage``."""
        return ""

    def resource_usage_lines(self, data: Buffer) -> str | None:
        """The lines :meth:`format_resource_usage` prints for the code object ``data`` (an image's bytes), read
        in one compiled pass where the vendor has one (NVIDIA: ``devbin.binary._cdecode.cubin_usage_lines``);
        None where it has none, the pass is not built or off (``DEVBIN_PURE_PYTHON``), or the object is
        anything but the plain well-formed case: :meth:`resources_tables` then gives the same lines, or the
        error.  Only for a whole ``--format`` run (no ``--function``): no record is made per function."""
        return None

    def inspect_record(self, elf: ElfFile) -> dict[str, Any] | None:
        """``devbin inspect``'s record under :attr:`inspect_key` of ``elf`` (one of :attr:`e_machines`): the
        vendor's sections as plain data (NVIDIA: the ``.nv.info`` records, toolkit note, address references);
        None where the vendor has none.  Raises :class:`~devbin.errors.DeviceBinaryError` for a file that
        cannot be read so (the report then says why, under ``devbin_error``)."""
        return None

    def format_inspect_record(self, record: dict[str, Any]) -> str:
        """The text ``devbin inspect`` prints for :meth:`inspect_record`'s ``record`` (its strings already made
        visible), after the ELF's notes: whole lines, each ending in a newline; ``""`` where the vendor has none."""
        return ""

    @abstractmethod
    def load_attribute_names(self) -> None:
        """Register the names of this vendor's attribute ids (importing its importer does)."""

    def stack_bytes(self, function: Function) -> int | None:
        """A function's per-thread stack: the recorded ``STACK_SIZE`` (with callees); else, where the
        vendor's private segment is the stack (:attr:`private_segment_is_stack`; AMDGPU: LLVM's
        ScratchSize / ``private_segment_fixed_size``), ``PRIVATE_BYTES``; else None (not recorded)."""
        from devbin.model import StdAttr

        v = function.uint(StdAttr.STACK_SIZE)
        if v is None and self.private_segment_is_stack:
            v = function.uint(StdAttr.PRIVATE_BYTES)
        return v
