"""``devbin pack``: many device images -> one multi-target package with metadata.

Steps, each a small function: read the inputs (a device image is one image; a
container -- fatbin, OffloadBinary, bundle, wrapped image, host object -- gives
every image in it, with the metadata it already carries); learn each image's
facts (:mod:`devbin.packaging.facts`); apply the PTX policy (:mod:`devbin.packaging.ptx`);
check option consistency (:mod:`devbin.packaging.consistency`); build each image's
metadata; write the container.  :func:`check` is every step but the last, for
a linker that wants the same checks (and ``devbin pack --check-only``).

Translation units: ``tu=KEY`` names an input's unit; by default a container
input (fatbin, host object, OffloadBinary ...) is one unit of its own and
loose images (a bare cubin, PTX file ...) share one.  The PTX policy is
applied per unit, and option checks compare units.

Metadata written for every image, in this order, then the user's own keys in
the order given (a user key of the same name replaces the standard value):
``Producer``, ``CompileOptions``, ``LinkOptions``, ``TargetID``, ``VendorId``,
``VendorName``; an empty value means the image does not record it.  In an
OffloadBinary LLVM's own keys ``triple`` and ``arch`` come first, so LLVM tools
(``llvm-objdump --offloading``, the linker wrapper) read the package as theirs.
A CUDA fatbin has room only for an options string per entry (``CompileOptions``
goes there); a clang offload bundle has none: keys that cannot be stored are
named in a warning, never dropped silently.

Besides the registry's containers (:data:`FORMATS`), a vendor's own container is written by its
descriptor (:attr:`devbin.targets.vendor.Vendor.pack_formats`, :func:`pack_format_names`; Intel's
``ocloc`` fat archive), given each image's kind, ``TargetID`` and bytes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from devbin.errors import FormatError, UsageError
from devbin.formats.bundle.constants import bundle_offload_kind
from devbin.formats.elf.reader import ElfFile
from devbin.formats.fatbin import constants as FC
from devbin.formats.fatbin.reader import FatbinEntry
from devbin.formats.fatbin.writer import FatbinImage, write_fatbin
from devbin.formats.magic import ELF, UNKNOWN, detect
from devbin.images.containers import format_named, producer_metadata
from devbin.images.record import DATA, HOST, LTO_IR, PTX, SPIRV, Image
from devbin.images.scan import scan_bytes
from devbin.images.scanreport import ScanReport
from devbin.packaging.consistency import Finding, ImageSettings, check_consistency, settings_from_options
from devbin.packaging.facts import (
    code_object_version,
    compile_options,
    describe,
    link_options,
    loose_image,
    parse_sm,
    producer,
    relocatable,
    vendor_id,
    vendor_name,
    with_fact,
)
from devbin.packaging.ptx import DEFAULT_PTX_POLICY, choose_ptx, parse_ptx_policy
from devbin.targets.registry import VENDORS, vendor_for_kind, vendor_for_machine, vendor_named
from devbin.targets.vendor import Vendor

__all__ = ["FORMATS", "PackInput", "PackResult", "PackedImage", "STANDARD_KEYS", "check", "pack", "pack_format_names",
           "parse_image_spec"]

#: The container formats pack writes (``--format``; each one's compressions are its registry entry's
#: ``pack_compressions``), the default first; then the vendors' own (:func:`pack_format_names`).
FORMATS = ("offload", "fatbin", "bundle", "wrapped")


def _vendor_formats() -> dict[str, Vendor]:
    """The vendors' own containers pack writes (:attr:`devbin.targets.vendor.Vendor.pack_formats`) -> the vendor."""
    return {name: v for v in VENDORS for name in v.pack_formats}


def pack_format_names() -> tuple[str, ...]:
    """Every ``--format``: :data:`FORMATS`, then the vendors' own containers (Intel: ``ocloc``)."""
    return (*FORMATS, *_vendor_formats())
