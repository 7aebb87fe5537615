"""``devbin.open()``: every input devbin reads, by path and as bytes; ``image(address)``; the lifetime of maps;
the scope and ``data()`` against cuobjdump (``-lelf``, ``-all``, ``-xelf all``); ``import devbin`` stays cheap."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import devbin
from devbin.errors import FormatError, UsageError
from devbin.images import Address, Image
from devbin.model import CodeObject
from devbin.samples import sample_amdgpu_bytes, sample_cubin_bytes, sample_path

from tests.conftest import SOURCES, require_tool
from tests.runners import run_tool


def _pack(tmp: Path, name: str, fmt: str, *samples: str, compression: str = "none") -> Path:
    path = tmp / name
    path.write_bytes(devbin.pack([sample_path(s) for s in samples], format=fmt, compression=compression).data)
    return path


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    """One file of every kind devbin.open() reads, made from the shipped samples (no tool needed)."""
    out = {
        "cubin": sample_path("sample_sm90.cubin"),
        "amdgpu": sample_path("sample_gfx90a.o"),
        "archive": sample_path("sample_layer_base.a"),
        "super": sample_path("sample_layer_top.a"),
        "fatbin": _pack(tmp_path, "k.fatbin", "fatbin", "sample_sm90.cubin", "sample.ptx", compression="zstd"),
        "offload": _pack(tmp_path, "k.offload", "offload", "sample_sm90.cubin", "sample_gfx90a.o"),
        "bundle": _pack(tmp_path, "k.hipfb", "bundle", "sample_gfx90a.o"),
        "wrapped": _pack(tmp_path, "k.wrapped", "wrapped", "sample_gfx90a.o"),
        "host": sample_path("sample_load_user.so"),
    }
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(out["fatbin"], "pkg/k.fatbin")
        z.write(out["archive"], "pkg/lib/libbase.a")
        z.writestr("pkg/__init__.py", "")
    out["wheel"] = whl
    folder = tmp_path / "folder"
    folder.mkdir()
    for key in ("cubin", "offload"):
        (folder / out[key].name).write_bytes(out[key].read_bytes())
    out["folder"] = folder
    return out


EXPECTED_KINDS = {
    "cubin": ["cubin"], "amdgpu": ["amdgpu"], "fatbin": ["cubin", "ptx"], "offload": ["cubin", "amdgpu"],
    "bundle": ["amdgpu"], "wrapped": ["amdgpu"],
    "folder": ["cubin", "amdgpu", "cubin"],  # k.offload, then sample_sm90.cubin
}


def _check_image(image: Image) -> None:
    assert isinstance(image.address, Address) and Address.parse(str(image.address)) == image.address
    assert image.vendor in ("nvidia", "amd", "") and image.arch and image.size > 0 and image.stored_size > 0
    assert image.compression in ("none", "zstd", "lz4", "zlib")
    assert isinstance(image.metadata, tuple)
    data = image.data()
    assert len(data) == image.size or image.compression != "none"
    co = image.code_object()
    if image.kind in ("ptx", "bitcode", "lto-ir", "spirv", "data"):
        assert co is None
    else:
        assert isinstance(co, CodeObject) and co.functions
        assert all(f.resources == f.resources for f in co.functions)


def test_every_input_kind_by_path_and_as_bytes(inputs: dict[str, Path]) -> None:
    for key, path in inputs.items():
        with devbin.open(path) as src:
            images = src.images
            assert images, key
            for image in images:
                _check_image(image)
            if key in EXPECTED_KINDS:
                assert [i.kind for i in images] == EXPECTED_KINDS[key], key
            assert all(str(i.address).startswith(str(path)) for i in images), key
            assert src.image(images[-1].address) is images[-1]
            assert src.image(str(images[0].address)) is images[0]
            by_path = [(str(i.address)[len(str(path)):], i.kind, i.arch, i.size, bytes(i.data())) for i in images]
        if path.is_dir():
            continue
        raw = path.read_bytes()
        for buf in (raw, memoryview(raw), bytearray(raw)):
            src = devbin.open(buf)
            assert [(str(i.address)[len("<bytes>"):], i.kind, i.arch, i.size, bytes(i.data())) for i in src.images] \
                == by_path, key
        named = devbin.open(raw, name=path.name)
        assert [str(i.address) for i in named.images] == [path.name + a for a, *_ in by_path], key


def test_wheel_holds_its_members_images_in_order(inputs: dict[str, Path]) -> None:
    kinds = [[i.kind for i in devbin.open(inputs[k]).images] for k in ("fatbin", "archive", "wheel")]
    assert kinds[2] == kinds[0] + kinds[1] and len(kinds[1]) > 1
    addresses = [str(i.address)[len(str(inputs["wheel"])):] for i in devbin.open(inputs["wheel"]).images]
    assert addresses[:2] == ["!pkg/k.fatbin#0.0", "!pkg/k.fatbin#0.1"]
    assert addresses[2].startswith("!pkg/lib/libbase.a!")


def test_image_by_address_relative_and_not_found(inputs: dict[str, Path]) -> None:
    src = devbin.open(inputs["fatbin"])
    assert src.image("#0.1").kind == "ptx"
    assert src.image(f"{inputs['fatbin']}#0.0").kind == "cubin"
    with pytest.raises(UsageError) as e:
        src.image("#0.7")
    text = str(e.value)
    assert f"{inputs['fatbin']}#0.7" in text and f"{inputs['fatbin']}#0.0" in text and f"{inputs['fatbin']}#0.1" in text
    with pytest.raises(UsageError, match="bad image address"):
        src.image("#x")
    with pytest.raises(UsageError, match="there are no device images"):
        devbin.open(b"no device code here").image("<bytes>")


def test_no_device_code_missing_and_corrupt(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("hello")
    assert devbin.open(tmp_path / "readme.txt").images == []
    assert devbin.open(sample_path("sample.ptx")).images == []  # bare PTX text is no container devbin lists
    assert devbin.open(b"").images == []
    with pytest.raises(FileNotFoundError):
        devbin.open(tmp_path / "missing.cubin")
    cut = tmp_path / "cut.cubin"
    cut.write_bytes(sample_cubin_bytes()[:200])
    with pytest.raises(FormatError, match=r"cut\.cubin"):
        devbin.open(cut)
    with pytest.raises(FormatError):
        devbin.open(sample_cubin_bytes()[:200])
    with pytest.raises(UsageError, match="path or bytes"):
        devbin.open(42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="name="):
        devbin.open(cut, name="x")


def _mapped(path: Path) -> bool:
    return str(path) in Path("/proc/self/maps").read_text()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
def test_maps_are_released_on_close_unless_a_view_is_held(tmp_path: Path) -> None:
    path = tmp_path / "k.cubin"
    path.write_bytes(sample_cubin_bytes())
    with devbin.open(path) as src:
        assert _mapped(path)
        view = src.images[0].data()
        assert isinstance(view, memoryview)
    gc.collect()
    assert _mapped(path)  # the view still holds its map, and is still valid
    assert bytes(view) == sample_cubin_bytes()
    with pytest.raises(UsageError, match="closed"):
        _ = src.images
    del view
    gc.collect()
    assert not _mapped(path)
    with devbin.open(path) as src:
        kept = bytes(src.images[0].data())
    gc.collect()
    assert not _mapped(path) and kept == sample_cubin_bytes()


def test_amdgpu_bytes_resources() -> None:
    co = devbin.open(sample_amdgpu_bytes()).images[0].code_object()
    assert co is not None
    saxpy = next(f for f in co.functions if f.name == "saxpy").resources
    assert (saxpy.vgprs, saxpy.sgprs, saxpy.agprs, saxpy.vgpr_spills, saxpy.sgpr_spills) == (8, 39, 0, 0, 0)
    assert saxpy.registers == saxpy.vgprs and saxpy.stack is None and saxpy.spill_instructions is None


def test_import_devbin_stays_cheap() -> None:
    """``import devbin`` does not import the scanner, the model or the importers: devbin.open comes on first use."""
    code = ("import sys, devbin; heavy = [m for m in ('devbin.images', 'devbin.model', 'devbin.importers', "
            "'devbin.entry.source') if m in sys.modules]; print(heavy); devbin.open; "
            "print('devbin.entry.source' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(Path(devbin.__file__).parent.parent)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.split("\n")[:2] == ["[]", "True"]


# --------------------------------------------------------------------------- against cuobjdump


@pytest.fixture(scope="module")
def rdc_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An nvcc -rdc -shared library: executable images in .nv_fatbin, relocatable ones in __nv_relfatbin."""
    out = tmp_path_factory.mktemp("api_rdc")
    lib = out / "libnv.so"
    run_tool([require_tool("nvcc"), "-arch=sm_80", "-rdc=true", "-Xcompiler", "-fPIC", "-shared", "-o",
              str(lib), str(SOURCES / "kernels.cu"), str(SOURCES / "extfn.cu")])
    return lib


