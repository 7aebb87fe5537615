"""devbin.load on real AMDGPU code objects: a user's code object and a device-function library,
each linked alone by ``ld.lld-19 -shared``, loaded into one executable and frozen; the oracle is
``ld.lld-19 -shared user.o lib.o``, the static link of the same objects.

What is comparable between the loaded executable and the static link, and what is not:

* **Layout inside a code object.** Each ``.so`` holds one input object, so within one output
  section (``.text``, ``.rodata``, ``.data``) its symbols keep the distances the compiler gave
  them, and so does the static link, where that object's input section is one block of the
  output section.  So for every pair of symbols of one code object and one section, the
  difference of their devbin addresses equals the difference of their addresses in the static
  link, and sizes are equal.  Distances *between* sections are not comparable (lld lays out
  one object's sections around the other's), nor absolute addresses (devbin places code objects
  at its own base).  ``__oclc_ABI_version`` (weak, in both objects; the static link keeps one)
  is left out.
* **Relocated slots.** Every slot devbin relocates is named by what it is: a data slot by its
  holder (``user_table+0x8``), a GOT slot by the symbol it holds (the static link shares one
  GOT entry per symbol between the two objects; devbin's two code objects each have their own,
  which must agree).  For each, the value devbin wrote, minus the base of the code object
  defining the target, is the target's offset in that ``.so`` (``library_base + f`` for the GOT
  entry of a library call); and the value lld's dynamic relocation gives in the static link
  (``S + A``, ``B + A`` with B = 0) points at the same symbol plus the same delta.  Both sides
  must have the same set of slots.
* **Code bytes.** Each function's bytes in devbin's device memory equal its bytes in the static
  link except for the 32-bit literals the object's static relocations patch (PC-relative
  offsets to the GOT or to other sections, which move between the two layouts).
* **Kernel descriptors.** The descriptor's entry (``kd + kernel_code_entry_byte_offset``, read
  from device memory) is the kernel's code address in devbin, as it is in the static link.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import SOURCES, require_tool
from devbin.errors import DeviceBinaryError, FormatError, UsageError
from devbin.load import (
    DEFAULT_BASE,
    DuplicateSymbolError,
    Executable,
    SymbolKind,
    UnresolvedSymbolsError,
)

from tests.runners import cli, run_tool

LOAD_SRC = SOURCES / "load"
CFLAGS = ["-target", "amdgcn-amd-amdhsa", "-nogpulib", "-cl-std=CL2.0", "-O2", "-c"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    clang, lld = require_tool("clang-19"), require_tool("ld.lld-19")
    out = tmp_path_factory.mktemp("load")
    b: dict[str, Path] = {}
    for mcpu, tag in (("gfx90a", ""), ("gfx942", "_942"), ("gfx90a:xnack+", "_xp"), ("gfx90a:xnack-", "_xm")):
        for src in ("user", "lib"):
            o = out / f"{src}{tag}.o"
            run_tool([clang, *CFLAGS, f"-mcpu={mcpu}", "-o", o, LOAD_SRC / f"{src}.cl"])
            run_tool([lld, "-shared", "-o", out / f"{src}{tag}.so", o])  # undefined default symbols are allowed
            b[f"{src}{tag}.o"], b[f"{src}{tag}.so"] = o, out / f"{src}{tag}.so"
    run_tool([lld, "-shared", "-o", out / "static.so", b["user.o"], b["lib.o"]])
    b["static.so"] = out / "static.so"
    return b


@pytest.fixture()
def exe(built: dict[str, Path]) -> Executable:
    e = Executable("gfx90a")
    e.load_code_object(built["user.so"])
    e.load_code_object(built["lib.so"])
    e.freeze()
    return e


# ----------------------------------------------------------------------------- llvm-readelf-19 oracle


class Readelf:
    """What llvm-readelf-19 says about one file: sections, .symtab symbols, relocations."""

    def __init__(self, path: Path) -> None:
        tool = require_tool("llvm-readelf-19")
        self.sections: dict[str, tuple[int, int, int, int]] = {}  # name -> (index, addr, offset, size)
        for m in re.finditer(r"\[\s*(\d+)\]\s+(\S+)\s+\S+\s+([0-9a-f]{16})\s+([0-9a-f]+)\s+([0-9a-f]+)",
                             run_tool([tool, "-S", "--wide", path]).stdout):
            self.sections[m.group(2)] = (int(m.group(1)), int(m.group(3), 16), int(m.group(4), 16),
                                         int(m.group(5), 16))
        self.symbols: dict[str, tuple[int, int, int]] = {}  # name -> (value, size, ndx); .symtab only
        table = ""
        for line in run_tool([tool, "-s", "--wide", path]).stdout.splitlines():
            if line.startswith("Symbol table"):
                table = line.split("'")[1]
                continue
            f = line.split()
            if table == ".symtab" and len(f) == 8 and f[0].endswith(":") and f[6].isdigit():
                self.symbols.setdefault(f[7], (int(f[1], 16), int(f[2]), int(f[6])))
        self.relocs: dict[str, list[tuple[int, str, str | None, int]]] = {}  # section -> (off, type, sym, value)
        sec = ""
        for line in run_tool([tool, "-r", "--wide", path]).stdout.splitlines():
            if line.startswith("Relocation section"):
                sec = line.split("'")[1]
                self.relocs[sec] = []
                continue
            f = line.split()
            if len(f) >= 4 and re.fullmatch(r"[0-9a-f]{16}", f[0]):
                if len(f) == 4:  # no symbol: offset info type addend
                    self.relocs[sec].append((int(f[0], 16), f[2], None, int(f[3], 16)))
                else:  # offset info type symvalue name + addend
                    self.relocs[sec].append((int(f[0], 16), f[2], f[4], int(f[3], 16) + int(f[6], 16)))

    def holder(self, addr: int) -> tuple[str, int]:
        """(symbol, delta) of the function/object symbol containing ``addr``."""
        for name, (v, size, _ndx) in self.symbols.items():
            if v <= addr < v + max(size, 1):
                return name, addr - v
        raise AssertionError(f"no symbol holds {addr:#x}")

    def file_bytes(self, path: Path, addr: int, size: int) -> bytes:
        for _i, a, off, sz in self.sections.values():
            if a <= addr and addr + size <= a + sz and a:
                return path.read_bytes()[off + addr - a: off + addr - a + size]
        raise AssertionError(f"{addr:#x} is in no section")


def _dev_holder(exe: Executable, addr: int) -> tuple[str, int]:
    for s in exe.symbols():
        lo = s.code_address if s.kind == SymbolKind.KERNEL and s.code_address is not None else s.address
        if lo <= addr < lo + max(s.size, 1):
            return s.name, addr - lo
    raise AssertionError(f"no loaded symbol holds {addr:#x}")


# ----------------------------------------------------------------------------- the oracle


def test_layout_matches_static_link(exe: Executable, built: dict[str, Path]) -> None:
    st = Readelf(built["static.so"])
    both = {s.name for s in exe.symbols() if sum(t.name == s.name for t in exe.symbols()) > 1}
    assert both == {"__oclc_ABI_version"}
    groups: dict[tuple[str, str], list[tuple[str, int, int]]] = {}
    for s in exe.symbols():
        if s.name in both:
            continue
        lo = s.code_address if s.kind == SymbolKind.KERNEL and s.code_address is not None else s.address
        groups.setdefault((s.code_object, s.section), []).append((s.name, lo, s.size))
        if s.descriptor:  # a kernel's descriptor is a symbol of its own section in the static link
            groups.setdefault((s.code_object, ".rodata"), []).append((s.descriptor, s.address, 64))
    assert {sec for _obj, sec in groups} >= {".text", ".data", ".rodata"}
    compared = 0
    for (_obj, _sec), members in groups.items():
        anchor, a_dev, _ = members[0]
        a_st = st.symbols[anchor][0]
        for name, addr, size in members:
            assert addr - a_dev == st.symbols[name][0] - a_st, (name, anchor)
            assert size == st.symbols[name][1], name
            compared += 1
    assert compared >= 14


def _dev_slots(exe: Executable) -> dict[tuple[str, str], tuple[str, int]]:
    out: dict[tuple[str, str], tuple[str, int]] = {}
    bases = {o.name: o.base for o in exe.code_objects}
    for o in exe.code_objects:
        so = Readelf(Path(o.name))
        for r in o.relocations:
            assert exe.u64(r.address) == r.value  # what is in device memory is what was applied
            if r.site.startswith(".got"):
                assert r.symbol is not None
                key = ("got", r.symbol)
            else:
                key = ("data", r.site)
            target = _dev_holder(exe, r.value)
            # value - base of the defining code object = the target's offset in that .so (+ delta)
            assert r.target_object is not None
            base = bases[r.target_object]
            assert base is not None
            tso = Readelf(Path(r.target_object)) if r.target_object != o.name else so
            assert r.value - base == tso.symbols[target[0]][0] + target[1], (key, target)
            assert out.setdefault(key, target) == target, key  # both code objects' GOT entries agree
    return out


def _static_slots(st: Readelf) -> dict[tuple[str, str], tuple[str, int]]:
    _i, got, _off, got_size = st.sections[".got"]
    out: dict[tuple[str, str], tuple[str, int]] = {}
    for off, rtype, sym, value in st.relocs[".rela.dyn"]:
        assert rtype in ("R_AMDGPU_ABS64", "R_AMDGPU_RELATIVE64")
        if got <= off < got + got_size:
            assert sym is not None
            key = ("got", sym)
        else:
            holder, delta = st.holder(off)
            key = ("data", f"{holder}+{delta:#x}")
        out[key] = st.holder(value)  # B = 0: the value is an address in the static link
    return out


def test_relocated_slots_match_static_link(exe: Executable, built: dict[str, Path]) -> None:
    dev = _dev_slots(exe)
    static = _static_slots(Readelf(built["static.so"]))
    assert dev == static
    assert dev[("got", "lib_scale")] == ("lib_scale", 0)  # the library call's GOT slot
    assert dev[("data", "user_table+0x0")] == ("user_helper", 0)  # RELATIVE64
    assert dev[("data", "user_table+0x8")] == ("lib_offset", 0)  # cross-object address
    assert dev[("data", "user_counter_ptr+0x0")] == ("lib_counter", 0)


def test_got_slot_holds_library_base_plus_offset(exe: Executable, built: dict[str, Path]) -> None:
    user, lib = exe.code_objects
    lib_so = Readelf(built["lib.so"])
    got = next(r for r in user.relocations if r.symbol == "lib_scale" and r.site.startswith(".got"))
    assert lib.base is not None
    assert exe.u64(got.address) == lib.base + lib_so.symbols["lib_scale"][0]
    assert exe.symbol("lib_scale").address == exe.u64(got.address)


def test_code_bytes_match_static_link_outside_relocated_literals(exe: Executable, built: dict[str, Path]) -> None:
    st = Readelf(built["static.so"])
    checked = 0
    for obj_name, o_path in (("user.so", built["user.o"]), ("lib.so", built["lib.o"])):
        o = Readelf(o_path)
        text_ndx = o.sections[".text"][0]
        masks = [off for off, *_ in o.relocs.get(".rela.text", [])]
        for s in exe.symbols():
            if not s.is_function or not s.code_object.endswith(obj_name) or s.code_address is None:
                continue
            f_off, size, ndx = o.symbols[s.name]
            assert ndx == text_ndx
            dev = bytearray(exe.read(s.code_address, size))
            ref = bytearray(st.file_bytes(built["static.so"], st.symbols[s.name][0], size))
            for m in masks:
                if f_off <= m < f_off + size:
                    dev[m - f_off: m - f_off + 4] = ref[m - f_off: m - f_off + 4] = b"\0\0\0\0"
            assert dev == ref, s.name
            checked += 1
    assert checked >= 7


def test_kernel_descriptors_lead_to_the_kernel(exe: Executable, built: dict[str, Path]) -> None:
    st = Readelf(built["static.so"])
    st_bytes = built["static.so"]
    for k in exe.symbols(SymbolKind.KERNEL):
        assert k.descriptor == f"{k.name}.kd"
        assert k.code_address == k.address + int.from_bytes(exe.read(k.address + 16, 8), "little", signed=True)
        kd = st.symbols[k.descriptor][0]
        off = int.from_bytes(st.file_bytes(st_bytes, kd + 16, 8), "little", signed=True)
        assert kd + off == st.symbols[k.name][0]
        assert exe.symbol(k.descriptor) == k


# ----------------------------------------------------------------------------- the symbol table


def test_symbols_kinds_and_metadata(exe: Executable) -> None:
    kinds = {s.name: s.kind for s in exe.symbols() if s.name != "__oclc_ABI_version"}
    assert kinds == {
        "user_kern": SymbolKind.KERNEL, "lib_kern": SymbolKind.KERNEL,
        "user_helper": SymbolKind.INDIRECT_FUNCTION,  # in user_table
        "lib_offset": SymbolKind.INDIRECT_FUNCTION,  # in user_table and lib_table
        "lib_scale": SymbolKind.INDIRECT_FUNCTION,  # in user_table (another code object took it)
        "lib_square": SymbolKind.INDIRECT_FUNCTION,
        "lib_private": SymbolKind.DEVICE_FUNCTION,
        "user_table": SymbolKind.VARIABLE, "user_counter_ptr": SymbolKind.VARIABLE,
        "lib_counter": SymbolKind.VARIABLE, "lib_factor": SymbolKind.VARIABLE, "lib_table": SymbolKind.VARIABLE,
    }
    k = exe.symbol("user_kern")
    assert k.callconv == "kernel" and k.registers["general"] > 0 and k.registers["scalar"] > 0
    assert k.stack_bytes is not None and k.linkage == "program" and k.code_object.endswith("user.so")
    f = exe.symbol("lib_scale")
    assert f.callconv == "default" and f.linkage == "program" and f.function is not None
    assert exe.symbol("user_helper").linkage == "module"  # hidden: local in the .so
    v = exe.symbol("lib_counter")
    assert v.size == 4 and exe.u32(v.address) == 7
    assert all(DEFAULT_BASE <= s.address < DEFAULT_BASE + 0x100000 for s in exe.symbols())
    d = exe.to_dict()
    assert d["frozen"] and len(d["symbols"]) == len(exe.symbols())


def test_oclc_is_local_to_each_code_object(exe: Executable) -> None:
    with pytest.raises(UsageError, match="local to several code objects"):
        exe.symbol("__oclc_ABI_version")
    a = exe.symbol("__oclc_ABI_version", code_object=exe.code_objects[0].name)
    assert a.linkage == "module"


def test_layout_is_deterministic_and_order_independent_of_freeze_time(built: dict[str, Path]) -> None:
    a = Executable("gfx90a")
    a.load_code_object(built["user.so"])
    with pytest.raises(UnresolvedSymbolsError):
        a.freeze()
    a.load_code_object(built["lib.so"])
    a.freeze()
    b = Executable("gfx90a")
    b.load_code_object(built["user.so"].read_bytes(), name=str(built["user.so"]))
    b.load_code_object(built["lib.so"].read_bytes(), name=str(built["lib.so"]))
    b.freeze()
    assert [s.to_dict() for s in a.symbols()] == [s.to_dict() for s in b.symbols()]
    assert a.code_objects[0].base == DEFAULT_BASE
    assert a.code_objects[1].base is not None and a.code_objects[1].base % 0x1000 == 0


# ----------------------------------------------------------------------------- errors


def _snapshot(e: Executable) -> tuple[object, ...]:
    return (tuple(o.name for o in e.code_objects), e.frozen, e.backend.bytes_mapped, e.backend.mark(),
            tuple(o.state for o in e.code_objects))


def test_unresolved_names_symbol_and_who_needs_it(built: dict[str, Path]) -> None:
    e = Executable("gfx90a")
    e.load_code_object(built["user.so"])
    before = _snapshot(e)
    with pytest.raises(UnresolvedSymbolsError) as info:
        e.freeze()
    got = {(u.symbol, u.needed_by) for u in info.value.unresolved}
    user = str(built["user.so"])
    assert got == {("lib_scale", user), ("lib_offset", user), ("lib_counter", user)}
    msg = str(info.value)
    assert "'lib_scale' needed by" in msg and ".got+0x0" in msg and "user_table+0x10" in msg
    assert _snapshot(e) == before
    with pytest.raises(UsageError, match="not frozen"):
        e.symbols()


def test_duplicate_definitions(built: dict[str, Path]) -> None:
    e = Executable("gfx90a")
    e.load_code_object(built["lib.so"])
    before = _snapshot(e)
    with pytest.raises(DuplicateSymbolError) as info:
        e.load_code_object(built["lib.so"], name="lib-again")
    names = {s for s, _ in info.value.duplicates}
    assert {"lib_scale", "lib_offset", "lib_counter", "lib_kern", "lib_kern.kd"} <= names
    assert "already defined by" in str(info.value)
    assert _snapshot(e) == before
    with pytest.raises(UsageError, match="already loaded"):
        e.load_code_object(built["lib.so"])


def test_load_after_freeze(exe: Executable, built: dict[str, Path]) -> None:
    with pytest.raises(UsageError, match="frozen"):
        exe.load_code_object(built["user_942.so"])
    with pytest.raises(UsageError, match="already frozen"):
        exe.freeze()


def test_incompatible_targets(built: dict[str, Path]) -> None:
    e = Executable("gfx942")
    with pytest.raises(UsageError, match="built for gfx90a, device is gfx942"):
        e.load_code_object(built["user.so"])
    with pytest.raises(UsageError, match=r"NVIDIA|AMDGPU"):
        Executable("sm_90").load_code_object(built["user.so"])
    with pytest.raises(UsageError, match="xnack"):
        Executable("gfx90a:xnack-").load_code_object(built["user_xp.so"])
    # device xnack unknown: each loads conditionally, but not both settings in one executable
    e = Executable("gfx90a")
    e.load_code_object(built["user_xp.so"])
    with pytest.raises(UsageError, match="xnack"):
        e.load_code_object(built["lib_xm.so"])
    assert len(e.code_objects) == 1
    ok = Executable("gfx90a:xnack+")
    ok.load_code_object(built["user_xp.so"])
    ok.load_code_object(built["lib_xp.so"])
    ok.freeze()
    assert ok.symbol("user_kern").kind == SymbolKind.KERNEL


def test_relocatable_object_is_refused(built: dict[str, Path]) -> None:
    with pytest.raises(UsageError, match=r"ET_REL.*ld.lld -shared"):
        Executable("gfx90a").load_code_object(built["user.o"])


@pytest.mark.parametrize("cut", [10, 64, 200, 3000, -1])
def test_truncated_code_objects_leave_the_executable_unchanged(built: dict[str, Path], cut: int) -> None:
    e = Executable("gfx90a")
    e.load_code_object(built["lib.so"])
    before = _snapshot(e)
    data = built["user.so"].read_bytes()
    with pytest.raises(DeviceBinaryError):
        e.load_code_object(data[:cut], name="cut")
    assert _snapshot(e) == before
    e.load_code_object(built["user.so"])
    e.freeze()


def _patched_reloc_type(data: bytes, new_type: int) -> bytes:
    from devbin.formats.elf.reader import ElfFile

    elf = ElfFile(data)
    sec = elf.section(".rela.dyn")
    assert sec is not None
    out = bytearray(data)
    out[sec.sh_offset + 8] = new_type  # r_info low 32 bits: the type (little endian)
    return bytes(out)


def test_bad_code_objects(built: dict[str, Path], host_objects: dict[str, Path]) -> None:
    e = Executable("gfx90a")
    e.load_code_object(built["lib.so"])
    before = _snapshot(e)
    with pytest.raises(FormatError, match=r"R_AMDGPU_REL32.*not one the HSA loader applies"):
        e.load_code_object(_patched_reloc_type(built["user.so"].read_bytes(), 4), name="bad-reloc")
    with pytest.raises(UsageError, match="not a code object"):
        e.load_code_object(b"not an elf file at all", name="junk")
    with pytest.raises(UsageError, match="not a device code object"):
        e.load_code_object(host_objects["x86_64_obj"], name="host")
    assert _snapshot(e) == before


def _patched_symbol_name(data: bytes, table: str, index: int, st_name: int) -> bytes:
    from devbin.formats.elf.reader import ElfFile

    sec = ElfFile(data).section(table)
    assert sec is not None
    out = bytearray(data)
    out[sec.sh_offset + 24 * index: sec.sh_offset + 24 * index + 4] = st_name.to_bytes(4, "little")
    return bytes(out)


def test_corrupt_names_and_records_fail_the_load(built: dict[str, Path], cubins: dict[str, Path]) -> None:
    """A symbol name outside its string table fails the load, also in an entry the loader would not read
    (it reads the raw columns and names only the symbols it needs, checking the table's names once); a
    cubin's global ``.nv.info``, which the driver reads at load, fails it too."""
    from devbin.formats.elf.reader import ElfFile

    e = Executable("gfx90a", lazy=True)
    e.load_code_object(built["lib.so"])
    before = _snapshot(e)
    data = built["user.so"].read_bytes()
    dyn = ElfFile(data).dynsym
    assert dyn is not None and len(dyn) > 2
    with pytest.raises(FormatError, match="symbol name"):
        e.load_code_object(_patched_symbol_name(data, ".dynsym", 0, 0xFFFFFF), name="bad-name")  # the null entry
    assert _snapshot(e) == before
    cubin = cubins["sm_90_rdc"].read_bytes()
    info = ElfFile(cubin).section(".nv.info")
    assert info is not None
    bad = bytearray(cubin)
    bad[info.sh_offset + 2: info.sh_offset + 4] = (0xFFF0).to_bytes(2, "little")  # first record's size: past the end
    nv = Executable("sm_90", lazy=True)
    with pytest.raises(FormatError):
        nv.load_code_object(bytes(bad), name="bad-nv-info")
    assert not nv.code_objects


def test_freeze_failure_midway_rolls_back(built: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    e = Executable("gfx90a")
    e.load_code_object(built["user.so"])
    e.load_code_object(built["lib.so"])
    before = _snapshot(e)
    calls = {"n": 0}
    real = e.backend.map

    def failing_map(*args: object, **kw: object) -> object:
        calls["n"] += 1
        if calls["n"] == 5:
            raise UsageError("simulated out of device memory")
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(e.backend, "map", failing_map)
    with pytest.raises(UsageError, match="out of device memory"):
        e.freeze()
    assert _snapshot(e) == before and all(o.base is None for o in e.code_objects)
    monkeypatch.undo()
    e.freeze()
    assert e.code_objects[0].base == DEFAULT_BASE


def test_device_memory_is_bounds_checked(exe: Executable) -> None:
    user = exe.code_objects[0]
    assert user.base is not None
    with pytest.raises(UsageError, match="not mapped"):
        exe.read(user.base - 8, 8)
    with pytest.raises(UsageError, match="not mapped"):
        exe.u64(DEFAULT_BASE + (1 << 40))
    last = exe.backend.regions[-1]
    with pytest.raises(UsageError, match="not mapped"):
        exe.read(last.end - 4, 8)


# ----------------------------------------------------------------------------- other sources


def test_load_package_picks_the_image_for_the_target(built: dict[str, Path], tmp_path: Path) -> None:
    bundler = require_tool("clang-offload-bundler-19")
    pkg = tmp_path / "user.hipfb"
    run_tool([bundler, "-type=o", "-bundle-align=4096",
              "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a,hipv4-amdgcn-amd-amdhsa--gfx942",
              "-input=/dev/null", f"-input={built['user.so']}", f"-input={built['user_942.so']}", f"-output={pkg}"])
    e = Executable("gfx942")
    (obj,) = e.load_package(pkg)
    assert obj.arch.startswith("gfx942")
    e.load_code_object(built["lib_942.so"])
    e.freeze()
    assert e.symbol("user_kern").code_object == obj.name
    with pytest.raises(UsageError, match="no image compatible"):
        Executable("gfx1030").load_package(pkg)


def test_load_superarchive_member(built: dict[str, Path]) -> None:
    import devbin.superarchive as sa

    data = sa.create([sa.TargetInput("gfx90a", (sa.InputMember("user.so", built["user.so"].read_bytes()),
                                                sa.InputMember("lib.so", built["lib.so"].read_bytes()))),
                      sa.TargetInput("gfx942", (sa.InputMember("lib.so", built["lib_942.so"].read_bytes()),))])
    e = Executable("gfx90a")
    e.load_superarchive_member(data, "lib.so")
    e.load_code_object(built["user.so"])
    e.freeze()
    assert e.symbol("lib_scale").code_object.endswith("(lib.so)")
    e2 = Executable("gfx942")
    arch = sa.open(data)
    ordinal = arch.members("gfx942")[0].ordinal
    assert e2.load_superarchive_member(arch, ordinal).arch.startswith("gfx942")
    with pytest.raises(UsageError, match=r"no member 'nope\.so'"):
        Executable("gfx90a").load_superarchive_member(data, "nope.so")


# ----------------------------------------------------------------------------- CLI


def test_cli_text_and_json(built: dict[str, Path]) -> None:
    import json

    rc, text = cli("load", str(built["user.so"]), str(built["lib.so"]))
    assert rc == 0
    assert "executable for gfx90a" in text and "code objects:" in text
    row = next(line for line in text.splitlines() if " user_kern " in line)
    assert row.split()[0] == "kernel" and "kernel" in row.split()[-2:]
    assert any(line.split()[:1] == ["device-function"] and "lib_private" in line for line in text.splitlines())
    rc, js = cli("load", str(built["user.so"]), str(built["lib.so"]), "--json")
    d = json.loads(js)
    assert rc == 0 and d["frozen"] and d["target"]["name"] == "gfx90a"
    exe = Executable("gfx90a")
    exe.load_code_object(built["user.so"])
    exe.load_code_object(built["lib.so"])
    exe.freeze()
    assert d["symbols"] == json.loads(json.dumps([s.to_dict() for s in exe.symbols()]))
    rc, k = cli("load", str(built["user.so"]), str(built["lib.so"]), "--kernel", "user_kern")
    assert rc == 0 and k.startswith("kernel user_kern") and "descriptor user_kern.kd" in k
    assert "amdgpu.language OpenCL C" in " ".join(k.split())


def test_cli_errors(built: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc, _ = cli("load", str(built["user.so"]))
    assert rc == 1 and "unresolved" in capsys.readouterr().err
    rc, _ = cli("load", str(built["user.so"]), str(built["lib.so"]), "--kernel", "lib_scale")
    assert rc == 1 and "not a kernel" in capsys.readouterr().err
    rc, _ = cli("load", str(built["user.so"]), "--target", "gfx942")
    assert rc == 1 and "device is gfx942" in capsys.readouterr().err
    rc, _ = cli("load", str(built["user.o"]))
    assert rc == 1 and "ET_REL" in capsys.readouterr().err


def test_symbol_stack_is_the_vendors_rule() -> None:
    """``LoadedSymbol.stack_bytes`` (and ``devbin load``'s STACK column) is the vendor's per-thread stack rule,
    :meth:`Vendor.stack_bytes`: private bytes are the stack of an AMDGPU function, not of a cubin's (a linked
    cubin's device functions record ``.nv.local`` bytes, 0, and no stack: "not recorded", not 0)."""
    from devbin.load import LoadedSymbol
    from devbin.model import Attribute, Function, FunctionKind, StdAttr
    from devbin.targets.registry import VENDORS

    private = Function("f", FunctionKind.DEVICE, (Attribute(StdAttr.PRIVATE_BYTES, 0),))
    both = Function("g", FunctionKind.DEVICE, (Attribute(StdAttr.PRIVATE_BYTES, 48), Attribute(StdAttr.STACK_SIZE, 16)))
    seen = set()
    for vendor in VENDORS:
        for fn in (private, both):
            s = LoadedSymbol(fn.name, SymbolKind.DEVICE_FUNCTION, 0, 0, "o", "program", function=fn, vendor=vendor)
            assert s.stack_bytes == vendor.stack_bytes(fn)
            seen.add((vendor.private_segment_is_stack, fn.name, s.stack_bytes))
    assert seen == {(True, "f", 0), (False, "f", None), (True, "g", 16), (False, "g", 16)}
