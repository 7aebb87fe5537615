"""Extract device images to files, named and laid out as `cuobjdump -xelf all` / `-xptx all` does.

NVIDIA fatbin entries: names are <stem>.<n>.<arch>.cubin|ptx (n counts each
kind from 1 through the whole input file, archive members included; stem is
the input file name without its last extension), or <identifier base
name>.<arch>.<ext> when the image carries an identifier.  Cubins are written
trimmed to their last section and PTX up to its first NUL, byte for byte as
cuobjdump writes them.  A bare cubin is written as <stem>.<arch>.cubin, a
bare AMDGPU code object (a file, or an archive member such as the archives
`clang-offload-bundler --unbundle -type=a` writes) as <stem>.<target id>.o,
stem from the member's name for a member.

Images in LLVM containers are written byte for byte as the LLVM tools
extract them:

* OffloadBinary entries (bare packager output or .llvm.offloading sections)
  take clang-offload-packager's own default name, <stem>-<triple>-<arch>.<n>.<ext>,
  ext by the entry's image kind (o, bc, cubin, fatbin, s; bin for others) and
  n counting OffloadBinary images from 0 through the input file (what the
  packager writes for one --image filter that matches them all).
* clang-offload-bundler names nothing itself (every output is given with
  -output), so bundle entries (.hip_fatbin, bare and compressed bundles,
  __CLANG_OFFLOAD_BUNDLE__ sections) are named <stem>.<n>.<target id>.<ext>:
  n counts bundle images from 1 through the input file, the target ID has
  ':' replaced by '_' (the triple stands in when there is none), and ext is o
  (AMDGPU code objects, host objects), cubin, ptx, bc, fatbin, spv or bin.

Any character of a triple or target ID other than letters, digits and
"._+-" (and ':' in packager names) becomes '_'; a name that would still leave
DIR (a path separator, "..", a control character) is refused, and so are two
images that would get the same name.

Exit status: 1 on an error, which includes a file named on the command line
that cannot be opened or that gives no image, only warnings (truncated,
corrupt); 0 otherwise, also when files found while walking a folder or a
zip/wheel cannot be read (each becomes a warning); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from devbin.cli.progress import progress_bar
from devbin.cli.render import scan_status

if TYPE_CHECKING:
    from devbin.discover import Found


HELP = ("extract cubins and PTX like cuobjdump -xelf/-xptx, and the images of LLVM offload binaries "
        "and clang offload bundles")

KINDS = ("elf", "ptx", "amdgpu", "bitcode", "host", "fatbin", "spirv", "data")

_OFFLOAD_EXT = {"object": "o", "bitcode": "bc", "cubin": "cubin", "fatbinary": "fatbin", "ptx": "s"}
_BUNDLE_EXT = {"amdgpu": "o", "host": "o", "elf": "cubin", "ptx": "ptx", "bitcode": "bc", "fatbin": "fatbin",
               "spirv": "spv"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", help="a file or folder")
    p.add_argument("--arch", help="only images of this architecture (sm_90 also matches compute_90 PTX, "
                                  "gfx90a also matches gfx90a:xnack-)")
    p.add_argument("--kind", choices=KINDS, help="only images of this kind (elf: cubins)")
    p.add_argument("-o", "--output", default=".", metavar="DIR", help="folder to write into (default: .)")
    p.add_argument("--max-size", type=int, default=1 << 30, help="refuse images larger than this once decompressed")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")


def _arch_matches(found: str, wanted: str | None) -> bool:
    if wanted is None:
        return True
    return (found == wanted or found.split("_", 1)[-1] == wanted.split("_", 1)[-1]
            or found.split(":", 1)[0] == wanted)


def _clean(text: str, keep: str = "._+-") -> str:
    """``text`` with every character but ASCII letters, digits and ``keep`` replaced by ``_``."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in keep else "_" for c in text)