STANDARD_KEYS = ("Producer", "CompileOptions", "LinkOptions", "TargetID", "VendorId", "VendorName")
_CONTROL_KEYS = ("file", "tu", "kind")
DEFAULT_TU = "(loose images)"  # read by pack itself, not stored as metadata


@dataclass(frozen=True, slots=True)
class PackInput:
    """One ``--image``: the bytes, a display name, and the user's ``key=value`` pairs."""

    data: bytes
    name: str
    keys: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_spec(cls, spec: str) -> PackInput:
        path, keys = parse_image_spec(spec)
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise UsageError(f"--image {path}: {e.strerror or e}") from None
        return cls(data, path, keys)


def parse_image_spec(spec: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``file=k.cubin,key=value,...`` -> ``("k.cubin", (("key", "value"), ...))``.

    Values cannot contain commas (as in ``clang-offload-packager --image``)."""
    path = ""
    keys: list[tuple[str, str]] = []
    for part in spec.split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise UsageError(f"--image: expected key=value, got {part!r} in {spec!r}")
        if key == "file":
            path = value
        elif any(k == key for k, _ in keys):
            raise UsageError(f"--image: key {key!r} given twice in {spec!r}")
        else:
            keys.append((key, value))
    if not path:
        raise UsageError(f"--image: no file= in {spec!r}")
    return path, tuple(keys)


@dataclass(frozen=True, slots=True)
class PackedImage:
    """One image of a package: the input :class:`~devbin.images.Image` as its bytes describe it
    (:func:`devbin.packaging.facts.describe`: kind, vendor, arch, triple and the facts keys), its
    translation unit, the metadata written for it, and its bytes."""

    image: Image
    tu: str
    metadata: tuple[tuple[str, str], ...]
    data: bytes = field(repr=False)
    offload_kind: str = ""
    stored: FatbinEntry | None = field(default=None, repr=False, compare=False)  # copied as stored

    @property
    def label(self) -> str:
        """The input image's address (``k.cubin``, ``in.fatbin#0.1``)."""
        return str(self.image.address)

    def get(self, key: str) -> str:
        return next((v for k, v in self.metadata if k == key), "")

    def to_dict(self) -> dict[str, object]:
        return {**self.image.to_dict(), "tu": self.tu, "metadata": dict(self.metadata)}


@dataclass(frozen=True, slots=True)
class PackResult:
    data: bytes = field(repr=False)
    format: str
    images: tuple[PackedImage, ...]
    dropped: tuple[PackedImage, ...]  # PTX left out by the policy
    warnings: tuple[str, ...]
    findings: tuple[Finding, ...]

    def to_dict(self) -> dict[str, object]:
        return {"format": self.format, "size": len(self.data), "images": [i.to_dict() for i in self.images],
                "dropped": [i.to_dict() for i in self.dropped], "warnings": list(self.warnings),
                "findings": [{"option": f.option, "message": f.message, "images": list(f.images)}
                             for f in self.findings]}


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class _Expanded:
    image: Image  # described (facts.describe)
    data: bytes
    carried: tuple[tuple[str, str], ...]  # metadata the container already carries
    from_container: bool = True
    stored: FatbinEntry | None = None  # a fatbin entry to copy as stored (LTO-IR devbin cannot decode)


def _device_elf(data: bytes) -> bool:
    try:
        return vendor_for_machine(ElfFile(data).header.e_machine) is not None
    except FormatError:
        return False


def _carried(image: Image) -> tuple[tuple[str, str], ...]:
    """What the container stored about ``image``: an OffloadBinary entry's strings, a wrapped image's
    pairs, a fatbin entry's options string as ``CompileOptions``."""
    pairs = list(producer_metadata(image))
    e = image.entry
    if e is not None and e.options and not any(k == "CompileOptions" for k, _ in pairs):
        pairs.append(("CompileOptions", e.options.strip()))
    return tuple(pairs)


def _expand(inp: PackInput) -> list[_Expanded]:
    """Every image of one input (the scan's, every image), with the metadata its container already carries."""
    kind = detect(inp.data)
    if kind == UNKNOWN or (kind == ELF and _device_elf(inp.data)):
        return [_Expanded(loose_image(inp.data, inp.name), inp.data, (), from_container=False)]
    rep = ScanReport()
    out = []
    for image in scan_bytes(inp.data, inp.name, all=True, report=rep):
        if image.kind == HOST:
            continue
        stored = None
        e = image.entry
        if e is not None and e.is_opaque:
            data, stored = bytes(e.raw_payload), e  # NVIDIA's own LTO-IR encoding: copy it as is
        else:
            data = bytes(image.data())
        out.append(_Expanded(describe(image, data), data, _carried(image), stored=stored))
    if not out:
        detail = "; ".join(rep.warnings)
        raise UsageError(f"{inp.name}: no device image found" + (f" ({detail})" if detail else ""))
    return out


def _metadata(image: Image, carried: Sequence[tuple[str, str]], user: Sequence[tuple[str, str]],
              llvm_keys: bool) -> tuple[tuple[str, str], ...]:
    std = {"Producer": producer(image), "CompileOptions": compile_options(image), "LinkOptions": link_options(image),
           "TargetID": image.arch, "VendorId": vendor_id(image), "VendorName": vendor_name(image)}
    pairs: dict[str, str] = {}
    if llvm_keys:
        pairs["triple"] = image.triple
        pairs["arch"] = image.arch
    pairs.update(std)
    for k, v in carried:  # what a container already said about the image wins over what the image says
        if v or k not in pairs:
            pairs[k] = v
    for k, v in user:
        if k not in _CONTROL_KEYS:
            pairs[k] = v
    if not llvm_keys:
        pairs.pop("triple", None)
        pairs.pop("arch", None)
    elif "TargetID" in dict(user) and "arch" not in dict(user):
        pairs["arch"] = pairs["TargetID"]
    return tuple(pairs.items())


def _offload_kind(image: Image, user: dict[str, str]) -> str:
    k = user.get("kind", "").lower()
    if k:
        return k
    v = vendor_named(image.vendor)
    return v.offload_kind if v is not None else "none"


def _shared_kind(packed: Sequence[PackedImage], asked: Sequence[bool]) -> list[PackedImage]:
    """SPIR-V of no vendor whose offload kind nobody asked for (``asked``: ``kind=`` given, per image) takes
    the one every other image of the package has, when they agree (``sycl`` beside Intel zebins: SPIR-V is
    their JIT fallback); else it stays ``none``."""
    kinds = {p.offload_kind for p in packed if p.image.kind != SPIRV}
    if len(kinds) != 1 or "none" in kinds:
        return list(packed)
    (kind,) = kinds
    return [replace(p, offload_kind=kind) if p.image.kind == SPIRV and not p.image.vendor and not a else p
            for p, a in zip(packed, asked, strict=True)]


# --------------------------------------------------------------------------- writers


def _image_kind(kind: str) -> int:
    """The OffloadBinary image kind of an image kind: a vendor's code object other than a cubin is an ELF object
    (``IMG_Object``, as clang-sycl-linker files Intel's AOT images), SPIR-V ``IMG_SPIRV`` (LLVM 22's
    ``OffloadBinary.h``; LLVM ``clang/tools/clang-sycl-linker/ClangSYCLLinker.cpp`` writes both)."""
    from devbin.formats.offload import constants as OC
    named = {"cubin": OC.IMG_CUBIN, "amdgpu": OC.IMG_OBJECT, "ptx": OC.IMG_PTX, "bitcode": OC.IMG_BITCODE,
             "lto-ir": OC.IMG_BITCODE, SPIRV: OC.IMG_SPIRV}
    if kind in named:
        return named[kind]
    owner = vendor_for_kind(kind)
    return OC.IMG_OBJECT if owner is not None and owner.object_kind == kind else OC.IMG_NONE


def _write_offload(images: Sequence[PackedImage], version: int) -> tuple[bytes, list[str]]:
    """The OffloadBinary of ``images``.  Version 1 numbers offload kinds as LLVM 15-20 do unless a kind
    exists only in LLVM 21+'s bit mask (``sycl``): then every entry is numbered as LLVM 21+ writes version 1
    (``clang-offload-packager-22``), and a warning says so (LLVM 19's tools show those kinds as none)."""
    from devbin.formats.offload import constants as OC
    from devbin.formats.offload.writer import OffloadImage, write_offload_binary
    legacy_kinds = OC.offload_kinds(legacy=True)
    legacy = version == 1 and all(img.offload_kind in legacy_kinds for img in images)
    kinds = OC.offload_kinds(legacy=legacy)
    warnings = []
    if version == 1 and not legacy:
        newer = sorted({img.offload_kind for img in images} - set(legacy_kinds))
        warnings.append(f"offload kind {', '.join(newer)} exists only in LLVM 21+'s numbering: every entry's offload "
                        "kind is written in it (llvm-objdump-22 reads them; LLVM 20 and older show other kinds than "
                        "none, openmp and cuda as none)")
    out = []
    for img in images:
        if img.offload_kind not in kinds:
            raise UsageError(f"{img.label}: offload kind {img.offload_kind!r} is not one of "
                             f"{', '.join({**legacy_kinds, **OC.offload_kinds(legacy=False)})} (OffloadBinary "
                             f"version {version})")
        if img.stored is not None:
            out.append(OffloadImage.of(_stored_fatbin(img), image_kind=OC.IMG_FATBINARY,
                                       offload_kind=kinds[img.offload_kind], strings=img.metadata))
            continue
        out.append(OffloadImage.of(img.data, image_kind=_image_kind(img.image.kind),
                                   offload_kind=kinds[img.offload_kind], strings=img.metadata))
    return write_offload_binary(out, version=version), warnings


def _stored_image(img: PackedImage) -> FatbinImage:
    """The fatbin entry of an image devbin cannot decode, to be written back exactly as it was stored."""
    e = img.stored
    assert e is not None
    options = img.get("CompileOptions")
    options = e.options if options == e.options.strip() else options  # unchanged: keep its exact bytes
    return FatbinImage(e.kind, e.arch, img.data, identifier=e.identifier, options=options,
                       variant=e.variant, compression=e.compression, flags=e.flags, major=e.major, minor=e.minor,
                       stored_size=e.uncompressed_size, reserved=e.reserved)  # nvJitLink needs the reserved word


def _stored_fatbin(img: PackedImage) -> bytes:
    """A one-entry fatbin holding a stored entry: how containers other than a fatbin carry it."""
    return write_fatbin([_stored_image(img)])


def _write_fatbin(images: Sequence[PackedImage], compression: str) -> tuple[bytes, list[str]]:
    kinds = {"cubin": FC.KIND_ELF, "ptx": FC.KIND_PTX, "lto-ir": FC.KIND_LTOIR}
    out = []
    lost: set[str] = set()
    for img in images:
        sm = parse_sm(img.image.arch)
        if img.image.kind not in kinds or sm is None:
            raise UsageError(f"{img.label}: a CUDA fatbin holds NVIDIA cubins, PTX and LTO-IR only "
                             f"(this is {img.image.kind} for {img.image.arch or 'no known arch'})")
        if img.stored is not None:
            out.append(_stored_image(img))
            lost.update(k for k, v in img.metadata if v and k != "CompileOptions")
            continue
        data = img.data.rstrip(b"\0") if img.image.kind == PTX else img.data
        out.append(FatbinImage(kinds[img.image.kind], sm[0], data, options=img.get("CompileOptions"),
                               variant=sm[1], compression=compression))
        lost.update(k for k, v in img.metadata if v and k != "CompileOptions")
    warnings = [f"a CUDA fatbin stores only CompileOptions (in each entry's options string); not stored: "
                f"{', '.join(sorted(lost))}"] if lost else []
    return write_fatbin(out), warnings


def _bundle_id(img: PackedImage) -> str:
    triple = img.image.triple or "unknown-unknown-unknown"
    if triple.count("-") == 2:
        triple += "-"  # bundle IDs spell the environment, empty or not
    okind = bundle_offload_kind(img.offload_kind)
    return f"{okind}-{triple}-{img.image.arch}"


def _write_bundle(images: Sequence[PackedImage], compression: str) -> tuple[bytes, list[str]]:
    from devbin.formats.bundle.writer import write_bundle, write_compressed_bundle
    entries = [(_bundle_id(i), _stored_fatbin(i) if i.stored is not None else i.data) for i in images]
    ids = [e[0] for e in entries]
    dup = sorted({x for x in ids if ids.count(x) > 1})
    if dup:
        raise UsageError(f"a bundle needs one image per target; given twice: {', '.join(dup)}")
    lost = sorted({k for i in images for k, v in i.metadata if v})
    warnings = [f"a clang offload bundle has no metadata; not stored: {', '.join(lost)}"] if lost else []
    if compression == "none":
        return write_bundle(entries), warnings
    return write_compressed_bundle(entries, method=compression), warnings


# --------------------------------------------------------------------------- pack


def check(inputs: Sequence[PackInput | str | os.PathLike[str]], *, ptx: str = DEFAULT_PTX_POLICY,
          strict: bool = False, llvm_keys: bool = True) -> PackResult:
    """Everything :func:`pack` does except writing a container: read the inputs, apply the PTX
    policy per translation unit, build the metadata and check option consistency.

    For a linker (or ``devbin pack --check-only``): the result's ``images``/``dropped`` say what a
    package would hold, ``warnings`` and ``findings`` what is wrong with it, ``data`` is empty and
    ``format`` is ``"check"``.  ``strict`` makes option contradictions a :class:`~devbin.errors.UsageError`.
    """
    policy = parse_ptx_policy(ptx)
    if not inputs:
        raise UsageError("nothing to pack: give at least one --image")
    staged: list[tuple[_Expanded, str, Image, tuple[tuple[str, str], ...]]] = []
    for raw in inputs:
        inp = raw if isinstance(raw, PackInput) else PackInput(Path(raw).read_bytes(), os.fspath(raw))
        user = dict(inp.keys)
        expanded = _expand(inp)
        # A container is one translation unit's output; loose images share one unless tu= says otherwise.
        tu = user.get("tu") or (inp.name if expanded[0].from_container else DEFAULT_TU)
        for item in expanded:
            image = _facts(item, user)
            if image.kind == DATA and not user.get("TargetID"):
                raise UsageError(f"{image.address}: not a device image devbin knows (cubin, PTX, AMDGPU code object, "
                                 "bitcode, LTO-IR); give its TargetID= (and triple=) to pack it anyway")
            staged.append((item, tu, image, inp.keys))
    choice = choose_ptx([s[2] for s in staged], policy, [s[1] for s in staged])
    warnings = list(choice.warnings)
    packed: list[PackedImage] = []
    for item, tu, image, keys in staged:
        md = _metadata(image, item.carried, keys, llvm_keys=llvm_keys)
        packed.append(PackedImage(image, tu, md, item.data, _offload_kind(image, dict(keys)), item.stored))
    packed = _shared_kind(packed, [any(k == "kind" for k, _ in s[3]) for s in staged])
    kept = tuple(packed[i] for i in choice.keep)
    dropped = tuple(packed[i] for i in choice.dropped)
    for p in kept:
        if p.image.kind == PTX and relocatable(p.image):
            warnings.append(f"{p.label}: relocatable PTX ({p.get('CompileOptions') or '-rdc'}): the driver cannot "
                            "JIT it alone, so it helps no newer GPU (pack whole-program PTX, or --ptx none)")
    findings = check_consistency([_settings(p) for p in packed])  # PTX left out still tells how a TU was built
    if strict and findings:
        raise UsageError("contradictory options (--strict): " + " | ".join(str(f) for f in findings))
    return PackResult(b"", "check", kept, dropped, tuple(warnings), tuple(findings))


def pack(inputs: Sequence[PackInput | str | os.PathLike[str]], *, format: str = "offload",
         ptx: str = DEFAULT_PTX_POLICY, strict: bool = False, offload_version: int = 1,
         compression: str = "none") -> PackResult:
    """Pack ``inputs`` (``PackInput``s, or paths) into one container (see the module docstring).

    ``strict`` turns option contradictions into a :class:`~devbin.errors.UsageError`.
    """
    owner = _vendor_formats().get(format)
    if format not in FORMATS and owner is None:
        raise UsageError(f"--format must be one of {', '.join(pack_format_names())}, not {format!r}")
    if offload_version not in (1, 2):
        raise UsageError("OffloadBinary version must be 1 or 2")
    fmt = format_named(format)
    allowed = fmt.pack_compressions if fmt is not None and fmt.pack_compressions is not None else ("none",)
    if compression not in allowed:
        raise UsageError(f"--compress {compression} is not available for {format} (choose {', '.join(allowed)})")
    checked = check(inputs, ptx=ptx, strict=strict, llvm_keys=format == "offload")
    kept, dropped, findings = checked.images, checked.dropped, checked.findings
    warnings = list(checked.warnings)
    for p in kept:
        if p.stored is not None and format != "fatbin":
            warnings.append(f"{p.label}: LTO-IR stored in NVIDIA's own encoding, which devbin cannot decode; "
                            "carried as a one-entry fatbin holding the entry as stored")
    if format == "offload":
        data, more = _write_offload(kept, offload_version)
        warnings += more
    elif format == "fatbin":
        data, more = _write_fatbin(kept, compression)
        warnings += more
    elif format == "bundle":
        data, more = _write_bundle(kept, compression)
        warnings += more
    elif owner is not None:
        data = owner.write_container(format, [(p.image.kind, p.get("TargetID") or p.image.arch, p.data) for p in kept])
        lost = sorted({k for p in kept for k, v in p.metadata if v and k != "TargetID"})
        if lost:
            warnings.append(f"the {format} container stores no metadata but each image's TargetID; not stored: "
                            f"{', '.join(lost)}")
    else:
        if len(kept) != 1:
            raise UsageError(f"a wrapped image holds exactly one image; {len(kept)} to pack "
                             "(use --format offload, fatbin or bundle for several)")
        from devbin.formats.wrapped import write_wrapped
        one = kept[0]
        data = write_wrapped(_stored_fatbin(one) if one.stored is not None else one.data, one.metadata)
    return PackResult(data, format, kept, dropped, tuple(warnings), tuple(findings))


def _facts(item: _Expanded, user: dict[str, str]) -> Image:
    """The image as its bytes describe it; LTO-IR without an arch from its entry takes the user's
    ``TargetID=``, PTX ``relocatable`` from its options (a fatbin entry's ``--compile-only``)."""
    image = item.image
    if image.kind == LTO_IR and not image.arch and user.get("TargetID"):
        image = replace(image, arch=user["TargetID"])
    if image.kind == PTX and relocatable(image) is None:
        options = user.get("CompileOptions") or dict(item.carried).get("CompileOptions", "")
        image = with_fact(image, "relocatable", settings_from_options(options)["relocatable"])
    return image


def _settings(p: PackedImage) -> ImageSettings:
    opts = settings_from_options(p.get("CompileOptions"))
    own = relocatable(p.image)
    reloc = own if own is not None else opts["relocatable"]
    return ImageSettings(p.label, p.tu, p.image.arch, p.image.kind, reloc, opts["debug"], opts["fast_math"],
                         opts["ftz"], code_object_version(p.image))
