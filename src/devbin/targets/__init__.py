"""What is specific to one GPU vendor: one package per vendor (``nvidia``, ``amdgpu``), each with its
descriptor (``<vendor>/vendor.py``, :class:`devbin.targets.vendor.Vendor`), registered in
:mod:`devbin.targets.registry`; :mod:`devbin.targets.archnames` parses architecture lists."""
