"""Where the bytes of device code go: files -> containers -> architectures -> kinds -> functions.

:func:`measure` scans paths with the one scanner (:class:`devbin.images.scan.Scanner`, ``all=True``:
anything that counts bytes reads every image) and gives one :class:`FileSize` per innermost file that
holds device code (a wheel's or an archive's members are files too: ``pkg.whl!lib/libk.so``):

* ``file_bytes``: the file's length; ``device_bytes``: what its device code takes in it: the sizes of
  its device sections (``.nv_fatbin``, ``__nv_relfatbin``, ``.hip_fatbin``, ``.llvm.offloading`` /
  ``SHT_LLVM_OFFLOADING``, ``__CLANG_OFFLOAD_BUNDLE__*``) as the section headers give them, plus any
  fatbin found in another section (``.rodata``, where a wrapper points; its header's size), or the
  whole file when it is a bare container or code object;
* ``images``: every image with the bytes it takes in the file (``stored``) and, for cubins and AMDGPU
  code objects, its functions;
* ``overhead = device_bytes - sum(stored)``: the containers' own bytes (fatbin and entry headers,
  OffloadBinary and bundle headers, padding between containers), split into ``headers`` (fatbin
  headers, known exactly) and the rest.  Every byte of every device section is one or the other.

An entry of a compressed clang offload bundle (CCOB) has no bytes of its own in the file (the bundle is
compressed as a whole): the compressed bundle's bytes are shared out among its entries in proportion
to their uncompressed sizes (``stored_exact`` False), so the sum still holds.

A function's ``size`` is its symbol's ``st_size`` (``STT_FUNC``, defined); what else belongs to it is
given beside it in ``related``: its own sections' file bytes in a cubin (``.nv.constant0.<f>``:
``constant_bank``, other banks ``constant<N>``, ``.nv.info.<f>``: ``nv_info``, ``.rel(a).text.<f>``:
``relocations``, the sm_100+ Mercury copies ``.nv.capmerc.text.<f>``/``.nv.merc.*.<f>``: ``mercury``),
and an AMDGPU kernel's descriptor (the ``<f>.kd`` symbol, ``descriptor``).  Names are demangled with the
``demangle`` library in GNU style (what ``c++filt`` prints); the mangled name is kept.
Symbols are read from the symbol table straight (kind and ``related``: the vendor's
:meth:`~devbin.targets.vendor.Vendor.function_parts`: ``STO_CUDA_ENTRY`` for NVIDIA kernels, a
``.kd`` symbol for AMDGPU ones), without importing each code object's metadata, which sizes do not
need; :mod:`devbin.size.diff` imports them for their resources.

``jobs`` spreads the files over processes (:func:`devbin.images.parallel.ordered_map`; a wheel, an
archive or a library is measured whole by one worker), the results in scan order, the report's warnings
in the order one process gives them.  Duplicates are found across files: one process digests an image
or function only where another one of the same key turns up (:class:`_Twins`); the workers, which cannot
know, digest every one, which gives the same groups.
"""

from __future__ import annotations

import hashlib
import mmap
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import compress, count, repeat
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

from devbin.binary import Buffer, ByteView, budget, mapped
from devbin.errors import DeviceBinaryError
from devbin.formats import magic as M
from devbin.formats.elf import constants as EC
from devbin.formats.elf.reader import ElfFile
from devbin.formats.elf.tables import SH_ADDR, SH_OFFSET
from devbin.images import containers as C
from devbin.images.frame import Frame, Hit
from devbin.images.parallel import default_jobs, effective_jobs, ordered_map
from devbin.images.record import Image
from devbin.images.scan import ByteProgress, Progress, Scanner, ToScan, file_sizes, jobs_for
from devbin.images.scanreport import ScanReport
from devbin.targets.registry import object_kinds, vendor_for_machine

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from devbin.model.resources import Resources  # the model only when --diff asks for resources

__all__ = ["FileSize", "FunctionSize", "ImageSize", "demangle", "functions_of", "measure",
           "measure_bytes"]


