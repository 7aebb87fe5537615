"""devbin: inspect, annotate and (later) pack, link and load device binaries.

Every subcommand prints readable text, or the same facts as JSON with --json.
Errors print one line, ``devbin: error: <where>: <message>``, and exit 1;
--traceback shows the Python stack instead.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from devbin import __version__
from devbin.cli import (
    annotate_cmd,
    ar_cmd,
    callgraph_cmd,
    cc_cmd,
    extract_cmd,
    inspect_cmd,
    list_cmd,
    pack_cmd,
    prune_cmd,
    resources_cmd,
    select_cmd,
    tour_cmd,
)
from devbin.errors import DeviceBinaryError

COMMANDS = {
    "inspect": inspect_cmd,
    "list": list_cmd,
    "extract": extract_cmd,
    "resources": resources_cmd,
    "callgraph": callgraph_cmd,
    "annotate": annotate_cmd,
    "tour": tour_cmd,
    "cc": cc_cmd,
    "pack": pack_cmd,
    "prune": prune_cmd,
    "ar": ar_cmd,
    "select": select_cmd,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="devbin", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"devbin {__version__}")
    parser.add_argument("--traceback", action="store_true", help="show the Python stack on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, mod in COMMANDS.items():
        p = sub.add_parser(name, help=mod.HELP, description=mod.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args, out)
        out.flush()
        return code
    except BrokenPipeError:
        # `devbin inspect x | head`: stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except DeviceBinaryError as e:
        if args.traceback:
            raise
        print(f"devbin: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        if args.traceback:
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"devbin: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1


def entry() -> None:
    sys.exit(main())
