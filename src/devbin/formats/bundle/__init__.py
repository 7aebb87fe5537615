"""clang-offload-bundler bundles: binary, compressed (CCOB v1-v3), text and object-type.

``reader.py`` parses (``parse_bundle``, ``parse_compressed_bundle``,
``parse_any_bundle``, ``parse_text_bundle``, ``iter_hip_fatbin`` for the
back-to-back bundles of a ``.hip_fatbin`` section, ``bundles_in_elf`` for the
``__CLANG_OFFLOAD_BUNDLE__<id>`` sections of an object-type bundle), ``writer.py``
writes as clang-offload-bundler 19 does, ``compress.py`` holds the codecs and
the truncated-MD5 hash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from devbin._lazy import lazy_attributes

if TYPE_CHECKING:
    from devbin.formats.bundle import compress, constants
    from devbin.formats.bundle.constants import DEFAULT_MAX
    from devbin.formats.bundle.reader import (
        Bundle,
        BundleEntry,
        BundleId,
        CompressedHeader,
        TextBundlePart,
        bundles_in_elf,
        hip_fatbin_bundles,
        iter_hip_fatbin,
        open_compressed_bundle,
        parse_any_bundle,
        parse_bundle,
        parse_bundle_id,
        parse_compressed_bundle,
        parse_compressed_header,
        parse_text_bundle,
    )
    from devbin.formats.bundle.writer import (
        BundleImage,
        BundlePlan,
        plan_bundle,
        write_bundle,
        write_compressed_bundle,
        write_text_bundle,
    )

__all__ = [
    "DEFAULT_MAX",
    "Bundle",
    "BundleEntry",
    "BundleId",
    "BundleImage",
    "BundlePlan",
    "CompressedHeader",
    "TextBundlePart",
    "bundles_in_elf",
    "compress",
    "constants",
    "hip_fatbin_bundles",
    "iter_hip_fatbin",
    "parse_any_bundle",
    "parse_bundle",
    "parse_bundle_id",
    "open_compressed_bundle",
    "parse_compressed_bundle",
    "parse_compressed_header",
    "parse_text_bundle",
    "plan_bundle",
    "write_bundle",
    "write_compressed_bundle",
    "write_text_bundle",
]

__getattr__ = lazy_attributes(__name__, {
    "compress": None,
    "constants": None,
    "DEFAULT_MAX": "constants",
    "Bundle": "reader",
    "BundleEntry": "reader",
    "BundleId": "reader",
    "CompressedHeader": "reader",
    "TextBundlePart": "reader",
    "bundles_in_elf": "reader",
    "hip_fatbin_bundles": "reader",
    "iter_hip_fatbin": "reader",
    "open_compressed_bundle": "reader",
    "parse_any_bundle": "reader",
    "parse_bundle": "reader",
    "parse_bundle_id": "reader",
    "parse_compressed_bundle": "reader",
    "parse_compressed_header": "reader",
    "parse_text_bundle": "reader",
    "BundleImage": "writer",
    "BundlePlan": "writer",
    "plan_bundle": "writer",
    "write_bundle": "writer",
    "write_compressed_bundle": "writer",
    "write_text_bundle": "writer",
})
