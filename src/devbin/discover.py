"""Find every device image in files, folders, ``ar`` archives and zip files (wheels, eggs).

``discover(paths)`` yields one :class:`Found` per device image, in a deterministic
order: paths in the order given, folders walked in sorted name order, members in
archive order, sections in section-table order, fatbins and entries in file order.

Where images are looked for, by the first bytes of each file or member:

* **host ELF** (objects, shared libraries, executables), shared/reference/nvidia-formats.md
  §1.1 and §3:

  - sections ``.nv_fatbin`` (whole-program and ``nvcc -dlink`` output; a linked program
    holds several fatbins back to back, each 8-aligned) and ``__nv_relfatbin`` (``-rdc``
    objects).  Zero bytes between or after the fatbins are section padding and skipped.
  - ``.nvFatBinSegment``: 24-byte ``__fatBinC_Wrapper_t`` records (version 1, or 2 for the
    ``-dlink`` "link" wrapper).  Each is reported in :attr:`ScanReport.wrappers` together
    with the fatbin it points at.  In a relocatable object the pointer on disk is 0 and the
    real target is a relocation at wrapper+8, so it is resolved through the relocation's
    symbol and addend; in executables and libraries it is an address, resolved through the
    section addresses.  A fatbin a wrapper points at that the section walk did not find is
    parsed there and reported.
  - every other ``SHT_PROGBITS`` section (``.rodata``, ``.data`` ...), where libraries keep
    fatbins for ``cuModuleLoadData``: the fatbin magic ``50 ed 55 ba`` is looked for at
    8-aligned addresses, and a hit counts only when the whole fatbin parses, it has at
    least one entry and every entry has the entry version 0x0101 and a known kind, so random
    bytes that happen to hold the magic are not reported.
* **bare cubins** (ELF, ``e_machine`` 190): one :class:`Found` of kind ``elf`` with the SM
  from ``e_flags`` (ABI v8 / OS/ABI 0x41: bits 8..15; older: the low byte).
  **AMDGPU code objects** (``e_machine`` 224) are listed as kind ``amdgpu``.
* **bare fatbins** (one or several back to back).
* **LLVM offloading containers** (the ``container`` field names which; the image
  ``kind`` is decided from the image's bytes, see :func:`_image_kind`):

  - ``.llvm.offloading`` sections (``SHT_LLVM_OFFLOADING`` or that name) of host ELF
    files: LLVM OffloadBinaries back to back; every entry is one image.
  - bare OffloadBinary files (``clang-offload-packager`` output, also back to back),
    container ``offload``.
  - ``.hip_fatbin`` sections: clang offload bundles, plain or compressed (CCOB), back to
    back, each 4096-aligned; container ``.hip_fatbin``.  A linked library has one bundle
    per translation unit there.  The ``.hipFatBinSegment`` wrappers (the NVIDIA layout,
    magic "HIPF") are reported in :attr:`ScanReport.wrappers` like NVIDIA's, and a bundle
    a wrapper points at gets its ``wrapper_version``.
  - ``__CLANG_OFFLOAD_BUNDLE__<id>`` sections of object-type bundles
    (``clang-offload-bundler -type=o`` with a host object); container
    ``__CLANG_OFFLOAD_BUNDLE__``.  The host entry (a 1-byte placeholder: the host object is
    the file itself) is not reported.
  - bare bundles (``__CLANG_OFFLOAD_BUNDLE__`` binary bundles, ``CCOB`` compressed ones),
    container ``bundle``; compressed bundles are opened lazily (only the entry table and each
    image's first bytes are decoded while scanning; an image is decoded when
    :meth:`Found.image_view` asks for it), under :data:`MAX_BUNDLE_SIZE` and the memory budget.

  Image kinds: ``amdgpu`` (an AMDGPU code object, ``e_machine`` 224, as for a bare one),
  ``elf`` (a cubin, ``e_machine`` 190), ``host`` (any other ELF, or a bundle's host
  entry), ``bitcode`` (LLVM bitcode, raw or wrapped), ``ptx``, ``fatbin`` (a CUDA fatbin,
  not opened further), ``spirv``, else ``data``.  Empty host entries of bundles are
  skipped.  ``arch`` is the container's target ID (``gfx90a:xnack-``, ``sm_90``), or,
  when the container names none, the one the image's ``e_flags`` give.  ``bundle_id``
  holds the raw bundle entry ID (``hipv4-amdgcn-amd-amdhsa--gfx90a``), ``triple`` the
  target triple, ``offload_kind`` the producer (``hip``, ``openmp``, ``cuda``...).
  ``fatbin_index``/``fatbin_offset`` count and place the OffloadBinary or bundle in its
  container (the offset of a bundle in the innermost file; 0 for a bare one),
  ``entry_index`` is the entry's index in it.
  Images from these containers come after the NVIDIA ones of the same file, in
  section-table order.
* **ar archives** (regular, BSD, thin): every member, recursively.  Thin members are read
  from disk only when they lie inside the archive's folder (``follow_thin_outside`` lifts
  that); from :func:`discover_bytes` they cannot be read and are reported as warnings.
* **zip files** (``.whl``, ``.egg``, ``.zip``, also a zip inside a zip): members are read
  into memory one at a time, never extracted to disk; a member whose first bytes are no
  known magic is skipped after reading those bytes only.

Display paths: ``dir/file.so``, ``lib.a(k.o)``, ``pkg.whl!torch/lib/libx.so``,
``outer.zip!inner.whl!x.so``.

A corrupt or unreadable member yields nothing and adds a line to
:attr:`ScanReport.warnings`; the scan goes on.  Only a top-level path that cannot be
opened raises (``OSError``).  A file named explicitly that yields no image but warnings
(truncated, corrupt) is also recorded in :attr:`ScanReport.failed`, so a command line can
fail for it while a folder or zip scan (a zip is a folder of files) only warns about the
files it skips.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import stat
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from devbin.binary import Buffer, ByteView, budget
from devbin.detect import (
    AR,
    AR_THIN,
    CUDA_FATBIN,
    ELF,
    OFFLOAD_BINARY,
    OFFLOAD_BUNDLE,
    OFFLOAD_BUNDLE_COMPRESSED,
    WRAPPED,
    detect,
)
from devbin.errors import DeviceBinaryError, FormatError, LimitExceeded, UsageError
from devbin.formats import bundle as _bundle
from devbin.formats import offload as _offload
from devbin.formats.ar import ArchiveFile
from devbin.formats.elf import constants as EC
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.fatbin import Fatbin, FatbinEntry, parse_fatbin, parse_wrapper
from devbin.formats.fatbin import constants as FC
from devbin.formats.fatbin.wrapper import HIP_WRAPPER_MAGIC
from devbin.formats.wrapped import parse_wrapped
from devbin.targets.amdgpu.mach import EF_AMDGPU_MACH, mach_name
from devbin.targets.nvidia.archs import sm_from_e_flags

__all__ = ["ElfImage", "Found", "ScanReport", "WrapperInfo", "discover", "discover_bytes"]

FATBIN_SECTIONS: tuple[str, ...] = (".nv_fatbin", "__nv_relfatbin")
WRAPPER_SECTION = ".nvFatBinSegment"
HIP_WRAPPER_SECTION = ".hipFatBinSegment"
FATBIN_MAGIC = b"\x50\xed\x55\xba"
ZIP_MAGICS: tuple[bytes, ...] = (b"PK\x03\x04", b"PK\x05\x06")

#: Nesting limit (zip in zip in archive ...): deeper members are reported, not opened.
MAX_DEPTH = 12
#: Zip members larger than this are not read (a warning says so).
MAX_MEMBER_SIZE = 8 << 30

#: Cap on a compressed (CCOB) bundle once decompressed.
MAX_BUNDLE_SIZE = 1 << 30

_ZIP_CHUNK = 1 << 24  # a zip member is inflated into its buffer this much at a time
_SNIFF = 24  # the longest magic: __CLANG_OFFLOAD_BUNDLE__
_SCANNED = (ELF, CUDA_FATBIN, AR, AR_THIN, OFFLOAD_BINARY, OFFLOAD_BUNDLE, OFFLOAD_BUNDLE_COMPRESSED, WRAPPED)
_EM_CUDA = 190
_EM_AMDGPU = 224


@dataclass(frozen=True, slots=True)
class ElfImage:
    """Facts of a bare device ELF (a cubin or an AMDGPU code object)."""

    machine: int
    e_type: int
    e_flags: int
    osabi: int
    abi_version: int
    size: int
    arch: str


@dataclass(frozen=True, slots=True)
class Found:
    """One device image.

    ``path`` is the display path of the innermost file; ``container`` where in it the
    image sits (``.nv_fatbin``, ``__nv_relfatbin``, ``.rodata`` or another section name,
    or for a bare cubin/fatbin ``file``, ``ar`` or ``zip`` by what holds it);
    ``fatbin_index`` counts the fatbins of that container from 0 (None for a bare cubin);
    ``fatbin_offset`` is the fatbin's offset in the innermost file; ``entry_index`` the
    entry's index in its fatbin.  ``size`` is the bytes on disk (the payload area of a
    fatbin entry, the whole file of a bare ELF) and ``uncompressed_size`` the image size
    after decompression (equal to ``size`` when stored plain).  ``wrapper_version`` is the
    version of the ``.nvFatBinSegment`` wrapper that points at the fatbin, if one does.

    Images from LLVM containers (``container_format`` ``offload`` or ``bundle``; empty for
    NVIDIA fatbins and bare ELF files) also carry ``triple``, ``bundle_id`` (bundles only)
    and ``offload_kind``; ``fatbin_index``/``fatbin_offset`` then count and place the
    OffloadBinary or bundle.  ``size`` is the image's size in its container; inside a
    compressed bundle that is its size once decompressed, ``compression`` names the
    bundle's method (``zlib``/``zstd``) and ``uncompressed_size`` equals ``size``.
    """

    path: str
    container: str
    kind: str
    arch: str
    size: int
    uncompressed_size: int
    compression: str = "none"
    identifier: str = ""
    fatbin_index: int | None = None
    fatbin_offset: int | None = None
    entry_index: int | None = None
    wrapper_version: int | None = None
    entry: FatbinEntry | None = field(default=None, compare=False, repr=False)
    elf: ElfImage | None = None
    bare: memoryview | None = field(default=None, compare=False, repr=False)  # a bare ELF's bytes
    container_format: str = ""
    triple: str = ""
    bundle_id: str = ""
    offload_kind: str = ""
    image_kind: str = ""  # an OffloadBinary entry's image kind (object, bitcode, cubin, fatbinary, ptx ...)
    metadata: tuple[tuple[str, str], ...] = ()  # key/value pairs: an OffloadBinary's string map, a wrapper's
    payload: memoryview | None = field(default=None, compare=False, repr=False)  # an LLVM container's image
    #: An entry of a compressed bundle, decoded when its image is asked for (never while listing).
    bundle_entry: _bundle.BundleEntry | None = field(default=None, compare=False, repr=False)

    def image_view(self, max_size: int = 1 << 30) -> memoryview | bytes:
        """The image for parsing, zero-copy when stored plain (see ``FatbinEntry.image_view``)."""
        return self._view(max_size, trimmed=False)

    def extract_view(self, max_size: int = 1 << 30) -> memoryview | bytes:
        """What :meth:`image` returns, without copying an image stored plain."""
        return self._view(max_size, trimmed=True)

    def head(self, n: int = 64) -> memoryview | bytes:
        """The image's first ``n`` bytes (fewer when it is shorter); an entry of a compressed bundle
        decodes only those."""
        if self.bundle_entry is not None:
            return self.bundle_entry.head(n)
        return self.image_view()[:n]

    def image(self, max_size: int = 1 << 30) -> bytes:
        """The image's bytes, decompressed: what ``cuobjdump -xelf``/``-xptx`` writes for it."""
        return bytes(self._view(max_size, trimmed=True))

    def _view(self, max_size: int, *, trimmed: bool) -> memoryview | bytes:
        if self.entry is not None:
            return self.entry.extract_view(max_size) if trimmed else self.entry.image_view(max_size)
        if self.bare is not None:
            return self.bare
        if self.bundle_entry is not None:
            if self.bundle_entry.size > max_size:
                raise FormatError(f"{self.container} image of {self.bundle_entry.size} bytes is larger than the "
                                  f"limit of {max_size} bytes", fmt=self.container_format, where=self.path)
            return self.bundle_entry.data
        if self.payload is not None:
            if len(self.payload) > max_size:
                raise FormatError(f"{self.path}: {self.container} image of {len(self.payload)} bytes is larger "
                                  f"than the limit of {max_size} bytes", fmt=self.container_format, where=self.path)
            return self.payload
        raise UsageError(f"{self.path}: no image bytes for this {self.kind} entry")


