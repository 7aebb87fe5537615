"""Keep only some architectures of a device binary, as ``nvprune`` and ``lipo -thin`` do.

:func:`prune` takes the bytes of a bare fatbin, a bare LLVM OffloadBinary, a
clang offload bundle (plain or CCOB-compressed), a host ELF (object, shared
library or executable) or a GNU ``ar`` archive, and returns the same kind of
file holding only the selected device images.

**Matching** (``keep``/``drop`` hold names such as ``sm_90``, ``compute_90``,
``gfx90a``, ``gfx90a:xnack+``; each vendor's rule, its descriptor's ``keep_matches``, through
:func:`devbin.targets.registry.prune_name_matches`); for NVIDIA, ``nvprune -arch`` names with one difference:

* ``sm_NN`` (also ``sm_NNa``/``sm_NNf``) matches the cubin for ``sm_NN`` *and* the
  PTX/LTO-IR for ``compute_NN``, so the kept GPU keeps the code a newer driver can
  JIT from.  Here devbin differs from ``nvprune -arch sm_90``, which drops the
  ``compute_90`` PTX: devbin's ``sm_90`` is nvprune's ``-gencode arch=compute_90,code=[sm_90,compute_90]``
  (tests/test_prune_linked.py compares the two); the ``a``/``f`` variant must be the
  same (``sm_90`` does not match ``sm_90a``).  That is the default PTX policy, ``kept``; ``ptx="none"``
  is ``nvprune -arch``'s rule (below);
* ``compute_NN`` matches only the PTX/LTO-IR for ``compute_NN``;
* an AMD processor name without features (``gfx90a``) matches every target ID
  of that processor (``gfx90a``, ``gfx90a:xnack+``, ``gfx90a:sramecc-:xnack-``);
  a target ID with features (``gfx90a:xnack+``) matches only itself;
* an image whose container names no architecture (a bundle's host entry, an
  OffloadBinary entry without ``arch``) is always kept.

Names are parsed by :func:`devbin.targets.archnames.parse_arch_list` (comma lists, any case,
known architectures only).  The selection must leave at least one device image somewhere in
the input, and each name kept must match an image of it; otherwise the prune is refused (like
``lipo -thin`` with an architecture the file lacks): keeping a silent subset of what was asked
for is a mistake found too late.  A package prunes each library with ``require_match=False``
and checks the names against the whole package instead (devbin.packaging.prune_packages).

**PTX policy** (``ptx=``, ``--ptx``; the words of ``devbin pack --ptx``, devbin.packaging.ptx): a newer GPU
runs only PTX whose virtual arch is not above it (CUDA C++ Programming Guide, "Application
Compatibility").  ``kept`` (the default, the bytes prune always gave) keeps the PTX/LTO-IR the names
match; ``none`` keeps no PTX/LTO-IR (``nvprune -arch sm_90``; with a ``compute_NN`` in ``keep`` it is
refused); ``highest`` keeps, in each container, also the PTX of the highest virtual arch a newer GPU
could JIT (:func:`devbin.packaging.ptx.jit_ptx`), whatever the names say of it.  When the input holds
such PTX and the result keeps none, a note says so: under ``kept`` naming the PTX to keep, under
``none`` (an explicit choice) only what the choice means: the pruned file no longer runs on newer GPUs.
Under every policy each kept GPU keeps, in each container, the image the driver loads for it from the
input (:mod:`devbin.packaging.load_fallback`: compute_50 PTX that sm_90 JIT-compiles, sm_80 SASS that
sm_86 runs), except PTX under ``none`` and an image whose arch a ``drop`` name is; counted in
:attr:`PruneResult.fallback_images` and :attr:`PruneResult.unloadable_containers`.

**SPIR-V policy** (``spirv=``, ``--spirv``; ``--jit-ir`` sets both): the same words.  SPIR-V names no
device, so ``kept`` and ``highest`` keep every module and ``none`` drops each one a container can lose (an
ocloc archive's ``generic_ir``); a note says which SPIR-V stays whole, or which devices lose their JIT
fallback when none does.

**Images** are those :func:`devbin.images.scan_bytes` finds with ``all=True`` (every image:
``devbin list --all`` gives the same ones), each decided on its
:class:`~devbin.images.Image` (address, kind, arch).  Each container is then rewritten
where the images' addresses place it (file offset, section, container and entry
numbers), so a fatbin the scan finds in ``.rodata``, ``.data`` or ``.ldata`` is pruned as
one in ``.nv_fatbin`` is.  A bare image (a cubin or code object that is the whole file or
archive member, or a wrapped image's one image) sits in no container: nothing is chosen
among such images, and they are not reported.

**Containers** (each rewritten by its format's entry of :mod:`devbin.images.containers`: ``rewrite``, the
alignments it is packed at, what a linked file allows; the files that hold files, ELF, ``ar`` and wrapped
images, here)

* fatbin: the kept entries are copied byte for byte behind the original header,
  whose ``fat_size`` is updated; nothing is re-encoded, so pruning nothing gives
  the input back byte for byte.  A fatbin whose entries all go keeps its 16-byte
  header (``fat_size`` 0) so that a wrapper pointing at it stays valid.
* OffloadBinary: a version-1 blob holds one image and is kept or dropped whole;
  a version-2 blob with several images is rewritten with
  :func:`~devbin.formats.offload.writer.write_offload_binary`.
* bundle: rewritten with the kept entries (the host entry always stays) at the
  alignment the original layout shows (the largest power of two up to 4096 that
  reproduces its offsets); a compressed bundle is decompressed, pruned and
  recompressed with the same method and CCOB version (v1 cannot be written and
  is refused).  The compression level is the writer's default, so the
  compressed bytes may differ from the original tool's.
* fatbins in other sections (``.rodata``, ``.data``, ``.ldata``, or where a
  ``.nvFatBinSegment`` wrapper points): pruned where they are, since other data around them
  cannot move (in a linked file, runs of them that wrappers point at are packed: below).
* relocatable host object (``ET_REL``): ``.nv_fatbin``/``__nv_relfatbin``,
  ``.llvm.offloading`` and ``.hip_fatbin`` get new contents (containers packed
  back to back at their alignment: 8, 8, 4096) through
  :meth:`~devbin.formats.elf.edit.ElfEditor.replace_relocatable_section`, which
  rewrites the symbols and ``RELA`` addends pointing at container boundaries
  (nvcc's ``fatbinData``; the ``.nvFatBinSegment`` wrapper's relocation);
  ``__CLANG_OFFLOAD_BUNDLE__<id>`` sections of unselected targets are removed.
  The object is then laid out compactly (ElfEditor rule 6), so it shrinks.
* shared library / executable (``ET_DYN``/``ET_EXEC``): ``.nv_fatbin`` and ``.hip_fatbin``
  are rewritten with the kept images packed towards the section's start (at 8 and 4096);
  every wrapper that points at a container (``.nvFatBinSegment``, ``.hipFatBinSegment``),
  its relative relocation and ``fatbinData``-like symbols move with it
  (:func:`devbin.packaging.wrapper_refs.retarget`).  A container no wrapper points at
  stays at its offset (something else may address it) and the others pack around it;
  when a reference cannot be moved every container stays and is compacted at its own
  start.  The freed bytes are zeroed, then the whole pages of the freed range that ends the
  section are cut out of the file by :func:`devbin.formats.elf.pages.remove_pages` (segments split, virtual addresses
  unchanged, later offsets moved down; refused when anything reads a removed byte), and
  the result is scanned again: it must hold the kept images, byte for byte, or nothing is
  returned.  The file shrinks by the dropped bytes less at most the partial pages at the
  ends of the removed range, less the bytes freed in front of containers that stay in place
  (kept as zeros: cutting there would split the section, and the vendors' tools read only the
  first section of a name).  Fatbins in other sections (``.rodata``, ``.data``, ``.ldata`` ...)
  of a linked file stay where they are, each compacted at its own start, unless wrappers point at
  a run of them that lies back to back (packed towards the run's start, the wrappers moved, as in
  ``.nv_fatbin``); there every freed range is cut (the section split in pieces of its name, which no
  vendor tool reads by name), within :data:`devbin.formats.elf.pages.MAX_SEGMENTS`.
* SYCL host library (``__CLANG_OFFLOAD_BUNDLE__sycl-<target>``; its registry entry's ``prune_section``,
  :func:`devbin.images.sycl.prune_sycl_section`): in each image whose frame decodes to a multi-device
  archive, the dropped members leave it (the vendor's ``prune_archive``), the frame is compressed again, the
  section is packed and the descriptors, ``.tgtimg`` and symbols are moved with the images
  (:mod:`devbin.formats.sycl.prune`); its freed tail's whole pages are cut as above.  A SYCL image itself
  always stays; a relocatable object's SYCL sections are refused.
* a multi-device archive (an ``ar`` whose members are one vendor's code objects, one per device, the
  runtime picking one: :attr:`devbin.targets.vendor.Vendor.device_archives`): written again by its vendor
  without the dropped members.
* ``ar`` archive (GNU/System V; BSD and thin archives are refused): every member
  is pruned (members without device code are copied); when anything changed the
  archive is written again with :mod:`devbin.formats.ar.writer` (symbol table
  rebuilt, zero dates, uid/gid 0, mode 644), else the input comes back unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from devbin.binary import Buffer, ByteView, Emitter, align_up
from devbin.binary.lock import exclusive
from devbin.binary.mapped import Mapped, Rewritable, copy_of, release
from devbin.binary.output import check_destination, write_file
from devbin.errors import DeviceBinaryError, FormatError, InputClash, UsageError, short
from devbin.formats import magic as M
from devbin.formats.ar import ArchiveFile, numbered
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.formats.elf import constants as EC
from devbin.formats.elf.edit import ElfEditor
from devbin.formats.elf.pages import check_max_segments, remove_pages
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.wrapped import parse_wrapped, write_wrapped
from devbin.images import containers as C
from devbin.images.address import Address, Entry, Member, SectionStep
from devbin.images.frame import Frame
from devbin.images.record import CUBIN, SPIRV, Image
from devbin.images.scan import Scanner, scan_bytes
from devbin.images.scanreport import ScanReport
from devbin.packaging.facts import parse_sm
from devbin.packaging.load_fallback import kept_gpus, protect
from devbin.packaging.ptx import jit_ptx
from devbin.packaging.wrapper_refs import WRAPPER_SECTIONS, retarget
from devbin.targets.archnames import parse_arch_list
from devbin.targets.registry import guess_vendor, prune_name_matches, vendor_for_machine, vendor_named

__all__ = ["PRUNE_IR_POLICIES", "PRUNE_PTX_POLICIES", "PruneResult", "Selection", "footprint", "parse_arch_list",
           "prune", "prune_file", "prune_name_matches"]

#: prune's JIT-IR policies, one vocabulary for each IR a runtime compiles on the device (``--ptx``, ``--spirv``,
#: both at once ``--jit-ir``; the words of ``devbin pack --ptx``, devbin.packaging.ptx): ``kept`` (the default)
#: the IR of the kept architectures, ``none`` none at all, ``highest`` the kept ones plus each container's
#: highest a newer device could JIT.  PTX: ``kept`` is the PTX/LTO-IR the names match, ``none`` ``nvprune
#: -arch``'s rule.  SPIR-V names no architecture (any device of its vendor JIT-compiles it), so ``kept`` and
#: ``highest`` keep every SPIR-V module and ``none`` drops each one a container can lose (an ocloc archive's
#: ``generic_ir``; an image its container always keeps stays, a note says so).
PRUNE_IR_POLICIES = ("kept", "none", "highest")
#: The PTX policies (``--ptx``): :data:`PRUNE_IR_POLICIES`.
PRUNE_PTX_POLICIES = PRUNE_IR_POLICIES

_MAX_DEPTH = 8


# --------------------------------------------------------------------------- selection


def _virtual(arch: str) -> bool:
    """Whether ``arch`` names virtual code only (``compute_90``, ``lto_90``: PTX/LTO-IR), which ``--ptx none``
    drops (:meth:`devbin.targets.vendor.Vendor.is_virtual_arch`)."""
    v = guess_vendor(arch)
    return v is not None and v.is_virtual_arch(arch)


@dataclass(frozen=True)
class Selection:
    """Which architectures stay: ``keep`` (only those) or ``drop`` (all but those), exactly one of them."""

    keep: tuple[str, ...] | None = None
    drop: tuple[str, ...] | None = None
    #: When given, only the images at these addresses are kept or dropped; every other image stays.
    images: tuple[str, ...] = ()
    #: The PTX policy (:data:`PRUNE_IR_POLICIES`).
    ptx: str = "kept"
    #: The SPIR-V policy (:data:`PRUNE_IR_POLICIES`): ``none`` drops SPIR-V modules, the others keep them.
    spirv: str = "kept"
    #: The most program headers a linked file's result may have (None: :data:`devbin.formats.elf.pages.MAX_SEGMENTS`):
    #: how the file is laid out, not what stays, carried here so that a package's workers get it with the rest.
    max_segments: int | None = None

    def __post_init__(self) -> None:
        if (self.keep is None) == (self.drop is None):
            raise UsageError("give exactly one of keep= and drop=")
        if self.max_segments is not None:
            check_max_segments(self.max_segments)
        for name, policy in (("ptx", self.ptx), ("spirv", self.spirv)):
            if policy not in PRUNE_IR_POLICIES:
                raise UsageError(f"{name}={policy!r}: expected one of {', '.join(PRUNE_IR_POLICIES)}")
        if self.ptx == "none" and self.keep is not None:
            virtual = [n for n in self.keep if _virtual(n)]
            if virtual:
                raise UsageError(f"keep {','.join(virtual)} names PTX/LTO-IR only, which --ptx none drops")

    def keeps(self, arch: str) -> bool:
        """Whether an image of ``arch`` stays, by name (``highest`` adds its PTX per container: :class:`_Ctx`)."""
        if not arch:
            return True
        if self.ptx == "none" and _virtual(arch):
            return False
        if self.keep is not None:
            return any(prune_name_matches(s, arch) for s in self.keep)
        return not any(prune_name_matches(s, arch) for s in self.drop or ())

    @property
    def names(self) -> tuple[str, ...]:
        return self.keep if self.keep is not None else self.drop or ()


# --------------------------------------------------------------------------- results


def footprint(image: Image) -> int:
    """The bytes ``image`` takes in its container, what dropping it frees: a fatbin entry's header
    and payload, an OffloadBinary image, a bundle entry (uncompressed for a compressed bundle):
    :meth:`devbin.images.containers.ContainerFormat.footprint`."""
    fmt = C.format_named(image.container)
    return fmt.footprint(image) if fmt is not None else image.stored_size


@dataclass
class PruneResult:
    """What :func:`prune` did.  ``data`` is the pruned file.

    ``images``: every image decided on, in scan order, with whether it stays.
    ``container_bytes_freed`` sums what the containers shrank by (inside their sections);
    ``file_bytes_saved`` is ``input_size - output_size``: what writing ``data`` saves, exactly
    (``devbin size --keep`` predicts savings with it).
    ``footprints``: each image's :func:`footprint`, in the order of ``images``, where the images no
    longer hold their format objects (:meth:`detached`); empty: taken from the images.
    ``written_size``: the size of ``data`` once :meth:`released` let the bytes go (None: ``data`` holds them).
    """

    data: bytes
    input_size: int
    images: list[tuple[Image, bool]] = field(default_factory=list)
    container_bytes_freed: int = 0
    notes: list[str] = field(default_factory=list)
    footprints: list[int] = field(default_factory=list, repr=False)
    written_size: int | None = None
    #: The pruned file when :func:`prune` wrote it to a mapped file (its input was one): ``data`` is then
    #: empty and ``written_size`` its length.
    mapped: Mapped | None = field(default=None, repr=False)
    #: Images kept beyond the selection, each the only code a kept GPU loads in its container
    #: (devbin.packaging.load_fallback), and containers a kept GPU loads nothing from any more.
    fallback_images: int = 0
    unloadable_containers: int = 0

    def released(self) -> PruneResult:
        """This result without its bytes (written out already: a wheel's library), every figure kept: what
        a report keeps while the next library is pruned, so that one library's bytes are alive at a time."""
        return replace(self.detached(), data=b"", written_size=self.output_size, mapped=None)

    def detached(self) -> PruneResult:
        """This result with every image's ``native`` None and its footprint kept in ``footprints``:
        plain data, what a worker process of ``--jobs`` sends back (devbin.images.parallel)."""
        return PruneResult(self.data, self.input_size, [(replace(i, native=None), k) for i, k in self.images],
                           self.container_bytes_freed, list(self.notes), self._footprints(), self.written_size,
                           self.mapped, self.fallback_images, self.unloadable_containers)

    def _footprints(self) -> list[int]:
        return self.footprints or [footprint(i) for i, _ in self.images]

    def rows(self) -> list[tuple[Image, bool, int]]:
        """Each image, whether it stays, and its :func:`footprint`."""
        return [(i, k, n) for (i, k), n in zip(self.images, self._footprints(), strict=True)]

    @property
    def output_size(self) -> int:
        return len(self.data) if self.written_size is None else self.written_size

    @property
    def file_bytes_saved(self) -> int:
        return self.input_size - self.output_size

    @property
    def changed(self) -> bool:
        return any(not kept for _, kept in self.images)

    def saved_by_arch(self) -> dict[str, int]:
        """Bytes of the dropped images (:func:`footprint`), per architecture, sorted by name."""
        out: dict[str, int] = {}
        for image, kept, n in self.rows():
            if not kept:
                out[image.arch] = out.get(image.arch, 0) + n
        return dict(sorted(out.items()))

    def bytes_by_arch(self) -> dict[str, tuple[int, int]]:
        """Bytes of each architecture's images (:func:`footprint`) before and after, sorted by name."""
        out: dict[str, tuple[int, int]] = {}
        for image, kept, n in self.rows():
            before, after = out.get(image.arch, (0, 0))
            out[image.arch] = (before + n, after + (n if kept else 0))
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, object]:
        return {
            "input_size": self.input_size,
            "output_size": self.output_size,
            "file_bytes_saved": self.file_bytes_saved,
            "container_bytes_freed": self.container_bytes_freed,
            "fallback_images": self.fallback_images,
            "unloadable_containers": self.unloadable_containers,
            "saved_by_arch": self.saved_by_arch(),
            "arch_bytes": {a: {"before": b, "after": c} for a, (b, c) in self.bytes_by_arch().items()},
            "images": [{**image.to_dict(), "container": image.container, "kept": kept}
                       for image, kept in self.images],
            "notes": list(self.notes),
        }


