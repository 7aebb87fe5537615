"""Zebins of Debian's ocloc 22.43 record only the product family (tests/intelbuild.py's ocloc): what their
notes say and do not say per DG2 device, and how ``list``/``select`` name and judge them
(:mod:`devbin.targets.intel.devices`, the module docstring's paragraph on the 2022 zebins).  Oracle:
``ocloc ids <acronym>`` (the IP version ocloc compiles for) and ``llvm-readelf -n`` (the notes' bytes)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from devbin.formats.elf.reader import ElfFile
from devbin.targets.intel.notes import COMPAT_SECTION, read_compat_notes

from tests.conftest import require_tool
from tests.intelbuild import SOURCES, ZEBIN, compile_cl
from tests.runners import cli_ok, run_tool

DG2 = ("acm-g10", "acm-g11", "acm-g12")


@pytest.fixture(scope="module")
def dg2(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dg2")
    ocloc = require_tool("ocloc")
    return {d: compile_cl(ocloc, out, SOURCES / "kernels.cl", d, f"k.{d}.zebin", *ZEBIN) for d in DG2}


def _ocloc_ip(device: str) -> tuple[int, int, int]:
    text = run_tool([require_tool("ocloc"), "ids", device]).stdout
    m = re.search(r"^(\d+)\.(\d+)\.(\d+)$", text, re.M)
    assert m, text
    return int(m[1]), int(m[2]), int(m[3])


def test_the_notes_name_the_family_and_the_ip_revision_only(dg2: dict[str, Path]) -> None:
    for device, path in dg2.items():
        elf = ElfFile(path.read_bytes())
        sec = elf.section(COMPAT_SECTION)
        assert sec is not None
        notes = read_compat_notes(elf.notes(sec))
        tm = notes.target_metadata
        assert (notes.product_family, notes.core_family, notes.product_config) == (1270, 0, None)
        assert tm is not None and not tm.validate_revision
        revision = _ocloc_ip(device)[2]
        assert tm.min_revision == tm.max_revision == revision
        # the bytes llvm-readelf shows for note type 3 are that word
        dump = run_tool([require_tool("llvm-readelf"), "-n", path]).stdout
        assert tm.raw.to_bytes(4, "little").hex(" ") in dump


def test_list_names_the_family_and_select_takes_it_on_every_dg2_device(dg2: dict[str, Path]) -> None:
    for path in dg2.values():
        (img,) = json.loads(cli_ok("list", "--json", path))["images"]
        assert (img["vendor"], img["kind"], img["arch"]) == ("intel", "zebin", "dg2")
        for device in (*DG2, "12.56.5"):
            chosen = json.loads(cli_ok("select", "--json", "--device", device, path))["chosen"]
            assert (chosen["verdict"], chosen["jit"]) == ("chosen", False)
            assert chosen["reason"] == "built for the dg2 family (the zebin names no IP version)"
        # on another family the runtime refuses the code and compiles the .spv ocloc compile keeps in it
        chosen = json.loads(cli_ok("select", "--json", "--device", "pvc", path))["chosen"]
        assert chosen["jit"] is True and "dg2 family" not in chosen["reason"]
