"""Find every device image in files, folders, ``ar`` archives and zip files (wheels, eggs).

``scan(paths)`` yields one :class:`~devbin.images.Image` per device image, in a
deterministic order: paths in the order given, folders walked in sorted name order, members
in archive order, sections in section-table order (but ``.nv_fatbin`` before
``__nv_relfatbin``, as cuobjdump reads them), containers and entries in file order.

Where images are looked for, by the first bytes of each file or member
(the registry of container formats, :mod:`devbin.images.containers`, each format's walk):

* **host ELF** (objects, shared libraries, executables): NVIDIA fatbins in sections, with
  cuobjdump's scope (:mod:`devbin.images.hostelf`: ``all`` adds ``__nv_relfatbin`` when
  ``.nv_fatbin`` holds executable images), and LLVM offloading sections
  (:mod:`devbin.images.llvm`), NVIDIA's first.
* **bare cubins** (ELF, ``e_machine`` 190), kind ``cubin``, SM from ``e_flags``; **AMDGPU code
  objects** (``e_machine`` 224), kind ``amdgpu``, processor from ``e_flags``.
* **bare fatbins** (one or several back to back), **bare OffloadBinaries** and **bare
  bundles** (plain or compressed).
* **devbin wrapped images**: the image with the wrapper's metadata, addressed as the file
  itself (the wrapper holds one image); a container inside is opened, its steps right after
  the file's (``k.wrapped#0.1`` for a fatbin's entry 1).
* **ar archives** (regular, BSD, thin): every member, recursively.  Thin members are read from
  disk only when they lie inside the archive's folder (``follow_thin_outside`` lifts that);
  from :func:`scan_bytes` they cannot be read and are reported as warnings.
* **zip files** (``.whl``, ``.egg``, ``.zip``, also a zip inside a zip): members are read one at a
  time, never extracted beside the archive: a small one into memory, one larger than
  :data:`devbin.formats.zipmember.SPILL_BYTES` inflated into an unnamed temporary file and
  memory-mapped, then scanned as a file on disk is (:func:`devbin.formats.zipmember.load`); the
  archive itself is not mapped whole.  A member whose first bytes are no known magic is skipped
  after reading those bytes only.
* **a SPIR-V module named explicitly** (``devbin list k.spv``): one image, kind ``spirv``, when it is compute
  code (:mod:`devbin.images.spirvfile`); found in a folder or a zip, such a file is passed over (a folder
  of Vulkan shaders would flood every listing).

**URLs** (``https://...``, ``s3://...``: :mod:`devbin.images.remote`) are files read through fsspec: a
zip member by member with range requests, any other file whole once its first bytes name a format.

**Backups are skipped** in folders: a file whose name ends in ``.devbin-backup`` (the original
``devbin prune --in-place`` keeps, and the hidden undo links of a folder prune in progress) is not
one of the folder's files, so a second prune does not prune its backups and ``devbin size DIR``
does not count them.  Such a file named explicitly (``devbin list x.so.devbin-backup``) is
scanned as any file is.

A corrupt or unreadable member yields nothing and adds a line to
:attr:`ScanReport.warnings` (prefixed with the file's address); the scan goes on.  Only a
top-level path that cannot be opened raises (``OSError``), and a top-level path that should be a
zip and is not one: a file named explicitly (not found in a folder) that starts with a zip's magic
but that :mod:`zipfile` cannot open (cut short: its end-of-central-directory record is gone), or whose
name ends ``.whl`` and that does not start with a zip's magic, raises :class:`FormatError` "not a
zip file" (:func:`devbin.formats.zipmember.open_zip`): a wheel is a zip (PEP 427), and a command
that read it as "no device code" or "0 files" would let a damaged download pass CI.  The same file
found in a folder, or as a member of a zip, is a warning like any other damaged file there.

A file named explicitly that yields
no image but warnings (truncated, corrupt) is also recorded in :attr:`ScanReport.failed`, so a
command line can fail for it while a folder or zip scan (a zip is a folder of files) only
warns about the files it skips.

``all`` (cuobjdump's ``-all``) matters only where a host ELF holds both ``.nv_fatbin`` and
``__nv_relfatbin``; anything that counts bytes (sizes, pruning) scans with ``all=True``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING

from devbin.binary import Buffer, ByteView, budget
from devbin.binary.output import BACKUP_SUFFIX
from devbin.errors import DeviceBinaryError, FormatError
from devbin.formats import zipmember
from devbin.formats.magic import SNIFF, SPIRV, image_magic, is_zip
from devbin.images.address import Address, Member
from devbin.images.containers import ZIP, format_of, member_frame
from devbin.images.frame import Frame, Hit
from devbin.images.record import Image
from devbin.images.scanreport import ScanReport

if TYPE_CHECKING:
    import zipfile

# Each container's reader is imported where its magic is met (below), not with this module: a scan
# of cubins never imports the bundle, OffloadBinary or ar readers, and no scan imports a writer.

__all__ = ["MAX_DEPTH", "MAX_MEMBER_SIZE", "ByteProgress", "Progress", "Scanner", "ToScan", "file_sizes",
           "folder_bytes", "jobs_for", "scan", "scan_bytes"]

#: Nesting limit (zip in zip in archive ...): deeper members are reported, not opened.
MAX_DEPTH = 12
#: A file named explicitly whose name ends so must be a zip (PEP 427: a wheel is one).
WHEEL_SUFFIX = ".whl"
#: Zip members larger than this are not read (a warning says so).
MAX_MEMBER_SIZE = 8 << 30

Progress = Callable[[int, int], None]
#: One file to scan: the path as displayed, the path (a str: a URL, :mod:`devbin.images.remote`), whether it was
#: named explicitly (not found in a folder).  Plain data: it pickles (a Dask work unit, :mod:`devbin.images.units`).
ToScan = tuple[str, Path | str, bool]


def file_sizes(files: Iterable[ToScan]) -> list[int]:
    """The bytes of each file of :meth:`Scanner.expand` (0: it cannot be read; the scan reports it): the
    weights of ``--jobs`` and the units of the progress bar."""
    out = []
    for _, path, _ in files:
        if isinstance(path, str):
            from devbin.images.remote import url_size
            out.append(url_size(path))
            continue
        try:
            out.append(path.stat().st_size)
        except OSError:
            out.append(0)
    return out


class ByteProgress:
    """``progress(done, total)`` in bytes over the files of a scan, ``done = 0`` first.  A file counts its
    bytes once scanned (:meth:`file_done`); a zip scanned in this process also moves it on member by member
    (:meth:`member`, its compressed bytes), so that a scan of one wheel does not read "0 of 1" to its end.
    (A file count said nothing while one large file was read; a wheel's one large library still moves the
    bar only when it has been read.)"""

    def __init__(self, progress: Progress, sizes: list[int]) -> None:
        self.progress = progress
        self.sizes = sizes
        self.total = sum(sizes)
        self.done = 0
        self.next = 0  # the file being scanned
        self.inside = 0  # its bytes passed so far
        progress(0, self.total)

    def member(self, n: int) -> None:
        if self.next < len(self.sizes):
            self.inside = min(self.inside + n, self.sizes[self.next])
            self.progress(self.done + self.inside, self.total)

    def file_done(self) -> None:
        if self.next < len(self.sizes):
            self.done += self.sizes[self.next]
            self.next += 1
        self.inside = 0
        self.progress(self.done, self.total)


def scan(paths: Iterable[str | Path], *, all: bool = False, progress: Progress | None = None,
         report: ScanReport | None = None, follow_thin_outside: bool = False) -> Iterator[Image]:
    """Yield every device image in ``paths`` (files or folders), see the module docstring.

    ``progress(done, total)`` is called with ``done = 0`` first and as the files are read: ``total`` is
    their bytes, folders expanded (:class:`ByteProgress`).  ``report`` collects warnings and wrappers.
    """
    for image, _ in Scanner(report, all=all, follow_thin_outside=follow_thin_outside).paths(paths, progress):
        yield image


def scan_bytes(data: Buffer, where: str, *, all: bool = False, report: ScanReport | None = None) -> Iterator[Image]:
    """Yield every device image in ``data`` (any of the formats above); addresses start with ``where``."""
    for image, _ in Scanner(report, all=all).buffer(data, Frame(Address(where))):
        yield image


def _named_spirv(head: bytes) -> bool:
    """Whether a file named explicitly is a bare SPIR-V module, read only then (:mod:`devbin.images.spirvfile`:
    found in a folder or a zip, such a file is passed over, as Vulkan shaders would flood a listing)."""
    return image_magic(head) == SPIRV


def _walk(display: str, root: Path, rep: ScanReport) -> Iterator[tuple[str, Path]]:
    """Regular files under ``root`` in sorted order; symlinks are not followed (a link inside
    the tree leads to something walked anyway, a link out of it must not be followed), and names
    ending in ``.devbin-backup`` are skipped (the originals ``prune --in-place`` keeps are not
    libraries of the folder: the module docstring)."""
    try:
        with os.scandir(root) as it:
            entries = sorted(it, key=lambda d: d.name)
    except OSError as e:
        rep.warn(display, f"cannot list folder: {e}")
        return
    for ent in entries:
        sub_display = os.path.join(display, ent.name)
        try:
            if ent.is_symlink() or ent.name.endswith(BACKUP_SUFFIX):
                continue
            if ent.is_dir(follow_symlinks=False):
                yield from _walk(sub_display, Path(ent.path), rep)
            elif ent.is_file(follow_symlinks=False):
                yield sub_display, Path(ent.path)
        except OSError as err:
            rep.warn(sub_display, f"cannot read: {err}")


def folder_bytes(root: str | os.PathLike[str]) -> int:
    """The installed size of the folder ``root`` (an environment's site-packages): the bytes of the regular
    files under it as every folder scan walks them (:func:`_walk`: symbolic links and ``*.devbin-backup``
    skipped), less devbin's own lock files and prune's journal (``.devbin-*``, ``*.devbin-lock``: there
    while a command runs).  ``prune --in-place`` reports it before and after, ``size --keep`` predicts it
    (:mod:`devbin.packaging.prune_packages`, :mod:`devbin.size.report`): one count, so the two agree to
    the byte."""
    from devbin.binary.lock import LOCK_NAME  # fcntl: imported by what locks, not by every scan

    total = 0
    for _, path in _walk(os.fspath(root), Path(root), ScanReport()):
        if not path.name.startswith(".devbin-") and not path.name.endswith(LOCK_NAME):
            with contextlib.suppress(OSError):
                total += path.stat().st_size
    return total


class Scanner:
    """One scan: its report, scope and thin-archive policy.  :meth:`paths` and :meth:`buffer`
    yield ``(image, frame)`` pairs: the image and the file it was found in."""

    def __init__(self, report: ScanReport | None = None, *, all: bool = False,
                 follow_thin_outside: bool = False, on_member: Callable[[Frame], None] | None = None) -> None:
        self.rep = report if report is not None else ScanReport()
        self.all = all
        self.follow_thin_outside = follow_thin_outside
        # called with each ar member's frame before its images are yielded, also for a member that
        # holds none (cuobjdump prints a line for every member: `devbin resources --format cuobjdump`)
        self.on_member = on_member
        self.zip_opened = False  # the last top-level file was a zip (a folder of files: not in `failed`)
        #: called with each top-level zip member's compressed bytes once it is scanned (in this process only:
        #: :meth:`ByteProgress.member`)
        self.on_zip_bytes: Callable[[int], None] | None = None
        #: the one member of a top-level zip to read (the others are passed over unread): a work unit's
        #: images sit in it (:class:`devbin.images.units.ImageUnit`); None reads them all
        self.only_member: Member | None = None
        #: the address of the file named explicitly that :meth:`buffer` reads as a bare SPIR-V module
        #: (:mod:`devbin.images.spirvfile`; a subclass's ``buffer`` sees it as any file's bytes)
        self.named_spirv: str | None = None

    def paths(self, paths: Iterable[str | Path], progress: Progress | None = None) -> Iterator[Hit]:
        """Every image under ``paths``; raises OSError for a top-level path that cannot be read."""
        files = self.expand(paths)
        bar = ByteProgress(progress, file_sizes(files)) if progress is not None else None
        self.on_zip_bytes = bar.member if bar is not None else None
        for todo in files:
            yield from self.one(todo)
            if bar is not None:
                bar.file_done()

    def expand(self, paths: Iterable[str | Path]) -> list[ToScan]:
        """The files under ``paths`` in scan order, folders walked (their unreadable entries are
        warnings); raises OSError for a top-level path that cannot be read."""
        files: list[ToScan] = []
        from devbin.images.remote import is_url
        for p in paths:
            if is_url(p):  # a file read through fsspec: opened by the scan (OSError there if it cannot be)
                files.append((str(p), str(p), True))
                continue
            path = Path(p)
            st = path.stat()  # raises OSError for a missing top-level path
            if stat.S_ISDIR(st.st_mode):
                files.extend((d, f, False) for d, f in _walk(str(p), path, self.rep))
            else:
                files.append((str(p), path, True))
        return files

    def one(self, todo: ToScan) -> Iterator[Hit]:
        """The images of one file of :meth:`expand` (an explicit one that cannot be read raises OSError)."""
        display, path, explicit = todo
        rep = self.rep
        rep.files += 1
        warned, images = len(rep.warnings), 0
        try:
            for hit in self.file(path, Frame(Address(display)), explicit=explicit):
                images += 1
                yield hit
        except OSError as e:
            if explicit:
                raise
            rep.warn(display, f"cannot read: {e}")
        if explicit and not images and len(rep.warnings) > warned and not self.zip_opened:
            rep.failed.append(display)

    def listing(self, paths: Iterable[str | Path], progress: Progress | None = None,
                jobs: int | None = 1, min_bytes: int = 0, client: object = None) -> list[Image]:
        """The images under ``paths`` as records without their format objects (``native`` is None:
        facts only, nothing to decode), the files spread over ``jobs`` processes
        (:func:`devbin.images.parallel.ordered_map`; None: every processor), or over the workers of the Dask
        ``client`` (one file a task, :mod:`devbin.images.units`), with the report and the order of one
        process; files of fewer than ``min_bytes`` in all are read in this process."""
        from devbin.images.parallel import default_jobs, effective_jobs, ordered_map
        files = self.expand(paths)
        sizes = file_sizes(files)
        bar = ByteProgress(progress, sizes) if progress is not None else None
        jobs = jobs_for(files, jobs, min_bytes)
        n = effective_jobs(default_jobs() if jobs is None else jobs, len(files))
        local = client is None and n <= 1
        self.on_zip_bytes = bar.member if bar is not None and local else None  # a worker draws nothing
        out: list[Image] = []
        # to a Dask worker goes the scope, not this scanner (its report grows with every file merged)
        work = self._list_one if client is None else partial(_list_file, self.all, self.follow_thin_outside)
        for images, rep in ordered_map(work, files, jobs=n, client=client):
            out.extend(images)
            self.rep.merge(rep)
            if bar is not None:
                bar.file_done()
        return out

    def _list_one(self, todo: ToScan) -> tuple[list[Image], ScanReport]:
        sub = Scanner(ScanReport(), all=self.all, follow_thin_outside=self.follow_thin_outside)
        sub.on_zip_bytes = self.on_zip_bytes
        images = [dataclasses.replace(image, native=None) for image, _ in sub.one(todo)]
        return images, sub.rep

    # -- files on disk ----------------------------------------------------------
    def file(self, path: Path | str, frame: Frame, depth: int = 0, *, explicit: bool = False) -> Iterator[Hit]:
        """The images of the file at ``path``, memory-mapped (a zip is read member by member); ``explicit``:
        named on the command line, where a damaged zip or a ``.whl`` that is no zip raises (module docstring).
        A str is a URL (:meth:`url`)."""
        if isinstance(path, str):
            yield from self.url(path, frame, depth, explicit=explicit)
            return
        with open(path, "rb") as f:
            head = f.read(SNIFF)
            zipped = is_zip(head)
            if depth == 0:
                self.zip_opened = zipped
            if explicit and path.name.lower().endswith(WHEEL_SUFFIX) and not zipped:
                raise FormatError(f"not a zip file (a wheel is a zip; this one starts with "
                                  f"{head[:4].hex() or 'nothing'})", fmt="zip", where=frame.where)
            if zipped:  # read member by member (not mapped whole: the pages an inflate reads would stay)
                yield from self.walk_zip(f, None, frame, depth, strict=explicit)
                return
            spirv = explicit and _named_spirv(head)
            if format_of(head) is None and not spirv:
                return
            if os.fstat(f.fileno()).st_size == 0:
                return
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self.named_spirv = frame.where if spirv else None
            yield from self.buffer(mm, frame, depth=depth, disk=path)
        finally:
            # Images may still hold views into the map; then it goes with them.
            with contextlib.suppress(BufferError):
                mm.close()

    def url(self, url: str, frame: Frame, depth: int = 0, *, explicit: bool = False) -> Iterator[Hit]:
        """The images of the file at ``url``, read through fsspec (:mod:`devbin.images.remote`): a zip member
        by member (only the members with device code whole), any other file whole once its first bytes name
        a format, into a buffer the memory budget is charged for."""
        from devbin.images.remote import open_url
        with open_url(url) as f:
            head = f.read(SNIFF)
            zipped = is_zip(head)
            if depth == 0:
                self.zip_opened = zipped
            if explicit and url.lower().endswith(WHEEL_SUFFIX) and not zipped:
                raise FormatError(f"not a zip file (a wheel is a zip; this one starts with "
                                  f"{head[:4].hex() or 'nothing'})", fmt="zip", where=frame.where)
            if zipped:
                yield from self.walk_zip(f, None, frame, depth, strict=explicit)
                return
            spirv = explicit and _named_spirv(head)
            if format_of(head) is None and not spirv:
                return
            size = f.seek(0, os.SEEK_END)
            f.seek(0)
            data = budget.current().allocate(size, what="file", fmt="url", where=frame.where)
            got = f.readinto(data)  # type: ignore[attr-defined]
            if got != size:
                raise OSError(f"cannot read {url}: {got} of {size} bytes came")
        self.named_spirv = frame.where if spirv else None
        yield from self.buffer(data, frame, depth=depth)

    # -- any buffer --------------------------------------------------------------
    def buffer(self, data: Buffer, frame: Frame, *, depth: int = 0, disk: Path | None = None) -> Iterator[Hit]:
        """The images of ``data``, the bytes of the file ``frame`` names."""
        where = frame.where
        view = ByteView(data, where=where)
        fmt = format_of(view.bytes_at(0, min(SNIFF, len(view))))
        if fmt is None and where == self.named_spirv:
            from devbin.images.spirvfile import spirv_file
            yield from spirv_file(self.rep, data, frame)
            return
        if fmt is None or fmt.walk is None:
            return
        if depth > MAX_DEPTH:
            self.rep.warn(where, f"nested more than {MAX_DEPTH} containers deep; not opened")
            return
        if fmt.reports_own_errors:  # a zip's member errors are its members' warnings (walk_zip)
            yield from fmt.walk(self, view, frame, depth, disk)
            return
        try:
            yield from fmt.walk(self, view, frame, depth, disk)
        except DeviceBinaryError as e:
            self.rep.warn(where, str(e))

    # -- zip ------------------------------------------------------------------------
    def walk_zip(self, fileobj: IO[bytes], whole: Buffer | None, frame: Frame, depth: int, *,
             strict: bool = False) -> Iterator[Hit]:
        """The images in the members of the zip file ``fileobj``, whose bytes are ``whole`` when they are in
        memory (a zip inside a zip; None: a file, read member by member); ``strict``: a zip that cannot be
        opened raises."""
        try:
            zf = zipmember.open_zip(fileobj, frame.where)
        except FormatError as e:
            if strict:
                raise
            self.rep.warn(frame.where, e.message)
            return
        infos = zf.infolist()
        seen: dict[str, int] = {}
        with zf:
            for info in infos:
                yield from self._zip_entry(zf, whole, info, frame, depth, seen)
                if depth == 0 and self.on_zip_bytes is not None:
                    self.on_zip_bytes(info.compress_size)

    def _zip_entry(self, zf: zipfile.ZipFile, whole: Buffer | None, info: zipfile.ZipInfo, frame: Frame,
                   depth: int, seen: dict[str, int]) -> Iterator[Hit]:
        """The images in one member of a zip (none in a folder entry or a member of no format devbin reads)."""
        if zipmember.is_folder(info):
            return
        sub = member_frame(frame, info.filename, seen, ZIP.name)
        self.rep.members += 1
        if depth == 0 and self.only_member is not None and sub.address.steps[-1] != self.only_member:
            return
        if not self._zip_wanted(zf, info, sub.where):
            return
        # The member is charged its size while the scan reads it (the recorded size, or what its
        # compressed bytes can give if less); libdeflate, or zipfile for the other methods, allocates
        # the buffer as it fills it: a size that lies costs no memory.
        with budget.current().charged(zipmember.most_bytes(info), what="zip member", fmt="zip",
                                      where=sub.where):
            data = self._zip_member(zf, whole, info, sub.where)
            if data is not None:
                try:
                    yield from self.buffer(data, sub, depth=depth + 1)
                finally:
                    if isinstance(data, mmap.mmap):  # a spilled member: unmapped now unless an image holds a view
                        with contextlib.suppress(BufferError):
                            data.close()
                    del data

    def _zip_wanted(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bool:
        """Whether the member's first bytes name a format devbin looks into (only they are inflated)
        and it is not over :data:`MAX_MEMBER_SIZE`."""
        try:
            with zf.open(info) as fh:
                head = fh.read(SNIFF)
        except Exception as e:  # zipfile/zlib/bz2/lzma errors, encryption
            self.rep.warn(where, f"cannot read zip member: {type(e).__name__}: {e}")
            return False
        if format_of(head) is None:
            return False
        if info.file_size > MAX_MEMBER_SIZE:
            self.rep.warn(where, f"member of {info.file_size} bytes is larger than the limit; skipped")
            return False
        return True

    def _zip_member(self, zf: zipfile.ZipFile, whole: Buffer | None, info: zipfile.ZipInfo,
                    where: str) -> bytearray | mmap.mmap | None:
        """The member's bytes (:func:`devbin.formats.zipmember.load`: in the heap, or a large one in a
        temporary file memory-mapped; ``whole``: the archive's bytes when it is in memory), or None and a
        warning when it cannot be read."""
        try:
            return zipmember.load(zf, info, whole, where=where)
        except DeviceBinaryError as e:
            self.rep.warn(where, f"cannot read zip member: {e.message}")
        except Exception as e:  # zipfile/zlib/bz2/lzma errors, encryption
            self.rep.warn(where, f"cannot read zip member: {type(e).__name__}: {e}")
        return None


def _list_file(all: bool, follow_thin_outside: bool, todo: ToScan) -> tuple[list[Image], ScanReport]:
    """:meth:`Scanner.listing`'s work on one file in a Dask worker: what ``_list_one`` gives there."""
    return Scanner(all=all, follow_thin_outside=follow_thin_outside)._list_one(todo)


def jobs_for(files: list[ToScan], jobs: int | None, min_bytes: int) -> int | None:
    """``jobs`` for a pool over ``files``, or 1 (this process) when they hold fewer than ``min_bytes``
    in all (files that cannot be read count 0: the scan reports them), where forking costs more than
    it saves."""
    from devbin.images.parallel import pool_jobs

    return pool_jobs(jobs, file_sizes(files), min_bytes)
