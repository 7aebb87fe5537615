"""What a link reads: device objects, host objects carrying device code, archives, super-archives.

Each command-line input becomes link items in order (:func:`load_inputs`):

* a **device relocatable object** (a cubin from ``nvcc -rdc -cubin``/``ptxas -c``, an AMDGPU
  object from ``clang -c``, with or without devbin sections): one :class:`Unit`;
* a **host object** from ``nvcc -rdc -c`` (device code in a fatbin in ``__nv_relfatbin``):
  one unit per relocatable image of the link's architecture, named ``k.o[sm_90]``;
* an **ar archive** (device objects, or host objects from ``nvcc -lib``): an
  :class:`ArchiveInput` offering its members' device objects of the link's architecture,
  each with the global symbols it defines;
* a **super-archive**: one :class:`ArchiveInput` per level of the target's fallback chain,
  in chain order (``lib.a[gfx90a]``, ``lib.a[base]``), as ``devbin ar view`` would hand
  them to a linker.

The link's architecture is ``target``'s processor (``gfx90a`` for ``gfx90a:xnack+``) or SM
(``sm_90``); without one, that of the first device object.  An object of another
architecture is an error naming both; archive members of another architecture are skipped
(a multi-arch library offers only the members for this one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from devbin.errors import DeviceBinaryError, UsageError
from devbin.formats.ar import ArchiveFile, is_archive
from devbin.formats.ar.writer import elf_global_symbols
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.images.record import BareElf
from devbin.images.scan import scan_bytes
from devbin.link.backend import link_arch
from devbin.link.resolution import ArchiveInput
from devbin.link.units import Unit
from devbin.superarchive import is_superarchive
from devbin.superarchive import open as open_superarchive
from devbin.targets.registry import object_kinds

__all__ = ["LinkInputs", "arch_key", "load_inputs"]


@dataclass
class LinkInputs:
    """The items in command-line order, the architecture, and notes (skipped images)."""

    items: list[Unit | ArchiveInput] = field(default_factory=list)
    arch: str | None = None
    notes: list[str] = field(default_factory=list)


def arch_key(text: str) -> str:
    """The part of a target that decides linkability: ``gfx90a`` of ``gfx90a:xnack+``; ``sm_90`` of ``sm_90a``
    (the vendor's rule: :func:`devbin.link.backend.link_arch`)."""
    return link_arch(text)


def _device_images(name: str, data: bytes) -> list[tuple[str, str, bytes]]:
    """``(display name, arch, bytes)`` of every relocatable device ELF in ``data`` (itself, or inside a host
    file), from the images :func:`devbin.images.scan_bytes` finds (every image: ``all``)."""
    out: list[tuple[str, str, bytes]] = []
    kinds = object_kinds()  # the vendors' device ELF code objects
    for image in scan_bytes(data, name, all=True):
        if image.kind not in kinds:
            continue
        elf = bytes(image.data())
        e_type = image.native.e_type if isinstance(image.native, BareElf) else ElfFile(elf, where=name).header.e_type
        if e_type != C.ET_REL:
            continue  # a linked cubin or code object: not link input
        bare = isinstance(image.native, BareElf) and not image.address.steps  # the file itself
        out.append((name if bare else f"{name}[{image.arch}]", image.arch, elf))
    return out


class _Loader:
    def __init__(self, target: str | None) -> None:
        self.result = LinkInputs(arch=arch_key(target) if target else None)
        self.target = target

    def accept(self, name: str, arch: str, strict: bool) -> bool:
        key = arch_key(arch)
        if self.result.arch is None:
            self.result.arch = key
        if key == self.result.arch:
            return True
        if strict:
            raise UsageError(f"{name} is {arch}, the link is for {self.result.arch}", fmt="link")
        self.result.notes.append(f"{name}: {arch} skipped (the link is for {self.result.arch})")
        return False

    def add(self, name: str, data: bytes, order: int) -> None:
        if is_archive(data):
            if is_superarchive(data):
                self.add_superarchive(name, data, order)
            else:
                self.add_archive(name, data, order)
            return
        images = _device_images(name, data)
        if not images:
            raise UsageError(f"{name}: no relocatable device code in it (expected a device object, a host object "
                             "from nvcc -rdc -c, an archive or a super-archive)", fmt="link")
        for display, arch, image in images:
            if self.accept(display, arch, strict=len(images) == 1):
                self.result.items.append(Unit(display, image, order))

    def _members(self, archive_name: str, members: Sequence[tuple[str, bytes]]) -> list[tuple[str, bytes,
                                                                                              tuple[str, ...]]]:
        out: list[tuple[str, bytes, tuple[str, ...]]] = []
        for member, data in members:
            where = f"{archive_name}({member})"
            try:
                images = _device_images(where, data)
            except DeviceBinaryError as e:
                self.result.notes.append(f"{where}: skipped: {e.message}")
                continue
            if not images:
                self.result.notes.append(f"{where}: no relocatable device code, skipped")
                continue
            for display, arch, image in images:
                if self.accept(display, arch, strict=False):
                    label = member if display == where else display[len(archive_name) + 1:-1]
                    out.append((label, image, elf_global_symbols(image)))
        return out

    def add_archive(self, name: str, data: bytes, order: int) -> None:
        ar = ArchiveFile(data, where=name)
        if ar.thin:
            raise UsageError(f"{name}: a thin archive; devbin link reads regular archives", fmt="link")
        members = self._members(name, [(m.name, bytes(m.data)) for m in ar.files])
        self.result.items.append(ArchiveInput(name, members, order))

    def add_superarchive(self, name: str, data: bytes, order: int) -> None:
        lib = open_superarchive(data, where=name)
        target = self.target
        if target is None:
            raise UsageError(f"{name} is a super-archive of {', '.join(lib.targets())}: name the target "
                             "(--target T) to pick its chain", fmt="link")
        if target not in lib.targets():
            raise UsageError(f"{name}: no target {target!r} (targets: {', '.join(lib.targets())})", fmt="link")
        for level in lib.chain(target):
            rec = lib.target(level)
            members = [(tm.name, bytes(lib.member_data(tm.ordinal))) for tm in rec.members]
            self.result.items.append(ArchiveInput(f"{name}[{level}]", self._members(f"{name}[{level}]", members),
                                                  order))


def load_inputs(inputs: Sequence[str | Path | tuple[str, bytes]], *, target: str | None = None) -> LinkInputs:
    """Read ``inputs`` (paths, or ``(name, bytes)``) into link items (see the module docstring)."""
    loader = _Loader(target)
    for order, item in enumerate(inputs):
        if isinstance(item, tuple):
            name, data = item
        else:
            name, data = str(item), Path(item).read_bytes()
        loader.add(name, data, order)
    return loader.result
