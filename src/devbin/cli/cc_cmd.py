"""Compile an AMDGPU object with clang and record every function's resource usage in it.

    devbin cc [--json] -- clang-19 -target amdgcn-amd-amdhsa -mcpu=gfx90a -nogpulib -c -o out.o in.cl

The compiler command runs unchanged.  It then runs a second time with -S and
-o - (same flags otherwise) so devbin can read the per-function resource
comments LLVM prints in the assembly (LLVM 19 writes them nowhere else).  The
object is imported, device functions gain their registers and scratch size,
kernels keep the metadata note's totals (the assembly's numbers must agree;
disagreements are printed as warnings), and the devbin sections are written
into the object (a new file renamed over it, never a partial one).  Nothing the loader or
ld.lld reads moves.  An -o naming one of the command's input files is refused.

When the compiler fails, devbin exits with its status.  Commands without -c
and -o FILE, writing to stdout, or for a target other than amdgcn are refused.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from devbin.cli.common import dump, warn

HELP = "compile with clang (AMDGPU) and record per-function resource usage in the object"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print what was recorded as JSON")
    p.add_argument("compiler", nargs=argparse.REMAINDER, metavar="-- COMPILER ARGS...",
                   help="the compiler command line, after --")


def _output(argv: list[str]) -> tuple[int, int, str] | None:
    """(index, count of argv items, path) of the -o option."""
    for i, a in enumerate(argv):
        if a == "-o" and i + 1 < len(argv):
            return i, 2, argv[i + 1]
        if a.startswith("-o") and len(a) > 2 and not a.startswith("-o="):
            return i, 1, a[2:]
    return None


def _target(argv: list[str]) -> str | None:
    t = None
    for i, a in enumerate(argv):
        if a in ("-target", "--target") and i + 1 < len(argv):
            t = argv[i + 1]
        elif a.startswith("--target=") or a.startswith("-target="):
            t = a.split("=", 1)[1]
    return t


def asm_command(argv: list[str]) -> list[str]:
    """The compile command turned into one that writes the assembly to stdout."""
    from devbin.errors import UsageError
    o = _output(argv)
    if "-c" not in argv or o is None:
        raise UsageError("devbin cc needs a compile command with -c and -o FILE")
    i, n, _ = o
    rest = argv[:i] + argv[i + n:]
    return [("-S" if a == "-c" else a) for a in rest] + ["-o", "-"]


def run(args: argparse.Namespace, out: TextIO) -> int:
    import os
    import subprocess
    import sys
    from pathlib import Path

    from devbin.binary.output import Inputs, check_destination, write_file
    from devbin.errors import DeviceBinaryError, UsageError
    from devbin.formats.devsec.elf import annotate
    from devbin.formats.elf.compare import loader_differences
    from devbin.formats.elf.reader import ElfFile
    from devbin.targets.registry import VENDORS, vendor_for_machine, vendor_for_triple

    argv = list(args.compiler)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise UsageError("give the compiler command after --, e.g. devbin cc -- clang-19 ... -c -o out.o in.cl")
    o = _output(argv[1:])
    if "-c" not in argv[1:] or o is None:
        raise UsageError("devbin cc needs a compile command with -c and -o FILE (it annotates that object)")
    path = o[2]
    if path == "-":
        raise UsageError("devbin cc cannot annotate an object written to stdout (-o -)")
    target = _target(argv[1:])
    vendor = vendor_for_triple(target or "")
    if vendor is None or not vendor.reads_assembly:
        able = [v for v in VENDORS if v.reads_assembly]
        raise UsageError(f"devbin cc handles {'/'.join(v.device_title for v in able)} device compiles only "
                         f"(-target {'/'.join(v.triple_prefixes[0] for v in able)}-...); "
                         f"this command's target is {target or 'the host default'!r}")
    # the compile's input files: every other argument that names an existing file
    sources = Inputs(a for j, a in enumerate(argv[1:]) if j not in range(o[0], o[0] + o[1]) and os.path.isfile(a))
    check_destination(path, sources)  # -o naming a source: refused before the compiler runs
    rc = subprocess.run(argv, check=False).returncode
    if rc != 0:
        return rc
    asm = subprocess.run([argv[0], *asm_command(argv[1:])], check=False, capture_output=True)
    if asm.returncode != 0:
        sys.stderr.write(asm.stderr.decode(errors="replace"))
        raise UsageError(f"the assembly run ({argv[0]} ... -S -o -) failed with status {asm.returncode}; "
                         f"{path} was left as the compiler wrote it")
    warnings: list[str] = []

    def diag(e: DeviceBinaryError) -> None:
        warnings.append(str(e))

    elf = ElfFile(Path(path).read_bytes(), where=path)
    if vendor_for_machine(elf.header.e_machine) is not vendor:
        raise UsageError(f"{path} is not an {vendor.device_title} code object (e_machine {elf.header.e_machine})")
    report = vendor.facts_from_assembly(elf, asm.stdout.decode(errors="replace"), diag=diag)
    data = annotate(elf, report.model)
    diffs = loader_differences(elf, ElfFile(data, where=path))
    if diffs:
        raise UsageError(f"internal error: the annotated file would differ where the loader reads: {diffs}")
    size_in = elf.size
    write_file(path, data, inputs=sources)
    result: dict[str, Any] = {
        "output": path, "size_before": size_in, "size_after": len(data),
        "functions": report.functions,
        "filled": list(report.filled), "checked": list(report.checked),
        "disagreements": list(report.disagreements), "without_asm_facts": list(report.missing),
        "warnings": warnings,
    }
    if args.json:
        dump("cc", result, out)
        return 0
    out.write(f"{path}: {len(report.filled)} device functions gained resource facts, {len(report.checked)} kernels "
              f"checked against the note; {size_in} -> {len(data)} bytes\n")
    for n in report.missing:
        out.write(f"  {n}: the assembly printed no resource facts (left unknown)\n")
    for w in warnings:
        warn(w)
    return 0