def safe_name(name: str) -> str:
    """``name`` if it is one plain file name; UsageError otherwise."""
    from devbin.errors import UsageError
    if (not name or name in (".", "..") or "/" in name or "\\" in name or os.sep in name
            or any(ord(c) < 32 or ord(c) == 127 for c in name)):
        raise UsageError(f"refusing to write an image named {name!r}: it would not stay inside the output folder")
    return name


def _unit(path: str) -> str:
    """The file whose images are numbered together: an archive, not its member (``lib.a(k.o)`` -> ``lib.a``)."""
    return path.rsplit("(", 1)[0] if path.endswith(")") else path


def _stem(unit: str) -> str:
    return os.path.splitext(os.path.basename(unit.rsplit("!", 1)[-1]))[0]


def names(images: list[Found]) -> list[str]:
    """cuobjdump's file name for each image: numbered per kind through each file (an archive counts as one)."""
    from devbin.formats.fatbin import extract_name
    counters: dict[tuple[str, str], int] = {}
    out: list[str] = []
    for f in images:
        unit = _unit(f.path)
        if f.container_format == "offload":
            base = f"{_stem(unit)}-{_clean(f.triple)}-{_clean(f.arch, '._+-:')}"
            key = (unit, "offload")
            n = counters.get(key, 0)
            counters[key] = n + 1
            out.append(f"{base}.{n}.{_OFFLOAD_EXT.get(f.image_kind, 'bin')}")
            continue
        if f.container_format == "bundle":
            key = (unit, "bundle")
            counters[key] = counters.get(key, 0) + 1
            target = _clean((f.arch or f.triple or "none").replace(":", "_"))
            out.append(f"{_stem(unit)}.{counters[key]}.{target}.{_BUNDLE_EXT.get(f.kind, 'bin')}")
            continue
        if f.kind == "amdgpu":  # a bare code object: an archive member (bundler -type=a output) or a file
            member = f.path[:-1].rsplit("(", 1)[1] if f.path.endswith(")") and "(" in f.path else f.path
            out.append(f"{_stem(member)}.{_clean(f.arch.replace(':', '_'))}.o")
            continue
        key = (unit, "ptx" if f.kind == "ptx" else "elf")
        counters[key] = counters.get(key, 0) + 1
        if f.entry is not None:
            out.append(extract_name(f.entry, _stem(unit), counters[key]))
        else:
            out.append(f"{_stem(f.path)}.{f.arch}.cubin")
    return out


_LABELS = {"elf": "ELF file", "ptx": "PTX file", "amdgpu": "AMDGPU code object", "bitcode": "bitcode file",
           "host": "host file"}


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.discover import ScanReport, discover
    from devbin.errors import UsageError
    folder = Path(args.output)
    report = ScanReport()
    with progress_bar("scanning") as progress:
        images = [f for f in discover([args.path], progress=progress, report=report)
                  if f.kind in ("elf", "ptx", "amdgpu") or f.container_format]
    written: list[dict[str, Any]] = []
    taken: set[str] = set()
    for f, name in zip(images, names(images), strict=True):
        if (args.kind and f.kind != args.kind) or not _arch_matches(f.arch, args.arch):
            continue
        if name in taken:
            raise UsageError(f"two images would both be written as {name!r} (from {f.path}); "
                             "extract the files one at a time or narrow with --arch/--kind")
        data = f.extract_view(max_size=args.max_size)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / safe_name(name)
        target.write_bytes(data)
        taken.add(name)
        written.append({"file": str(target), "kind": f.kind, "arch": f.arch, "size": len(data), "from": f.path})
        del data  # a decoded image goes before the next one is decoded (the memory budget holds one at a time)
    if args.json:
        out.write(json.dumps({"written": written, "warnings": report.warnings}, indent=2) + "\n")
    else:
        counts: dict[str, int] = {}
        for w in written:
            counts[w["kind"]] = counts.get(w["kind"], 0) + 1
            label = _LABELS.get(w["kind"], f"{w['kind']} file")
            out.write(f"Extracting {label} {counts[w['kind']]:4}: {Path(w['file']).name}\n")
        for warning in report.warnings:
            out.write(f"warning: {warning}\n")
    return scan_status(report.failed)
