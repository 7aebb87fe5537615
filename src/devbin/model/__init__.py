"""The vendor-neutral unified model: what every device binary format is read into.

``CodeObject`` holds a ``Target``, ``Function`` records with typed
``Attribute`` values, a ``CallGraph`` keyed by function name, the
``Prototype`` table and ``Metadata``.  Every class is a frozen dataclass
with ``to_dict()`` for JSON output.
"""

from __future__ import annotations

from devbin.model.attributes import (
    MAX_ATTR_ID,
    Applies,
    AttrForm,
    Attribute,
    AttrId,
    AttrInfo,
    AttrValue,
    Namespace,
    StdAttr,
    attr_by_name,
    attr_info,
    namespace_of,
    register_vendor_attribute,
    registered_attributes,
)
from devbin.model.callgraph import KNOWN_BLOCK_TAGS, CallGraph
from devbin.model.codeobject import CodeObject, SectionVersion
from devbin.model.function import Function, FunctionKind
from devbin.model.metadata import STANDARD_KEYS, TARGET_KEYS, Metadata, MetaValue
from devbin.model.prototype import (
    UNKNOWN_PROTOTYPE,
    CallConv,
    KernelParam,
    ParamType,
    Prototype,
    TypeKind,
    decode_param_layout,
    encode_param_layout,
)
from devbin.model.resources import Resources, resources_of
from devbin.model.target import Target

__all__ = [
    "KNOWN_BLOCK_TAGS",
    "MAX_ATTR_ID",
    "STANDARD_KEYS",
    "TARGET_KEYS",
    "Applies",
    "AttrForm",
    "AttrId",
    "AttrInfo",
    "AttrValue",
    "Attribute",
    "CallConv",
    "CallGraph",
    "CodeObject",
    "Function",
    "FunctionKind",
    "KernelParam",
    "MetaValue",
    "Metadata",
    "Namespace",
    "ParamType",
    "Prototype",
    "Resources",
    "SectionVersion",
    "StdAttr",
    "Target",
    "TypeKind",
    "UNKNOWN_PROTOTYPE",
    "attr_by_name",
    "attr_info",
    "decode_param_layout",
    "encode_param_layout",
    "namespace_of",
    "register_vendor_attribute",
    "registered_attributes",
    "resources_of",
]