def _cuobjdump(*argv: str | Path, cwd: Path | None = None) -> str:
    p = run_tool([require_tool("cuobjdump"), *map(str, argv)], cwd, check=False)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_scope_and_data_equal_cuobjdump(rdc_library: Path, tmp_path: Path) -> None:
    for all_, opts in ((False, []), (True, ["-all"])):
        with devbin.open(rdc_library, all=all_) as src:
            cubins = [i for i in src.images if i.kind == "cubin"]
            ours = sorted(bytes(i.data()) for i in cubins)
        listed = re.findall(r"^ELF file\s+\d+:", _cuobjdump(*opts, "-lelf", rdc_library), re.M)
        assert len(cubins) == len(listed), all_
        out = tmp_path / f"x{int(all_)}"
        out.mkdir()
        _cuobjdump(*opts, "-xelf", "all", rdc_library, cwd=out)
        assert ours == sorted(p.read_bytes() for p in out.iterdir()), all_
    assert len(devbin.open(rdc_library, all=True).images) > len(devbin.open(rdc_library).images)


def test_elf_level_names_and_their_deprecated_aliases() -> None:
    """``devbin.open_elf``/``devbin.parse_elf`` (issue 25, item 6); the 0.1 names still work, with a
    DeprecationWarning naming the new one; the new names do not warn."""
    import warnings

    from devbin.entry import elf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert devbin.open_elf is elf.open_elf and devbin.parse_elf is elf.parse_elf
    with pytest.warns(DeprecationWarning, match=r"devbin\.open_file is deprecated, use devbin\.open_elf"):
        old_open = devbin.open_file
    with pytest.warns(DeprecationWarning, match=r"devbin\.parse is deprecated, use devbin\.parse_elf"):
        from devbin import parse
    assert old_open is elf.open_elf and parse is elf.parse_elf
    data = Path(sample_path("sample_sm90.cubin")).read_bytes()
    with old_open(sample_path("sample_sm90.cubin")) as opened:
        assert opened.header.e_machine == parse(data).header.e_machine == 190
    assert "open_file" not in devbin.__all__ and "open_elf" in devbin.__all__
