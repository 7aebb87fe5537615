"""The one size report: the dict ``devbin size --json`` prints and the HTML report renders.

:func:`size_report` measures paths (:mod:`devbin.size.account`), finds duplicates and, with ``keep``,
asks :func:`devbin.packaging.pruning.prune` itself what pruning each file to those architectures would
save (prune's own decision and its own :class:`~devbin.packaging.pruning.PruneResult` numbers, so the
prediction is what ``devbin prune --keep`` then saves).  The keys are those of the size contract shared
with the HTML report (docs/JSON.md, ``devbin schema size``).

**Duplicates.**  Images with the same bytes in the file (SHA-256 of a fatbin entry's payload area, of
any other image's bytes), kind and architecture are one group: every copy after the first costs its
stored bytes.  Functions with the same name, architecture, size and code bytes (CRC-32 of the bytes
``st_size`` covers) in several images are one group too, counting only the copies that are not inside
an extra copy of a duplicate image (those are paid for already): every copy after the first costs its
size.  ``duplicate_bytes`` is the sum of both.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypedDict, cast

from devbin.binary import Buffer
from devbin.errors import DeviceBinaryError
from devbin.formats.magic import SNIFF, is_zip
from devbin.images.address import Address, Entry, Member
from devbin.images.frame import Frame, Hit
from devbin.images.parallel import ordered_map, pool_jobs
from devbin.images.record import Image
from devbin.images.scan import Progress, Scanner, folder_bytes
from devbin.images.scanreport import ScanReport
from devbin.size.account import FileSize, ImageSize, demangle, measure
from devbin.size.shapes import (
    ArchRow,
    ContainerRow,
    DuplicateFunction,
    DuplicateImage,
    Duplicates,
    FileEntry,
    FileSavings,
    KindRow,
    PackageSavings,
    Savings,
    SizeReport,
    TopFunction,
    Totals,
)

__all__ = ["by_arch", "by_container", "by_kind", "duplicates", "file_savings", "folder_savings", "only_images",
           "report_dict", "size_report", "top_functions", "totals", "wheel_savings"]


def by_arch(files: Sequence[FileSize]) -> list[ArchRow]:
    """Bytes per (vendor, architecture), largest stored first."""
    acc: dict[tuple[str, str], list[int]] = {}
    for f in files:
        for i in f.images:
            row = acc.setdefault((i.image.vendor, i.image.arch), [0, 0, 0, 0])
            row[0] += 1
            row[1] += i.stored
            row[2] += i.size
            row[3] += sum(fn.size for fn in i.functions)
    rows: list[ArchRow] = [{"vendor": v, "arch": a, "images": n, "stored_size": s, "size": u,
                            "function_bytes": fb} for (v, a), (n, s, u, fb) in acc.items()]
    rows.sort(key=lambda r: (-r["stored_size"], r["vendor"], r["arch"]))
    return rows


def by_kind(files: Sequence[FileSize]) -> list[KindRow]:
    """Bytes per image kind (cubin, ptx, lto-ir, amdgpu ...), largest stored first."""
    acc: dict[str, list[int]] = {}
    for f in files:
        for i in f.images:
            row = acc.setdefault(i.image.kind, [0, 0, 0])
            row[0] += 1
            row[1] += i.stored
            row[2] += i.size
    rows: list[KindRow] = [{"kind": k, "images": n, "stored_size": s, "size": u} for k, (n, s, u) in acc.items()]
    rows.sort(key=lambda r: (-r["stored_size"], r["kind"]))
    return rows


def by_container(files: Sequence[FileSize]) -> list[ContainerRow]:
    """Bytes per container (a fatbin, OffloadBinary or bundle: a translation unit's device code; a bare
    image is its own), largest stored first.  ``container`` is the images' address less the entry number."""
    acc: dict[str, ContainerRow] = {}
    for f in files:
        for i in f.images:
            last = i.image.address.steps[-1] if i.image.address.steps else None
            key = i.address[:i.address.rfind(".")] if isinstance(last, Entry) else i.address
            row = acc.get(key)
            if row is None:
                row = acc[key] = {"file": f.path, "container": key, "format": i.image.container,
                                  "identifier": i.image.identifier, "images": 0, "stored_size": 0, "size": 0,
                                  "archs": []}
            row["images"] += 1
            row["stored_size"] += i.stored
            row["size"] += i.size
            if i.image.arch not in row["archs"]:
                row["archs"].append(i.image.arch)
    return sorted(acc.values(), key=lambda r: (-r["stored_size"], r["container"]))