def _in_container(image: Image) -> bool:
    """Whether ``image`` is an entry of a container prune can rewrite (not a bare or wrapped single image):
    its format has a ``rewrite`` (or rewrites its sections), or it is a member of a multi-device archive
    (:func:`_device_archive_member`)."""
    fmt = C.format_named(image.container)
    if fmt is C.BARE:
        return _device_archive_member(image)
    return fmt is not None and (fmt.rewrite is not None or fmt.prune_section is not None)


def _device_archive_member(image: Image) -> bool:
    """A bare code object that is an archive member, of a vendor whose archives hold one member per device for
    the runtime to pick (:attr:`devbin.targets.vendor.Vendor.device_archives`: an ocloc archive): prune drops it
    as an entry of that archive (the only members :func:`prune` meets are an ``ar``'s: it refuses a zip)."""
    v = vendor_named(image.vendor)
    steps = image.address.steps
    return v is not None and v.device_archives and bool(steps) and isinstance(steps[-1], Member)


class _Ctx:
    """One prune: the decision on every image, and what the rewrite freed."""

    def __init__(self, sel: Selection, images: Sequence[Image]) -> None:
        self.sel = sel
        self.images = [(i, self._keeps(i)) for i in images if _in_container(i)]
        if sel.ptx == "highest":
            self.images = _with_highest_ptx(self.images, sel)
        gpus = kept_gpus(sel.keep, [i for i, k in self.images if k])
        self.images, self.fallback = protect(self.images, gpus, ptx=sel.ptx,
                                             named_drop=lambda i: i.arch in (sel.drop or ())
                                             or (sel.spirv == "none" and i.kind == SPIRV))
        self.kept = {i.address: k for i, k in self.images}
        self.freed = 0
        self.notes: list[str] = []
        #: The input when it is a mapped file (:class:`devbin.binary.mapped.Mapped`): a linked file is then
        #: rewritten in a copy-on-write map of it and written out to another (:func:`_prune_elf`).
        self.mapped: Mapped | None = None

    def _keeps(self, image: Image) -> bool:
        # An entry its format always keeps (a bundle's host entry) stays; an image without an arch too
        # (Selection.keeps).
        fmt = C.format_named(image.container)
        always = fmt is not None and fmt.always_kept(image)
        untouched = bool(self.sel.images) and str(image.address) not in self.sel.images
        if always or untouched:
            return True
        if image.kind == SPIRV:
            return self.sel.spirv != "none"
        return self.sel.keeps(image.arch)

    def keeps(self, address: Address) -> bool:
        """The decision on the image at ``address``; True for entries no image was reported for
        (a bundle's empty host entry)."""
        return self.kept.get(address, True)

    def at(self, base: Address) -> list[Image]:
        """The images of containers directly in the file (or section) ``base``: its address plus one entry step."""
        n = len(base.steps)
        return [i for i, _ in self.images if i.address.path == base.path and len(i.address.steps) == n + 1
                and i.address.steps[:n] == base.steps and isinstance(i.address.steps[n], Entry)]

    def dropped_under(self, base: Address) -> bool:
        """Whether any image under ``base`` (a file, member, section) goes."""
        n = len(base.steps)
        return any(not k and i.address.path == base.path and i.address.steps[:n] == base.steps
                   for i, k in self.images)


