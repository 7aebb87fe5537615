"""Prune every library of a wheel, or of a folder (an installed ``site-packages``), to some architectures.

:func:`prune_wheel` finds the members that hold device images with the one image scan
(:func:`devbin.images.scan`: the wheel's members are addressed ``pkg.whl!lib/libx.so``), prunes each
with :func:`devbin.packaging.pruning.prune` and writes a new wheel:

* a library none of whose vendor's architectures is named (a ROCm library when only ``sm_*`` are
  kept, a CUDA one when only ``gfx*`` are) stays byte-identical, and the report says so;
* every other member is copied as it is, its compressed bytes, CRC-32, sizes, name, date, permissions and
  compression method (:class:`devbin.formats.zipwrite.ZipWriter`: never inflated nor deflated again), in
  pieces: no member but a pruned library is ever held whole; the pruned libraries and RECORD are deflated
  as they are written (:meth:`~devbin.formats.zipwrite.ZipWriter.add`: zipfile's bytes up to 4 MiB, past
  that in chunks on threads, the same bytes whatever the threads).
  A copied member's CRC is not checked again: :func:`devbin.formats.wheel.verify` read every member, CRC
  checked, just before;
* ``*.dist-info/RECORD`` is regenerated as ``wheel pack`` does (pypa/wheel,
  ``docs/reference/wheel_pack.rst``; PEP 376/427 RECORD): one row per member, ``path,sha256=<urlsafe
  base64 without padding>,size``, RECORD's own row ``path,,``; the signatures ``RECORD.jws`` and
  ``RECORD.p7s`` no longer match and are left out (a note says so).

Before anything else the wheel is verified as an installer verifies it
(:func:`devbin.formats.wheel.verify`: safe and unique member names, one RECORD whose rows match every
member's hash and size, hashed in pieces): devbin signs what it writes with a new RECORD, so a wheel
whose RECORD does not vouch for its members is refused (UsageError naming the member and the check).
``force=True`` goes on past RECORD problems (the new RECORD describes the members as they are, and a
note names each problem), never past unsafe or duplicate names, a wheel without one RECORD, or a
member that cannot be read.  The new wheel is written as it is made, to ``dst`` through
:func:`devbin.binary.output.atomic_output` (whole or not at all), or to a
:class:`~devbin.binary.output.Sink` that only counts its bytes (``dst`` None), or to memory when
``keep_data`` asks for the bytes in :attr:`PackagePruneResult.data`.

:func:`prune_tree` prunes the files of a folder in place, all or nothing, under the folder's lock
(:mod:`devbin.binary.lock`): every library pruned in memory and every ``*.dist-info/RECORD`` read (as
bytes) and its rows naming a pruned file given the new hash and size, then all of them written as one
transaction (:func:`devbin.packaging.transaction.replace_all`: staged, then renamed in; on a failure
every file put back), each library's original kept as ``<name>.devbin-backup`` unless
``backup=False`` or that backup exists already (the first original stays; a note says so).
:func:`prune_wheel` and :func:`devbin.packaging.pruning.prune_file` in place hold the file's lock.

Nothing is written when any library fails to prune (a selection that leaves a library without
device code, a file the page remover refuses): the error names the member.

``jobs`` spreads the libraries over processes (:func:`devbin.images.parallel.ordered_map`; default 1,
this process; None: every processor), each library pruned whole in one worker, which reads it itself
(a wheel's member from its own open of the zip) and sends back the pruned bytes and the result
(:meth:`~devbin.packaging.pruning.PruneResult.detached`).  Everything that decides the output happens
here, in the libraries' order: the results, the notes, the first error (the one one process meets
first), the wheel's members and RECORD, and every write: a folder's files after every library is
pruned, a new wheel into its new file as each library is reached (one library's bytes alive at a time;
the file appears whole at the end, or not at all: :func:`~devbin.binary.output.atomic_output`).  The output
is byte for byte the same whatever ``jobs``.  Libraries of fewer than :data:`MIN_PARALLEL_BYTES` in
all are pruned in this process.
"""

from __future__ import annotations

import contextlib
import csv
import gc
import hashlib
import io
import os
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, TypeVar

