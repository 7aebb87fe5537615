"""The super-archive (docs/FORMAT.md §16) against real tools.

Inputs are built at test time: per-target AMDGPU libraries (clang-19 objects of
amdgpu_kernels.cl and amdgpu_lib.cl for gfx90a/gfx1030/gfx942, plus one arch-neutral
LLVM bitcode member shared by all three) archived with ``ar rcsD``; and, for GNU ld, two
host "targets" (x86a/x86b) of gcc objects.  Oracles: ``ar t``/``ar x``, ``llvm-ar-19 t``,
``nm -s``, ``ranlib``, ``ar r``, ``gcc`` linking through the ``/`` index, ``readelf``.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import devbin.superarchive as sa
from devbin.errors import DeviceBinaryError, FormatError, NotThisFormat, UnsupportedVersion, UsageError
from devbin.formats.ar import ArchiveFile
from devbin.superarchive.build import assign_names
from devbin.superarchive.manifest import HEADER_SIZE, MANIFEST_NAME, manifest_map

from tests.conftest import AMDGPU_ARCHS, SOURCES, require_tool
from tests.runners import cli, run_tool

MEMBER_NAMES = ("kernels.o", "lib.o", "neutral.bc")


def _sha(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory, amdgpu_objects: dict[str, Path]) -> dict[str, Path]:
    """libgfx*.a per target (kernels.o, lib.o, neutral.bc) and the super-archive lib.sa built by the CLI."""
    ar = require_tool("ar")
    clang = require_tool("clang-19")
    out = tmp_path_factory.mktemp("superarchive")
    neutral = out / "neutral.bc"
    run_tool([clang, "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-emit-llvm", "-c",
              "-o", neutral, SOURCES / "amdgpu_lib.cl"], out)
    libs: dict[str, Path] = {}
    for gfx in AMDGPU_ARCHS:
        d = out / gfx
        d.mkdir()
        shutil.copy(amdgpu_objects[f"{gfx}_obj"], d / "kernels.o")
        shutil.copy(amdgpu_objects[f"{gfx}_lib_obj"], d / "lib.o")
        shutil.copy(neutral, d / "neutral.bc")
        run_tool([ar, "rcsD", out / f"lib{gfx}.a", *MEMBER_NAMES], d)
        libs[gfx] = out / f"lib{gfx}.a"
    args = ["ar", "create", "-o", str(out / "lib.sa")]
    for gfx in AMDGPU_ARCHS:
        args += ["--target", f"{gfx}={libs[gfx]}"]
    args += ["--chain", "gfx90a=gfx90a:gfx1030"]
    assert cli(*args)[0] == 0
    return {"dir": out, "sa": out / "lib.sa", **{f"lib{g}": p for g, p in libs.items()}}


def _inputs(gpu: dict[str, Path], gfx: str) -> list[bytes]:
    return [(gpu["dir"] / gfx / n).read_bytes() for n in MEMBER_NAMES]


# --------------------------------------------------------------------------- standard tools


def test_standard_tools_list_it(gpu: dict[str, Path]) -> None:
    lib = sa.open(gpu["sa"].read_bytes())
    expect = [MANIFEST_NAME] + [r.name for r in lib.records()]
    assert run_tool([require_tool("ar"), "t", gpu["sa"]], gpu["dir"]).stdout.split() == expect
    assert run_tool([require_tool("llvm-ar-19"), "t", gpu["sa"]], gpu["dir"]).stdout.split() == expect
    nm = run_tool([require_tool("nm"), "-s", gpu["sa"]], gpu["dir"], check=False)
    assert nm.returncode == 0, nm.stderr
    # 3 targets x 3 members; neutral.bc stored once; kernels.o/lib.o get disambiguated names.
    assert len(lib.records()) == 7
    assert len(set(expect)) == len(expect)
    assert lib.sharing()[next(r.ordinal for r in lib.records() if r.name == "neutral.bc")] == AMDGPU_ARCHS


@pytest.mark.parametrize("tool", ["ar", "llvm-ar-19"])
def test_ar_x_gives_back_real_objects(gpu: dict[str, Path], tmp_path: Path, tool: str) -> None:
    run_tool([require_tool(tool), "x", gpu["sa"]], tmp_path)
    inputs = {_sha(b) for gfx in AMDGPU_ARCHS for b in _inputs(gpu, gfx)}
    files = sorted(p for p in tmp_path.iterdir() if p.name != MANIFEST_NAME)
    assert len(files) == 7
    assert {_sha(p.read_bytes()) for p in files} == inputs
    for p in files:
        assert p.read_bytes()[:4] in (b"\x7fELF", b"BC\xc0\xde")
    assert (tmp_path / MANIFEST_NAME).read_bytes() == bytes(sa.open(gpu["sa"].read_bytes()).files[0].data)


def test_extract_per_target_archive(gpu: dict[str, Path], tmp_path: Path) -> None:
    for gfx in AMDGPU_ARCHS:
        out = tmp_path / f"x{gfx}.a"
        assert cli("ar", "extract", str(gpu["sa"]), "--target", gfx, "-o", str(out))[0] == 0
        assert run_tool([require_tool("ar"), "t", out], tmp_path).stdout.split() == list(MEMBER_NAMES)
        ar = ArchiveFile(out.read_bytes())
        assert [bytes(m.data) for m in ar.files] == _inputs(gpu, gfx)
        assert run_tool([require_tool("llvm-ar-19"), "t", out], tmp_path).stdout.split() == list(MEMBER_NAMES)


def test_list_symbols_and_bytes_saved(gpu: dict[str, Path]) -> None:
    code, text = cli("ar", "list", str(gpu["sa"]), "--json")
    assert code == 0
    facts = json.loads(text)
    bc = len((gpu["dir"] / "neutral.bc").read_bytes())
    assert facts["saved_bytes"] == 2 * bc
    assert facts["input_bytes"] == sum(len(b) for g in AMDGPU_ARCHS for b in _inputs(gpu, g))
    assert [t["name"] for t in facts["targets"]] == list(AMDGPU_ARCHS)
    assert facts["targets"][0]["chain"] == ["gfx90a", "gfx1030"] and facts["targets"][0]["chain_declared"]
    assert facts["targets"][1]["chain"] == ["gfx1030"] and not facts["targets"][1]["chain_declared"]
    assert facts["index_target"] == "gfx90a" and facts["index"] in ("target", "absent")
    code, text = cli("ar", "list", str(gpu["sa"]))
    assert code == 0 and "saved" in text
    lib = sa.open(gpu["sa"].read_bytes())
    code, text = cli("ar", "symbols", str(gpu["sa"]), "--target", "gfx942", "--json")
    syms = json.loads(text)["symbols"]
    assert {s["name"] for s in syms} >= {"lib_scale"}
    assert {s["name"] for s in syms} == {s.name for s in lib.symbols("gfx942")}
    for s in lib.symbols("gfx942"):
        assert s.member in MEMBER_NAMES
    assert lib.chain("gfx1030") == ("gfx1030",) and lib.declared_chain("gfx1030") == ()


def test_deterministic(gpu: dict[str, Path], tmp_path: Path) -> None:
    args = ["ar", "create", "-o", str(tmp_path / "again.sa")]
    for gfx in AMDGPU_ARCHS:
        args += ["--target", f"{gfx}={gpu['lib' + gfx]}"]
    args += ["--chain", "gfx90a=gfx90a:gfx1030"]
    assert cli(*args)[0] == 0
    assert (tmp_path / "again.sa").read_bytes() == gpu["sa"].read_bytes()


def test_create_from_loose_objects(gpu: dict[str, Path], tmp_path: Path) -> None:
    d = gpu["dir"]
    out = tmp_path / "loose.sa"
    code, _ = cli("ar", "create", "-o", str(out), "--target", f"gfx90a={d / 'gfx90a' / 'kernels.o'}",
                  str(d / "gfx90a" / "lib.o"), "--target", f"generic={d / 'neutral.bc'}", "--no-index")
    assert code == 0
    lib = sa.open(out.read_bytes())
    assert lib.targets() == ("gfx90a", "generic")
    assert lib.index_status() == "absent"
    assert [tm.name for tm in lib.members("gfx90a")] == ["kernels.o", "lib.o"]


def test_add_and_remove(gpu: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small = tmp_path / "small.sa"
    code, text = cli("ar", "remove", str(gpu["sa"]), "gfx1030", "gfx942", "-o", str(small))
    err = capsys.readouterr().err
    assert code == 0 and "note: gfx1030 removed from the chain of gfx90a" in err and "note:" not in text
    lib = sa.open(small.read_bytes())
    assert lib.targets() == ("gfx90a",)
    assert [r.name for r in lib.records()] == list(MEMBER_NAMES)  # unique again: original names
    back = tmp_path / "back.sa"
    assert cli("ar", "add", str(small), "--target", f"gfx1030={gpu['libgfx1030']}",
               "--target", f"gfx942={gpu['libgfx942']}", "-o", str(back))[0] == 0
    fresh = tmp_path / "fresh.sa"
    args = ["ar", "create", "-o", str(fresh)]
    for gfx in AMDGPU_ARCHS:
        args += ["--target", f"{gfx}={gpu['lib' + gfx]}"]
    assert cli(*args)[0] == 0
    assert back.read_bytes() == fresh.read_bytes()  # the removed chain entry stays removed
    assert cli("ar", "add", str(small), "--target", f"gfx90a={gpu['libgfx90a']}", "-o", str(back))[0] == 1
    assert cli("ar", "remove", str(small), "gfx90a", "-o", str(small))[0] == 1  # refuses to overwrite its input


# --------------------------------------------------------------------------- staleness


def test_ranlib_keeps_it_readable(gpu: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "ranlib.sa"
    shutil.copy(gpu["sa"], copy)
    before = [r.sha256 for r in sa.open(copy.read_bytes()).records()]
    run_tool([require_tool("ranlib"), copy], tmp_path)
    lib = sa.open(copy.read_bytes())
    assert [r.sha256 for r in lib.records()] == before
    run_tool([require_tool("ar"), "s", copy], tmp_path)
    assert sa.open(copy.read_bytes()).targets() == AMDGPU_ARCHS


def test_replaced_member_is_refused(gpu: dict[str, Path], tmp_path: Path) -> None:
    ar = require_tool("ar")
    copy = tmp_path / "replaced.sa"
    shutil.copy(gpu["sa"], copy)
    run_tool([ar, "x", copy, "neutral.bc"], tmp_path)
    data = bytearray((tmp_path / "neutral.bc").read_bytes())
    data[-1] ^= 0xFF  # same size, other content: only the hash can tell
    (tmp_path / "neutral.bc").write_bytes(bytes(data))
    run_tool([ar, "r", copy, "neutral.bc"], tmp_path)
    with pytest.raises(sa.StaleManifest, match="stale manifest"):
        sa.open(copy.read_bytes())
    lazy = sa.open(copy.read_bytes(), verify="lazy")  # structure still matches; the hash check waits
    with pytest.raises(sa.StaleManifest):
        lazy.member_data(next(r.ordinal for r in lazy.records() if r.name == "neutral.bc"))
    code, _ = cli("ar", "list", str(copy))
    assert code == 1
    # A member deleted: ordinals no longer line up.
    run_tool([ar, "d", copy, "lib.o"], tmp_path, check=False)
    run_tool([ar, "d", copy, "neutral.bc"], tmp_path)
    with pytest.raises(sa.StaleManifest):
        sa.open(copy.read_bytes())


# --------------------------------------------------------------------------- memory


def test_open_from_bytes_memoryview_mmap_without_copies(gpu: dict[str, Path]) -> None:
    raw = gpu["sa"].read_bytes()
    lib = sa.open(raw)
    for r in lib.records():
        assert lib.member_data(r.ordinal).obj is raw
    mv = memoryview(raw)
    assert sa.open(mv).member_data(1).obj is raw
    with gpu["sa"].open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        lib = sa.open(mm)
        data = lib.member_data(1)
        assert data.obj is mm
        assert _sha(data) == lib.record(1).sha256.hex()
        del data, lib


def test_embed_in_shared_library(gpu: dict[str, Path], tmp_path: Path) -> None:
    gcc = require_tool("gcc")
    (tmp_path / "rt.c").write_text("int runtime_entry(int x) { return x * 2; }\n")
    run_tool([gcc, "-shared", "-fPIC", "-O2", "-o", tmp_path / "librt.so", tmp_path / "rt.c"], tmp_path)
    out = tmp_path / "librt.sa.so"
    assert cli("ar", "embed", str(gpu["sa"]), "--into", str(tmp_path / "librt.so"), "-o", str(out))[0] == 0
    sections = run_tool([require_tool("readelf"), "-S", "-W", out], tmp_path).stdout
    assert ".devbin.superarchive" in sections
    run_tool([require_tool("nm"), "-D", out], tmp_path)
    code, text = cli("ar", "list", str(out), "--json")
    assert code == 0
    facts = json.loads(text)
    assert facts["embedded"] and [t["name"] for t in facts["targets"]] == list(AMDGPU_ARCHS)
    raw = out.read_bytes()
    lib = sa.open(raw)
    assert lib.member_data(1).obj is raw
    assert bytes(lib.member_data(1)) == bytes(sa.open(gpu["sa"].read_bytes()).member_data(1))
    code, _ = cli("ar", "list", str(tmp_path / "librt.so"))
    assert code == 1  # nothing embedded: a one-line error


# --------------------------------------------------------------------------- GNU ld through the index

HOST_VARIANTS = {
    "x86a": "int sa_variant(void) { return 11; }\nint sa_only_a(void) { return 1; }\n",
    "x86b": "int sa_variant(void) { return 22; }\nint sa_only_b(void) { return 2; }\n",
}
HOST_COMMON = "int sa_common(int x) { return x + 100; }\n"
HOST_MAIN = ('#include <stdio.h>\nint sa_variant(void);\nint sa_common(int);\n'
             'int main(void) { printf("%d %d\\n", sa_variant(), sa_common(1)); return 0; }\n')


@pytest.mark.parametrize("index_target, expect", [("x86a", "11 101"), ("x86b", "22 101")])
def test_gnu_ld_links_the_index_target(tmp_path: Path, index_target: str, expect: str) -> None:
    gcc = require_tool("gcc")
    ar = require_tool("ar")
    (tmp_path / "common.c").write_text(HOST_COMMON)
    (tmp_path / "main.c").write_text(HOST_MAIN)
    run_tool([gcc, "-O2", "-c", "common.c", "main.c"], tmp_path)
    args = ["ar", "create", "-o", str(tmp_path / "libhost.sa"), "--index-target", index_target]
    for t, text in HOST_VARIANTS.items():
        d = tmp_path / t
        d.mkdir()
        (d / "variant.c").write_text(text)
        run_tool([gcc, "-O2", "-c", "variant.c"], d)
        shutil.copy(tmp_path / "common.o", d / "common.o")
        run_tool([ar, "rcsD", f"lib{t}.a", "variant.o", "common.o"], d)
        args += ["--target", f"{t}={d / f'lib{t}.a'}"]
    assert cli(*args)[0] == 0
    lib = sa.open((tmp_path / "libhost.sa").read_bytes())
    assert lib.index_status() == "target"
    assert len(lib.records()) == 3
    nm = run_tool([require_tool("nm"), "-s", tmp_path / "libhost.sa"], tmp_path).stdout
    assert f"sa_only_{index_target[-1]} in" in nm and "sa_only_" + ("b" if index_target == "x86a" else "a") + " in" \
        not in nm.split("\n\n")[0]
    run_tool([gcc, "-o", "prog", "main.o", "libhost.sa"], tmp_path)
    assert run_tool([tmp_path / "prog"], tmp_path).stdout.strip() == expect


# --------------------------------------------------------------------------- codec and crafted input


def test_assign_names_rule() -> None:
    h = [bytes([i]) * 32 for i in range(5)]
    names = assign_names([(h[0], "k.o", "gfx90a"), (h[1], "k.o", "gfx942"), (h[2], "x.bc", "gfx90a"),
                          (h[3], "k.gfx90a.o", "gfx1030"), (h[4], "../evil", "t:xnack+")])
    assert names[2] == "x.bc"
    assert names[3] == "k.gfx90a.o"  # kept: it is the first name of one content only
    assert names[0] == f"k.{h[0].hex()[:12]}.o"  # k.gfx90a.o was taken
    assert names[1] == "k.gfx942.o"
    assert "/" not in names[4] and len(set(names)) == 5


def _manifest_strategy() -> st.SearchStrategy[sa.Manifest]:
    text = st.text(max_size=12)
    extra = st.dictionaries(st.text(min_size=1, max_size=6).map(lambda s: "x_" + s),
                            st.one_of(st.integers(-5, 1 << 40), text, st.binary(max_size=8), st.none(),
                                      st.lists(st.integers(0, 9), max_size=3)), max_size=2)

    @st.composite
    def build(draw: st.DrawFn) -> sa.Manifest:
        n = draw(st.integers(0, 4))
        members = tuple(
            sa.MemberRecord(i + 1, draw(text), draw(st.integers(0, 1 << 33)), draw(st.binary(min_size=32,
                                                                                                max_size=32)),
                            sa.Storage(draw(st.sampled_from(["plain", "packed"])), draw(extra)), draw(extra))
            for i in range(n)
        )
        names = draw(st.lists(st.text(min_size=1, max_size=10), unique=True, max_size=3))
        targets = []
        for name in names:
            tms = tuple(sa.TargetMember(draw(st.integers(1, n)), draw(text)) for _ in range(draw(st.integers(0, 3)))) \
                if n else ()
            syms = tuple((draw(text), draw(st.integers(0, len(tms) - 1))) for _ in range(draw(st.integers(0, 3)))) \
                if tms else ()
            targets.append(sa.TargetRecord(name, tuple(draw(st.lists(text, max_size=3))), tms, syms, draw(extra)))
        index = draw(st.sampled_from([None, *names]))
        return sa.Manifest(tuple(targets), members, index, draw(st.integers(0, 0xFFFF)), extra=draw(extra))

    return build()


@settings(max_examples=150, deadline=None)
@given(_manifest_strategy())
def test_manifest_round_trip(m: sa.Manifest) -> None:
    data = sa.encode_manifest(m)
    back = sa.decode_manifest(data)
    assert back == m
    assert sa.encode_manifest(back) == data


def test_crafted_and_truncated_manifests(gpu: dict[str, Path]) -> None:
    raw = gpu["sa"].read_bytes()
    lib = sa.open(raw)
    manifest = bytes(lib.files[0].data)
    for cut in (0, 4, 8, 20, HEADER_SIZE, HEADER_SIZE + 1, len(manifest) - 1):
        with pytest.raises(DeviceBinaryError):
            sa.decode_manifest(manifest[:cut])
    with pytest.raises(NotThisFormat):
        sa.decode_manifest(b"NOTSA___" + manifest[8:])
    with pytest.raises(UnsupportedVersion):
        sa.decode_manifest(manifest[:8] + b"\x03\x00" + manifest[10:])
    flipped = bytearray(manifest)
    flipped[-3] ^= 1
    with pytest.raises(FormatError, match="checksum"):
        sa.decode_manifest(bytes(flipped))
    # A well-formed header around bad bodies: every shape error is a FormatError.
    import msgpack  # type: ignore[import-untyped]

    good = msgpack.unpackb(manifest_map(manifest), raw=False)
    bad_bodies = [b"\xc1", b"\x92\x01", msgpack.packb([1, 2]), msgpack.packb({"targets": []}),
                  msgpack.packb({**good, "members": [{"ordinal": 5}]}),
                  msgpack.packb({**good, "index_target": "nope"}),
                  msgpack.packb({**good, "targets": [{**good["targets"][0], "members": [[99, "x"]]}]}),
                  msgpack.packb({**good, "targets": [{**good["targets"][0], "symbols": [["s", 1000]]}]}),
                  msgpack.packb({**good, "members": [{**good["members"][0], "sha256": b"short"}]}),
                  msgpack.packb({**good, "members": [{**good["members"][0], "size": -1}]}),
                  msgpack.packb({**good, b"bytes-key": 1}, use_bin_type=True)]
    for body in bad_bodies:
        head = b"DEVBINSA" + (1).to_bytes(2, "little") + bytes(2) + len(body).to_bytes(4, "little")
        with pytest.raises(FormatError):
            sa.decode_manifest(head + hashlib.sha256(body).digest() + body)
    # Unknown keys are kept, and an unknown storage kind is listed but not read.
    body = msgpack.packb({**good, "x_future": [1, 2],
                          "members": [{**good["members"][0], "storage": {"kind": "packed", "level": 3}},
                                      *good["members"][1:]]}, use_bin_type=True)
    head = b"DEVBINSA" + (1).to_bytes(2, "little") + bytes(2) + len(body).to_bytes(4, "little")
    m = sa.decode_manifest(head + hashlib.sha256(body).digest() + body)
    assert m.extra == {"x_future": [1, 2]} and m.members[0].storage == sa.Storage("packed", {"level": 3})


def test_not_a_superarchive(gpu: dict[str, Path]) -> None:
    with pytest.raises(NotThisFormat):
        sa.open(gpu["libgfx90a"].read_bytes())
    assert not sa.is_superarchive(gpu["libgfx90a"].read_bytes())
    assert sa.is_superarchive(gpu["sa"].read_bytes())
    with pytest.raises(UsageError):
        sa.open(gpu["sa"].read_bytes()).symbols("sm_90")
    with pytest.raises(UsageError):
        sa.open(gpu["sa"].read_bytes()).member_data(0)
    raw = gpu["sa"].read_bytes()
    for cut in (8, 70, len(raw) // 2, len(raw) - 1):
        with pytest.raises(DeviceBinaryError):
            sa.open(raw[:cut])
    code, _ = cli("ar", "list", str(gpu["libgfx90a"]))
    assert code == 1


def test_manifest_versions_1_and_2(gpu: dict[str, Path]) -> None:
    """Version 2 (written) compresses the MessagePack map; version 1 (plain map) is still read."""
    import dataclasses
    import struct

    manifest = bytes(sa.open(gpu["sa"].read_bytes()).files[0].data)
    m = sa.decode_manifest(manifest)
    assert m.version == 2 and int.from_bytes(manifest[8:10], "little") == 2
    v1 = sa.encode_manifest(dataclasses.replace(m, version=1))
    assert sa.decode_manifest(v1) == dataclasses.replace(m, version=1)
    assert len(manifest) < len(v1) and manifest_map(manifest) == manifest_map(v1)

    def v2(body: bytes) -> bytes:
        head = b"DEVBINSA" + (2).to_bytes(2, "little") + bytes(2) + len(body).to_bytes(4, "little")
        return head + hashlib.sha256(body).digest() + body

    frame = manifest[HEADER_SIZE + 4:]
    size = struct.unpack("<I", manifest[HEADER_SIZE:HEADER_SIZE + 4])[0]
    for body, message in ((struct.pack("<I", 1 << 31) + frame, "over the"),
                          (struct.pack("<I", size + 1) + frame, "decodes to"),
                          (struct.pack("<I", size) + frame[: len(frame) // 2], None),
                          (b"\x01\x00", None)):
        with pytest.raises(FormatError, match=message):
            sa.decode_manifest(v2(body))