def totals(files: Sequence[FileSize]) -> Totals:
    return {"files": len(files), "file_bytes": sum(f.file_bytes for f in files),
            "device_bytes": sum(f.device_bytes for f in files), "overhead": sum(f.overhead for f in files),
            "stored_size": sum(f.stored for f in files), "size": sum(f.size for f in files),
            "images": sum(len(f.images) for f in files),
            "functions": sum(len(i.functions) for f in files for i in f.images)}


def top_functions(files: Sequence[FileSize], top: int | None = None) -> list[TopFunction]:
    """Functions summed over every copy and architecture, by mangled name, largest first; the ``top``
    first (None: all)."""
    acc: dict[str, TopFunction] = {}
    for f in files:
        for i in f.images:
            for fn in i.functions:
                row = acc.get(fn.name)
                if row is None:
                    row = acc[fn.name] = {"name": fn.name, "demangled": "", "kind": fn.kind, "size": 0,
                                          "copies": 0, "by_arch": {}}
                row["size"] += fn.size
                row["copies"] += 1
                arch = i.image.arch
                row["by_arch"][arch] = row["by_arch"].get(arch, 0) + fn.size
    rows = sorted(acc.values(), key=lambda r: (-r["size"], r["name"]))[:top]
    for r in rows:  # names demangled only for the rows given
        r["demangled"] = demangle(r["name"])
        r["by_arch"] = dict(sorted(r["by_arch"].items(), key=lambda kv: (-kv[1], kv[0])))
    return rows


def duplicates(files: Sequence[FileSize]) -> Duplicates:
    """Identical images and functions and what their extra copies cost (see the module docstring)."""
    groups: dict[tuple[str, str, str, bytes], list[ImageSize]] = {}
    for f in files:
        for i in f.images:
            if i.digest:
                groups.setdefault((i.image.vendor, i.image.kind, i.image.arch, i.digest), []).append(i)
    images: list[DuplicateImage] = []
    extra: set[int] = set()  # ids of the images that are extra copies
    for (_vendor, kind, arch, digest), members in groups.items():
        if len(members) < 2:
            continue
        extra.update(id(m) for m in members[1:])
        wasted = sum(m.stored for m in members[1:])
        images.append({"sha256": digest.hex(), "kind": kind, "arch": arch, "stored_size": members[0].stored,
                       "size": members[0].size, "copies": [m.address for m in members], "wasted": wasted})
    images.sort(key=lambda d: (-d["wasted"], d["copies"][0]))
    fgroups: dict[tuple[str, str, str, int, int], list[ImageSize]] = {}  # the images holding a copy
    for f in files:
        for i in f.images:
            if id(i) in extra:
                continue
            vendor, arch = i.image.vendor, i.image.arch
            for fn in i.functions:
                if fn.size:
                    key = (vendor, arch, fn.name, fn.size, fn.digest)
                    have = fgroups.get(key)
                    if have is None:
                        fgroups[key] = [i]
                    else:
                        have.append(i)
    functions: list[DuplicateFunction] = []
    for (_vendor, arch, name, size, _digest), holders in fgroups.items():
        if len(holders) < 2:
            continue
        copies = [f"{i.address}:{name}" for i in holders]
        functions.append({"name": name, "demangled": demangle(name), "arch": arch, "size": size, "copies": copies,
                          "wasted": size * (len(copies) - 1)})
    functions.sort(key=lambda d: (-d["wasted"], d["name"], d["arch"]))
    return {"images": images, "functions": functions,
            "image_bytes": sum(d["wasted"] for d in images), "function_bytes": sum(d["wasted"] for d in functions)}


# --------------------------------------------------------------------------- --keep


