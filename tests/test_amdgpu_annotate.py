"""devbin sections in AMDGPU code objects: ld.lld-19 links them and llvm-readelf-19 reads them as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from devbin.errors import DeviceBinaryError
from devbin.formats.devsec.elf import annotate, read_code_object
from devbin.formats.elf.compare import loader_differences
from devbin.formats.elf.reader import ElfFile
from devbin.importers import import_code_object

from tests.conftest import require_tool
from tests.runners import cli_ok, run_tool


def _objects(amdgpu_objects: dict[str, Path]) -> dict[str, Path]:
    return {k: v for k, v in amdgpu_objects.items() if k.endswith("_obj") and k != "bundled_obj"}


def test_annotated_objects_link_and_read_as_before(amdgpu_objects: dict[str, Path], tmp_path: Path) -> None:
    lld, readelf, objdump = (require_tool("ld.lld", versions=("19",)), require_tool("llvm-readelf", versions=("19",)),
                             require_tool("llvm-objdump", versions=("19",)))
    annotated: dict[str, Path] = {}
    for name, path in _objects(amdgpu_objects).items():
        elf = ElfFile(path.read_bytes())
        obj = import_code_object(elf)
        out = tmp_path / f"{name}.annotated.o"
        out.write_bytes(annotate(elf, obj))
        annotated[name] = out
        after = ElfFile(out.read_bytes())
        assert loader_differences(elf, after) == [], name
        back = read_code_object(after)
        assert back is not None and back.functions == obj.functions and back.callgraph == obj.callgraph, name
        notes = [run_tool([readelf, "--notes", str(p)], check=False).stdout.replace(str(p), "X") for p in (path, out)]
        assert notes[0] == notes[1], name
    for name in [n for n in annotated if not n.endswith("_lib_obj")]:
        lib = name.replace("_obj", "_lib_obj")
        so_plain, so_ann = tmp_path / f"{name}.so", tmp_path / f"{name}.annotated.so"
        for srcs, dst in (((amdgpu_objects[name], amdgpu_objects[lib]), so_plain),
                          ((annotated[name], annotated[lib]), so_ann)):
            p = run_tool([lld, "-shared", "-o", str(dst), *map(str, srcs)], check=False)
            assert p.returncode == 0, (name, p.stderr)
        dis = [run_tool([objdump, "-d", str(p)], check=False).stdout.split("\n", 2)[-1] for p in (so_plain, so_ann)]
        assert dis[0] == dis[1], name
        so_notes = [run_tool([readelf, "--notes", str(p)], check=False).stdout.replace(str(p), "X")
                    for p in (so_plain, so_ann)]
        assert so_notes[0] == so_notes[1], name


def test_a_foreign_link_leaves_stale_sections_that_are_refused(amdgpu_objects: dict[str, Path],
                                                              tmp_path: Path) -> None:
    """ld.lld copies unknown non-allocated sections into its output with the object's symbol indices;
    devbin must report them rather than attribute them to whatever symbols those indices now name."""
    lld = require_tool("ld.lld", versions=("19",))
    elf = ElfFile(amdgpu_objects["gfx90a_obj"].read_bytes())
    out = tmp_path / "a.o"
    out.write_bytes(annotate(elf, import_code_object(elf)))
    so = tmp_path / "a.so"
    assert run_tool([lld, "-shared", "-o", str(so), str(out), str(amdgpu_objects["gfx90a_lib_obj"])],
                    check=False).returncode == 0
    with pytest.raises(DeviceBinaryError):
        read_code_object(ElfFile(so.read_bytes()))


def test_annotate_command_on_amdgpu(amdgpu_objects: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "k.o"
    printed = cli_ok("annotate", str(amdgpu_objects["gfx1030_obj"]), "-o", str(out))
    assert "nothing the loader reads moved" in printed
    assert read_code_object(ElfFile(out.read_bytes())) is not None
