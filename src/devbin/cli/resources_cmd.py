"""Registers, stack, shared, local and constant memory per function, for every cubin found.

PATH may be a cubin, a fatbin, a host object, library or executable, an ar
archive, a wheel/zip or a folder.  --format cuobjdump prints exactly the
lines of `cuobjdump -res-usage` (fatbin entry headers included), so scripts
that parse them can switch; --json gives the same facts as data.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING, Any, TextIO

from devbin.cli.progress import progress_bar

if TYPE_CHECKING:
    from devbin.discover import Found


HELP = "print per-function resource usage of every cubin found"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    p.add_argument("--format", choices=("text", "cuobjdump"), default="text", help="text layout (default: text)")
    p.add_argument("--json", action="store_true", help="print JSON")


def _entry_header(f: Found) -> str:
    """The block cuobjdump prints before each fatbin entry."""
    e = f.entry
    assert e is not None
    lines = ["", "Fatbin ptx code:" if f.kind == "ptx" else f"Fatbin {f.kind} code:", "================",
             f"arch = sm_{e.arch}{e.variant}", f"code version = [{e.major},{e.minor}]",
             "host = " + ("linux" if e.flags & 0x10 else "mac" if e.flags & 0x20 else "windows" if e.flags & 0x40
                          else "unknown"),
             f"compile_size = {'64bit' if e.is_64bit else '32bit'}"]
    if e.is_compressed:
        lines.append("compressed")
    if f.kind == "ptx":
        lines.append(f"ptxasOptions = {e.options}")
    return "\n".join(lines) + "\n"


def _member_line(f: Found) -> str | None:
    if not f.path.endswith(")") or "(" not in f.path:
        return None
    archive, member = f.path[:-1].rsplit("(", 1)
    if "!" not in archive:  # cuobjdump names an archive on disk by its absolute path
        archive = os.path.abspath(archive)
    return f"\nmember {archive}:{member}:\n"


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.discover import ScanReport, discover
    from devbin.errors import DeviceBinaryError
    from devbin.formats.elf import constants as C
    from devbin.formats.elf.reader import ElfFile
    from devbin.targets.nvidia.cubin import Cubin
    from devbin.targets.nvidia.resources import format_cuobjdump, usage
    report = ScanReport()
    results: list[dict[str, Any]] = []
    text: list[str] = []
    last_member = None
    with progress_bar("scanning") as progress:
        for f in discover(args.paths, progress=progress, report=report):
            if f.kind not in ("elf", "ptx"):
                continue
            member = _member_line(f)
            if member and member != last_member:
                text.append(member)
                last_member = member
            if f.entry is not None:
                text.append(_entry_header(f))
            if f.kind != "elf":
                continue
            try:
                elf = ElfFile(f.image_view(), where=f.path)
                if elf.header.e_machine != C.EM_CUDA:
                    continue
                u = usage(Cubin(elf, records=False))
            except DeviceBinaryError as e:
                report.warn(f.path, str(e))
                continue
            u["path"], u["container"], u["fatbin_index"], u["entry_index"] = (
                f.path, f.container, f.fatbin_index, f.entry_index)
            results.append(u)
            text.append(format_cuobjdump(u))
    if args.json:
        out.write(json.dumps({"cubins": results, "warnings": report.warnings}, indent=2) + "\n")
        return 0
    if args.format == "cuobjdump":
        out.write("".join(text))
        return 0
    for u in results:
        where = u["path"] + (f" [{u['container']} {u['fatbin_index']}.{u['entry_index']}]"
                             if u["fatbin_index"] is not None else "")
        out.write(f"{where} ({u['arch']}): GLOBAL {u['common']['global']} bytes"
                  + "".join(f", CONSTANT[{c['bank']}] {c['size']}" for c in u["common"]["constant"]) + "\n")
        out.write(f"  {'function':32} {'kind':7} {'REG':>4} {'STACK':>6} {'SHARED':>7} {'LOCAL':>6}  constant banks\n")
        for fn in u["functions"]:
            banks = " ".join(f"[{c['bank']}]:{c['size']}" for c in fn["constant"])
            out.write(f"  {fn['name'][:32]:32} {fn['kind']:7} {fn['registers']:>4} {fn['stack']:>6} "
                      f"{fn['shared']:>7} {fn['local']:>6}  {banks}\n")
    for w in report.warnings:
        out.write(f"warning: {w}\n")
    return 0
