"""Multi-target packages: ``devbin pack`` and its pieces (facts, PTX policy, option checks)."""

from devbin.packaging.build import (
                                    FORMATS,
                                    STANDARD_KEYS,
                                    PackedImage,
                                    PackInput,
                                    PackResult,
                                    check,
                                    pack,
                                    parse_image_spec,
)
from devbin.packaging.consistency import Finding, check_consistency
from devbin.packaging.facts import ImageFacts, image_facts
from devbin.packaging.ptx import PTX_POLICIES, choose_ptx, parse_ptx_policy

__all__ = ["FORMATS", "PTX_POLICIES", "STANDARD_KEYS", "Finding", "ImageFacts", "PackInput", "PackResult",
           "PackedImage", "check", "check_consistency", "choose_ptx", "image_facts", "pack", "parse_image_spec",
           "parse_ptx_policy"]
