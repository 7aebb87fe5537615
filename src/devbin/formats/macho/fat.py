"""Read Apple universal ("fat") files: several Mach-O files or archives, one per CPU, side by side.

Layout (cctools ``include/mach-o/fat.h``), every field big-endian::

    fat_header     u32 magic        0xCAFEBABE (FAT_MAGIC) or 0xCAFEBABF (FAT_MAGIC_64)
                   u32 nfat_arch
    fat_arch[n]    i32 cputype, i32 cpusubtype, u32 offset, u32 size, u32 align          20 bytes
    fat_arch_64[n] i32 cputype, i32 cpusubtype, u64 offset, u64 size, u32 align, u32 reserved  32 bytes
    slices         each at ``offset`` (a multiple of 2**align), ``size`` bytes; the gaps read as zeros

``FAT_MAGIC_64`` (Xcode 8, ``lipo -fat64``) exists for slices or offsets beyond 4 GiB.

Quirk: ``0xCAFEBABE`` is also the magic of Java class files, whose next u32 is
``minor_version << 16 | major_version`` with major >= 45 (JDK 1.1).  As LLVM's
``identify_magic`` does, a fat file is recognised only when ``nfat_arch`` is below
43 (file(1) draws the line at 30); a larger count is :class:`NotThisFormat`, not a
corrupt fat file.  (Java has no 0xCAFEBABF, but the same rule is applied to it.)

Validation, as llvm-lipo / ``MachOUniversalBinary`` do: the arch table fits, every slice
lies inside the file, after the table, aligned to ``2**align`` (``align`` at most 15, as
LLVM's limit), no two slices overlap and no CPU (type and subtype) appears twice.
Every error is a :class:`~devbin.errors.FormatError` with format ``macho-fat``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devbin.binary import Buffer, ByteView
from devbin.errors import NotThisFormat, TruncatedError

__all__ = ["CPU_NAMES", "FAT_MAGIC", "FAT_MAGIC_64", "MAX_NFAT_ARCH", "FatFile", "FatSlice", "arch_name", "is_fat"]

FAT_MAGIC = 0xCAFEBABE
FAT_MAGIC_64 = 0xCAFEBABF
MAX_NFAT_ARCH = 42  # a larger nfat_arch after 0xCAFEBABE is a Java class file's version (LLVM: < 43)
MAX_ALIGN = 15  # LLVM's MaxSectionAlignment: an align above 2**15 is refused

CPU_ARCH_ABI64 = 0x01000000
CPU_ARCH_ABI64_32 = 0x02000000
CPU_SUBTYPE_MASK = 0xFF000000  # capability bits (CPU_SUBTYPE_LIB64, PTRAUTH_ABI) above the subtype

# cputype -> name, and (cputype, cpusubtype & ~mask) -> name where the subtype selects it (lipo's names).
CPU_NAMES: dict[int, str] = {
    7: "i386",
    7 | CPU_ARCH_ABI64: "x86_64",
    12: "arm",
    12 | CPU_ARCH_ABI64: "arm64",
    12 | CPU_ARCH_ABI64_32: "arm64_32",
    18: "ppc",
    18 | CPU_ARCH_ABI64: "ppc64",
}
_SUBTYPE_NAMES: dict[tuple[int, int], str] = {
    (7 | CPU_ARCH_ABI64, 8): "x86_64h",
    (12 | CPU_ARCH_ABI64, 2): "arm64e",
    (12, 5): "armv4t", (12, 6): "armv6", (12, 7): "armv5e", (12, 9): "armv7", (12, 10): "armv7f",
    (12, 11): "armv7s", (12, 12): "armv7k", (12, 14): "armv6m", (12, 15): "armv7m", (12, 16): "armv7em",
}

_FMT = "macho-fat"


def arch_name(cputype: int, cpusubtype: int) -> str:
    """lipo's name of a CPU (``x86_64``, ``arm64``, ``arm64e``, ``i386`` …), or ``unknown(type,subtype)``."""
    sub = cpusubtype & ~CPU_SUBTYPE_MASK & 0xFFFFFFFF
    named = _SUBTYPE_NAMES.get((cputype, sub)) or CPU_NAMES.get(cputype)
    return named or f"unknown({cputype},{cpusubtype})"


def is_fat(data: Buffer | ByteView) -> bool:
    """True when ``data`` starts with a fat magic and a plausible ``nfat_arch`` (not a Java class file)."""
    view = (data if isinstance(data, ByteView) else ByteView(data)).with_order(False)
    if len(view) < 8:
        return False
    magic, count = view.unpack("II", 0)
    return magic in (FAT_MAGIC, FAT_MAGIC_64) and count <= MAX_NFAT_ARCH