@lru_cache(maxsize=1 << 16)
def demangle(name: str) -> str:
    """``name`` as ``c++filt`` prints it (the ``demangle`` library, GNU style); unchanged when it is not
    an Itanium C++ name."""
    if not name.startswith("_Z"):
        return name
    import demangle as _demangle  # a maintained pure-Python demangler; imported only when names are shown

    return _demangle.demangle(name, language="itanium", style="gnu")


@dataclass(slots=True)
class FunctionSize:
    """One function of a code object: its symbol's size and what belongs to it beside its code.

    Not frozen, like the other records here: a frozen dataclass sets each field through
    ``object.__setattr__``, ten times the cost of a plain one, and a wheel has thousands of functions
    (7,800 in nvidia-curand-cu12's: 12 ms against 1.3 ms)."""

    name: str
    kind: str  # "kernel" or "function"
    size: int
    related: tuple[tuple[str, int], ...] = ()
    digest: int = field(default=0, repr=False)  # CRC-32 of its code bytes, for duplicates
    resources: Resources | None = field(default=None, repr=False, compare=False)  # only when asked (--diff)

    @property
    def demangled(self) -> str:
        return demangle(self.name)

    def to_dict(self) -> dict[str, object]:
        return _function_dicts((self,))[0]


def _function_dicts(functions: Iterable[FunctionSize]) -> list[dict[str, object]]:
    """The ``devbin size --json`` keys of each of ``functions`` (an image's thousands in one pass)."""
    return [{"name": f.name, "demangled": demangle(f.name), "size": f.size, "kind": f.kind,
             "related": dict(f.related)} for f in functions]


@dataclass(slots=True)
class ImageSize:
    """One image and the bytes it takes in its file (``stored``: see the module docstring)."""

    image: Image
    stored: int
    size: int  # the bytes as extracted (`devbin extract`, cuobjdump -xelf/-xptx): a compressed entry decoded
    functions: list[FunctionSize] = field(default_factory=list)
    stored_exact: bool = True
    digest: bytes = b""  # sha256 of the bytes it takes in the file (a fatbin entry's payload area), for duplicates
    address: str = ""  # the image's address as text (made once: many reports name it)

    def __post_init__(self) -> None:
        if not self.address:
            self.address = str(self.image.address)

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {**self.image.to_dict(), "address": self.address, "size": self.size,
                                "stored_size": self.stored, "container": self.image.container,
                                "section": self.image.section}
        if not self.stored_exact:
            d["stored_exact"] = False
        d["functions"] = _function_dicts(self.functions)
        return d


@dataclass(slots=True)
class FileSize:
    """One innermost file holding device code, every byte of its device sections accounted for."""

    path: str
    file_bytes: int
    device_bytes: int
    sections: dict[str, int] = field(default_factory=dict)  # device section (or "name+offset" fatbin) -> bytes
    headers: int = 0  # fatbin and fatbin entry headers, inside device_bytes
    images: list[ImageSize] = field(default_factory=list)
    hidden: int = 0  # stored bytes of the images a filter (--arch, --image) left out of ``images``

    @property
    def stored(self) -> int:
        return sum(i.stored for i in self.images)

    @property
    def size(self) -> int:
        return sum(i.size for i in self.images)

    @property
    def overhead(self) -> int:
        return self.device_bytes - self.stored - self.hidden

    def to_dict(self, *, images: bool = True) -> dict[str, object]:
        """The file's keys in ``devbin size --json``; ``images=False``: its images' count instead of them."""
        return {"path": self.path, "file_bytes": self.file_bytes, "device_bytes": self.device_bytes,
                "overhead": self.overhead, "headers": self.headers, "stored_size": self.stored, "size": self.size,
                "hidden": self.hidden, "sections": dict(self.sections),
                "images": [i.to_dict() for i in self.images] if images else len(self.images)}


# --------------------------------------------------------------------------- functions


def _digest(data: Buffer) -> int:
    """A checksum of a function's code bytes: with its name, architecture and size it tells copies apart."""
    return zlib.crc32(data)


