"""Keep only some architectures of a device binary, as ``nvprune`` and ``lipo -thin`` do.

:func:`prune` takes the bytes of a bare fatbin, a bare LLVM OffloadBinary, a
clang offload bundle (plain or CCOB-compressed), a host ELF (object, shared
library or executable) or a GNU ``ar`` archive, and returns the same kind of
file holding only the selected device images.

**Matching** (``keep``/``drop`` hold names such as ``sm_90``, ``compute_90``,
``gfx90a``, ``gfx90a:xnack+``); ``nvprune -arch`` semantics for NVIDIA:

* ``sm_NN`` (also ``sm_NNa``/``sm_NNf``) matches the cubin for ``sm_NN`` *and* the
  PTX/LTO-IR for ``compute_NN`` (``nvprune -arch sm_90`` keeps both); the
  ``a``/``f`` variant must be the same (``sm_90`` does not match ``sm_90a``);
* ``compute_NN`` matches only the PTX/LTO-IR for ``compute_NN``;
* an AMD processor name without features (``gfx90a``) matches every target ID
  of that processor (``gfx90a``, ``gfx90a:xnack+``, ``gfx90a:sramecc-:xnack-``);
  a target ID with features (``gfx90a:xnack+``) matches only itself;
* an image whose container names no architecture (a bundle's host entry, an
  OffloadBinary entry without ``arch``) is always kept.

The selection must leave at least one device image somewhere in the input;
otherwise the prune is refused (like ``lipo -thin`` with an architecture the
file lacks).

**Containers**

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
* relocatable host object (``ET_REL``): ``.nv_fatbin``/``__nv_relfatbin``,
  ``.llvm.offloading`` and ``.hip_fatbin`` get new contents (containers packed
  back to back at their alignment: 8, 8, 4096) through
  :meth:`~devbin.formats.elf.edit.ElfEditor.replace_relocatable_section`, which
  rewrites the symbols and ``RELA`` addends pointing at container boundaries
  (nvcc's ``fatbinData``; the ``.nvFatBinSegment`` wrapper's relocation);
  ``__CLANG_OFFLOAD_BUNDLE__<id>`` sections of unselected targets are removed.
  The object is then laid out compactly (ElfEditor rule 6), so it shrinks.
* shared library / executable (``ET_DYN``/``ET_EXEC``): the containers sit inside
  a loaded segment and other code refers to their addresses, so nothing moves:
  each pruned container is written at its original offset and the rest of its
  old extent is zero-filled (no stale image remains).  The file keeps its size
  (``file_bytes_saved`` is 0, ``container_bytes_freed`` says what was freed
  inside the sections).  Wrappers keep pointing at the same addresses.
  Shrinking the file is not attempted: nvcc puts ``.nv_fatbin`` in the middle
  of the read-only segment (``.rodata .nv_fatbin __nv_module_id .eh_frame_hdr``),
  so there is no case to shrink in practice.  A ``.hip_fatbin`` bundle that
  shrinks past a 4096 boundary leaves whole zero blocks before the next bundle,
  which devbin's reader skips; clang-offload-bundler reads one bundle at a
  time anyway.
* ``ar`` archive (GNU/System V; BSD and thin archives are refused): every member
  is pruned (members without device code are copied); when anything changed the
  archive is written again with :mod:`devbin.formats.ar.writer` (symbol table
  rebuilt, zero dates, uid/gid 0, mode 644), else the input comes back unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from devbin.binary import ByteView, Emitter, align_up
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
from devbin.errors import DeviceBinaryError, FormatError, UsageError, short
from devbin.formats import bundle as _bundle
from devbin.formats import offload as _offload
from devbin.formats.ar import ArchiveFile
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.formats.bundle.writer import BundleImage, plan_bundle, write_bundle, write_compressed_bundle
from devbin.formats.elf import constants as EC
from devbin.formats.elf.edit import ElfEditor
from devbin.formats.elf.reader import ElfFile, Section
from devbin.formats.fatbin import constants as FC
from devbin.formats.fatbin import parse_fatbin
from devbin.formats.offload.writer import OffloadImage, write_offload_binary

__all__ = ["PruneResult", "PrunedImage", "Selection", "arch_matches", "parse_arch_list", "prune", "prune_file"]

FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_MAX_BUNDLE = 1 << 30
_MAX_DEPTH = 8
_FATBIN_MAGIC = FC.FATBIN_MAGIC.to_bytes(4, "little")


# --------------------------------------------------------------------------- selection


def parse_arch_list(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"sm_80,sm_90"`` (or an iterable of such strings) -> ``("sm_80", "sm_90")``; empty names are errors."""
    parts = [text] if isinstance(text, str) else list(text)
    out: list[str] = []
    for part in parts:
        for name in part.split(","):
            name = name.strip()
            if not name:
                raise UsageError(f"empty architecture name in {part!r}")
            out.append(name)
    if not out:
        raise UsageError("no architecture named")
    return tuple(out)


