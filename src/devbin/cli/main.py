"""devbin: inspect, annotate and (later) pack, link and load device binaries.

Every subcommand prints readable text, or the same facts as JSON with --json.
Errors print one line, ``devbin: error: <where>: <message>``, and exit 1;
--traceback shows the Python stack instead.  Problems a reader went past
(:class:`devbin.errors.FormatWarning`) print ``devbin: warning: <message>`` on stderr, each
distinct message once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import TextIO

from devbin._version import __version__
from devbin.errors import DeviceBinaryError, FormatWarning

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


@contextmanager
def _format_warnings_on_stderr() -> Iterator[None]:
    """Show each distinct :class:`FormatWarning` once, as ``devbin: warning: ...`` on stderr."""
    seen: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if not issubclass(category, FormatWarning):
            previous(message, category, filename, lineno, file, line)
        elif str(message) not in seen:
            seen.add(str(message))
            print(f"devbin: warning: {message}", file=sys.stderr)

    with warnings.catch_warnings():
        previous = warnings.showwarning
        warnings.simplefilter("always", FormatWarning)
        warnings.showwarning = show
        yield


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    words = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command_named(words)).parse_args(words)
    with _format_warnings_on_stderr():
        return _run(args, out)


def _run(args: argparse.Namespace, out: TextIO) -> int:
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
