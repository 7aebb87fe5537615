"""The simulated device: a deterministic device address space in host memory.

Nothing here knows ELF.  The loader asks for a range (:meth:`SimulatedDevice.reserve`: a
bump allocator starting at :data:`DEFAULT_BASE`, every range aligned to at least a page),
maps bytes into it (:meth:`map`: file bytes followed by zeros up to the memory size, as a
``PT_LOAD`` segment or a ``NOBITS`` section), and writes relocated values
(:meth:`write_uint`).  Tests and the CLI read it back with :meth:`read`, :meth:`u32`,
:meth:`u64`.  Every access is bounds-checked: the whole range must lie inside one mapped
region, otherwise :class:`devbin.errors.UsageError` names the address (what a GPU would
report as a page fault).

The same inputs, loaded in the same order, always land at the same addresses: this is what
lets tests compare addresses with a static link, and what the lazy loader can rely on to
give a function the address it would have had when loaded eagerly.

:meth:`mark` / :meth:`release` give the executable its transactions: a load or freeze that
fails gives back everything it reserved and mapped since the mark.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from devbin.binary import ByteView
from devbin.errors import UsageError

__all__ = ["DEFAULT_BASE", "PAGE", "Region", "SimulatedDevice"]

#: Where the first code object lands (an address in the range ROCr hands out on Linux).
DEFAULT_BASE = 0x7F00_0000_0000
PAGE = 0x1000


@dataclass(slots=True)
class Region:
    """One mapped range: ``data`` holds ``len(data)`` bytes at device address ``start``."""

    start: int
    data: bytearray
    label: str

    @property
    def end(self) -> int:
        return self.start + len(self.data)


#: Host memory the simulated device may use for mapped segments, by default.
DEFAULT_LIMIT = 1 << 30


def _align(v: int, a: int) -> int:
    return (v + a - 1) // a * a if a > 1 else v


class SimulatedDevice:
    """A device address space in host memory (see the module docstring)."""

    name = "simulated"

    def __init__(self, base: int = DEFAULT_BASE, *, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit  # bytes of device memory the simulation may allocate (a corrupt p_memsz is refused)
        if base % PAGE:
            raise UsageError(f"simulated device base {base:#x} is not page-aligned")
        self.base = base
        self._next = base
        self._regions: list[Region] = []  # by address
        self._starts: list[int] = []
        self._log: list[Region] = []  # in mapping order, for release()
        self.mapped_bytes = 0

    # -- allocation -------------------------------------------------------------------
    def reserve(self, size: int, align: int = PAGE) -> int:
        """Reserve ``size`` bytes (rounded up to pages) at an ``align``-aligned address; returns the address."""
        if size < 0 or align <= 0 or align & (align - 1):
            raise UsageError(f"bad reservation: size {size:#x}, alignment {align:#x}")
        start = _align(self._next, max(align, PAGE))
        self._next = _align(start + size, PAGE)
        return start

    def map(self, address: int, data: bytes | memoryview, mem_size: int, label: str = "") -> Region:
        """Map ``data`` at ``address``, zero-filled up to ``mem_size`` bytes; ranges must not overlap."""
        if mem_size < len(data):
            raise UsageError(f"{label}: memory size {mem_size:#x} is smaller than the {len(data):#x} file bytes")
        if self.mapped_bytes + mem_size > self.limit:
            raise UsageError(f"{label}: mapping {mem_size:#x} bytes would take the simulated device past its "
                             f"{self.limit:#x}-byte limit (SimulatedDevice(limit=...))")
        region = Region(address, bytearray(mem_size), label)
        region.data[: len(data)] = data
        i = bisect.bisect_right(self._starts, address)
        prev = self._regions[i - 1] if i else None
        nxt = self._regions[i] if i < len(self._regions) else None
        if (prev is not None and prev.end > address) or (nxt is not None and address + mem_size > nxt.start):
            raise UsageError(f"{label}: {address:#x}+{mem_size:#x} overlaps a mapped region")
        if mem_size:
            self._regions.insert(i, region)
            self._starts.insert(i, address)
            self._log.append(region)
            self.mapped_bytes += mem_size
        return region

    def mark(self) -> tuple[int, int]:
        """A point to come back to with :meth:`release`."""
        return self._next, len(self._log)

    def release(self, mark: tuple[int, int]) -> None:
        """Unmap every region mapped and give back every range reserved since ``mark``."""
        nxt, n = mark
        gone = {id(r) for r in self._log[n:]}
        self.mapped_bytes -= sum(len(r.data) for r in self._log[n:])
        del self._log[n:]
        self._regions = [r for r in self._regions if id(r) not in gone]
        self._starts = [r.start for r in self._regions]
        self._next = nxt

    # -- access -----------------------------------------------------------------------
    @property
    def regions(self) -> tuple[Region, ...]:
        return tuple(self._regions)

    @property
    def bytes_mapped(self) -> int:
        return sum(len(r.data) for r in self._regions)

    def _locate(self, address: int, size: int) -> tuple[Region, int]:
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0:
            r = self._regions[i]
            if size >= 0 and address + size <= r.end:
                return r, address - r.start
        raise UsageError(f"device address {address:#x} ({size} bytes) is not mapped", fmt="device",
                         value=address)

    def is_mapped(self, address: int, size: int = 1) -> bool:
        try:
            self._locate(address, size)
        except UsageError:
            return False
        return True

    def view(self, address: int, size: int) -> ByteView:
        """A bounded read view of ``size`` bytes at ``address``."""
        r, off = self._locate(address, size)
        return ByteView(memoryview(r.data), fmt="device", where=r.label, base=r.start).sub(off, size)

    def read(self, address: int, size: int) -> bytes:
        """``size`` bytes at ``address`` (UsageError if any of them is unmapped)."""
        return self.view(address, size).tobytes()

    def u32(self, address: int) -> int:
        return self.view(address, 4).u32(0)

    def u64(self, address: int) -> int:
        return self.view(address, 8).u64(0)

    def write(self, address: int, data: bytes) -> None:
        r, off = self._locate(address, len(data))
        r.data[off: off + len(data)] = data

    def write_uint(self, address: int, value: int, width: int) -> None:
        """Store ``value`` (truncated to ``width`` bytes) little-endian at ``address``."""
        self.write(address, (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little"))
