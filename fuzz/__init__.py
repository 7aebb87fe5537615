"""Fuzz targets for every devbin parser (atheris entry points and a pure-Python runner)."""