def file_savings(path: str, keep: Sequence[str], data: bytes | None = None,
                 member: zipfile.ZipInfo | None = None, max_segments: int | None = None) -> FileSavings:
    """What ``devbin prune --keep`` saves on the file ``path`` (its bytes ``data`` when it is a member):
    :func:`devbin.packaging.pruning.prune`'s own result.  ``bytes``: the file bytes saved
    (``PruneResult.file_bytes_saved``), ``freed``: what the containers shrank by inside the file
    (``container_bytes_freed``), ``by_arch``: the dropped images' bytes (``saved_by_arch()``); a file
    prune refuses (the selection would leave it no device image, a format it cannot rewrite) saves 0
    and says why under ``refused``.  ``member``: the zip entry the file is (a wheel's library): then
    ``wheel_bytes`` is what the zip saves, the entry's compressed size less the pruned bytes compressed
    as ``devbin prune`` writes them (:func:`devbin.formats.zipwrite.deflated_size`: zlib's default level, in
    chunks past :data:`~devbin.formats.zipwrite.CHUNK` bytes; only for stored and deflated entries, the
    methods of wheels, PEP 427).  ``max_segments``: prune's."""
    from devbin.packaging.pruning import prune  # the capability, only when --keep asks for it

    # the path is an address (``lib.a!k.o``, ``pkg.whl!lib/libk.so``, ``lib%40k.so``): prune names it the same way
    at = Address.parse(path)
    if data is None:
        data = Path(at.path).read_bytes()
    try:
        result = prune(data, keep=keep, at=at, require_match=False,  # a prediction over many files
                       max_segments=max_segments)
    except DeviceBinaryError as e:
        return {"bytes": 0, "freed": 0, "by_arch": {}, "refused": e.message}
    out: FileSavings = {"bytes": result.file_bytes_saved, "freed": result.container_bytes_freed,
                        "by_arch": result.saved_by_arch(), "fallback_images": result.fallback_images,
                        "unloadable_containers": result.unloadable_containers}
    if member is not None and member.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        size = len(result.data)
        if member.compress_type == zipfile.ZIP_DEFLATED:  # what prune's zip writer makes of it
            from devbin.formats.zipwrite import deflated_size

            size = deflated_size(result.data)
        out["wheel_bytes"] = member.compress_size - size
    return out


#: The files of one worker of ``--keep``: the file on disk (a raw path), then a top-level file (member
#: None, its address alone), one first member of a zip (a wheel's library; the files inside it), or the
#: members of one archive or other top-level file (member None), by address (escaped: ``lib%40k.so``).
_Group = tuple[str, Member | None, list[str]]


def _groups(paths: Sequence[str]) -> list[_Group]:
    """The files at ``paths`` (addresses as :class:`FileSize` paths), grouped by what reads them: a file
    on disk alone; a zip's members by their first member (each read from the zip by itself, so a
    wheel's libraries spread over ``jobs``); any other file's members together (one scan of it)."""
    groups: dict[tuple[str, Member | None, bool], list[str]] = {}
    zips: dict[str, bool] = {}
    for p in paths:
        a = Address.parse(p)
        first = a.steps[0] if a.steps else None
        if first is None:
            groups.setdefault((a.path, None, True), []).append(p)
            continue
        if a.path not in zips:
            zips[a.path] = _is_zip(a.path)
        key = (a.path, first if zips[a.path] and isinstance(first, Member) else None, False)
        groups.setdefault(key, []).append(p)
    return [(top, first, wanted) for (top, first, _), wanted in groups.items()]


