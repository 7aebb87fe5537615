"""Constants of DPC++'s offload wrapper (old offload model).

Sources: intel/llvm ``clang/tools/clang-offload-wrapper/ClangOffloadWrapper.cpp``
(https://github.com/intel/llvm/blob/sycl/clang/tools/clang-offload-wrapper/ClangOffloadWrapper.cpp:
``addDeviceImageToModule`` names the sections, ``getSyclDeviceImageTy``/``getSyclBinDescTy``/
``getEntryTy``/``getSyclPropSetTy``/``getSyclPropTy`` give the structs, the ``.tgtimg`` comment says what
that section is for) and the runtime's mirror ``sycl/source/detail/compiler.hpp``
(https://github.com/intel/llvm/blob/sycl/sycl/source/detail/compiler.hpp: ``sycl_device_binary_type``).
Version 3 of the image descriptor drops the manifest pointers: upstream LLVM's
``llvm/lib/Frontend/SYCL/OffloadWrapper.cpp`` (https://github.com/llvm/llvm-project) defines it with that
field order ("the Version here starts from 3").
"""

from __future__ import annotations

from typing import Final

#: ``__CLANG_OFFLOAD_BUNDLE__`` + offload kind ``sycl`` + ``-`` + target (``spir64_gen``, ``spir64``).
SECTION_PREFIX: Final = "__CLANG_OFFLOAD_BUNDLE__sycl-"
#: One 16-byte record per image: {u64 image address, u64 size}.  For a compressed image the size is the
#: decompressed one (observed in DPC++ 2025/2026 libraries), so it is not the stored length.
TGTIMG_SECTION: Final = ".tgtimg"
TGTIMG_RECORD: Final = 16
#: Each image is its own data object, aligned so in the section; the gaps are zero bytes.
IMAGE_ALIGN: Final = 16

#: Image descriptor (``__tgt_device_image``, SYCL flavour) by version: its size and the offsets of its
#: pointer fields.  Version 2: Version u16, Kind u8, Format u8, then DeviceTargetSpec, CompileOptions,
#: LinkOptions, ManifestStart, ManifestEnd, ImageStart, ImageEnd, EntriesBegin, EntriesEnd,
#: PropertySetsBegin, PropertySetsEnd (8 bytes each from offset 8).  Version 3: the same without the
#: manifest pair.
DESCRIPTOR_SIZE: Final = {2: 96, 3: 80}
FIELD_TARGET: Final = 8
FIELD_COMPILE_OPTIONS: Final = 16
FIELD_LINK_OPTIONS: Final = 24
#: Offset of ImageStart by version; ImageEnd, EntriesBegin/End, PropertySetsBegin/End follow it.
FIELD_IMAGE_START: Final = {2: 48, 3: 32}

#: ``sycl_device_binary_type`` (``Format``): 4 means compressed, the real format unknown until decoded.
FORMAT_NAMES: Final = {0: "none", 1: "native", 2: "spirv", 3: "llvmir", 4: "compressed"}
#: The wrapper's offload kinds (``Kind``).
OFFLOAD_KIND_NAMES: Final = {0: "unknown", 1: "host", 2: "openmp", 3: "hip", 4: "sycl"}

#: Offload entry (``_sycl_offload_entry_struct``): {addr, name, size, i32 flags, i32 reserved}: 32 bytes,
#: the name pointer at 8.  The newer LLVM entry (intel/llvm ``llvm/lib/Frontend/Offloading/Utility.cpp``
#: ``getEntryTy``): {u64 reserved, u16 version, u16 kind, u32 flags, addr, name, u64 size, u64 data, aux}:
#: 56 bytes, the name at 24.
ENTRY_LAYOUTS: Final = ((32, 8), (56, 24))
#: Property set {name, begin, end} (24 bytes); property {name, value address, u32 type, u64 value size}
#: (32 bytes).  Type 1: a u32 held in the size field; type 2: a byte array whose first 8 bytes are its
#: length in bits.
PROPERTY_SET_SIZE: Final = 24
PROPERTY_SIZE: Final = 32
PROP_UINT32: Final = 1
PROP_BYTE_ARRAY: Final = 2

#: The zstd level prune compresses an image again at: a DPC++ 2026 image (bitsandbytes 0.50.2's
#: ``libbitsandbytes_xpu2026.so``, image 2 of ``__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen``) comes back byte for
#: byte at 10, the level the wrapper's ``--offload-compression-level`` defaults to in those releases.
ZSTD_LEVEL: Final = 10

#: x86-64 ``R_X86_64_RELATIVE``: the descriptors' pointer fields in a linked library.
R_X86_64_RELATIVE: Final = 8
