"""Lazy loading by the call graph (``Executable(..., lazy=True)``) on real AMDGPU code objects.

``tests/sources/load/{user,lib}.cl`` are built with clang-19 and linked each alone with
``ld.lld-19 -shared --emit-relocs`` (the static relocations say which function uses which
function, variable and GOT slot; the loader, like ROCr, does not apply them).  The oracle is
eager loading of the same files: every address and every relocated slot must be identical,
and exactly the closure of the kernel looked up must be mapped.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SOURCES, require_tool
from devbin.errors import UsageError
from devbin.load import Executable, SymbolKind

from tests.runners import cli_ok, run_tool

CFLAGS = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-mcpu=gfx90a", "-c"]

#: user_kern calls lib_scale (GOT) and user_helper, reads user_table (whose slots hold user_helper,
#: lib_offset, lib_scale) and lib_counter; LLVM 19 does not say which functions call indirectly, so
#: user_kern's indirect call may reach every function whose address a loaded slot holds: lib_offset.
#: lib_scale reads lib_factor and lib_counter.  Not reached: lib_kern, lib_square, lib_private,
#: lib_table, user_counter_ptr.
USER_KERN_FUNCTIONS = {"user.so": {"user_kern", "user_helper"}, "lib.so": {"lib_scale", "lib_offset"}}
USER_KERN_DATA = {"user.so": {"user_table"}, "lib.so": {"lib_counter", "lib_factor"}}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    clang, lld = require_tool("clang-19"), require_tool("ld.lld-19")
    out = tmp_path_factory.mktemp("lazy")
    b: dict[str, Path] = {}
    for src in ("user", "lib"):
        o = out / f"{src}.o"
        run_tool([clang, *CFLAGS, "-o", o, SOURCES / "load" / f"{src}.cl"])
        run_tool([lld, "-shared", "--emit-relocs", "-o", out / f"{src}.so", o])
        run_tool([lld, "-shared", "-o", out / f"{src}.plain.so", o])
        b[f"{src}.so"], b[f"{src}.plain.so"] = out / f"{src}.so", out / f"{src}.plain.so"
    return b


def _exe(built: dict[str, Path], lazy: bool, suffix: str = ".so") -> Executable:
    e = Executable("gfx90a", lazy=lazy)
    e.load_code_object(built[f"user{suffix}"], name="user.so")
    e.load_code_object(built[f"lib{suffix}"], name="lib.so")
    e.freeze()
    return e


def test_lazy_freeze_maps_nothing(built: dict[str, Path]) -> None:
    e = _exe(built, True)
    st = e.stats()
    assert st["bytes_mapped"] == 0 and st["functions_loaded"] == 0 and st["relocations_applied"] == 0
    assert all(o.state == "placed" and o.base is not None for o in e.code_objects)
    e.symbols()  # listing every symbol loads nothing either
    assert e.stats()["bytes_mapped"] == 0


def test_first_lookup_maps_exactly_the_closure(built: dict[str, Path]) -> None:
    lazy, eager = _exe(built, True), _exe(built, False)
    k = lazy.symbol("user_kern")
    assert k == eager.symbol("user_kern")  # same addresses, kinds and metadata
    assert {o.name: o.loaded_functions for o in lazy.code_objects} == USER_KERN_FUNCTIONS
    assert {o.name: o.loaded_data for o in lazy.code_objects} == USER_KERN_DATA
    assert {o.graph_source for o in lazy.code_objects} == {"relocations"}
    # nothing else is mapped: every mapped byte belongs to a closure member, a GOT slot it uses,
    # or the kernel's descriptor
    allowed: list[tuple[int, int]] = []
    for s in eager.symbols():
        if s.name in USER_KERN_FUNCTIONS.get(s.code_object, set()) | USER_KERN_DATA.get(s.code_object, set()):
            lo = s.code_address if s.kind == SymbolKind.KERNEL and s.code_address is not None else s.address
            allowed.append((lo, lo + s.size))
            if s.descriptor:
                allowed.append((s.address, s.address + 64))
    got = {(o.name, r.symbol): r.address for o in lazy.code_objects for r in o.relocations if r.site.startswith(".got")}
    assert set(got) == {("user.so", "lib_scale"), ("user.so", "lib_counter"), ("lib.so", "lib_counter"),
                        ("lib.so", "lib_factor")}
    allowed += [(a, a + 8) for a in got.values()]
    for region in lazy.backend.regions:
        for addr in range(region.start, region.end, 4):
            assert any(lo <= addr < hi for lo, hi in allowed), (hex(addr), region.label)
    for lo, hi in allowed:
        assert lazy.backend.is_mapped(lo, hi - lo)
    for name in ("lib_kern", "lib_square", "lib_private", "lib_table", "user_counter_ptr"):
        s = eager.symbol(name)
        assert not lazy.backend.is_mapped(s.address, max(s.size, 1)), name
    st = lazy.stats()
    assert st["functions_loaded"] == 4 and st["data_loaded"] == 3 and 0 < st["bytes_mapped"] < st["bytes_total"] / 10
    assert st["lazy_loads"] == 1 and st["lazy_load_s"] > 0
    assert st["states"] == {"partial": 2}


def test_lazy_relocated_slots_equal_eager(built: dict[str, Path]) -> None:
    lazy, eager = _exe(built, True), _exe(built, False)
    for name in ("user_kern", "lib_kern", "lib_table"):
        lazy.symbol(name)
    eager_relocs = {r.address: r for o in eager.code_objects for r in o.relocations}
    applied = [r for o in lazy.code_objects for r in o.relocations]
    assert applied and len({r.address for r in applied}) == len(applied)  # each slot once
    for r in applied:
        assert r == eager_relocs[r.address]
        assert lazy.read(r.address, r.width) == eager.read(r.address, r.width)
    # every byte mapped lazily equals the eager executable's byte there (code, data, descriptors)
    for region in lazy.backend.regions:
        assert lazy.read(region.start, len(region.data)) == eager.read(region.start, len(region.data))
    assert [s.to_dict() for s in lazy.symbols()] == [s.to_dict() for s in eager.symbols()]


def test_second_lookup_loads_nothing_and_the_rest_loads_on_demand(built: dict[str, Path]) -> None:
    e = _exe(built, True)
    e.symbol("user_kern")
    before = (e.backend.bytes_mapped, e.stats()["relocations_applied"])
    e.symbol("user_kern.kd")
    e.symbol("lib_scale")
    assert (e.backend.bytes_mapped, e.stats()["relocations_applied"]) == before
    e.symbol("lib_kern")
    lib = e.code_objects[1]
    assert lib.loaded_functions == {"lib_kern", "lib_scale", "lib_offset"}
    assert "lib_square" not in lib.loaded_functions  # address-taken, but no loaded data holds its address
    # loading lib_table (a variable) makes lib_square's address reachable from loaded memory; a loaded
    # indirect call site of unknown prototype may call it, so it is loaded, with what it calls
    e.symbol("lib_table")
    assert lib.loaded_functions == {"lib_kern", "lib_scale", "lib_offset", "lib_square", "lib_private"}
    assert "lib_table" in lib.loaded_data


def test_concurrent_lookups_load_once(built: dict[str, Path]) -> None:
    eager = _exe(built, False)
    for _ in range(3):
        e = _exe(built, True)
        barrier = threading.Barrier(8)
        results: list[object] = []

        def look(name: str, ex: Executable = e, bar: threading.Barrier = barrier,
                 res: list[object] = results) -> None:
            bar.wait()
            res.append(ex.symbol(name))

        threads = [threading.Thread(target=look, args=(n,)) for n in ("user_kern", "lib_kern") * 4]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 8
        applied = [r.address for o in e.code_objects for r in o.relocations]
        assert len(applied) == len(set(applied))
        assert e.stats()["lazy_loads"] == 2
        for region in e.backend.regions:
            assert e.read(region.start, len(region.data)) == eager.read(region.start, len(region.data))


def test_without_a_call_graph_the_whole_code_object_loads(built: dict[str, Path]) -> None:
    lazy, eager = _exe(built, True, ".plain.so"), _exe(built, False, ".plain.so")
    lazy.symbol("user_kern")
    assert {o.graph_source for o in lazy.code_objects} == {"whole"}
    assert lazy.backend.bytes_mapped == eager.backend.bytes_mapped
    assert [o.relocations for o in lazy.code_objects] == [o.relocations for o in eager.code_objects]


def test_devbin_sections_and_reaches_metadata(built: dict[str, Path], tmp_path: Path) -> None:
    from dataclasses import replace

    from devbin.formats.devsec.elf import annotate
    from devbin.formats.elf.reader import ElfFile
    from devbin.importers import import_code_object
    from devbin.model import Metadata

    elf = ElfFile(built["lib.so"].read_bytes())
    model = import_code_object(elf)
    assert ("lib_kern", "lib_scale") in model.callgraph.direct
    # a reaches: key, as devbin link -o writes it, is the kernel's closure as it stands
    tagged = replace(model, metadata=Metadata.of([("reaches:lib_kern", "lib_kern lib_scale lib_square")]))
    lib = tmp_path / "lib.devbin.so"
    lib.write_bytes(annotate(elf, tagged))
    e = Executable("gfx90a", lazy=True)
    e.load_code_object(built["user.so"], name="user.so")
    e.load_code_object(lib, name="lib.so")
    e.freeze()
    e.symbol("lib_kern")
    lib_obj = e.code_objects[1]
    assert lib_obj.graph_source == "devbin"
    assert lib_obj.loaded_functions == {"lib_kern", "lib_scale", "lib_square", "lib_private"}
    assert e.code_objects[0].loaded_functions == set()
    # devbin sections name no data per function: the code object's data comes whole
    assert lib_obj.loaded_data >= {"lib_counter", "lib_factor", "lib_table"}


def test_lazy_errors(built: dict[str, Path]) -> None:
    e = Executable("gfx90a", lazy=True)
    e.load_code_object(built["user.so"])
    with pytest.raises(UsageError, match="not frozen"):
        e.symbol("user_kern")
    with pytest.raises(UsageError, match="unresolved"):
        e.freeze()
    e2 = _exe(built, True)
    with pytest.raises(UsageError, match="no symbol 'nope'"):
        e2.symbol("nope")
    assert e2.backend.bytes_mapped == 0


def test_failed_lazy_load_rolls_back(built: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    e = _exe(built, True)
    real = e.backend.map
    calls = {"n": 0}

    def failing_map(*args: object, **kw: object) -> object:
        calls["n"] += 1
        if calls["n"] == 3:
            raise UsageError("simulated out of device memory")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(e.backend, "map", failing_map)
    with pytest.raises(UsageError, match="out of device memory"):
        e.symbol("user_kern")
    assert e.backend.bytes_mapped == 0 and all(not o.loaded_functions and not o.relocations for o in e.code_objects)
    monkeypatch.undo()
    e.symbol("user_kern")
    assert e.stats()["functions_loaded"] == 4


def test_cli_lazy(built: dict[str, Path]) -> None:
    import json


    text = cli_ok("load", str(built["user.so"]), str(built["lib.so"]), "--lazy", "--kernel", "user_kern")
    assert text.startswith("kernel user_kern") and "lazy: 4 of 7 functions, 3 of 7 variables" in text
    assert "user_helper" in text.split("loaded", 1)[1]
    printed = cli_ok("load", str(built["user.so"]), str(built["lib.so"]), "--lazy", "--kernel", "user_kern", "--json")
    d = json.loads(printed)
    assert d["stats"]["functions_loaded"] == 4 and d["stats"]["lazy"]
    assert set(d["closure"][str(built["lib.so"])]["functions"]) == {"lib_scale", "lib_offset"}
    printed = cli_ok("load", str(built["user.so"]), str(built["lib.so"]), "--lazy")
    assert "lazy: 0 of 7 functions" in printed


def test_shipped_samples_equal_a_fresh_build(built: dict[str, Path]) -> None:
    """src/devbin/samples/sample_load_*.so are what tests/fixtures/make-fixtures.sh builds (the same
    commands as the ``built`` fixture)."""
    samples = Path(__file__).parents[1] / "src" / "devbin" / "samples"
    for src in ("user", "lib"):
        assert (samples / f"sample_load_{src}.so").read_bytes() == built[f"{src}.so"].read_bytes(), src


@pytest.mark.parametrize("name", ["user_kern", "user_kern.kd", "lib_scale", "lib_offset", "lib_private",
                                  "user_table", "lib_counter"])
def test_lazy_symbol_equals_eager(built: dict[str, Path], name: str) -> None:
    """A lazy lookup imports the model records of the looked-up function alone (and reads .symtab only
    of the code objects it uses); kind, addresses and the model record are those eager loading gives."""
    lazy, eager = _exe(built, True), _exe(built, False)
    got = lazy.symbol(name)
    assert got.to_dict() == eager.symbol(name).to_dict()
    assert got.function == eager.symbol(name).function
    if got.linkage == "program":  # a module-local name is searched for in every code object's .symtab
        untouched = [o for o in lazy.code_objects if o.name != got.code_object and not o.loaded_functions]
        assert all(not o.index.indexed for o in untouched)
    assert {s.name: s.to_dict() for s in lazy.symbols()} == {s.name: s.to_dict() for s in eager.symbols()}


def test_importer_only_records_equal_whole(built: dict[str, Path]) -> None:
    """``import_amdgpu(only=)``: each record equals the whole import's; the call graph is the whole one's
    edges from the named functions (read from their relocations alone), with the whole object's
    address-taken functions and indirect call sites."""
    from devbin.formats.elf.reader import ElfFile
    from devbin.targets.amdgpu.importer import import_amdgpu

    for so in ("user.so", "lib.so", "user.plain.so"):
        whole = import_amdgpu(ElfFile(built[so].read_bytes()))
        assert bool(whole.callgraph.direct) == (so != "user.plain.so")  # --emit-relocs: edges to restrict
        for f in whole.functions:
            part = import_amdgpu(ElfFile(built[so].read_bytes()), only=frozenset({f.name}))
            assert part.functions == (f,)
            g, w = part.callgraph, whole.callgraph
            assert g.direct == tuple(e for e in w.direct if e[0] == f.name)
            assert g.external == tuple(sorted({b for a, b in g.direct} & set(w.external)))
            assert (g.address_taken, g.indirect_sites) == (w.address_taken, w.indirect_sites)
        pair = frozenset(f.name for f in whole.functions[:2])
        part = import_amdgpu(ElfFile(built[so].read_bytes()), only=pair)
        assert part.callgraph.direct == tuple(e for e in whole.callgraph.direct if e[0] in pair)


_spans = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 12)).map(lambda t: (t[0], t[0] + t[1])), max_size=8)


@settings(max_examples=200, deadline=None)
@given(want=_spans, have=_spans)
def test_property_range_arithmetic(want: list[tuple[int, int]], have: list[tuple[int, int]]) -> None:
    """What a lazy load maps: ``subtract_ranges(merge_ranges(want), merge_ranges(have))`` covers exactly the
    offsets of ``want`` outside ``have``, as sorted, disjoint, non-empty ranges."""
    from devbin.load.lazy import merge_ranges, subtract_ranges

    def cover(rs: list[tuple[int, int]]) -> set[int]:
        return {x for lo, hi in rs for x in range(lo, hi)}

    w, h = merge_ranges(want), merge_ranges(have)
    assert cover(w) == cover(want) and all(a[1] < b[0] for a, b in itertools.pairwise(w))
    got = subtract_ranges(w, h)
    assert cover(got) == cover(want) - cover(have)
    assert all(lo < hi for lo, hi in got) and all(a[1] <= b[0] for a, b in itertools.pairwise(got))
