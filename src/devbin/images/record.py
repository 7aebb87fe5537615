"""The :class:`Image` record: one device image wherever it sits, and the vocabulary it is told in.

Every scan (:mod:`devbin.images.scan`) gives one :class:`Image` per device image: a bare
file, a fatbin entry, an OffloadBinary entry, a clang offload bundle entry, a devbin
wrapped image, each possibly inside an ``ar`` member, a zip/wheel member or a host ELF
section.  Its :class:`~devbin.images.address.Address` says where; the other fields say what
it is, told in the vocabularies below.  The bytes are read only when :meth:`Image.data` or
:meth:`Image.code_object` is called.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from devbin.errors import FormatError, UsageError
from devbin.formats.fatbin import constants as FC
from devbin.images.address import Address
from devbin.targets.registry import object_kinds, vendor_names

if TYPE_CHECKING:
    from devbin.formats.fatbin.reader import FatbinEntry
    from devbin.importers import Diag
    from devbin.model import CodeObject

__all__ = [
    "AMDGPU", "BITCODE", "CUBIN", "DATA", "FATBIN", "HOST", "KINDS", "LTO_IR", "OPAQUE", "PTX", "SPIRV",
    "FATBIN_CONTAINER", "VENDORS", "ZEBIN", "BareElf", "Image", "Native", "NativeImage", "fatbin_kind", "find_image",
]

# --------------------------------------------------------------------------- kinds

CUBIN: Final = "cubin"  #: an NVIDIA cubin (ELF, e_machine 190 EM_CUDA)
PTX: Final = "ptx"  #: PTX text
LTO_IR: Final = "lto-ir"  #: NVIDIA LTO-IR (a fatbin entry of kind 8, nvcc -dlto)
AMDGPU: Final = "amdgpu"  #: an AMDGPU code object (ELF, e_machine 224 EM_AMDGPU)
ZEBIN: Final = "zebin"  #: an Intel GPU zebin (ELF, e_machine 205 EM_INTELGT)
BITCODE: Final = "bitcode"  #: LLVM bitcode, raw or in its wrapper
SPIRV: Final = "spirv"  #: a SPIR-V module
FATBIN: Final = "fatbin"  #: a CUDA fatbin stored as one image (an OffloadBinary entry) and not opened further
HOST: Final = "host"  #: a host object (any other ELF, or a bundle's host entry)
DATA: Final = "data"  #: anything else: bytes of no known kind (an unknown fatbin entry kind included)

#: The one kind vocabulary, with what each kind means.
KINDS: Final[dict[str, str]] = {
    CUBIN: "NVIDIA cubin (ELF, EM_CUDA)",
    PTX: "PTX text",
    LTO_IR: "NVIDIA LTO-IR",
    AMDGPU: "AMDGPU code object (ELF, EM_AMDGPU)",
    ZEBIN: "Intel GPU zebin (ELF, EM_INTELGT)",
    BITCODE: "LLVM bitcode",
    SPIRV: "SPIR-V module",
    FATBIN: "CUDA fatbin, not opened further",
    HOST: "host object",
    DATA: "unknown data",
}

#: ``vendor``: whose device the image is for (a vendor descriptor's name, :mod:`devbin.targets.registry`);
#: ``""`` for host objects and unknown data.
VENDORS: Final = (*vendor_names(), "")

#: ``Image.compression`` of LTO-IR in NVIDIA's own encoding (:attr:`FatbinEntry.is_opaque`).
OPAQUE: Final = "nvidia-opaque"

#: ``container`` of a fatbin's entries, which :attr:`Image.entry` gives (the vocabulary is the registry's,
#: devbin.images.containers.CONTAINERS, whose fatbin entry takes its name from here).
FATBIN_CONTAINER: Final = "fatbin"

_FATBIN_KINDS: Final[dict[int, str]] = {FC.KIND_PTX: PTX, FC.KIND_ELF: CUBIN, FC.KIND_LTOIR: LTO_IR}


def fatbin_kind(kind: int) -> str:
    """The image kind of a fatbin entry kind (``fatBinaryCodeKind``); ``data`` for the old cubin and unknowns."""
    return _FATBIN_KINDS.get(kind, DATA)


# --------------------------------------------------------------------------- natives


class NativeImage(Protocol):
    """The format-level object an image came from (``Image.native``): a fatbin's ``FatbinEntry``, an
    OffloadBinary's ``OffloadEntry``, a bundle's ``BundleEntry``, a ``WrappedImage``, a :class:`BareElf`.
    Each gives its image's bytes itself, so :meth:`Image.data` is one call whatever the container
    (the container's entry in :mod:`devbin.images.containers` names the class)."""

    def image_data(self, max_size: int, size: int) -> memoryview | bytes:
        """The image as ``devbin extract`` writes it; ``size`` is :attr:`Image.size` (what the scan measured)."""
        ...

    def image_head(self, n: int, size: int) -> memoryview | bytes:
        """The image's first ``n`` bytes (decoding no more than the format needs for them)."""
        ...


#: The type of ``Image.native``.
Native = NativeImage


@dataclass(frozen=True, slots=True)
class BareElf:
    """Header facts of a bare device ELF file (a cubin or an AMDGPU code object), and its bytes."""

    machine: int
    e_type: int
    e_flags: int
    osabi: int
    abi_version: int
    size: int
    view: memoryview = field(repr=False, compare=False)

    def image_data(self, max_size: int, size: int) -> memoryview:
        return self.view

    def image_head(self, n: int, size: int) -> memoryview:
        return self.view[:n]


# --------------------------------------------------------------------------- the record


@dataclass(frozen=True, slots=True)
class Image:
    """One device image.

    * ``address``: where it is (:mod:`devbin.images.address`), what ``devbin list`` prints.
    * ``vendor``: ``nvidia``, ``amd`` or ``""`` (:data:`VENDORS`).
    * ``kind``: one of :data:`KINDS`.
    * ``arch``: ``sm_90``, ``sm_90a``, ``compute_90`` (PTX, LTO-IR), ``gfx90a:xnack+``; ``""`` when unknown.
    * ``size``: the bytes :meth:`data` returns, which ``devbin extract`` writes (decompressed; a fatbin
      cubin trimmed to its last section, PTX to its first NUL).  For a compressed fatbin entry it is
      the decompressed size the entry header records, as the exact extent is known only once decoded.
    * ``stored_size``: the bytes the image takes in the file (a fatbin entry's payload area).
    * ``compression``: ``none``, ``lz4``, ``zstd`` (fatbin entries), ``zlib``/``zstd`` (an entry of a
      compressed bundle: the bundle is compressed as a whole, so ``stored_size`` is the entry's size in
      the decompressed bundle), ``nvidia-opaque`` (LTO-IR in NVIDIA's own encoding, which only NVIDIA's
      tools decode: :meth:`data` gives the entry as stored, in a one-entry fatbin), or the raw flag
      bits in hex when unknown.
    * ``container``: the format holding it (:data:`devbin.images.containers.CONTAINERS`).
    * ``section``: the host ELF section it was found in, or ``""``.
    * ``offset``: file offset, in the innermost file, of the container (fatbin, OffloadBinary, bundle),
      or 0 for a bare or wrapped image.
    * ``metadata``: producer key/value pairs in stored order; keys are listed in docs/IMAGES.md
      (``identifier``, ``ptxas-options``, ``fatbin-kind``, ``wrapper-version``, ``triple``, ``bundle-id``,
      ``offload-kind``, ``image-kind``, an OffloadBinary's string map and a wrapped image's pairs as stored).
    * ``native``: the format-level object (:class:`NativeImage`): a ``FatbinEntry``, ``OffloadEntry``,
      ``BundleEntry``, ``WrappedImage`` or :class:`BareElf`.
    """

    address: Address
    vendor: str
    kind: str
    arch: str
    size: int
    stored_size: int
    compression: str
    container: str
    section: str
    offset: int
    metadata: tuple[tuple[str, str], ...] = ()
    native: Native | None = field(default=None, compare=False, repr=False)

    # -- derived facts ---------------------------------------------------------------
    def __str__(self) -> str:
        return str(self.address)

    @property
    def path(self) -> str:
        """The innermost file's address as text (``lib.a!k.o``, ``w.whl!x/libk.so``, ``k.fatbin``)."""
        return str(self.address.file)

    def get(self, key: str, default: str = "") -> str:
        """The first metadata value of ``key``."""
        return next((v for k, v in self.metadata if k == key), default)

    @property
    def identifier(self) -> str:
        return self.get("identifier")

    @property
    def triple(self) -> str:
        return self.get("triple") or self.get("Triple")

    @property
    def entry(self) -> FatbinEntry | None:
        """The fatbin entry this image is, or None."""
        return self.native if self.container == FATBIN_CONTAINER else None  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """The facts every command that reports images gives each one, under the same keys
        (docs/IMAGES.md): address, vendor, kind, arch, size, stored_size, compression."""
        return {"address": str(self.address), "vendor": self.vendor, "kind": self.kind, "arch": self.arch,
                "size": self.size, "stored_size": self.stored_size, "compression": self.compression}

    # -- bytes ------------------------------------------------------------------------
    def data(self, max_size: int = FC.DEFAULT_MAX) -> memoryview | bytes:
        """The image as ``devbin extract`` writes it: a window on the file (zero-copy) when stored
        plain, decompressed otherwise.  Raises FormatError above ``max_size`` bytes or for bad data."""
        n = self.native
        if n is None:
            raise FormatError(f"{self.address}: no image bytes recorded", fmt=self.container, where=str(self.address))
        view = n.image_data(max_size, self.size)
        if len(view) > max_size:
            raise FormatError(f"{self.address}: image of {len(view)} bytes is larger than the limit of {max_size} "
                              "bytes", fmt=self.container, where=str(self.address))
        return view

    def head(self, n: int = 64) -> memoryview | bytes:
        """The image's first ``n`` bytes (fewer when it is shorter); an entry of a compressed bundle
        decodes only those (a fatbin entry stored compressed is decoded whole)."""
        if self.native is None:
            return self.data()[:n]
        return self.native.image_head(n, self.size)

    def code_object(self, max_size: int = FC.DEFAULT_MAX, *, diag: Diag | None = None) -> CodeObject | None:
        """The image in the unified model (:func:`devbin.importers.model_of`: its devbin sections, else its
        vendor's importer; ``diag`` as there), or None for an image that is no code object (PTX,
        LTO-IR, bitcode, SPIR-V, fatbin, host, data)."""
        if self.kind not in object_kinds():  # every vendor's device ELF (the registry's descriptors)
            return None
        from devbin.binary import ByteView
        from devbin.formats.elf.reader import ElfFile
        from devbin.importers import model_of  # the model and importers only when asked: CLI start-up
        return model_of(ElfFile(ByteView(self.data(max_size), where=str(self.address)), where=str(self.address)),
                        diag=diag)


def find_image(images: Iterable[Image], address: Address | str) -> Image:
    """The image at ``address`` (an :class:`Address` or its text) among ``images`` (a scan's);
    UsageError naming the address when none is there."""
    want = Address.parse(address) if isinstance(address, str) else address
    seen: list[Image] = []
    for image in images:
        if image.address == want:
            return image
        seen.append(image)
    if not seen:
        raise UsageError(f"no device image at {str(want)!r}: there are no device images")
    shown = ", ".join(str(i.address) for i in seen[:_SHOWN])
    more = f" and {len(seen) - _SHOWN} more (`devbin list` prints them all)" if len(seen) > _SHOWN else ""
    raise UsageError(f"no device image at {str(want)!r}; there {'is' if len(seen) == 1 else 'are'} {shown}{more}")


#: How many addresses the error of :func:`find_image` names.
_SHOWN = 8
