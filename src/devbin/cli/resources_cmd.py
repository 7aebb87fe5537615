"""Registers, stack, shared, local and constant memory per function, for every cubin in the files.

--format cuobjdump prints exactly the lines of `cuobjdump -res-usage`, so
scripts that parse them can switch; --json gives the same facts as data.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from devbin.api import open_file
from devbin.errors import FormatError
from devbin.formats.elf import constants as C
from devbin.targets.nvidia.cubin import Cubin
from devbin.targets.nvidia.resources import format_cuobjdump, usage

HELP = "print per-function resource usage of every cubin found"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="cubins")
    p.add_argument("--format", choices=("text", "cuobjdump"), default="text", help="text layout (default: text)")
    p.add_argument("--json", action="store_true", help="print JSON")


def _collect(path: str) -> list[dict[str, Any]]:
    with open_file(path) as elf:
        if elf.header.e_machine != C.EM_CUDA:
            raise FormatError("not a cubin (e_machine is not EM_CUDA)", fmt="elf", where=path)
        u = usage(Cubin(elf))
    u["path"] = path
    return [u]


def run(args: argparse.Namespace, out: TextIO) -> int:
    results: list[dict[str, Any]] = []
    for path in args.paths:
        results.extend(_collect(path))
    if args.json:
        out.write(json.dumps(results, indent=2) + "\n")
        return 0
    for u in results:
        if args.format == "cuobjdump":
            out.write(format_cuobjdump(u))
            continue
        out.write(f"{u['path']} ({u['arch']}): GLOBAL {u['common']['global']} bytes"
                  + "".join(f", CONSTANT[{c['bank']}] {c['size']}" for c in u["common"]["constant"]) + "\n")
        out.write(f"  {'function':32} {'kind':7} {'REG':>4} {'STACK':>6} {'SHARED':>7} {'LOCAL':>6}  constant banks\n")
        for f in u["functions"]:
            banks = " ".join(f"[{c['bank']}]:{c['size']}" for c in f["constant"])
            out.write(f"  {f['name'][:32]:32} {f['kind']:7} {f['registers']:>4} {f['stack']:>6} {f['shared']:>7} "
                      f"{f['local']:>6}  {banks}\n")
    return 0
