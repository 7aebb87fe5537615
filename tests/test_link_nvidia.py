"""NVIDIA backend of devbin link: pruning relocatable cubins, nvlink as the oracle.

The program is tests/sources/link_nv/{prog,lib}.cu (README there), built at test time with
``nvcc -rdc=true -cubin`` (or, without nvcc's front end, ``ptxas -c`` from the committed PTX).
What nvlink keeps for each ``-kernels-used`` choice is written out below as facts, and
pruning with devbin then linking without ``-kernels-used`` must give the same functions.
The Blackwell architectures CUDA 13.0 accepts (``nvcc --list-gpu-code``: sm_100, sm_103,
sm_110, sm_120, sm_121) carry the Mercury copies (``.nv.merc.*``, ``.nv.capmerc.text.<f>``),
pruned with the rest.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from conftest import cubins_from_ptx, require_tool
from devbin.errors import DeviceBinaryError, FormatError, UsageError
from devbin.formats.elf.reader import ElfFile
from devbin.targets.nvidia import eiattr as E
from devbin.targets.nvidia.cubin import STACK_UNKNOWN, Cubin
from devbin.targets.nvidia.link_nvlink import (
    linked_functions,
    nvlink_facts,
    nvlink_kept,
    parse_dump_callgraph,
    run_nvlink,
)
from devbin.targets.nvidia.link_prune import prune_cubin, removable
from devbin.targets.nvidia.nvinfo import parse_nvinfo

from tests.runners import run_tool

SRC = Path(__file__).parent / "sources" / "link_nv"
ARCHS = ("sm_90", "sm_80")
BLACKWELL = ("sm_100", "sm_103", "sm_110", "sm_120", "sm_121")

PROG_KERNELS = {"k_direct", "k_other", "k_recursive", "k_int_table", "k_flt_table", "k_takes_address", "k_shared"}
# Address-taken: in function-pointer tables in .nv.global.init, or (taken_in_code) only in a kernel's code.
ADDRESS_TAKEN = {"op_inc", "op_dbl", "fop_add", "fop_mul", "vop_zero", "vop_one", "taken_in_code"}

# What nvlink 13.0 keeps for -kernels-used=<choice> (None: no option).  Facts, checked by
# test_what_nvlink_keeps: every address-taken function stays, whatever the kept kernels' indirect
# call prototypes (#ii, #iii) and even vop_* (#vl), which no kernel can call; only never-called,
# never-address-taken functions (unused_dev, lib_unused) and what only dropped kernels call go.
NVLINK_KEEPS: dict[tuple[str, ...] | None, set[str]] = {
    None: PROG_KERNELS | ADDRESS_TAKEN | {"helper", "leaf", "rec_fib", "ping", "pong", "lib_twice", "k_lib"},
    ("k_direct",): {"k_direct", "helper", "leaf"} | ADDRESS_TAKEN,
    ("k_other",): {"k_other", "helper", "leaf", "lib_twice"} | ADDRESS_TAKEN,
    ("k_recursive",): {"k_recursive", "rec_fib", "ping", "pong"} | ADDRESS_TAKEN,
    ("k_int_table",): {"k_int_table"} | ADDRESS_TAKEN,
    ("k_flt_table",): {"k_flt_table"} | ADDRESS_TAKEN,
    ("k_lib",): {"k_lib", "lib_twice"} | ADDRESS_TAKEN,
    ("k_shared", "k_lib"): {"k_shared", "k_lib", "lib_twice"} | ADDRESS_TAKEN,
    ("k_int",): {"k_int_table"} | ADDRESS_TAKEN,  # a substring of the kernel name is enough
}


def _build(out: Path, arch: str) -> dict[str, Path]:
    built = {}
    for name in ("prog", "lib"):
        dest = out / f"{name}.{arch}.cubin"
        if cubins_from_ptx():  # sm_90 PTX for the newer architectures: ptxas compiles it for them
            ptx = SRC / "ptx" / f"{name}.{arch if arch in ARCHS else 'sm_90'}.ptx"
            argv = [require_tool("ptxas"), f"-arch={arch}", "-c", "-o", str(dest), str(ptx)]
        else:
            argv = [require_tool("nvcc"), "-rdc=true", f"-arch={arch}", "-cubin", "-o", str(dest),
                    str(SRC / f"{name}.cu")]
        p = run_tool(argv, check=False)
        assert p.returncode == 0, p.stderr + p.stdout
        built[name] = dest
    return built


class Programs(dict[str, dict[str, Path]]):
    """The program's two relocatable cubins per architecture, each architecture built on first use."""

    def __init__(self, out: Path) -> None:
        super().__init__()
        self.out = out

    def __missing__(self, arch: str) -> dict[str, Path]:
        built = self[arch] = _build(self.out, arch)
        return built


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Programs:
    require_tool("nvlink")
    return Programs(tmp_path_factory.mktemp("link_nv"))