def _split_nv(name: str) -> tuple[str, str] | None:
    """``sm_90a`` -> ``("sm", "90a")``; None when not an NVIDIA name."""
    for prefix in ("sm_", "compute_", "lto_"):
        if name.startswith(prefix) and name[len(prefix):][:1].isdigit():
            return prefix[:-1], name[len(prefix):]
    return None


def arch_matches(spec: str, arch: str) -> bool:
    """Whether the selection name ``spec`` matches an image's ``arch`` (see the module docstring)."""
    if not arch:
        return False
    s, a = _split_nv(spec), _split_nv(arch)
    if s is not None or a is not None:
        if s is None or a is None or s[1] != a[1]:
            return False
        if s[0] == "sm":
            return a[0] in ("sm", "compute", "lto")
        return a[0] in ("compute", "lto")  # compute_NN / lto_NN name the virtual arch only
    if ":" in spec:
        return spec == arch
    return arch.split(":", 1)[0] == spec


@dataclass(frozen=True)
class Selection:
    """Which architectures stay: ``keep`` (only those) or ``drop`` (all but those), exactly one of them."""

    keep: tuple[str, ...] | None = None
    drop: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if (self.keep is None) == (self.drop is None):
            raise UsageError("give exactly one of keep= and drop=")

    def keeps(self, arch: str) -> bool:
        if not arch:
            return True
        if self.keep is not None:
            return any(arch_matches(s, arch) for s in self.keep)
        return not any(arch_matches(s, arch) for s in self.drop or ())

    @property
    def names(self) -> tuple[str, ...]:
        return self.keep if self.keep is not None else self.drop or ()


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PrunedImage:
    """One device image seen: where (``where``: file/member and container), what, and whether it stays.

    ``size`` is the bytes it takes in its container (a fatbin entry's header and payload; an
    OffloadBinary image; a bundle entry, uncompressed for a compressed bundle).
    """

    where: str
    container: str
    kind: str
    arch: str
    size: int
    kept: bool


@dataclass
class PruneResult:
    """What :func:`prune` did.  ``data`` is the pruned file.

    ``container_bytes_freed`` sums what the containers shrank by (inside their sections);
    ``file_bytes_saved`` is ``input_size - output_size`` (0 for shared libraries and executables).
    """

    data: bytes
    input_size: int
    images: list[PrunedImage] = field(default_factory=list)
    container_bytes_freed: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def output_size(self) -> int:
        return len(self.data)

    @property
    def file_bytes_saved(self) -> int:
        return self.input_size - len(self.data)

    @property
    def changed(self) -> bool:
        return any(not i.kept for i in self.images)

    def saved_by_arch(self) -> dict[str, int]:
        """Bytes of the dropped images, per architecture, sorted by name."""
        out: dict[str, int] = {}
        for i in self.images:
            if not i.kept:
                out[i.arch] = out.get(i.arch, 0) + i.size
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, object]:
        return {
            "input_size": self.input_size,
            "output_size": self.output_size,
            "file_bytes_saved": self.file_bytes_saved,
            "container_bytes_freed": self.container_bytes_freed,
            "saved_by_arch": self.saved_by_arch(),
            "images": [{"where": i.where, "container": i.container, "kind": i.kind, "arch": i.arch,
                        "size": i.size, "kept": i.kept} for i in self.images],
            "notes": list(self.notes),
        }


