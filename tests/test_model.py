"""Unit tests of the unified model (devbin.model)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from devbin.errors import FormatError, UsageError
from devbin.model import (
    Applies,
    AttrForm,
    Attribute,
    CallConv,
    CallGraph,
    CodeObject,
    Function,
    FunctionKind,
    KernelParam,
    Metadata,
    Namespace,
    ParamType,
    Prototype,
    SectionVersion,
    StdAttr,
    Target,
    TypeKind,
    attr_by_name,
    attr_info,
    decode_param_layout,
    encode_param_layout,
    namespace_of,
    register_vendor_attribute,
)
from devbin.targets.registry import parse_target

INT = ParamType(TypeKind.INT, 4, 4)
PTR = ParamType(TypeKind.POINTER, 8, 8)
P_II = Prototype(INT, (INT,))
P_VP = Prototype(params=(PTR,))


# -- Target -------------------------------------------------------------------------

def test_target_id_canonical_amdgpu() -> None:
    t = parse_target("gfx90a:xnack-:sramecc+")
    assert t.vendor == "amd" and Target.parse("gfx90a").vendor == ""  # the model guesses no vendor
    assert t.features == ("sramecc+", "xnack-")
    assert t.target_id == "gfx90a:sramecc+:xnack-"
    assert t.feature("xnack") is False and t.feature("sramecc") is True and t.feature("tgsplit") is None
    assert parse_target(t.target_id) == t


def test_target_id_nvidia_and_generic() -> None:
    assert parse_target("sm_90a") == Target("nvidia", "sm_90a")
    assert parse_target("spirv64") == Target("", "spirv64")
    assert Target.parse("sm_90a").target_id == "sm_90a"
    t = Target.parse("spirv64:foo+", vendor="intel", triple="spirv64-unknown-unknown")
    assert (t.vendor, t.arch, t.features, t.triple) == ("intel", "spirv64", ("foo+",), "spirv64-unknown-unknown")
    assert str(t) == "spirv64:foo+"


@pytest.mark.parametrize("text", ["", ":xnack+", "gfx90a:xnack", "gfx90a:xnack+:xnack-", "gfx90a::", "gfx90a:+"])
def test_target_parse_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        Target.parse(text)


# -- attributes ---------------------------------------------------------------------

def test_standard_ids_and_one_byte_keys() -> None:
    assert attr_info(StdAttr.STACK_SIZE) is not None
    info = attr_by_name("stack_size")
    assert info is not None and info.id == StdAttr.STACK_SIZE and info.form == AttrForm.UINT
    # every id below 16 fits a one-byte key (id << 3 | form < 0x80)
    assert all((int(a) << 3 | 7) < 0x80 for a in StdAttr if a < 16)
    assert attr_info(StdAttr.PARAM_LAYOUT).applies == Applies.KERNEL  # type: ignore[union-attr]
    assert attr_info(StdAttr.PROTOTYPE).applies == Applies.FUNCTION  # type: ignore[union-attr]
    assert namespace_of(0x1FF) == Namespace.NVIDIA


def test_vendor_registration() -> None:
    # Ids of the experimental namespace (0x7f): real vendor packages own their namespaces' ids.
    info = register_vendor_attribute(0x7FA5, "experimental.test_vgpr_spill", AttrForm.UINT, Applies.BOTH)
    assert register_vendor_attribute(0x7FA5, "experimental.test_vgpr_spill", AttrForm.UINT, Applies.BOTH) == info
    assert Attribute(0x7FA5, 3).name == "experimental.test_vgpr_spill"
    assert Attribute(0x7FA5, 3).form == AttrForm.UINT
    with pytest.raises(UsageError):
        register_vendor_attribute(0x7FA5, "experimental.other", AttrForm.UINT, Applies.BOTH)
    with pytest.raises(UsageError):
        register_vendor_attribute(0x7FA6, "experimental.test_vgpr_spill", AttrForm.UINT, Applies.BOTH)
    with pytest.raises(UsageError):
        register_vendor_attribute(0x0042, "std.nope", AttrForm.UINT, Applies.BOTH)  # namespace 0 is the spec's
    with pytest.raises(UsageError):
        register_vendor_attribute(0x7FA7, "experimental.opaque", 6, Applies.BOTH)


def test_attribute_values() -> None:
    assert Attribute(StdAttr.MAX_THREADS, [256, 1, 1]).value == (256, 1, 1)
    assert Attribute(0x7F01, "héllo", AttrForm.BYTES).value == "héllo".encode()
    assert Attribute(0x7F01, "héllo", AttrForm.BYTES).text == "héllo"
    assert Attribute(0x7F02, -5, AttrForm.SINT).value == -5
    assert Attribute(StdAttr.DYNAMIC_STACK, True).value is True
    assert Attribute(0x7F03, b"\x01\x02", 7).form.opaque
    bads: list[Callable[[], object]] = [
        lambda: Attribute(StdAttr.STACK_SIZE, -1),
        lambda: Attribute(StdAttr.STACK_SIZE, 1 << 64),
        lambda: Attribute(StdAttr.STACK_SIZE, True),
        lambda: Attribute(StdAttr.DYNAMIC_STACK, False),
        lambda: Attribute(StdAttr.MAX_THREADS, (1, 2)),
        lambda: Attribute(0x7F04, 1),  # unknown id without a form
        lambda: Attribute(0x7F04, 1, 8),
        lambda: Attribute(-1, 1, 0),
    ]
    for bad in bads:
        with pytest.raises(UsageError):
            bad()


# -- functions ----------------------------------------------------------------------

def test_function_normalises_and_accessors() -> None:
    layout = encode_param_layout((KernelParam(TypeKind.POINTER, 0, 8, 8), KernelParam(TypeKind.INT, 8, 4, 4)))
    f = Function("k", 1, (Attribute(StdAttr.STACK_SIZE, 16), Attribute(StdAttr.REGS_GENERAL, 40),
                          Attribute(StdAttr.PARAM_LAYOUT, layout)))
    assert f.kind is FunctionKind.KERNEL and f.is_kernel
    assert [a.id for a in f.attributes] == sorted(a.id for a in f.attributes)
    assert f.attr(StdAttr.REGS_GENERAL) == 40 and f.attr(StdAttr.FRAME_SIZE) is None
    assert f.uint(StdAttr.STACK_SIZE) == 16
    assert f.params() == (KernelParam(TypeKind.POINTER, 0, 8, 8), KernelParam(TypeKind.INT, 8, 4, 4))
    assert f.with_attributes(Attribute(StdAttr.STACK_SIZE, 32)).attr(StdAttr.STACK_SIZE) == 32
    assert f.misplaced_attributes() == ()
    d = Function("d", FunctionKind.DEVICE, (Attribute(StdAttr.MAX_THREADS, (1, 1, 1)),))
    assert [a.id for a in d.misplaced_attributes()] == [StdAttr.MAX_THREADS]
    assert Function("x", 77).kind == 77 and Function("x", 77).to_dict()["kind"] == "unknown"


def test_function_rejects() -> None:
    with pytest.raises(UsageError):
        Function("f", 0, (Attribute(StdAttr.STACK_SIZE, 1), Attribute(StdAttr.STACK_SIZE, 2)))
    with pytest.raises(UsageError):  # an opaque attribute must be the last one
        Function("f", 0, (Attribute(3, b"x", 6), Attribute(StdAttr.FRAME_SIZE, 2)))
    with pytest.raises(UsageError):
        Function("f", 256)


def test_param_layout_decode_errors() -> None:
    with pytest.raises(FormatError):
        decode_param_layout(b"\x01\x03\x00")
    with pytest.raises(FormatError):
        decode_param_layout(b"\x01\x03\x00\x08\x03\xff")  # trailing byte
    with pytest.raises(FormatError):
        decode_param_layout(b"\x01\x03\x00\x08\x40")  # log2 align 64


# -- call graph -----------------------------------------------------------------------

def test_callgraph_normalises_and_reachable() -> None:
    cg = CallGraph(
        direct=(("k", "b"), ("k", "a"), ("a", "a"), ("k", "a"), ("a", "ext")),
        indirect_sites=(("b", P_II),),
        address_taken=(("f1", P_II), ("f2", P_VP)),
        external=("ext", "ext"),
        unknown_blocks=((9, b"x"), (5, b"y")),
    )
    assert cg.direct == (("a", "a"), ("a", "ext"), ("k", "a"), ("k", "b"))
    assert cg.external == ("ext",)
    assert cg.unknown_blocks == ((5, b"y"), (9, b"x"))
    assert cg.callees("k") == ("a", "b")
    assert cg.callees("b") == ("f1",)
    assert cg.callees("b", indirect=False) == ()
    assert cg.callers("a") == ("a", "k")
    assert cg.reachable(["k"]) == {"k", "a", "b", "ext", "f1"}
    assert cg.reachable(["k"], indirect=False) == {"k", "a", "b", "ext"}
    assert cg.prototypes() == (P_II, P_VP)
    with pytest.raises(UsageError):
        CallGraph(unknown_blocks=((1, b""),))  # 1..4 are known tags


def test_reachable_deep_chain_is_iterative() -> None:
    chain = tuple((f"f{i}", f"f{i + 1}") for i in range(20000))
    assert len(CallGraph(direct=chain).reachable(["f0"])) == 20001


# -- metadata -------------------------------------------------------------------------

def test_metadata() -> None:
    md = Metadata.of([("producer", "clang 19")], compile_options="-O3", level=3, blob=b"\x00")
    assert md.keys() == ("producer", "compile-options", "level", "blob")
    assert md["level"] == 3 and md.get("nope") is None and "blob" in md
    assert md.set("level", 4)["level"] == 4 and md.set("new", "x").keys()[-1] == "new"
    assert md.without("blob").keys() == ("producer", "compile-options", "level")
    for bad in [(("a", 1), ("a", 2)), (("", 1),), (("a", -1),), (("a", True),), (("a", 1.5),)]:
        with pytest.raises(UsageError):
            Metadata(bad)  # type: ignore[arg-type]


# -- code object ----------------------------------------------------------------------

def test_codeobject_target_metadata_sync() -> None:
    co = CodeObject(parse_target("gfx90a:xnack-"), metadata=Metadata.of(producer="x", vendor="old"))
    assert co.metadata.entries == (("vendor", "amd"), ("target-id", "gfx90a:xnack-"), ("producer", "x"))
    derived = CodeObject(metadata=co.metadata)
    assert derived == co
    # an empty vendor is kept (the model infers none)
    t = Target("", "sm_90")
    assert CodeObject(metadata=CodeObject(t).metadata).target == t
    # an unparseable target-id stays plain metadata
    odd = CodeObject(metadata=Metadata.of([("target-id", "a:b")]))
    assert odd.target is None and odd.metadata["target-id"] == "a:b"


def test_codeobject_prototypes_and_functions() -> None:
    cg = CallGraph(indirect_sites=(("k", P_VP),), address_taken=(("f", P_II),))
    f = Function("f", FunctionKind.INDIRECT_TARGET, (Attribute(StdAttr.PROTOTYPE, 0),))
    co = CodeObject(None, (Function("k", 1), f), cg, prototypes=(P_II,))
    assert co.prototypes == (P_II, P_VP)  # table completed from the call graph
    assert co.prototype_of("f") == P_II and co.prototype_index(P_VP) == 1
    assert [x.name for x in co.functions] == ["f", "k"] and [x.name for x in co.kernels] == ["k"]
    with pytest.raises(UsageError):
        CodeObject(functions=(Function("a", 0), Function("a", 1)))
    with pytest.raises(UsageError):
        CodeObject(functions=(Function("a", 0, (Attribute(StdAttr.PROTOTYPE, 5),)),))
    assert CodeObject(section_versions=(SectionVersion(".devbin.meta"),)).section_versions == ()


def test_to_dict_is_json_ready_and_named() -> None:
    k = Function("k", FunctionKind.KERNEL, (Attribute(StdAttr.STACK_SIZE, 16), Attribute(0x7F10, b"\xab", 2),
                                            Attribute(StdAttr.MAX_THREADS, (128, 1, 1))))
    co = CodeObject(Target.parse("sm_90a"), (k,), CallGraph(direct=(("k", "e"),), external=("e",),
                                                           address_taken=(("k", Prototype(callconv=CallConv.KERNEL)),)),
                    Metadata.of(producer="nvcc", blob=b"\x01"))
    d = co.to_dict()
    json.dumps(d)
    fn = d["functions"][0]
    assert list(fn)[:3] == ["name", "kind", "kind_raw"]
    assert (fn["kind"], fn["kind_raw"]) == ("kernel", 1)
    attrs = fn["attributes"]
    assert attrs[0] == {"id": int(StdAttr.STACK_SIZE), "name": "stack_size", "form": "uint", "form_raw": 0,
                        "value": 16}
    assert attrs[1]["value"] == [128, 1, 1]
    assert attrs[2] == {"id": 0x7F10, "name": None, "form": "bytes", "form_raw": 2, "value": "ab"}
    assert d["target"]["target_id"] == "sm_90a"
    assert d["metadata"][-1] == {"key": "blob", "type": "bytes", "value": "01"}
    assert d["prototypes"][0]["callconv"] == "kernel"
    assert d["callgraph"]["direct"] == [{"caller": "k", "callee": "e"}]
    assert json.dumps(co.to_dict()) == json.dumps(d)  # stable
