"""SYCL host binaries of the old offload model (DPC++'s ``clang-offload-wrapper``): the device images in
``__CLANG_OFFLOAD_BUNDLE__sycl-<target>`` sections and the descriptors that describe them.

``reader.py`` reads them (``read_sycl_images``); ``constants.py`` holds the layouts.
"""