def functions_of(elf: ElfFile) -> list[FunctionSize]:
    """The functions of a cubin or an AMDGPU code object, in symbol-table order (see the module docstring),
    each with the checksum of its code."""
    return [FunctionSize(name, kind, size, rel, _digest(code)) for name, kind, size, rel, code in _functions(elf)]


#: One function as :func:`_functions` reads it: name, kind, size, related, the bytes of its code.
_Raw = tuple[str, str, int, tuple[tuple[str, int], ...], Buffer]


def _functions(elf: ElfFile) -> list[_Raw]:
    """The functions (no :class:`FunctionSize` made yet: the caller adds the checksum) and the bytes of
    each one's code, a window on the code object's bytes."""
    st = elf.symtab
    if st is None:
        return []
    c = st.columns
    info, shndx, sizes, values = c.st_info, c.st_shndx, c.st_size, c.st_value
    names_of, file_sizes, headers = elf.section_names, elf.section_file_sizes, elf.section_rows
    nsec = len(names_of)
    rows = [i for i in range(1, len(st)) if info[i] & 0xF == EC.STT_FUNC and 0 < shndx[i] < nsec]
    if not rows:
        return []
    names = st.names(rows)
    vendor = vendor_for_machine(elf.header.e_machine)
    loaded = elf.header.e_type in (EC.ET_EXEC, EC.ET_DYN)
    kernels, related = vendor.function_parts(elf, rows, names) if vendor is not None else ([False] * len(rows), {})
    out: list[_Raw] = []
    whole = elf.view.bytes_at(0, elf.size)  # every section lies inside it (checked at open)
    none: tuple[tuple[str, int], ...] = ()
    for i, name, kernel in zip(rows, names, kernels, strict=True):
        index, size = shndx[i], sizes[i]
        file_size = file_sizes[index]
        code: Buffer = b""
        if file_size:
            h = headers[index]
            start = values[i] - (h[SH_ADDR] if loaded else 0)
            if start >= 0 and start + size <= file_size:
                start += h[SH_OFFSET]
                code = whole[start:start + size]  # inside the section, checked just above
        out.append((name, "kernel" if kernel else "function", size, related.get(name, none), code))
    return out


# --------------------------------------------------------------------------- files


@dataclass(slots=True)
class _Facts:
    """What a file says of itself before its images are read: its length and device sections."""

    file_bytes: int
    device_bytes: int
    sections: dict[str, int]
    bare: bool  # the whole file is device code (a bare container or code object)
    headers: int = 0


def _file_facts(data: Buffer, frame: Frame) -> _Facts:
    view = ByteView(data, where=frame.where)
    n = len(view)
    head = bytes(view.bytes_at(0, min(M.SNIFF, n)))
    if M.detect(head) != M.ELF:
        return _Facts(n, n, {}, True)
    try:
        elf = ElfFile(view, where=frame.where)
    except DeviceBinaryError:
        return _Facts(n, n, {}, True)
    if vendor_for_machine(elf.header.e_machine) is not None:  # a vendor's code object: all device code
        return _Facts(n, n, {}, True)
    sections: dict[str, int] = {}
    for sec in elf.sections:
        name = sec.name
        if sec.file_size and C.device_section(sec):  # a section some container format owns
            sections[name] = sections.get(name, 0) + sec.file_size
    return _Facts(n, sum(sections.values()), sections, False)


