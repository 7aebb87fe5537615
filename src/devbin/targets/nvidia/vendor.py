"""NVIDIA's vendor descriptor (:class:`devbin.targets.vendor.Vendor`): cubins, PTX, LTO-IR, fatbins.

The rules are those of :mod:`devbin.targets.nvidia.archs` (the one NVIDIA architecture table); this
module says which of them each generic question uses.  Matching differs by tool, and devbin mirrors
each tool where its command mirrors it:

* ``--arch`` (inspection commands): cuobjdump ``-arch``'s rule, measured with cuobjdump 13.0: the SM
  number decides, the ``a``/``f`` variant does not; ``sm_NN`` takes the cubins, PTX and LTO-IR of NN,
  ``compute_NN`` the PTX and LTO-IR only.
* ``prune --keep/--drop``: nvprune's rule (docs/PRUNE.md): the variant must be the same (``sm_90``
  does not take ``sm_90a``); ``sm_NN`` takes the cubin and the PTX/LTO-IR of NN, ``compute_NN`` only the
  PTX/LTO-IR.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from devbin.errors import DeviceBinaryError, UsageError
from devbin.formats.elf.constants import EM_CUDA
from devbin.targets.nvidia.archs import (
    SM_ARCHS,
    NvArch,
    parse_arch,
    preference,
    runs_on,
    sm_from_e_flags,
    try_parse_arch,
)
from devbin.targets.nvidia.archs import parse_device as parse_cc
from devbin.targets.vendor import Diag, Vendor

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from devbin.binary import Buffer
    from devbin.formats.elf.reader import ElfFile
    from devbin.model import CodeObject
    from devbin.targets.resource_records import ImageKeys, ImageResources
    from devbin.targets.vendor import ModelSource
    from devbin.targets.vendor_records import Device, ObjectFacts, Verdict

__all__ = ["NVIDIA", "NvidiaVendor"]

_NAME_PREFIXES = ("sm", "compute", "lto")
# arch_repairs' patterns, compiled (and kept by re's cache) when a name is repaired, not at every start-up.
_BARE = r"(sm|compute|lto)?[ _-]?([1-9][0-9]+[af]?)"
_DOTTED = r"([1-9][0-9]?)\.([0-9])([af]?)"


@cache
def _known_names() -> tuple[str, ...]:
    return tuple(f"{p}_{a.sm}{v}" for p in _NAME_PREFIXES for a in SM_ARCHS.values() for v in a.variants)


class NvidiaVendor(Vendor):
    name = "nvidia"
    title = "NVIDIA"
    e_machines = (EM_CUDA,)
    arch_prefixes = ("sm_", "compute_", "lto_")
    object_kind = "cubin"
    image_kinds = frozenset({"cubin", "ptx", "lto-ir", "fatbin"})
    triple_prefixes = ("nvptx",)
    pci_vendor_id = "0x10de"
    offload_kind = "cuda"
    default_triple = "nvptx64-nvidia-cuda"
    hue = 95
    toolkit = MappingProxyType({
        "cuobjdump": "pip install nvidia-cuda-cuobjdump",
        "nvdisasm": "pip install nvidia-cuda-nvdisasm",
        "ptxas": "install the CUDA toolkit or pip install nvidia-cuda-nvcc",
        "nvlink": "install the CUDA toolkit or pip install nvidia-cuda-nvcc",
        "fatbinary": "install the CUDA toolkit or pip install nvidia-cuda-nvcc",
        "nvcc": "install the CUDA toolkit",
    })
    loadable_kinds = frozenset({"cubin", "ptx", "lto-ir"})
    #: ``--sort``: REG, STACK, FRAME, SPILL (cuobjdump's numbers, :func:`devbin.targets.nvidia.resources.table_row`).
    resource_sort_fields = MappingProxyType({"regs": "registers", "stack": "stack", "frame": "frame", "spill": "spill"})
    device_title = "NVIDIA"
    attribute_namespace = 1  # devbin.model.attributes.Namespace.NVIDIA (the model is not imported here)
    attribute_prefix = "nvidia."
    link_backend = "devbin.targets.nvidia.link"
    load_backend = "devbin.targets.nvidia.load"
    driver_backend = "devbin.targets.nvidia.load_cuda"
    imported_from = "imported from the cubin's NVIDIA sections"
    inspect_key = "nvidia"

    def owns_arch(self, arch: str) -> bool:
        """``sm_XY``, ``compute_XY``, ``lto_XY`` with an ``a``/``f`` suffix or none."""
        return try_parse_arch(arch) is not None

    def known_arch_names(self) -> tuple[str, ...]:
        """``sm_20`` .. ``lto_121f``: each prefix, each SM number of :data:`~devbin.targets.nvidia.archs.SM_ARCHS`
        with each of its variants."""
        return _known_names()

    def claims_arch(self, text: str) -> bool:
        return text.startswith(_NAME_PREFIXES)

    def check_arch(self, text: str) -> str:
        nv = try_parse_arch(text)
        if nv is None:
            raise UsageError(f"not an {self.title} architecture name (sm_XY, compute_XY or lto_XY, with an a or f "
                             "suffix or none)")
        if not nv.known:
            raise UsageError(f"no {self.title} architecture of that name")
        return nv.name

    def arch_repairs(self, text: str) -> list[str]:
        """``sm90``, ``sm-90``, a bare ``90`` (SASS unless a prefix says otherwise) -> ``sm_90``; a compute
        capability ``9.0`` -> ``sm_90``."""
        out: list[str] = []
        m = re.fullmatch(_BARE, text)
        if m is not None:
            out.append(f"{m.group(1) or 'sm'}_{m.group(2)}")
        m = re.fullmatch(_DOTTED, text)
        if m is not None:
            out.append(f"sm_{m.group(1)}{m.group(2)}{m.group(3)}")
        return out

    def arch_from_header(self, e_flags: int, ei_osabi: int, ei_abiversion: int) -> str:
        """``sm_N`` from ``e_flags``, by the header ABI (:func:`~devbin.targets.nvidia.archs.sm_from_e_flags`);
        the ``a`` variant needs ``.nv.compat`` too (:func:`devbin.targets.nvidia.cubin.cubin_arch`)."""
        return f"sm_{sm_from_e_flags(ei_osabi, ei_abiversion, e_flags)}"

    def virtual_arch(self, arch: str) -> str:
        a = try_parse_arch(arch)
        return "" if a is None else replace(a, kind="ptx").name

    def is_virtual_arch(self, arch: str) -> bool:
        a = try_parse_arch(arch)
        return a is not None and a.kind != "sass"

    def generation(self, arch: str) -> tuple[int, str] | None:
        a = try_parse_arch(arch)
        return None if a is None else (a.sm, a.variant)

    def format_arch(self, generation: int, variant: str = "", *, virtual: bool = False) -> str:
        major, minor = divmod(generation, 10)
        return NvArch(major, minor, variant, "ptx" if virtual else "sass").name

    def option_matches(self, found: str, wanted: str) -> bool:
        if found == wanted:
            return True
        w, f = try_parse_arch(wanted), try_parse_arch(found)
        if w is None or f is None:
            return False
        return (w.major, w.minor) == (f.major, f.minor) and (w.kind == "sass" or f.kind != "sass")

    def keep_matches(self, spec: str, arch: str) -> bool:
        s, a = try_parse_arch(spec), try_parse_arch(arch)
        if s is None or a is None or (s.major, s.minor, s.variant) != (a.major, a.minor, a.variant):
            return False
        if s.kind == "sass":
            return True  # sm_NN: the cubin, the PTX and the LTO-IR of NN
        return a.kind != "sass"  # compute_NN / lto_NN name the virtual arch only

    def toolkit_dirs(self, tool: str) -> Iterator[Path]:
        """``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``/usr/local/cuda/bin``, then (all but ``nvcc``, whose wheel
        copy has no cicc, the CUDA C++ front end) the ``nvidia/*/bin`` folders that the PyPI wheels
        ``nvidia-cuda-cuobjdump``, ``nvidia-cuda-nvdisasm`` and ``nvidia-cuda-nvcc`` install under each
        ``sys.path`` entry (they are not put on ``PATH``), newest first."""
        import os
        import sys
        from pathlib import Path

        if tool not in self.toolkit:
            return
        for var in ("CUDA_HOME", "CUDA_PATH"):
            root = os.environ.get(var)
            if root:
                yield Path(root) / "bin"
        yield Path("/usr/local/cuda/bin")
        if tool == "nvcc":
            return
        seen: set[Path] = set()
        for entry in sys.path:
            base = Path(entry or ".") / "nvidia"
            if base in seen:
                continue
            seen.add(base)
            try:
                # Newest first: cu13 before cu12, and the old cuda_nvcc layout after both.
                subdirs = sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: p.name, reverse=True)
            except OSError:
                continue
            for sub in subdirs:
                yield sub / "bin"

    def function_parts(self, elf: ElfFile, rows: Sequence[int], names: Sequence[str],
                       ) -> tuple[list[bool], dict[str, tuple[tuple[str, int], ...]]]:
        """Kernels by ``STO_CUDA_ENTRY``; a function's own sections (:mod:`devbin.targets.nvidia.parts`)."""
        from devbin.targets.nvidia.parts import function_parts

        return function_parts(elf, rows, names)

    # devbin select: the rules are archs.runs_on and archs.preference (CUDA C++ Programming Guide)

    def owns_device(self, text: str) -> bool:
        """``sm_XY`` (any variant: the suffix describes code) or a compute capability ``X.Y`` (one dot: three
        dotted numbers are an Intel IP version)."""
        return text.startswith("sm_") or (text[:1].isdigit() and text.count(".") < 2)

    def parse_device(self, text: str, suggest: Callable[[str], list[str]]) -> Device:
        from devbin.targets.vendor_records import Device

        try:
            cc = parse_cc(text)
        except UsageError as e:
            meant = [n for n in suggest(text) if n.startswith(self.arch_prefixes[0])]
            raise UsageError(e.message + (f"; did you mean {' or '.join(meant)}?" if meant else "")) from None
        note = ""
        if text[-1:] in ("a", "f"):
            note = f"{text} names the {cc[0]}.{cc[1]} GPU: the a/f suffix describes code, not devices"
        return Device(text, self.name, cc=cc, note=note,
                      description=f"{text} ({self.device_title}, compute capability {cc[0]}.{cc[1]})")

    def loader_arch(self, kind: str, arch: str, head: Callable[[], Buffer], data: Callable[[], Buffer] | None,
                    ) -> tuple[str, int]:
        """A bare cubin's arch with its ``a`` variant (``.nv.compat``, or the old header's flag); PTX that an
        LLVM container files under its ``sm_XY`` target as ``compute_XY``."""
        if kind == self.object_kind and data is not None:
            from devbin.binary import ByteView
            from devbin.formats.elf.reader import ElfFile
            from devbin.targets.nvidia.cubin import cubin_arch
            try:
                return cubin_arch(ElfFile(ByteView(data()))), 1
            except DeviceBinaryError:
                return arch, 1
        if kind == "ptx" and arch.startswith("sm_"):
            return "compute_" + arch[3:], 1
        return arch, 1

    def load_label(self, kind: str, jit: bool) -> str:
        """``PTX, JIT-compiled``; ``SASS`` for a cubin (the machine code's name)."""
        if jit and kind == "ptx":
            return "PTX, JIT-compiled"
        return "SASS" if kind == self.object_kind and not jit else super().load_label(kind, jit)

    def judge(self, kind: str, arch: str, device: Device, generic_version: int = 1) -> Verdict:
        from devbin.targets.vendor_records import Verdict

        assert device.cc is not None
        try:
            a = parse_arch(arch)
        except UsageError:
            return Verdict(False, f"unrecognised {self.device_title} arch {arch!r}")
        # LLVM containers name PTX by its sm_XY target; fatbins name LTO-IR compute_XY: the kind decides.
        a = NvArch(a.major, a.minor, a.variant, {"cubin": "sass", "ptx": "ptx", "lto-ir": "ltoir"}[kind])
        ok, why = runs_on(a, device.cc)
        return Verdict(ok, why, tuple(-x for x in preference(a)), a.kind == "ptx")

    def passed_over(self, chosen: Verdict, chosen_arch: str, other: Verdict, other_arch: str) -> str:
        if chosen.jit != other.jit:
            return "SASS preferred over PTX (no JIT)"
        if chosen.rank[1:3] != other.rank[1:3]:
            return f"{chosen_arch} is closer to the device"
        return f"{chosen_arch} is more specific"

    def fallback_chain(self, target: str, others: Sequence[str]) -> list[str] | None:
        try:
            arch = parse_arch(target)
        except UsageError:
            return None
        ranked: list[tuple[tuple[int, ...], int, str]] = []
        for i, name in enumerate(others):
            try:
                image = parse_arch(name)
            except UsageError:
                continue
            if arch.kind != "sass":
                # a PTX / LTO-IR level falls back to the same kind at a lower or equal capability
                if image.kind != arch.kind or image.cc > arch.cc or (image.variant and image.variant != arch.variant):
                    continue
            elif image.kind == "ltoir" or not runs_on(image, arch.cc)[0]:
                continue
            elif image.variant == "a" and arch.variant != "a":
                continue  # sm_90a code needs the exact GPU's arch-specific features; a plain sm_90 library may not
            key = preference(image)
            ranked.append((tuple(-k for k in key), i, name))
        return [name for _, _, name in sorted(ranked)]

    def import_code_object(self, elf: ElfFile, *, diag: Diag | None = None,
                           only: frozenset[str] | None = None) -> CodeObject:
        from devbin.targets.nvidia.importer import import_cubin

        return import_cubin(elf, diag=diag, only=only)

    def object_facts(self, elf: ElfFile) -> ObjectFacts:
        """The arch with its ``a`` variant (:attr:`devbin.targets.nvidia.cubin.Cubin.arch`); producer and
        options from the ``.note.nv.tkinfo`` note (``""`` when it is missing or unreadable)."""
        from devbin.targets.nvidia.cubin import Cubin
        from devbin.targets.nvidia.notes import tkinfo
        from devbin.targets.vendor_records import ObjectFacts

        arch = Cubin(elf).arch
        try:
            tk = tkinfo(elf)
        except DeviceBinaryError:
            tk = None
        producer = options = ""
        if tk is not None:
            producer = " ".join(p for p in (tk.tool_name, tk.tool_version) if p)
            options = tk.tool_options.strip()
        return ObjectFacts(arch, self.default_triple, producer, options)

    def resources_tables(self, elf: ElfFile, head: ImageKeys, model: ModelSource, *, json: bool, text: bool,
                         ) -> ImageResources | None:
        """A cubin's JSON record, table rows and cuobjdump ``-res-usage`` numbers
        (:func:`devbin.targets.nvidia.resources.resources_tables`)."""
        from devbin.targets.nvidia.resources import resources_tables

        return resources_tables(elf, head, model, json, text)

    def format_resource_usage(self, usage: dict[str, Any]) -> str:
        """``cuobjdump -res-usage``'s lines (:func:`devbin.targets.nvidia.resources.format_cuobjdump`)."""
        from devbin.targets.nvidia.resources import format_cuobjdump

        return format_cuobjdump(usage)

    def resource_usage_lines(self, data: Buffer) -> str | None:
        """``cuobjdump -res-usage``'s lines of a plain cubin in one compiled pass
        (:func:`devbin.targets.nvidia.resources.usage_lines`)."""
        from devbin.targets.nvidia.resources import usage_lines

        return usage_lines(data)

    def inspect_record(self, elf: ElfFile) -> dict[str, Any] | None:
        """The cubin's NVIDIA sections (:func:`devbin.targets.nvidia.describe.describe_cubin`)."""
        from devbin.targets.nvidia.cubin import Cubin
        from devbin.targets.nvidia.describe import describe_cubin

        return describe_cubin(Cubin(elf))

    def format_inspect_record(self, record: dict[str, Any]) -> str:
        """:func:`devbin.targets.nvidia.describe.describe_text`."""
        from devbin.targets.nvidia.describe import describe_text

        return describe_text(record)

    def load_attribute_names(self) -> None:
        import devbin.targets.nvidia.importer  # noqa: F401  (registers the nvidia.* ids at import)


#: The descriptor (registered in :mod:`devbin.targets.registry`).
NVIDIA = NvidiaVendor()