def _with_highest_ptx(images: list[tuple[Image, bool]], sel: Selection) -> list[tuple[Image, bool]]:
    """``images`` with, in each container, the PTX of the highest virtual arch that a newer GPU could JIT
    (:func:`devbin.packaging.ptx.jit_ptx`) kept too: ``--ptx highest``.  Images ``sel.images`` leaves
    untouched are not candidates."""
    best: dict[object, Image] = {}
    for image, _ in images:
        if sel.images and str(image.address) not in sel.images:
            continue
        if not jit_ptx([image]):
            continue
        key = (image.address.path, image.address.steps[:-1], getattr(image.address.steps[-1], "container", None))
        a, b = parse_sm(image.arch), best.get(key)
        if a is not None and (b is None or a[0] > _sm_key(b.arch)[0]):
            best[key] = image
    top = {i.address for i in best.values()}
    return [(i, k or i.address in top) for i, k in images]


# --------------------------------------------------------------------------- entry points


def prune(data: Buffer | Mapped, *, keep: str | Iterable[str] | None = None,
          drop: str | Iterable[str] | None = None, where: str = "input", images: Iterable[str] = (),
          at: Address | None = None, require_match: bool = True, ptx: str = "kept", spirv: str = "kept",
          max_segments: int | None = None) -> PruneResult:
    """Prune ``data`` (any format in the module docstring) to the selected architectures.

    ``keep``/``drop``: names or comma-separated lists; exactly one.  Raises
    :class:`~devbin.errors.UsageError` for a selection that leaves no device image or a
    file that cannot be pruned, :class:`~devbin.errors.FormatError` for corrupt input
    (anything the scan warns about).  ``where`` starts the images' addresses.  ``images``: when
    given, the addresses (docs/IMAGES.md) of the only images the selection applies to; every
    other image stays.  ``at``: the file's address when it is a member of something (a wheel's
    ``pkg.whl!lib/libx.so``), which then starts the images' addresses instead of ``where``.
    ``require_match``: a name of ``keep`` that matches no image is an error (False: a note; a package's
    libraries, whose names are checked against the package).  ``ptx``: the PTX policy
    (:data:`PRUNE_IR_POLICIES`; the module docstring); ``spirv`` the SPIR-V policy (the same words: ``none``
    drops SPIR-V modules, the others keep them).  ``max_segments``: the most program headers a linked
    file may have once its freed pages are cut (None: :data:`devbin.formats.elf.pages.MAX_SEGMENTS`; each
    range cut adds one; past it the smaller ranges stay as zeros, docs/PRUNE.md).

    ``data`` may be a :class:`devbin.binary.mapped.Mapped` file: a linked ELF file is then rewritten in a
    copy-on-write map of it (only the pages written cost memory) and the result written to a new mapped
    file, whose map is :attr:`PruneResult.data` (the same bytes as for the file's bytes given whole).
    """
    start = at if at is not None else Address(where)
    where = str(start)
    sel = Selection(keep=None if keep is None else parse_arch_list(keep),
                    drop=None if drop is None else parse_arch_list(drop), images=tuple(images), ptx=ptx,
                    spirv=spirv, max_segments=max_segments)
    mapped: Mapped | None = None
    raw: Buffer
    if isinstance(data, Mapped):
        mapped, raw = data, data.data
    else:
        raw = data
    view = ByteView(raw, where=where)
    _check_prunable(view, where)
    report = ScanReport()
    found = [image for image, _ in Scanner(report, all=True).buffer(raw, Frame(start))]
    if report.warnings:
        raise FormatError(f"cannot prune a file the scan finds damaged: {report.warnings[0]}", fmt="prune",
                          where=where)
    ctx = _Ctx(sel, found)
    ctx.mapped = mapped
    pruned = _prune_any(view, ctx, start, depth=0)
    out, spilled = (b"", pruned) if isinstance(pruned, Mapped) else (pruned, None)
    device = [i for i, _ in ctx.images if i.arch]
    if not ctx.images:
        raise UsageError(f"{where}: no device image found; nothing to prune")
    if device and not any(ctx.kept[i.address] for i in device):
        raise UsageError(f"{where}: the selection {','.join(sel.names)} leaves no device image "
                         f"(architectures present: {', '.join(sorted({short(i.arch) for i in device}))})")
    if sel.keep is not None:
        unmatched = [name for name in sel.keep if not any(prune_name_matches(name, i.arch) for i in device)]
        if unmatched and require_match:
            kinds = Counter(i.kind for i, _ in ctx.images)
            held = ", ".join(sorted({short(i.arch) for i in device})) or "no image of an architecture (" + ", ".join(
                f"{n:,} {kind}" for kind, n in sorted(kinds.items())) + ")"
            raise UsageError(f"{where}: keep {','.join(unmatched)} matches no image; the file holds {held}")
        ctx.notes.extend(f"{name} matches no image in {where}" for name in unmatched)
    lost = _ptx_lost([i for i, _ in ctx.images], [i for i, k in ctx.images if k], sel.ptx)
    if lost:
        ctx.notes.append(f"{where}: {lost}")
    ctx.notes.extend(f"{where}: {n}" for n in _spirv_notes(ctx.images, sel))
    ctx.notes.extend(f"{where}: {n}" for n in ctx.fallback.notes(sel.ptx, sel.spirv))
    return PruneResult(out, len(raw), ctx.images, ctx.freed, ctx.notes, fallback_images=len(ctx.fallback.kept),
                       unloadable_containers=len(ctx.fallback.lost), mapped=spilled,
                       written_size=spilled.size if spilled is not None else None)


