"""What ``devbin inspect`` reports about a file, as plain data (docs/JSON.md, ``devbin schema inspect``).

:func:`inspect_report` is ``devbin inspect --json``'s document; :func:`inspect_elf` the report of one
ELF.  :func:`container_images` is the one policy of which images of a file ``inspect`` and
``callgraph`` read: a code object (a cubin, an AMDGPU code object, any ELF with devbin sections) as it
is, or every code object of a container (the images of a CUDA fatbin inside an OffloadBinary
included).  One function gathers the facts; the CLI prints them as text or JSON, so both always agree.
Keys keep a stable order; integers stay integers; every enum has its name beside its raw value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from devbin.errors import DeviceBinaryError
from devbin.formats.elf.describe import describe
from devbin.formats.elf.reader import ElfFile
from devbin.importers import DEVBIN_SECTIONS, has_model, model_and_source
from devbin.model import CodeObject
from devbin.targets.registry import VENDORS, object_kinds, vendor_for_machine
from devbin.targets.vendor import Vendor

if TYPE_CHECKING:
    from devbin.formats.elf.reader import Diag
    from devbin.formats.spirv import SpirvModule
    from devbin.images import Image

__all__ = ["FileImagesReport", "Images", "InspectReport", "Inspected", "Skipped", "code_object_dict",
           "container_images", "inspect_elf", "inspect_report", "inspected", "no_device_code_in", "open_image",
           "single_keys", "skipped_images"]


def code_object_dict(obj: CodeObject) -> dict[str, Any]:
    """``obj.to_dict()`` plus each kernel's decoded parameter layout (``params``)."""
    d = obj.to_dict()
    for f, fd in zip(obj.functions, d["functions"], strict=True):
        try:
            params = f.params()
        except DeviceBinaryError as e:
            fd["params_error"] = str(e)
            continue
        if params is not None:
            fd["params"] = [p.to_dict() for p in params]
    return d


def inspect_elf(elf: ElfFile, *, file: str = "", warnings: list[DeviceBinaryError] | None = None) -> dict[str, Any]:
    """The ELF facts and the decoded devbin sections of ``elf``.

    A devbin section that cannot be decoded is reported under
    ``devbin_error`` (and the rest of the report is still produced): an
    inspector shows what it can.
    """
    out: dict[str, Any] = {"file": file, "format": "elf"}
    out.update(describe(elf))
    out["devbin"] = None
    out["devbin_source"] = None
    out["devbin_error"] = None
    out.update(dict.fromkeys(v.inspect_key for v in VENDORS if v.inspect_key))  # each vendor's own record
    vendor = vendor_for_machine(elf.header.e_machine)
    if vendor is not None and vendor.inspect_key:
        try:
            out[vendor.inspect_key] = vendor.inspect_record(elf)
        except DeviceBinaryError as e:
            out["devbin_error"] = str(e)  # the model may still come from devbin sections
    if has_model(elf):
        problems: list[DeviceBinaryError] = []
        try:
            obj, source = model_and_source(elf, diag=problems.append)
        except DeviceBinaryError as e:
            out["devbin_error"] = out["devbin_error"] or str(e)
            return _done(out, warnings)
        out["devbin"] = code_object_dict(obj)
        out["devbin_source"] = ("devbin sections" if source == DEVBIN_SECTIONS else
                                (vendor or Vendor).imported_from)
        if problems and out["devbin_error"] is None:
            # devbin sections that could not be decoded (the vendor's metadata was read instead), or what the
            # importer went past
            out["devbin_error"] = str(problems[0])
    return _done(out, warnings)


def _done(out: dict[str, Any], warnings: list[DeviceBinaryError] | None) -> dict[str, Any]:
    out["warnings"] = [str(w) for w in (warnings or [])]
    return out


# --------------------------------------------------------------------------- which images (inspect, callgraph)


