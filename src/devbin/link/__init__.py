"""The device linker (``devbin link``, :func:`devbin.link.core.link`): docs/ARCHITECTURE.md "Linker"."""
