"""One package per on-disk format; each reads into a view and writes from a model."""
