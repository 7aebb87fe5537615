"""What a device image says about itself, told on its :class:`~devbin.images.Image` record.

:func:`describe` gives the image a package is built from as its own bytes describe it, never
guessed: ``kind``, ``vendor``, ``arch`` and the ``triple`` metadata key, and the facts keys
below appended to its metadata.  :func:`loose_image` is the record of a file that is one image
(a cubin or code object, PTX text, LLVM bitcode, NVIDIA LTO-IR, or unknown data).  There is
no second record: the facts are metadata keys of the one :class:`~devbin.images.Image`, read
by :func:`producer`, :func:`compile_options`, :func:`link_options`, :func:`relocatable`,
:func:`code_object_version`, :func:`vendor_id` and :func:`vendor_name`.

* cubin (``EM_CUDA``): the SM from ``e_flags``, the ``a`` variant from ``.nv.compat``; producer and
  options from ``.note.nv.tkinfo`` (``ptxas`` and the options it ran with);
  relocatable when ``ET_REL`` (``-rdc``/``-c``);
* AMDGPU code object (``EM_AMDGPU``): the target ID (processor, xnack, sramecc) from
  ``e_flags`` or the metadata note, code object version; producer from ``.comment``;
* PTX text: ``.target`` gives the virtual arch (``compute_XX``), the header comment
  the producer (``Cuda compilation tools, release ...``);
* LLVM bitcode: kind only (target keys must come from the user);
* a SPIR-V module (the JIT fallback of Intel GPUs): the ``triple`` from its addressing model
  (``spir64-unknown-unknown`` for Physical64), the producer from its header's generator word as
  ``spirv-dis`` prints it; no arch of its own (a container's, if any, is kept) and no vendor
  unless its container gave one;
* NVIDIA LTO-IR (``nvcc -dlto``; magic ``ed 43 4e 7f``): kind and vendor; its
  bytes are opaque, so the virtual arch comes from the fatbin entry that held
  it (the image's ``arch``) or the user's ``TargetID=``;
* a devbin-annotated object: its ``.devbin.meta`` keys ``producer``, ``compile-options`` and
  ``link-options`` fill what the vendor's structures leave out.

Metadata keys :func:`describe` appends (docs/IMAGES.md): ``producer``, ``compile-options``,
``link-options``, ``relocatable`` (``yes``/``no``), ``code-object-version``; a key is there only
when the image records it.  Unknown facts stay empty; the packer never invents a value.
"""

from __future__ import annotations

import re
from dataclasses import replace

from devbin.binary import Buffer, ByteView
from devbin.errors import DeviceBinaryError
from devbin.formats import magic as M
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.formats.spirv import read_spirv
from devbin.images.address import Address
from devbin.images.containers import BARE
from devbin.images.record import BITCODE, DATA, LTO_IR, PTX, SPIRV, BareElf, Image
from devbin.images.scan import scan_bytes
from devbin.targets.registry import vendor_for_kind, vendor_for_machine, vendor_named
from devbin.targets.vendor import Vendor

__all__ = [
    "FACT_KEYS", "LTOIR_MAGIC", "arch_name_of_sm", "code_object_version", "compile_options", "describe",
    "link_options", "loose_image", "parse_sm", "producer", "relocatable", "vendor_id", "vendor_name", "with_fact",
]

LTOIR_MAGIC = b"\xedCN\x7f"  # NVIDIA LTO-IR as nvcc -dlto stores it in a fatbin entry
#: The metadata keys :func:`describe` appends.
FACT_KEYS = ("producer", "compile-options", "link-options", "relocatable", "code-object-version")


def parse_sm(name: str) -> tuple[int, str] | None:
    """``sm_90a`` / ``compute_100f`` -> ``(90, "a")`` / ``(100, "f")``: the generation and variant of an
    architecture of PTX's vendor (:meth:`devbin.targets.vendor.Vendor.generation`), which the PTX policy
    orders by; None for any other name."""
    return _of_kind(PTX).generation(name)