from devbin.binary import Buffer
from devbin.binary.lock import exclusive, refuse_if_held
from devbin.binary.mapped import release
from devbin.binary.output import BACKUP_SUFFIX, Output, Sink, atomic_output, check_destination
from devbin.errors import UsageError
from devbin.formats import wheel, zipmember
from devbin.formats.wheel import record_hash
from devbin.formats.zipwrite import ZipWriter
from devbin.images.address import Address, Member
from devbin.images.parallel import ordered_map, pool_jobs
from devbin.images.record import Image
from devbin.images.scan import ByteProgress, Progress, folder_bytes, scan
from devbin.images.scanreport import ScanReport
from devbin.packaging.pruning import PruneResult, Selection, kept_already, prune, prune_file, prune_name_matches
from devbin.packaging.transaction import JOURNAL_NAME, Change, recover, replace_all
from devbin.targets.archnames import parse_arch_list
from devbin.targets.registry import guess_vendor

__all__ = ["BACKUP_SUFFIX", "MIN_PARALLEL_BYTES", "MISSING", "FileOutcome", "PackagePruneResult", "prune_tree",
           "prune_wheel", "record_growth", "record_hash"]

T = TypeVar("T")

#: Libraries of fewer bytes than this in all are pruned in this process whatever ``jobs`` says (forking
#: and sending the pruned bytes back cost more than a pool saves).
MIN_PARALLEL_BYTES = 8 << 20

#: Bytes of a pruned library compared, hashed and compressed at a time.
_PIECE = 1 << 20

#: What ``missing=`` may say of a library the selection would leave without device code: ``keep`` it
#: byte-identical (a note and the report's ``untouched`` say why), or ``fail`` the prune before any work.
MISSING = ("keep", "fail")


@dataclass
class FileOutcome:
    """One library of the package: its result, or why it stayed as it was (``result`` None)."""

    name: str
    size: int
    result: PruneResult | None = None
    untouched: str = ""

    def to_dict(self) -> dict[str, object]:
        if self.result is None:
            return {"name": self.name, "input_size": self.size, "output_size": self.size, "file_bytes_saved": 0,
                    "saved_by_arch": {}, "arch_bytes": {}, "untouched": self.untouched, "fallback_images": 0,
                    "unloadable_containers": 0}
        r = self.result
        return {"name": self.name, "input_size": r.input_size, "output_size": r.output_size,
                "file_bytes_saved": r.file_bytes_saved, "saved_by_arch": r.saved_by_arch(),
                "arch_bytes": {a: {"before": b, "after": c} for a, (b, c) in r.bytes_by_arch().items()},
                "untouched": "", "fallback_images": r.fallback_images,
                "unloadable_containers": r.unloadable_containers}


