"""``python -m devbin`` runs the command-line interface."""

from devbin.cli.main import entry

entry()