def _ptx_lost(before: Sequence[Image], after: Sequence[Image], policy: str = "kept") -> str:
    """The note when ``before`` (a file's images) held PTX a GPU newer than its SASS could JIT
    (:func:`devbin.packaging.ptx.jit_ptx`) and ``after`` (the images kept) holds none; else ``""``.
    Under ``--ptx none`` (an explicit choice) it only says what the choice means; under ``kept`` it names
    what to keep (``highest`` always keeps such PTX)."""
    had, kept = jit_ptx(before), jit_ptx(after)
    if not had or kept:
        return ""
    sass = sorted({i.arch for i in after if i.kind == CUBIN and i.arch}, key=_sm_key)
    top = sass[-1] if sass else "the kept SASS"
    lost = sorted({i.arch for i in had}, key=_sm_key)
    if policy == "none":
        return (f"--ptx none: no PTX kept (the input had {', '.join(lost)} PTX); GPUs newer than {top} "
                "cannot run the result")
    return (f"the result keeps no PTX: GPUs newer than {top} cannot JIT it (the input had "
            f"{', '.join(lost)} PTX); to keep it, keep {','.join([*sass, lost[-1]])} or pass --ptx highest")


def _spirv_notes(images: Sequence[tuple[Image, bool]], sel: Selection) -> list[str]:
    """Under ``--spirv none``: the note when the input held SPIR-V and the result keeps none (the devices
    of no kept code object cannot run it any more: SPIR-V was their JIT fallback), or the note on SPIR-V
    that stays because its container always keeps it.  Nothing under the other policies (they keep it)."""
    if sel.spirv != "none":
        return []
    had = [i for i, _ in images if i.kind == SPIRV]
    left = [i for i, k in images if k and i.kind == SPIRV]
    if not had:
        return []
    if left:
        labels = sorted({f.label for i in left if (f := C.format_named(i.container)) is not None})
        return [f"--spirv none: {len(left):,} SPIR-V image(s) of {len(had):,} stay: each is the whole image "
                f"of a container prune keeps whole ({', '.join(labels)}: its host-side descriptor names it)"]
    kept = sorted({i.arch for i, k in images if k and i.arch})
    return [f"--spirv none: no SPIR-V kept (the input had {len(had):,} SPIR-V module(s)); devices other than "
            f"{', '.join(kept) or 'the kept ones'} cannot run the result (SPIR-V was their JIT fallback)"]


