"""Multi-target packages: ``devbin pack`` and its pieces (facts, PTX policy, option checks)."""

from devbin.packaging.consistency import Finding, check_consistency
from devbin.packaging.facts import describe, loose_image
from devbin.packaging.packing import (
                                    FORMATS,
                                    STANDARD_KEYS,
                                    PackedImage,
                                    PackInput,
                                    PackResult,
                                    check,
                                    pack,
                                    parse_image_spec,
)
from devbin.packaging.ptx import PTX_POLICIES, choose_ptx, parse_ptx_policy

__all__ = ["FORMATS", "PTX_POLICIES", "STANDARD_KEYS", "Finding", "PackInput", "PackResult", "PackedImage", "check",
           "check_consistency", "choose_ptx", "describe", "loose_image", "pack", "parse_image_spec",
           "parse_ptx_policy"]
