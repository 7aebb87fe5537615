"""What ``devbin inspect`` reports about a file, as plain data.

One function gathers the facts; the CLI prints them as text or JSON, so both
always agree.  Keys keep a stable order; integers stay integers; every enum
has its name beside its raw value.
"""

from __future__ import annotations

from typing import Any

from devbin.errors import DeviceBinaryError
from devbin.formats.devsec.elf import devbin_sections, read_code_object
from devbin.formats.elf import constants as C
from devbin.formats.elf.describe import describe
from devbin.formats.elf.reader import ElfFile
from devbin.model import CodeObject
from devbin.targets.nvidia.cubin import Cubin
from devbin.targets.nvidia.describe import describe_cubin
from devbin.targets.nvidia.importer import import_cubin


def code_object_dict(obj: CodeObject) -> dict[str, Any]:
    """``obj.to_dict()`` plus each kernel's decoded parameter layout (``params``)."""
    d = obj.to_dict()
    for f, fd in zip(obj.functions, d["functions"], strict=True):
        try:
            params = f.params()
        except DeviceBinaryError as e:
            fd["params_error"] = str(e)
            continue
        if params is not None:
            fd["params"] = [p.to_dict() for p in params]
    return d


def inspect_elf(elf: ElfFile, *, file: str = "", warnings: list[DeviceBinaryError] | None = None) -> dict[str, Any]:
    """The ELF facts and the decoded devbin sections of ``elf``.

    A devbin section that cannot be decoded is reported under
    ``devbin_error`` (and the rest of the report is still produced): an
    inspector shows what it can.
    """
    out: dict[str, Any] = {"file": file, "format": "elf"}
    out.update(describe(elf))
    out["devbin"] = None
    out["devbin_source"] = None
    out["devbin_error"] = None
    out["nvidia"] = None
    if devbin_sections(elf):
        from devbin.importers import load_vendor_attribute_names

        load_vendor_attribute_names()  # so vendor attributes print with their names
        try:
            obj = read_code_object(elf)
            out["devbin"] = code_object_dict(obj) if obj is not None else None
            out["devbin_source"] = "devbin sections"
        except DeviceBinaryError as e:
            out["devbin_error"] = str(e)
    if elf.header.e_machine == C.EM_CUDA:
        try:
            cubin = Cubin(elf)
            out["nvidia"] = describe_cubin(cubin)
            if out["devbin"] is None:
                out["devbin"] = code_object_dict(import_cubin(elf))
                out["devbin_source"] = "imported from the cubin's NVIDIA sections"
        except DeviceBinaryError as e:
            out["devbin_error"] = str(e)
    elif elf.header.e_machine == C.EM_AMDGPU and out["devbin"] is None:
        from devbin.targets.amdgpu.importer import import_amdgpu

        try:
            out["devbin"] = code_object_dict(import_amdgpu(elf, diag=lambda e: None))
            out["devbin_source"] = "imported from the code object's AMDGPU metadata note and symbols"
        except DeviceBinaryError as e:
            out["devbin_error"] = str(e)
    out["warnings"] = [str(w) for w in (warnings or [])]
    return out