def _sm_key(arch: str) -> tuple[int, str]:
    a = parse_sm(arch)
    return (a[0], arch) if a is not None else (0, arch)


def prune_file(src: str | os.PathLike[str], dst: str | os.PathLike[str] | None, *,
               keep: str | Iterable[str] | None = None, drop: str | Iterable[str] | None = None,
               in_place: bool = False, backup: str | os.PathLike[str] | None = None,
               images: Iterable[str] = (), require_match: bool = True, ptx: str = "kept", spirv: str = "kept",
               max_segments: int | None = None) -> PruneResult:
    """Prune the file ``src`` into ``dst`` (None: compute only, write nothing; ``require_match``, ``ptx``,
    ``spirv`` and ``max_segments``: :func:`prune`'s).

    ``dst`` may not be ``src`` (nor another name of it: a symbolic or hard link) unless
    ``in_place``.  The output is written whole or not at all, with ``src``'s permission bits
    (:func:`devbin.binary.output.write_file`: a new file in ``dst``'s folder renamed over it);
    ``backup``: where ``dst``'s previous content is kept (for an in-place prune, the input), unless
    a file is there already: it is the first original, left as it was (a note says so).  An
    in-place prune holds ``src``'s lock (:mod:`devbin.binary.lock`) from before it reads ``src``
    until the rename: a second one stops at once with :class:`~devbin.binary.lock.Busy`.  With ``dst``, ``src`` is
    copied into an unnamed temporary file and pruned mapped from there (:mod:`devbin.binary.mapped`: a linked
    library is rewritten copy-on-write and written out to another such file, never held whole while it is
    pruned; its bytes are read back into ``data`` once written).
    """
    src_p = Path(src)
    inputs = () if in_place else (src_p,)
    if dst is not None:
        try:
            check_destination(dst, inputs)
        except InputClash as e:
            raise InputClash(f"{e.message}, or prune in place (in_place=True)", where=e.where) from None
    with exclusive(src_p, "pruning") if in_place and dst is not None else contextlib.nullcontext():
        if dst is None:
            return prune(src_p.read_bytes(), keep=keep, drop=drop, where=str(src), images=images,
                         require_match=require_match, ptx=ptx, spirv=spirv, max_segments=max_segments)
        try:
            source: Mapped | bytes = copy_of(src_p)  # pruned mapped: a linked library is never held whole
        except OSError:  # no room for the temporary copy (a full disk, a file-size limit): in memory
            source = src_p.read_bytes()
        try:
            result = prune(source, keep=keep, drop=drop, where=str(src), images=images,
                           require_match=require_match, ptx=ptx, spirv=spirv, max_segments=max_segments)
        finally:
            if isinstance(source, Mapped):
                source.close()
        if backup is not None and os.path.lexists(backup):
            result.notes.append(kept_already(dst, backup))
            backup = None
        out = result.mapped
        if out is None:
            write_file(dst, result.data, inputs=inputs, mode=src_p.stat().st_mode & 0o777, backup=backup)
            return result
        try:
            write_file(dst, memoryview(out.data), inputs=inputs, mode=src_p.stat().st_mode & 0o777, backup=backup)
            out.release()
            out.file.seek(0)
            data = out.file.read()  # read, not from the map: the bytes once, when nothing else is held
        finally:
            out.close()
    return replace(result, data=data, mapped=None, written_size=None)


def kept_already(path: str | os.PathLike[str], backup: str | os.PathLike[str]) -> str:
    """The note of an in-place rewrite whose backup exists: it holds the first original, and stays."""
    return (f"{os.fspath(path)}: the original is already kept as {os.fspath(backup)} "
            "(by an earlier in-place prune); left as it was")


# --------------------------------------------------------------------------- dispatch


def _check_prunable(view: ByteView, where: str) -> None:
    """UsageError for a file prune cannot rewrite, before anything is scanned."""
    if M.detect(view) == M.AR_THIN:
        raise UsageError(f"{where}: a thin archive holds no member data; prune the member files instead")
    fmt = C.format_of(view)
    if fmt is None or (fmt.rewrite is None and fmt not in _HOLDERS):
        raise UsageError(f"{where}: not a fatbin, OffloadBinary, offload bundle, ELF file or ar archive")
    if fmt is C.ELF:
        h = ElfFile(view, where=where).header
        if vendor_for_machine(h.e_machine) is not None:
            raise UsageError(f"{where}: a bare device ELF holds one architecture; there is nothing to prune in it")


def _prune_any(view: ByteView, ctx: _Ctx, at: Address, depth: int) -> bytes | Mapped:
    """``view``, the file at address ``at``, with the dropped images left out: a container rewritten by its
    format (:mod:`devbin.images.containers`), or a file that holds files (ELF, ``ar``, wrapped) by its
    prune here."""
    where = str(at)
    if depth > _MAX_DEPTH:
        raise UsageError(f"{where}: nested more than {_MAX_DEPTH} containers deep")
    fmt = C.format_of(view)
    holder = _HOLDERS.get(fmt) if fmt is not None else None
    if holder is not None:
        return holder(view, ctx, at, depth)
    if fmt is not None and fmt.rewrite is not None:
        pieces = _pieces(view, 0, ctx, at)
        if all(len(new) == size for _, size, new in pieces):
            return bytes(view.bytes_at(0, len(view)))
        ctx.freed += sum(size - len(new) for _, size, new in pieces)
        out, _ = _pack(pieces, len(view), fmt.bare_align, where)
        return out
    raise UsageError(f"{where}: not a fatbin, OffloadBinary, offload bundle, ELF file or ar archive")


def _inner(pruned: bytes | Mapped) -> bytes:
    """A file inside another, pruned: always bytes (only the outermost file is written to a mapped one)."""
    assert isinstance(pruned, bytes)
    return pruned


def _prune_wrapped(view: ByteView, ctx: _Ctx, at: Address, depth: int) -> bytes:
    """A wrapped image holds one image: nothing to prune, unless that image is itself a container
    (a fatbin, OffloadBinary or bundle), which is pruned and wrapped again with the same metadata."""
    where = str(at)
    w = parse_wrapped(view, where=where)
    inner = ByteView(w.image, where=where)
    fmt = C.format_of(inner)
    if fmt is None or fmt.rewrite is None:
        target = w.get("TargetID") or w.get("arch") or "one architecture"
        raise UsageError(f"{where}: a wrapped image holds one device image ({target}); there is nothing to prune "
                         "in it (to keep or drop it, keep or drop the file)")
    pruned = _inner(_prune_any(inner, ctx, at, depth + 1))  # the scan addresses what it holds as the file itself
    if pruned == bytes(w.image):
        return bytes(view.bytes_at(0, len(view)))
    return write_wrapped(pruned, w.metadata, flags=w.flags)


# --------------------------------------------------------------------------- containers
#
# A piece is (old offset, old size, new bytes) of one container in a view (a bare file or a section).


