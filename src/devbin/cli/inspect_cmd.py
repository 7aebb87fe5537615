"""Print what a device binary holds: the ELF summary and devbin's device sections.

FILE may be a device code object (a cubin, an AMDGPU code object, any ELF
with devbin sections), printed as it is; or a container of device images:
a CUDA fatbin, an LLVM OffloadBinary (clang-offload-packager output), a
clang offload bundle (binary or compressed), a host object, library or
executable with .nv_fatbin, .llvm.offloading, .hip_fatbin or offload bundle
sections, or an ar archive (also zip/wheel files).  Each code object found
in a container (cubins, AMDGPU code objects; as `devbin list` finds them) is
printed after a header line naming it, exactly as if it had been extracted
and inspected on its own; PTX, bitcode and other images are skipped with a
note.  A devbin wrapped image (`devbin pack --format wrapped`) and images in
an OffloadBinary print their key/value metadata first, one `key: value` per
line, as a plugin's debug log would.

Each image is named by its address (docs/IMAGES.md), as `devbin list`
prints it; every image of the file is read (cuobjdump's -all scope).
--image ADDRESS and --arch ARCH (repeatable) print only those images.
Text by default; --json prints the same facts as JSON (stable key order,
integers as integers, names beside raw values), in one shape for every input
(schema devbin.inspect/1): {"schema", "file": FILE, "images": [{"address",
"vendor", "kind", "arch", "size", "stored_size", "compression", <the ELF
report>}], "skipped": [...], "warnings": [...]}; a single code object is one
entry of "images".  Problems that do not stop the reading (a bad section
name, an undecodable devbin section) are reported as warnings and the rest is
still shown.  Notes and warnings go to stderr.  Exit status 3 (one line on
stderr) when the file holds no device code: a host ELF with no device image,
a file of no known format.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from devbin.cli.common import ImageFilter, add_image_options, file_image_keys, note, warn
from devbin.escape.text import visible

if TYPE_CHECKING:
    from devbin.formats.elf.reader import Diag, ElfFile
    from devbin.images import Image

HELP = ("print the ELF summary and the devbin sections of a code object, or of every code object "
        "in a fatbin, offload bundle or binary, host object or archive")

#: Image kinds that are ELF code objects; every other kind is skipped with a note.
CODE_OBJECT_KINDS = ("cubin", "amdgpu")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="a device code object (cubin, AMDGPU code object, any ELF), or a container "
                                           "of them (fatbin, OffloadBinary, offload bundle, host object/library, ar "
                                           "archive); default: the file of --image")
    add_image_options(p, all=False)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


# --------------------------------------------------------------------------- containers (shared with callgraph)


class Images:
    """The device images of a container file: the code objects and the images skipped.

    A plain class, not a dataclass: ``devbin --help`` imports every command's module, and the
    dataclasses module (with inspect, ast, dis) costs more than the rest of the help."""

    __slots__ = ("code_objects", "file", "image", "single", "skipped", "warnings")

    def __init__(self, file: str, single: bool = False, image: Image | None = None,
                 code_objects: list[Image] | None = None, skipped: list[Image] | None = None,
                 warnings: list[str] | None = None) -> None:
        self.file = file
        #: The file is one code object (a cubin, an AMDGPU code object, an ELF with devbin sections), read
        #: as it is; ``image`` is the scan's record of it (None for an ELF no scan names, devbin sections only).
        self.single = single
        self.image = image
        self.code_objects: list[Image] = [] if code_objects is None else code_objects
        self.skipped: list[Image] = [] if skipped is None else skipped
        self.warnings: list[str] = [] if warnings is None else warnings


def image_label(f: Image) -> str:
    """Where an image is, as `devbin list` gives it: its address."""
    return str(f.address)


def image_header(f: Image) -> str:
    """The line printed before each code object of a container."""
    return visible(f"=== {image_label(f)}: {f.kind} {f.arch or '?'} ===")


def image_dict(f: Image) -> dict[str, Any]:
    """The facts of ``f`` that head its entry in the JSON ``images`` list (the keys every command gives)."""
    return f.to_dict()


def skipped_note(f: Image) -> str:
    return visible(f"{image_label(f)}: skipped {f.kind} image ({f.arch or 'no arch'}): not an ELF code object")


def single_keys(images: Images) -> dict[str, Any]:
    """The image keys of a file read as one code object."""
    import os
    if images.image is not None:
        return images.image.to_dict()
    return file_image_keys(images.file, os.path.getsize(images.file))


def selected_images(args: argparse.Namespace) -> tuple[str, Images | None]:
    """The file ``inspect``/``callgraph`` read (FILE, or the one ``--image`` names) and its images
    after ``--image``/``--arch``; None for the images when the file holds no device code (exit 3)."""
    choose = ImageFilter(args)
    path: str = args.file or choose.paths([])[0]
    found = container_images(path)
    if no_device_code_in(found):
        return path, None
    return path, choose_images(found, choose)


def choose_images(images: Images, choose: ImageFilter) -> Images:
    """``images`` with only what ``--image``/``--arch`` take (a single code object: kept or not);
    BadArguments for an ``--image`` address that names no image of the file."""
    if not choose.active:
        return images
    if images.single:
        taken = images.image is not None and choose(images.image)
        choose.check()
        return Images(file=images.file, single=taken, image=images.image, warnings=images.warnings)
    kept = Images(file=images.file, code_objects=[f for f in images.code_objects if choose(f)],
                  skipped=[f for f in images.skipped if choose(f)], warnings=images.warnings)
    choose.check()
    return kept


def _is_code_object_elf(elf: ElfFile) -> bool:
    from devbin.formats.devsec.elf import devbin_sections
    from devbin.formats.elf import constants as C
    return elf.header.e_machine in (C.EM_CUDA, C.EM_AMDGPU) or bool(devbin_sections(elf))


def container_images(path: str) -> Images:
    """The device images in ``path``; ``single`` when ``path`` is to be read as one code object.

    One code object: a cubin, an AMDGPU code object, any ELF with devbin sections.  A broken ELF
    raises its error.  A file with no device image at all (a host ELF, a container with none, a
    file of no known format) gives an empty :class:`Images` (the command exits 3).  Fatbin entries
    of OffloadBinaries are opened in turn.
    """
    from devbin.entry.elf import open_elf
    from devbin.errors import DeviceBinaryError, FormatError
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
                if _is_code_object_elf(elf):
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
                found_inner = [g for g in inner if g.kind in CODE_OBJECT_KINDS]
                images.code_objects += found_inner
                images.skipped += [g for g in inner if g.kind not in CODE_OBJECT_KINDS]
                continue
        (images.code_objects if f.kind in CODE_OBJECT_KINDS else images.skipped).append(f)
    if not images.code_objects and not images.skipped and report.warnings:
        what = "zip" if is_zip else kind
        raise FormatError(f"no device images found in this {what} file ({report.warnings[0]})", fmt=what, where=path)
    return images


def open_image(f: Image, diag: Diag | None = None) -> ElfFile:
    """The ELF of a code object image: the bytes `devbin extract` writes for it."""
    from devbin.formats.elf.reader import ElfFile
    return ElfFile(f.data(), where=image_label(f), diag=diag)


def write_container_tail(images: Images, errors: list[str]) -> None:
    """The skipped-image notes and warnings of a container, on stderr."""
    for f in images.skipped:
        note(skipped_note(f))
    for w in [*images.warnings, *errors]:
        warn(w)
    if not images.code_objects and not images.single:
        note(f"{images.file}: no ELF code object found")


def no_device_code_in(images: Images) -> bool:
    """Whether the file holds no device code at all (the command then exits 3)."""
    return not images.single and not images.code_objects and not images.skipped


# --------------------------------------------------------------------------- the command


def _wrapped_metadata(path: str) -> tuple[tuple[str, str], ...] | None:
    """The metadata of a devbin wrapped image (its header only is read); None for any other file."""
    from devbin.formats.magic import WRAPPED, detect
    from devbin.formats.wrapped import parse_wrapped
    with open(path, "rb") as f:
        head = f.read(8)
        if detect(head) != WRAPPED:
            return None
        f.seek(0)
        data = f.read()
    return parse_wrapped(data, where=path).metadata


def producer_metadata(f: Image) -> tuple[tuple[str, str], ...]:
    """The key/value pairs the producer stored with the image: an OffloadBinary entry's string map or a
    wrapped image's metadata (a plugin's debug log prints these); () for other images
    (:func:`devbin.images.containers.producer_metadata`)."""
    from devbin.images.containers import producer_metadata as stored
    return stored(f)


def write_metadata(pairs: tuple[tuple[str, str], ...], out: TextIO) -> None:
    """Key/value metadata the way a plugin's debug log prints it: ``key: value``, one per line."""
    out.write("Metadata:\n")
    for key, value in pairs:
        out.write(f"  {visible(key)}: {visible(value)}\n")  # a newline in a value would forge a line
    out.write("\n")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.binary import budget
    from devbin.cli.common import dump, no_device_code
    from devbin.cli.render import render_elf
    from devbin.entry.elf import open_elf
    from devbin.errors import DeviceBinaryError, LimitExceeded
    from devbin.report import inspect_elf
    path, images = selected_images(args)
    if images is None:
        return no_device_code([path])
    reports: list[dict[str, Any]] = []
    errors: list[str] = []
    if images.single:
        warnings: list[DeviceBinaryError] = []
        meta = _wrapped_metadata(path)
        with open_elf(path, diag=warnings.append) as elf:
            report = inspect_elf(elf, file=path, warnings=warnings)
        reports.append({**single_keys(images), **({"metadata": dict(meta)} if meta is not None else {}), **report})
        if not args.json:
            if meta is not None:
                write_metadata(meta, out)
            render_elf(report, out)
    for f in images.code_objects:
        image_warnings: list[DeviceBinaryError] = []
        try:
            with budget.current().unit():  # its decoded image goes before the next one is decoded
                elf = open_image(f, diag=image_warnings.append)
                r = inspect_elf(elf, file=image_label(f), warnings=image_warnings)
                del elf
        except LimitExceeded:
            raise  # over the memory budget: the command fails in one line, the file is not to blame
        except DeviceBinaryError as e:
            errors.append(str(e))
            continue
        meta = producer_metadata(f)
        reports.append({**image_dict(f), **({"metadata": dict(meta)} if meta else {}), **r})
        if not args.json:
            if len(reports) > 1:
                out.write("\n")
            out.write(image_header(f) + "\n")
            if meta:
                write_metadata(meta, out)
            render_elf(r, out)
    if args.json:
        dump("inspect", {"file": path, "images": reports, "skipped": [image_dict(f) for f in images.skipped],
                         "warnings": [*images.warnings, *errors]}, out)
        for w in [*images.warnings, *errors]:
            warn(w)
    else:
        write_container_tail(images, errors)
    return 1 if errors else 0
