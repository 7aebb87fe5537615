"""Packed super-archive storage (docs/FORMAT.md §16.6): zstd frames, sub-member dedup, deltas.

Real inputs are cubins of tests/sources/kernels.cu and extfn.cu built at test time with nvcc
(``-cubin -rdc=true``) for sm_80, sm_86, sm_89 and sm_90 (sm_86 and sm_89 have identical
``.text`` sections, shared/reference/archives.md §4.2); oracles are ``ar t``/``ar x`` and the
input bytes themselves.  Synthetic inputs are ELF objects from tests/elfbuild.py and random
bytes (hypothesis).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from pathlib import Path

import msgpack  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import devbin.superarchive as sa
from devbin.binary.writer import uleb
from devbin.errors import FormatError, UsageError
from devbin.formats.ar import ArchiveFile
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.formats.elf import constants as C
from devbin.formats.elf.model import SectionSpec, SymbolSpec
from devbin.formats.elf.reader import ElfFile
from devbin.formats.elf.writer import write
from devbin.superarchive.manifest import MANIFEST_NAME, manifest_map
from devbin.superarchive.packed import MAX_CLOSURE, MAX_DEPTH, PackedReader, chunk_content

from tests.conftest import SOURCES, cubins_from_ptx, require_tool
from tests.elfbuild import small_model
from tests.expect import assert_located, outcome
from tests.runners import cli, run_tool

ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")


@pytest.fixture(scope="module")
def cubin_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """lib<arch>.a (kernels.o, extfn.o: relocatable cubins) for each arch in ARCHS."""
    out = tmp_path_factory.mktemp("packed")
    ar = require_tool("ar")
    if cubins_from_ptx():
        ptxas = require_tool("ptxas")
        builds = {a: [[ptxas, f"-arch={a}", "-c", "-o", out / a / "kernels.o", SOURCES / "ptx" / "kernels.sm_80.ptx"],
                      [ptxas, f"-arch={a}", "-c", "-o", out / a / "extfn.o", SOURCES / "ptx" / "extfn.sm_80.ptx"]]
                  for a in ARCHS}
    else:
        nvcc = require_tool("nvcc")
        builds = {a: [[nvcc, f"-arch={a}", "-cubin", "-rdc=true", "-o", out / a / f"{s}.o", SOURCES / f"{s}.cu"]
                      for s in ("kernels", "extfn")] for a in ARCHS}
    libs: dict[str, Path] = {}
    for a, cmds in builds.items():
        (out / a).mkdir()
        for c in cmds:
            run_tool(list(c), out)
        run_tool([ar, "rcsD", out / f"lib{a}.a", "kernels.o", "extfn.o"], out / a)
        libs[a] = out / f"lib{a}.a"
    return libs


def _targets(libs: dict[str, Path]) -> list[sa.TargetInput]:
    return [sa.TargetInput(a, sa.members_from_archive(libs[a].read_bytes())) for a in ARCHS]


def _decoded_everything(lib: sa.SuperArchive, targets: list[sa.TargetInput]) -> None:
    for t in targets:
        for m, tm in zip(t.members, lib.members(t.name), strict=True):
            assert bytes(lib.member_data(tm.ordinal)) == m.data


# --------------------------------------------------------------------------- real cubins


def test_packed_cubins_members_against_sibling_members(cubin_libs: dict[str, Path]) -> None:
    """Layout 2 (the default): one frame per member, bases = ancestors among the same-named members."""
    targets = _targets(cubin_libs)
    packed = sa.create(targets, storage="packed")
    lib = sa.open(packed)
    assert all(r.storage.kind == "packed" for r in lib.records())
    _decoded_everything(lib, targets)
    sections = sa.open(sa.create(targets, storage="packed", layout=1))
    assert lib.stored_bytes < sections.stored_bytes  # whole-member deltas beat per-section frames
    family = {tm.ordinal: tm.name for t in lib.manifest.targets for tm in t.members}
    with_deps = 0
    for r in lib.records():
        blob = bytes(lib.stored_data(r.ordinal))
        assert blob[0] == 2  # layout version
        deps = r.storage.params["deps"]
        assert len(deps) <= 3 and all(family[d] == family[r.ordinal] for d in deps)
        with_deps += bool(deps)
        # Reading a member on its own decodes only it and its deps (each other member's bytes untouched).
        fresh = sa.open(packed, verify="lazy")
        touched: list[int] = []
        original = fresh._stored_view
        fresh._stored_view = lambda o, t=touched, f=original: (t.append(o), f(o))[1]  # type: ignore[method-assign]
        assert hashlib.sha256(fresh.member_data(r.ordinal)).digest() == r.storage.params["content_sha256"]
        assert set(touched) == {r.ordinal, *deps}
    assert with_deps >= len(lib.records()) - 4  # at most one root per family and no more than needed
    # max_depth bounds the chains; max_depth=1 is a star around one member per family.
    star = sa.open(sa.create(targets, storage="packed", max_depth=1))
    _decoded_everything(star, targets)
    assert all(len(r.storage.params["deps"]) <= 1 for r in star.records())


def test_packed_cubins_round_trip_and_share_sections(cubin_libs: dict[str, Path]) -> None:
    """Layout 1: per-section frames, identical sections stored once."""
    targets = _targets(cubin_libs)
    plain = sa.create(targets)
    packed = sa.create(targets, storage="packed", layout=1, max_depth=2)
    assert len(packed) < len(plain) // 3
    lib = sa.open(packed)
    assert lib.index_target is None and lib.index_status() == "absent"
    assert all(r.storage.kind == "packed" for r in lib.records())
    assert lib.input_bytes == sa.open(plain).input_bytes
    assert lib.stored_bytes == sum(r.size for r in lib.records()) < lib.input_bytes // 3
    _decoded_everything(lib, targets)
    # sm_89's .text sections equal sm_86's: stored once, sm_89's layout refers to sm_86's member.
    by_name = {(t.name, m.name): m.data for t in targets for m in t.members}
    k86 = dict(chunk_content(by_name[("sm_86", "kernels.o")]))
    k89 = dict(chunk_content(by_name[("sm_89", "kernels.o")]))
    same = [n for n in k89 if n.startswith(".text.") and k89[n] == k86.get(n)]
    assert same, "expected identical .text sections between sm_86 and sm_89"
    o86 = lib.members("sm_86")[0].ordinal
    o89 = lib.members("sm_89")[0].ordinal
    assert o86 in lib.record(o89).storage.params["deps"]
    # Each member reads on its own, from a fresh open, in any order (lazy verify hashes only what is used).
    for o in (o89, 1, len(lib.records())):
        fresh = sa.open(packed, verify="lazy")
        assert hashlib.sha256(fresh.member_data(o)).digest() == fresh.record(o).storage.params["content_sha256"]


def test_cli_create_packed_list_and_extract(cubin_libs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "lib.sa"
    args = ["ar", "create", "-o", str(out), "--storage", "packed"]
    for a in ARCHS:
        args += ["--target", f"{a}={cubin_libs[a]}"]
    assert cli(*args)[0] == 0
    assert cli(*args[:-2], "--index-target", "sm_80", "--target", f"sm_90={cubin_libs['sm_90']}")[0] == 1
    code, text = cli("ar", "list", str(out), "--json")
    assert code == 0
    facts = json.loads(text)
    assert {m["storage"] for m in facts["members"]} == {"packed"}
    assert facts["stored_bytes"] == sum(m["size"] for m in facts["members"])
    assert facts["input_bytes"] == sum(len(m.data) for t in _targets(cubin_libs) for m in t.members)
    assert facts["saved_bytes"] > facts["input_bytes"] // 2
    assert cli("ar", "list", str(out))[0] == 0
    for a in ARCHS:
        x = tmp_path / f"x{a}.a"
        assert cli("ar", "extract", str(out), "--target", a, "-o", str(x))[0] == 0
        want = [bytes(m.data) for m in ArchiveFile(cubin_libs[a].read_bytes()).files]
        assert [bytes(m.data) for m in ArchiveFile(x.read_bytes()).files] == want
    # ar t lists it; ar x gives blobs (the stored frames), one file per unique member.
    names = run_tool([require_tool("ar"), "t", out], tmp_path).stdout.split()
    assert names[0] == MANIFEST_NAME and len(names) == 1 + 2 * len(ARCHS)
    # Plain and no-delta variants decode to the same content.
    nodelta = tmp_path / "nodelta.sa"
    assert cli(*[x if x != str(out) else str(nodelta) for x in args], "--no-delta", "--level", "3")[0] == 0
    a, b = sa.open(out.read_bytes()), sa.open(nodelta.read_bytes())
    assert all(bytes(a.member_data(r.ordinal)) == bytes(b.member_data(r.ordinal)) for r in a.records())
    assert all(r.storage.params["deps"] == [] for r in b.records())
    sections = tmp_path / "sections.sa"
    assert cli(*[x if x != str(out) else str(sections) for x in args], "--layout", "sections",
               "--max-depth", "2")[0] == 0
    c = sa.open(sections.read_bytes())
    assert all(bytes(c.stored_data(r.ordinal))[0] == 1 for r in c.records())
    assert all(bytes(a.member_data(r.ordinal)) == bytes(c.member_data(r.ordinal)) for r in a.records())
    # list shows stored and decoded sizes of packed members
    assert all(m["content_size"] == len(a.member_data(m["ordinal"])) > m["size"] for m in facts["members"])
    text = cli("ar", "list", str(out))[1]
    first = a.records()[0]
    assert re.search(rf" {first.size} +-> +{len(a.member_data(first.ordinal))} +packed ", text), text
    # add and remove keep packed storage (unless --storage says otherwise)
    added = tmp_path / "added.sa"
    assert cli("ar", "remove", str(out), "sm_90", "-o", str(tmp_path / "removed.sa"))[0] == 0
    assert cli("ar", "add", str(tmp_path / "removed.sa"), "--target", f"sm_90={cubin_libs['sm_90']}",
               "-o", str(added))[0] == 0
    for f in (tmp_path / "removed.sa", added):
        lib = sa.open(f.read_bytes())
        assert {r.storage.kind for r in lib.records()} == {"packed"} and lib.index_target is None
    assert sa.open(added.read_bytes()).to_targets() == sa.open(out.read_bytes()).to_targets()
    plain = tmp_path / "plain.sa"
    assert cli("ar", "remove", str(out), "sm_90", "-o", str(plain), "--storage", "plain")[0] == 0
    lib = sa.open(plain.read_bytes())
    assert {r.storage.kind for r in lib.records()} == {"plain"} and lib.index_target == "sm_80"


# --------------------------------------------------------------------------- properties


def _elf(symbol: str, text: bytes, extra: bytes) -> bytes:
    """A small x86-64 ET_REL with ``.text`` = ``text``, ``.data`` = ``extra`` and global ``symbol``."""
    model = small_model()
    model.relocations = {}
    model.sections = [SectionSpec(".text", flags=C.SHF_ALLOC | C.SHF_EXECINSTR, data=text, align=16),
                      SectionSpec(".data", flags=C.SHF_ALLOC | C.SHF_WRITE, data=extra, align=4)]
    model.symbols = [SymbolSpec(symbol, 0, len(text), type=C.STT_FUNC, section=".text")]
    return write(model)


member_bytes = st.one_of(st.binary(max_size=300), st.sampled_from([b"", b"\x7fELF", b"\x7fELF" + bytes(60)]))


@st.composite
def _target_sets(draw: st.DrawFn) -> list[sa.TargetInput]:
    names = draw(st.lists(st.sampled_from(["a.o", "b.o", "c.bc", "d"]), min_size=1, max_size=3, unique=True))
    shared = draw(member_bytes)
    out = []
    for i in range(draw(st.integers(1, 4))):
        members = []
        for n in names:
            data = draw(st.one_of(member_bytes, st.just(shared),
                                  st.builds(lambda t, x: t + shared + x, member_bytes, member_bytes)))
            members.append(sa.InputMember(n, data))
        out.append(sa.TargetInput(f"t{i}", tuple(members)))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_target_sets(), st.sampled_from([1, 19]), st.booleans(), st.integers(1, 3), st.sampled_from([1, 2]))
def test_plain_and_packed_decode_alike(targets: list[sa.TargetInput], level: int, delta: bool, depth: int,
                                       layout: int) -> None:
    plain = sa.open(sa.create(targets))
    packed_bytes = sa.create(targets, storage="packed", level=level, delta=delta, max_depth=depth, layout=layout)
    packed = sa.open(packed_bytes)
    assert [r.name for r in plain.records()] == [r.name for r in packed.records()]
    for r in plain.records():
        one = sa.open(packed_bytes, verify="lazy")  # each member on its own
        assert bytes(one.member_data(r.ordinal)) == bytes(plain.member_data(r.ordinal))
    assert packed.input_bytes == plain.input_bytes
    assert sa.create(targets, storage="packed", level=level, delta=delta, max_depth=depth,
                     layout=layout) == packed_bytes
    for r in packed.records():
        assert len(r.storage.params["deps"]) <= (depth if layout == 2 else r.ordinal)


def test_chunks_cover_elf_sections() -> None:
    data = _elf("f", b"\x90" * 100, b"xyz" * 9)
    chunks = chunk_content(data)
    assert b"".join(c for _, c in chunks) == data
    names = [n for n, _ in chunks]
    assert names[0] == "<head>" and ".text" in names and ".data" in names and "<shdrs>" in names
    elf = ElfFile(data)
    sec = elf.section(".text")
    assert sec is not None and dict(chunks)[".text"] == bytes(sec.data)
    assert chunk_content(b"not elf") == [("<all>", b"not elf")]
    assert chunk_content(b"\x7fELF broken") == [("<all>", b"\x7fELF broken")]


def test_identical_sections_of_synthetic_objects_stored_once() -> None:
    text = bytes(range(256)) * 8
    targets = [sa.TargetInput(f"g{i}", (sa.InputMember("k.o", _elf("k", text, bytes([i]) * 40)),)) for i in range(5)]
    lib = sa.open(sa.create(targets, storage="packed", delta=False, layout=1))
    assert lib.stored_bytes < len(text)  # five copies of .text, stored (compressed) once
    _decoded_everything(lib, targets)
    whole = sa.open(sa.create(targets, storage="packed"))  # layout 2: four members are deltas of a fifth
    assert whole.stored_bytes < len(text) and sum(bool(r.storage.params["deps"]) for r in whole.records()) == 4
    _decoded_everything(whole, targets)
    with pytest.raises(UsageError, match="layout"):
        sa.create(targets, storage="packed", layout=3)
    assert sa.create(targets, storage="packed", index=False) == sa.create(targets, storage="packed")
    with pytest.raises(UsageError, match="no '/' index"):
        sa.create(targets, storage="packed", index=True)
    with pytest.raises(UsageError, match="level"):
        sa.create(targets, storage="packed", level=0)
    with pytest.raises(UsageError, match="storage"):
        sa.create(targets, storage="zip")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- crafted archives


def _base(layout: int = 2) -> tuple[list[sa.TargetInput], bytes]:
    text = bytes(range(200)) * 4
    targets = [sa.TargetInput(f"g{i}", (sa.InputMember("k.o", _elf("k", text[i:] + text[:i], b"d" * (i + 9))),
                                        sa.InputMember("n.bin", b"neutral" * 30)))
               for i in range(3)]
    return targets, sa.create(targets, storage="packed", layout=layout)


def _rebuild(data: bytes, body_edit: object = None, stored: dict[int, bytes] | None = None) -> bytes:
    """The archive with its manifest body changed by ``body_edit(body)`` and members replaced (hashes fixed)."""
    lib = sa.open(data, verify="lazy")
    body = msgpack.unpackb(manifest_map(bytes(lib.files[0].data)), raw=False)
    members = [bytes(m.data) for m in lib.files[1:]]
    for o, blob in (stored or {}).items():
        members[o - 1] = blob
        body["members"][o - 1]["size"] = len(blob)
        body["members"][o - 1]["sha256"] = hashlib.sha256(blob).digest()
    if callable(body_edit):
        body_edit(body)
    raw = msgpack.packb(body, use_bin_type=True)
    head = b"DEVBINSA" + (1).to_bytes(2, "little") + bytes(2) + len(raw).to_bytes(4, "little")
    manifest = head + hashlib.sha256(raw).digest() + raw
    return write_archive([ArMember(MANIFEST_NAME, manifest, ()),
                          *(ArMember(m.name, b, ()) for m, b in zip(lib.files[1:], members, strict=True))])


def _read_all(data: bytes) -> None:
    lib = sa.open(data, verify="lazy")
    for r in lib.records():
        bytes(lib.member_data(r.ordinal))


def _frame_table(frames: list[tuple[int, int, int, list[tuple[int, int]]]], layout: list[tuple[int, int]],
                 payload: bytes, version: int = 1) -> bytes:
    out = uleb(version) + uleb(len(frames))
    for kind, stored, size, bases in frames:
        out += uleb(kind) + uleb(stored) + uleb(size)
        if kind == 2:
            out += uleb(len(bases)) + b"".join(uleb(o) + uleb(f) for o, f in bases)
    out += uleb(len(layout)) + b"".join(uleb(o) + uleb(f) for o, f in layout)
    return out + payload


def test_crafted_manifests_and_tables_give_format_errors() -> None:
    targets, data = _base(layout=1)  # the crafted layout-1 tables below refer to member [1]'s frames
    _read_all(_rebuild(data))  # the rebuild itself is faithful
    last = len(sa.open(data).records())

    def storage(o: int, **kv: object) -> object:
        def edit(body: dict[str, object]) -> None:
            st_ = body["members"][o - 1]["storage"]  # type: ignore[index]
            for k, v in kv.items():
                if v is None:
                    st_.pop(k, None)
                else:
                    st_[k] = v
        return edit

    content = b"hello world, hello"
    sha = hashlib.sha256(content).digest()
    bad_params = [
        (storage(1, content_size=-1), "content_size"),
        (storage(1, content_size=1 << 40), "content_size"),
        (storage(1, content_size=None), "content_size"),
        (storage(1, content_sha256=b"short"), "content_sha256"),
        (storage(2, deps=[5]), "deps"),
        (storage(2, deps="x"), "deps"),
        (storage(1, content_size=3), "layout adds up|content_size says|raw member holds"),
        (storage(1, content_sha256=bytes(32)), "content_sha256"),
    ]
    for edit, message in bad_params:
        with pytest.raises(FormatError, match=message):
            _read_all(_rebuild(data, edit))

    def with_member(blob: bytes, size: int = len(content)) -> bytes:
        return _rebuild(data, storage(last, content_size=size, content_sha256=sha, deps=[1]), {last: blob})

    raw = _frame_table([(0, len(content), len(content), [])], [(0, 0)], content)
    good = with_member(raw)
    lib = sa.open(good)
    assert bytes(lib.member_data(last)) == content
    z = __import__("zstandard")
    zframe = z.ZstdCompressor(compression_params=z.ZstdCompressionParameters.from_level(
        3, format=z.FORMAT_ZSTD1_MAGICLESS)).compress(content)
    crafted: list[tuple[bytes, str] | tuple[bytes, str, int]] = [
        (_frame_table([(0, len(content), len(content), [])], [(0, 0)], content, version=3), "layout version"),
        (_frame_table([(7, len(content), len(content), [])], [(0, 0)], content), "unknown kind"),
        (_frame_table([(0, 5, len(content), [])], [(0, 0)], content), "does not fit"),
        (_frame_table([(0, len(content), len(content), [])], [(0, 1)], content), "does not exist"),
        (_frame_table([(0, len(content), len(content), [])], [(9, 0)], content), "deps"),
        (_frame_table([(0, len(content), len(content), [])], [(1, 999)], content), "no frame 999"),
        (_frame_table([(0, len(content), len(content), [])], [(0, 0)], content + b"x"), "after the last frame"),
        (_frame_table([(0, len(content) + 4, len(content) + 4, [])], [(0, 0)], content), "run past"),
        (_frame_table([(2, len(zframe), len(content), [(0, 0)])], [(0, 0)], zframe), "does not exist"),
        (_frame_table([(2, len(zframe), len(content), [])], [(0, 0)], zframe), "base count"),
        (_frame_table([(1, len(zframe), len(content) - 1, [])], [(0, 0)], zframe), "decodes to more than", -1),
        (_frame_table([(1, len(zframe), len(content) + 1, [])], [(0, 0)], zframe), "decodes to 18 bytes", 1),
        (_frame_table([(1, 4, len(content), [])], [(0, 0)], b"\x00\x01\x02\x03"), "zstd|decodes to 0"),
        (_frame_table([(1, len(zframe), 1 << 31, [])], [(0, 0)], zframe), "cap|content_size"),
        (b"\x01\xff\xff\xff\xff\x0f", "frame count"),
        (b"", "ULEB|past"),
    ]
    for blob, message, *delta in crafted:
        with pytest.raises(FormatError, match=message):
            _read_all(with_member(blob, len(content) + (delta[0] if delta else 0)))
    ok = _frame_table([(1, len(zframe), len(content), [])], [(0, 0)], zframe)
    assert bytes(sa.open(with_member(ok)).member_data(last)) == content
    # A delta chain deeper than any writer makes is refused; a reference to a plain member too.
    for layout in (1, 2):
        packed = sa.create(targets, storage="packed", layout=layout)
        dep = next(r.storage.params["deps"][0] for r in sa.open(packed).records() if r.storage.params["deps"])
        with pytest.raises(FormatError, match="not packed"):
            _read_all(_rebuild(packed, lambda b, d=dep: b["members"][d - 1].update(storage={"kind": "plain"})))
    assert MAX_DEPTH >= 2


def test_delta_depth_cap_on_read() -> None:
    content = b"abc" * 50
    z = __import__("zstandard")

    def delta(base: bytes) -> bytes:
        p = z.ZstdCompressionParameters.from_level(3, format=z.FORMAT_ZSTD1_MAGICLESS)
        return z.ZstdCompressor(compression_params=p, dict_data=z.ZstdCompressionDict(
            base, dict_type=z.DICT_TYPE_RAWCONTENT)).compress(content)

    frames: list[tuple[int, int, int, list[tuple[int, int]]]] = [(0, len(content), len(content), [])]
    payload = content
    d = delta(content)
    for i in range(MAX_DEPTH + 1):
        frames.append((2, len(d), len(content), [(0, i)]))
        payload += d
    blob = _frame_table(frames, [(0, len(frames) - 1)], payload)
    params = {"content_size": len(content), "content_sha256": hashlib.sha256(content).digest(), "deps": []}
    record = sa.MemberRecord(1, "x", len(blob), hashlib.sha256(blob).digest(), sa.Storage("packed", params))
    from devbin.binary import ByteView

    reader = PackedReader([record], lambda o: ByteView(blob, fmt="superarchive"))
    with pytest.raises(FormatError, match="deeper than"):
        reader.content(1)
    shallow = _frame_table(frames[:3], [(0, 2)], content + d + d)
    record2 = sa.MemberRecord(1, "x", len(shallow), b"", sa.Storage("packed", params))
    assert PackedReader([record2], lambda o: ByteView(shallow)).content(1) == content


def _whole(kind: int, bases: list[int], payload: bytes, version: int = 2) -> bytes:
    """A layout-2 stored member."""
    return uleb(version) + uleb(kind) + uleb(len(bases)) + b"".join(uleb(b) for b in bases) + payload


def _patch(content: bytes, base: bytes) -> bytes:
    z = __import__("zstandard")
    p = z.ZstdCompressionParameters.from_level(3, format=z.FORMAT_ZSTD1_MAGICLESS)
    d = z.ZstdCompressionDict(base, dict_type=z.DICT_TYPE_RAWCONTENT) if base else None
    out: bytes = z.ZstdCompressor(compression_params=p, dict_data=d).compress(content)
    return out


def _reader(members: list[tuple[bytes, bytes, list[int]]], *, size_delta: int = 0) -> PackedReader:
    """A reader over stored ``(blob, content, deps)`` members, ordinals 1..N (member 1's size off by size_delta)."""
    from devbin.binary import ByteView

    def storage(i: int, c: bytes, deps: list[int]) -> sa.Storage:
        return sa.Storage("packed", {"content_size": len(c) + (size_delta if i == 0 else 0),
                                     "content_sha256": hashlib.sha256(c).digest(), "deps": deps})

    records = [sa.MemberRecord(i + 1, f"m{i + 1}", len(b), hashlib.sha256(b).digest(), storage(i, c, deps))
               for i, (b, c, deps) in enumerate(members)]
    return PackedReader(records, lambda o: ByteView(members[o - 1][0], fmt="superarchive", where=f"m{o}"))


def test_whole_member_layout_crafted() -> None:
    base = bytes(range(256)) * 4
    content = base[:500] + b"changed" + base[507:]
    patch = _patch(content, base)
    # A base may come later in ordinal order; a layout-1 member may serve as a base.
    fwd = _reader([(_whole(1, [2], patch), content, [2]), (_whole(0, [], base), base, [])])
    assert fwd.content(1) == content and fwd.content(2) == base
    v1 = _frame_table([(0, len(base), len(base), [])], [(0, 0)], base)
    assert _reader([(v1, base, []), (_whole(1, [1], patch), content, [1])]).content(2) == content
    two = _patch(content, base + base)
    assert _reader([(_whole(0, [], base), base, []), (_whole(0, [], base), base, []),
                    (_whole(1, [1, 2], two), content, [1, 2])]).content(3) == content
    alone = _whole(1, [], _patch(content, b""))
    assert _reader([(alone, content, [])]).content(1) == content
    bad: list[tuple[PackedReader, str]] = [
        (_reader([(_whole(5, [], base), base, [])]), "unknown member kind"),
        (_reader([(_whole(0, [], base[:-1]), base, [])]), "raw member holds"),
        (_reader([(_whole(0, [2], base), base, [2]), (_whole(0, [], base), base, [])]), "base count"),
        (_reader([(_whole(1, [2], patch), content, [2]), (_whole(0, [], base), base, [])], size_delta=1),
         "decodes to"),
        (_reader([(_whole(1, [2], patch), content, [2]), (_whole(0, [], base), base, [])], size_delta=-1),
         "decodes to more"),
        (_reader([(_whole(1, [2], b"\x00\x01\x02"), content, [2]), (_whole(0, [], base), base, [])]),
         "zstd|decodes to 0"),
        (_reader([(_whole(1, [2], patch), content, []), (_whole(0, [], base), base, [])]), "not one of"),
        (_reader([(_whole(1, [2, 2], patch), content, [2]), (_whole(0, [], base), base, [])]), "named twice"),
        (_reader([(_whole(1, [2], patch), content, [2, 3]), (_whole(0, [], base), base, []),
                  (_whole(0, [], base), base, [])]), "not the member's bases"),
        (_reader([(_whole(1, [2], patch), content, [2]), (_whole(1, [1], patch), base, [1])]), "cycle"),
        (_reader([(_whole(1, [2], patch), content, [2]), (_whole(0, [], base), content, [])]),
         "content_sha256"),
        (_reader([(_whole(1, list(range(2, 19)), patch), content, list(range(2, 19)))]
                 + [(_whole(0, [], base), base, [])] * 17), "base count|deps"),
        (_reader([(_whole(0, [], base, version=9), base, [])]), "layout version"),
        (_reader([(b"\x02", base, [])]), "ULEB|past"),
    ]
    for reader, message in bad:
        with pytest.raises(FormatError, match=message):
            reader.content(1)
    # Chains: more than MAX_CLOSURE members to decode, or deeper than MAX_DEPTH, are refused.
    def chain(m: int) -> PackedReader:  # member i has base i + 1; the last is raw
        members = [(_whole(1, [i + 2], _patch(base, base)), base, [i + 2]) for i in range(m - 1)]
        return _reader([*members, (_whole(0, [], base), base, [])])

    with pytest.raises(FormatError, match=f"more than {MAX_CLOSURE}"):
        chain(MAX_CLOSURE + 2).content(1)
    with pytest.raises(FormatError, match=f"deeper than {MAX_DEPTH}"):
        chain(MAX_DEPTH + 2).content(1)
    assert chain(MAX_DEPTH + 1).content(1) == base


@pytest.mark.parametrize("layout", [1, 2])
def test_truncated_packed_archives_fail_cleanly(layout: int) -> None:
    _, data = _base(layout)
    lib = sa.open(data)
    for r in lib.records():
        stored = bytes(lib.stored_data(r.ordinal))
        for cut in range(0, len(stored), max(1, len(stored) // 25)):
            cut_data = _rebuild(data, None, {r.ordinal: stored[:cut]})
            err = outcome(_read_all, cut_data)
            # The manifest's hashes match the cut member, so only its frame table can tell: every cut
            # is refused, naming a member of the archive (the cut one, or one built on it), at an
            # offset inside the archive.
            assert err is not None, (layout, r.name, cut)
            assert_located(err, fmts={"superarchive"}, size=len(cut_data))
            named = {f"<archive>({m.name})" for m in sa.open(cut_data, verify="lazy").files}
            assert err.where in named and err.offset is not None, err


@pytest.mark.parametrize("layout", [1, 2])
def test_packing_reports_progress(layout: int) -> None:
    calls: list[tuple[int, int]] = []
    targets = [sa.TargetInput(f"t{i}", (sa.InputMember("k.o", bytes(range(256)) * 8 + bytes([i]) * 50),))
               for i in range(4)]
    sa.create(targets, storage="packed", layout=layout, progress=lambda d, n: calls.append((d, n)))
    assert calls and all(a[0] <= b[0] for a, b in itertools.pairwise(calls))
    assert all(0 <= d <= n for d, n in calls) and calls[-1][0] in (calls[-1][1], calls[-1][1] - 1)
