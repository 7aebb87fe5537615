"""Plain-data description of a cubin's NVIDIA-specific sections, for ``devbin inspect``."""

from __future__ import annotations

from typing import Any

from devbin.errors import DeviceBinaryError
from devbin.targets.nvidia import eiattr as E
from devbin.targets.nvidia.cubin import SHT_CUDA_INFO, Cubin
from devbin.targets.nvidia.notes import tkinfo
from devbin.targets.nvidia.nvinfo import NvInfoRecord, decode_kparam, parse_nvinfo


def _decoded(cubin: Cubin, r: NvInfoRecord) -> str:
    """A readable value for the record shapes devbin knows; "" otherwise (the raw payload is beside it)."""
    try:
        words = r.words() if r.payload else []
        if r.attr in E.INDEXED and len(words) >= 2:
            sym = cubin.symtab[words[0]].name if words[0] < len(cubin.symtab) else f"sym {words[0]}"
            return f"{sym}: {words[1]:#x}" if words[1] == 0xFFFFFFFF else f"{sym}: {words[1]}"
        if r.attr in E.DIM3 and len(words) >= 3:
            return "x".join(str(w) for w in words[:3])
        if r.attr in (E.CODES["KPARAM_INFO"], E.CODES["KPARAM_INFO_V2"]):
            p = decode_kparam(r)
            return f"param {p.ordinal} at {p.offset}, {p.size} bytes" if p else ""
        if r.attr == E.CODES["PARAM_CBANK"] and len(words) >= 2:
            return f"bank 0 offset {words[1] & 0xFFFF:#x}, {words[1] >> 16} bytes"
        if r.attr == E.CODES["EXTERNS"]:
            return ", ".join(cubin.symtab[w].name if w < len(cubin.symtab) else f"sym {w}" for w in words)
        if r.attr in E.U32_LISTS:
            return ", ".join(f"{w:#x}" for w in words)
        if r.value is not None:
            return str(r.value)
        if len(r.payload) == 4:
            return str(words[0])
    except DeviceBinaryError:
        return ""
    return ""


def describe_cubin(cubin: Cubin) -> dict[str, Any]:
    elf = cubin.elf
    info_sections = []
    for sec in elf.sections:
        compat = sec.name == ".nv.compat"
        if sec.sh_type == SHT_CUDA_INFO or compat:
            records = []
            for r in parse_nvinfo(sec.view):
                d = r.to_dict()
                if compat:  # .nv.compat has its own attribute codes (EICOMPAT), names unpublished
                    d["name"] = f"EICOMPAT_{r.attr:#04x}"
                else:
                    d["decoded"] = _decoded(cubin, r)
                records.append(d)
            info_sections.append({"section": sec.name, "records": records})
    out: dict[str, Any] = {
        "arch": cubin.arch,
        "sm": cubin.sm,
        "abi_version": cubin.abi_version,
        "virtual_arch": cubin.virtual_arch,
        "relocatable": cubin.is_relocatable,
        "toolkit": None,
        "nv_info": info_sections,
        "callgraph_error": None,
    }
    tk = tkinfo(elf)
    if tk is not None:
        out["toolkit"] = {"tool": tk.tool_name, "version": tk.tool_version, "branch": tk.tool_branch,
                          "options": tk.tool_options}
    try:
        cg = cubin.callgraph
        out["address_refs"] = [{"function": a, "references": b} for a, b in cg.address_refs] if cg else []
    except DeviceBinaryError as e:
        out["callgraph_error"] = str(e)
    return out


def describe_text(n: dict[str, Any]) -> str:
    """The lines ``devbin inspect`` prints for :func:`describe_cubin`'s record ``n``: the arch and toolkit, each
    ``.nv.info`` record (its decoded value, else the value or the raw payload), the address references."""
    lines = [f"\nNVIDIA cubin: {n['arch']} (ELF ABI version {n['abi_version']}), virtual arch "
             f"{n['virtual_arch'] or '?'}, {'relocatable' if n['relocatable'] else 'executable'}\n"]
    if n["toolkit"]:
        tk = n["toolkit"]
        lines.append(f"  built by {tk['tool']} {tk['version']} ({tk['branch']}), options: {tk['options'].strip()}\n")
    for sec in n["nv_info"]:
        lines.append(f"  {sec['section']}:\n")
        for r in sec["records"]:
            if r.get("decoded"):
                val = r["decoded"]
            elif r["fmt"] in (2, 3):
                val = str(r["value"])
            elif r["fmt"] == 1:
                val = ""
            else:
                val = r["payload"]
            lines.append(f"    {r['name']:36} {r['fmt_name']:10} {val}\n")
    for ref in n.get("address_refs") or []:
        lines.append(f"  address reference: {ref['function']} -> &{ref['references']}\n")
    if n.get("callgraph_error"):
        lines.append(f"  .nv.callgraph: cannot decode: {n['callgraph_error']}\n")
    return "".join(lines)
