"""The device linker (``devbin link``, :func:`devbin.link.link`): docs/ARCHITECTURE.md "Linker"."""
