"""Tests of the devbin section codec (devbin.formats.devsec), mostly properties.

Symbol numbering in these tests: the ``.symtab`` is the sorted list of every
name the model mentions, after the null symbol, so ``symbol_index`` and
``symbol_name`` are inverse and the model's names all resolve.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from devbin.binary import ByteView
from devbin.binary.writer import sleb, uleb
from devbin.errors import DeviceBinaryError, FormatError, TruncatedError, UnsupportedVersion, UsageError
from devbin.formats.devsec import StaleSection, decode, decode_section, encode, read_header
from devbin.formats.devsec import constants as C
from devbin.model import (
    MAX_ATTR_ID,
    AttrForm,
    Attribute,
    CallGraph,
    CodeObject,
    Function,
    FunctionKind,
    KernelParam,
    Metadata,
    ParamType,
    Prototype,
    SectionVersion,
    StdAttr,
    Target,
    attr_info,
    encode_param_layout,
)

from tests.expect import assert_located, outcome

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


fuzz_devsec = _load(ROOT / "fuzz" / "fuzz_devsec.py", "fuzz_devsec")
format_sizes = _load(ROOT / "scripts" / "format_sizes.py", "format_sizes")


# -- helpers --------------------------------------------------------------------------

class Symtab:
    def __init__(self, names: list[str]) -> None:
        self.names = ["", *names]

    @classmethod
    def for_object(cls, obj: CodeObject) -> Symtab:
        cg = obj.callgraph
        names = {f.name for f in obj.functions} | set(cg.external)
        names |= {n for pair in cg.direct for n in pair} | {n for n, _ in cg.indirect_sites}
        names |= {n for n, _ in cg.address_taken}
        return cls(sorted(names))

    def index(self, name: str) -> int:
        return self.names.index(name)

    def name(self, i: int) -> str:
        if not 0 <= i < len(self.names):
            raise FormatError("bad symbol index", fmt="test", value=i)
        return self.names[i]

    def __len__(self) -> int:
        return len(self.names)


def roundtrip_bytes(obj: CodeObject) -> tuple[dict[str, bytes], Symtab]:
    st_ = Symtab.for_object(obj)
    return {s.name: s.data for s in encode(obj, st_.index, len(st_))}, st_


def dec(secs: dict[str, bytes], symtab: Symtab, count: int | None = -1, **kw: object) -> CodeObject:
    return decode({k: ByteView(v) for k, v in secs.items()}, symtab.name, len(symtab) if count == -1 else count,
                  **kw)  # type: ignore[arg-type]


# -- strategies -----------------------------------------------------------------------

names_st = st.text(alphabet="abxyé_$.", min_size=1, max_size=5)
u64 = st.integers(0, (1 << 64) - 1)
small = st.integers(0, 300)
param_type = st.builds(ParamType, st.integers(0, 255), st.one_of(small, u64), st.integers(0, 63).map(lambda k: 1 << k))
prototype = st.builds(Prototype, param_type, st.lists(param_type, max_size=3).map(tuple), st.one_of(small, u64))
kernel_param = st.builds(KernelParam, st.integers(0, 255), u64, u64, st.integers(0, 63).map(lambda k: 1 << k))


def value_for(form: int) -> st.SearchStrategy[object]:
    return {
        AttrForm.UINT: st.one_of(small, u64),
        AttrForm.SINT: st.integers(-(1 << 63), (1 << 63) - 1),
        AttrForm.BYTES: st.binary(max_size=12),
        AttrForm.FLAG: st.just(True),
        AttrForm.DIM3: st.tuples(small, small, small),
        AttrForm.LIST: st.lists(st.one_of(small, u64), max_size=4).map(tuple),
    }[AttrForm(form)]


attr_ids = st.one_of(st.sampled_from([int(a) for a in StdAttr]), st.integers(0, 0x7FFF), st.integers(0, MAX_ATTR_ID))


@st.composite
def attributes(draw: st.DrawFn, n_protos: int) -> tuple[Attribute, ...]:
    ids = draw(st.lists(attr_ids, max_size=7, unique=True))
    out = []
    for i in ids:
        info = attr_info(i)
        form = info.form if info is not None and draw(st.booleans()) else draw(st.integers(0, 5))
        if i == StdAttr.PARAM_LAYOUT and form == AttrForm.BYTES:
            value: object = encode_param_layout(draw(st.lists(kernel_param, max_size=4)))
        elif i == StdAttr.PROTOTYPE and form == AttrForm.UINT:
            if not n_protos:
                continue
            value = draw(st.integers(0, n_protos - 1))
        else:
            value = draw(value_for(form))
        out.append(Attribute(i, value, form))  # type: ignore[arg-type]
    if draw(st.booleans()):  # an opaque (reserved-form) tail, with the highest id
        top = max((a.id for a in out), default=0)
        if top < MAX_ATTR_ID:
            out.append(Attribute(draw(st.integers(top + 1, min(top + 1000, MAX_ATTR_ID))), draw(st.binary(max_size=8)),
                                 draw(st.sampled_from([6, 7]))))
    return tuple(out)


meta_value = st.one_of(st.text(max_size=8), st.one_of(small, u64), st.binary(max_size=8))
targets = st.sampled_from([None, Target.parse("gfx90a:xnack-:sramecc+"), Target("nvidia", "sm_90a"),
                           Target("", "x", ("f+",), "x-y-z"), Target("amdgpu", "gfx942", (), "amdgcn-amd-amdhsa")])


@st.composite
def code_objects(draw: st.DrawFn) -> CodeObject:
    protos = tuple(draw(st.lists(prototype, max_size=3)))
    fnames = draw(st.lists(names_st, max_size=5, unique=True))
    funcs = tuple(Function(n, draw(st.one_of(st.sampled_from(list(FunctionKind)), st.integers(0, 255))),
                           draw(attributes(len(protos) + 2))) for n in fnames)
    others = draw(st.lists(names_st, max_size=3))
    pool = fnames + others or ["solo"]
    name = st.sampled_from(pool)
    cg_protos = st.one_of(st.sampled_from(protos), prototype) if protos else prototype
    cg = CallGraph(
        direct=tuple(draw(st.lists(st.tuples(name, name), max_size=6))),
        indirect_sites=tuple(draw(st.lists(st.tuples(name, cg_protos), max_size=3))),
        address_taken=tuple(draw(st.lists(st.tuples(name, cg_protos), max_size=3))),
        external=tuple(draw(st.lists(name, max_size=3))),
        unknown_blocks=tuple(draw(st.lists(st.tuples(st.sampled_from([0, 5, 6, 200, 255]), st.binary(max_size=6)),
                                           max_size=3))),
    )
    # functions may reference protos up to len(protos) + 2: make sure the table is that long
    extra = tuple(draw(st.lists(prototype, min_size=2, max_size=2)))
    md = Metadata(tuple(draw(st.dictionaries(st.text(min_size=1, max_size=6), meta_value, max_size=4)).items()))
    versions = tuple(SectionVersion(s, draw(st.integers(0, 3)), draw(st.sampled_from([0, 1, 0x8000])))
                     for s in draw(st.lists(st.sampled_from(C.SECTION_NAMES), max_size=2, unique=True)))
    return CodeObject(draw(targets), funcs, cg, md, protos + extra, versions)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- round trips ------------------------------------------------------------------------

@SETTINGS
@given(code_objects())
def test_model_roundtrip(obj: CodeObject) -> None:
    secs, symtab = roundtrip_bytes(obj)
    assert dec(secs, symtab) == obj


@SETTINGS
@given(code_objects())
def test_bytes_roundtrip_and_determinism(obj: CodeObject) -> None:
    secs, symtab = roundtrip_bytes(obj)
    again = {s.name: s.data for s in encode(dec(secs, symtab), symtab.index, len(symtab))}
    assert again == secs
    assert {s.name: s.data for s in encode(obj, symtab.index, len(symtab))} == secs
    for s in encode(obj, symtab.index, len(symtab)):
        assert s.sh_type == C.SH_TYPES[s.name] and s.links_symtab == (s.name in C.LINKS_SYMTAB)
        assert read_header(ByteView(s.data)).symtab_count == (len(symtab) if s.links_symtab else 0)


@SETTINGS
@given(code_objects())
def test_truncation_raises_only_device_binary_error(obj: CodeObject) -> None:
    secs, symtab = roundtrip_bytes(obj)
    for name, data in secs.items():
        for cut in range(len(data)):
            try:
                dec({name: data[:cut]}, symtab, None)
            except DeviceBinaryError:
                continue
            # Only the call graph (blocks run to the end of the section) may be cut at a block boundary.
            assert name == C.SEC_CALLGRAPH and cut >= C.HEADER_SIZE, (name, cut)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes, Symtab]:
    obj = draw(code_objects())
    secs, symtab = roundtrip_bytes(obj)
    assume(secs)
    name = draw(st.sampled_from(sorted(secs)))
    buf = bytearray(secs[name])
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.integers(0, 3))
        lo = 0 if draw(st.integers(0, 7)) == 7 else C.HEADER_SIZE  # mostly the body: header hits just fail
        i = draw(st.integers(min(lo, max(len(buf) - 1, 0)), max(len(buf) - 1, 0)))
        if op == 0 and buf:
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == 1 and buf:
            buf[i] = draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]))
        elif op == 2:
            buf.insert(i, draw(st.integers(0, 255)))
        elif buf:
            del buf[i]
    return name, bytes(buf), symtab


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_bytes_raise_only_device_binary_error(case: tuple[str, bytes, Symtab]) -> None:
    name, data, symtab = case
    try:
        obj = dec({name: data}, symtab, None)
    except DeviceBinaryError:
        return
    # Accepted input: the writer and reader must agree from here on.
    count = read_header(ByteView(data)).symtab_count if name in C.LINKS_SYMTAB else len(symtab)
    if count > len(symtab) + 4 * len(data):
        # A mutated header may record any symbol count (the reader does not allocate by it); the
        # re-encoding below needs a name per symbol, so a count no section of this size could use
        # is out of this round trip's reach (hypothesis found 0x83000000: 2 G names, the test's own memory).
        return
    names = Symtab(symtab.names[1:] + [f"extra{i}" for i in range(max(0, count - len(symtab)))])
    try:
        secs = {s.name: s.data for s in encode(obj, names.index, max(count, len(names)))}
    except UsageError:
        return  # e.g. a recorded count too small for the test's numbering
    assert dec(secs, names, None) == obj


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.sampled_from(C.SECTION_NAMES))
def test_arbitrary_bytes(data: bytes, name: str) -> None:
    """Any bytes decode or give a devsec FormatError naming the section, with its offset."""
    err = outcome(lambda buf: decode_section(name, ByteView(buf), lambda i: f"s{i}", None), data)
    if err is not None:
        assert_located(err, fmts={"devsec"}, size=len(data))
        assert err.where.startswith(f"section {name!r}") and err.offset is not None, err


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=48).map(lambda b: b"\x01\x00\x00\x00\x07\x00\x00\x00" + b))
def test_fuzz_target(data: bytes) -> None:
    """The fuzz target (which re-encodes whatever decodes) holds, and each section name's refusal is
    a located devsec error; the header (version 1, 7 symbols) is never what is refused."""
    fuzz_devsec.TestOneInput(data)
    for name in C.SECTION_NAMES:
        err = outcome(lambda buf, n=name: decode({n: ByteView(buf)}, lambda i: f"s{i}", None), data)
        if err is not None:
            assert_located(err, fmts={"devsec"}, size=len(data))
            assert not isinstance(err, UnsupportedVersion) and err.where.startswith(f"section {name!r}"), err


def test_fuzz_target_on_valid_sections() -> None:
    """Each example section decodes under its own name (and round-trips, in the fuzz target)."""
    sections = format_sizes.example_sections()
    assert sections
    for name, data in sections.items():
        assert outcome(lambda buf, n=name: decode({n: ByteView(buf)}, lambda i: f"s{i}", None), data) is None, name
        fuzz_devsec.TestOneInput(data)


# -- forward compatibility ------------------------------------------------------------

def _func_section(attr_bytes: bytes, kind: int = 1, symcount: int = 2, minor: int = 0, flags: int = 0) -> bytes:
    body = bytes([1, 1, kind, len(attr_bytes)]) + attr_bytes
    return bytes([1, minor]) + flags.to_bytes(2, "little") + symcount.to_bytes(4, "little") + body


SYM = Symtab(["k"])


def test_unknown_attribute_and_kind_kept() -> None:
    # id 0x7f01 (experimental) UINT 5, LIST [1, 2]: key = (id << 3) | form
    raw = uleb(0x7F01 << 3) + b"\x05" + uleb(0x7F02 << 3 | 5) + b"\x02\x01\x02"
    data = _func_section(raw, kind=9)
    obj = dec({C.SEC_FUNC: data}, SYM)
    f = obj.functions[0]
    assert f.kind == 9 and f.attr(0x7F01) == 5 and f.attr(0x7F02) == (1, 2) and f.attributes[1].name is None
    assert encode(obj, SYM.index, 2)[0].data == data


def test_reserved_form_keeps_rest_of_record() -> None:
    tail = b"\xff\xfe\x00garbage"
    raw = uleb(StdAttr.REGS_GENERAL << 3) + b"\x20" + uleb(0x40 << 3 | 6) + tail
    data = _func_section(raw)
    f = dec({C.SEC_FUNC: data}, SYM).functions[0]
    assert f.attr(StdAttr.REGS_GENERAL) == 32
    assert f.attributes[-1].form == 6 and f.attributes[-1].value == tail
    assert encode(dec({C.SEC_FUNC: data}, SYM), SYM.index, 2)[0].data == data


def test_known_id_with_other_form_kept() -> None:
    data = _func_section(uleb(StdAttr.STACK_SIZE << 3 | 2) + b"\x02hi")
    f = dec({C.SEC_FUNC: data}, SYM).functions[0]
    assert f.attributes[0].form == AttrForm.BYTES and f.attr(StdAttr.STACK_SIZE) == b"hi"
    assert encode(dec({C.SEC_FUNC: data}, SYM), SYM.index, 2)[0].data == data


def test_unknown_callgraph_block_kept_in_place() -> None:
    hdr = b"\x01\x00\x00\x00\x03\x00\x00\x00"
    data = hdr + b"\x00\x01\xaa" + b"\x01\x04\x01\x01\x01\x02" + b"\x07\x02\xbb\xcc"
    sym = Symtab(["a", "b"])
    obj = dec({C.SEC_CALLGRAPH: data}, sym)
    assert obj.callgraph.direct == (("a", "b"),)
    assert obj.callgraph.unknown_blocks == ((0, b"\xaa"), (7, b"\xbb\xcc"))
    assert encode(obj, sym.index, 3)[0].data == data


def test_minor_and_flags_preserved_and_major_refused() -> None:
    data = _func_section(uleb(StdAttr.REGS_GENERAL << 3) + b"\x08", minor=3, flags=0x8001)
    obj = dec({C.SEC_FUNC: data}, SYM)
    assert obj.section_versions == (SectionVersion(C.SEC_FUNC, 3, 0x8001),)
    assert encode(obj, SYM.index, 2)[0].data == data
    with pytest.raises(UnsupportedVersion) as ei:
        dec({C.SEC_FUNC: b"\x02" + data[1:]}, SYM)
    assert ei.value.fmt == "devsec" and ei.value.where == "section '.devbin.func'" and ei.value.offset == 0
    with pytest.raises(UnsupportedVersion):
        dec({C.SEC_META: b"\x00\x00\x00\x00\x00\x00\x00\x00\x00"}, SYM)


def test_staleness_detected() -> None:
    data = _func_section(uleb(StdAttr.REGS_GENERAL << 3) + b"\x08", symcount=2)
    assert dec({C.SEC_FUNC: data}, SYM, 2).functions[0].name == "k"
    with pytest.raises(StaleSection) as ei:
        dec({C.SEC_FUNC: data}, SYM, 5)
    assert ei.value.offset == 4 and ei.value.value == 2 and "stale" in ei.value.message
    assert dec({C.SEC_FUNC: data}, SYM, None).functions[0].name == "k"  # no count given: no check


def test_errors_are_located() -> None:
    base = 0x1000
    data = _func_section(b"\x08\x80")  # REGS_GENERAL with a cut LEB128
    view = ByteView(data, fmt="elf", where="x", base=base)
    with pytest.raises(TruncatedError) as ei:
        decode({C.SEC_FUNC: view}, SYM.name, 2)
    assert ei.value.fmt == "devsec" and ei.value.where.startswith("section '.devbin.func'")
    assert ei.value.offset is not None and base <= ei.value.offset <= base + len(data)


@pytest.mark.parametrize("body,why", [
    (b"\x02\x01\x01\x00\x01\x01\x00", "records not strictly increasing"),
    (b"\x01\x00\x01\x00", "null symbol"),
    (b"\x01\x05\x01\x00", "symbol beyond symtab_count"),
    (b"\x01\x01\x01\x04\x18\x01\x08\x01", "attribute ids not increasing"),
    (b"\x01\x01\x01\x02\x70\x00", "prototype index without a table"),
    (b"\x01\x01\x01\x03\x42\x01\x01", "bad param layout"),
    (b"\x01\x01\x01\x00\x00", "trailing bytes"),
    (b"\x05", "count larger than the data"),
])
def test_func_rejects(body: bytes, why: str) -> None:
    data = b"\x01\x00\x00\x00\x02\x00\x00\x00" + body
    with pytest.raises(FormatError):
        dec({C.SEC_FUNC: data}, SYM)


@pytest.mark.parametrize("body", [
    b"\x02\x01a\x01\x01\x01a\x01\x02",  # duplicate key
    b"\x01\x00\x01\x01",  # empty key
    b"\x01\x01a\x03\x01",  # unknown (unsized) value type
    b"\x01\x01a\x00\x01\xff",  # string not UTF-8
])
def test_meta_rejects(body: bytes) -> None:
    with pytest.raises(FormatError):
        dec({C.SEC_META: b"\x01\x00\x00\x00\x00\x00\x00\x00" + body}, SYM)


def test_symbol_lookup_errors_are_wrapped() -> None:
    data = _func_section(uleb(StdAttr.REGS_GENERAL << 3) + b"\x08", symcount=9)

    def bad(i: int) -> str:
        raise FormatError("no such symbol", fmt="elf", value=i)

    with pytest.raises(FormatError) as ei:
        decode({C.SEC_FUNC: ByteView(data)}, bad, None)
    assert ei.value.fmt == "devsec" and "no such symbol" in ei.value.message


def test_encoder_usage_errors() -> None:
    obj = CodeObject(functions=(Function("a", 1), Function("b", 1)))
    with pytest.raises(UsageError):
        encode(obj, lambda n: 1, 3)  # two functions on one symbol
    with pytest.raises(UsageError):
        encode(obj, lambda n: 5, 3)  # index beyond the table
    with pytest.raises(UsageError):
        encode(obj, lambda n: 0, 3)  # the null symbol
    with pytest.raises(UsageError):
        encode(obj, {"a": 1, "b": 2}.__getitem__, 1 << 32)
    assert encode(CodeObject(), lambda n: 1, 3) == []


def test_target_from_meta_and_fallback() -> None:
    secs, symtab = roundtrip_bytes(CodeObject(Target.parse("gfx90a:xnack+")))
    assert dec(secs, symtab, target=Target.parse("gfx942")).target == Target.parse("gfx90a:xnack+")
    assert dec({}, symtab, target=Target.parse("gfx942")).target == Target.parse("gfx942")


# -- the spec document ------------------------------------------------------------------

FORMAT_MD = ROOT / "docs" / "FORMAT.md"


def test_format_md_states_encoder_size() -> None:
    text = FORMAT_MD.read_text(encoding="utf-8")
    n = format_sizes.devbin_bytes_per_kernel()
    assert f"devbin v1 .devbin.func record: {n} bytes" in text
    assert f"**{n} bytes**" in text
    assert f"AMD msgpack kernel map:        {format_sizes.amd_bytes_per_kernel()} bytes" in text
    assert f"NVIDIA .nv.info records:       {format_sizes.nvidia_bytes_per_kernel()[0]} bytes" in text


def test_format_md_worked_example_matches_encoder() -> None:
    text = FORMAT_MD.read_text(encoding="utf-8")
    for name, data in format_sizes.example_sections().items():
        m = re.search(rf"<!-- example {re.escape(name)} -->\n```\n(.*?)```", text, re.S)
        assert m is not None, name
        hexed = "".join(re.sub(r"#.*", "", ln).split("|")[0] for ln in m.group(1).splitlines())
        assert bytes.fromhex(hexed) == data, name


@pytest.mark.parametrize("value,enc", [(0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"), (624485, b"\xe5\x8e\x26")])
def test_uleb_examples_of_the_spec(value: int, enc: bytes) -> None:
    assert uleb(value) == enc
    assert ByteView(enc).cursor().uleb() == value


@pytest.mark.parametrize("value,enc", [(-1, b"\x7f"), (63, b"\x3f"), (64, b"\xc0\x00"), (-65, b"\xbf\x7f")])
def test_sleb_examples_of_the_spec(value: int, enc: bytes) -> None:
    assert sleb(value) == enc
    assert ByteView(enc).cursor().sleb() == value