@dataclass(frozen=True, slots=True)
class WrapperInfo:
    """One 24-byte ``.nvFatBinSegment`` wrapper and the fatbin it points at, or one
    ``.hipFatBinSegment`` wrapper and the offload bundle it points at (``section``).

    ``offset`` is the wrapper's file offset; ``target_section``/``target_offset`` (file
    offset) say where its data pointer leads, or are ``""``/None when it could not be
    resolved; ``found`` says whether a fatbin (a bundle, for HIP) was found there.
    """

    path: str
    index: int
    offset: int
    version: int
    target_section: str
    target_offset: int | None
    found: bool
    section: str = WRAPPER_SECTION


@dataclass
class ScanReport:
    """What a scan noticed besides the images: warnings, wrappers, counts."""

    warnings: list[str] = field(default_factory=list)
    wrappers: list[WrapperInfo] = field(default_factory=list)
    files: int = 0
    members: int = 0
    #: Files named explicitly (not found in a folder) that gave warnings and no image at all:
    #: a truncated or corrupt file the user asked about.  The CLI exits 1 when there are any.
    failed: list[str] = field(default_factory=list)

    def warn(self, path: str, message: str) -> None:
        """Add ``message``, prefixed with ``path`` unless it names the path already (errors do)."""
        self.warnings.append(message if not path or path in message else f"{path}: {message}")