@dataclass(slots=True)
class Images:
    """The device images of a file: the code objects and the images skipped."""

    file: str
    #: The file is one code object (a cubin, an AMDGPU code object, an ELF with devbin sections), read
    #: as it is; ``image`` is the scan's record of it (None for an ELF no scan names, devbin sections only).
    single: bool = False
    image: Image | None = None
    code_objects: list[Image] = field(default_factory=list)
    skipped: list[Image] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def container_images(path: str) -> Images:
    """The device images in ``path``; ``single`` when ``path`` is to be read as one code object.

    One code object: a device ELF of a known vendor or any ELF with devbin sections
    (:func:`devbin.importers.has_model`).  A broken ELF raises its error.  A file with no device image
    at all (a host ELF, a container with none, a file of no known format) gives an empty
    :class:`Images` (the command exits 3).  Fatbin entries of OffloadBinaries are opened in turn.
    """
    from devbin.entry.elf import open_elf
    from devbin.errors import FormatError
    from devbin.formats.magic import ELF, UNKNOWN, WRAPPED, detect
    from devbin.formats.magic import is_zip as zip_magic
    from devbin.images.frame import Frame
    from devbin.images.scan import Scanner
    from devbin.images.scanreport import ScanReport

    with open(path, "rb") as fh:
        head = fh.read(64)
    kind = detect(head)
    is_zip = zip_magic(head)
    if kind in (ELF, WRAPPED):
        try:
            with open_elf(path) as elf:
                if has_model(elf):
                    mine = [f for f, _ in Scanner(all=True).paths([path]) if str(f.address) == path]
                    return Images(file=path, single=True, image=mine[0] if len(mine) == 1 else None)
        except DeviceBinaryError:
            if kind != WRAPPED:
                raise  # a broken ELF: the error single-file reading gives
    report = ScanReport()
    found = list(Scanner(report, all=True).paths([path]))
    images = Images(file=path, warnings=report.warnings)
    if kind == UNKNOWN and not is_zip and not found:
        return images  # a file of no known format: no device code
    for f, _ in found:
        if f.kind == "fatbin":  # a CUDA fatbin inside an OffloadBinary: its entries are the images
            try:
                inner = [g for g, _ in Scanner(report, all=True).buffer(f.data(), Frame(f.address))]
            except DeviceBinaryError as e:
                report.warn(str(f.address), str(e))
                inner = []
            if inner:
                images.code_objects += [g for g in inner if g.kind in object_kinds()]
                images.skipped += [g for g in inner if g.kind not in object_kinds()]
                continue
        # every vendor's device ELF code object (the registry's descriptors); other kinds are skipped with a note
        (images.code_objects if f.kind in object_kinds() else images.skipped).append(f)
    if not images.code_objects and not images.skipped and report.warnings:
        what = "zip" if is_zip else kind
        raise FormatError(f"no device images found in this {what} file ({report.warnings[0]})", fmt=what, where=path)
    return images


def no_device_code_in(images: Images) -> bool:
    """Whether the file holds no device code at all (the command then exits 3)."""
    return not images.single and not images.code_objects and not images.skipped


def open_image(f: Image, diag: Diag | None = None) -> ElfFile:
    """The ELF of a code object image: the bytes `devbin extract` writes for it."""
    return ElfFile(f.data(), where=str(f.address), diag=diag)


def single_keys(images: Images) -> dict[str, Any]:
    """The image keys of a file read as one code object: the scan's record's, or, for an ELF no scan names
    as a device image (only devbin sections), its path as address, no vendor, kind ``data``."""
    if images.image is not None:
        return images.image.to_dict()
    from devbin.images import Address
    size = os.path.getsize(images.file)
    return {"address": str(Address(images.file)), "vendor": "", "kind": "data", "arch": "", "size": size,
            "stored_size": size, "compression": "none"}


# --------------------------------------------------------------------------- the report


class FileImagesReport(TypedDict):
    """The document of a command that reads each code object of a file (:func:`container_images`): one
    entry per code object read, the images skipped, the warnings (``inspect``, ``callgraph``)."""

    file: str
    images: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    warnings: list[str]


class InspectReport(FileImagesReport):
    """``devbin inspect --json``'s document (less ``schema``): one entry per code object read, each the
    image's keys (:meth:`~devbin.images.Image.to_dict`), its producer ``metadata`` where it has some,
    then :func:`inspect_elf`'s report; the images skipped (not ELF code objects); the warnings."""