_Piece = tuple[int, int, bytes]


def _pieces(view: ByteView, base: int, ctx: _Ctx, at: Address, *, shared_name: bool = False) -> list[_Piece]:
    """Each container the images at ``at`` (a file, or a section at file offset ``base``, whose bytes
    ``view`` holds) lie in, rewritten with the kept entries, in offset order.  Bytes between them
    that are not zero (a fatbin emptied earlier, which gives no image) stay as pieces of their own.
    ``shared_name``: other sections have the section's name (the pieces of a section an earlier prune cut
    pages from: devbin.formats.elf.pages), so only the images inside ``view`` are its own."""
    found: dict[int, tuple[int, Image]] = {}  # container number -> (offset in view, an image of it)
    for image in ctx.at(at):
        if shared_name and not 0 <= image.offset - base < len(view):
            continue
        step = image.address.steps[-1]
        assert isinstance(step, Entry)
        found.setdefault(step.container, (image.offset - base, image))
    pieces: list[_Piece] = []
    for number, (off, image) in sorted(found.items(), key=lambda kv: kv[1][0]):
        if not 0 <= off < len(view):
            raise FormatError(f"{at}#{number}: container offset {off:#x} outside the data", fmt="prune",
                              where=str(at))
        fmt = C.format_named(image.container)
        assert fmt is not None and fmt.rewrite is not None  # ctx.images are entries of such containers only
        size, new = fmt.rewrite(view.sub(off, len(view) - off), _entry_keeps(ctx, at, number), f"{at}#{number}")
        pieces.append((off, size, new))
    return _with_gaps(view, pieces)


def _entry_keeps(ctx: _Ctx, at: Address, number: int) -> Callable[[int], bool]:
    return lambda entry: ctx.keeps(at.child(Entry(number, entry)))


def _with_gaps(view: ByteView, pieces: list[_Piece]) -> list[_Piece]:
    out: list[_Piece] = []
    pos = 0
    for off, size, new in pieces:
        if off < pos:
            raise FormatError(f"containers overlap at offset {off:#x}", fmt="prune", where=view.where)
        if off > pos and any(view.bytes_at(pos, off - pos)):
            out.append((pos, off - pos, bytes(view.bytes_at(pos, off - pos))))
        out.append((off, size, new))
        pos = off + size
    return out


def _pack(pieces: list[_Piece], old_len: int, align: int, where: str) -> tuple[bytes, dict[int, int]]:
    """Pieces back to back at ``align``; the offset map old -> new of every piece boundary and the end.

    Bytes after the last piece (zero padding) are dropped unless nothing changed; an unchanged
    run gives the original length back (the caller keeps the original bytes then).
    """
    em = Emitter()
    omap: dict[int, int] = {}
    for old_off, old_size, new in pieces:
        em.pad_to(align_up(len(em), align), "container")
        omap[old_off] = len(em)
        em.write(new)
        omap[old_off + old_size] = len(em)
    end_old = max((o + s for o, s, _ in pieces), default=0)
    if old_len > end_old:
        # trailing padding: keep the same amount of tail, so an untouched section keeps its size
        em.pad_to(len(em) + (old_len - end_old), "tail padding")
    omap[old_len] = len(em)
    return em.getvalue(), omap


# --------------------------------------------------------------------------- ELF


def _packed_section(sec: Section) -> int | None:
    """The alignment containers are packed at when ``sec`` of a relocatable object is rewritten
    whole (a section that holds nothing but containers: one a format owns), or None: pruned in place."""
    owner = C.owner_of_section(sec)
    return owner.section_align if owner is not None else None


def _prune_elf(view: ByteView, ctx: _Ctx, at: Address, depth: int) -> bytes | Mapped:
    where = str(at)
    elf = ElfFile(view)
    h = elf.header  # a bare device ELF has no image in a container: _check_prunable refused it, no member gets here
    relocatable = h.e_type == EC.ET_REL and not elf.segments
    if not relocatable and h.e_type not in (EC.ET_DYN, EC.ET_EXEC):
        raise UsageError(f"{where}: ELF type {EC.ET_NAMES.get(h.e_type, h.e_type)} cannot be pruned")
    if not ctx.dropped_under(at):
        return bytes(view.bytes_at(0, len(view))) if not relocatable else _rewrite_relocatable(elf, {}, [])
    # The file as a whole, rewritten: a copy, or for a mapped linked file a copy-on-write map of it (what a
    # container's rewrite frees then stays as it was there, and is zero in the output: _cut_pages).
    cow = ctx.mapped is not None and depth == 0 and not relocatable
    patched: Rewritable = ctx.mapped.private() if ctx.mapped is not None and cow else bytearray(
        view.bytes_at(0, len(view)))
    in_place: list[str] = []
    compacted: list[str] = []
    pieces: list[_Piece] = []
    repacked: dict[int, tuple[bytes, dict[int, int]]] = {}
    removed: list[int] = []
    free: list[tuple[int, int]] = []
    names = Counter(sec.name for sec in elf.sections if sec.file_size)  # a name a page cut split shares pieces
    for sec in elf.sections:
        if not sec.file_size:
            continue
        sec_at = at.child(SectionStep(sec.name))
        if not ctx.dropped_under(sec_at):
            continue
        owner = C.owner_of_section(sec)
        if owner is not None and owner.prune_section is not None:  # the host side describes its images
            if relocatable:
                raise UsageError(f"{where}: the {owner.label}s of {sec.name} in a relocatable object cannot be "
                                 "pruned; prune the linked file")
            freed, ranges = owner.prune_section(elf, patched, sec, sec_at, ctx.dropped_under)
            ctx.freed += freed
            free += ranges
            compacted.append(sec.name)
            continue
        whole = [i for i, _ in ctx.images if i.address == sec_at]  # an object-type bundle's entry section
        if whole:
            if not relocatable:
                raise UsageError(f"{where}: cannot remove {sec.name!r} from a linked file")
            removed.append(sec.index)
            ctx.freed += sec.file_size
            continue
        view_s = sec.view.sub(0, sec.file_size)
        pieces = _pieces(view_s, sec.sh_offset, ctx, sec_at, shared_name=names[sec.name] > 1)
        if all(len(new) == size for _, size, new in pieces):
            continue
        ctx.freed += sum(size - len(new) for _, size, new in pieces)
        align = _packed_section(sec)
        if relocatable and align is not None:
            repacked[sec.index] = _pack(pieces, sec.file_size, align, where)
        else:
            formats = [f for i in ctx.at(sec_at) if (f := C.format_named(i.container)) is not None]
            movable = all(f.host_wrappers for f in formats)  # wrappers point at them: they can move
            stops = next((f for f in formats if f.gap_ends_walk), None)  # a reader stops at a zero gap
            if not relocatable and align is None and movable:
                free += _compact_data(patched, elf, sec, pieces, ctx, where, cow)
                compacted.append(sec.name)
                continue
            if not relocatable and align is not None and movable:
                tail, reason = _compact_linked(patched, elf, sec, pieces, align, ctx, where, (0, sec.file_size), cow)
                if tail is not None:
                    free += _tail_only(sec, tail, ctx, where)
                    compacted.append(sec.name)
                    continue
                ctx.notes.append(f"{where}: the containers of {sec.name} stay where they are ({reason}); each is "
                                 "compacted at its own start")
            _in_place(patched, sec, pieces, stops, where)
            if not relocatable and align is not None:
                free += _tail_only(sec, _freed(patched, sec, pieces), ctx, where)
                compacted.append(sec.name)
            else:
                in_place.append(sec.name)
    if in_place:
        what = "linked file" if not relocatable else "data sections"
        ctx.notes.append(f"{where}: {what}: containers in {', '.join(in_place)} pruned in place and zero-filled; "
                         "their sections keep their size")
    pieces = []  # the last section's rewritten containers: written into ``patched`` already
    if not relocatable:
        return _cut_pages(patched, free, ctx, at, compacted, cow)
    if in_place:
        elf = ElfFile(ByteView(bytes(patched), where=where))
    return _rewrite_relocatable(elf, repacked, removed)


