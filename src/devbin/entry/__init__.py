"""The entry points the package root re-exports (imported on first use, see ``devbin/__init__.py``):
``devbin.open`` and ``devbin.Source`` (:mod:`devbin.entry.source`: every device image of a file, a
folder or bytes) and the ELF level (:mod:`devbin.entry.elf`: one ELF file, a path or bytes)."""
