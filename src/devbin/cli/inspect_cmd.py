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
note.  A SPIR-V module, skipped too, prints after a header line its
producer's metadata (a SYCL library's spir64 image: the wrapper's fields
and property sets, as its zebins do) and its header facts (version,
generator, triple, capabilities, extensions, entry points); in --json the
skipped entry's "metadata" and "spirv".  A devbin wrapped image (`devbin pack --format wrapped`) and images in
an OffloadBinary print their key/value metadata first, one `key: value` per
line, as a plugin's debug log would; so do the images of a SYCL host binary:
the offload wrapper's fields (target, format, entries, options) and every
property as `<set>/<property>: value` (numbers as numbers, byte arrays and
property types devbin does not know in hex, kept raw).

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
from typing import TYPE_CHECKING, TextIO

from devbin.cli.common import ImageFilter, add_image_options, note, warn
from devbin.escape.text import visible

if TYPE_CHECKING:
    from devbin.formats.spirv import SpirvModule
    from devbin.images import Image
    from devbin.reports.inspect import Images

HELP = ("print the ELF summary and the devbin sections of a code object, or of every code object "
        "in a fatbin, offload bundle or binary, host object or archive")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="a device code object (cubin, AMDGPU code object, any ELF), or a container "
                                           "of them (fatbin, OffloadBinary, offload bundle, host object/library, ar "
                                           "archive); default: the file of --image")
    add_image_options(p, all=False)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


# --------------------------------------------------------------------------- containers (shared with callgraph)


def image_label(f: Image) -> str:
    """Where an image is, as `devbin list` gives it: its address."""
    return str(f.address)


def image_header(f: Image) -> str:
    """The line printed before each code object of a container."""
    return visible(f"=== {image_label(f)}: {f.kind} {f.arch or '?'} ===")


def skipped_note(f: Image) -> str:
    return visible(f"{image_label(f)}: skipped {f.kind} image ({f.arch or 'no arch'}): not an ELF code object")


def selected_images(args: argparse.Namespace) -> tuple[str, Images | None]:
    """The file ``inspect``/``callgraph`` read (FILE, or the one ``--image`` names) and its images
    (:func:`devbin.reports.inspect.container_images`) after ``--image``/``--arch``; None for the images
    when the file holds no device code (exit 3)."""
    from devbin.reports.inspect import container_images, no_device_code_in
    choose = ImageFilter(args)
    path: str = args.file or choose.paths([])[0]
    found = container_images(path)
    if no_device_code_in(found):
        return path, None
    return path, choose_images(found, choose)


def choose_images(images: Images, choose: ImageFilter) -> Images:
    """``images`` with only what ``--image``/``--arch`` take (a single code object: kept or not);
    BadArguments for an ``--image`` address that names no image of the file."""
    from devbin.reports.inspect import Images
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


def write_container_tail(images: Images, errors: list[str]) -> None:
    """The skipped-image notes and warnings of a container, on stderr."""
    for f in images.skipped:
        note(skipped_note(f))
    for w in [*images.warnings, *errors]:
        warn(w)
    if not images.code_objects and not images.single:
        note(f"{images.file}: no ELF code object found")


# --------------------------------------------------------------------------- the command


def write_metadata(pairs: tuple[tuple[str, str], ...], out: TextIO) -> None:
    """Key/value metadata the way a plugin's debug log prints it: ``key: value``, one per line."""
    out.write("Metadata:\n")
    for key, value in pairs:
        out.write(f"  {visible(key)}: {visible(value)}\n")  # a newline in a value would forge a line
    out.write("\n")


def write_spirv(module: SpirvModule, out: TextIO) -> None:
    """A SPIR-V module's header facts, ``label: text`` one per line."""
    out.write("SPIR-V module:\n")
    for label, text in module.summary():
        out.write(f"  {label}: {visible(text)}\n")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.cli.common import dump, no_device_code
    from devbin.cli.render import render_elf
    from devbin.reports.inspect import inspected, skipped_images
    path, images = selected_images(args)
    if images is None:
        return no_device_code([path])
    errors: list[str] = []
    reports = []
    for i in inspected(images, errors):  # each written as soon as it is read
        reports.append(i.report)
        if args.json:
            continue
        if i.image is not None:
            if len(reports) > 1:
                out.write("\n")
            out.write(image_header(i.image) + "\n")
        if i.metadata is not None:
            write_metadata(i.metadata, out)
        render_elf(i.elf, out)
    unread: list[str] = []  # a SPIR-V header that cannot be read: a warning, not the command's failure
    skipped = skipped_images(images, unread)
    if not args.json:
        for s in skipped:
            if not s.metadata and s.spirv is None:
                continue
            if reports or s is not skipped[0]:
                out.write("\n")
            out.write(image_header(s.image) + "\n")
            if s.metadata:
                write_metadata(s.metadata, out)
            if s.spirv is not None:
                write_spirv(s.spirv, out)
    if args.json:
        dump("inspect", {"file": path, "images": reports, "skipped": [s.entry for s in skipped],
                         "warnings": [*images.warnings, *errors, *unread]}, out)
        for w in [*images.warnings, *errors, *unread]:
            warn(w)
    else:
        write_container_tail(images, [*errors, *unread])
    return 1 if errors else 0