class _Ctx:
    def __init__(self, sel: Selection) -> None:
        self.sel = sel
        self.images: list[PrunedImage] = []
        self.freed = 0
        self.notes: list[str] = []

    def decide(self, where: str, container: str, kind: str, arch: str, size: int, *, force: bool = False) -> bool:
        kept = force or self.sel.keeps(arch)
        self.images.append(PrunedImage(where, container, kind, arch, size, kept))
        return kept


# --------------------------------------------------------------------------- entry points


def prune(data: bytes | bytearray | memoryview, *, keep: str | Iterable[str] | None = None,
          drop: str | Iterable[str] | None = None, where: str = "input") -> PruneResult:
    """Prune ``data`` (any format in the module docstring) to the selected architectures.

    ``keep``/``drop``: names or comma-separated lists; exactly one.  Raises
    :class:`~devbin.errors.UsageError` for a selection that leaves no device image or a
    file that cannot be pruned, :class:`~devbin.errors.FormatError` for corrupt input.
    """
    sel = Selection(keep=None if keep is None else parse_arch_list(keep),
                    drop=None if drop is None else parse_arch_list(drop))
    ctx = _Ctx(sel)
    raw = bytes(data)
    out = _prune_any(ByteView(raw, where=where), ctx, where, depth=0)
    device = [i for i in ctx.images if i.arch]
    if not ctx.images:
        raise UsageError(f"{where}: no device image found; nothing to prune")
    if device and not any(i.kept for i in device):
        raise UsageError(f"{where}: the selection {','.join(sel.names)} leaves no device image "
                         f"(architectures present: {', '.join(sorted({short(i.arch) for i in device}))})")
    if sel.keep is not None:
        for name in sel.keep:
            if not any(arch_matches(name, i.arch) for i in device):
                ctx.notes.append(f"{name} matches no image in {where}")
    return PruneResult(out, len(raw), ctx.images, ctx.freed, ctx.notes)


