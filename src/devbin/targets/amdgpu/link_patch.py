"""Write propagated resource totals into a linked AMDGPU code object (``ld.lld -shared`` output).

Two places hold a kernel's resources, and a loader reads both (reference §4.4, §5.2):

* the 64-byte kernel descriptor at ``<kernel>.kd`` (ROCr takes private segment size and the
  dynamic-stack bit from here, the hardware the register granules):
  ``private_segment_fixed_size`` (+4), ``COMPUTE_PGM_RSRC1`` (+48) bits 0..5
  ``granulated_workitem_vgpr_count`` and 6..9 ``granulated_wavefront_sgpr_count`` (GFX6-9;
  GFX10+ ignore it and keep 0), ``COMPUTE_PGM_RSRC3`` (+44) bits 0..5 ``accum_offset`` on
  GFX90A/GFX94x (AGPRs start after the arch VGPRs: a callee's higher arch VGPRs move them),
  ``kernel_code_properties`` (+56) bit 11 ``uses_dynamic_stack``;
* the ``NT_AMDGPU_METADATA`` note (the HIP/OpenCL runtimes and LLVM's offload plugin):
  ``.private_segment_fixed_size``, ``.vgpr_count``, ``.sgpr_count``, ``.agpr_count``,
  ``.uses_dynamic_stack`` of the kernel's map.

Granules follow LLVM: ``blocks = ceil(max(1, n) / granule) - 1``, VGPR granule 8 on GFX90A/
GFX94x (arch VGPRs rounded to 4 plus AGPRs) and GFX10+ wave32, else 4; SGPR granule 8.
Numbers never go below what the kernel already had.  The dynamic-stack bit is written as
the totals say, and may be cleared: LLVM sets it for every call that leaves the object, and
once the linker knows the callee that reason is gone (:mod:`devbin.targets.amdgpu.link_facts` decides
when the kernel's own code could still need it).  A kernel compiled without scratch
(``COMPUTE_PGM_RSRC2`` bit 0 clear) cannot be given a private segment after the fact: its code
sets up no scratch registers, so that is an error, not a patch.

Nothing moves.  The note lives in an allocated ``.note`` section covered by ``PT_NOTE`` and the
first ``PT_LOAD``, followed directly by ``.dynsym``: it cannot grow, and changing program
headers or section addresses would change what the loader maps.  So the desc is re-encoded
to fit its slot: only the changed values are re-encoded, each integer no narrower than before
(a fixint stays one byte while the value is below 128), every other byte stays as LLVM wrote
it.  The desc is padded to 4 bytes, so up to 3 bytes of growth fit its slot (``n_descsz``
changes).  When more is needed, and ``ld.lld`` left other metadata notes in the section that
carry no kernels and nothing but ``amdhsa.version``/``amdhsa.target`` (one per input object
without kernels: redundant copies of the kept note's target), those are dropped, the notes
after the grown one move up, and the grown desc fills exactly the bytes freed (small
integers and short strings re-encoded wider than needed, which MessagePack readers accept).  Otherwise
the patch is refused with a :class:`~devbin.errors.UsageError`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Set
from dataclasses import dataclass

from devbin.binary import ByteView, align_up
from devbin.errors import FormatError, UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Section, Symbol
from devbin.targets.amdgpu.descriptor import KD_SIZE, decode_descriptor, vgpr_granule
from devbin.targets.amdgpu.link_facts import KernelTotals, unified_vgprs
from devbin.targets.amdgpu.link_msgpack import MsgpackValue, encode_key, encode_uint, parse, remove_elements, splice
from devbin.targets.amdgpu.mach import decode_flags, gfx_major
from devbin.targets.amdgpu.metadata import NOTE_OWNER, NT_AMDGPU_METADATA

__all__ = ["PATCHED_NOTE_KEYS", "descriptor_fields", "drop_kernels_from_notes", "patch_linked"]

PATCHED_NOTE_KEYS = (".private_segment_fixed_size", ".vgpr_count", ".sgpr_count", ".agpr_count",
                     ".uses_dynamic_stack")
_KCP_DYNAMIC_STACK = 1 << 11
_FMT = "amdgpu-link"


def _blocks(n: int, granule: int) -> int:
    return -(-max(1, n) // granule) - 1


def _gfx10_plus(processor: str) -> bool:
    return (gfx_major(processor) or 0) >= 10


def _kd_offset(elf: ElfFile, sym: Symbol) -> int:
    if not 0 < sym.st_shndx < len(elf.sections):
        raise FormatError(f"{sym.name}: not in a section", fmt=_FMT, value=sym.st_shndx)
    sec: Section = elf.sections[sym.st_shndx]
    rel = sym.st_value - sec.sh_addr
    if sec.sh_type == C.SHT_NOBITS or not 0 <= rel <= sec.sh_size - KD_SIZE or sec.sh_size < KD_SIZE:
        raise FormatError(f"{sym.name}: descriptor outside {sec.name}", fmt=_FMT, value=rel)
    return sec.sh_offset + rel


def descriptor_fields(processor: str, old: bytes, t: KernelTotals, name: str = "") -> bytes:
    """The 64 descriptor bytes ``old`` with ``t`` written in (see the module docstring)."""
    kd = decode_descriptor(ByteView(old, fmt=_FMT, where=f"{name}.kd"), 0, processor=processor)
    private = max(kd.private_segment_fixed_size, t.private_segment)
    if (private or t.dynamic_stack) and not kd.compute_pgm_rsrc2.enable_private_segment and (
            private != kd.private_segment_fixed_size or t.dynamic_stack != kd.uses_dynamic_stack):
        raise UsageError(f"kernel {name!r} was compiled without scratch (COMPUTE_PGM_RSRC2 bit 0 clear); it cannot "
                         f"be given a {private}-byte private segment after compilation", fmt=_FMT)
    rsrc1 = kd.compute_pgm_rsrc1.raw
    vblocks = max(rsrc1 & 0x3F, _blocks(t.vgpr(processor), vgpr_granule(processor, kd.wave32)))
    if vblocks > 0x3F:
        raise UsageError(f"kernel {name!r}: {t.vgpr(processor)} VGPRs do not fit the descriptor", fmt=_FMT)
    rsrc1 = (rsrc1 & ~0x3F) | vblocks
    if not _gfx10_plus(processor):
        sblocks = max(rsrc1 >> 6 & 0xF, _blocks(t.sgpr, 8))
        if sblocks > 0xF:
            raise UsageError(f"kernel {name!r}: {t.sgpr} SGPRs do not fit the descriptor", fmt=_FMT)
        rsrc1 = (rsrc1 & ~(0xF << 6)) | sblocks << 6
    rsrc3 = kd.compute_pgm_rsrc3.raw
    if unified_vgprs(processor):
        accum = max(rsrc3 & 0x3F, _blocks(t.arch_vgpr, 4))
        rsrc3 = (rsrc3 & ~0x3F) | accum
    kcp = kd.kernel_code_properties & ~_KCP_DYNAMIC_STACK | (_KCP_DYNAMIC_STACK if t.dynamic_stack else 0)
    out = bytearray(old)
    struct.pack_into("<I", out, 4, private)
    struct.pack_into("<I", out, 44, rsrc3)
    struct.pack_into("<I", out, 48, rsrc1)
    struct.pack_into("<H", out, 56, kcp)
    return bytes(out)


# -- the note ---------------------------------------------------------------------------------


def _new_values(node: MsgpackValue, t: KernelTotals, processor: str) -> dict[str, int | bool]:
    def old(key: str) -> int:
        v = node.get(key)
        return v.value if v is not None and isinstance(v.value, int) and not isinstance(v.value, bool) else 0

    out: dict[str, int | bool] = {
        ".private_segment_fixed_size": max(old(".private_segment_fixed_size"), t.private_segment),
        ".vgpr_count": max(old(".vgpr_count"), t.vgpr(processor)),
        ".sgpr_count": max(old(".sgpr_count"), t.sgpr),
        ".uses_dynamic_stack": t.dynamic_stack,
    }
    if node.get(".agpr_count") is not None or t.agpr:
        out[".agpr_count"] = max(old(".agpr_count"), t.agpr)
    return out


def _encode(value: int | bool, like: MsgpackValue | None) -> bytes:
    if isinstance(value, bool) and (like is None or like.kind == "bool"):
        return b"\xc3" if value else b"\xc2"
    return encode_uint(int(value), like.width if like is not None and like.kind == "uint" else 1)


def _kernel_maps(root: MsgpackValue) -> list[MsgpackValue]:
    ks = root.get("amdhsa.kernels") if root.kind == "map" else None
    return [k for k in (ks.elements if ks is not None and ks.kind == "array" else ()) if k.kind == "map"]


def _paddable(node: MsgpackValue, out: list[MsgpackValue]) -> list[MsgpackValue]:
    """Every one-byte integer and one-byte-header string (keys too), in document order."""
    for k, v in node.items:
        _paddable(k, out)
        _paddable(v, out)
    for e in node.elements:
        _paddable(e, out)
    short_str = node.kind == "str" and isinstance(node.value, str) and node.width == 1 + len(node.value.encode())
    if short_str or (node.kind == "uint" and node.width == 1):
        out.append(node)
    return out


def _widened(node: MsgpackValue, want: int) -> bytes:
    """``node`` re-encoded up to ``want`` bytes longer (an int gains 1, 2, 4 or 8; a string 1, 2 or 4)."""
    if node.kind == "uint":
        grow = max(g for g in (1, 2, 4, 8) if g <= want)
        return encode_uint(node.value if isinstance(node.value, int) else 0, 1 + grow)
    raw = str(node.value).encode()
    grow = max(g for g in (1, 2, 4) if g <= want)
    return {1: b"\xd9", 2: b"\xda", 4: b"\xdb"}[grow] + len(raw).to_bytes(grow, "big") + raw


def patch_desc(desc: bytes, per_kernel: Mapping[str, KernelTotals], processor: str, *, pad: int = 0) -> bytes:
    """One metadata desc with the totals of the kernels it describes; ``pad`` more bytes by
    widening one-byte integers and short strings that are not otherwise changed (MessagePack
    allows any width; LLVM's reader and ``msgpack`` read them as the same values)."""
    root = parse(desc)
    edits: list[tuple[int, int, bytes]] = []
    touched: set[int] = set()
    for kmap in _kernel_maps(root):
        name = kmap.get(".name")
        t = per_kernel.get(name.value) if name is not None and isinstance(name.value, str) else None
        if t is None:
            continue
        added = b""
        n_added = 0
        for key, value in _new_values(kmap, t, processor).items():
            cur = kmap.get(key)
            if cur is None:
                if value is False or value == 0:
                    continue
                added += encode_key(key) + _encode(value, None)
                n_added += 1
                continue
            if cur.value == value and type(cur.value) is type(value):
                continue
            edits.append((cur.off, cur.end, _encode(value, cur)))
            touched.add(cur.off)
        if n_added:
            count = len(kmap.items) + n_added
            first = kmap.items[0][0].off if kmap.items else kmap.end
            header = bytes([0x80 | count]) if count <= 15 else b"\xde" + count.to_bytes(2, "big")
            edits.append((kmap.off, first, header))
            edits.append((kmap.end, kmap.end, added))
    left = pad
    for n in _paddable(root, []) if pad else ():
        if left == 0:
            break
        if n.off in touched:
            continue
        new = _widened(n, left)
        left -= len(new) - n.width
        edits.append((n.off, n.end, new))
    if left:
        raise UsageError(f"metadata note: cannot pad the desc by {pad} bytes", fmt=_FMT)
    return splice(desc, edits) if edits else desc


@dataclass(slots=True)
class _Note:
    offset: int  # in the section
    namesz: int
    n_type: int
    name: bytes  # padded
    desc: bytes

    @property
    def slot(self) -> int:
        return 12 + len(self.name) + align_up(len(self.desc), 4)

    def is_metadata(self) -> bool:
        return self.n_type == NT_AMDGPU_METADATA and self.name[:self.namesz].rstrip(b"\0") == NOTE_OWNER.encode()

    def emit(self) -> bytes:
        d = self.desc + bytes(align_up(len(self.desc), 4) - len(self.desc))
        return struct.pack("<III", self.namesz, len(self.desc), self.n_type) + self.name + d


def _read_notes(sec: Section) -> list[_Note]:
    v = sec.view
    out: list[_Note] = []
    pos = 0
    while pos + 12 <= len(v):
        namesz, descsz, n_type = v.u32(pos), v.u32(pos + 4), v.u32(pos + 8)
        name = bytes(v.bytes_at(pos + 12, align_up(namesz, 4), "note name"))
        desc = bytes(v.bytes_at(pos + 12 + len(name), descsz, "note desc"))
        note = _Note(pos, namesz, n_type, name, desc)
        out.append(note)
        pos += note.slot
    return out


def drop_kernels_from_notes(sec: Section, kernels: Set[str]) -> bytes | None:
    """The contents of note section ``sec`` (of a relocatable object: it may shrink) with the
    ``amdhsa.kernels`` entries whose ``.name`` is in ``kernels`` cut from every metadata note;
    None when no note lists one of them.  Every other byte is kept as LLVM wrote it."""
    notes = _read_notes(sec)
    changed = False
    for n in notes:
        if not n.is_metadata():
            continue
        root = parse(n.desc)
        listed = root.get("amdhsa.kernels")
        if listed is None or listed.kind != "array":
            continue
        drop = set()
        for i, k in enumerate(listed.elements):
            name = k.get(".name") if k.kind == "map" else None
            if name is not None and name.value in kernels:
                drop.add(i)
        if drop:
            n.desc = remove_elements(n.desc, listed, drop)
            changed = True
    return b"".join(n.emit() for n in notes) if changed else None


def _redundant(note: _Note) -> bool:
    """A metadata note with no kernels and nothing but the version and target (a library object's)."""
    try:
        root = parse(note.desc)
    except FormatError:
        return False
    keys = {k.value for k, _ in root.items}
    kernels = root.get("amdhsa.kernels")
    return keys <= {"amdhsa.kernels", "amdhsa.version", "amdhsa.target"} and (
        kernels is None or not kernels.elements)


def _patch_section(data: bytearray, sec: Section, per_kernel: Mapping[str, KernelTotals],
                   processor: str) -> None:
    notes = _read_notes(sec)
    new = [patch_desc(n.desc, per_kernel, processor) if n.is_metadata() else n.desc for n in notes]
    grown = [i for i, n in enumerate(notes) if align_up(len(new[i]), 4) > align_up(len(n.desc), 4)]
    if not grown:
        for n, d in zip(notes, new, strict=True):
            if d != n.desc:
                at = sec.sh_offset + n.offset
                data[at:at + n.slot] = _Note(n.offset, n.namesz, n.n_type, n.name, d).emit()
        return
    first = grown[0]
    keep = [i for i in range(len(notes)) if i <= first or not (notes[i].is_metadata() and _redundant(notes[i]))]
    region = sum(notes[i].slot for i in range(first, len(notes)))
    after = [_Note(0, notes[i].namesz, notes[i].n_type, notes[i].name, new[i]) for i in keep if i > first]
    need = sum(n.slot for n in after)
    g = notes[first]
    room = region - need - 12 - len(g.name)
    if len(grown) > 1 or room < len(new[first]):
        raise UsageError(f"the metadata note in {sec.name} would grow by {len(new[first]) - len(g.desc)} bytes and "
                         "cannot move (it lies in the loaded image); nothing redundant is left to absorb it",
                         fmt=_FMT)
    desc = patch_desc(g.desc, per_kernel, processor, pad=room - len(new[first]))
    body = _Note(0, g.namesz, g.n_type, g.name, desc).emit() + b"".join(n.emit() for n in after)
    at = sec.sh_offset + g.offset
    if len(body) != region:
        raise UsageError(f"internal error: note region {len(body)} != {region} bytes", fmt=_FMT)
    data[at:at + region] = body


def patch_linked(so_bytes: bytes, per_kernel: Mapping[str, KernelTotals]) -> bytes:
    """``so_bytes`` (a linked AMDGPU code object) with each kernel's totals in its descriptor and
    metadata note; every other byte unchanged.  Kernels not in ``per_kernel`` are left alone."""
    elf = ElfFile(so_bytes, where="linked code object")
    h = elf.header
    if h.e_machine != C.EM_AMDGPU or h.e_type not in (C.ET_DYN, C.ET_EXEC):
        raise UsageError("patch_linked takes a linked AMDGPU code object (ld.lld -shared output)", fmt=_FMT)
    processor = decode_flags(h.e_flags, h.ei_osabi, h.ei_abiversion).processor
    data = bytearray(so_bytes)
    tables = [t for t in (elf.symtab, elf.dynsym) if t is not None]
    for name, t in per_kernel.items():
        sym = next((s for tab in tables if (s := tab.get(f"{name}.kd")) is not None and s.defined), None)
        if sym is None:
            raise UsageError(f"kernel {name!r}: no descriptor symbol {name}.kd in the linked file", fmt=_FMT)
        off = _kd_offset(elf, sym)
        data[off:off + KD_SIZE] = descriptor_fields(processor, bytes(data[off:off + KD_SIZE]), t, name)
    for sec in elf.sections:
        if sec.sh_type == C.SHT_NOTE:
            _patch_section(data, sec, per_kernel, processor)
    return bytes(data)