def arch_name_of_sm(sm: int, *, virtual: bool = False) -> str:
    """The inverse of :func:`parse_sm` for plain names: ``90`` -> ``sm_90``, virtual ``compute_90``."""
    return _of_kind(PTX).format_arch(sm, virtual=virtual)


# --------------------------------------------------------------------------- reading the facts


def _fact(image: Image, key: str) -> str:
    """The last value of ``key`` (what :func:`describe` appended wins over a container's pair of that name)."""
    return next((v for k, v in reversed(image.metadata) if k == key), "")


def producer(image: Image) -> str:
    return _fact(image, "producer")


def compile_options(image: Image) -> str:
    return _fact(image, "compile-options")


def link_options(image: Image) -> str:
    return _fact(image, "link-options")


def relocatable(image: Image) -> bool | None:
    """True for relocatable code (``ET_REL``, PTX from ``-rdc``), False for whole-program, None unknown."""
    return {"yes": True, "no": False}.get(_fact(image, "relocatable"))


def code_object_version(image: Image) -> int | None:
    v = _fact(image, "code-object-version")
    return int(v) if v.isdigit() else None


def vendor_id(image: Image) -> str:
    """The PCI vendor ID of ``image``'s vendor (``0x10de``), ``""`` for none."""
    v = vendor_named(image.vendor)
    return v.pci_vendor_id if v is not None else ""


def vendor_name(image: Image) -> str:
    """``image``'s vendor as prose writes it (``NVIDIA``), ``""`` for none."""
    v = vendor_named(image.vendor)
    return v.title if v is not None else ""


def with_fact(image: Image, key: str, value: str | bool | int | None) -> Image:
    """``image`` with the fact ``key`` set (``None`` or ``""``: left out); an earlier fact of that key goes."""
    text = "" if value is None else ("yes" if value else "no") if isinstance(value, bool) else str(value)
    pairs = [(k, v) for k, v in image.metadata if k != key or key not in FACT_KEYS]
    if text:
        pairs.append((key, text))
    return replace(image, metadata=tuple(pairs))


# --------------------------------------------------------------------------- learning them


def _comment(elf: ElfFile) -> str:
    for s in elf.sections:
        if s.name == ".comment" and s.file_size:
            parts = [p.decode("utf-8", "replace").strip() for p in bytes(s.data).split(b"\0")]
            return "; ".join(p for p in dict.fromkeys(parts) if p)
    return ""


def _devbin_meta(elf: ElfFile) -> dict[str, str]:
    from devbin.formats.devsec.elf import read_code_object
    try:
        co = read_code_object(elf)
    except DeviceBinaryError:
        return {}
    if co is None:
        return {}
    return {k: v if isinstance(v, str) else v.hex() if isinstance(v, bytes) else str(v)
            for k, v in co.metadata.items()}


_Facts = dict[str, str | bool | int | None]


def _described(image: Image, *, kind: str, vendor: str, arch: str, triple: str, facts: _Facts,
               extra: dict[str, str] | None = None) -> Image:
    """``image`` as its bytes describe it: ``kind``/``vendor``/``arch``, the ``triple`` key (the bytes'
    when they name one, else the container's), and the facts (a devbin-annotated object's keys where the
    bytes say nothing)."""
    extra = extra or {}
    meta = image.metadata
    if triple:  # the bytes' own triple replaces the one a container filed the image under
        meta = (*((k, v) for k, v in meta if k not in ("triple", "Triple")), ("triple", triple))
    out = replace(image, kind=kind, vendor=vendor, arch=arch, metadata=meta)
    merged: _Facts = {
        "producer": facts.get("producer") or extra.get("producer", ""),
        "compile-options": facts.get("compile-options") or extra.get("compile-options", ""),
        "link-options": extra.get("link-options", ""),
        "relocatable": facts.get("relocatable"),
        "code-object-version": facts.get("code-object-version"),
    }
    for key, value in merged.items():
        out = with_fact(out, key, value)
    return out