def _functions(path: Path | bytes) -> set[str]:
    return linked_functions(path if isinstance(path, bytes) else path.read_bytes())


def _texts(data: bytes) -> dict[str, bytes]:
    elf = ElfFile(data)
    return {s.name: bytes(s.data) for s in elf.sections if s.name.startswith(".text.")}


def _prune_for(objs: dict[str, Path], keep: set[str]) -> list[bytes]:
    out = []
    for path in objs.values():
        data = path.read_bytes()
        out.append(prune_cubin(data, _functions(data) - keep))
    return out


# --------------------------------------------------------------------------- the oracle


@pytest.mark.parametrize("kernels", list(NVLINK_KEEPS))
def test_what_nvlink_keeps(program: dict[str, dict[str, Path]], kernels: tuple[str, ...] | None) -> None:
    objs = program["sm_90"]
    assert nvlink_kept(list(objs.values()), kernels) == NVLINK_KEEPS[kernels]


@pytest.mark.parametrize("arch", ARCHS + BLACKWELL)
@pytest.mark.parametrize("kernels", [k for k in NVLINK_KEEPS if k != ("k_int",)])
def test_pruned_objects_link_to_what_nvlink_keeps(program: dict[str, dict[str, Path]], tmp_path: Path, arch: str,
                                                 kernels: tuple[str, ...] | None) -> None:
    objs = program[arch]
    want = nvlink_kept(list(objs.values()), kernels)
    pruned = _prune_for(objs, want)
    res = run_nvlink(pruned, arch, tmp_path / "out.cubin", None)
    assert _functions(tmp_path / "out.cubin") == want
    # nvlink finds nothing left to drop: its own pass over the pruned objects keeps all of them
    assert {f for p in pruned for f in _functions(p)} == want
    dumped = run_nvlink(pruned, arch, tmp_path / "g.cubin", None, ["-dump-callgraph-no-demangle"])
    graph = parse_dump_callgraph(dumped.stdout + dumped.stderr)
    assert set(graph) == want
    assert all("Undefined" not in w for w in res.warnings)


@pytest.mark.parametrize("arch", ("sm_90", *BLACKWELL))
def test_nvlink_facts_stack_and_recursion(program: dict[str, dict[str, Path]], arch: str) -> None:
    facts = nvlink_facts(list(program[arch].values()))
    k = facts.kernels
    assert k["k_recursive"].stack_unknown and k["k_recursive"].min_stack_size is None
    assert k["k_recursive"].crs_stack_size == STACK_UNKNOWN
    assert facts.stack_warnings == {"k_recursive"}
    # k_direct -> helper (frame 8) -> leaf (frame 0): the deepest path's frames
    helper = Cubin(ElfFile(program[arch]["prog"].read_bytes())).function("helper")
    assert helper is not None and helper.frame_size == 8
    assert k["k_direct"].min_stack_size == 8 and k["k_other"].min_stack_size == 8
    assert not any(k[n].stack_unknown for n in k if n != "k_recursive")
    assert facts.graph["k_other"].calls == {"helper", "lib_twice"}  # across objects
    assert facts.graph["k_int_table"].calls == {"op_inc", "op_dbl", "taken_in_code"}  # every "#ii" address-taken
    assert facts.graph["k_flt_table"].calls == {"fop_add", "fop_mul"}
    assert facts.graph["rec_fib"].calls == {"rec_fib"}
    assert facts.graph["vop_zero"].address_taken and not facts.graph["vop_zero"].entry
    # recursion removed with devbin: the stack is known again
    pruned = nvlink_facts(_prune_for(program[arch], facts.kept - {"k_recursive", "rec_fib", "ping", "pong"}))
    assert not pruned.stack_warnings and "k_recursive" not in pruned.kernels