def _is_zip(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return is_zip(f.read(SNIFF))
    except OSError:
        return False


def _group_savings(group: _Group, keep: Sequence[str], max_segments: int | None = None) -> dict[str, FileSavings]:
    """:func:`file_savings` of each file of ``group`` (where ``jobs`` puts it), by path."""
    top, first, wanted = group
    per: dict[str, FileSavings] = {}

    member: list[zipfile.ZipInfo] = []  # the zip entry of ``first``, once read

    def do(path: str, data: bytes | None) -> None:
        at = Address.parse(path) if member else None
        whole = member[0] if member and at is not None and at.path == top and at.steps == (first,) else None
        try:
            per[path] = file_savings(path, keep, data, whole, max_segments)
        except OSError as e:
            per[path] = {"bytes": 0, "freed": 0, "by_arch": {}, "refused": str(e)}

    if first is None and wanted == [str(Address(top))]:
        do(wanted[0], None)
        return per
    from devbin.formats import zipmember
    try:
        if first is None:
            for _ in _Members(set(wanted), do).paths([top]):
                pass
        else:
            with zipfile.ZipFile(top) as zf:  # opened here: a zip file object shared over fork shares its offset
                infos = [i for i in zf.infolist() if i.filename == first.name and not zipmember.is_folder(i)]
                data = (zipmember.read(zf, infos[first.occurrence - 1]) if len(infos) >= first.occurrence
                        else None)
                member[:] = infos[first.occurrence - 1:first.occurrence]
            if data is not None:
                for _ in _Members(set(wanted), do).buffer(data, Frame(Address(top, (first,)), "zip"), depth=1):
                    pass
    except (OSError, zipfile.BadZipFile, DeviceBinaryError) as e:
        for p in wanted:
            per.setdefault(p, {"bytes": 0, "freed": 0, "by_arch": {}, "refused": str(e)})
    return per


class _Members(Scanner):
    """A scan that hands the bytes of the files ``wanted`` to ``do`` instead of reading images in them."""

    def __init__(self, wanted: set[str], do: Callable[[str, bytes | None], None]) -> None:
        super().__init__(all=True)
        self.wanted = wanted
        self.do = do

    def buffer(self, data: Buffer, frame: Frame, *, depth: int = 0, disk: Path | None = None) -> Iterator[Hit]:
        if frame.where in self.wanted:
            self.wanted.discard(frame.where)
            self.do(frame.where, bytes(data))
            return iter(())
        return super().buffer(data, frame, depth=depth, disk=disk)


class _AllSavings(TypedDict):
    files: dict[str, FileSavings]
    total: Savings


def savings(files: Sequence[FileSize], keep: Sequence[str], *, jobs: int | None = 1,
            min_bytes: int = 0, max_segments: int | None = None) -> _AllSavings:
    """Per-file savings (keyed by path) and the total, see :func:`file_savings` (``max_segments``: prune's).
    ``jobs``: processes to prune in (1: this one; None: every processor; files of fewer than ``min_bytes``
    in all: this one); a wheel's libraries spread over them; the result is the same whatever ``jobs``.

    Each library of a wheel is pruned once: the wheel is pruned whole (:func:`wheel_savings`, prune's own
    rewrite of it) and each library's figures are read from that result; only the files it does not
    answer for (a library it leaves untouched, a member of an archive in the wheel, every file of a wheel it
    refuses) are pruned one by one (:func:`file_savings`)."""
    wheels = {top: wheel_savings(top, keep, jobs=jobs, max_segments=max_segments) for top in _wheels(files)}
    per: dict[str, FileSavings] = {}
    for _, by_file in wheels.values():
        per.update(by_file)
    groups = [g for g in _groups([f.path for f in files]) if not all(p in per for p in g[2])]
    size = {f.path: f.file_bytes for f in files}
    weights = [sum(size[p] for p in wanted) for _, _, wanted in groups]
    jobs = pool_jobs(jobs, weights, min_bytes)
    for done in ordered_map(lambda g: _group_savings(g, keep, max_segments), groups, jobs=jobs, weights=weights):
        per.update(done)
    total: Savings = {"keep": list(keep), "bytes": 0, "freed": 0, "by_arch": {}, "fallback_images": 0,
                      "unloadable_containers": 0, "packages": []}
    for f in files:
        s = per.setdefault(f.path, {"bytes": 0, "freed": 0, "by_arch": {}, "refused": "not read again"})
        if "wheel_bytes" in s:
            total["wheel_bytes"] = total.get("wheel_bytes", 0) + s["wheel_bytes"]
        total["bytes"] += s["bytes"]
        total["freed"] += s["freed"]
        total["fallback_images"] += s.get("fallback_images", 0)
        total["unloadable_containers"] += s.get("unloadable_containers", 0)
        for a, n in s["by_arch"].items():
            total["by_arch"][a] = total["by_arch"].get(a, 0) + n
    total["by_arch"] = dict(sorted(total["by_arch"].items()))
    total["packages"] = [package for package, _ in wheels.values()]
    return {"files": per, "total": total}


def _wheels(files: Sequence[FileSize]) -> list[str]:
    """The wheels (``*.whl`` zips) the files are members of, in order."""
    out: dict[str, None] = {}
    for f in files:
        a = Address.parse(f.path)
        if a.steps and isinstance(a.steps[0], Member) and a.path.endswith(".whl") and _is_zip(a.path):
            out.setdefault(a.path)
    return list(out)


def wheel_savings(path: str, keep: Sequence[str], *, jobs: int | None = 1,
                  max_segments: int | None = None) -> tuple[PackageSavings, dict[str, FileSavings]]:
    """What ``devbin prune --keep`` makes of the wheel ``path``, computed by prune itself
    (:func:`devbin.packaging.prune_packages.prune_wheel`, so the sizes are those of the wheel prune writes, to
    the byte), with the keys of prune's ``package``: ``package_size_before``/``package_size_after`` the wheel's
    (compressed), ``installed_size_before``/``installed_size_after`` its members' uncompressed sizes summed;
    or ``refused``: why prune would refuse the wheel.  And, from the same prune, :func:`file_savings` of each
    library prune rewrites, by path (``pkg.whl!lib/libk.so``): prune's own result for it, ``wheel_bytes`` the
    member's compressed size less what prune wrote for it.  The new wheel is written into a private temporary
    folder (removed at the end) for its members' compressed sizes; nothing of it is held in memory.  A library
    prune leaves untouched has no entry (:func:`file_savings` says why); none has when prune refuses the wheel."""
    from devbin.packaging.prune_packages import prune_wheel  # the capability, only when --keep asks for it

    with tempfile.TemporaryDirectory(prefix="devbin-size-") as folder:
        out = os.path.join(folder, "pruned.whl")
        try:
            r = prune_wheel(path, out, keep=keep, jobs=jobs, max_segments=max_segments)
        except DeviceBinaryError as e:
            return {"path": path, "kind": "wheel", "refused": e.message}, {}
        with zipfile.ZipFile(path) as old_zip, zipfile.ZipFile(out) as new_zip:
            before = {i.filename: i for i in old_zip.infolist()}
            after = {i.filename: i.compress_size for i in new_zip.infolist()}
    package: PackageSavings = {"path": path, "kind": "wheel", "package_size_before": r.input_size,
                               "package_size_after": r.output_size, "installed_size_before": r.installed_before,
                               "installed_size_after": r.installed_after}
    per: dict[str, FileSavings] = {}
    for o in r.files:
        res, member = o.result, before.get(o.name)
        if res is None or member is None or o.name not in after:
            continue
        s: FileSavings = {"bytes": res.file_bytes_saved, "freed": res.container_bytes_freed,
                          "by_arch": res.saved_by_arch(), "fallback_images": res.fallback_images,
                          "unloadable_containers": res.unloadable_containers}
        if member.compress_type in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            s["wheel_bytes"] = member.compress_size - after[o.name]
        per[str(Address(path, (Member(o.name),)))] = s
    return package, per


# --------------------------------------------------------------------------- the report


def folder_savings(folder: str, per_file: dict[str, FileSavings]) -> PackageSavings:
    """What ``devbin prune FOLDER --keep --in-place`` makes of the folder ``folder`` (an installed
    environment), given :func:`savings`' ``files``: ``installed_size_before``/``installed_size_after``, every file
    under it (:func:`devbin.images.scan.folder_bytes`, backups left out) before and after, as prune reports
    it to the byte (the pruned files' bytes, and what their packages' RECORDs grow by:
    :func:`devbin.packaging.prune_packages.record_growth`)."""
    from devbin.packaging.prune_packages import record_growth  # the capability, only when --keep asks for it

    before = folder_bytes(folder)
    inside = os.path.join(folder, "")
    saved: dict[str, int] = {}  # by file: an archive's members' savings are the archive's (prune's unit)
    for f, s in per_file.items():
        on_disk = Address.parse(f).path  # an archive's member is the archive's file on disk
        if on_disk.startswith(inside) and (s["freed"] or s["bytes"]):
            saved[on_disk] = saved.get(on_disk, 0) + s["bytes"]
    pruned = {f: os.path.getsize(f) - n for f, n in saved.items()}  # each read by --keep just now
    return {"path": folder, "kind": "folder", "installed_size_before": before,
            "installed_size_after": before - sum(saved.values()) + record_growth(folder, pruned)}


def only_images(files: list[FileSize], take: Callable[[Image], bool]) -> list[FileSize]:
    """``files`` with only the images ``take`` takes (``--image``, ``--arch``), in place: the stored bytes
    of the others are counted in each file's ``hidden``; a file left with no image is left out."""
    out = []
    for f in files:
        kept = [i for i in f.images if take(i.image)]
        f.hidden = sum(i.stored for i in f.images if i not in kept)
        f.images = kept
        if kept:
            out.append(f)
    return out


def report_dict(files: Sequence[FileSize], *, keep: Sequence[str] | None = None, warnings: Iterable[str] = (),
                top: int | None = None, detail: bool = True, jobs: int | None = 1,
                min_bytes: int = 0, paths: Iterable[str | Path] = (),
                max_segments: int | None = None) -> SizeReport:
    """The report of measured ``files`` (the JSON of ``devbin size``, without the ``schema`` key);
    ``top``: how many of :func:`top_functions` to give (None: all).  ``detail=False`` leaves out each
    file's images (for a text summary: no name of a function outside the tables is demangled).
    ``jobs``, ``min_bytes``: the processes ``keep``'s pruning runs in (:func:`savings`); ``paths``: what
    was measured, whose folders join ``savings.packages`` (:func:`folder_savings`); ``max_segments``:
    prune's program-header limit for ``keep``."""
    dup = duplicates(files)
    saved = savings(files, keep, jobs=jobs, min_bytes=min_bytes, max_segments=max_segments) if keep else None
    out_files = []
    for f in files:
        d = cast(FileEntry, f.to_dict(images=detail))
        if saved is not None:
            d["savings"] = saved["files"][f.path]
        out_files.append(d)
    doc = cast(SizeReport, {
        "files": out_files,
        "by_arch": by_arch(files),
        "by_kind": by_kind(files),
        "by_container": by_container(files),
        "totals": totals(files),
        "top_functions": top_functions(files, top),
        "duplicate_bytes": dup["image_bytes"] + dup["function_bytes"],
        "duplicates": dup,
        **({"savings": saved["total"]} if saved is not None else {}),
        "warnings": list(warnings),
    })
    if saved is not None:
        doc["savings"]["packages"] += [folder_savings(os.fspath(p), saved["files"]) for p in paths
                                       if os.path.isdir(p)]
    return doc


def streamed(doc: SizeReport, files: Sequence[FileSize]) -> dict[str, Any]:
    """``doc`` (:func:`report_dict` of ``files``, with or without ``detail``) for
    :func:`devbin.escape.jsontext.write`: the files and each file's images made as they are written, so a
    document of every function of a framework wheel (200 MB) is never held whole; the same bytes."""
    from devbin.escape.jsontext import Stream

    def entries() -> Iterator[dict[str, Any]]:
        for entry, f in zip(doc["files"], files, strict=True):
            yield {**entry, "images": Stream(partial(_image_dicts, f))}
    return {**doc, "files": Stream(entries)}


def _image_dicts(f: FileSize) -> Iterator[dict[str, object]]:
    return (i.to_dict() for i in f.images)


def size_report(paths: Iterable[str | Path], *, keep: Sequence[str] | None = None, functions: bool = True,
                top: int | None = None,
                progress: Progress | None = None, report: ScanReport | None = None,
                measured: Callable[[list[FileSize]], None] | None = None,
                jobs: int | None = 1) -> SizeReport:
    """Measure ``paths`` and build the report (``devbin size --json``'s dict, the HTML report's input).

    ``measured`` is called with the measured files (the budget check uses them); ``jobs``: processes to
    measure and prune in (1: this one; None: every processor), the report the same whatever it is."""
    rep = report if report is not None else ScanReport()
    paths = list(paths)
    files = measure(paths, functions=functions, progress=progress, report=rep, jobs=jobs)
    if measured is not None:
        measured(files)
    return report_dict(files, keep=keep, warnings=rep.warnings, top=top, jobs=jobs, paths=paths)
