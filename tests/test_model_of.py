"""One model of a device ELF, whichever door a user comes through (issue 25, item 3).

``devbin.importers.model_of(elf)``: devbin's own sections first (what ``devbin cc`` records: device
functions' registers that LLVM 19's metadata note lacks), else the vendor importer.  Every door -- the
``resources`` report, ``Image.code_object()`` (``devbin.open``), ``size``'s resources, ``inspect``,
``callgraph``, the linker's units and the loader's indexed code objects -- must give the same
:class:`~devbin.model.resources.Resources` for ``lib_scale`` of tests/sources/amdgpu_lib.cl compiled
with ``devbin cc`` (SGPR 36 / VGPR 1 on gfx90a with clang-19: the assembly's "; Function info:" block).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import devbin
from devbin.formats.elf.reader import ElfFile
from devbin.importers import model_of
from devbin.link.units import Unit
from devbin.load.indexing import index_code_object
from devbin.size.account import measure
from devbin.targets.amdgpu.asminfo import parse_asm_info

from tests.conftest import SOURCES, require_tool
from tests.runners import cli_ok

FLAGS = ["-target", "amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib", "-cl-std=CL2.0", "-O2"]


@pytest.fixture(scope="module")
def lib_o(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    clang = require_tool("clang-19")
    out = tmp_path_factory.mktemp("model_of") / "lib.o"
    cli_ok("cc", "--", clang, *FLAGS, "-c", "-o", str(out), str(SOURCES / "amdgpu_lib.cl"))
    return out, clang


def _doors(path: Path) -> dict[str, dict[str, Any] | None]:
    """``lib_scale``'s resources (``Resources.to_dict()``) as each door gives them."""
    data = path.read_bytes()
    res = json.loads(cli_ok("resources", "--json", str(path)))
    cg = json.loads(cli_ok("callgraph", "--json", str(path)))
    ins = json.loads(cli_ok("inspect", "--json", str(path)))
    obj = devbin.open(path).images[0].code_object()
    assert obj is not None
    (size,) = measure([path], resources=True)
    (sized,) = [f for i in size.images for f in i.functions if f.name == "lib_scale"]

    def named(rows: list[dict[str, Any]]) -> dict[str, Any]:
        (row,) = [r for r in rows if r["name"] == "lib_scale"]
        return row
    return {
        "resources --json": named(res["images"][0]["functions"])["resources"],
        "callgraph --json": named(cg["images"][0]["nodes"])["resources"],
        "inspect --json": named(ins["images"][0]["devbin"]["functions"])["resources"],
        "devbin.open().images[0].code_object()": obj.function("lib_scale").resources.to_dict(),  # type: ignore[union-attr]
        "size (measure, resources=True)": sized.resources.to_dict() if sized.resources is not None else None,
        "link Unit.model": Unit("lib.o", data, 0).model.function("lib_scale").resources.to_dict(),  # type: ignore[union-attr]
        "model_of": model_of(ElfFile(data)).function("lib_scale").resources.to_dict(),  # type: ignore[union-attr]
    }


def test_every_door_gives_lib_scale_the_devbin_sections_resources(lib_o: tuple[Path, str]) -> None:
    path, clang = lib_o
    asm = subprocess.run([clang, *FLAGS, "-S", "-o", "-", str(SOURCES / "amdgpu_lib.cl")], capture_output=True,
                         text=True, check=True).stdout
    info = parse_asm_info(asm)["lib_scale"]
    doors = _doors(path)
    want = doors["model_of"]
    assert want is not None and (want["sgprs"], want["vgprs"]) == (info.sgpr, info.total_vgpr)
    assert {door: r for door, r in doors.items() if r != want} == {}


def test_the_loader_reads_the_same_model(lib_o: tuple[Path, str], tmp_path: Path) -> None:
    """A linked code object (the loader takes no ET_REL): the loader's model is ``model_of``'s and
    ``Image.code_object()``'s (problems the loader meets become its warnings, the same facts)."""
    lld = require_tool("ld.lld-19")
    path, _ = lib_o
    so = tmp_path / "lib.so"
    subprocess.run([lld, "-shared", "-o", str(so), str(path)], capture_output=True, check=True)
    data = so.read_bytes()
    loaded = index_code_object(data, "lib.so").model
    opened = devbin.open(so).images[0].code_object(diag=lambda e: None)
    direct = model_of(ElfFile(data), diag=lambda e: None)
    assert opened is not None
    assert loaded.to_dict() == opened.to_dict() == direct.to_dict()


def test_size_diff_sees_the_devbin_sections(lib_o: tuple[Path, str], tmp_path: Path) -> None:
    """``devbin size --diff`` (:func:`devbin.size.diff.diff_report`) of a plain build against a ``devbin cc``
    build: lib_scale's registers changed from unknown to the recorded ones (it read only the vendor's
    note before, where both builds say nothing of a device function)."""
    from devbin.size.diff import diff_report
    path, clang = lib_o
    plain = tmp_path / "plain.o"
    subprocess.run([clang, *FLAGS, "-c", "-o", str(plain), str(SOURCES / "amdgpu_lib.cl")], capture_output=True,
                   check=True)
    d, violations = diff_report(plain, path)
    assert violations == [] and d["old"] == str(plain) and "budget" not in d
    (row,) = [r for r in d["resources"] if r["name"] == "lib_scale"]
    recorded = model_of(ElfFile(path.read_bytes())).function("lib_scale")
    assert recorded is not None and recorded.resources.sgprs is not None
    assert row["changes"]["sgprs"] == {"old": None, "new": recorded.resources.sgprs}
    assert row["changes"]["vgprs"]["old"] is None
    assert json.loads(cli_ok("size", "--diff", str(plain), str(path), "--json"))["resources"] == d["resources"]


def test_annotate_relinks_a_devbin_section_a_linker_copied(lib_o: tuple[Path, str], tmp_path: Path) -> None:
    """ld.lld copies a devbin cc object's .devbin.func with sh_link 0 (a non-allocated section it does not
    know); annotating the linked file (what ``devbin link -o`` does) replaced the contents but kept that
    sh_link, so the file's devbin sections could not be read back and every door warned (found with
    ``devbin link --root lib_scale -o lib.so lib.o`` then ``devbin resources lib.so``)."""
    from devbin.formats.devsec.elf import annotate, devbin_sections, read_code_object
    from devbin.formats.elf.edit import ElfEditor
    lld = require_tool("ld.lld-19")
    path, _ = lib_o
    so = tmp_path / "lib.so"
    subprocess.run([lld, "-shared", "-o", str(so), str(path)], capture_output=True, check=True)
    elf = ElfFile(so.read_bytes())
    assert devbin_sections(elf)[".devbin.func"].sh_link == 0
    obj = model_of(elf, diag=lambda e: None)
    again = ElfFile(annotate(elf, obj))
    assert elf.symtab is not None and devbin_sections(again)[".devbin.func"].sh_link == elf.symtab.section.index
    back = read_code_object(again)
    assert back is not None and back.to_dict() == obj.to_dict()
    assert ElfEditor(again).write() == again.bytes()  # nothing to change: the same bytes
