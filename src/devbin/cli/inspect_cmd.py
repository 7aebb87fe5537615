"""Print what a device binary holds: the ELF summary and devbin's device sections.

Text by default; --json prints the same facts as JSON (stable key order,
integers as integers, names beside raw values).  Problems that do not stop
the reading (a bad section name, an undecodable devbin section) are reported
as warnings and the rest is still shown.
"""

from __future__ import annotations

import argparse
from typing import TextIO

HELP = "print the ELF summary and the devbin sections of a file"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a device code object (cubin, AMDGPU code object, any ELF)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.api import open_file
    from devbin.cli.render import dump_json, render_elf
    from devbin.errors import DeviceBinaryError
    from devbin.report import inspect_elf
    warnings: list[DeviceBinaryError] = []
    with open_file(args.file, diag=warnings.append) as elf:
        report = inspect_elf(elf, file=args.file, warnings=warnings)
    if args.json:
        dump_json(report, out)
    else:
        render_elf(report, out)
    return 0
