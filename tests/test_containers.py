"""The registry of container formats (issue 25 item 2): one entry per format, asked by everyone.

* Every container a scan reports is an entry of :data:`devbin.images.containers.FORMATS`, found by the
  magic of the one table (:mod:`devbin.formats.magic`), and its images' bytes come from their format
  objects (``Image.data()``), whatever the container.
* The list of files a new container format touches (docs/ARCHITECTURE.md, "Adding a container format")
  stays true: magic bytes and device-section names are written only in ``formats/`` (each format's
  constants, and the magic table), and ``Image.container`` is compared with, or set to, a literal only in
  the registry and the walks that make the records (read with :mod:`ast`; docstrings do not count).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from devbin.formats import magic as M
from devbin.formats.bundle.writer import write_bundle
from devbin.formats.fatbin import constants as FC
from devbin.formats.fatbin.writer import FatbinImage, write_fatbin
from devbin.formats.offload.writer import OffloadImage, write_offload_binary
from devbin.formats.wrapped import write_wrapped
from devbin.images import CONTAINERS, scan_bytes
from devbin.images import containers as C
from devbin.packaging.pruning import prune

SRC = Path(__file__).resolve().parent.parent / "src" / "devbin"
SAMPLES = SRC / "samples"

#: Where a magic's bytes or a device-section name may be written: the formats' own modules.
FORMAT_MODULES = "formats/"
#: Where ``Image.container`` may be compared with or set to a literal: the registry and the walks that make
#: the records (they cannot import the registry, which imports them).
CONTAINER_MODULES = ("images/containers.py", "images/hostelf.py", "images/llvm.py")
SECTION_NAMES = (".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment", ".hip_fatbin", ".hipFatBinSegment",
                 ".llvm.offloading", "__CLANG_OFFLOAD_BUNDLE__")


def _cubin() -> bytes:
    return (SAMPLES / "sample_sm90.cubin").read_bytes()


def _containers() -> dict[str, bytes]:
    cubin = _cubin()
    fatbin = write_fatbin([FatbinImage(FC.KIND_ELF, 90, cubin), FatbinImage(FC.KIND_PTX, 90, b".version 8.0\n")])
    offload = write_offload_binary([OffloadImage(cubin, 3, 2, 0, (("triple", "nvptx64-nvidia-cuda"),
                                                                   ("arch", "sm_90")))])
    bundle = write_bundle([("host-x86_64-unknown-linux-gnu-", b""), ("cuda-nvptx64-nvidia-cuda-sm_90", cubin)],
                          align=4096)
    return {"fatbin": fatbin, "offload": offload, "bundle": bundle, "wrapped": write_wrapped(cubin, ()),
            "file": cubin}


@pytest.mark.parametrize("container", ["fatbin", "offload", "bundle", "wrapped", "file"])
def test_every_container_is_one_entry_and_gives_its_bytes(container: str) -> None:
    data = _containers()[container]
    images = list(scan_bytes(data, "x", all=True))
    assert images and {i.container for i in images} == {container}
    fmt = C.format_named(container)
    assert fmt is not None and fmt.holds_images and container in CONTAINERS
    opened = C.format_of(data)
    assert opened is not None and (opened is fmt or (container == "file" and opened is C.ELF))
    cubins = [i for i in images if i.kind == "cubin"]
    assert [bytes(i.data()) for i in cubins] == [_cubin()]
    assert [bytes(i.head(16)) for i in cubins] == [_cubin()[:16]]


def test_the_magic_table_is_one_table() -> None:
    names = [m.name for m in M.MAGICS]
    assert len(names) == len(set(names))
    assert max(len(m.magic) + m.offset for m in M.MAGICS) == M.SNIFF
    for m in M.MAGICS:  # each magic names its format, and nothing else does
        data = m.magic + bytes(32)
        hits = [n for n in (M.detect(data), M.image_magic(data), M.ZIP if M.is_zip(data) else M.UNKNOWN)
                if n != M.UNKNOWN]
        assert hits == [m.name if m.role != M.ARCHIVE_ZIP else M.ZIP], m
        if m.either_order:  # a word stored in either byte order (SPIR-V spec 2.3) is the same format
            assert M.image_magic(m.magic[::-1] + bytes(32)) == m.name and M.detect(m.magic[::-1]) == M.UNKNOWN
    assert M.detect(b"\x7fEL") == M.UNKNOWN and C.format_of(b"") is None
    # every magic of the registry is in the table, once
    magics = [n for f in C.FORMATS for n in f.magics]
    assert len(magics) == len(set(magics)) and set(magics) <= set(names)


def test_prune_rewrites_through_the_registry() -> None:
    """Each container format with a rewrite prunes its bare container; keeping all gives the bytes back."""
    data = _containers()
    for name in ("fatbin", "bundle"):
        r = prune(data[name], drop="compute_90" if name == "fatbin" else "sm_80", require_match=False)
        assert r.data == data[name] if name == "bundle" else len(r.data) < len(data[name])
        assert C.format_named(name).rewrite is not None  # type: ignore[union-attr]


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _findings(root: Path) -> list[str]:
    magics = {m.magic for m in M.MAGICS if m.name != M.ELF}  # ELF's magic is every ELF reader's
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and id(node) not in docs and not rel.startswith(FORMAT_MODULES)
                    and (node.value in SECTION_NAMES or (isinstance(node.value, bytes) and node.value in magics))):
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
            if rel in CONTAINER_MODULES:
                continue
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if (any(isinstance(s, ast.Attribute) and s.attr == "container" for s in sides)
                        and any(isinstance(s, ast.Constant | ast.Tuple | ast.List | ast.Set) for s in sides)):
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.keyword) and node.arg == "container" and isinstance(node.value, ast.Constant):
                found.append(f"{rel}:{node.lineno}: container={node.value.value!r}")
    return found


def test_no_container_is_named_outside_its_places() -> None:
    assert _findings(SRC) == []


def test_the_finder_finds(tmp_path: Path) -> None:
    """The check can fail: each pattern it looks for, in a module outside the allowed places, and none of
    them in a format's own module or in a docstring."""
    code = ('"""Keeps .nv_fatbin."""\nx = ".nv_fatbin"\nif image.container in ("bundle", "fatbin"):\n    pass\n'
            'Image(container="offload")\nb = b"CCOB"\n')
    for rel in ("packaging/x.py", "formats/y/constants.py", "images/llvm.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(code, encoding="utf-8")
    where = [f.split(": ", 1)[0].split(":") for f in _findings(tmp_path)]
    assert [f"{p}:{n}" for p, n in sorted(where, key=lambda w: (w[0], int(w[1])))] == [
        "formats/y/constants.py:3", "formats/y/constants.py:5",  # a format's module knows no Image record
        "images/llvm.py:2", "images/llvm.py:6",  # a walk may set a container, not write a section name
        "packaging/x.py:2", "packaging/x.py:3", "packaging/x.py:5", "packaging/x.py:6"]


def test_formats_that_share_a_magic_are_told_apart_by_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``ar`` archive of one toolchain's device images (say, one whose first member is ``pad_``) is an
    entry of its own beside ``ar``: the entry that claims the bytes wins, ``ar`` takes the rest."""
    fat = C.ContainerFormat("fat-ar", "an entry of a fat archive", "fat archive", magics=(M.AR,),
                            claims=lambda v: v.startswith(b"pad_", 8))
    monkeypatch.setitem(C._BY_MAGIC, M.AR, (fat, C.AR))
    assert C.format_of(b"!<arch>\npad_/           ") is fat
    assert C.format_of(b"!<arch>\nk.o/            ") is C.AR
    assert C.format_of(b"!<thin>\npad_/           ") is C.AR


def test_what_the_producer_stored_comes_from_the_container() -> None:
    data = _containers()
    wrapped = write_wrapped(_cubin(), (("Producer", "me"), ("TargetID", "sm_90")))
    (offload,) = scan_bytes(data["offload"], "x")
    (image,) = scan_bytes(wrapped, "w")
    assert C.producer_metadata(offload) == (("triple", "nvptx64-nvidia-cuda"), ("arch", "sm_90"))
    assert C.producer_metadata(image) == (("Producer", "me"), ("TargetID", "sm_90"))
    assert all(C.producer_metadata(i) == () for i in scan_bytes(data["fatbin"], "f"))