Progress = Callable[[int, int], None]


# --------------------------------------------------------------------------- entry points


def discover(
    paths: Iterable[str | Path],
    *,
    progress: Progress | None = None,
    report: ScanReport | None = None,
    follow_thin_outside: bool = False,
) -> Iterator[Found]:
    """Yield every device image in ``paths`` (files or folders), see the module docstring.

    ``progress(done, total)`` is called with ``done = 0`` first and after each file;
    ``total`` is the number of files, folders expanded.  ``report`` collects warnings and
    wrappers.  Raises ``OSError`` for a top-level path that does not exist or cannot be
    read; problems below it become warnings.  A file named in ``paths`` (not found in a
    folder, not a zip) that yields no image and only warnings is also listed in ``report.failed``.
    """
    rep = report if report is not None else ScanReport()
    files: list[tuple[str, Path, bool]] = []  # display path, path, given explicitly
    for p in paths:
        path = Path(p)
        st = path.stat()  # raises OSError for a missing top-level path
        if stat.S_ISDIR(st.st_mode):
            files.extend((d, f, False) for d, f in _walk(str(p), path, rep))
        else:
            files.append((str(p), path, True))
    scanner = _Scanner(rep, follow_thin_outside)
    total = len(files)
    if progress is not None:
        progress(0, total)
    for done, (display, path, explicit) in enumerate(files, 1):
        rep.files += 1
        warned, images = len(rep.warnings), 0
        try:
            for found in scanner.scan_path(path, display):
                images += 1
                yield found
        except OSError as e:
            if explicit:
                raise
            rep.warn(display, f"cannot read: {e}")
        if explicit and not images and len(rep.warnings) > warned and not scanner.zip_opened:
            rep.failed.append(display)
        if progress is not None:
            progress(done, total)