def prune_file(src: str | os.PathLike[str], dst: str | os.PathLike[str] | None, *,
               keep: str | Iterable[str] | None = None, drop: str | Iterable[str] | None = None,
               in_place: bool = False) -> PruneResult:
    """Prune the file ``src`` into ``dst`` (None: compute only, write nothing).

    ``dst`` may not be ``src`` (nor another name of it) unless ``in_place``; the output is
    written to a temporary file next to ``dst`` and renamed over it.
    """
    src_p = Path(src)
    data = src_p.read_bytes()
    result = prune(data, keep=keep, drop=drop, where=str(src))
    if dst is None:
        return result
    dst_p = Path(dst)
    if dst_p.exists() and os.path.samefile(src_p, dst_p) and not in_place:
        raise UsageError(f"{dst}: refusing to overwrite the input; pick another output, "
                         "or pass --in-place (in_place=True)")
    tmp = dst_p.with_name(f".{dst_p.name}.devbin-prune.tmp")
    try:
        tmp.write_bytes(result.data)
        mode = src_p.stat().st_mode & 0o777
        os.chmod(tmp, mode)
        os.replace(tmp, dst_p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return result


# --------------------------------------------------------------------------- dispatch


def _prune_any(view: ByteView, ctx: _Ctx, where: str, depth: int) -> bytes:
    if depth > _MAX_DEPTH:
        raise UsageError(f"{where}: nested more than {_MAX_DEPTH} containers deep")
    kind = detect(view)
    if kind == ELF:
        return _prune_elf(view, ctx, where, depth)
    if kind == CUDA_FATBIN:
        return _bare(list(_fatbins(view, ctx, where, "fatbin")), view, ctx, 8, where)
    if kind == OFFLOAD_BINARY:
        return _bare(list(_offloads(view, ctx, where, "offload")), view, ctx, 8, where)
    if kind in (OFFLOAD_BUNDLE, OFFLOAD_BUNDLE_COMPRESSED):
        return _bare(list(_bundles(view, ctx, where, "bundle", 1)), view, ctx, 1, where)
    if kind == AR:
        return _prune_archive(view, ctx, where, depth)
    if kind == AR_THIN:
        raise UsageError(f"{where}: a thin archive holds no member data; prune the member files instead")
    if kind == WRAPPED:
        return _prune_wrapped(view, ctx, where, depth)
    raise UsageError(f"{where}: not a fatbin, OffloadBinary, offload bundle, ELF file or ar archive")


def _prune_wrapped(view: ByteView, ctx: _Ctx, where: str, depth: int) -> bytes:
    """A wrapped image holds one image: nothing to prune, unless that image is itself a container
    (a fatbin, OffloadBinary or bundle), which is pruned and wrapped again with the same metadata."""
    from devbin.formats.wrapped import parse_wrapped, write_wrapped
    w = parse_wrapped(view, where=where)
    inner = ByteView(w.image, where=f"{where}[wrapped]")
    if detect(inner) not in (CUDA_FATBIN, OFFLOAD_BINARY, OFFLOAD_BUNDLE, OFFLOAD_BUNDLE_COMPRESSED):
        target = w.get("TargetID") or w.get("arch") or "one architecture"
        raise UsageError(f"{where}: a wrapped image holds one device image ({target}); there is nothing to prune "
                         "in it (to keep or drop it, keep or drop the file)")
    pruned = _prune_any(inner, ctx, f"{where}[wrapped]", depth + 1)
    if pruned == bytes(w.image):
        return bytes(view.bytes_at(0, len(view)))
    return write_wrapped(pruned, w.metadata, flags=w.flags)


def _bare(pieces: list[_Piece], view: ByteView, ctx: _Ctx, align: int, where: str) -> bytes:
    """A bare file of containers back to back: unchanged -> the input, else the pruned ones packed."""
    if all(len(new) == size for _, size, new in pieces):
        return bytes(view.bytes_at(0, len(view)))
    ctx.freed += sum(size - len(new) for _, size, new in pieces)
    out, _ = _pack(pieces, len(view), align, where)
    return out


# --------------------------------------------------------------------------- containers
#
# Each walker yields (old offset, old size, new bytes) per container found back to back in a view.


_Piece = tuple[int, int, bytes]


def _fatbins(view: ByteView, ctx: _Ctx, where: str, container: str) -> Iterator[_Piece]:
    """Fatbins back to back (8-aligned, zero padding between), each pruned."""
    pos = 0
    n = len(view)
    while pos < n:
        if view.is_zero_from(pos):
            return
        if not view.startswith(_FATBIN_MAGIC, pos):
            if any(view.bytes_at(pos, min(8, n - pos))):
                raise FormatError(f"{where}: {container}: bytes that are no fatbin at offset {pos:#x}",
                                  fmt="fatbin", where=where)
            pos += 8
            continue
        fb = parse_fatbin(view.sub(pos, n - pos), where=f"{where}: {container}+{pos:#x}")
        old = fb.size
        yield pos, old, _prune_fatbin(view.sub(pos, old), ctx, where, container)
        pos = align_up(pos + max(old, 8), 8)


def _prune_fatbin(view: ByteView, ctx: _Ctx, where: str, container: str) -> bytes:
    """One fatbin with the unselected entries left out; kept entries and the header copied verbatim."""
    fb = parse_fatbin(view, where=f"{where}: {container}")
    kept = []
    for e in fb.entries:
        size = e.header_size + e.payload_size
        if ctx.decide(where, container, e.kind_name, e.arch_name, size):
            kept.append(view.bytes_at(e.offset - view.base, size, "fatbin entry"))
    em = Emitter()
    em.write(view.bytes_at(0, 8, "fatbin header"))
    em.pack("Q", sum(len(k) for k in kept))
    em.write(view.bytes_at(16, fb.header_size - 16, "fatbin header"))
    for k in kept:
        em.write(k)
    em.at(fb.header_size + sum(len(k) for k in kept), "end of fatbin")
    return em.getvalue()


def _offloads(view: ByteView, ctx: _Ctx, where: str, container: str) -> Iterator[_Piece]:
    for ob in _offload.iter_offload_binaries(view, where=f"{where}: {container}"):
        keep: list[_offload.OffloadEntry] = []
        for e in ob.entries:
            kind = e.image_kind_name
            if ctx.decide(where, container, kind, e.arch, e.image_size):
                keep.append(e)
        if len(keep) == len(ob.entries):
            new = bytes(view.bytes_at(ob.offset, ob.size))
        elif not keep:
            new = b""
        else:
            imgs = [OffloadImage(bytes(e.image), e.image_kind, e.offload_kind, e.flags, e.strings) for e in keep]
            new = write_offload_binary(imgs, version=ob.version)
        yield ob.offset, ob.size, new


def _bundle_align(b: _bundle.Bundle) -> int:
    """The ``-bundle-align`` that reproduces ``b``'s entry offsets (largest power of two up to 4096)."""
    images = [BundleImage(e.id, bytes(e.data)) for e in b.entries]
    offsets = tuple(e.offset for e in b.entries)
    align = 4096
    while align >= 1:
        plan = plan_bundle(images, align=align, host=None)
        if plan.offsets == offsets:
            return align
        align //= 2
    raise UsageError("bundle: its entry offsets follow no alignment the bundler uses; cannot rewrite it faithfully")


def rewrite_bundle(b: _bundle.Bundle, keep: Sequence[_bundle.BundleEntry]) -> bytes:
    """``b`` written again with the entries ``keep`` (same alignment, compression method and CCOB version)."""
    align = _bundle_align(b)
    raw = write_bundle([BundleImage(e.id, bytes(e.data)) for e in keep], align=align, host=None)
    if b.compressed is None:
        return raw
    h = b.compressed
    if h.version not in (2, 3):
        raise UsageError(f"bundle: compressed bundle version {h.version} cannot be written (2 or 3 only)")
    return write_compressed_bundle(raw, method=h.method_name, version=h.version)


def _bundle_kind(bid: _bundle.BundleId) -> str:
    """What a bundle entry holds, in the words ``devbin list`` uses: host, amdgpu, nvptx, or the arch."""
    if bid.is_host:
        return "host"
    arch = bid.triple.split("-", 1)[0]
    return "amdgpu" if arch == "amdgcn" else arch


def _bundles(view: ByteView, ctx: _Ctx, where: str, container: str, align: int) -> Iterator[_Piece]:
    it = _bundle.iter_hip_fatbin(view, where=f"{where}: {container}", max_size=_MAX_BUNDLE,
                                 align=max(align, 1))
    for b in it:
        keep: list[_bundle.BundleEntry] = []
        for e in b.entries:
            bid = e.bundle_id
            arch = "" if bid.is_host else bid.target_id
            if ctx.decide(where, container, _bundle_kind(bid), arch, e.size, force=bid.is_host):
                keep.append(e)
        unchanged = len(keep) == len(b.entries)
        yield b.offset, b.size, bytes(view.bytes_at(b.offset, b.size)) if unchanged else rewrite_bundle(b, keep)


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


def _section_kind(sec: Section) -> str | None:
    if sec.name in FATBIN_SECTIONS:
        return "fatbin"
    if sec.name == _offload.constants.SECTION_NAME or sec.sh_type == _offload.constants.SHT_LLVM_OFFLOADING:
        return "offload"
    if sec.name == _bundle.constants.HIP_FATBIN_SECTION:
        return "bundle"
    prefix = _bundle.constants.SECTION_PREFIX
    if sec.name.startswith(prefix) and len(sec.name) > len(prefix):
        return "bundle-section"
    return None


def _walk_section(sec: Section, kind: str, ctx: _Ctx, where: str) -> tuple[list[_Piece], int]:
    view = sec.view.sub(0, sec.file_size)
    if kind == "fatbin":
        return list(_fatbins(view, ctx, where, sec.name)), 8
    if kind == "offload":
        return list(_offloads(view, ctx, where, sec.name)), 8
    return list(_bundles(view, ctx, where, sec.name, _bundle.constants.HIP_FATBIN_ALIGN)), \
        _bundle.constants.HIP_FATBIN_ALIGN


def _prune_elf(view: ByteView, ctx: _Ctx, where: str, depth: int) -> bytes:
    elf = ElfFile(view)
    h = elf.header
    if h.e_machine in (190, 224):
        raise UsageError(f"{where}: a bare device ELF holds one architecture; there is nothing to prune in it")
    relocatable = h.e_type == EC.ET_REL and not elf.segments
    if not relocatable and h.e_type not in (EC.ET_DYN, EC.ET_EXEC):
        raise UsageError(f"{where}: ELF type {EC.ET_NAMES.get(h.e_type, h.e_type)} cannot be pruned")
    editor = ElfEditor(elf)
    if relocatable:
        editor.compact_relocatable()
    patched = bytearray(view.bytes_at(0, len(view)))
    in_place_changed = False
    for sec in elf.sections:
        kind = _section_kind(sec)
        if kind is None or not sec.file_size:
            continue
        if kind == "bundle-section":
            bid = _bundle.parse_bundle_id(sec.name[len(_bundle.constants.SECTION_PREFIX):])
            keep = ctx.decide(where, sec.name, _bundle_kind(bid),
                              "" if bid.is_host else bid.target_id, sec.file_size, force=bid.is_host)
            if not keep:
                if not relocatable:
                    raise UsageError(f"{where}: cannot remove {sec.name!r} from a linked file")
                editor.remove_section(sec.index)
                ctx.freed += sec.file_size
            continue
        pieces, align = _walk_section(sec, kind, ctx, f"{where}")
        if all(len(new) == size for _, size, new in pieces):
            continue  # nothing dropped here
        ctx.freed += sum(size - len(new) for _, size, new in pieces)
        if relocatable:
            data, omap = _pack(pieces, sec.file_size, align, where)
            editor.replace_relocatable_section(sec.index, data, omap)
        else:
            _in_place(patched, sec, pieces, align, kind, where)
            in_place_changed = True
    if relocatable:
        return editor.write()
    if in_place_changed:
        ctx.notes.append(f"{where}: linked file: containers pruned in place and zero-filled; the file keeps its "
                         "size")
    return bytes(patched)


def _in_place(buf: bytearray, sec: Section, pieces: list[_Piece], align: int, kind: str, where: str) -> None:
    """Write each pruned container at its old offset and zero the rest of its old extent."""
    for i, (off, size, new) in enumerate(pieces):
        if len(new) > size:
            raise UsageError(f"{where}: {sec.name}+{off:#x}: the pruned container is larger than the original")
        if not new and kind == "offload" and i + 1 < len(pieces):
            raise UsageError(f"{where}: {sec.name}+{off:#x}: dropping a whole OffloadBinary in place would "
                             "leave a gap that readers stop at")
        at = sec.sh_offset + off
        buf[at:at + size] = new + bytes(size - len(new))


# --------------------------------------------------------------------------- ar


def _prune_archive(view: ByteView, ctx: _Ctx, where: str, depth: int) -> bytes:
    errors: list[DeviceBinaryError] = []
    ar = ArchiveFile(view, where=where, diag=errors.append)
    if errors:
        raise errors[0]
    if ar.flavour not in ("gnu", ""):
        raise UsageError(f"{where}: {ar.flavour} archives cannot be written; only GNU/System V ones")
    members: list[ArMember] = []
    changed = False
    for m in ar.files:
        data = bytes(m.data)
        inner = f"{where}({m.name})"
        if detect(ByteView(data)) in (ELF, CUDA_FATBIN, OFFLOAD_BINARY, OFFLOAD_BUNDLE, OFFLOAD_BUNDLE_COMPRESSED,
                                       AR):
            before = len(ctx.images)
            try:
                new = _prune_any(ByteView(data, where=inner), ctx, inner, depth + 1)
            except UsageError as e:
                if "bare device ELF" not in str(e):
                    raise
                new = data
            if any(not i.kept for i in ctx.images[before:]):
                changed = True
                data = new
        members.append(ArMember(m.name, data))
    if not changed:
        return bytes(view.bytes_at(0, len(view)))
    return write_archive(members)
