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
3 no input holds device code (one line on stderr, nothing on stdout);
4 a `devbin size --budget` rule is exceeded.

Every file a command writes is named with -o OUT (prune, extract, pack, ar,
link, tour ...); a second output beside what is printed is chosen by a
switch and written to -o OUT: `devbin size --html -o report.html`,
`devbin callgraph FILE --svg -o graph.svg`.

--max-memory SIZE (before or after the command; default 4G, or DEVBIN_MAX_MEMORY) bounds
the decoded bytes a command holds at once, all its processes (--jobs) together: compressed
images (fatbin entries, compressed offload bundles, packed super-archive members) are decoded
into buffers taken from this budget, each given back once its facts are taken, and an image
that does not fit beside what its own work holds is an error naming it and the budget (the
same error whatever --jobs; a worker waits for others to give back).

Problems a reader went past (a damaged or unusual file that could still be
read) print ``warning: <message>`` on stderr, each distinct message once
(they are :class:`devbin.errors.FormatWarning` to a library caller).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import TextIO, cast

from devbin._version import __version__
from devbin.cli.common import exit_status, warn
from devbin.errors import DeviceBinaryError, FormatWarning

#: Subcommand -> module under devbin.cli.  Only the module of the command being run is imported
#: (all of them for `devbin --help` or a misspelt command): a short command pays for nothing else.
COMMANDS = {
    "inspect": "inspect_cmd",
    "list": "list_cmd",
    "extract": "extract_cmd",
    "resources": "resources_cmd",
    "size": "size_cmd",
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


#: Options of the main parser that take a value in the next word.
_VALUED = ("--max-memory",)


def _command_named(argv: Sequence[str]) -> str | None:
    """The subcommand in ``argv`` (the first word that is neither an option nor its value) when it is a known one."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a in _VALUED:
            skip = True
        elif not a.startswith("-"):
            return a if a in COMMANDS else None
    return None


def _size(text: str) -> int:
    from devbin.binary.budget import parse_size
    from devbin.errors import UsageError
    try:
        n = parse_size(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(e.message) from None
    if n <= 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return n


#: A Sphinx role in a docstring (``:class:`devbin.errors.FormatWarning` ``, ``:func:`~x.y` ``): the
#: docstrings are the API reference and the ``--help`` text both; the help shows the target alone.
_ROLE = re.compile(r":(?:\w+:)?\w+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
#: A reST literal (````x````): the help shows it as markdown does, in single backquotes.
_LITERAL = re.compile(r"``([^`]+)``")


def help_text(doc: str | None) -> str:
    """A module docstring as ``--help`` prints it: Sphinx roles and reST literals turned into plain
    `backquoted` text (the one place the CLI renders a docstring)."""
    return _LITERAL.sub(r"`\1`", _ROLE.sub(r"`\1`", doc or ""))


def build_parser(only: str | None = None, *, commands: bool = True, arguments: bool = True) -> argparse.ArgumentParser:
    """The parser for every subcommand, or for ``only`` (the others are then left out), or for
    none (``commands=False``: ``devbin --version`` imports no command's module).  ``arguments=False``
    leaves out the subcommands' own options (what ``devbin --help`` and a misspelt command need:
    the names and one line each)."""
    parser = argparse.ArgumentParser(prog="devbin", description=help_text(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"devbin {__version__}")
    parser.add_argument("--traceback", action="store_true", help="show the Python stack on errors")
    parser.add_argument("--max-memory", type=_size, default=None, metavar="SIZE",
                        help="decoded bytes a command may hold at once, all its processes together, e.g. 512M "
                             "or 8G (default: 4G, or the DEVBIN_MAX_MEMORY environment variable)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in (COMMANDS if only is None else (only,)) if commands else ():
        mod = command_module(name)
        if not arguments:
            sub.add_parser(name, help=mod.HELP, add_help=False)
            continue
        p = sub.add_parser(name, help=mod.HELP, description=help_text(mod.__doc__),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.add_argument("--max-memory", type=_size, default=argparse.SUPPRESS, metavar="SIZE",
                       help=argparse.SUPPRESS)
        mod.add_arguments(p)
        p.set_defaults(func=mod.run)
    return parser


@contextmanager
def _format_warnings_on_stderr() -> Iterator[None]:
    """Show each distinct :class:`FormatWarning` once, as ``warning: ...`` on stderr (as every warning)."""
    seen: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if not issubclass(category, FormatWarning):
            previous(message, category, filename, lineno, file, line)
        elif str(message) not in seen:
            seen.add(str(message))
            warn(str(message))

    with warnings.catch_warnings():
        previous = warnings.showwarning
        warnings.simplefilter("always", FormatWarning)
        warnings.showwarning = show
        yield


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    from devbin.escape.text import VisibleWriter
    # Every command's stdout through the text rule (newline and tab kept): behind the renderers, which
    # escape each value, nothing read from a file reaches the terminal as a control or an override.
    out = cast(TextIO, VisibleWriter(out or sys.stdout))
    words = sys.argv[1:] if argv is None else list(argv)
    named = _command_named(words)
    if named is None and "--version" in words and not {"-h", "--help"} & set(words):
        build_parser(commands=False).parse_args(words)  # prints the version and exits
    args = build_parser(named, arguments=named is not None).parse_args(words)
    with _format_warnings_on_stderr():
        return _run(args, out)


def _run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.binary import budget
    try:
        with budget.limit(args.max_memory or budget.current().limit):
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
        from devbin.errors import short
        where = f"{short(str(e.filename))}: " if e.filename else ""
        print(f"devbin: error: {where}{short(str(e.strerror or e), 400)}", file=sys.stderr)
        return 1
    except MemoryError:
        # The decode sites turn this into LimitExceeded; anything else that runs out of memory ends here.
        if args.traceback:
            raise
        print("devbin: error: out of memory (the system refused an allocation; see --max-memory)",
              file=sys.stderr)
        return 1


#: The cyclic garbage collector's thresholds for one command (Python's default first threshold is 700
#: allocations): a command builds one large result (a wheel's size report: about 200,000 objects) and
#: keeps it to the end, which the default thresholds walk again and again.
GC_THRESHOLDS = (100_000, 50, 100)


def entry() -> None:
    """The console script (and ``python -m devbin``): :func:`main`, then out of the process at once.

    The interpreter's teardown frees a command's last objects one by one (a wheel's size report: the
    report and the buffer of a 167 MB inflated library, 20-30 ms of a 0.45 s command); by the time
    :func:`main` returns, every output file has been renamed into place and every temporary file and
    folder removed (they are context managers), so the standard streams are flushed and the process
    ends with :func:`os._exit`.  Library callers of :func:`main` keep the interpreter's usual exit."""
    gc.set_threshold(*GC_THRESHOLDS)
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):  # `devbin ... | head`, or a stream closed
            stream.flush()
    os._exit(code)