def discover_bytes(data: Buffer, where: str, *, report: ScanReport | None = None) -> Iterator[Found]:
    """Yield every device image in ``data`` (any of the formats above), named ``where``."""
    rep = report if report is not None else ScanReport()
    yield from _Scanner(rep, False).scan(data, where, origin="file", depth=0, disk=None)


def _walk(display: str, root: Path, rep: ScanReport) -> Iterator[tuple[str, Path]]:
    """Regular files under ``root`` in sorted order; symlinks are not followed (a link inside
    the tree leads to something walked anyway, a link out of it must not be followed)."""
    try:
        with os.scandir(root) as it:
            entries = sorted(it, key=lambda d: d.name)
    except OSError as e:
        rep.warn(display, f"cannot list folder: {e}")
        return
    for ent in entries:
        sub_display = os.path.join(display, ent.name)
        try:
            if ent.is_symlink():
                continue
            if ent.is_dir(follow_symlinks=False):
                yield from _walk(sub_display, Path(ent.path), rep)
            elif ent.is_file(follow_symlinks=False):
                yield sub_display, Path(ent.path)
        except OSError as err:
            rep.warn(sub_display, f"cannot read: {err}")


# --------------------------------------------------------------------------- scanning


class _Scanner:
    def __init__(self, rep: ScanReport, follow_thin_outside: bool) -> None:
        self.rep = rep
        self.follow_thin_outside = follow_thin_outside
        self.zip_opened = False  # the last top-level file was a zip (a folder of files: not in `failed`)

    # -- files on disk ----------------------------------------------------------
    def scan_path(self, path: Path, display: str, origin: str = "file", depth: int = 0) -> Iterator[Found]:
        with open(path, "rb") as f:
            head = f.read(_SNIFF)
            if depth == 0:
                self.zip_opened = head.startswith(ZIP_MAGICS)
            if head.startswith(ZIP_MAGICS):
                yield from self._zip(f, display, depth)
                return
            if _kind(head) is None:
                return
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield from self.scan(mm, display, origin=origin, depth=depth, disk=path)
        finally:
            # Found entries may still hold views into the map; then it goes with them.
            with contextlib.suppress(BufferError):
                mm.close()

    # -- any buffer --------------------------------------------------------------
    def scan(self, data: Buffer, path: str, *, origin: str, depth: int, disk: Path | None) -> Iterator[Found]:
        view = ByteView(data, where=path)
        kind = _kind(bytes(view.bytes_at(0, min(_SNIFF, len(view)))))
        if kind is None:
            return
        if depth > MAX_DEPTH:
            self.rep.warn(path, f"nested more than {MAX_DEPTH} containers deep; not opened")
            return
        if kind == "zip":
            yield from self._zip(io.BytesIO(view.bytes_at(0, len(view))), path, depth)
            return
        try:
            if kind == ELF:
                yield from self._elf(view, path, origin)
            elif kind == CUDA_FATBIN:
                yield from self._bare_fatbins(view, path, origin)
            elif kind in (AR, AR_THIN):
                yield from self._archive(view, path, depth, disk)
            elif kind == OFFLOAD_BINARY:
                yield from self._offload_blobs(view, path, "offload", 0)
            elif kind in (OFFLOAD_BUNDLE, OFFLOAD_BUNDLE_COMPRESSED):
                yield from self._bundles(view, path, "bundle", 0)
            elif kind == WRAPPED:
                yield from self._wrapped(view, path, depth)
        except DeviceBinaryError as e:
            self.rep.warn(path, str(e))

    # -- devbin wrapped single image ------------------------------------------------
    def _wrapped(self, view: ByteView, path: str, depth: int) -> Iterator[Found]:
        """A device image is reported with the wrapper's metadata; a container inside is opened."""
        w = parse_wrapped(view, where=path)
        inner = _kind(bytes(w.image[:_SNIFF]))
        kind, elf_arch = _image_kind(w.image, ptx=(w.get("ImageKind") or "").lower() == "ptx")
        if inner not in (None, ELF) or kind == "host":
            yield from self.scan(w.image, f"{path}!wrapped", origin="wrapped", depth=depth + 1, disk=None)
            return
        yield Found(path=path, container="wrapped", kind=kind, arch=w.get("TargetID") or elf_arch,
                    size=len(w.image), uncompressed_size=len(w.image), fatbin_offset=w.header_size,
                    container_format="wrapped", triple=w.get("Triple") or "", metadata=w.metadata, payload=w.image)

    # -- ar ------------------------------------------------------------------------
    def _archive(self, view: ByteView, path: str, depth: int, disk: Path | None) -> Iterator[Found]:
        ar = ArchiveFile(view, where=path, diag=lambda e: self.rep.warn(path, str(e)))
        for m in ar.files:
            where = ar.member_where(m)
            self.rep.members += 1
            if not m.thin:
                yield from self.scan(m.data, where, origin="ar", depth=depth + 1, disk=None)
                continue
            if disk is None:
                self.rep.warn(where, "thin archive member: its data is outside the archive and cannot be read here")
                continue
            try:
                target = ar.thin_member_path(m, disk, allow_outside=self.follow_thin_outside)
            except DeviceBinaryError as e:
                self.rep.warn(where, f"{e}; not followed")
                continue
            try:
                yield from self.scan_path(target, where, origin="ar", depth=depth + 1)
            except OSError as e:
                self.rep.warn(where, f"cannot read thin member {str(target)!r}: {e}")

    # -- zip ------------------------------------------------------------------------
    def _zip(self, fileobj: IO[bytes], path: str, depth: int) -> Iterator[Found]:
        try:
            zf = zipfile.ZipFile(fileobj)
            infos = zf.infolist()
        except Exception as e:  # zipfile raises many types on corrupt input
            self.rep.warn(path, f"not a readable zip file: {type(e).__name__}: {e}")
            return
        with zf:
            for info in infos:
                if info.is_dir():
                    continue
                where = f"{path}!{info.filename}"
                self.rep.members += 1
                data = self._zip_member(zf, info, where)
                if data is not None:
                    yield from self.scan(data, where, origin="zip", depth=depth + 1, disk=None)

    def _zip_member(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytearray | None:
        """The member's bytes when its first bytes name a format devbin looks into, else None.

        They are inflated into one buffer of the recorded size taken from the memory budget
        (:mod:`devbin.binary.budget`); a member over the budget fails the scan (LimitExceeded)."""
        try:
            with zf.open(info) as fh:
                head = fh.read(_SNIFF)
                if _kind(head) is None:
                    return None
                if info.file_size > MAX_MEMBER_SIZE:
                    self.rep.warn(where, f"member of {info.file_size} bytes is larger than the limit; skipped")
                    return None
                fh.seek(0)  # re-reads the first bytes rather than copying a large member twice
                buf = budget.current().allocate(info.file_size, what="zip member", fmt="zip", where=where)
                n = 0
                with memoryview(buf) as mv:
                    while n < len(buf):
                        got = fh.readinto(mv[n:n + _ZIP_CHUNK])  # type: ignore[attr-defined]  # ZipExtFile
                        if not got:
                            break
                        n += got
                if n < len(buf):
                    del buf[n:]
                return buf
        except LimitExceeded:
            raise
        except Exception as e:  # zipfile/zlib/bz2/lzma errors, encryption
            self.rep.warn(where, f"cannot read zip member: {type(e).__name__}: {e}")
            return None

    # -- bare fatbins ------------------------------------------------------------
    def _bare_fatbins(self, view: ByteView, path: str, origin: str) -> Iterator[Found]:
        fresh = ByteView(view, fmt="fatbin", where=path)
        for index, offset, fb in self._walk_fatbins(fresh, path, path):
            yield from _entries(fb, path, origin, index, offset, None)

    # -- ELF -------------------------------------------------------------------------
    def _elf(self, view: ByteView, path: str, origin: str) -> Iterator[Found]:
        elf = ElfFile(ByteView(view, where=path), where=path, diag=lambda e: self.rep.warn(path, str(e)))
        h = elf.header
        if h.e_machine == _EM_CUDA:
            yield _bare_elf(elf, path, origin, _cuda_arch(h.ei_osabi, h.ei_abiversion, h.e_flags))
            return
        if h.e_machine == _EM_AMDGPU:
            yield _bare_elf(elf, path, origin, _amdgpu_arch(h.e_flags), kind="amdgpu")
            return
        try:
            yield from _HostElf(self.rep, elf, path).scan(self)
        except DeviceBinaryError as e:
            self.rep.warn(path, str(e))
        yield from self._llvm_in_elf(elf, path)

    # -- LLVM offloading containers ---------------------------------------------------
    def _llvm_in_elf(self, elf: ElfFile, path: str) -> Iterator[Found]:
        """``.llvm.offloading``, ``.hip_fatbin`` and ``__CLANG_OFFLOAD_BUNDLE__<id>`` sections."""
        prefix = _bundle.constants.SECTION_PREFIX
        object_bundle = False
        for sec in elf.sections:
            try:
                if not sec.file_size:
                    continue
                if sec.sh_type == _offload.constants.SHT_LLVM_OFFLOADING or sec.name.startswith(
                        _offload.constants.SECTION_NAME):
                    view = sec.view.sub(0, sec.file_size, fmt="offload", where=sec.name)
                    yield from self._offload_blobs(view, path, sec.name, sec.sh_offset)
                elif sec.name == _bundle.constants.HIP_FATBIN_SECTION:
                    view = sec.view.sub(0, sec.file_size, fmt="bundle", where=sec.name)
                    pointed = self._hip_wrappers(elf, path, sec)
                    yield from self._bundles(view, path, sec.name, sec.sh_offset, pointed)
                elif sec.name.startswith(prefix) and len(sec.name) > len(prefix):
                    object_bundle = True
            except DeviceBinaryError as e:
                self.rep.warn(path, f"{sec.name}: {e}")
        if not object_bundle:
            return
        try:
            b = _bundle.bundles_in_elf(elf)
        except DeviceBinaryError as e:
            self.rep.warn(path, str(e))
            return
        for ent in b.entries:
            f = _bundle_found(b, ent, path, prefix, 0, ent.offset, skip_host=True)
            if f is not None:
                yield f

    def _offload_blobs(self, view: ByteView, path: str, container: str, base: int) -> Iterator[Found]:
        """OffloadBinaries back to back in ``view`` (at file offset ``base``); a corrupt one ends the walk."""
        it = _offload.iter_offload_binaries(ByteView(view, fmt="offload", where=container, base=view.base))
        index = 0
        while True:
            try:
                ob = next(it)
            except StopIteration:
                return
            except DeviceBinaryError as e:
                self.rep.warn(path, f"{container}: {e}")
                return
            for oe in ob.entries:
                yield _offload_found(oe, path, container, index, base + ob.offset)
            index += 1

    def _hip_wrappers(self, elf: ElfFile, path: str, hip_fatbin: Section) -> dict[int, int]:
        """``.hipFatBinSegment`` wrappers: each is reported (``found`` when a bundle starts where it
        points); returns ``{offset in .hip_fatbin: wrapper version}``."""
        pointed: dict[int, int] = {}
        host = _HostElf(self.rep, elf, path)
        for i, (off, ver, w_sec, w_off) in enumerate(host._wrappers(HIP_WRAPPER_SECTION, HIP_WRAPPER_MAGIC)):
            found = False
            if w_sec == hip_fatbin.index and w_off is not None:
                view = hip_fatbin.view
                found = view.startswith(_bundle.constants.BUNDLE_MAGIC, w_off) or view.startswith(
                    _bundle.constants.CCOB_MAGIC, w_off)
                if found:
                    pointed[w_off] = ver
            target = elf.sections[w_sec].name if w_sec is not None else ""
            t_off = elf.sections[w_sec].sh_offset + w_off if w_sec is not None and w_off is not None else None
            self.rep.wrappers.append(WrapperInfo(path, i, off, ver, target, t_off, found, HIP_WRAPPER_SECTION))
        return pointed

    def _bundles(self, view: ByteView, path: str, container: str, base: int,
                 pointed: dict[int, int] | None = None) -> Iterator[Found]:
        """Bundles (plain or CCOB) back to back in ``view``, each 4096-aligned; a corrupt one ends the walk.
        ``pointed`` gives the HIP wrapper version of a bundle by its offset in ``view``."""
        it = _bundle.iter_hip_fatbin(ByteView(view, fmt="bundle", where=container, base=view.base),
                                     max_size=MAX_BUNDLE_SIZE, lazy=True)
        index = 0
        while True:
            try:
                b = next(it)
            except StopIteration:
                return
            except DeviceBinaryError as e:
                self.rep.warn(path, f"{container}: {e}")
                return
            ver = (pointed or {}).get(b.offset)
            for be in b.entries:
                f = _bundle_found(b, be, path, container, index, base + b.offset, skip_host=False)
                if f is not None:
                    yield f if ver is None else replace(f, wrapper_version=ver)
            index += 1

    def _walk_fatbins(self, view: ByteView, path: str, label: str) -> Iterator[tuple[int, int, Fatbin]]:
        """Fatbins stored back to back from offset 0 of ``view``; zero padding between them is
        skipped.  Yields ``(index, offset in view, fatbin)``; a corrupt fatbin ends the walk
        with a warning (its size is unknown, so nothing after it can be trusted)."""
        pos = 0
        index = 0
        n = len(view)
        while pos + 4 <= n:
            if not view.startswith(FATBIN_MAGIC, pos):
                nxt = view.find(FATBIN_MAGIC, pos)
                gap_end = n if nxt < 0 else nxt
                if any(view.bytes_at(pos, gap_end - pos)):
                    self.rep.warn(path, f"{label}: bytes that are no fatbin at offset {view.base + pos:#x}; "
                                        "the rest is not read")
                    return
                if nxt < 0:
                    return
                pos = nxt
            try:
                fb = parse_fatbin(view.sub(pos, n - pos), where=f"{label} fatbin #{index}")
            except DeviceBinaryError as e:
                self.rep.warn(path, str(e))
                return
            yield index, pos, fb
            index += 1
            pos += max(fb.size, 8)
            pos += -pos % 8


class _HostElf:
    """The fatbin search in one host ELF (see the module docstring)."""

    def __init__(self, rep: ScanReport, elf: ElfFile, path: str) -> None:
        self.rep = rep
        self.elf = elf
        self.path = path
        # (section index, offset in section) of every fatbin found, with its wrapper version.
        self.seen: dict[tuple[int, int], int | None] = {}
        self.counts: dict[int, int] = {}

    def scan(self, scanner: _Scanner) -> Iterator[Found]:
        elf = self.elf
        wrappers = self._wrappers()
        pointed = {(sec, off): ver for (_, ver, sec, off) in wrappers if sec is not None and off is not None}
        results: list[Found] = []
        for sec in elf.sections:
            if sec.name in FATBIN_SECTIONS and sec.file_size:
                for index, offset, fb in scanner._walk_fatbins(sec.view, self.path, sec.name):
                    results.extend(self._found(sec, index, offset, fb, pointed))
        for sec in elf.sections:
            if self._scannable(sec):
                results.extend(self._scan_section(sec, pointed))
        for key, ver in pointed.items():
            if key not in self.seen:
                results.extend(self._at_pointer(key, ver))
        for i, (off, ver, w_sec, w_off) in enumerate(wrappers):
            target = elf.sections[w_sec].name if w_sec is not None else ""
            t_off = elf.sections[w_sec].sh_offset + w_off if w_sec is not None and w_off is not None else None
            self.rep.wrappers.append(WrapperInfo(self.path, i, off, ver, target, t_off,
                                                 (w_sec, w_off) in self.seen if w_sec is not None else False))
        yield from results

    def _found(self, sec: Section, index: int, offset: int, fb: Fatbin,
               pointed: dict[tuple[int, int], int]) -> list[Found]:
        ver = pointed.get((sec.index, offset))
        self.seen[(sec.index, offset)] = ver
        self.counts[sec.index] = index + 1
        return list(_entries(fb, self.path, sec.name, index, sec.sh_offset + offset, ver))

    @staticmethod
    def _scannable(sec: Section) -> bool:
        return (sec.sh_type == EC.SHT_PROGBITS and sec.file_size >= FC.FATBIN_HEADER_SIZE + FC.ENTRY_HEADER_SIZE
                and sec.name not in (*FATBIN_SECTIONS, WRAPPER_SECTION))

    def _scan_section(self, sec: Section, pointed: dict[tuple[int, int], int]) -> Iterator[Found]:
        """Fatbins at 8-aligned addresses of a data section, accepted only when they validate."""
        view = sec.view
        n = len(view)
        pos = 0
        while pos < n:
            hit = view.find(FATBIN_MAGIC, pos)
            if hit < 0:
                return
            if (sec.sh_addr + hit) % 8:
                pos = hit + 1
                continue
            fb = _strict_fatbin(view, hit, f"{sec.name}+{hit:#x}")
            if fb is None:
                pos = hit + 8
                continue
            yield from self._found(sec, self.counts.get(sec.index, 0), hit, fb, pointed)
            pos = hit + max(fb.size, 8)

    def _at_pointer(self, key: tuple[int, int], ver: int) -> list[Found]:
        """A wrapper points at a fatbin outside the sections walked: parse it there."""
        sec_index, off = key
        sec = self.elf.sections[sec_index]
        try:
            fb = parse_fatbin(sec.view.sub(off, len(sec.view) - off), where=f"{sec.name}+{off:#x}")
        except DeviceBinaryError as e:
            self.rep.warn(self.path, f"fatbin wrapper points at {sec.name}+{off:#x}, which holds no fatbin: {e}")
            return []
        return self._found(sec, self.counts.get(sec_index, 0), off, fb, {key: ver})

    # -- wrappers -----------------------------------------------------------------
    def _wrappers(self, section: str = WRAPPER_SECTION,
                  magic: int = FC.WRAPPER_MAGIC) -> list[tuple[int, int, int | None, int | None]]:
        """``(file offset, version, target section index, offset in it)`` per wrapper."""
        out: list[tuple[int, int, int | None, int | None]] = []
        if not self.elf.header.is64:  # the 24-byte layout is the 64-bit host's; 32-bit hosts are long gone
            return out
        for sec in self.elf.sections:
            if sec.name != section or not sec.file_size:
                continue
            size = FC.WRAPPER_SIZE
            if sec.file_size % size:
                self.rep.warn(self.path, f"{section} size {sec.file_size:#x} is not a multiple of {size}")
            relocs = self._relocations_for(sec)
            for i in range(sec.file_size // size):
                try:
                    w = parse_wrapper(sec.view.sub(i * size, size), where=f"{section}[{i}]", magic=magic)
                except DeviceBinaryError as e:
                    self.rep.warn(self.path, str(e))
                    continue
                target = self._resolve(i * size + 8, w.data_ptr, relocs)
                out.append((sec.sh_offset + i * size, w.version, *target))
        return out

    def _relocations_for(self, sec: Section) -> dict[int, tuple[int, int]]:
        """Relocations applying to ``sec``: offset -> (target section index, offset in it)."""
        elf = self.elf
        out: dict[int, tuple[int, int]] = {}
        for rel_index, relocs in elf.relocation_tables.items():
            rsec = elf.sections[rel_index]
            if rsec.sh_info != sec.index:
                continue
            table = elf.symbol_tables.get(rsec.sh_link)
            for r in relocs:
                if table is None or r.r_sym >= len(table):
                    continue
                sym = table[r.r_sym]
                if not 0 < sym.st_shndx < len(elf.sections):
                    continue
                addend = r.r_addend
                if addend is None:  # SHT_REL: the addend is stored in place
                    try:
                        addend = sec.view.u64(r.r_offset) if elf.header.is64 else sec.view.u32(r.r_offset)
                    except DeviceBinaryError:
                        continue
                out[r.r_offset] = (sym.st_shndx, sym.st_value + addend)
        return out

    def _resolve(self, field_off: int, data_ptr: int,
                 relocs: dict[int, tuple[int, int]]) -> tuple[int | None, int | None]:
        if field_off in relocs:
            idx, off = relocs[field_off]
            return idx, off
        if self.elf.header.e_type == EC.ET_REL or data_ptr == 0:
            return None, None
        for s in self.elf.sections:
            if s.is_alloc and s.file_size and s.sh_addr <= data_ptr < s.sh_addr + s.file_size:
                return s.index, data_ptr - s.sh_addr
        return None, None


# --------------------------------------------------------------------------- helpers


def _kind(head: bytes) -> str | None:
    """The container or image format the first bytes announce, or None."""
    if head.startswith(ZIP_MAGICS):
        return "zip"
    k = detect(head)
    return k if k in _SCANNED else None


def _strict_fatbin(view: ByteView, offset: int, where: str) -> Fatbin | None:
    """The fatbin at ``offset`` when everything in it validates, else None (a scan hit in data)."""
    try:
        fb = parse_fatbin(view.sub(offset, len(view) - offset), where=where)
    except DeviceBinaryError:
        return None
    if fb.header_size != FC.FATBIN_HEADER_SIZE or not fb.entries:
        return None
    for e in fb.entries:
        if e.version != FC.ENTRY_VERSION or e.kind not in FC.KIND_NAMES or (e.offset - view.base - offset) % 8:
            return None
    return fb


def _entries(fb: Fatbin, path: str, container: str, index: int, offset: int,
             wrapper_version: int | None) -> Iterator[Found]:
    for e in fb.entries:
        yield Found(
            path=path, container=container, kind=e.kind_name, arch=e.arch_name, size=e.payload_size,
            uncompressed_size=e.uncompressed_size if e.is_compressed else len(e.raw_payload),
            compression=e.compression, identifier=e.identifier, fatbin_index=index, fatbin_offset=offset,
            entry_index=e.index, wrapper_version=wrapper_version, entry=e,
        )


def _bare_elf(elf: ElfFile, path: str, origin: str, arch: str, kind: str = "elf") -> Found:
    h = elf.header
    info = ElfImage(machine=h.e_machine, e_type=h.e_type, e_flags=h.e_flags, osabi=h.ei_osabi,
                    abi_version=h.ei_abiversion, size=elf.size, arch=arch)
    return Found(path=path, container=origin, kind=kind, arch=arch, size=elf.size, uncompressed_size=elf.size,
                 elf=info, bare=elf.view.bytes_at(0, elf.size))


def _cuda_arch(osabi: int, abi_version: int, flags: int) -> str:
    """SM from a cubin's ``e_flags``: bits 8..15 in ABI v8 (OS/ABI 0x41), else the low byte."""
    return f"sm_{sm_from_e_flags(osabi, abi_version, flags)}"


def _amdgpu_arch(flags: int) -> str:
    return mach_name(flags & EF_AMDGPU_MACH)


# --------------------------------------------------------------------------- LLVM containers

_ELF_MAGIC = b"\x7fELF"
_KIND_BYTES = 64  # what _image_kind reads: the ELF header (e_flags), or a magic
_BITCODE_MAGICS = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")
_SPIRV_MAGIC = b"\x03\x02\x23\x07"


def _image_kind(data: memoryview, *, host: bool = False, ptx: bool = False) -> tuple[str, str]:
    """``(kind, arch from the image)`` of an image found in an LLVM container, by its bytes.

    ``host``: the container says it is a host entry; ``ptx``: it says the image is PTX.
    The arch is ``""`` unless the image is a device ELF whose ``e_flags`` name one.
    """
    v = ByteView(data, fmt="elf")
    if host:
        return "host", ""
    if v.startswith(_ELF_MAGIC):
        try:
            little = v.u8(5) != 2  # EI_DATA: 2 is big-endian
            ev = ByteView(data, fmt="elf", little=little)
            machine = ev.u16(18)
            flags = ev.u32(48 if ev.u8(4) == 2 else 36)  # e_flags by EI_CLASS
            osabi, abi_version = ev.u8(7), ev.u8(8)
        except DeviceBinaryError:
            return "data", ""
        if machine == _EM_AMDGPU:
            return "amdgpu", _amdgpu_arch(flags)
        if machine == _EM_CUDA:
            return "elf", _cuda_arch(osabi, abi_version, flags)
        return "host", ""
    if v.startswith(_BITCODE_MAGICS[0]) or v.startswith(_BITCODE_MAGICS[1]):
        return "bitcode", ""
    if v.startswith(FATBIN_MAGIC):
        return "fatbin", ""
    if v.startswith(_SPIRV_MAGIC):
        return "spirv", ""
    if ptx:
        return "ptx", ""
    return "data", ""


def _offload_found(e: _offload.OffloadEntry, path: str, container: str, index: int, offset: int) -> Found:
    kind, elf_arch = _image_kind(e.image, ptx=e.image_kind == _offload.constants.IMG_PTX)
    return Found(path=path, container=container, kind=kind, arch=e.arch or elf_arch, size=e.image_size,
                 uncompressed_size=e.image_size, fatbin_index=index, fatbin_offset=offset, entry_index=e.index,
                 container_format="offload", triple=e.triple, offload_kind=e.producer,
                 image_kind=e.image_kind_name, metadata=e.strings, payload=e.image)


def _bundle_found(b: _bundle.Bundle, e: _bundle.BundleEntry, path: str, container: str, index: int,
                  offset: int, *, skip_host: bool) -> Found | None:
    """The Found for one bundle entry, or None for a host entry that is empty (or, in an object-type
    bundle, the placeholder standing for the file itself)."""
    bid = e.bundle_id
    if bid.is_host and (skip_host or e.size == 0):
        return None
    kind, elf_arch = _image_kind(e.head(_KIND_BYTES), host=bid.is_host, ptx=bid.triple.startswith("nvptx"))
    return Found(path=path, container=container, kind=kind, arch=bid.target_id or elf_arch, size=e.size,
                 uncompressed_size=e.size, compression=b.compressed.method_name if b.compressed else "none",
                 fatbin_index=index, fatbin_offset=offset, entry_index=e.index, container_format="bundle",
                 triple=bid.triple, bundle_id=e.id, offload_kind=bid.kind,
                 payload=None if e.lazy else e.data, bundle_entry=e if e.lazy else None)
