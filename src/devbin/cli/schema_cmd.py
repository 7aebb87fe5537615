"""Print the JSON Schema (draft 2020-12) of a command's --json output, or list them.

  devbin schema              the schema names, one per line: COMMAND  devbin.COMMAND/MAJOR
  devbin schema list         the schema of `devbin list --json`
  devbin schema ar-list      the schema of `devbin ar list --json`

Every --json output is one object whose "schema" key names its schema and
major version (devbin.list/1).  docs/JSON.md states what changes the major
version; new keys and new values of a documented vocabulary do not.
"""

from __future__ import annotations

import argparse
from importlib import resources
from typing import TextIO

HELP = "print the JSON Schema of a command's --json output (no COMMAND: list the schemas)"


def names() -> list[str]:
    """Every command with a JSON schema (the files shipped in devbin/schemas)."""
    folder = resources.files("devbin").joinpath("schemas")
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))


def text(command: str) -> str:
    """The schema of ``command`` as shipped (JSON text)."""
    from devbin.cli.common import BadArguments
    if command not in names():
        raise BadArguments(f"no schema named {command!r}; `devbin schema` lists them")
    return resources.files("devbin").joinpath("schemas", f"{command}.json").read_text(encoding="utf-8")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("command", nargs="?", metavar="COMMAND", help="list, extract, ..., ar-list (default: list them)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from devbin.cli.common import schema_name
    if args.command is None:
        for name in names():
            out.write(f"{name:12} {schema_name(name)}\n")
        return 0
    out.write(text(args.command))
    return 0
