"""Mach-O containers: Apple universal ("fat") files, read for comparison with devbin's own archives."""

from devbin.formats.macho.fat import FatFile, FatSlice, is_fat

__all__ = ["FatFile", "FatSlice", "is_fat"]
