"""What ``devbin inspect`` reports about a file, as plain data.

One function gathers the facts; the CLI prints them as text or JSON, so both
always agree.  Keys keep a stable order; integers stay integers; every enum
has its name beside its raw value.
"""

from __future__ import annotations

from typing import Any

from devbin.errors import DeviceBinaryError
from devbin.formats.elf import constants as C
from devbin.formats.elf.describe import describe
from devbin.formats.elf.reader import ElfFile
from devbin.importers import DEVBIN_SECTIONS, has_model, model_and_source
from devbin.model import CodeObject
from devbin.targets.nvidia.cubin import Cubin
from devbin.targets.nvidia.describe import describe_cubin


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
    if elf.header.e_machine == C.EM_CUDA:
        try:
            out["nvidia"] = describe_cubin(Cubin(elf))
        except DeviceBinaryError as e:
            out["devbin_error"] = str(e)  # the model may still come from devbin sections
    if has_model(elf):
        problems: list[DeviceBinaryError] = []
        try:
            obj, source = model_and_source(elf, diag=problems.append)
        except DeviceBinaryError as e:
            out["devbin_error"] = out["devbin_error"] or str(e)
            return _done(out, warnings)
        out["devbin"] = code_object_dict(obj)
        out["devbin_source"] = "devbin sections" if source == DEVBIN_SECTIONS else _IMPORTED.get(
            elf.header.e_machine, "imported from the vendor's metadata")
        if problems and out["devbin_error"] is None:
            # devbin sections that could not be decoded (the vendor's metadata was read instead), or what the
            # importer went past
            out["devbin_error"] = str(problems[0])
    return _done(out, warnings)


#: ``devbin_source`` of a model the vendor importer built, by ``e_machine``.
_IMPORTED = {C.EM_CUDA: "imported from the cubin's NVIDIA sections",
             C.EM_AMDGPU: "imported from the code object's AMDGPU metadata note and symbols"}


def _done(out: dict[str, Any], warnings: list[DeviceBinaryError] | None) -> dict[str, Any]:
    out["warnings"] = [str(w) for w in (warnings or [])]
    return out
