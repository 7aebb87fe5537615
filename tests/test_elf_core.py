"""ELF reader and writers on structurally described files (no external tools)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devbin.errors import FormatError, NotThisFormat, TruncatedError
from devbin.formats.elf import ElfFile
from devbin.formats.elf import constants as C
from devbin.formats.elf.edit import ElfEditor, NewSection
from devbin.formats.elf.model import ElfModel, RelocSpec, SectionSpec, SymbolSpec
from devbin.formats.elf.writer import write

from tests.elfbuild import patch_header, patch_section, small_elf, small_model


@pytest.mark.parametrize("elfclass", [1, 2])
@pytest.mark.parametrize("little", [True, False])
@pytest.mark.parametrize("e_type", [C.ET_REL, C.ET_DYN])
def test_written_file_reads_back_as_modelled(elfclass: int, little: bool, e_type: int) -> None:
    m = small_model(elfclass, little, e_type)
    data = write(m)
    assert write(m) == data, "writer must be deterministic"
    elf = ElfFile(data)
    h = elf.header
    assert (h.ei_class, h.little, h.e_type) == (elfclass, little, e_type)
    for spec in m.sections:
        sec = elf.section(spec.name)
        assert sec is not None
        assert sec.sh_type == spec.sh_type
        if spec.sh_type != C.SHT_NOBITS:
            assert bytes(sec.data) == spec.data
        assert sec.sh_offset % max(spec.align, 1) == 0
    symtab = elf.symtab
    assert symtab is not None
    assert [s.name for s in symtab if s.bind == C.STB_LOCAL][1:] == ["helper"]
    assert symtab.section.sh_info == 2  # null + one local
    kernel = symtab.get("kernel")
    assert kernel is not None and elf.sections[kernel.st_shndx].name == ".text"
    if e_type == C.ET_DYN:
        assert kernel.st_value == elf.section(".text").sh_addr  # type: ignore[union-attr]
        loads = [p for p in elf.segments if p.p_type == C.PT_LOAD]
        assert [p.p_flags for p in loads] == [C.PF_R | C.PF_X, C.PF_R | C.PF_W]
        for p in loads:
            assert p.p_offset % p.p_align == p.p_vaddr % p.p_align
    else:
        relocs = {elf.sections[i].name: r for i, r in elf.relocation_tables.items()}
        rel = ".rela.text" if elfclass == 2 else ".rel.text"
        assert symtab[relocs[rel][0].r_sym].name == "external"
        assert relocs[rel][0].r_addend == (-4 if elfclass == 2 else None)
    notes = elf.notes(elf.section(".note.test"))  # type: ignore[arg-type]
    assert [(n.name, n.n_type, n.desc) for n in notes] == [("devbin", 1, b"\xaa\xbb\xcc")]
    assert ElfEditor(elf).write() == data


def test_unknown_values_are_named_by_range_not_fatal() -> None:
    elf = ElfFile(small_elf())
    weird = elf.section(".nv.weird")
    assert weird is not None
    assert C.sht_name(weird.sh_type) == "SHT_LOPROC+0x2"
    assert C.sht_name(0x70000000, C.EM_CUDA) == "SHT_CUDA_INFO"
    assert C.sht_name(0x8DB00001) == "SHT_DEVBIN_FUNC"
    assert C.shf_names(0x10000006) == ["SHF_ALLOC", "SHF_EXECINSTR", "0x10000000"]
    assert C.pt_name(0x70000003) == "PT_LOPROC+0x3"
    data = patch_header(small_elf(), e_machine=0x7777, e_type=0xFE00)
    assert ElfFile(data).header.e_machine == 0x7777


def test_many_sections_use_extended_numbering() -> None:
    n = C.SHN_LORESERVE + 20
    m = ElfModel()
    m.sections = [SectionSpec(f"s{i}", data=b"") for i in range(n)]
    data = write(m)
    elf = ElfFile(data)
    assert elf.header.raw_e_shnum == 0 and elf.header.raw_e_shstrndx == C.SHN_XINDEX
    assert len(elf.sections) == n + 2
    assert elf.sections[-1].name == ".shstrtab" and elf.sections[n].name == f"s{n - 1}"
    ed = ElfEditor(elf)
    ed.add_section(NewSection(".devbin.meta", b"x"))
    elf2 = ElfFile(ed.write())
    # + .devbin.meta + a new name table (the original is left as it was)
    assert len(elf2.sections) == n + 4 and elf2.sections[-2].name == ".devbin.meta"
    assert elf2.header.e_shstrndx == n + 3 and elf2.sections[-1].name == ".shstrtab"
    # a second edit that needs a new name replaces the appended table instead of adding another
    ed2 = ElfEditor(elf2)
    ed2.add_section(NewSection(".devbin.func", b"y"))
    elf3 = ElfFile(ed2.write())
    assert len(elf3.sections) == n + 5 and elf3.header.e_shstrndx == n + 3


# -- malformed inputs: one field each -------------------------------------------------------------

def test_not_elf() -> None:
    with pytest.raises(NotThisFormat):
        ElfFile(b"MZ\x90\x00")


@pytest.mark.parametrize("cut", [4, 16, 40, 63])
def test_truncated_header(cut: int) -> None:
    with pytest.raises(TruncatedError):
        ElfFile(small_elf()[:cut])


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"e_shoff": 0x7FFFFFFF}, "section header table"),
        ({"e_shnum": 0xFFF0}, "section header table"),
        ({"e_shentsize": 12}, "e_shentsize"),
    ],
)
def test_bad_header_fields(fields: dict[str, int], needle: str) -> None:
    with pytest.raises(FormatError, match=needle):
        ElfFile(patch_header(small_elf(), **fields))


def test_bad_class_and_data() -> None:
    data = bytearray(small_elf())
    data[4] = 9
    with pytest.raises(FormatError, match="EI_CLASS"):
        ElfFile(bytes(data))
    data[4], data[5] = 2, 7
    with pytest.raises(FormatError, match="EI_DATA"):
        ElfFile(bytes(data))


def test_section_past_end_names_section_and_offset() -> None:
    data = patch_section(small_elf(), 1, sh_offset=0x99999)
    with pytest.raises(FormatError) as e:
        ElfFile(data, where="k.o")
    msg = str(e.value)
    assert "k.o: section [1]" in msg and "0x99999" in msg and "exceeds file size" in msg


def test_bad_shstrndx_goes_to_diag() -> None:
    data = patch_header(small_elf(), e_shstrndx=200)
    with pytest.raises(FormatError, match="e_shstrndx"):
        ElfFile(data)
    seen: list[FormatError] = []
    elf = ElfFile(data, diag=seen.append)
    assert seen and all(s.name == "" for s in elf.sections)


def test_bad_symbol_entsize_and_name() -> None:
    base = small_elf()
    elf = ElfFile(base)
    symtab = elf.symtab
    assert symtab is not None
    i = symtab.section.index
    with pytest.raises(FormatError, match="sh_entsize"):
        ElfFile(patch_section(base, i, sh_entsize=16))
    with pytest.raises(FormatError, match="multiple"):
        ElfFile(patch_section(base, i, sh_size=symtab.section.sh_size - 1))
    warnings: list[FormatError] = []
    bad = ElfFile(patch_section(base, symtab.section.sh_link, sh_size=3), diag=warnings.append)
    assert any(s.name.startswith("<corrupt:") for s in bad.symtab)  # type: ignore[union-attr]
    assert warnings  # symbols are decoded on first use: the warning comes then



def test_bad_relocation_table_shape_named_at_open() -> None:
    """A relocation table's entry size and size are checked when the file is opened (from its header
    row), the error naming the section as its Section.where does."""
    base = small_elf()
    rela = ElfFile(base).section(".rela.text")
    assert rela is not None and rela.sh_type == C.SHT_RELA and rela.sh_entsize == 24
    with pytest.raises(FormatError) as bad_entsize:
        ElfFile(patch_section(base, rela.index, sh_entsize=16), where="x.o")
    assert str(bad_entsize.value) == f"elf: x.o: {rela.where}: invalid sh_entsize: expected 24, but got 16"
    with pytest.raises(FormatError) as bad_size:
        ElfFile(patch_section(base, rela.index, sh_size=rela.sh_size - 1), where="x.o")
    assert str(bad_size.value) == f"elf: x.o: {rela.where}: sh_size {rela.sh_size - 1:#x} is not a multiple of 24"
    assert ElfFile(patch_section(base, rela.index, sh_entsize=0)).relocation_table(rela.index)  # 0: not given

# -- editor ---------------------------------------------------------------------------------------

def test_editor_add_replace_remove() -> None:
    base = small_elf()
    elf = ElfFile(base)
    ed = ElfEditor(elf)
    ed.add_section(NewSection(".devbin.meta", b"\x01\x00\x00\x00\x00\x00\x00\x00\x00", 0x8DB00004))
    ed.add_section(NewSection(".devbin.func", b"abc", 0x8DB00001, link=".symtab"))
    out = ed.write()
    e2 = ElfFile(out)
    assert e2.section(".devbin.func").sh_link == e2.symtab.section.index  # type: ignore[union-attr]
    _assert_loadable_unchanged(elf, e2)
    # replace, then remove a section in the middle: later indices and references shift
    ed2 = ElfEditor(e2)
    ed2.replace_section(".devbin.meta", b"new contents")
    ed2.remove_section(".comment")
    e3 = ElfFile(ed2.write())
    assert bytes(e3.section(".devbin.meta").data) == b"new contents"  # type: ignore[union-attr]
    assert e3.section(".comment") is None
    for s in e3.symtab:  # type: ignore[union-attr]
        old = e2.symtab.get(s.name) if s.name else None  # type: ignore[union-attr]
        if old is not None and 0 < old.st_shndx < C.SHN_LORESERVE:
            assert e3.sections[s.st_shndx].name == e2.sections[old.st_shndx].name
            assert s.st_value == old.st_value
    for idx in e3.relocation_tables:
        sec = e3.sections[idx]
        assert e3.sections[sec.sh_info].name in (".text", ".data")
        assert e3.sections[sec.sh_link].name == ".symtab"


def test_editor_refuses_what_would_break_the_file() -> None:
    elf = ElfFile(small_elf())
    ed = ElfEditor(elf)
    with pytest.raises(FormatError.__mro__[1]):
        ed.remove_section(".text")
    with pytest.raises(FormatError.__mro__[1], match="refers to it"):
        ed.remove_section(".strtab")
    with pytest.raises(FormatError.__mro__[1]):
        ed.add_section(NewSection(".x", b"", sh_flags=C.SHF_ALLOC))
    assert ed.write() == elf.bytes()


def _assert_loadable_unchanged(a: ElfFile, b: ElfFile) -> None:
    ra, rb = a.bytes(), b.bytes()
    assert a.segments == b.segments
    for p in a.segments:
        assert ra[p.p_offset:p.p_offset + p.p_filesz] == rb[p.p_offset:p.p_offset + p.p_filesz]
    for s in a.sections:
        if s.is_alloc and s.file_size:
            t = b.sections[s.index]
            assert (t.name, t.sh_offset, t.sh_size, bytes(t.data)) == (s.name, s.sh_offset, s.sh_size, bytes(s.data))
    assert list(a.symtab or ()) == list(b.symtab or ())
    assert a.relocation_tables == b.relocation_tables


# -- properties -----------------------------------------------------------------------------------

_names = st.text("abcdefgh._", min_size=1, max_size=8).map(lambda s: "." + s)


@st.composite
def models(draw: st.DrawFn) -> ElfModel:
    ec = draw(st.sampled_from([1, 2]))
    m = ElfModel(elfclass=ec, little=draw(st.booleans()), e_type=draw(st.sampled_from([C.ET_REL, C.ET_DYN])),
                 machine=draw(st.sampled_from([C.EM_CUDA, C.EM_AMDGPU, C.EM_X86_64, 0x1234])),
                 flags=draw(st.integers(0, 2**32 - 1)), osabi=draw(st.integers(0, 255)))
    names = draw(st.lists(_names, min_size=1, max_size=6, unique=True))
    for n in names:
        t = draw(st.sampled_from([C.SHT_PROGBITS, C.SHT_NOBITS, C.SHT_NOTE, 0x70000000, 0x8DB00001, 0x6FFFFF00]))
        flags = draw(st.sampled_from([0, C.SHF_ALLOC, C.SHF_ALLOC | C.SHF_EXECINSTR, C.SHF_ALLOC | C.SHF_WRITE]))
        data = b"" if t in (C.SHT_NOBITS, C.SHT_NOTE) else draw(st.binary(max_size=40))
        m.sections.append(SectionSpec(n, t, flags, data, size=draw(st.integers(0, 100)) if t == C.SHT_NOBITS else None,
                                      align=draw(st.sampled_from([1, 2, 4, 8, 16]))))
    for i in range(draw(st.integers(0, 5))):
        sec = draw(st.sampled_from([None, *names]))
        m.symbols.append(SymbolSpec(f"sym{i}", draw(st.integers(0, 64)), draw(st.integers(0, 64)),
                                    bind=draw(st.sampled_from([0, 1, 2])), type=draw(st.sampled_from([0, 1, 2])),
                                    other=draw(st.integers(0, 255)), section=sec))
    if m.e_type == C.ET_REL and m.symbols:
        target = draw(st.sampled_from(names))
        sym = f"sym{draw(st.integers(0, len(m.symbols) - 1))}"
        m.relocations[target] = [RelocSpec(draw(st.integers(0, 2**31)), sym, draw(st.integers(0, 200)),
                                           draw(st.integers(-(2**31), 2**31 - 1)))]
        m.use_rela = draw(st.booleans())
    return m


@settings(max_examples=150, deadline=None)
@given(models())
def test_property_model_write_read(m: ElfModel) -> None:
    data = write(m)
    elf = ElfFile(data)
    assert [s.name for s in elf.sections if s.name in {x.name for x in m.sections}] == [
        s.name for s in m.sections if s.flags & C.SHF_ALLOC] + [s.name for s in m.sections if not s.flags & C.SHF_ALLOC]
    for spec in m.sections:
        sec = elf.section(spec.name)
        assert sec is not None and sec.sh_type == spec.sh_type and sec.sh_flags == spec.flags
        if spec.sh_type != C.SHT_NOBITS:
            assert bytes(sec.data) == spec.data
    got = {s.name: s for s in (elf.symtab or ())}
    for spec2 in m.symbols:
        s = got[spec2.name]
        assert (s.st_size, s.bind, s.type, s.st_other) == (spec2.size, spec2.bind, spec2.type, spec2.other)
    # write(read(x)) == x
    assert ElfEditor(elf).write() == data


def test_bulk_symbol_decode_equals_one_by_one(tmp_path: Path) -> None:
    """Walking a large symbol table decodes it in one pass; every symbol equals the one-by-one decode."""
    import glob

    files = [Path(p) for p in sorted(glob.glob(str(Path(__file__).parents[1] / "src/devbin/samples/*")))
             if Path(p).is_file() and not p.endswith((".py", ".ptx"))]
    model = small_model()
    for i in range(200):
        model.symbols.append(SymbolSpec(f"sym_{i}_\u00e9" if i % 50 == 7 else f"sym_{i}", i, 4, C.STB_GLOBAL,
                                        C.STT_OBJECT, 0, None, C.SHN_ABS))
    big = tmp_path / "big.o"
    big.write_bytes(write(model))
    checked = 0
    for path in [*files, big]:
        data = path.read_bytes()
        if not data.startswith(b"\x7fELF"):
            continue
        one = ElfFile(data)
        bulk = ElfFile(data)
        for index, table in bulk.symbol_tables.items():
            single = one.symbol_tables[index]
            assert list(table) == [single._decode(i) for i in range(len(single))]
            checked += len(table)
    assert checked > 200


def test_symbol_columns_and_names_equal_one_by_one(tmp_path: Path) -> None:
    """``SymbolTable.columns`` and ``names`` (the loader's bulk path) give each symbol's fields and name as
    the one-by-one decoder does, also for non-ASCII names (which go through it) and in both byte orders."""
    import glob

    files = [Path(p) for p in sorted(glob.glob(str(Path(__file__).parents[1] / "src/devbin/samples/*")))
             if Path(p).is_file() and not p.endswith((".py", ".ptx"))]
    for little in (True, False):
        model = small_model(little=little)
        for i in range(100):
            model.symbols.append(SymbolSpec(f"s_{i}_\u00e9" if i % 30 == 7 else f"s_{i}", i, 4, C.STB_GLOBAL,
                                            C.STT_OBJECT, 0, None, C.SHN_ABS))
        (tmp_path / f"big{little}.o").write_bytes(write(model))
        files.append(tmp_path / f"big{little}.o")
    checked = 0
    for path in files:
        data = path.read_bytes()
        if not data.startswith(b"\x7fELF"):
            continue
        one, bulk = ElfFile(data), ElfFile(data)
        for index, table in bulk.symbol_tables.items():
            single = [one.symbol_tables[index]._decode(i) for i in range(len(table))]
            cols = table.columns
            assert list(zip(*cols, strict=True)) == [(s.st_name, s.st_value, s.st_size, s.st_info, s.st_other,
                                                      s.st_shndx) for s in single]
            assert table.names(range(len(table))) == [s.name for s in single]
            assert table.names([len(table) - 1, 0]) == [single[-1].name, single[0].name]
            checked += len(table)
    assert checked > 200


@settings(max_examples=60, deadline=None)
@given(offsets=st.lists(st.integers(0, 64), min_size=0, max_size=40), sort=st.booleans(),
       decoded_first=st.booleans(), lo=st.integers(-2, 70), width=st.integers(0, 70))
def test_property_relocations_between(offsets: list[int], sort: bool, decoded_first: bool, lo: int,
                                      width: int) -> None:
    """``relocations_between(index, lo, hi)`` is the table's entries with ``lo <= r_offset < hi`` in table
    order, whether the table is sorted by offset or not and whether it was decoded whole before."""
    model = small_model()
    model.relocations = {".text": [RelocSpec(o, "external", 2, i) for i, o in
                                   enumerate(sorted(offsets) if sort else offsets)]}
    elf = ElfFile(write(model))
    index = next(s.index for s in elf.sections if s.sh_type == C.SHT_RELA and s.sh_info == elf.section(".text").index)
    if decoded_first:
        elf.relocation_table(index)
    got = elf.relocations_between(index, lo, lo + width)
    assert got == [r for r in ElfFile(write(model)).relocation_table(index) if lo <= r.r_offset < lo + width]
    with pytest.raises(KeyError):
        elf.relocations_between(elf.section(".text").index, 0, 1)  # type: ignore[union-attr]
