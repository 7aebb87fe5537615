"""A SPIR-V module's header and its module-level facts: version, generator, capabilities,
extensions, memory model, source language and entry points with their execution modes.

Layout (SPIR-V specification, §2.3 "Physical Layout of a SPIR-V Module and Instruction",
https://registry.khronos.org/SPIR-V/specs/unified1/SPIRV.html): five 32-bit words, magic 0x07230203
(its byte order is the module's: a module whose first bytes are ``07 23 02 03`` is big-endian),
version ``0x00MMmm00``, generator (tool id in the high 16 bits, its version in the low 16; ids in
KhronosGroup/SPIRV-Headers ``include/spirv/spir-v.xml``), id bound, schema 0; then instructions,
each a word ``word count << 16 | opcode`` followed by its operands.  Literal strings are UTF-8,
NUL-terminated, padded to a word.  Opcode and enum numbers: SPIRV-Headers
``include/spirv/unified1/spirv.h``.

The module-level instructions come first in a fixed order (§2.4 "Logical Layout"); the reader stops
at the first function (``OpFunction``), so it reads a module's head, not its code.  Numbers it has
no name for (new capabilities, execution modes) are kept as numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from devbin.binary import Buffer, ByteView
from devbin.formats import magic as M

__all__ = ["CAPABILITY_NAMES", "EXECUTION_MODEL_NAMES", "GENERATORS", "SPIRV_MAGIC", "EntryPoint", "SpirvModule",
           "is_spirv", "read_spirv"]

SPIRV_MAGIC: Final = M.SPIRV_WORD
_LE_MAGIC: Final = SPIRV_MAGIC.to_bytes(4, "little")

OP_SOURCE, OP_EXTENSION, OP_EXT_INST_IMPORT, OP_MEMORY_MODEL = 3, 10, 11, 14
OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_CAPABILITY, OP_FUNCTION, OP_EXECUTION_MODE_ID = 15, 16, 17, 54, 331

#: Generator tool ids (spir-v.xml) devbin names; others stay numbers.
GENERATORS: Final[dict[int, str]] = {
    0: "Khronos", 1: "LunarG", 2: "Valve", 3: "Codeplay", 4: "NVIDIA", 5: "ARM",
    6: "Khronos LLVM/SPIR-V Translator", 7: "Khronos SPIR-V Tools Assembler", 8: "Khronos Glslang Reference Front End",
    13: "Google Shaderc over Glslang", 17: "Khronos SPIR-V Tools Linker", 20: "Intel", 21: "Google spiregg",
    28: "Khronos SPIR-V Tools Optimizer", 43: "LLVM SPIR-V backend",
}
#: Execution models (spirv.h ``SpvExecutionModel``).
EXECUTION_MODEL_NAMES: Final[dict[int, str]] = {
    0: "Vertex", 1: "TessellationControl", 2: "TessellationEvaluation", 3: "Geometry", 4: "Fragment",
    5: "GLCompute", 6: "Kernel",
}
#: Capabilities a compute module carries (spirv.h ``SpvCapability``).
CAPABILITY_NAMES: Final[dict[int, str]] = {
    0: "Matrix", 1: "Shader", 4: "Addresses", 5: "Linkage", 6: "Kernel", 7: "Vector16", 8: "Float16Buffer",
    9: "Float16", 10: "Float64", 11: "Int64", 12: "Int64Atomics", 13: "ImageBasic", 14: "ImageReadWrite",
    15: "ImageMipmap", 17: "Pipes", 18: "Groups", 19: "DeviceEnqueue", 20: "LiteralSampler", 21: "AtomicStorage",
    22: "Int16", 39: "Int8", 57: "GenericPointer", 58: "SubgroupDispatch", 59: "NamedBarrier",
    60: "PipeStorage", 61: "GroupNonUniform", 62: "GroupNonUniformVote", 63: "GroupNonUniformArithmetic",
    64: "GroupNonUniformBallot", 65: "GroupNonUniformShuffle", 66: "GroupNonUniformShuffleRelative",
    67: "GroupNonUniformClustered", 68: "GroupNonUniformQuad", 5629: "ExpectAssumeKHR",
    5837: "FPFastMathModeINTEL", 5910: "MemoryAccessAliasingINTEL", 6115: "BFloat16ConversionINTEL",
}
#: Execution modes (spirv.h ``SpvExecutionMode``) with the literals a kernel listing reads.
EXECUTION_MODE_NAMES: Final[dict[int, str]] = {
    17: "LocalSize", 18: "LocalSizeHint", 30: "VecTypeHint", 31: "ContractionOff", 35: "SubgroupSize",
    36: "SubgroupsPerWorkgroup", 38: "LocalSizeId", 39: "LocalSizeHintId", 5618: "SharedLocalMemorySizeINTEL",
    5893: "MaxWorkgroupSizeINTEL", 6417: "NamedBarrierCountINTEL", 6461: "MaximumRegistersINTEL",
}
#: The triple of a module by its ``OpMemoryModel`` addressing model (SPIR-V specification §3.4
#: "Addressing Model": 1 Physical32, 2 Physical64): LLVM's ``spir``/``spir64`` (``llvm/TargetParser/Triple.h``,
#: 32- and 64-bit SPIR), the triples SYCL files SPIR-V images under (``spir64-unknown-unknown``, intel/llvm
#: ``sycl/source/detail/compiler.hpp``).
ADDRESSING_TRIPLES: Final[dict[int, str]] = {1: "spir-unknown-unknown", 2: "spir64-unknown-unknown"}
SOURCE_LANGUAGES: Final[dict[int, str]] = {0: "Unknown", 1: "ESSL", 2: "GLSL", 3: "OpenCL_C", 4: "OpenCL_CPP",
                                           5: "HLSL", 6: "CPP_for_OpenCL", 7: "SYCL"}


@dataclass(frozen=True, slots=True)
class EntryPoint:
    """An ``OpEntryPoint``: execution model, function id, name, and its execution modes as
    ``(mode, operands)`` (``OpExecutionMode`` literals, ``OpExecutionModeId`` ids)."""

    model: int
    function: int
    name: str
    modes: tuple[tuple[int, tuple[int, ...]], ...] = ()

    @property
    def model_name(self) -> str:
        return EXECUTION_MODEL_NAMES.get(self.model, str(self.model))

    def mode(self, mode: int) -> tuple[int, ...] | None:
        return next((ops for m, ops in self.modes if m == mode), None)


@dataclass(frozen=True, slots=True)
class SpirvModule:
    version: tuple[int, int]
    generator: int
    bound: int
    schema: int
    little: bool
    capabilities: tuple[int, ...] = ()
    extensions: tuple[str, ...] = ()
    ext_inst_imports: tuple[str, ...] = ()
    memory_model: tuple[int, int] | None = None
    source: tuple[int, int] | None = None
    entry_points: tuple[EntryPoint, ...] = field(default=())

    @property
    def generator_tool(self) -> int:
        return self.generator >> 16

    @property
    def generator_name(self) -> str:
        return GENERATORS.get(self.generator_tool, str(self.generator_tool))

    @property
    def version_text(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def generator_text(self) -> str:
        """The generator as ``spirv-dis`` prints it: ``Khronos LLVM/SPIR-V Translator; 14`` (tool; version)."""
        return f"{self.generator_name}; {self.generator & 0xFFFF}"

    @property
    def triple(self) -> str:
        """LLVM's triple for the module's addressing model (:data:`ADDRESSING_TRIPLES`), ``""`` for another."""
        return ADDRESSING_TRIPLES.get(self.memory_model[0], "") if self.memory_model is not None else ""

    def to_dict(self) -> dict[str, Any]:
        """The module-level facts as JSON (``devbin inspect``): numbers kept, names beside them where devbin
        has one (``name`` absent otherwise); ``generator_text`` as ``spirv-dis`` prints it."""
        return {
            "version": self.version_text, "generator": self.generator, "generator_text": self.generator_text,
            "bound": self.bound, "triple": self.triple,
            "addressing_model": self.memory_model[0] if self.memory_model is not None else None,
            "memory_model": self.memory_model[1] if self.memory_model is not None else None,
            "capabilities": [_named(c, CAPABILITY_NAMES) for c in self.capabilities],
            "extensions": list(self.extensions),
            "entry_points": [{"name": e.name, "model": _named(e.model, EXECUTION_MODEL_NAMES)}
                             for e in self.entry_points],
        }

    def summary(self) -> list[tuple[str, str]]:
        """The same facts as ``(label, text)`` lines for a text listing."""
        caps = " ".join(CAPABILITY_NAMES.get(c, str(c)) for c in self.capabilities)
        entries = ", ".join(f"{e.model_name} {e.name}" for e in self.entry_points)
        return [("version", self.version_text), ("generator", self.generator_text), ("triple", self.triple or "-"),
                ("capabilities", caps or "-"), ("extensions", " ".join(self.extensions) or "-"),
                ("entry points", entries or "-")]


def _named(value: int, names: dict[int, str]) -> dict[str, Any]:
    name = names.get(value)
    return {"value": value, "name": name} if name is not None else {"value": value}


def is_spirv(data: Buffer | ByteView) -> bool:
    """Whether the bytes start with the SPIR-V magic, in either byte order (:func:`.magic.image_magic`)."""
    return M.image_magic(data) == M.SPIRV


def _string(words: ByteView, start: int, end: int) -> tuple[str, int]:
    """A literal string from byte ``start``; returns it and the byte offset of the word after it."""
    nul = words.find(b"\0", start, end)
    if nul < 0:
        raise words.error("literal string not terminated", start)
    text = bytes(words.bytes_at(start, nul - start)).decode("utf-8", "backslashreplace")
    return text, (nul + 4) & ~3


def read_spirv(data: Buffer | ByteView, *, where: str = "") -> SpirvModule:
    """The header and module-level facts of a SPIR-V module (module docstring)."""
    head = ByteView(data, fmt="spirv", where=where)
    if M.image_magic(head) != M.SPIRV:
        raise head.error("not a SPIR-V module (magic 0x07230203)", 0)
    little = head.startswith(_LE_MAGIC)
    v = head.with_order(little)
    if len(v) < 20:
        raise v.error("truncated SPIR-V header", 0)
    version, generator, bound, schema = v.u32(4), v.u32(8), v.u32(12), v.u32(16)
    caps: list[int] = []
    exts: list[str] = []
    imports: list[str] = []
    memory: tuple[int, int] | None = None
    source: tuple[int, int] | None = None
    entries: list[tuple[int, int, str]] = []
    modes: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    pos, end = 20, len(v) & ~3
    while pos < end:
        word = v.u32(pos)
        count, op = word >> 16, word & 0xFFFF
        if count == 0:
            raise v.error("instruction with word count 0", pos, op)
        stop = pos + 4 * count
        if stop > end:
            raise v.error("instruction runs past the end of the module", pos, count)
        if op == OP_FUNCTION:
            break
        operands = [v.u32(pos + 4 + 4 * i) for i in range(count - 1)] if op in (
            OP_CAPABILITY, OP_MEMORY_MODEL, OP_SOURCE, OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID) else []
        if op == OP_CAPABILITY and operands:
            caps.append(operands[0])
        elif op == OP_EXTENSION:
            exts.append(_string(v, pos + 4, stop)[0])
        elif op == OP_EXT_INST_IMPORT and count >= 3:
            imports.append(_string(v, pos + 8, stop)[0])
        elif op == OP_MEMORY_MODEL and len(operands) >= 2:
            memory = (operands[0], operands[1])
        elif op == OP_SOURCE and len(operands) >= 2 and source is None:
            source = (operands[0], operands[1])
        elif op == OP_ENTRY_POINT and count >= 4:
            name, _ = _string(v, pos + 12, stop)
            entries.append((v.u32(pos + 4), v.u32(pos + 8), name))
        elif op in (OP_EXECUTION_MODE, OP_EXECUTION_MODE_ID) and len(operands) >= 2:
            modes.setdefault(operands[0], []).append((operands[1], tuple(operands[2:])))
        pos = stop
    return SpirvModule(
        version=((version >> 16) & 0xFF, (version >> 8) & 0xFF), generator=generator, bound=bound, schema=schema,
        little=little, capabilities=tuple(caps), extensions=tuple(exts), ext_inst_imports=tuple(imports),
        memory_model=memory, source=source,
        entry_points=tuple(EntryPoint(m, f, n, tuple(modes.get(f, ()))) for m, f, n in entries),
    )
