"""What a device image says about itself: kind, target, vendor, producer, options.

Filled from the image's own bytes, never guessed:

* cubin (``EM_CUDA``): the SM from ``e_flags``, the ``a`` variant from ``.nv.compat``; producer and
  options from ``.note.nv.tkinfo`` (``ptxas`` and the options it ran with);
  relocatable when ``ET_REL`` (``-rdc``/``-c``);
* AMDGPU code object (``EM_AMDGPU``): the target ID (processor, xnack, sramecc) from
  ``e_flags`` or the metadata note, code object version; producer from ``.comment``;
* PTX text: ``.target`` gives the virtual arch (``compute_XX``), the header comment
  the producer (``Cuda compilation tools, release ...``);
* LLVM bitcode: kind only (target keys must come from the user);
* NVIDIA LTO-IR (``nvcc -dlto``; magic ``ed 43 4e 7f``): kind and vendor; its
  bytes are opaque, so the virtual arch comes from the fatbin entry that held
  it (or the user's ``TargetID=``);
* a devbin-annotated object: its ``.devbin.meta`` keys fill what the vendor's
  structures leave out (producer, compile options ...).

Unknown facts stay empty; the packer never invents a value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from devbin.binary import ByteView
from devbin.detect import ELF, detect
from devbin.errors import DeviceBinaryError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.targets.nvidia.archs import try_parse_arch

__all__ = ["LTOIR_MAGIC", "NVIDIA_VENDOR_ID", "AMD_VENDOR_ID", "ImageFacts", "image_facts", "parse_sm"]

NVIDIA_VENDOR_ID = "0x10de"  # PCI vendor IDs
AMD_VENDOR_ID = "0x1002"
_BITCODE = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")
LTOIR_MAGIC = b"\xedCN\x7f"  # NVIDIA LTO-IR as nvcc -dlto stores it in a fatbin entry


def parse_sm(name: str) -> tuple[int, str] | None:
    """``sm_90a`` / ``compute_100f`` -> ``(90, "a")`` / ``(100, "f")``; None if not an NVIDIA arch name
    (:func:`devbin.targets.nvidia.archs.try_parse_arch`)."""
    a = try_parse_arch(name)
    return None if a is None else (a.sm, a.variant)


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """Facts about one image.  ``kind``: ``cubin``, ``ptx``, ``amdgpu``, ``bitcode``, ``ltoir`` or ``data``."""

    kind: str
    vendor: str = ""  # "nvidia", "amd" or ""
    arch: str = ""  # sm_90a, compute_90, gfx90a:xnack+ ...
    triple: str = ""
    producer: str = ""
    compile_options: str = ""
    relocatable: bool | None = None
    code_object_version: int | None = None
    extra: tuple[tuple[str, str], ...] = field(default=())  # devbin metadata keys of an annotated object

    @property
    def vendor_id(self) -> str:
        return {"nvidia": NVIDIA_VENDOR_ID, "amd": AMD_VENDOR_ID}.get(self.vendor, "")

    @property
    def vendor_name(self) -> str:
        return {"nvidia": "NVIDIA", "amd": "AMD"}.get(self.vendor, "")


def _comment(elf: ElfFile) -> str:
    for s in elf.sections:
        if s.name == ".comment" and s.file_size:
            parts = [p.decode("utf-8", "replace").strip() for p in bytes(s.data).split(b"\0")]
            return "; ".join(p for p in dict.fromkeys(parts) if p)
    return ""


def _devbin_meta(elf: ElfFile) -> tuple[tuple[str, str], ...]:
    from devbin.formats.devsec.elf import read_code_object
    try:
        co = read_code_object(elf)
    except DeviceBinaryError:
        return ()
    if co is None:
        return ()
    return tuple((k, v if isinstance(v, str) else v.hex() if isinstance(v, bytes) else str(v))
                 for k, v in co.metadata.items())


def _cubin(elf: ElfFile) -> ImageFacts:
    from devbin.targets.nvidia.cubin import Cubin
    from devbin.targets.nvidia.notes import tkinfo
    h = elf.header
    arch = Cubin(elf).arch
    producer = options = ""
    try:
        tk = tkinfo(elf)
    except DeviceBinaryError:
        tk = None
    if tk is not None:
        producer = " ".join(p for p in (tk.tool_name, tk.tool_version) if p)
        options = tk.tool_options.strip()
    return ImageFacts("cubin", "nvidia", arch, "nvptx64-nvidia-cuda", producer, options, h.e_type == C.ET_REL,
                      extra=_devbin_meta(elf))


def _amdgpu(elf: ElfFile) -> ImageFacts:
    from devbin.targets.amdgpu.importer import code_object_facts
    facts = code_object_facts(elf, diag=lambda e: None)
    return ImageFacts("amdgpu", "amd", facts.target_id, facts.triple, _comment(elf), "",
                      elf.header.e_type == C.ET_REL, facts.flags.code_object_version, extra=_devbin_meta(elf))


def _ptx(text: str) -> ImageFacts:
    target = re.search(r"^\s*\.target\s+([^\s,]+)", text, re.M)
    nv = try_parse_arch(target[1]) if target else None
    arch = replace(nv, kind="ptx").name if nv is not None else ""
    producer = re.search(r"^//\s*(Cuda compilation tools[^\n]*)$", text, re.M)
    return ImageFacts("ptx", "nvidia", arch, "nvptx64-nvidia-cuda", producer[1].strip() if producer else "")


def image_facts(data: bytes | memoryview, *, where: str = "") -> ImageFacts:
    """The facts ``data`` gives about itself (see the module docstring)."""
    view = ByteView(data, where=where)
    if detect(view) == ELF:
        elf = ElfFile(data, where=where)
        if elf.header.e_machine == C.EM_CUDA:
            return _cubin(elf)
        if elf.header.e_machine == C.EM_AMDGPU:
            return _amdgpu(elf)
        return ImageFacts("data", extra=_devbin_meta(elf))
    if view.startswith(_BITCODE[0]) or view.startswith(_BITCODE[1]):
        return ImageFacts("bitcode")
    if view.startswith(LTOIR_MAGIC):
        return ImageFacts("ltoir", "nvidia", triple="nvptx64-nvidia-cuda")
    head = bytes(view.bytes_at(0, min(len(view), 4096)))
    if b".version" in head or b".target" in head:
        try:
            return _ptx(bytes(data).decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return ImageFacts("data")
