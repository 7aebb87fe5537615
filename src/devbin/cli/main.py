"""devbin: list, extract, inspect, select, prune, pack, link and load GPU device binaries.

Cubins, PTX, AMDGPU code objects, CUDA fatbins, LLVM OffloadBinaries, clang
offload bundles, host objects and libraries, ar archives, super-archives,
wheels and folders; every device image is named by one address (`devbin
list` prints them) that --image accepts.

Results go to stdout, as text or, with --json, as one JSON object whose
"schema" key names its schema (`devbin schema COMMAND` prints it); warnings,
notes, progress and errors go to stderr.  Errors print one line,
``devbin: error: <where>: <message>``; --traceback shows the Python stack.

Exit status: 0 success; 1 error; 2 usage error (bad or missing arguments);
3 no input holds device code (one line on stderr, nothing on stdout).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TextIO

from devbin._version import __version__
from devbin.cli.common import exit_status
from devbin.errors import DeviceBinaryError

#: Subcommand -> module under devbin.cli.  Only the module of the command being run is imported
#: (all of them for `devbin --help` or a misspelt command): a short command pays for nothing else.
COMMANDS = {
    "inspect": "inspect_cmd",
    "list": "list_cmd",
    "extract": "extract_cmd",
    "resources": "resources_cmd",
    "callgraph": "callgraph_cmd",
    "annotate": "annotate_cmd",
    "tour": "tour",
    "cc": "cc_cmd",
    "pack": "pack_cmd",
    "prune": "prune_cmd",
    "ar": "ar_cmd",
    "link": "link_cmd",
    "select": "select_cmd",
    "load": "load_cmd",
    "schema": "schema_cmd",
}


def command_module(name: str) -> ModuleType:
    return importlib.import_module(f"devbin.cli.{COMMANDS[name]}")


def _command_named(argv: Sequence[str]) -> str | None:
    """The subcommand in ``argv`` (the first word that is not an option) when it is a known one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser for every subcommand, or for ``only`` (the others are then left out)."""
    parser = argparse.ArgumentParser(prog="devbin", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"devbin {__version__}")
    parser.add_argument("--traceback", action="store_true", help="show the Python stack on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS if only is None else (only,):
        mod = command_module(name)
        p = sub.add_parser(name, help=mod.HELP, description=mod.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    words = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command_named(words)).parse_args(words)
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
        return exit_status(e)
    except OSError as e:
        if args.traceback:
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"devbin: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1


def entry() -> None:
    sys.exit(main())