@dataclass
class PackagePruneResult:
    """What :func:`prune_wheel` / :func:`prune_tree` did (or would do); ``data``: the new wheel's bytes
    when :func:`prune_wheel` was asked to keep them (``keep_data``), else empty."""

    kind: str  # "wheel" or "folder"
    input_size: int  # the wheel file's bytes (compressed), or the folder's pruned files before
    output_size: int
    files: list[FileOutcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: bytes = b""
    #: The installed size before and after: a wheel's members' uncompressed sizes summed (the bytes pip
    #: writes, before the ``.pyc`` files and ``INSTALLER`` it adds), a folder's files
    #: (:func:`devbin.images.scan.folder_bytes`: its backups and devbin's lock and journal left out),
    #: RECORDs included (a folder's with the backups' rows, :func:`record_growth`).
    installed_before: int = 0
    installed_after: int = 0

    @property
    def bytes_saved(self) -> int:
        return self.input_size - self.output_size

    def saved_by_arch(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.files:
            if f.result is not None:
                for arch, n in f.result.saved_by_arch().items():
                    out[arch] = out.get(arch, 0) + n
        return dict(sorted(out.items()))

    @property
    def images(self) -> list[tuple[Image, bool]]:
        return [pair for f in self.files if f.result is not None for pair in f.result.images]

    def rows(self) -> list[tuple[Image, bool, int]]:
        """Every library's images, whether each stays, and its footprint (:meth:`PruneResult.rows`)."""
        return [row for f in self.files if f.result is not None for row in f.result.rows()]

    def bytes_by_arch(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for f in self.files:
            if f.result is not None:
                for arch, (b, c) in f.result.bytes_by_arch().items():
                    x, y = out.get(arch, (0, 0))
                    out[arch] = (x + b, y + c)
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, object]:
        files_in = sum(f.size for f in self.files)
        files_out = sum(f.result.output_size if f.result else f.size for f in self.files)
        return {"kind": self.kind, "package_size_before": self.input_size, "package_size_after": self.output_size,
                "files_size_before": files_in, "files_size_after": files_out,
                "installed_size_before": self.installed_before, "installed_size_after": self.installed_after,
                "files": [f.to_dict() for f in self.files], "saved_by_arch": self.saved_by_arch(),
                "notes": list(self.notes)}


def _selection(keep: str | Iterable[str] | None, drop: str | Iterable[str] | None, ptx: str = "kept",
               max_segments: int | None = None, spirv: str = "kept") -> Selection:
    return Selection(keep=None if keep is None else parse_arch_list(keep),
                     drop=None if drop is None else parse_arch_list(drop), ptx=ptx, spirv=spirv,
                     max_segments=max_segments)


def _untouched(sel: Selection, lib: _Library) -> str:
    """Why the library ``lib`` stays as it is under ``sel``, or ``""``: no architecture of its vendor
    named (a ROCm library when only ``sm_*`` are kept), or :func:`_left_empty`."""
    named = {v.name for n in sel.names if (v := guess_vendor(n)) is not None}
    if lib.vendors and named and not lib.vendors & named:
        return (f"no {'/'.join(sorted(named))} architecture in it ({'/'.join(sorted(lib.vendors))} only); "
                "kept byte-identical")
    return _left_empty(sel, lib)


def _left_empty(sel: Selection, lib: _Library) -> str:
    """Why ``sel`` would leave the library ``lib`` no device image (a CUDA FFT wheel's ``cufftw`` holds
    sm_52 only; ``--keep sm_90``), or ``""``."""
    if not lib.archs or any(sel.keeps(a) for a in lib.archs):
        return ""
    holds = ", ".join(sorted(lib.archs))
    if sel.keep is not None:
        return f"no image of {','.join(sel.keep)} in it ({holds} only); kept byte-identical"
    return f"dropping {','.join(sel.names)} would leave it no device image ({holds} only); kept byte-identical"


def _plan(sel: Selection, libs: dict[str, _Library], where: str, missing: str) -> dict[str, str]:
    """Each library's :func:`_untouched` reason, decided before any work; UsageError for a kept name that
    matches no image of the whole package, and (``missing="fail"``) naming each library the selection
    would leave without device code."""
    if missing not in MISSING:
        raise UsageError(f"missing={missing!r}: expected one of {', '.join(MISSING)}")
    every = {a for lib in libs.values() for a in lib.archs}
    unmatched = [n for n in sel.keep or () if not any(prune_name_matches(n, a) for a in every)]
    if unmatched:
        raise UsageError(f"{where}: keep {','.join(unmatched)} matches no image; the package holds "
                         f"{', '.join(sorted(every))}")
    why = {name: _untouched(sel, lib) for name, lib in libs.items()}
    if missing == "fail":
        empty = [f"{name} ({', '.join(sorted(libs[name].archs))})" for name, w in why.items()
                 if w and w == _left_empty(sel, libs[name])]
        if empty:
            raise UsageError(f"{where}: the selection {','.join(sel.names)} leaves no device image in "
                             f"{'; '.join(empty)}; nothing was written (missing=keep leaves such a library "
                             "as it is)")
    return why


@dataclass
class _Library:
    address: Address  # the file: ``pkg.whl!lib/libx.so``, or a path in a folder
    vendors: set[str] = field(default_factory=set)
    archs: set[str] = field(default_factory=set)


def _libraries(path: Path, where: str) -> dict[str, _Library]:
    """The files of ``path`` (a wheel or folder) that hold device images, by member name or file path,
    with the vendors of their images (the images themselves are not kept: a wheel's libraries are
    pruned one at a time)."""
    report = ScanReport()
    out: dict[str, _Library] = {}
    wheel = not path.is_dir()  # a folder's libraries are its files (an archive in it one of them, members and all)
    for image in scan([path], all=True, report=report):
        step = image.address.steps[0] if image.address.steps else None
        if wheel and isinstance(step, Member):
            key, address = step.name, Address(image.address.path, (step,))
        else:
            key, address = image.address.path, Address(image.address.path)
        lib = out.setdefault(key, _Library(address))
        if image.arch and image.vendor:
            lib.vendors.add(image.vendor)
        if image.arch:
            lib.archs.add(image.arch)
    if report.warnings:
        raise UsageError(f"{where}: cannot prune a package the scan finds damaged: {report.warnings[0]}")
    return out



def prune_wheel(src: str | os.PathLike[str], dst: str | os.PathLike[str] | None, *,
                keep: str | Iterable[str] | None = None, drop: str | Iterable[str] | None = None,
                in_place: bool = False, backup: str | os.PathLike[str] | None = None,
                jobs: int | None = 1, force: bool = False, keep_data: bool = False,
                missing: str = "keep", progress: Progress | None = None, ptx: str = "kept",
                max_segments: int | None = None, spirv: str = "kept") -> PackagePruneResult:
    """Prune every library of the wheel ``src`` into the wheel ``dst`` (None: compute only; see the module
    docstring).  ``dst`` may not be ``src`` unless ``in_place``; ``backup``: where ``dst``'s old content is kept;
    ``jobs``: processes to prune the libraries in (1: this one; None: every processor); ``force``: go on past
    a RECORD that does not describe the members; ``keep_data``: the new wheel's bytes in ``result.data``;
    ``missing``: what to do with a library the selection would leave without device code (:data:`MISSING`);
    ``progress(done, total)``: the bytes of the libraries pruned so far, of all to prune; ``ptx``: the PTX
    policy (devbin.packaging.pruning.PRUNE_IR_POLICIES), ``spirv`` the SPIR-V policy; ``max_segments``: the most
    program headers of each pruned library (devbin.packaging.pruning.prune's)."""
    sel = _selection(keep, drop, ptx, max_segments, spirv)
    src_p = Path(src)
    where = str(src)
    inputs = () if in_place else (src_p,)
    if dst is not None:
        check_destination(dst, inputs)
    with exclusive(src_p, "pruning") if in_place and dst is not None else contextlib.nullcontext():
        kept = dst is not None and backup is not None and os.path.lexists(backup)
        result = _prune_wheel(src_p, where, sel, dst, inputs, None if kept else backup, jobs, force, keep_data,
                              missing, progress)
        if kept:
            assert dst is not None and backup is not None
            result.notes.append(kept_already(dst, backup))
    return result


def _prune_wheel(src_p: Path, where: str, sel: Selection, dst: str | os.PathLike[str] | None,
                 inputs: tuple[Path, ...], backup: str | os.PathLike[str] | None, jobs: int | None, force: bool,
                 keep_data: bool, missing: str, progress: Progress | None = None) -> PackagePruneResult:
    """:func:`prune_wheel`'s work (under the wheel's lock when in place): verify, prune, write."""
    src = where
    result = PackagePruneResult("wheel", src_p.stat().st_size, 0)
    gc.collect()  # scans' image records hold cycles that keep a member's bytes (a caller's first-image check)
    written: list[str] = []  # the writer's notes, after the libraries' (as the report always had them)
    with zipmember.open_zip(str(src_p), where) as zf:
        checked = _verified(zf, where, force, result.notes)
        libs = _libraries(src_p, where)
        gc.collect()  # the same after the scan of the libraries: its last member's bytes (~a library)
        if not libs:
            raise UsageError(f"{src}: no device image in the wheel; nothing to prune")
        whys = _plan(sel, libs, where, missing)
        sizes = {i.filename: i.file_size for i in zf.infolist() if not zipmember.is_folder(i)}
        result.installed_before = sum(sizes.values())
        todo = [(name, lib.address) for name, lib in libs.items() if not whys[name]]
        weights = [sizes.get(name, 0) for name, _ in todo]
        done = ByteProgress(progress, weights) if progress is not None else None
        # Each worker opens the wheel itself: a zip file object shared over fork shares its file offset.
        parent = os.getpid()
        pruned = ordered_map(lambda item: _prune_member(src_p, item[0], item[1], sel, parent), todo,
                             jobs=pool_jobs(jobs, weights, MIN_PARALLEL_BYTES), weights=weights)

        def library(name: str) -> PruneResult | None:
            """The library ``name`` pruned (None: it stays), as the writer reaches it (the libraries are in
            member order: the scan's), its outcome kept without its bytes."""
            why = whys[name]
            if why:
                result.files.append(FileOutcome(name, sizes[name], None, why))
                result.notes.append(f"{src}!{name}: {why}")
                return None
            size, r, changed = next(pruned)
            if done is not None:
                done.file_done()
            result.files.append(FileOutcome(name, size, r.released()))
            result.notes.extend(r.notes)
            return r if changed else None

        with _finishing(pruned):
            if dst is not None:
                with atomic_output(dst, inputs=inputs, mode=src_p.stat().st_mode & 0o777, backup=backup) as out:
                    result.installed_after = _write_wheel(zf, checked, libs.keys(), library, written, where, out)
                result.output_size = out.size
            elif keep_data:
                buf = io.BytesIO()
                result.installed_after = _write_wheel(zf, checked, libs.keys(), library, written, where, buf)
                result.data = buf.getvalue()
                result.output_size = len(result.data)
            else:
                sink = Sink()
                result.installed_after = _write_wheel(zf, checked, libs.keys(), library, written, where, sink)
                result.output_size = sink.size
    result.notes.extend(written)
    if keep_data and dst is not None:
        result.data = Path(dst).read_bytes()
    return result


def _verified(zf: zipfile.ZipFile, where: str, force: bool, notes: list[str]) -> wheel.Verified:
    """The wheel checked (:func:`devbin.formats.wheel.verify`); UsageError naming the first problem that
    stops the rewrite (every one, or without ``force`` the fatal ones only); the others as notes."""
    checked = wheel.verify(zf, where)
    stop = checked.fatal if force else checked.problems
    if stop:
        first = stop[0]
        more = f" (and {len(stop) - 1} more problem{'s' if len(stop) > 2 else ''})" if len(stop) > 1 else ""
        go_on = "" if first.fatal else " (--force to go on)"
        raise UsageError(f"{first.line(where)}{more}; refusing to rewrite the wheel{go_on}")
    notes.extend(f"{p.line(where)}; --force: the new RECORD describes the members as they are"
                 for p in checked.problems)
    return checked


@contextlib.contextmanager
def _finishing(results: Iterator[T]) -> Iterator[Iterator[T]]:
    """The results of :func:`ordered_map`, its pool shut down on leaving, also on an error."""
    try:
        yield results
    finally:
        close = getattr(results, "close", None)  # a generator's: cancels what has not started
        if close is not None:
            close()


def _prune_member(wheel_path: Path, name: str, at: Address, sel: Selection,
                  parent: int) -> tuple[int, PruneResult, bool]:
    """The member ``name`` of ``wheel_path`` pruned (where ``jobs`` puts it): its size, the detached result and
    whether its bytes changed.  The member is inflated a piece at a time into an unnamed temporary file and
    pruned mapped from there (:func:`devbin.formats.zipmember.spill`, as the scan reads a large member: its
    size and CRC-32 checked as it comes), so that neither it nor the pruned library is ever held whole in
    this process's memory: the result's :attr:`~PruneResult.mapped` holds the new bytes, read back a piece at
    a time as they are written into the wheel.  A worker process (not ``parent``) sends the new bytes back
    instead (a mapped file does not cross processes)."""
    with zipfile.ZipFile(wheel_path) as zf:
        info = zf.getinfo(name)
        try:
            source = zipmember.spill(zf, info, str(at))
        except OSError:  # no room for the temporary file (a full disk, a file-size limit): in memory
            data = bytes(zipmember.read(zf, info))
            r = prune(data, keep=sel.keep, drop=sel.drop, at=at, require_match=False, ptx=sel.ptx, spirv=sel.spirv,
                      max_segments=sel.max_segments)
            return len(data), r.detached(), r.output_size != len(data) or r.data != data
    try:
        r = prune(source, keep=sel.keep, drop=sel.drop, at=at, require_match=False, ptx=sel.ptx, spirv=sel.spirv,
                  max_segments=sel.max_segments)
        changed = r.output_size != source.size or not _same(_bytes_of(r), source.data)
        if r.mapped is not None and os.getpid() != parent:
            r = replace(r, data=bytes(r.mapped.data), mapped=None, written_size=None)
        return source.size, r.detached(), changed
    finally:
        source.close()


def _bytes_of(r: PruneResult) -> Buffer:
    """The pruned file's bytes: ``data``, or the map of the file it was written to."""
    return r.mapped.data if r.mapped is not None else r.data


def _same(a: Buffer, b: Buffer) -> bool:
    """Whether ``a`` and ``b`` (of one length) hold the same bytes, compared a piece at a time (each piece of a
    mapped file given back once compared)."""
    x, y = memoryview(a).cast("B"), memoryview(b).cast("B")
    try:
        for at in range(0, len(x), _PIECE):
            if x[at:at + _PIECE] != y[at:at + _PIECE]:
                return False
            if at % (64 * _PIECE) == 0:
                release(a)
                release(b)
        return True
    finally:
        release(a)
        release(b)


def _pieces_of(r: PruneResult, also: Callable[[memoryview], object]) -> Iterator[memoryview]:
    """The pruned file a piece at a time, each piece passed to ``also`` (the RECORD hash) first; the pages of a
    mapped file given back as they are read (devbin.binary.mapped.release)."""
    data = memoryview(_bytes_of(r)).cast("B")
    for at in range(0, len(data), _PIECE):
        piece = data[at:at + _PIECE]
        also(piece)
        yield piece
        if r.mapped is not None and at % (64 * _PIECE) == 0:
            r.mapped.release()
    if r.mapped is not None:
        r.mapped.release()


def _write_wheel(zf: zipfile.ZipFile, checked: wheel.Verified, libraries: Iterable[str],
                 library: Callable[[str], PruneResult | None], notes: list[str], where: str,
                 out: IO[bytes] | Sink | Output) -> int:
    """The new wheel written to ``out`` (a seekable file object) as it is made
    (:class:`devbin.formats.zipwrite.ZipWriter`): every member of ``zf`` in its order, a library's new bytes
    (``library(name)``, called once per library as it is reached; None: it stays) compressed as they are
    read (from the mapped file prune wrote them to, a piece at a time), or else the member's compressed
    bytes copied as they are, then RECORD (rows of the new bytes, or of the hashes
    :func:`devbin.formats.wheel.verify` took of the members as it read them, checking their CRC-32).
    Returns the installed size of the new wheel (its members' uncompressed sizes summed)."""
    libraries = set(libraries)
    record = checked.record
    installed = 0
    folder = record.rsplit("/", 1)[0] + "/"
    rows: list[tuple[str, str, str]] = []
    assert isinstance(zf.filename, str)
    zo = ZipWriter(out)
    with open(zf.filename, "rb") as src:
        for info in zf.infolist():
            name = info.filename
            if name == record:
                continue
            if zipmember.is_folder(info):  # a folder entry: written empty, no RECORD row (wheel pack lists files only)
                zo.add(info, b"")
                continue
            if name.startswith(folder) and name[len(folder):] in wheel.SIGNATURES:
                notes.append(f"{where}!{name}: the RECORD signature no longer matches; left out")
                continue
            new = library(name) if name in libraries else None
            if new is not None:
                hasher = hashlib.sha256()
                zo.add_pieces(info, _pieces_of(new, hasher.update), new.output_size)
                if new.mapped is not None:
                    new.mapped.close()
                rows.append((name, "sha256=" + wheel.encode_digest(hasher.digest()), str(new.output_size)))
                installed += new.output_size
                continue
            digest, size = checked.digests[name]
            zo.copy(info, src, f"{where}!{name}")
            rows.append((name, digest, str(size)))
            installed += info.file_size
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerows([*rows, (record, "", "")])
    new_record = text.getvalue().encode("utf-8")
    zo.add(zf.getinfo(record), new_record)
    zo.close()
    return installed + len(new_record)


def prune_tree(root: str | os.PathLike[str], *, keep: str | Iterable[str] | None = None,
               drop: str | Iterable[str] | None = None, dry_run: bool = False,
               backup: bool = True, jobs: int | None = 1, missing: str = "keep",
               progress: Progress | None = None, ptx: str = "kept",
               max_segments: int | None = None, spirv: str = "kept") -> PackagePruneResult:
    """Prune every file under the folder ``root`` in place (see the module docstring); ``dry_run``: write
    nothing; ``jobs``: processes to prune the files in (1: this one; None: every processor); ``missing``:
    as :func:`prune_wheel`'s; ``progress(done, total)``: the bytes of the files pruned so far, of all to prune;
    ``ptx``, ``spirv``, ``max_segments``: as :func:`prune_wheel`'s."""
    sel = _selection(keep, drop, ptx, max_segments, spirv)
    if dry_run:
        result = _prune_tree(Path(root), os.fspath(root), sel, None, jobs, missing, progress, dry_backup=backup)
        if os.path.lexists(os.path.join(root, JOURNAL_NAME)):
            result.notes.insert(0, f"{os.path.join(root, JOURNAL_NAME)}: an in-place prune was interrupted here; "
                                   "the next --in-place prune of the folder puts its files back first")
        return result
    with exclusive(root, "pruning"):
        notes: list[str] = []
        recover(os.fspath(root), notes)
        result = _prune_tree(Path(root), os.fspath(root), sel, backup, jobs, missing, progress)
        result.notes[:0] = notes
        return result


def _prune_tree(root_p: Path, root: str, sel: Selection, backup: bool | None, jobs: int | None,
                missing: str, progress: Progress | None = None, *, dry_backup: bool = True) -> PackagePruneResult:
    """:func:`prune_tree` under the folder's lock (``backup`` None: a dry run, nothing written, the folder's
    size after counted as with ``dry_backup``)."""
    libs = _libraries(root_p, root)
    if not libs:
        raise UsageError(f"{root}: no device image under the folder; nothing to prune")
    result = PackagePruneResult("folder", 0, 0)
    planned: list[tuple[str, PruneResult]] = []
    whys = _plan(sel, libs, root, missing)
    order = sorted(libs.items())
    todo = [path for path, lib in order if not whys[path]]
    if backup is not None:  # a `devbin prune FILE --in-place` of one of them holds that file's lock
        for path in todo:
            refuse_if_held(path)
    weights = [_size(path) for path in todo]
    done = ByteProgress(progress, weights) if progress is not None else None
    # All computed before anything is written, in up to ``jobs`` processes.
    pruned: Iterator[PruneResult] = ordered_map(
        lambda path: prune_file(path, None, keep=sel.keep, drop=sel.drop, require_match=False,
                                ptx=sel.ptx, spirv=sel.spirv, max_segments=sel.max_segments).detached(), todo,
        jobs=pool_jobs(jobs, weights, MIN_PARALLEL_BYTES), weights=weights)
    with _finishing(pruned):
        for path, _ in order:
            size = os.path.getsize(path)
            why = whys[path]
            if why:
                result.files.append(FileOutcome(path, size, None, why))
                result.notes.append(f"{path}: {why}")
                continue
            r = next(pruned)
            if done is not None:
                done.file_done()
            result.files.append(FileOutcome(path, size, r))
            result.notes.extend(r.notes)
            if r.changed:
                planned.append((path, r))
    result.input_size = sum(f.size for f in result.files)
    result.output_size = sum(f.result.output_size if f.result else f.size for f in result.files)
    result.installed_before = folder_bytes(root_p)
    result.installed_after = result.installed_before - result.bytes_saved + record_growth(
        root_p, {path: len(r.data) for path, r in planned}, backup=dry_backup if backup is None else backup)
    if backup is None:
        return result
    # Every new file, RECORDs included, computed (and every RECORD read) before the first write.
    changes = [Change(path, r.data, os.stat(path).st_mode & 0o777, backup) for path, r in planned]
    backups = {os.path.realpath(c.path): _backup_row(c.path, hashed=True) for c in changes if c.backup}
    records = _update_records(root_p, {os.path.realpath(p): (record_hash(r.data), str(len(r.data)))
                                       for p, r in planned}, backups)
    made = set(replace_all(root, changes + records, result.notes))
    for c in changes:
        if c.path + BACKUP_SUFFIX in made:
            result.notes.append(f"{c.path}: the original kept as {c.path}{BACKUP_SUFFIX}")
    result.notes.extend(f"{c.path}: rows of the pruned files updated" for c in records)
    return result


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


#: A RECORD hash of the length sha256's has (:func:`record_growth` counts bytes, not hashes).
_ANY_HASH = "sha256=" + "A" * 43


def _backup_row(path: str, *, hashed: bool) -> tuple[str, str]:
    """The RECORD hash and size of what ``path``'s backup holds once the prune is written: the backup that
    exists (it stays: the first original), else ``path`` as it is now; ``hashed=False``: a hash of the same
    length, the file not read."""
    kept = path + BACKUP_SUFFIX
    source = kept if os.path.lexists(kept) else path
    h = hashlib.sha256()
    try:
        if not hashed:
            return _ANY_HASH, str(os.path.getsize(source))
        with open(source, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
            size = f.tell()
    except OSError as e:
        raise UsageError(f"{source}: cannot read it: {e.strerror or e}; nothing was changed") from None
    return "sha256=" + wheel.encode_digest(h.digest()), str(size)


def record_growth(root: str | os.PathLike[str], sizes: dict[str, int], *, backup: bool = True) -> int:
    """How many bytes the ``*.dist-info/RECORD`` files under the folder ``root`` grow by when the files
    ``sizes`` names (path -> new size) are pruned in place (:func:`prune_tree`: their rows' sizes, and with
    ``backup`` a row per backup): with the files' own change, what the folder's size changes by."""
    changed = {os.path.realpath(p): (_ANY_HASH, str(n)) for p, n in sizes.items()}
    backups = {os.path.realpath(p): _backup_row(p, hashed=False) for p in sizes} if backup else {}
    return sum(len(c.data) - os.path.getsize(c.path) for c in _update_records(Path(root), changed, backups))


def _update_records(root: Path, changed: dict[str, tuple[str, str]],
                    backups: dict[str, tuple[str, str]]) -> list[Change]:
    """The new content of every ``*.dist-info/RECORD`` under ``root`` with a row naming a changed file
    (``changed``: its real path -> its new RECORD hash and size).  RECORDs are read as bytes and line by
    line: a line that is not UTF-8, holds a NUL or is not one CSV row of at least three fields stays
    byte-identical, as does every
    row naming no changed file (with its own line ending); a RECORD none of whose rows changes (another
    package's) is not written.  A RECORD that cannot be read stops the prune before anything is written.

    ``backups`` (a changed file's real path -> the RECORD hash and size of its backup): the backup
    belongs to the package that lists the file, so that ``pip uninstall`` removes it with the package
    (pip removes what RECORD names): a row ``<the file's row path>.devbin-backup,<hash>,<size>`` follows
    the file's row, or the backup's row already there (an earlier prune's) is given those values."""
    if not changed:
        return []
    backup_rows = {lib + BACKUP_SUFFIX: row for lib, row in backups.items()}
    out: list[Change] = []
    for record in sorted(root.glob("**/*.dist-info/RECORD")):
        base = record.parent.parent
        try:
            data = record.read_bytes()
            mode = record.stat().st_mode & 0o777
        except OSError as e:
            raise UsageError(f"{record}: cannot read the RECORD: {e.strerror or e}; nothing was changed") from None
        lines = data.splitlines(keepends=True)
        rows = [_parse_row(line, base) for line in lines]
        listed = {row[2] for row in rows if row is not None}
        new: list[bytes] = []
        hit = False
        for line, parsed in zip(lines, rows, strict=True):
            if parsed is None:
                new.append(line)
                continue
            row, ending, where = parsed
            values = changed.get(where) or backup_rows.get(where)
            if values is not None and tuple(row[1:3]) != values:
                row[1], row[2] = values
                line, hit = _csv_line(row) + ending, True
            kept = where + BACKUP_SUFFIX
            if where in backups and kept not in listed and os.path.realpath(base / (row[0] + BACKUP_SUFFIX)) == kept:
                # the file's own row ends its line; a last line without one gets one
                new.append(line if ending else line + b"\n")
                line, hit = _csv_line([row[0] + BACKUP_SUFFIX, *backups[where]]) + ending, True
                listed.add(kept)
            new.append(line)
        if hit:
            out.append(Change(str(record), b"".join(new), mode))
    return out


def _parse_row(line: bytes, base: Path) -> tuple[list[str], bytes, str] | None:
    """A RECORD ``line`` as its CSV fields, its line ending and the real path of the file it names; None
    for a line that is not UTF-8, holds a NUL or is not one CSV row of at least three fields."""
    body = line.rstrip(b"\r\n")
    try:
        text = body.decode("utf-8")
        if "\0" in text:
            return None
        rows = list(csv.reader([text]))
        if len(rows) != 1 or len(rows[0]) < 3:
            return None
        return rows[0], line[len(body):], os.path.realpath(base / rows[0][0])
    except (UnicodeDecodeError, csv.Error, ValueError, OSError):
        return None


def _csv_line(row: list[str]) -> bytes:
    text_out = io.StringIO()
    csv.writer(text_out, lineterminator="").writerow(row)
    return text_out.getvalue().encode("utf-8")