# --------------------------------------------------------------------------- pruning


_LABEL = re.compile(r"\.L_x_\d+")


def _disasm_by_function(data: bytes, tmp: Path) -> dict[str, str]:
    """nvdisasm's text of each .text.<f>, local labels renumbered in order of appearance."""
    path = tmp / "d.cubin"
    path.write_bytes(data)
    p = run_tool([require_tool("nvdisasm"), str(path)], check=False)
    assert p.returncode == 0, p.stderr
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for ln in p.stdout.splitlines():
        m = re.match(r"\s*\.section\s+(\S+?),", ln)
        if m:
            current = blocks.setdefault(m[1], []) if m[1].startswith(".text.") else None
        elif current is not None and not ln.startswith("//----"):
            current.append(ln)
    return {name: _renumber_labels("\n".join(lines)) for name, lines in blocks.items()}


def _renumber_labels(text: str) -> str:
    labels: dict[str, str] = {}
    return _LABEL.sub(lambda m: labels.setdefault(m[0], f".L{len(labels)}"), text)


def _res_usage(data: bytes, tmp: Path) -> dict[str, str]:
    path = tmp / "r.cubin"
    path.write_bytes(data)
    p = run_tool([require_tool("cuobjdump"), "-res-usage", str(path)], check=False)
    assert p.returncode == 0, p.stderr
    rows = re.findall(r"Function (\S+):\n\s*(.*)", p.stdout)
    return dict(rows)


REMOVALS = [
    {"unused_dev"},
    {"k_direct"},
    {"k_other"},  # also drops the undefined lib_twice: nothing kept calls it
    {"k_recursive", "rec_fib", "ping", "pong"},
    {"k_shared"},  # with its .nv.shared section and the static array's symbol
    {"k_takes_address", "taken_in_code"},
    {"void_ops", "vop_zero", "vop_one"},  # the table goes, so its functions can
    {"int_ops", "k_int_table", "op_inc", "op_dbl"},
    {"k_direct", "k_other", "helper", "leaf", "unused_dev"},
]


@pytest.mark.parametrize("arch", ARCHS + BLACKWELL)
@pytest.mark.parametrize("remove", REMOVALS, ids=lambda r: "+".join(sorted(r)))
def test_prune_keeps_the_rest_unchanged(program: dict[str, dict[str, Path]], tmp_path: Path, arch: str,
                                        remove: set[str]) -> None:
    objs = program[arch]
    before = objs["prog"].read_bytes()
    after = prune_cubin(before, remove)
    kept = _functions(before) - remove
    assert _functions(after) == kept
    texts_before, texts_after = _texts(before), _texts(after)
    assert texts_after == {k: v for k, v in texts_before.items() if k[len(".text."):] in kept}
    dis_before, dis_after = _disasm_by_function(before, tmp_path), _disasm_by_function(after, tmp_path)
    assert dis_after == {k: v for k, v in dis_before.items() if k[len(".text."):] in kept}
    usage_before, usage_after = _res_usage(before, tmp_path), _res_usage(after, tmp_path)
    assert usage_after == {k: v for k, v in usage_before.items() if k in kept}
    # the devbin reader sees the same call graph, minus the removed functions (and lib_twice, an
    # undefined function only k_other calls)
    gone = remove | ({"lib_twice"} if "k_other" in remove else set())
    cg_before = Cubin(ElfFile(before)).callgraph
    cg_after = Cubin(ElfFile(after)).callgraph
    assert cg_before is not None and cg_after is not None
    for block in ("direct", "address_taken", "indirect", "address_refs"):
        want = [e for e in getattr(cg_before, block) if e[0] not in gone and e[1] not in gone]
        assert list(getattr(cg_after, block)) == want, block
    protos = Cubin(ElfFile(before)).prototypes
    assert Cubin(ElfFile(after)).prototypes == {k: v for k, v in protos.items() if k not in gone}
    # it links, alone where nothing external is left, else with lib
    inputs = [after] if "k_other" in remove else [after, objs["lib"].read_bytes()]
    run_nvlink(inputs, arch, tmp_path / "linked.cubin", None)
    assert _functions(tmp_path / "linked.cubin") <= kept | {"lib_twice", "k_lib"}
    assert not _functions(tmp_path / "linked.cubin") & remove


