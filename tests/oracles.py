"""Run the real tools (GNU readelf, llvm-readobj/llvm-readelf) and normalise their listings.

Every tolerated difference between devbin and a tool lives here, named:

* ``KNOWN_VENDOR_WARNINGS``: GNU readelf warns about NVIDIA's own cubins
  (``.text.<f>`` keeps a *symbol* index, with the register count in the top
  byte, in ``sh_info``, which readelf expects to be a section index).  A file
  devbin edits may show these warnings only if the input already did.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.runners import run_tool

KNOWN_VENDOR_WARNINGS = re.compile(r"Unexpected value \(\d+\) in info field")


def warnings_of(tool: str, path: Path, *opts: str) -> list[str]:
    """Lines of stderr/stdout that are warnings or errors."""
    p = run_tool([tool, *opts, str(path)], check=False)
    lines = (p.stderr + "\n" + p.stdout).splitlines()
    return [ln.strip() for ln in lines if re.search(r"\b(warning|error)\b", ln, re.I)]


def llvm_json(readobj: str, path: Path) -> dict[str, Any]:
    p = run_tool([readobj, "--elf-output-style=JSON", "-S", "--symbols", "-r", str(path)], check=False)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    return data[0]  # type: ignore[no-any-return]


def llvm_sections(doc: dict[str, Any]) -> list[tuple[int, str, int, int, int, int, int, int]]:
    out = []
    for item in doc["Sections"]:
        s = item["Section"]
        out.append((s["Index"], s["Name"]["Name"], s["Type"]["Value"], s["Flags"]["Value"], s["Offset"], s["Size"],
                    s["Link"], s["Info"]))
    return out


def llvm_symbols(doc: dict[str, Any]) -> list[tuple[str, int, int, int]]:
    """(name, value, size, shndx).  llvm-readobj names an unnamed ``STT_SECTION`` symbol after its
    section; devbin keeps the symbol's own (empty) name, so such names are blanked here."""
    out = []
    for item in doc.get("Symbols", []):
        s = item["Symbol"]
        sec = s.get("Section", {})
        shndx = sec.get("Value", 0) if isinstance(sec, dict) else 0
        name = s["Name"]["Name"] if isinstance(s["Name"], dict) else s["Name"]
        if s["Type"]["Value"] == 3 and isinstance(s["Name"], dict) and s["Name"]["Value"] == 0:
            name = ""
        out.append((name, s["Value"], s["Size"], shndx))
    return out


def llvm_relocation_counts(doc: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in doc.get("Relocations", []):
        name = item.get("SectionName") or str(item.get("SectionIndex"))
        out[name] = len(item.get("Relocs", []))
    return out


_SEC_RE = re.compile(
    r"^\s*\[\s*(\d+)\]\s+(\S*)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\S*)\s+(\d+)\s+(\d+)"
    r"\s+(\d+)$"
)


def readelf_sections(path: Path) -> list[tuple[int, str, int, int, int, int]]:
    """(index, name, offset, size, link, info) from ``readelf -S -W``."""
    p = run_tool(["readelf", "-S", "-W", str(path)], check=False)
    out = []
    for ln in p.stdout.splitlines():
        m = _SEC_RE.match(ln)
        if m:
            out.append((int(m[1]), m[2], int(m[5], 16), int(m[6], 16), int(m[9]), int(m[10])))
    return out


def readelf_symbols(path: Path) -> list[tuple[str, int, int, str]]:
    """(name, value, size, ndx) from ``readelf -s -W`` for the static symbol table."""
    p = run_tool(["readelf", "-s", "-W", str(path)], check=False)
    out = []
    in_symtab = False
    for ln in p.stdout.splitlines():
        if ln.startswith("Symbol table"):
            in_symtab = "'.symtab'" in ln
            continue
        ln = re.sub(r"\[<other>: [0-9a-fx]+\]", "", ln)
        ln = re.sub(r"<(processor|OS) specific>: (\d+)", r"\1-\2", ln)
        parts = ln.split()
        if in_symtab and len(parts) >= 7 and parts[0].endswith(":") and parts[0][:-1].isdigit():
            name = parts[7] if len(parts) > 7 else ""
            size = int(parts[2], 16) if parts[2].startswith("0x") else int(parts[2])
            out.append((name, int(parts[1], 16), size, parts[6]))
    return out


def nvdisasm_added_lines(before: str, after: str) -> list[str]:
    """Lines nvdisasm printed for the edited cubin that it did not print for the original.

    Raises AssertionError if any line of the original listing disappeared or changed.
    """
    import difflib

    added = []
    for ln in difflib.ndiff(before.splitlines(), after.splitlines()):
        assert not ln.startswith("- "), f"nvdisasm line lost: {ln[2:]!r}"
        if ln.startswith("+ "):
            added.append(ln[2:])
    return added


def readelf_notes(path: Path) -> list[tuple[str, str, int]]:
    """(section, owner, descriptor size) from ``readelf -n -W``."""
    p = run_tool(["readelf", "-n", "-W", str(path)], check=False)
    out = []
    section = ""
    for ln in p.stdout.splitlines():
        m = re.match(r"Displaying notes found in: (\S+)", ln)
        if m:
            section = m[1]
            continue
        m = re.match(r"^  (\S.*?)\s+0x([0-9a-f]+)\t", ln)
        if m:
            out.append((section, m[1], int(m[2], 16)))
    return out


def readelf_relocation_counts(path: Path) -> dict[str, int]:
    p = run_tool(["readelf", "-r", "-W", str(path)], check=False)
    out: dict[str, int] = {}
    for m in re.finditer(r"Relocation section '([^']+)' at offset 0x[0-9a-f]+ contains (\d+) entr", p.stdout):
        out[m[1]] = int(m[2])
    return out