def _rewrite_relocatable(elf: ElfFile, repacked: dict[int, tuple[bytes, dict[int, int]]],
                         removed: Sequence[int]) -> bytes:
    """A relocatable object laid out compactly (ElfEditor rule 6), with sections given new contents
    (``repacked``: index -> (bytes, old -> new offsets)) and sections ``removed``."""
    editor = ElfEditor(elf)
    editor.compact_relocatable()
    for index, (data, omap) in repacked.items():
        editor.replace_relocatable_section(index, data, omap)
    for index in removed:
        editor.remove_section(index)
    return editor.write()


def _compact_linked(buf: Rewritable, elf: ElfFile, sec: Section, pieces: list[_Piece], align: int,
                    ctx: _Ctx, where: str, span: tuple[int, int],
                    cow: bool = False) -> tuple[list[tuple[int, int]] | None, str]:
    """Pack the pruned containers ``pieces`` of ``sec`` (a linked file's ``.nv_fatbin``/``.hip_fatbin``: the
    whole section; a data section: one run of adjacent containers) towards the start of ``span`` (the
    section offsets they may be rewritten in) and move the wrappers and relocations that point at them
    (:func:`devbin.packaging.wrapper_refs.retarget`); a container no wrapper points at stays where it
    is (something else may address it).  The freed file ranges (before such a container, and the
    tail) and "", or None (nothing written) and the reason when a reference cannot be moved.  ``cow``: ``buf`` is a
    copy-on-write map, whose freed tail is left as it was (the caller zero-fills the freed ranges it writes
    out) rather than every page of it written."""
    lo, hi = span
    whole = span == (0, sec.file_size)
    limit = None if whole else span
    base = 0 if whole else sec.sh_addr  # a section's containers align to its start; a run's, to addresses
    reason, reached = retarget(elf, buf, sec, {off: off for off, _, _ in pieces}, write=False, span=limit)
    moves: dict[int, int] = {}
    out = bytearray()
    free: list[tuple[int, int]] = []
    for off, _size, new in pieces:
        pos = lo + len(out)
        at = align_up(base + pos, align) - base if off in reached else off
        if off not in reached and off > pos:
            free.append((sec.sh_offset + pos, sec.sh_offset + off))
        out += bytes(at - pos)
        out += new
        moves[off] = at
    if reason is None:
        reason, _ = retarget(elf, buf, sec, moves, span=limit)
    if reason is not None:
        return None, reason
    if lo + len(out) < hi:
        free.append((sec.sh_offset + lo + len(out), sec.sh_offset + hi))
    at = sec.sh_offset + lo
    buf[at:at + len(out)] = out
    if not cow:
        _zero(buf, at + len(out), sec.sh_offset + hi)
    pinned = sum(1 for off, _, _ in pieces if off not in reached)
    if pinned and whole:
        ctx.notes.append(f"{where}: {pinned} container(s) of {sec.name} that no wrapper points at stay at "
                         "their offsets")
    return free, ""


def _compact_data(buf: Rewritable, elf: ElfFile, sec: Section, pieces: list[_Piece], ctx: _Ctx,
                  where: str, cow: bool = False) -> list[tuple[int, int]]:
    """The containers of a data section of a linked file (``.rodata``, ``.data``, ``.ldata`` ...), which
    also holds other data: every file range their dropped images freed, to be cut out.

    A run of containers that lie back to back (each at the next 8-aligned address after the one before,
    so nothing else lies between them) is packed towards the run's start when wrappers point at its
    containers (:func:`_compact_linked`, ``retarget`` limited to the run), as in ``.nv_fatbin``; every
    other container stays at its offset, compacted at its own start (code may address it: a library that
    loads its fatbins itself reaches them through ``movabs $sym@GOTOFF`` immediates, which leave no
    relocation).  Only a container's own dropped bytes are freed, never the bytes between containers
    (they may be other data that happens to be zero)."""
    free: list[tuple[int, int]] = []
    reasons: list[str] = []
    wrapped = any(s.name in WRAPPER_SECTIONS and s.file_size for s in elf.sections)
    for run in _runs(sec, pieces) if wrapped else [[p] for p in pieces]:
        if len(run) > 1:
            span = (run[0][0], run[-1][0] + run[-1][1])
            got, reason = _compact_linked(buf, elf, sec, run, 8, ctx, where, span, cow)
            if got is not None:
                free += got
                continue
            reasons.append(reason)
        _in_place(buf, sec, run, None, where)
        free += [(sec.sh_offset + off + len(new), sec.sh_offset + off + size) for off, size, new in run
                 if len(new) < size]
    if reasons:
        ctx.notes.append(f"{where}: {len(reasons)} run(s) of containers of {sec.name} stay where they are "
                         f"({reasons[0]}); each container is compacted at its own start")
    return free


def _runs(sec: Section, pieces: list[_Piece]) -> list[list[_Piece]]:
    """``pieces`` in runs of containers that lie back to back: each at the next 8-aligned address after the end
    of the one before (the bytes between are alignment padding)."""
    runs: list[list[_Piece]] = []
    for piece in pieces:
        if runs:
            off, size, _ = runs[-1][-1]
            if piece[0] == align_up(sec.sh_addr + off + size, 8) - sec.sh_addr:
                runs[-1].append(piece)
                continue
        runs.append([piece])
    return runs


def _tail_only(sec: Section, free: list[tuple[int, int]], ctx: _Ctx, where: str) -> list[tuple[int, int]]:
    """Of the freed ranges of ``sec``, the one that ends the section: cutting pages anywhere else would split
    the section in pieces of the same name, and cuobjdump and clang-offload-bundler read only the first.
    The others stay as zeros (said in a note)."""
    end = sec.sh_offset + sec.file_size
    tail = [r for r in free if r[1] == end]
    left = sum(hi - lo for lo, hi in free if (lo, hi) not in tail)
    if left:
        ctx.notes.append(f"{where}: {left} freed bytes between containers of {sec.name} that stay in place are "
                         "zero-filled, not cut out (the section stays whole for the vendors' tools)")
    return tail


def _freed(buf: Rewritable, sec: Section, pieces: list[_Piece]) -> list[tuple[int, int]]:
    """The file ranges a container pruned in place no longer uses: from the end of its new bytes to the
    next piece (the bytes between pieces are zero), or to the section's end when all zero to there."""
    out = []
    end = sec.sh_offset + sec.file_size
    for i, (off, _size, new) in enumerate(pieces):
        lo = sec.sh_offset + off + len(new)
        if i + 1 < len(pieces):
            hi = sec.sh_offset + pieces[i + 1][0]
        else:
            hi = sec.sh_offset + off + _size
            if not any(buf[hi:end]):
                hi = end
        if hi > lo:
            out.append((lo, hi))
    return out


