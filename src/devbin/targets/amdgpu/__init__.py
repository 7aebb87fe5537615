"""AMDGPU HSA code objects: e_flags, target IDs, the metadata note, kernel descriptors, import.

* :mod:`.mach`: ``EF_AMDGPU_MACH`` names, xnack/sramecc settings, generic version;
* :mod:`.targetid`: target/offload IDs and the compatibility rule (with generic families);
* :mod:`.metadata`: the ``NT_AMDGPU_METADATA`` msgpack note;
* :mod:`.descriptor`: the 64-byte kernel descriptor (``<kernel>.kd``);
* :mod:`.importer`: :func:`import_amdgpu` into :class:`devbin.model.CodeObject`;
* :mod:`.resources`: per-function register/segment usage (unknown where the file is silent).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from devbin.targets.amdgpu.importer import code_object_facts, import_amdgpu
    from devbin.targets.amdgpu.mach import decode_flags, mach_name
    from devbin.targets.amdgpu.targetid import compatible, parse_offload_id, parse_target_id

__all__ = ["code_object_facts", "compatible", "decode_flags", "import_amdgpu", "mach_name", "parse_offload_id",
           "parse_target_id"]

#: Re-exported names and their modules, imported on first use: the image scanner reads the processor
#: table (``mach``) for every code object it lists, and must not pay for the importer (the model,
#: msgpack) to do so.
_EXPORTS = {"code_object_facts": "importer", "import_amdgpu": "importer", "decode_flags": "mach",
            "mach_name": "mach", "compatible": "targetid", "parse_offload_id": "targetid",
            "parse_target_id": "targetid"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'devbin.targets.amdgpu' has no attribute {name!r}")
    return getattr(import_module(f"devbin.targets.amdgpu.{module}"), name)