class _SizeScanner(Scanner):
    """The one scanner, noting the length and device sections of each file that holds device code
    (:meth:`buffer` is called once per file or member with its bytes; a wrapped image's inner call has
    the same address and is passed through).  A file is read for them only when its first image is found,
    so the host files of an environment without device code cost nothing more than the scan."""

    def __init__(self, report: ScanReport) -> None:
        super().__init__(report, all=True)
        self.facts: dict[str, _Facts] = {}
        self._open: set[str] = set()

    def buffer(self, data: Buffer, frame: Frame, *, depth: int = 0, disk: Path | None = None) -> Iterator[Hit]:
        where = frame.where
        if where in self._open or where in self.facts:
            yield from super().buffer(data, frame, depth=depth, disk=disk)
            return
        self._open.add(where)
        facts = None
        loose: dict[tuple[str, int], C.ContainerFormat] = {}
        try:
            for hit in super().buffer(data, frame, depth=depth, disk=disk):
                if facts is None:
                    facts = self.facts[where] = _file_facts(data, frame)
                image = hit[0]
                fmt = C.format_named(image.container)
                if (not facts.bare and image.section and image.section not in facts.sections and fmt is not None
                        and fmt.measure is not None):
                    loose[(image.section, image.offset)] = fmt
                yield hit
        finally:
            self._open.discard(where)
        if facts is not None and loose:
            # containers the scan found outside the device sections (fatbins in .rodata, where a wrapper points)
            view = ByteView(data, where=where)
            for (section, offset), fmt in sorted(loose.items(), key=lambda kv: kv[0]):
                try:
                    size = fmt.measure(view.sub(offset, len(view) - offset), where)  # type: ignore[misc]
                except DeviceBinaryError:
                    continue
                key = f"{section}+{offset:#x}"
                facts.sections[key] = size
                facts.device_bytes += size


def _with_resources(image: Image, functions: list[FunctionSize]) -> list[FunctionSize]:
    """``functions`` with the resources the vendor importer gives each (``Function.resources``)."""
    co = image.code_object()
    if co is None:
        return functions
    res = {f.name: f.resources for f in co.functions}
    return [replace(f, resources=res.get(f.name)) for f in functions]


def _sha256(data: Buffer) -> bytes:
    return hashlib.sha256(data).digest()


