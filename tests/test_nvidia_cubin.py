"""Cubins into the unified model, checked against cuobjdump, ptxas -v, nvlink and nvdisasm."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from devbin.analysis.callgraph_view import nodes
from devbin.errors import FormatError
from devbin.formats.devsec.elf import annotate, read_code_object
from devbin.formats.elf.compare import loader_differences
from devbin.formats.elf.reader import ElfFile
from devbin.model import StdAttr, TypeKind
from devbin.targets.nvidia.cubin import Cubin
from devbin.targets.nvidia.importer import NV_INFO_RECORDS, import_cubin
from devbin.targets.nvidia.nvcallgraph import decode_prototype
from devbin.targets.nvidia.nvinfo import parse_nvinfo
from devbin.targets.nvidia.resources import format_cuobjdump, usage

from tests import oracles
from tests.conftest import SOURCES, require_tool
from tests.runners import run_tool


@pytest.fixture(scope="session")
def all_cubins(cubins: dict[str, Path], wide_cubins: dict[str, Path]) -> dict[str, Path]:
    return {**cubins, **wide_cubins}


def test_resources_equal_cuobjdump(all_cubins: dict[str, Path]) -> None:
    cuobjdump = require_tool("cuobjdump")
    for name, path in all_cubins.items():
        theirs = run_tool([cuobjdump, "-res-usage", str(path)], check=False).stdout
        assert format_cuobjdump(usage(Cubin(ElfFile(path.read_bytes())))) == theirs, name


def _ptxas_v(text: str) -> dict[str, dict[str, int]]:
    """Per function: 'frame' (bytes stack frame), and for entries 'regs' and 'stack' (cumulative)."""
    out: dict[str, dict[str, int]] = {}
    current = ""
    for ln in text.splitlines():
        if m := re.search(r"Function properties for (\S+)", ln):
            current = m[1]
            out.setdefault(current, {})
        elif m := re.search(r"(\d+) bytes stack frame", ln):
            out[current]["frame"] = int(m[1])
        elif m := re.search(r"Compiling entry function '([^']+)'", ln):
            current = m[1]
            out.setdefault(current, {})
        elif m := re.search(r"Used (\d+) registers", ln):
            out[current]["regs"] = int(m[1])
            if s := re.search(r"(\d+) bytes cumulative stack size", ln):
                out[current]["stack"] = int(s[1])
            if s := re.search(r"(\d+) bytes smem", ln):
                out[current]["smem"] = int(s[1])
    return out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("rdc", [False, True])
def test_registers_and_stack_equal_ptxas_v(tmp_path: Path, arch: str, rdc: bool) -> None:
    nvcc = require_tool("nvcc")
    out = tmp_path / "k.cubin"
    args = [nvcc, f"-arch={arch}", "-cubin", *(["-rdc=true"] if rdc else []), "-Xptxas", "-v", "-o", str(out),
            str(SOURCES / "kernels.cu")]
    p = run_tool(args, check=False)
    assert p.returncode == 0, p.stderr
    facts = _ptxas_v(p.stdout + p.stderr)
    obj = import_cubin(ElfFile(out.read_bytes()))
    checked = 0
    for f in obj.functions:
        want = facts.get(f.name)
        if want is None:
            continue
        if "regs" in want:
            assert f.uint(StdAttr.REGS_GENERAL) == want["regs"], f.name
            checked += 1
        if "frame" in want:
            assert f.uint(StdAttr.FRAME_SIZE) == want["frame"], f.name
        if "stack" in want and not rdc:
            assert f.uint(StdAttr.STACK_SIZE) == want["stack"], f.name
        if "smem" in want:
            # ptxas -v counts the kernel's own static shared memory; a whole-program sm_90 cubin's
            # .nv.shared.<f> (and cuobjdump's SHARED) adds the 1 KiB the system reserves per block.
            reserved = 1024 if arch == "sm_90" and not rdc and want["smem"] else 0
            assert f.uint(StdAttr.SHARED_BYTES) == want["smem"] + reserved, f.name
    assert checked >= 4


def _nvlink_graph(text: str) -> dict[str, tuple[str, int, frozenset[str]]]:
    rows = {}
    numbered: dict[int, str] = {}
    raw = []
    for ln in text.splitlines():
        m = re.match(r"^(\d+): ([\^&]*)(\S+) \[(\d+)\] ->(.*)$", ln)
        if m:
            numbered[int(m[1])] = m[3]
            raw.append((m[3], m[2], int(m[4]), [int(x) for x in m[5].split()]))
    for name, marks, regs, callees in raw:
        rows[name] = (marks, regs, frozenset(numbered[c] for c in callees))
    return rows


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_callgraph_equals_nvlink_dump(cubins: dict[str, Path], tmp_path: Path, arch: str) -> None:
    nvlink = require_tool("nvlink")
    inputs = [cubins[f"{arch}_rdc"], cubins[f"{arch}_extfn_rdc"]]
    p = run_tool([nvlink, f"-arch={arch}", "--dump-callgraph", "-o", str(tmp_path / "l.cubin"),
                  *map(str, inputs)], check=False)
    assert p.returncode == 0, p.stderr
    theirs = _nvlink_graph(p.stdout + p.stderr)
    assert theirs, p.stdout
    # the linked cubin keeps .nv.callgraph: its graph must be nvlink's
    linked = import_cubin(ElfFile((tmp_path / "l.cubin").read_bytes()))
    ours = {n.name: (("^" if n.kind == "kernel" else "") + ("&" if n.address_taken else ""), n.registers,
                     frozenset(n.calls)) for n in nodes(linked)}
    assert ours == theirs
    # each relocatable input's edges are nvlink's edges
    for path in inputs:
        for n in nodes(import_cubin(ElfFile(path.read_bytes()))):
            if n.name in theirs:
                assert set(n.calls) <= theirs[n.name][2], n.name


def test_arch_variants_and_virtual_arch(all_cubins: dict[str, Path]) -> None:
    for name, path in all_cubins.items():
        c = Cubin(ElfFile(path.read_bytes()))
        want = name.split("_")[0] + "_" + name.split("_")[1]
        assert c.arch == want, name
        assert c.virtual_arch == "compute_" + want[3:].rstrip("a"), name
        assert import_cubin(c.elf).target.target_id == want  # type: ignore[union-attr]


def test_old_abi_header_gives_sm_from_the_low_byte(cubins: dict[str, Path]) -> None:
    raw = bytearray(cubins["sm_80_exec"].read_bytes())
    raw[7], raw[8] = 0x33, 7  # OS/ABI CUDA (v1), ABI version 7
    struct.pack_into("<I", raw, 48, 0x00500550)  # e_flags: sm_80, virtual sm_80, 64-bit, unified texmode
    assert Cubin(ElfFile(bytes(raw))).sm == 80


def test_model_round_trips_through_devbin_sections(all_cubins: dict[str, Path]) -> None:
    for name, path in all_cubins.items():
        elf = ElfFile(path.read_bytes())
        obj = import_cubin(elf)
        out = ElfFile(annotate(elf, obj))
        assert loader_differences(elf, out) == [], name
        back = read_code_object(out)
        assert back is not None
        assert back.functions == obj.functions, name
        assert back.callgraph == obj.callgraph and back.prototypes == obj.prototypes, name
        assert dict(back.metadata.items()) == dict(obj.metadata.items()), name


def test_cuobjdump_elf_and_nvdisasm_unchanged_by_annotate(cubins: dict[str, Path], tmp_path: Path) -> None:
    cuobjdump, nvdisasm = require_tool("cuobjdump"), require_tool("nvdisasm")
    for name, path in cubins.items():
        elf = ElfFile(path.read_bytes())
        out = tmp_path / f"{name}.annotated.cubin"
        out.write_bytes(annotate(elf, import_cubin(elf)))
        for tool, opts in ((cuobjdump, ["-elf"]), (cuobjdump, ["-res-usage"]), (nvdisasm, [])):
            a = run_tool([tool, *opts, str(path)], check=False)
            b = run_tool([tool, *opts, str(out)], check=False)
            assert a.returncode == 0 and b.returncode == 0, (name, b.stderr)
            added = oracles.nvdisasm_added_lines(a.stdout.replace(path.name, "X"), b.stdout.replace(out.name, "X"))
            # added: the devbin sections and the appended name table (the original one is untouched)
            assert all(".devbin." in ln or not ln.strip() or ".byte" in ln or ln.startswith("//---")
                       or re.search(r"\sSTRTAB\s.*\s\.shstrtab$", ln) for ln in added), (name, tool, opts, added[:5])


def test_nvidia_attributes_are_kept() -> None:
    from devbin.samples import sample_cubin_bytes

    obj = import_cubin(ElfFile(sample_cubin_bytes()))
    saxpy = obj.function("saxpy")
    assert saxpy is not None and saxpy.is_kernel
    assert saxpy.uint(StdAttr.WAVE_SIZE) == 32
    rest = saxpy.attr(NV_INFO_RECORDS)
    assert isinstance(rest, bytes)
    from devbin.binary import ByteView

    assert all(r.fmt in (1, 2, 3, 4) for r in parse_nvinfo(ByteView(rest)))


@pytest.mark.parametrize("text,ret,params", [
    ("#iii", (TypeKind.BITS, 4), [(TypeKind.BITS, 4), (TypeKind.BITS, 4)]),
    ("#vlli", (TypeKind.VOID, 0), [(TypeKind.BITS, 8), (TypeKind.BITS, 8), (TypeKind.BITS, 4)]),
    ("#liib16b32", (TypeKind.BITS, 8), [(TypeKind.BITS, 4), (TypeKind.BITS, 4), (TypeKind.AGGREGATE, 16),
                                        (TypeKind.AGGREGATE, 32)]),
    ("#b8l", (TypeKind.AGGREGATE, 8), [(TypeKind.BITS, 8)]),
])
def test_prototype_strings(text: str, ret: tuple[int, int], params: list[tuple[int, int]]) -> None:
    p = decode_prototype(text)
    assert (p.ret.kind, p.ret.size) == ret
    assert [(x.kind, x.size) for x in p.params] == params


@pytest.mark.parametrize("bad", ["", "iii", "#", "#iq", "#ib", "#iv"])
def test_bad_prototype_strings(bad: str) -> None:
    with pytest.raises(FormatError):
        decode_prototype(bad)


def test_unknown_eiattr_is_kept_and_named() -> None:
    from devbin.binary import ByteView
    from devbin.targets.nvidia.eiattr import eiattr_name

    data = bytes([4, 0x7E, 4, 0, 1, 2, 3, 4, 3, 0x7D, 5, 0, 9, 0x11, 1, 2, 3])
    recs = parse_nvinfo(ByteView(data))
    assert [(r.attr, r.value, r.payload) for r in recs[:2]] == [(0x7E, None, b"\x01\x02\x03\x04"), (0x7D, 5, b"")]
    assert recs[2].fmt == 9 and recs[2].payload == bytes([9, 0x11, 1, 2, 3])
    assert eiattr_name(0x7E) == "EIATTR_0x7e" and eiattr_name(0x2F) == "EIATTR_REGCOUNT"
