"""The AMDGPU kernel descriptor: 64 bytes at symbol ``<kernel>.kd`` (``.rodata``, 64-aligned).

On-disk layout (little-endian)::

    off size field
      0   4  group_segment_fixed_size         LDS bytes
      4   4  private_segment_fixed_size       scratch bytes per work-item
      8   4  kernarg_size
     12   4  reserved
     16   8  kernel_code_entry_byte_offset    signed; entry = address of the descriptor + this
     24  20  reserved
     44   4  compute_pgm_rsrc3                GFX90A/GFX94x: accum_offset, tg_split; GFX10+: others
     48   4  compute_pgm_rsrc1
     52   4  compute_pgm_rsrc2
     56   2  kernel_code_properties           bit 10: wave32, bit 11: uses dynamic stack
     58   2  kernarg_preload                  bits 0..6 length, 7..15 offset (in dwords)
     60   4  reserved

In a relocatable object the entry offset is 0 in the bytes: an
``R_AMDGPU_REL64`` at ``kd+0x10`` against the kernel symbol (addend 0x10, so
``S + A - P = S - kd``) fills it at link time; :func:`read_descriptor` applies
that relocation so both ``.o`` and ``.so`` give the entry.

Register counts are stored as *granules* ("blocks minus one"): VGPRs in units
of 4 (GFX6-9, and GFX10+ in wave64), 8 (GFX90A/GFX94x, whose count covers
arch VGPRs and AGPRs together, and GFX10+ in wave32); SGPRs in units of 8 on
GFX6-9 (including VCC/FLAT_SCRATCH/XNACK), while GFX10+ ignores the SGPR field
(every wave gets all SGPRs) and the compiler writes 0 there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from devbin.binary import ByteView
from devbin.errors import FormatError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile, Symbol
from devbin.targets.amdgpu import mach

__all__ = ["KD_SIZE", "KernelDescriptor", "Rsrc1", "Rsrc2", "Rsrc3", "decode_descriptor", "read_descriptor",
           "vgpr_granule"]

KD_SIZE = 64
R_AMDGPU_REL64 = 5

KCP_BITS = {
    0: "enable_sgpr_private_segment_buffer", 1: "enable_sgpr_dispatch_ptr", 2: "enable_sgpr_queue_ptr",
    3: "enable_sgpr_kernarg_segment_ptr", 4: "enable_sgpr_dispatch_id", 5: "enable_sgpr_flat_scratch_init",
    6: "enable_sgpr_private_segment_size", 10: "enable_wavefront_size32", 11: "uses_dynamic_stack",
}


def _bits(v: int, lo: int, n: int) -> int:
    return (v >> lo) & ((1 << n) - 1)


def _family(processor: str) -> str:
    """"gfx9" (GFX6-9 without AGPR unification), "gfx90a" (unified VGPR/AGPR file), "gfx10+"."""
    p = mach.processor(processor)
    if p is not None and p.unified_vgpr:
        return "gfx90a"
    if (mach.gfx_major(processor) or 0) >= 10:
        return "gfx10+"
    return "gfx9"


def vgpr_granule(processor: str, wave32: bool) -> int:
    """VGPRs per unit of ``granulated_workitem_vgpr_count`` (the encoding granule)."""
    fam = _family(processor)
    if fam == "gfx90a":
        return 8
    if fam == "gfx10+":
        return 8 if wave32 else 4
    return 4


@dataclass(frozen=True, slots=True)
class Rsrc1:
    """``COMPUTE_PGM_RSRC1`` fields (bits 29-31 exist on GFX10+ only; 21/23 change meaning on GFX12)."""

    raw: int
    granulated_workitem_vgpr_count: int  # 0..5
    granulated_wavefront_sgpr_count: int  # 6..9
    priority: int  # 10..11
    float_round_mode_32: int  # 12..13
    float_round_mode_16_64: int  # 14..15
    float_denorm_mode_32: int  # 16..17
    float_denorm_mode_16_64: int  # 18..19
    priv: int  # 20
    enable_dx10_clamp: int  # 21 (GFX12: wg_rr_en)
    debug_mode: int  # 22
    enable_ieee_mode: int  # 23 (GFX12: disable_perf)
    bulky: int  # 24
    cdbg_user: int  # 25
    fp16_ovfl: int  # 26 (GFX9+)
    reserved_27_28: int
    wgp_mode: int  # 29 (GFX10+)
    mem_ordered: int  # 30 (GFX10+)
    fwd_progress: int  # 31 (GFX10+)

    @classmethod
    def decode(cls, v: int) -> Rsrc1:
        return cls(v, _bits(v, 0, 6), _bits(v, 6, 4), _bits(v, 10, 2), _bits(v, 12, 2), _bits(v, 14, 2),
                   _bits(v, 16, 2), _bits(v, 18, 2), _bits(v, 20, 1), _bits(v, 21, 1), _bits(v, 22, 1),
                   _bits(v, 23, 1), _bits(v, 24, 1), _bits(v, 25, 1), _bits(v, 26, 1), _bits(v, 27, 2),
                   _bits(v, 29, 1), _bits(v, 30, 1), _bits(v, 31, 1))


@dataclass(frozen=True, slots=True)
class Rsrc2:
    """``COMPUTE_PGM_RSRC2`` fields."""

    raw: int
    enable_private_segment: int  # 0
    user_sgpr_count: int  # 1..5
    enable_trap_handler: int  # 6
    enable_sgpr_workgroup_id_x: int  # 7
    enable_sgpr_workgroup_id_y: int  # 8
    enable_sgpr_workgroup_id_z: int  # 9
    enable_sgpr_workgroup_info: int  # 10
    enable_vgpr_workitem_id: int  # 11..12
    enable_exception_address_watch: int  # 13
    enable_exception_memory: int  # 14
    granulated_lds_size: int  # 15..23 (written by the runtime; 0 in code objects)
    enable_exception_ieee_754_fp: int  # 24..30: invalid, denorm src, div0, overflow, underflow, inexact, int div0
    reserved_31: int

    @classmethod
    def decode(cls, v: int) -> Rsrc2:
        return cls(v, _bits(v, 0, 1), _bits(v, 1, 5), _bits(v, 6, 1), _bits(v, 7, 1), _bits(v, 8, 1),
                   _bits(v, 9, 1), _bits(v, 10, 1), _bits(v, 11, 2), _bits(v, 13, 1), _bits(v, 14, 1),
                   _bits(v, 15, 9), _bits(v, 24, 7), _bits(v, 31, 1))


@dataclass(frozen=True, slots=True)
class Rsrc3:
    """``COMPUTE_PGM_RSRC3``: meaning depends on the processor family; ``None`` where it has no such field.

    GFX90A/GFX94x: accum_offset (bits 0..5; first AGPR = (accum_offset + 1) * 4), tg_split (16).
    GFX10-12: shared_vgpr_count (0..3, GFX10-11), inst_pref_size (4..9 GFX11, 4..11 GFX12),
    trap_on_start (10), trap_on_end (11), image_op (31, GFX11+).
    """

    raw: int
    accum_offset: int | None = None
    tg_split: int | None = None
    shared_vgpr_count: int | None = None
    inst_pref_size: int | None = None
    trap_on_start: int | None = None
    trap_on_end: int | None = None
    image_op: int | None = None

    @classmethod
    def decode(cls, v: int, processor: str) -> Rsrc3:
        fam = _family(processor)
        if fam == "gfx90a":
            return cls(v, accum_offset=_bits(v, 0, 6), tg_split=_bits(v, 16, 1))
        if fam == "gfx10+":
            major = mach.gfx_major(processor)
            gfx12, gfx11 = major == 12, major == 11
            return cls(v, shared_vgpr_count=None if gfx12 else _bits(v, 0, 4),
                       inst_pref_size=_bits(v, 4, 8) if gfx12 else _bits(v, 4, 6) if gfx11 else None,
                       trap_on_start=_bits(v, 10, 1), trap_on_end=_bits(v, 11, 1),
                       image_op=_bits(v, 31, 1) if gfx11 or gfx12 else None)
        return cls(v)


@dataclass(frozen=True, slots=True)
class KernelDescriptor:
    """A decoded kernel descriptor.  ``entry`` is the entry address (section-relative in a ``.o``)."""

    symbol: str
    address: int
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    reserved0: int
    kernel_code_entry_byte_offset: int
    reserved1: bytes
    compute_pgm_rsrc3: Rsrc3
    compute_pgm_rsrc1: Rsrc1
    compute_pgm_rsrc2: Rsrc2
    kernel_code_properties: int
    kernarg_preload: int
    reserved2: int
    entry: int | None
    entry_symbol: str | None
    processor: str

    @property
    def wave32(self) -> bool:
        return bool(self.kernel_code_properties & (1 << 10))

    @property
    def uses_dynamic_stack(self) -> bool:
        return bool(self.kernel_code_properties & (1 << 11))

    @property
    def properties(self) -> dict[str, bool]:
        """Every named ``kernel_code_properties`` bit, with unknown set bits as ``bit<N>``."""
        out = {name: bool(self.kernel_code_properties >> b & 1) for b, name in KCP_BITS.items()}
        for b in range(16):
            if b not in KCP_BITS and self.kernel_code_properties >> b & 1:
                out[f"bit{b}"] = True
        return out

    @property
    def kernarg_preload_length(self) -> int:
        return _bits(self.kernarg_preload, 0, 7)

    @property
    def kernarg_preload_offset(self) -> int:
        return _bits(self.kernarg_preload, 7, 9)

    @property
    def vgpr_granule(self) -> int:
        return vgpr_granule(self.processor, self.wave32)

    @property
    def vgpr_blocks(self) -> int:
        """VGPRs allocated per work-item ((granules + 1) * granule; arch + accumulation on GFX90A)."""
        return (self.compute_pgm_rsrc1.granulated_workitem_vgpr_count + 1) * self.vgpr_granule

    @property
    def sgpr_blocks(self) -> int | None:
        """SGPRs allocated per wave on GFX6-9 ((granules + 1) * 8); None on GFX10+ (field unused)."""
        if _family(self.processor) == "gfx10+":
            return None
        return (self.compute_pgm_rsrc1.granulated_wavefront_sgpr_count + 1) * 8


def decode_descriptor(view: ByteView, offset: int, *, processor: str = "", symbol: str = "",
                      address: int = 0) -> KernelDescriptor:
    """Decode the 64 bytes at ``offset`` of ``view`` (bounds-checked); the entry is not resolved."""
    view.check(offset, KD_SIZE, "kernel descriptor")
    ko = view.i64(offset + 16)
    return KernelDescriptor(
        symbol, address, view.u32(offset), view.u32(offset + 4), view.u32(offset + 8), view.u32(offset + 12), ko,
        bytes(view.bytes_at(offset + 24, 20)), Rsrc3.decode(view.u32(offset + 44), processor),
        Rsrc1.decode(view.u32(offset + 48)), Rsrc2.decode(view.u32(offset + 52)), view.u16(offset + 56),
        view.u16(offset + 58), view.u32(offset + 60), address + ko, None, processor)


def _file_offset(elf: ElfFile, sym: Symbol) -> tuple[int, int]:
    """(section index, offset in the section) of a defined symbol's value."""
    if not 0 < sym.st_shndx < len(elf.sections):
        raise FormatError(f"symbol {sym.name!r} is not in a section", fmt="amdgpu", value=sym.st_shndx)
    sec = elf.sections[sym.st_shndx]
    rel = sym.st_value - sec.sh_addr if elf.header.e_type != C.ET_REL else sym.st_value
    return sec.index, rel