def test_prune_drops_what_only_removed_code_used(program: dict[str, dict[str, Path]]) -> None:
    data = program["sm_90"]["prog"].read_bytes()
    out = ElfFile(prune_cubin(data, {"k_other", "k_shared"}))
    names = {s.name for s in out.symtab or []}
    assert "lib_twice" not in names and "$___ZZ8k_sharedE4tile__585" not in names
    assert not any(s.name.endswith(("k_other", "k_shared")) for s in out.sections)
    before = ElfFile(data)
    # per kernel .text, .nv.info, .rela.text, .nv.constant0; and k_shared's .nv.shared
    assert len(out.sections) == len(before.sections) - 9
    assert len(out.section(".debug_frame").data) < len(before.section(".debug_frame").data)  # type: ignore[union-attr]


def _merc_symbols(data: bytes) -> list[tuple[str, int, int]]:
    """(name, type, section name index) of each ``.nv.merc.symtab`` entry, read with struct (not devbin)."""
    elf = ElfFile(data)
    (sec,) = [s for s in elf.sections if s.name == ".nv.merc.symtab"]
    strtab = bytes(elf.sections[sec.sh_link].data)
    out = []
    for i in range(sec.sh_size // 24):
        name, info, _other, shndx, _value, _size = struct.unpack_from("<IBBHQQ", data, sec.sh_offset + 24 * i)
        text = strtab[name:strtab.index(b"\0", name)].decode()
        out.append((text, info & 0xF, shndx))
    return out


def _merc_relocations(data: bytes) -> dict[str, list[tuple[int, str, int, int]]]:
    """Each ``.nv.merc.rela.*``: (offset, symbol name, type, addend) rows."""
    elf = ElfFile(data)
    names = [n for n, _, _ in _merc_symbols(data)]
    out = {}
    for s in elf.sections:
        if s.name.startswith(".nv.merc.rela"):
            rows = [struct.unpack_from("<QQq", data, s.sh_offset + 24 * i) for i in range(s.sh_size // 24)]
            out[s.name] = [(off, names[info >> 32], info & 0xFFFFFFFF, add) for off, info, add in rows]
    return out


MERCURY_REMOVAL = {"k_other", "k_shared", "unused_dev", "void_ops", "vop_zero", "vop_one"}


@pytest.mark.parametrize("arch", BLACKWELL)
def test_prune_rewrites_the_mercury_copies(program: dict[str, dict[str, Path]], tmp_path: Path, arch: str) -> None:
    """sm_100+: the second symbol table, its relocations and .nv.info, .nv.merc.debug_frame and each
    .nv.capmerc.text.<f> (whose first word is the section index of .text.<f>) follow the removal."""
    before = program[arch]["prog"].read_bytes()
    after = prune_cubin(before, MERCURY_REMOVAL)
    old, new = ElfFile(before), ElfFile(after)
    gone = MERCURY_REMOVAL | {"lib_twice"}  # lib_twice: undefined, only k_other called it
    merc_sections = [s.name for s in new.sections if s.name.startswith((".nv.merc", ".nv.capmerc"))]
    assert not [n for n in merc_sections if n.rsplit(".", 1)[-1] in gone]
    capsules = [s.name for s in old.sections if s.name.startswith(".nv.capmerc.text.")]
    assert [n for n in merc_sections if n.startswith(".nv.capmerc.text.")] == [
        n for n in capsules if n.rsplit(".", 1)[-1] not in gone]
    for sec in new.sections:
        if sec.name.startswith(".nv.capmerc.text."):
            text = new.section(".text." + sec.name[len(".nv.capmerc.text."):])
            assert text is not None and struct.unpack_from("<I", bytes(sec.data))[0] == text.index
            was = old.section(sec.name)
            assert was is not None and bytes(sec.data)[4:] == bytes(was.data)[4:]
    # the Mercury symbol table: the same symbols less the removed ones (and their sections' symbols),
    # each still defined in the section of the same name
    def defined(data: bytes) -> list[tuple[str, int, str]]:
        secs = ElfFile(data).sections
        return [(n, t, secs[x].name if 0 < x < len(secs) else str(x)) for n, t, x in _merc_symbols(data)]
    removed_secs = {s.name for s in old.sections} - {s.name for s in new.sections}
    assert defined(after) == [row for row in defined(before) if row[0] not in gone and row[2] not in removed_secs]
    # Mercury relocations (R_MERCURY_*, 0x10000 + n) of kept sections are copied, against the same symbols,
    # less those inside the removed table void_ops
    rel_before, rel_after = _merc_relocations(before), _merc_relocations(after)
    for name, rows in rel_after.items():
        if name != ".nv.merc.rela.debug_frame":
            assert rows == [r for r in rel_before[name] if r[1] not in gone], name
    assert all(t >= 0x10000 for rows in rel_after.values() for _, _, t, _ in rows)
    assert not {sym for rows in rel_after.values() for _, sym, _, _ in rows} & gone
    merc_frame = new.section(".nv.merc.debug_frame")
    old_frame = old.section(".nv.merc.debug_frame")
    assert merc_frame is not None and old_frame is not None and merc_frame.sh_size < old_frame.sh_size
    # the per-function records of the Mercury .nv.info (REGCOUNT, FRAME_SIZE, ...) name the same functions
    # as before, less the removed ones
    def named(data: bytes) -> list[tuple[int, str]]:
        names = [n for n, _, _ in _merc_symbols(data)]
        sec = ElfFile(data).section(".nv.merc.nv.info")
        assert sec is not None
        return [(r.attr, names[struct.unpack_from("<I", r.payload)[0]]) for r in parse_nvinfo(sec.view)
                if r.attr in E.INDEXED]
    assert named(after) == [(a, n) for a, n in named(before) if n not in gone]
    assert Cubin(new).function("k_other") is None and Cubin(new).function("k_direct") is not None
    run_nvlink([after, program[arch]["lib"]], arch, tmp_path / "linked.cubin", None)
    assert not _functions(tmp_path / "linked.cubin") & (gone - {"lib_twice"})  # lib's k_lib calls lib_twice


@pytest.mark.parametrize("arch", ("sm_100", "sm_120"))
def test_prune_keeps_unknown_mercury_relocations_and_records(program: dict[str, dict[str, Path]], arch: str) -> None:
    """A relocation type and an .nv.info record code devbin has no name for are copied, never fatal."""
    data = bytearray(program[arch]["prog"].read_bytes())
    elf = ElfFile(bytes(data))
    rela = elf.section(".nv.merc.rela.text.k_direct")
    info = elf.section(".nv.merc.nv.info.k_direct")
    assert rela is not None and info is not None
    struct.pack_into("<I", data, rela.sh_offset + 8, 0x1FFFE)  # r_info's type word of the first row
    assert data[info.sh_offset:info.sh_offset + 2] == bytes([0x04, 0x37])  # CUDA_API_VERSION, 4 bytes
    data[info.sh_offset + 1] = 0x7E  # an attribute code no table names
    after = prune_cubin(bytes(data), {"k_other", "unused_dev"})
    rows = _merc_relocations(after)[".nv.merc.rela.text.k_direct"]
    assert rows[0][2] == 0x1FFFE and rows == _merc_relocations(bytes(data))[".nv.merc.rela.text.k_direct"]
    kept = ElfFile(after).section(".nv.merc.nv.info.k_direct")
    assert kept is not None and bytes(kept.data) == bytes(info.data).replace(b"\x04\x37", b"\x04\x7e", 1)


def test_prune_refuses_a_capsule_whose_code_section_goes(program: dict[str, dict[str, Path]]) -> None:
    """A .nv.capmerc.text.<f> naming another function's .text section (corrupt) is refused, not written."""
    data = bytearray(program["sm_100"]["prog"].read_bytes())
    elf = ElfFile(bytes(data))
    capsule, unused = elf.section(".nv.capmerc.text.k_direct"), elf.section(".text.unused_dev")
    assert capsule is not None and unused is not None
    struct.pack_into("<I", data, capsule.sh_offset, unused.index)
    with pytest.raises(UsageError, match=re.escape("'.nv.capmerc.text.k_direct' is kept but its code section "
                                                   "'.text.unused_dev' is removed")):
        prune_cubin(bytes(data), {"unused_dev"})


def test_prune_is_stepwise_the_same(program: dict[str, dict[str, Path]]) -> None:
    data = program["sm_90"]["prog"].read_bytes()
    assert prune_cubin(data, set()) == data
    once = prune_cubin(data, {"k_direct", "k_recursive", "rec_fib", "unused_dev"})
    twice = prune_cubin(prune_cubin(data, {"k_recursive", "rec_fib"}), {"k_direct", "unused_dev"})
    assert once == twice


def test_prune_refuses_what_kept_code_uses(program: dict[str, dict[str, Path]]) -> None:
    data = program["sm_90"]["prog"].read_bytes()
    cases = {
        "helper": "'.rela.text.k_other'",  # k_direct and k_other call it
        "op_inc": "'.rela.nv.global.init'",  # int_ops holds its address
        "rec_fib": "k_recursive",
        "int_ops": "'.rela.text.k_int_table'",  # k_int_table reads the table
        "ping": "pong",  # mutual recursion: pong still calls it
    }
    for name, culprit in cases.items():
        with pytest.raises(UsageError, match=f"cannot remove '{name}'.*{re.escape(culprit)}"):
            prune_cubin(data, {name})
        assert removable(data, {name}) is not None
    with pytest.raises(UsageError, match="'nope': no function or variable"):
        prune_cubin(data, {"nope"})
    assert removable(data, {"ping", "pong", "rec_fib", "k_recursive"}) is None


def test_prune_refuses_linked_and_foreign_files(program: dict[str, dict[str, Path]], tmp_path: Path) -> None:
    run_nvlink([program["sm_90"]["prog"], program["sm_90"]["lib"]], "sm_90", tmp_path / "x.cubin", None)
    with pytest.raises(UsageError, match="already linked"):
        prune_cubin((tmp_path / "x.cubin").read_bytes(), {"k_direct"})
    with pytest.raises(UsageError, match="not a cubin"):
        prune_cubin(Path("/bin/sh").resolve().read_bytes(), {"main"})


def test_malformed_cubins_give_devbin_errors(program: dict[str, dict[str, Path]]) -> None:
    data = program["sm_90"]["prog"].read_bytes()
    elf = ElfFile(data)
    with pytest.raises(DeviceBinaryError):
        prune_cubin(data[:1000], {"k_direct"})
    with pytest.raises(DeviceBinaryError):
        prune_cubin(b"\x7fELF" + bytes(60), {"k_direct"})
    # a .nv.callgraph entry before any block marker
    cg = next(s for s in elf.sections if s.name == ".nv.callgraph")
    bad = bytearray(data)
    struct.pack_into("<Ii", bad, cg.sh_offset, 5, 7)
    with pytest.raises(FormatError, match="before the first block marker"):
        prune_cubin(bytes(bad), {"k_direct"})
    # a .debug_frame entry running past its section
    df = next(s for s in elf.sections if s.name == ".debug_frame")
    bad = bytearray(data)
    struct.pack_into("<IQ", bad, df.sh_offset, 0xFFFFFFFF, 1 << 40)
    with pytest.raises(FormatError):
        prune_cubin(bytes(bad), {"k_direct"})
    # .text.<f> whose sh_info names another symbol
    text = next(s for s in elf.sections if s.name == ".text.k_direct")
    bad = bytearray(data)
    shoff = elf.header.e_shoff + text.index * 64
    struct.pack_into("<I", bad, shoff + 44, 1)  # sh_info
    with pytest.raises(UsageError, match="not the function of its section"):
        prune_cubin(bytes(bad), {"k_direct"})


# --------------------------------------------------------------------------- running nvlink


def test_run_nvlink_errors(program: dict[str, dict[str, Path]], tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="Undefined reference to 'lib_twice'"):
        run_nvlink([program["sm_90"]["prog"]], "sm_90", tmp_path / "x.cubin", None)
    with pytest.raises(UsageError, match="not an NVIDIA SASS architecture"):
        run_nvlink([program["sm_90"]["prog"]], "gfx90a", tmp_path / "x.cubin", None)
    monkeypatch.setenv("DEVBIN_NVLINK", str(tmp_path / "no-such-nvlink"))
    with pytest.raises(UsageError, match=r"nvlink not found.*pip install nvidia-cuda-nvcc"):
        run_nvlink([program["sm_90"]["prog"]], "sm_90", tmp_path / "x.cubin", None)


def test_parse_dump_callgraph_layout() -> None:
    text = """callgraph for sm_90:
# A: s -> B // s (number A) potentially calls B
# s [N]     // s uses N registers
# ^s        // s is entry point
# &s        // s has address taken
1: &fd(int) [24] ->
2:\x20
3: ^kZ(int *) [32] -> 1 3
"""
    g = parse_dump_callgraph(text)
    assert set(g) == {"fd(int)", "kZ(int *)"}
    assert g["kZ(int *)"].entry and g["kZ(int *)"].registers == 32 and g["kZ(int *)"].calls == {"fd(int)", "kZ(int *)"}
    assert g["fd(int)"].address_taken and not g["fd(int)"].entry
    with pytest.raises(UsageError, match="not listed"):
        parse_dump_callgraph("1: ^k [8] -> 2\n")


def test_prune_device_code_of_nvcc_dc_object(tmp_path: Path) -> None:
    """The relocatable cubin inside an ``nvcc -dc`` host object (``__nv_relfatbin``) prunes and links."""
    from devbin.images import scan_bytes

    if cubins_from_ptx():
        pytest.skip("nvcc -dc needs nvcc's front end (cicc)")
    obj = tmp_path / "prog.o"
    p = run_tool([require_tool("nvcc"), "-dc", "-arch=sm_90", "-o", str(obj), str(SRC / "prog.cu")], check=False)
    assert p.returncode == 0, p.stderr
    (cubin,) = [bytes(i.data()) for i in scan_bytes(obj.read_bytes(), "prog.o") if i.kind == "cubin"]
    assert ElfFile(cubin).header.e_type == 1  # ET_REL
    pruned = prune_cubin(cubin, {"k_other", "k_recursive", "rec_fib", "ping", "pong", "unused_dev"})
    run_nvlink([pruned], "sm_90", tmp_path / "out.cubin", None)
    assert _functions(tmp_path / "out.cubin") == (PROG_KERNELS - {"k_other", "k_recursive"}) | ADDRESS_TAKEN | {
        "helper", "leaf"}
