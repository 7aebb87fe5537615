"""`devbin inspect` and `devbin callgraph` on containers: fatbins, offload bundles and binaries, host files, archives.

The oracle for each code object in a container is the command's output on the image
`devbin extract` writes for it: the container output must be exactly that, after a header
line naming the image (as `devbin list` names it), with the file name in inspect's first
line (and JSON "file") replaced by that name.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES
from devbin.formats.bundle import write_bundle, write_compressed_bundle
from devbin.formats.fatbin import FatbinImage, write_fatbin
from devbin.formats.fatbin import constants as FC
from devbin.formats.offload import OffloadImage, write_offload_binary
from devbin.formats.offload import constants as OC

from tests.runners import TOOL_TIMEOUT, cli, run_devbin

AMD = (FIXTURES / "sample_gfx90a.o").read_bytes()
CUBIN = (FIXTURES / "sample_sm90.cubin").read_bytes()
PTX = (FIXTURES / "sample.ptx").read_bytes()


def _label(img: dict[str, Any]) -> str:
    return str(img["address"])


#: The metadata keys devbin adds to an image's (docs/IMAGES.md); inspect prints the producer's own pairs.
_OURS = {"identifier", "ptxas-options", "fatbin-kind", "wrapper-version", "bundle-id", "offload-kind", "image-kind"}


def _producer_metadata(img: dict[str, Any]) -> dict[str, str]:
    if img["container"] not in ("offload", "wrapped"):
        return {}
    return {k: v for k, v in img["metadata"].items() if k not in _OURS}


def _code_objects(path: Path, tmp: Path) -> list[tuple[dict[str, Any], Path]]:
    """(`devbin list` facts, extracted file) for every ELF code object in ``path``, in discovery order."""
    code, text = cli("list", "--json", str(path))
    assert code == 0
    listed = [i for i in json.loads(text)["images"]
              if i["kind"] in ("cubin", "ptx", "amdgpu") or i["container"] in ("offload", "bundle", "wrapped")]
    out = tmp / f"x-{path.name}"
    code, text = cli("extract", str(path), "-o", str(out), "--json")
    assert code == 0
    written = json.loads(text)["written"]
    assert len(written) == len(listed)
    return [(i, Path(w["file"])) for i, w in zip(listed, written, strict=True) if i["kind"] in ("cubin", "amdgpu")]


def _expected_text(command: str, path: Path, tmp: Path) -> tuple[str, int]:
    """What the container output must start with: per image, header + the single-file output; and the count."""
    blocks = []
    images = _code_objects(path, tmp)
    for info, file in images:
        code, single = cli(command, str(file))
        assert code == 0
        if command == "inspect":
            assert single.startswith(f"{file}: ")
            single = _label(info) + single[len(str(file)):]
            if meta := _producer_metadata(info):  # an OffloadBinary's string map comes first, `key: value` per line
                single = "Metadata:\n" + "".join(f"  {k}: {v}\n" for k, v in meta.items()) + "\n" + single
        blocks.append(f"=== {_label(info)}: {info['kind']} {info['arch']} ===\n{single}")
    return "\n".join(blocks), len(images)


def _check_text(command: str, path: Path, tmp: Path, n_images: int) -> str:
    expected, count = _expected_text(command, path, tmp)
    assert count == n_images
    code, text = cli(command, str(path))
    assert code == 0
    assert text.startswith(expected)
    assert text[len(expected):].strip() == ""  # notes and warnings go to stderr
    assert text.count("\n=== ") + text.startswith("=== ") == n_images
    return text


IMAGE_KEYS = ("address", "vendor", "kind", "arch", "size", "stored_size", "compression")


def _check_json(command: str, path: Path, tmp: Path, n_images: int) -> dict[str, Any]:
    code, text = cli(command, "--json", str(path))
    assert code == 0
    doc = json.loads(text)
    assert list(doc) == ["schema", "file", "images", "skipped", "warnings"] and doc["file"] == str(path)
    assert doc["schema"] == f"devbin.{command}/1"
    images = _code_objects(path, tmp)
    assert len(doc["images"]) == len(images) == n_images
    for got, (info, file) in zip(doc["images"], images, strict=True):
        code, single_text = cli(command, "--json", str(file))
        assert code == 0
        single_doc = json.loads(single_text)
        assert single_doc["file"] == str(file) and len(single_doc["images"]) == 1  # one shape for every input
        single = {k: v for k, v in single_doc["images"][0].items() if k not in IMAGE_KEYS}
        head = {k: info[k] for k in IMAGE_KEYS}
        if command == "inspect":
            assert single["file"] == str(file)
            single["file"] = _label(info)
            if meta := _producer_metadata(info):
                head["metadata"] = meta
            assert got == {**head, **single}
        else:
            assert got == {**head, **single}  # the image's keys, then the graph's (target_id, nodes)
    return doc


# --------------------------------------------------------------------------- inputs built with devbin's writers


@pytest.fixture()
def bundle(tmp_path: Path) -> Path:
    p = tmp_path / "two.hipfb"
    p.write_bytes(write_bundle([("hipv4-amdgcn-amd-amdhsa--gfx90a", AMD),
                                ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", AMD)], align=4096))
    return p


@pytest.fixture()
def fatbin(tmp_path: Path) -> Path:
    p = tmp_path / "k.fatbin"
    p.write_bytes(write_fatbin([FatbinImage(FC.KIND_ELF, 90, CUBIN), FatbinImage(FC.KIND_PTX, 90, PTX),
                                FatbinImage(FC.KIND_ELF, 90, CUBIN, compression="zstd")]))
    return p


@pytest.fixture()
def offload(tmp_path: Path) -> Path:
    p = tmp_path / "k.offload.bin"
    strings = {"triple": "amdgcn-amd-amdhsa", "arch": "gfx90a"}
    p.write_bytes(write_offload_binary([OffloadImage.of(AMD, offload_kind=OC.OFK_HIP, strings=strings),
                                        OffloadImage.of(AMD, offload_kind=OC.OFK_HIP, strings=strings)]))
    return p


@pytest.mark.parametrize("command", ["inspect", "callgraph"])
def test_bundle_of_two_amdgpu_images(command: str, bundle: Path, tmp_path: Path) -> None:
    text = _check_text(command, bundle, tmp_path, 2)
    assert f"=== {bundle}#0.1: amdgpu gfx90a ===" in text
    assert f"=== {bundle}#0.2: amdgpu gfx90a:xnack+ ===" in text
    _check_json(command, bundle, tmp_path, 2)


@pytest.mark.parametrize("command", ["inspect", "callgraph"])
def test_compressed_bundle(command: str, tmp_path: Path) -> None:
    p = tmp_path / "c.hipfb"
    p.write_bytes(write_compressed_bundle([("hipv4-amdgcn-amd-amdhsa--gfx90a", AMD)], method="zlib"))
    _check_text(command, p, tmp_path, 1)


@pytest.mark.parametrize("command", ["inspect", "callgraph"])
def test_fatbin_with_cubins_and_ptx(command: str, fatbin: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    _check_text(command, fatbin, tmp_path, 2)
    assert f"note: {fatbin}#0.1: skipped ptx image" in capsys.readouterr().err
    doc = _check_json(command, fatbin, tmp_path, 2)
    assert [s["kind"] for s in doc["skipped"]] == ["ptx"]


@pytest.mark.parametrize("command", ["inspect", "callgraph"])
def test_offload_binary(command: str, offload: Path, tmp_path: Path) -> None:
    _check_text(command, offload, tmp_path, 2)
    _check_json(command, offload, tmp_path, 2)


def test_offload_binary_holding_a_fatbin(tmp_path: Path) -> None:
    p = tmp_path / "cuda.offload.bin"
    fb = write_fatbin([FatbinImage(FC.KIND_ELF, 90, CUBIN)])
    p.write_bytes(write_offload_binary([OffloadImage.of(fb, image_kind=OC.IMG_FATBINARY, offload_kind=OC.OFK_CUDA,
                                                        strings={"triple": "nvptx64-nvidia-cuda", "arch": "sm_90"})]))
    code, text = cli("callgraph", str(p))
    assert code == 0 and text.count("=== ") == 1 and "callgraph for sm_90:" in text
    _, single = cli("callgraph", str(FIXTURES / "sample_sm90.cubin"))
    assert text.endswith(single)


def test_archive_of_code_objects(tmp_path: Path) -> None:
    ar = shutil.which("ar")
    if ar is None:
        pytest.skip("no ar")
    for name, data in (("a.o", AMD), ("c.cubin", CUBIN)):
        (tmp_path / name).write_bytes(data)
    lib = tmp_path / "libk.a"
    # ar and dot are optional here (the test skips without them), not run_tool's: that marks it `tool`
    subprocess.run([ar, "rc", str(lib), "a.o", "c.cubin"], cwd=tmp_path, check=True, timeout=TOOL_TIMEOUT)
    # `devbin extract` writes no bare archive members: the oracle is the member files themselves.
    blocks = []
    for member, kind, arch in (("a.o", "amdgpu", "gfx90a"), ("c.cubin", "cubin", "sm_90")):
        code, single = cli("callgraph", str(tmp_path / member))
        assert code == 0
        blocks.append(f"=== {lib}!{member}: {kind} {arch} ===\n{single}")
    code, text = cli("callgraph", str(lib))
    assert code == 0 and text == "\n".join(blocks)


def test_dot_has_one_cluster_per_image(bundle: Path, tmp_path: Path) -> None:
    code, text = cli("callgraph", "--dot", str(bundle))
    assert code == 0
    assert text.startswith("digraph ") and "subgraph cluster_0 {" in text and "subgraph cluster_1 {" in text
    assert '"0:saxpy" -> "0:axpy_one";' in text and '"1:saxpy" -> "1:axpy_one";' in text
    dot = shutil.which("dot")
    if dot is not None:
        proc = subprocess.run([dot, "-Tsvg"], input=text, capture_output=True, text=True, check=False,
                              timeout=TOOL_TIMEOUT)
        assert proc.returncode == 0, proc.stderr


def test_single_code_objects_are_unchanged(tmp_path: Path) -> None:
    for path in (FIXTURES / "sample_sm90.cubin", FIXTURES / "sample_gfx90a.o"):
        for command in ("inspect", "callgraph"):
            code, text = cli(command, str(path))
            assert code == 0 and "=== " not in text
            code, js = cli(command, "--json", str(path))
            doc = json.loads(js)  # the same shape as a container's: the one code object in "images"
            assert code == 0 and doc["file"] == str(path) and len(doc["images"]) == 1
            assert doc["images"][0]["address"] == str(path) and doc["skipped"] == []


@pytest.mark.parametrize("content", [b"!<arch>\n", write_bundle([("host-x86_64-unknown-linux-gnu", b"")])])
def test_nothing_found_is_one_line_and_status_3(content: bytes, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "empty.bin"
    p.write_bytes(content)
    for command in ("inspect", "callgraph"):
        code, out = cli(command, str(p))
        err = capsys.readouterr().err
        assert code == 3 and out == ""
        assert err == f"devbin: {p}: does not contain device code\n"


def test_only_ptx_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "ptx.fatbin"
    p.write_bytes(write_fatbin([FatbinImage(FC.KIND_PTX, 90, PTX)]))
    code, text = cli("inspect", str(p))
    err = capsys.readouterr().err
    assert code == 0 and text == "" and "skipped ptx image" in err and "no ELF code object found" in err
    code, text = cli("callgraph", "--json", str(p))
    assert code == 0 and json.loads(text)["images"] == []


def test_help_names_the_containers() -> None:
    for command in ("inspect", "callgraph"):
        proc = subprocess.run(["devbin", command, "--help"], capture_output=True, text=True, check=False)
        if proc.returncode != 0:  # not installed as a script: go through the module
            proc = run_devbin(command, "--help")
        assert "fatbin" in proc.stdout and "OffloadBinary" in proc.stdout and "bundle" in proc.stdout


# --------------------------------------------------------------------------- inputs built with the real tools


@pytest.mark.parametrize("which,n", [("hipfb", 2), ("bundled_obj", 2), ("offload_package", 2)])
@pytest.mark.parametrize("command", ["inspect", "callgraph"])
def test_llvm_tool_containers(which: str, n: int, command: str, amdgpu_objects: dict[str, Path],
                              tmp_path: Path) -> None:
    path = amdgpu_objects[which]
    _check_text(command, path, tmp_path, n)
    _check_json(command, path, tmp_path, n)


@pytest.mark.parametrize("command", ["inspect", "callgraph"])
def test_fatbin_of_built_cubins(command: str, cubins: dict[str, Path], tmp_path: Path) -> None:
    p = tmp_path / "built.fatbin"
    p.write_bytes(write_fatbin([FatbinImage(FC.KIND_ELF, 80, cubins["sm_80_exec"].read_bytes()),
                                FatbinImage(FC.KIND_ELF, 90, cubins["sm_90_linked"].read_bytes())]))
    _check_text(command, p, tmp_path, 2)
    _check_json(command, p, tmp_path, 2)


def test_host_object_without_device_images_exits_3(host_objects: dict[str, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = host_objects["x86_64_obj"]
    for command in ("inspect", "callgraph"):
        code, text = cli(command, str(path))
        assert code == 3 and text == "" and capsys.readouterr().err == f"devbin: {path}: does not contain device code\n"
