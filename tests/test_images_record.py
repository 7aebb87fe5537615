"""The :class:`devbin.images.Image` record, its vocabulary, and the image address syntax."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devbin.errors import FormatError, UsageError
from devbin.formats.fatbin import constants as FC
from devbin.images import (
    CONTAINERS,
    KINDS,
    Address,
    BareElf,
    Entry,
    Image,
    Member,
    SectionStep,
    fatbin_kind,
    find_image,
)
from devbin.images.address import escape, unescape

# --------------------------------------------------------------------------- address


@pytest.mark.parametrize("text, address", [
    ("k.cubin", Address("k.cubin")),
    ("k.fatbin#0.2", Address("k.fatbin", (Entry(0, 2),))),
    ("libk.a!k.o@__nv_relfatbin#0.1", Address("libk.a", (Member("k.o"), SectionStep("__nv_relfatbin"), Entry(0, 1)))),
    ("torch.whl!torch/lib/libtorch_cuda.so@.nv_fatbin#12.3",
     Address("torch.whl", (Member("torch/lib/libtorch_cuda.so"), SectionStep(".nv_fatbin"), Entry(12, 3)))),
    ("pkg.offload#0.1#0.0", Address("pkg.offload", (Entry(0, 1), Entry(0, 0)))),
    ("libk.a!k.o;2", Address("libk.a", (Member("k.o", 2),))),
    ("a%21b.o!x%3By%25", Address("a!b.o", (Member("x;y%"),))),
    ("dir/k.o@__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx90a",
     Address("dir/k.o", (SectionStep("__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx90a"),))),
])
def test_address_examples(text: str, address: Address) -> None:
    assert str(address) == text
    assert Address.parse(text) == address


@pytest.mark.parametrize("bad", [
    "", "!k.o", "@.text", "#0.1", "k.o!", "k.o@", "k.o#1", "k.o#a.b", "k.o#01.1", "k.o#1.-1", "k.o!m;1",
    "k.o!m;x", "k.%zz", "k.%2", "k.o@a;b", "k\n.o", "k.o#1.2x",
])
def test_address_parse_refuses(bad: str) -> None:
    with pytest.raises(UsageError):
        Address.parse(bad)


def test_address_views() -> None:
    a = Address.parse("w.whl!lib/libk.a!k.o@__nv_relfatbin#0.1")
    assert str(a.file) == "w.whl!lib/libk.a!k.o"
    assert a.member == Member("k.o")
    assert a.section == "__nv_relfatbin"
    assert a.entry == Entry(0, 1)
    assert Address("k.fatbin").child(Entry(0, 0)) == Address.parse("k.fatbin#0.0")
    assert Address.parse("k.cubin").file == Address("k.cubin")
    assert Address.parse("k.cubin").entry is None


#: Names built mostly from the characters the syntax uses, so that every escape is exercised.
_text = st.text(alphabet=st.one_of(st.sampled_from("!@#%;.0123456789/ \n\t\x7f%2"), st.characters()), min_size=1,
                max_size=12)
_step = st.one_of(
    st.builds(Member, _text, st.integers(1, 5)),
    st.builds(SectionStep, _text),
    st.builds(Entry, st.integers(0, 10_000), st.integers(0, 10_000)),
)


@given(st.builds(Address, _text, st.lists(_step, max_size=6).map(tuple)))
def test_address_round_trip(a: Address) -> None:
    text = str(a)
    assert Address.parse(text) == a
    assert str(Address.parse(text)) == text
    assert "\n" not in text


@given(st.text())
def test_escape_round_trip(text: str) -> None:
    e = escape(text)
    assert not set(e) & set("!@#;")
    assert unescape(e) == text


# --------------------------------------------------------------------------- record


def test_kind_vocabulary() -> None:
    assert list(KINDS) == ["cubin", "ptx", "lto-ir", "amdgpu", "zebin", "bitcode", "spirv", "fatbin", "host", "data"]
    assert fatbin_kind(FC.KIND_ELF) == "cubin"
    assert fatbin_kind(FC.KIND_PTX) == "ptx"
    assert fatbin_kind(FC.KIND_LTOIR) == "lto-ir"
    assert fatbin_kind(FC.KIND_OLDCUBIN) == "data"
    assert fatbin_kind(0x99) == "data"
    assert set(CONTAINERS) == {"file", "fatbin", "offload", "bundle", "wrapped", "sycl", "oclelf"}


def _bare(data: bytes, kind: str = "cubin") -> Image:
    native = BareElf(machine=190, e_type=2, e_flags=0, osabi=0x41, abi_version=8, size=len(data),
                     view=memoryview(data))
    return Image(address=Address("k.cubin"), vendor="nvidia", kind=kind, arch="sm_90", size=len(data),
                 stored_size=len(data), compression="none", container="file", section="", offset=0,
                 metadata=(("identifier", "k.cu"), ("identifier", "second")), native=native)


def test_record_is_frozen_and_slotted() -> None:
    img = _bare(b"\x7fELF")
    with pytest.raises(dataclasses.FrozenInstanceError):
        img.kind = "ptx"  # type: ignore[misc]
    assert not hasattr(img, "__dict__")
    assert img == dataclasses.replace(img, native=None)  # the native object is not part of equality
    assert img.get("identifier") == "k.cu" and img.identifier == "k.cu"
    assert img.get("missing", "-") == "-"
    assert str(img) == "k.cubin" and img.path == "k.cubin"


def test_data_is_zero_copy_and_bounded() -> None:
    raw = bytearray(b"\x7fELF" + bytes(60))
    img = _bare(bytes(raw))
    view = img.data()
    assert isinstance(view, memoryview) and view.obj is img.native.view.obj  # type: ignore[union-attr]
    with pytest.raises(FormatError):
        img.data(max_size=10)
    with pytest.raises(FormatError):
        dataclasses.replace(img, native=None).data()


def test_code_object_only_for_code_objects(sample_cubin: Path) -> None:
    assert _bare(b"ptx", kind="ptx").code_object() is None
    obj = _bare(sample_cubin.read_bytes()).code_object()
    assert obj is not None and obj.functions


def test_find_image() -> None:
    a = _bare(b"\x7fELF")
    b = dataclasses.replace(a, address=Address.parse("libk.a!k.o"))
    assert find_image([a, b], "libk.a!k.o") is b
    assert find_image([a, b], Address("k.cubin")) is a
    with pytest.raises(UsageError, match="no device image"):
        find_image([a, b], "libk.a!k.o;2")