def _device_elf(image: Image, elf: ElfFile, vendor: Vendor) -> Image:
    """A vendor's code object, as it describes itself (:meth:`devbin.targets.vendor.Vendor.object_facts`)."""
    facts = vendor.object_facts(elf)
    return _described(image, kind=vendor.object_kind, vendor=vendor.name, arch=facts.arch, triple=facts.triple,
                      facts={"producer": _comment(elf) if facts.producer is None else facts.producer,
                             "compile-options": facts.compile_options,
                             "relocatable": elf.header.e_type == C.ET_REL,
                             "code-object-version": facts.code_object_version}, extra=_devbin_meta(elf))


def _of_kind(kind: str) -> Vendor:
    """The vendor whose kind ``kind`` (PTX, LTO-IR) is."""
    v = vendor_for_kind(kind)
    assert v is not None, kind
    return v


_PTX_DIRECTIVE = re.compile(rb"(?m)^[ \t]*\.(?:version|target)[ \t]")


def is_ptx_text(head: bytes) -> bool:
    """Whether a file's first bytes (4 KiB) read as PTX: a line that begins with a ``.version`` or
    ``.target`` directive, which every PTX module starts with (PTX ISA, "PTX Module Directives").  The
    directive must open a line: an AMDGPU code object's metadata holds the key ``amdhsa.target``."""
    return _PTX_DIRECTIVE.search(head) is not None


def _ptx(image: Image, text: str) -> Image:
    target = re.search(r"^\s*\.target\s+([^\s,]+)", text, re.M)
    vendor = _of_kind(PTX)
    arch = vendor.virtual_arch(target[1]) if target else ""
    prod = re.search(r"^//\s*(Cuda compilation tools[^\n]*)$", text, re.M)
    return _described(image, kind=PTX, vendor=vendor.name, arch=arch, triple=vendor.default_triple,
                      facts={"producer": prod[1].strip() if prod else ""})


def describe(image: Image, data: Buffer | None = None) -> Image:
    """``image`` as its own bytes describe it (see the module docstring).  ``data``: its bytes when
    the caller has them already (a loose file's, or an entry devbin cannot decode), else ``image.data()``."""
    raw = image.data() if data is None else data
    where = str(image.address)
    view = ByteView(raw, where=where)
    if image.kind == LTO_IR or view.startswith(LTOIR_MAGIC):
        vendor = _of_kind(LTO_IR)
        return _described(image, kind=LTO_IR, vendor=vendor.name, arch=image.arch if image.kind == LTO_IR else "",
                          triple=vendor.default_triple, facts={})
    if M.detect(view) == M.ELF:
        elf = ElfFile(raw, where=where)
        owner = vendor_for_machine(elf.header.e_machine)
        if owner is not None:
            return _device_elf(image, elf, owner)
        return _described(image, kind=DATA, vendor="", arch="", triple="", facts={}, extra=_devbin_meta(elf))
    if M.image_magic(view) in (M.BITCODE, M.BITCODE_WRAPPER):
        return _described(image, kind=BITCODE, vendor="", arch="", triple="", facts={})
    if M.image_magic(view) == M.SPIRV:
        module = read_spirv(view, where=where)
        return _described(image, kind=SPIRV, vendor=image.vendor if image.kind == SPIRV else "", arch=image.arch,
                          triple=module.triple, facts={"producer": module.generator_text})
    if is_ptx_text(bytes(view.bytes_at(0, min(len(view), 4096)))):
        try:
            return _ptx(image, bytes(raw).decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return _described(image, kind=DATA, vendor="", arch="", triple="", facts={})


def loose_image(data: Buffer, where: str) -> Image:
    """The record of a file that is one image, described (:func:`describe`): a device ELF as the scan
    gives it, anything else (PTX, bitcode, LTO-IR, unknown data) a bare image of no native record."""
    if M.detect(ByteView(data, where=where)) == M.ELF:
        found = [i for i in scan_bytes(data, where) if isinstance(i.native, BareElf)]
        if found:
            return describe(found[0], data)
    size = len(memoryview(data))
    bare = Image(address=Address(where), vendor="", kind=DATA, arch="", size=size, stored_size=size,
                 compression="none", container=BARE.name, section="", offset=0)
    return describe(bare, data)
