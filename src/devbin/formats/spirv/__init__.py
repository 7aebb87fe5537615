"""SPIR-V modules (Khronos SPIR-V specification): the header and the module-level instructions a
listing needs (:mod:`devbin.formats.spirv.reader`)."""

from devbin.formats.spirv.reader import SPIRV_MAGIC, EntryPoint, SpirvModule, is_spirv, read_spirv

__all__ = ["SPIRV_MAGIC", "EntryPoint", "SpirvModule", "is_spirv", "read_spirv"]