def _cut_pages(patched: Rewritable, free: list[tuple[int, int]], ctx: _Ctx, at: Address,
               sections: list[str], cow: bool = False) -> bytes | Mapped:
    """A linked file whose containers were pruned in place, with the whole free pages removed
    (:func:`devbin.formats.elf.pages.remove_pages`), checked: the kept images are the original's, byte for byte.
    ``cow``: ``patched`` is a copy-on-write map of the mapped input whose ``free`` bytes are not zeroed yet
    (remove_pages writes them as zeros), and the file is written out to a new mapped file, its map returned."""
    where = str(at)
    if not sections:
        return _written([memoryview(patched)], cow)
    cut = remove_pages(ElfFile(ByteView(patched, where=where)), free, max_segments=ctx.sel.max_segments,
                       zero_free=cow)
    data = _written(cut.parts, cow)
    cut.parts = []
    _check_kept(ctx, data.data if isinstance(data, Mapped) else data, at)
    freed = sum(hi - lo for lo, hi in free)
    ctx.notes.append(f"{where}: {cut.bytes_removed:,} of the {freed:,} bytes freed in {', '.join(sections)} cut out "
                     f"of the file ({cut.bytes_removed // cut.page} whole pages of {cut.page:,}); the rest stays as "
                     "zeros (a page can only go whole: the loader maps the file by pages)")
    ctx.notes.extend(f"{where}: {n}" for n in cut.notes)
    return data


def _written(parts: list[memoryview], spill: bool) -> bytes | Mapped:
    """The file ``parts`` lay out end to end: joined, or (``spill``) written to a new mapped file
    (devbin.binary.mapped)."""
    if not spill:
        return b"".join(parts)
    out = Mapped()
    try:
        for part in parts:
            out.write(part)
        return out.map()
    except OSError:  # no room for it (a full disk, a file-size limit): in memory, as without a mapped input
        out.close()
        return b"".join(parts)
    except BaseException:
        out.close()
        raise


def _zero(buf: Rewritable, lo: int, hi: int) -> None:
    """Zero ``buf[lo:hi]`` a piece at a time (no zero buffer of the whole range made)."""
    zeros = bytes(min(max(hi - lo, 0), 1 << 20))
    for at in range(lo, hi, len(zeros) or 1):
        n = min(len(zeros), hi - at)
        buf[at:at + n] = zeros[:n]


def _kept_as(i: Image) -> tuple[object, ...]:
    """What :func:`_check_kept` compares of the image ``i``: its kind, architecture and the sha256 of its bytes;
    for a fatbin entry stored compressed (zstd, lz4), the sha256 of its stored payload with the compression
    and the decompressed size its header records, instead of its decompressed bytes.

    Decoding is a function of exactly those (:meth:`devbin.formats.fatbin.reader.FatbinEntry.image_view`), so
    two entries equal in them decode to the same bytes: the check still proves the kept images are the
    original's, byte for byte, without decompressing each one twice (once in the input, once in the output;
    ~1 s of a framework wheel's prune).  It is stricter where prune would store a kept entry otherwise
    (recompressed, or stored plain): then it fails, as an unexpected change should.  It no longer decodes a
    kept compressed entry, so a payload that was already undecodable in the input is carried over, as every
    other byte prune does not touch is."""
    entry = i.entry
    if entry is not None and entry.is_compressed and not entry.is_opaque:
        return (i.kind, i.arch, entry.compression, entry.uncompressed_size, i.size,
                hashlib.sha256(entry.raw_payload).digest())
    return i.kind, i.arch, hashlib.sha256(i.data()).digest()


def _check_kept(ctx: _Ctx, data: Buffer, at: Address) -> None:
    """FormatError unless scanning ``data`` finds exactly the kept images of the file at ``at``, byte for byte
    and in order (compared as :func:`_kept_as` says)."""
    where, n = str(at), len(at.steps)
    want = [_kept_as(i) for i, k in ctx.images
            if k and i.address.path == at.path and i.address.steps[:n] == at.steps]
    if ctx.mapped is not None:
        ctx.mapped.release()  # the input's pages read so far: given back (read again from the page cache if needed)
    report = ScanReport()
    got = [_kept_as(i) for i in scan_bytes(data, where, all=True, report=report) if _in_container(i)]
    release(data)
    if report.warnings or got != want:
        problem = report.warnings[0] if report.warnings else "the kept images differ from the original's"
        raise FormatError(f"the pruned file fails its check ({problem}); nothing written", fmt="prune", where=where)


def _in_place(buf: Rewritable, sec: Section, pieces: list[_Piece], stops: C.ContainerFormat | None,
              where: str) -> None:
    """Write each pruned container at its old offset and zero the rest of its old extent; ``stops``: the
    format whose readers stop at zero bytes between containers, when the section holds one."""
    for i, (off, size, new) in enumerate(pieces):
        if len(new) > size:
            raise UsageError(f"{where}: {sec.name}+{off:#x}: the pruned container is larger than the original")
        if not new and stops is not None and i + 1 < len(pieces):
            raise UsageError(f"{where}: {sec.name}+{off:#x}: dropping a whole {stops.label} in place would "
                             "leave a gap that readers stop at")
        at = sec.sh_offset + off
        buf[at:at + size] = new + bytes(size - len(new))


# --------------------------------------------------------------------------- ar


def _prune_archive(view: ByteView, ctx: _Ctx, at: Address, depth: int) -> bytes:
    where = str(at)
    errors: list[DeviceBinaryError] = []
    ar = ArchiveFile(view, where=where, diag=errors.append)
    if errors:
        raise errors[0]
    if ar.flavour not in ("gnu", ""):
        raise UsageError(f"{where}: {ar.flavour} archives cannot be written; only GNU/System V ones")
    n = len(at.steps)
    direct = [(i, k) for i, k in ctx.images if i.address.path == at.path and len(i.address.steps) == n + 1
              and i.address.steps[:n] == at.steps and _device_archive_member(i)]
    if direct and not all(k for _, k in direct):  # a multi-device archive: its vendor writes it without them
        owner = vendor_named(direct[0][0].vendor)
        assert owner is not None  # _device_archive_member
        out = owner.prune_archive(view.bytes_at(0, len(view)), lambda name, k: ctx.keeps(at.child(Member(name, k))),
                                  where)
        if out is None:
            raise UsageError(f"{where}: an archive of {owner.title} code objects that is not one its tools write "
                             "(a symbol table, a member name they do not give); prune its members instead")
        ctx.freed += len(view) - len(out)
        return out
    members: list[ArMember] = []
    changed = False
    for m, n in numbered(ar.files):  # as the scan counts members of one name
        member_at = at.child(Member(m.name, n))
        data = bytes(m.data)
        if ctx.dropped_under(member_at):
            data = _inner(_prune_any(ByteView(data, where=str(member_at)), ctx, member_at, depth + 1))
            changed = True
        members.append(ArMember(m.name, data))
    if not changed:
        return bytes(view.bytes_at(0, len(view)))
    return write_archive(members)


#: The prune of each format that holds files rather than images: an ELF's sections, an archive's members,
#: a wrapped image's one container.
_HOLDERS: dict[C.ContainerFormat, Callable[[ByteView, _Ctx, Address, int], bytes | Mapped]] = {
    C.ELF: _prune_elf, C.AR: _prune_archive, C.WRAPPED: _prune_wrapped}
