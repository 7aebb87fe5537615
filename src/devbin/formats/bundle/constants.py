"""Constants of clang-offload-bundler bundles (``llvm-amdgpu-formats.md`` §2).

Binary bundles start with the 24-byte magic ``__CLANG_OFFLOAD_BUNDLE__`` (no
NUL); compressed bundles with ``CCOB``.  The same 24 characters prefix the
section names of an object-type bundle (``__CLANG_OFFLOAD_BUNDLE__<id>``), and,
followed by ``__START__``/``__END__``, the marker lines of a text bundle (hence
the four underscores in ``__CLANG_OFFLOAD_BUNDLE____START__``).
"""

from __future__ import annotations

from typing import Final

BUNDLE_MAGIC: Final = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC: Final = b"CCOB"
SECTION_PREFIX: Final = "__CLANG_OFFLOAD_BUNDLE__"
TEXT_START: Final = "__CLANG_OFFLOAD_BUNDLE____START__"
TEXT_END: Final = "__CLANG_OFFLOAD_BUNDLE____END__"

#: Bytes of the fixed bundle header (magic + u64 entry count) and of an entry's fixed part
#: (u64 offset, u64 size, u64 id length); the ID bytes follow.
HEADER_SIZE: Final = 32
ENTRY_FIXED_SIZE: Final = 24

#: ``llvm::compression::Format`` values in the CCOB ``method`` field.
METHOD_ZLIB: Final = 0
METHOD_ZSTD: Final = 1
METHOD_NAMES: Final = {METHOD_ZLIB: "zlib", METHOD_ZSTD: "zstd"}
METHOD_BY_NAME: Final = {v: k for k, v in METHOD_NAMES.items()}

#: CCOB header size by version (the compressed payload starts here).
CCOB_HEADER_SIZE: Final = {1: 20, 2: 24, 3: 32}

#: The bundler's default compression level (zstd) when ``-compression-level`` is not given;
#: zlib's level when LLVM picks zlib (``llvm::compression::zlib::DefaultCompression``).
ZSTD_DEFAULT_LEVEL: Final = 3
ZLIB_DEFAULT_LEVEL: Final = 6

#: Alignment of each bundle in a ``.hip_fatbin`` section (clang's HIP driver passes
#: ``-bundle-align=4096`` and the section has ``sh_addralign`` 4096).
HIP_FATBIN_ALIGN: Final = 4096
HIP_FATBIN_SECTION: Final = ".hip_fatbin"
#: The section of HIP's host-side wrappers (``__hip_fatbin_wrapper``: NVIDIA's 24-byte layout, magic
#: "HIPF", :data:`devbin.formats.fatbin.wrapper.HIP_WRAPPER_MAGIC`) pointing into ``.hip_fatbin``.
HIP_WRAPPER_SECTION: Final = ".hipFatBinSegment"

#: The offload kind a bundle ID spells for an OffloadBinary producer name where they differ (clang's
#: ``hipv4`` for HIP code objects v4 and later; ``openmp`` for a host entry), every other name as is.
BUNDLE_OFFLOAD_KINDS: Final = {"hip": "hipv4", "none": "openmp"}


def bundle_offload_kind(producer: str) -> str:
    """The offload kind of a bundle ID for an OffloadBinary producer name (:data:`BUNDLE_OFFLOAD_KINDS`)."""
    return BUNDLE_OFFLOAD_KINDS.get(producer, producer)


#: The host triple clang writes for the empty host entry of a HIP fat binary.
DEFAULT_HOST_ID: Final = "host-x86_64-unknown-linux-gnu-"

#: Cap on the decompressed size of a CCOB bundle (decompression-bomb guard).
DEFAULT_MAX: Final = 1 << 30
#: A lazily opened CCOB bundle up to this size once decompressed has its length and hash checked
#: at open (a streaming pass that holds nothing); a larger one when an image is first read.
VERIFY_AT_OPEN: Final = 64 << 20