def read_descriptor(elf: ElfFile, sym: Symbol, processor: str = "") -> KernelDescriptor:
    """The descriptor a ``<kernel>.kd`` symbol points at, with its entry resolved.

    In an ``ET_REL`` object the entry comes from the ``R_AMDGPU_REL64`` at
    ``kd+0x10`` (entry = S + A - 0x10, in the symbol's section); otherwise it is
    the descriptor's address plus the stored offset.
    """
    shndx, off = _file_offset(elf, sym)
    sec = elf.sections[shndx]
    if sec.file_size < KD_SIZE or not 0 <= off <= sec.file_size - KD_SIZE:
        raise FormatError(f"kernel descriptor {sym.name!r} lies outside {sec.name}", fmt="amdgpu", value=off)
    kd = decode_descriptor(sec.view, off, processor=processor, symbol=sym.name, address=sym.st_value)
    if elf.header.e_type != C.ET_REL:
        return kd
    for idx, relocs in elf.relocation_tables.items():
        rsec = elf.sections[idx]
        symtab = elf.symbol_tables.get(rsec.sh_link)
        if rsec.sh_info != shndx or symtab is None:
            continue
        for r in relocs:
            if r.r_offset == off + 16 and r.r_type == R_AMDGPU_REL64 and 0 < r.r_sym < len(symtab):
                target = symtab[r.r_sym]
                addend = r.r_addend if r.r_addend is not None else kd.kernel_code_entry_byte_offset
                entry = target.st_value + addend - 16
                return replace(kd, kernel_code_entry_byte_offset=entry - sym.st_value, entry=entry,
                               entry_symbol=target.name or None)
    return replace(kd, entry=None)  # unrelocated: the entry cannot be known