class _Hasher:
    """One thread that takes the SHA-256 of buffers while the caller goes on (hashlib lets go of the
    GIL), started on the first :meth:`submit`: a mapped file's images are digested only where a twin
    turns up (:class:`_Twins`), and then the thread and its module are never needed."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, data: Buffer) -> Future[bytes]:
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor  # only where a digest is taken at once

            self._pool = ThreadPoolExecutor(max_workers=1)
        return self._pool.submit(_sha256, data)

    def __enter__(self) -> _Hasher:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


_ImageKey = tuple[str, str, str, int]
_FunctionKey = tuple[str, str, str, int]


def _function_keys(vendor: str, arch: str, raw: list[_Raw]) -> Iterator[_FunctionKey]:
    """The twin key of each function of ``raw`` (see :class:`_Twins`), made at C speed."""
    return zip(repeat(vendor), repeat(arch), map(itemgetter(0), raw), map(itemgetter(2), raw))


class _Twins:
    """Digests only where a copy may exist.  An image can equal another only if its vendor, kind,
    architecture and stored size do, a function only if its vendor, architecture, name and size do: the
    bytes of an image or function that are a window on a memory-mapped file are kept and digested at the
    end only when another one has the same key.  The bytes a zip member or a compressed entry was decoded
    into are digested at once and let go (a decoded buffer in this thread, not in the hasher's, whose
    queue would hold it for a time no one knows), as every image is in the workers (``eager``: each sees
    only its files), so that one decoded image at a time is held (:mod:`devbin.binary.budget`) and the
    room a later image finds in the budget is the same whatever ``jobs``."""

    def __init__(self, *, eager: bool = False) -> None:
        self.images: dict[_ImageKey, list[tuple[ImageSize, Buffer | None]]] = {}
        self.functions: Counter[_FunctionKey] = Counter()  # how many functions have each key
        self.kept: list[tuple[ImageSize, list[_Raw]]] = []  # images whose functions' code is kept
        self.eager = eager

    def _keep(self, data: Buffer) -> bool:
        """A window on a file mapped as it is (a spilled zip member is decoded bytes: digested at once)."""
        return (not self.eager and isinstance(data, memoryview) and isinstance(data.obj, mmap.mmap)
                and not isinstance(data.obj, mapped.Spilled))

    def image(self, size: ImageSize, stored: Buffer, hasher: _Hasher,
              pending: list[tuple[ImageSize, Future[bytes]]]) -> None:
        i = size.image
        key = (i.vendor, i.kind, i.arch, size.stored)
        if self._keep(stored):
            self.images.setdefault(key, []).append((size, stored))
        elif isinstance(stored, memoryview) and isinstance(stored.obj, budget.Decoded):
            size.digest = _sha256(stored)
            self.images.setdefault(key, []).append((size, None))
        else:
            pending.append((size, hasher.submit(stored)))
            self.images.setdefault(key, []).append((size, None))

    def function_list(self, size: ImageSize, data: Buffer, raw: list[_Raw]) -> list[FunctionSize]:
        """The :class:`FunctionSize` of each of ``raw`` (functions whose code lies in ``data``, the image's
        bytes), the checksum taken now or, where ``data`` is kept, at :meth:`finish` if a twin turns up."""
        i = size.image
        if raw and self._keep(data):
            out = [FunctionSize(name, kind, fsize, rel) for name, kind, fsize, rel, _ in raw]  # crc32(b"") is 0
            self.kept.append((size, raw))
        else:
            out = [FunctionSize(name, kind, fsize, rel, _digest(code)) for name, kind, fsize, rel, code in raw]
        self.functions.update(_function_keys(i.vendor, i.arch, raw))  # counted at C speed
        return out

    def finish(self) -> None:
        """Digest what has a twin; let go of every window kept."""
        for members in self.images.values():
            if len(members) > 1:
                for size, stored in members:
                    if stored is not None:
                        size.digest = _sha256(stored)
        twins = {key for key, n in self.functions.items() if n > 1}
        for size, raw in self.kept:
            i = size.image
            for k in compress(count(), map(twins.__contains__, _function_keys(i.vendor, i.arch, raw))):
                code = raw[k][4]
                if code:
                    f = size.functions[k]
                    size.functions[k] = FunctionSize(f.name, f.kind, f.size, f.related, _digest(code), f.resources)
        self.images.clear()
        self.functions.clear()
        self.kept.clear()


def _account(facts: _Facts, path: str, hits: list[Image], warn: Callable[[str], None], twins: _Twins, *,
             functions: bool, resources: bool = False) -> FileSize:
    fs = FileSize(path, facts.file_bytes, facts.device_bytes, dict(facts.sections))
    containers: set[tuple[int, str, int]] = set()  # (its fixed header's bytes, section, offset) of each container
    ccob: list[ImageSize] = []
    # Digests of members read into memory are taken in a second thread while this one reads the symbol
    # tables (hashlib lets go of the GIL); those of mapped files only where a twin turns up (_Twins).
    with _Hasher() as hasher:
        digests: list[tuple[ImageSize, Future[bytes]]] = []
        for image in hits:
            with budget.current().unit():  # its decoded bytes given back before the next image
                size = ImageSize(image, image.stored_size, image.size)
                n = image.native
                fmt = C.format_named(image.container)
                data: Buffer | None = None  # the image's bytes, decoded once
                stored: Buffer | None = None
                if fmt is not None and n is not None:
                    fs.headers += fmt.entry_header(n)
                    if fmt.container_header:
                        containers.add((fmt.container_header, image.section, image.offset))
                    if fmt.decoded_size(n):
                        try:  # the entry header records the decoded size; what extract writes is trimmed (PTX: its NUL)
                            data = image.data()
                            size.size = len(data)
                        except DeviceBinaryError as e:
                            warn(f"{image.address}: {e}")
                    stored = fmt.stored_bytes(n)
                if fmt is not None and fmt.shares_stored(image):
                    size.stored_exact = False
                    ccob.append(size)
                try:
                    if stored is None:
                        stored = data = image.data()
                    twins.image(size, stored, hasher, digests)
                    if functions and image.kind in object_kinds():  # every vendor's code object
                        if data is None:
                            data = image.data()
                        size.functions = twins.function_list(size, data, _functions(
                            ElfFile(ByteView(data, where=size.address), where=size.address)))
                        if resources:
                            size.functions = _with_resources(image, size.functions)
                except DeviceBinaryError as e:
                    warn(f"{image.address}: {e}")
                size.image = replace(image, native=None)  # the file's bytes are not held past its accounting
                fs.images.append(size)
                data = stored = None  # this frame lets go of them before the block ends
        for size, digest in digests:
            size.digest = digest.result()
    fs.headers += sum(header for header, _, _ in containers)
    if ccob:
        _share_out(fs, ccob)
    return fs


def _share_out(fs: FileSize, ccob: list[ImageSize]) -> None:
    """Give the entries of compressed bundles the device bytes the other images leave, in proportion to
    their uncompressed sizes (largest remainders), so that every byte is someone's."""
    plain = sum(i.stored for i in fs.images if i.stored_exact)
    room = max(fs.device_bytes - plain - fs.headers, 0)
    total = sum(i.size for i in ccob) or 1
    shares = [(room * i.size) // total for i in ccob]
    rest = room - sum(shares)
    order = sorted(range(len(ccob)), key=lambda k: -((room * ccob[k].size) % total))
    for k in order[:rest]:
        shares[k] += 1
    for i, s in zip(ccob, shares, strict=True):
        i.stored = s


def measure(paths: Iterable[str | Path], *, functions: bool = True, progress: Progress | None = None,
            report: ScanReport | None = None, resources: bool = False, jobs: int | None = 1,
            min_bytes: int = 0, client: object = None) -> list[FileSize]:
    """One :class:`FileSize` per file holding device code under ``paths``, in scan order.

    ``functions``: read each code object's symbols (False: images only); ``resources``: also import each
    code object for its functions' :class:`~devbin.model.resources.Resources` (``--diff``).  ``report``
    collects the scan's warnings.  ``jobs``: processes to measure the files in (1: this one; None: every
    processor; files of fewer than ``min_bytes`` in all are measured in this one); the result is the same
    whatever ``jobs``; ``client``: a ``dask.distributed.Client`` whose workers measure them instead, one file a
    task (:mod:`devbin.images.units`; paths may then be URLs), the result the same.  ``progress(done, total)``
    counts the files' bytes (:class:`~devbin.images.scan.ByteProgress`: a wheel's members move it too).  Raises
    OSError for a top-level path that cannot be read."""
    rep = report if report is not None else ScanReport()
    files = _SizeScanner(rep).expand(paths)
    bar = ByteProgress(progress, file_sizes(files)) if progress is not None else None
    jobs = jobs_for(files, jobs, min_bytes)
    n = effective_jobs(default_jobs() if jobs is None else jobs, len(files))
    local = n <= 1 and client is None
    twins = _Twins(eager=not local)  # one process: the digests taken at the end, where a twin turned up
    draw = bar.member if bar is not None and local else None  # a worker draws nothing

    def one(todo: ToScan) -> tuple[list[FileSize], ScanReport]:  # pickled for a Dask worker: plain cells only
        sub = _SizeScanner(ScanReport())
        sub.on_zip_bytes = draw
        return _group(sub, sub.one(todo), functions, resources, twins), sub.rep

    out: list[FileSize] = []
    for sizes, sub_rep in ordered_map(one, files, jobs=n, client=client):
        out.extend(sizes)
        rep.merge(sub_rep)
        if bar is not None:
            bar.file_done()
    twins.finish()
    return out


def measure_bytes(data: Buffer, where: str, *, functions: bool = True,
                  report: ScanReport | None = None) -> list[FileSize]:
    """:func:`measure` of one file's bytes, named ``where``."""
    rep = report if report is not None else ScanReport()
    scanner = _SizeScanner(rep)
    from devbin.images.address import Address
    twins = _Twins()
    out = _group(scanner, scanner.buffer(data, Frame(Address(where))), functions, False, twins)
    twins.finish()
    return out


def _group(scanner: _SizeScanner, hits: Iterator[Hit], functions: bool, resources: bool,
           twins: _Twins) -> list[FileSize]:
    out: list[FileSize] = []
    current: str | None = None
    batch: list[Image] = []

    def flush() -> None:
        if current is not None and batch:
            out.append(_account(scanner.facts[current], current, batch, lambda m: scanner.rep.warn("", m), twins,
                                functions=functions, resources=resources))

    for image, frame in hits:
        where = frame.where
        if where != current:
            flush()
            current, batch = where, []
        batch.append(image)
    flush()
    return out