@dataclass(frozen=True, slots=True)
class Inspected:
    """One code object read: its scan record (None for a file read as one code object), the producer's
    metadata pairs (None: none to show), its entry of :class:`InspectReport` and :func:`inspect_elf`'s
    report alone (``elf``, what the text shows)."""

    image: Image | None
    metadata: tuple[tuple[str, str], ...] | None
    report: dict[str, Any]
    elf: dict[str, Any]


def inspected(images: Images, errors: list[str]) -> Iterator[Inspected]:
    """Each code object of ``images`` inspected, in order (one decoded at a time); one that cannot be read
    is a message in ``errors`` (:class:`~devbin.errors.LimitExceeded` raises: not the file's fault)."""
    from devbin.binary import budget
    from devbin.entry.elf import open_elf, wrapped_metadata
    from devbin.errors import LimitExceeded
    from devbin.images.containers import producer_metadata
    if images.single:
        warnings: list[DeviceBinaryError] = []
        meta = wrapped_metadata(images.file)
        with open_elf(images.file, diag=warnings.append) as elf:
            r = inspect_elf(elf, file=images.file, warnings=warnings)
        yield Inspected(None, meta, {**single_keys(images), **({"metadata": dict(meta)} if meta is not None else {}),
                                     **r}, r)
    for f in images.code_objects:
        image_warnings: list[DeviceBinaryError] = []
        try:
            with budget.current().unit():  # its decoded image goes before the next one is decoded
                elf = open_image(f, diag=image_warnings.append)
                r = inspect_elf(elf, file=str(f.address), warnings=image_warnings)
                del elf
        except LimitExceeded:
            raise  # over the memory budget: the command fails in one line, the file is not to blame
        except DeviceBinaryError as e:
            errors.append(str(e))
            continue
        pairs = producer_metadata(f)
        yield Inspected(f, pairs or None, {**f.to_dict(), **({"metadata": dict(pairs)} if pairs else {}), **r}, r)


@dataclass(frozen=True, slots=True)
class Skipped:
    """An image that is no ELF code object (PTX, bitcode, SPIR-V); for a SPIR-V module its producer's metadata
    pairs (a SYCL image's wrapper fields and property sets, as a zebin of the same library shows them) and its
    header facts (:class:`devbin.formats.spirv.SpirvModule`; () and None for another kind: shown as before),
    and its entry of the document's ``skipped`` list (the image's keys, ``metadata`` and ``spirv`` where it
    has them)."""

    image: Image
    metadata: tuple[tuple[str, str], ...]
    spirv: SpirvModule | None
    entry: dict[str, Any]


def skipped_images(images: Images, warnings: list[str]) -> list[Skipped]:
    """The facts of each skipped image of ``images``; a SPIR-V module whose header cannot be read is a
    message in ``warnings`` (its image keys and metadata still given; the command does not fail for it)."""
    from devbin.formats.spirv import read_spirv
    from devbin.images.containers import producer_metadata
    from devbin.images.record import SPIRV
    out = []
    for f in images.skipped:
        if f.kind != SPIRV:  # PTX, bitcode ...: the image keys only, as before
            out.append(Skipped(f, (), None, f.to_dict()))
            continue
        pairs = producer_metadata(f)
        module = None
        try:
            module = read_spirv(f.data(), where=str(f.address))
        except DeviceBinaryError as e:
            warnings.append(str(e))
        entry = {**f.to_dict(), **({"metadata": dict(pairs)} if pairs else {}),
                 **({"spirv": module.to_dict()} if module is not None else {})}
        out.append(Skipped(f, pairs, module, entry))
    return out


def inspect_report(path: str, images: Images | None = None) -> InspectReport:
    """``devbin inspect --json``'s document for ``path`` (its :func:`container_images`, or ``images``: a
    selection of them); an empty ``images`` list where the file holds no device code."""
    chosen = container_images(path) if images is None else images
    errors: list[str] = []
    reports = [i.report for i in inspected(chosen, errors)]
    unread: list[str] = []
    skipped = [s.entry for s in skipped_images(chosen, unread)]
    return {"file": path, "images": reports, "skipped": skipped, "warnings": [*chosen.warnings, *errors, *unread]}
