"""The package version, in a module that imports nothing (importers and the CLI take it from here)."""

__version__ = "0.1.0"