@dataclass(frozen=True, slots=True)
class FatSlice:
    """One ``fat_arch`` entry and a zero-copy window on its bytes.  ``cputype``/``cpusubtype`` are kept raw."""

    index: int
    cputype: int
    cpusubtype: int
    offset: int
    size: int
    align: int
    reserved: int = 0
    view: ByteView = field(repr=False, compare=False, default_factory=lambda: ByteView(b""))

    @property
    def arch(self) -> str:
        return arch_name(self.cputype, self.cpusubtype)

    @property
    def data(self) -> memoryview:
        return self.view.bytes_at(0, len(self.view))


class FatFile:
    """A parsed, validated universal file over ``buf``; :attr:`slices` in table order."""

    def __init__(self, buf: Buffer | ByteView, *, where: str = "") -> None:
        base = buf.base if isinstance(buf, ByteView) else 0
        self.view = ByteView(buf, fmt=_FMT, where=where, base=base, little=False)
        self.where = where
        v = self.view
        if len(v) < 8:
            if v.startswith(b"\xca\xfe\xba"):
                raise v.error(f"fat header needs 8 bytes, {len(v)} present", 0, cls=TruncatedError)
            raise v.error("not a universal file (too short)", 0, cls=NotThisFormat)
        magic, count = v.unpack("II", 0, "fat header")
        if magic not in (FAT_MAGIC, FAT_MAGIC_64):
            raise v.error("not a universal file (bad magic)", 0, magic, cls=NotThisFormat)
        if count > MAX_NFAT_ARCH:
            raise v.error(f"nfat_arch {count} > {MAX_NFAT_ARCH}: a Java class file, not a universal file", 4, count,
                          cls=NotThisFormat)
        self.is64 = magic == FAT_MAGIC_64
        self.magic = magic
        fmt = "iiQQII" if self.is64 else "iiIII"
        entry = 32 if self.is64 else 20
        table_end = 8 + count * entry
        rows = list(v.iter_unpack(fmt, 8, count, "fat_arch table"))
        slices: list[FatSlice] = []
        for i, row in enumerate(rows):
            cputype, cpusubtype, offset, size, align = row[:5]
            reserved = row[5] if self.is64 else 0
            at = 8 + i * entry
            name = arch_name(cputype, cpusubtype)
            loc = f"{where or '<fat>'}[{i}] {name}"
            if align > MAX_ALIGN:
                raise v.error(f"align 2**{align} is larger than 2**{MAX_ALIGN}", at + 16, align, where=loc)
            if offset < table_end:
                raise v.error(f"slice offset {offset:#x} lies inside the header (ends at {table_end:#x})", at + 8,
                              offset, where=loc)
            if offset % (1 << align):
                raise v.error(f"slice offset {offset:#x} is not aligned to 2**{align}", at + 8, offset, where=loc)
            if offset > len(v) or size > len(v) - offset:
                raise v.error(f"slice {offset:#x}+{size:#x} runs past the end of the file ({len(v):#x})", at + 8,
                              size, cls=TruncatedError, where=loc)
            slices.append(FatSlice(i, cputype, cpusubtype, offset, size, align, reserved,
                                   v.sub(offset, size, where=loc, fmt=_FMT)))
        seen: dict[tuple[int, int], int] = {}
        for s in slices:
            key = (s.cputype, s.cpusubtype & ~CPU_SUBTYPE_MASK & 0xFFFFFFFF)
            if key in seen:
                raise v.error(f"slices [{seen[key]}] and [{s.index}] are both {s.arch}", 8 + s.index * entry,
                              s.cputype, where=where or "<fat>")
            seen[key] = s.index
        last: FatSlice | None = None  # the non-empty slice reaching furthest so far, in offset order
        for b in sorted((s for s in slices if s.size), key=lambda s: (s.offset, s.size)):
            if last is not None and b.offset < last.offset + last.size:
                raise v.error(f"slices [{last.index}] {last.arch} and [{b.index}] {b.arch} overlap",
                              8 + b.index * entry, b.offset, where=where or "<fat>")
            if last is None or b.offset + b.size > last.offset + last.size:
                last = b
        self.slices: tuple[FatSlice, ...] = tuple(slices)

    @property
    def archs(self) -> tuple[str, ...]:
        """The slices' arch names in table order (what ``lipo -archs`` prints)."""
        return tuple(s.arch for s in self.slices)

    def slice_for(self, arch: str) -> FatSlice | None:
        """The slice named ``arch`` (``x86_64``, ``arm64`` …), or None."""
        for s in self.slices:
            if s.arch == arch:
                return s
        return None
