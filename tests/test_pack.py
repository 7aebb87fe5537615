"""devbin pack, the wrapped single image, the PTX policy and option checks, against the real tools.

Packages devbin writes are read by llvm-objdump-19 --offloading / clang-offload-packager-19,
cuobjdump and clang-offload-bundler-19, with image bytes identical both ways.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devbin.errors import DeviceBinaryError, UsageError
from devbin.formats.wrapped import parse_wrapped, write_wrapped
from devbin.images import Address, Image, scan
from devbin.packaging import PackInput, PackResult, check_consistency, choose_ptx, pack
from devbin.packaging.consistency import ImageSettings, settings_from_options
from devbin.packaging.facts import loose_image, relocatable

from tests.conftest import PTX_DIR, require_tool
from tests.runners import cli, cli_err, cli_ok, run_tool


@pytest.fixture(scope="module")
def images(cubins: dict[str, Path], amdgpu_objects: dict[str, Path]) -> dict[str, Path]:
    return {"sm_80": cubins["sm_80_exec"], "sm_90": cubins["sm_90_exec"], "ptx80": PTX_DIR / "kernels-whole.sm_80.ptx",
            "ptx90": PTX_DIR / "kernels-whole.sm_90.ptx", "gfx90a": amdgpu_objects["gfx90a_obj"],
            "gfx942": amdgpu_objects["gfx942_obj"]}


def test_offload_package_read_by_llvm(images: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "app.offload"
    specs = [f"file={images[k]}" for k in ("sm_80", "sm_90", "ptx80", "ptx90", "gfx90a")]
    specs[4] += ",Team=kernels"
    assert cli("pack", "-o", str(out), *[a for s in specs for a in ("--image", s)])[0] == 0
    listing = run_tool([require_tool("llvm-objdump-19"), "--offloading", out]).stdout
    blocks = [b for b in listing.split("OFFLOADING IMAGE")[1:]]
    archs = [next(line.split()[1] for line in b.splitlines() if line.startswith("arch")) for b in blocks]
    assert archs == ["sm_80", "sm_90", "compute_90", "gfx90a"]  # --ptx highest left compute_80 out
    kinds = [next(line.split()[1] for line in b.splitlines() if line.startswith("kind")) for b in blocks]
    assert kinds == ["cubin", "cubin", "ptx", "elf"]
    # The packager extracts the same bytes, and devbin reads the metadata back.
    packager = require_tool("clang-offload-packager-19")
    x = tmp_path / "x.o"
    run_tool([packager, out, f"--image=file={x},arch=gfx90a"])
    assert x.read_bytes() == images["gfx90a"].read_bytes()
    found = list(scan([out]))
    md = dict(found[3].metadata)
    assert md["Team"] == "kernels" and md["TargetID"] == "gfx90a" and md["VendorId"] == "0x1002"
    assert md["VendorName"] == "AMD" and md["Producer"].startswith(("clang", "Debian clang", "Ubuntu clang"))
    cub = dict(found[0].metadata)
    assert cub["VendorName"] == "NVIDIA" and "ptxas" in cub["Producer"] and "sm_80" in cub["CompileOptions"]
    assert {"Producer", "CompileOptions", "LinkOptions", "TargetID", "VendorId", "VendorName"} <= set(cub)
    assert found[0].data() == images["sm_80"].read_bytes()


def test_fatbin_package_read_by_cuobjdump(images: dict[str, Path], tmp_path: Path) -> None:
    cuobjdump = require_tool("cuobjdump")
    out = tmp_path / "app.fatbin"
    res = pack([images["sm_80"], images["sm_90"], images["ptx80"], images["ptx90"]], format="fatbin", ptx="all")
    out.write_bytes(res.data)
    listing = run_tool([cuobjdump, "-lelf", "-lptx", out]).stdout
    assert listing.count("ELF file") == 2 and listing.count("PTX file") == 2
    assert any("not stored" in w for w in res.warnings)  # Producer etc. cannot go into a fatbin
    run_tool([cuobjdump, "-xelf", "all", str(out)], tmp_path)
    got = sorted(p.read_bytes() for p in tmp_path.glob("*.cubin"))
    assert got == sorted([images["sm_80"].read_bytes(), images["sm_90"].read_bytes()])
    with pytest.raises(UsageError):
        pack([images["gfx90a"]], format="fatbin")


def test_bundle_package_read_by_bundler(images: dict[str, Path], tmp_path: Path) -> None:
    bundler = require_tool("clang-offload-bundler-19")
    for compression in ("none", "zstd"):
        out = tmp_path / f"app.{compression}.hipfb"
        out.write_bytes(pack([images["gfx90a"], images["gfx942"]], format="bundle", compression=compression).data)
        ids = set(run_tool([bundler, "--list", "--type=o", f"--input={out}"]).stdout.split())
        assert {"hipv4-amdgcn-amd-amdhsa--gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx942"} <= ids
        x = tmp_path / "x.o"
        run_tool([bundler, "--unbundle", "--type=o", f"--input={out}", "--targets=hipv4-amdgcn-amd-amdhsa--gfx942",
                  f"--output={x}"])
        assert x.read_bytes() == images["gfx942"].read_bytes()


def test_wrapped_image_everywhere(images: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "k.wrapped"
    cli_ok("pack", "--format", "wrapped", "-o", str(out), "--image", f"file={images['sm_90']},Team=x")
    w = parse_wrapped(out.read_bytes())
    assert bytes(w.image) == images["sm_90"].read_bytes() and w.get("Team") == "x"
    assert w.get("VendorName") == "NVIDIA" and w.get("TargetID") == "sm_90"
    # Every command takes it, and gives what it gives for the plain cubin.
    for cmd in (["resources"], ["callgraph"], ["list", "--json"]):
        plain = cli_ok(*cmd, str(images["sm_90"]))
        wrapped = cli_ok(*cmd, str(out))
        if cmd[0] == "list":
            w_img, p_img = json.loads(wrapped)["images"][0], json.loads(plain)["images"][0]
            assert w_img["kind"] == p_img["kind"] == "cubin" and w_img["metadata"]["Team"] == "x"
        else:
            assert wrapped.replace(str(out), str(images["sm_90"])) == plain
    text = cli_ok("inspect", str(out))
    assert text.startswith("Metadata:\n  Producer: ") and "\n  Team: x\n" in text and "\n  VendorId: 0x10de\n" in text
    assert json.loads(cli_ok("inspect", "--json", str(out)))["images"][0]["metadata"]["Team"] == "x"
    cli_ok("extract", "-o", str(tmp_path / "x"), str(out))
    extracted = [p for p in (tmp_path / "x").rglob("*") if p.is_file()]
    assert [p.read_bytes() for p in extracted] == [images["sm_90"].read_bytes()]
    with pytest.raises(UsageError):
        pack([images["sm_80"], images["sm_90"]], format="wrapped")
    # annotate wraps its output again, with the input's metadata; the bare cubin gets the same sections.
    cli_ok("annotate", str(out), "-o", str(tmp_path / "a.wrapped"))
    cli_ok("annotate", str(images["sm_90"]), "-o", str(tmp_path / "a.cubin"))
    aw = parse_wrapped((tmp_path / "a.wrapped").read_bytes())
    assert aw.metadata == w.metadata and bytes(aw.image) == (tmp_path / "a.cubin").read_bytes()
    assert bytes(aw.image) != bytes(w.image)


@given(st.binary(max_size=300), st.lists(st.tuples(st.text(min_size=1, max_size=20), st.text(max_size=40)),
                                         max_size=8, unique_by=lambda p: p[0]))
def test_property_wrapped_round_trip(image: bytes, pairs: list[tuple[str, str]]) -> None:
    data = write_wrapped(image, pairs)
    w = parse_wrapped(data)
    assert bytes(w.image) == image and list(w.metadata) == pairs and w.size == len(data)
    assert w.header_size % 16 == 0


def test_wrapped_bad_input() -> None:
    good = write_wrapped(b"\x7fELF", [("a", "b")])
    for bad in (good[:20], good[:-1], good[:8] + b"\x02" + good[9:], good[:32] + b"\x7f" + good[33:],
                good[:0x0C] + b"\x11" + good[0x0D:]):
        with pytest.raises(DeviceBinaryError):
            parse_wrapped(bad)
    with pytest.raises(UsageError):
        write_wrapped(b"", [("a", "1"), ("a", "2")])


def _facts(kind: str, arch: str) -> Image:
    return Image(Address(f"{arch}.{kind}"), "nvidia", kind, arch, 1, 1, "none", "file", "", 0)


@pytest.mark.parametrize(("policy", "kept_ptx", "warns"), [
    ("highest", ["compute_90"], False), ("lowest", ["compute_80"], False), ("all", ["compute_80", "compute_90a",
     "compute_90"], False), ("none", [], True), ("sm_80", ["compute_80"], False)])
def test_ptx_policy(policy: str, kept_ptx: list[str], warns: bool) -> None:
    facts = [_facts("cubin", "sm_80"), _facts("cubin", "sm_90"), _facts("ptx", "compute_80"),
             _facts("ptx", "compute_90a"), _facts("ptx", "compute_90")]
    choice = choose_ptx(facts, policy if policy in ("highest", "lowest", "all", "none") else frozenset({80}))
    assert [facts[i].arch for i in choice.keep if facts[i].kind == "ptx"] == kept_ptx
    assert bool(choice.warnings) == warns
    # Only arch-specific PTX: no GPU newer than sm_90 can JIT it.
    assert choose_ptx([_facts("cubin", "sm_90"), _facts("ptx", "compute_90a")], "highest").warnings


def test_option_settings_and_findings(tmp_path: Path) -> None:
    assert settings_from_options("-arch sm_90 -G") == {"relocatable": None, "debug": True, "fast_math": None,
                                                      "ftz": None}
    assert settings_from_options("-O 3 -rdc=true --use_fast_math")["ftz"] is True
    assert settings_from_options("-fgpu-rdc -fno-gpu-flush-denormals-to-zero")["ftz"] is False
    imgs = [ImageSettings("a.o", "a", "gfx90a:xnack+", "amdgpu", code_object_version=5),
            ImageSettings("b.o", "b", "gfx90a:xnack-", "amdgpu", code_object_version=4),
            ImageSettings("c.cubin", "a", "sm_90", "cubin", relocatable=True, ftz=True),
            ImageSettings("d.cubin", "b", "sm_90", "cubin", relocatable=False, ftz=False)]
    options = {f.option for f in check_consistency(imgs)}
    assert options == {"relocatable", "ftz", "code-object-version", "xnack/sramecc", "arch"}
    assert not check_consistency(imgs[:1])
    # Real cubins: ptxas -g vs -O3 from the same PTX, recorded in .note.nv.tkinfo.
    ptxas = require_tool("ptxas")
    for name, flag in (("g", "-g"), ("o", "-O3")):
        run_tool([ptxas, "-arch", "sm_90", flag, str(PTX_DIR / "kernels-whole.sm_90.ptx"), "-o",
                  str(tmp_path / f"{name}.cubin")])
    res = pack([PackInput((tmp_path / "g.cubin").read_bytes(), "g.cubin", (("tu", "a"),)),
                PackInput((tmp_path / "o.cubin").read_bytes(), "o.cubin", (("tu", "b"),))])
    assert [f.option for f in res.findings] == ["debug"]
    with pytest.raises(UsageError, match="debug"):
        pack([PackInput((tmp_path / "g.cubin").read_bytes(), "g.cubin"),
              PackInput((tmp_path / "o.cubin").read_bytes(), "o.cubin")], strict=True)
    g = loose_image((tmp_path / "g.cubin").read_bytes(), "g.cubin")
    assert relocatable(g) is False and g.kind == "cubin" and g.arch == "sm_90" and g.triple == "nvptx64-nvidia-cuda"


def test_select_from_a_packed_offload_binary(images: dict[str, Path]) -> None:
    import devbin
    data = pack([images[k] for k in ("sm_80", "sm_90", "ptx90", "gfx90a")]).data
    picks = {dev: devbin.select(data, dev) for dev in ("sm_86", "sm_90", "sm_120", "gfx90a:xnack-")}
    assert {d: (s.chosen.arch if s.chosen else None, s.jit) for d, s in picks.items()} == {
        "sm_86": ("sm_80", False), "sm_90": ("sm_90", False), "sm_120": ("compute_90", True),
        "gfx90a:xnack-": ("gfx90a", False)}
    with pytest.raises(UsageError, match="sm_80"):
        devbin.select(data, "sm_75")


# --------------------------------------------------------------------------- translation units, LTO-IR, inputs


def test_ptx_policy_per_translation_unit(images: dict[str, Path], tmp_path: Path) -> None:
    # Two units, each with its own SASS and its only PTX: both PTX stay (the review's command).
    out = tmp_path / "tu.offload"
    argv = ["pack", "-o", str(out)]
    for key, tu in (("sm_80", "a"), ("ptx80", "a"), ("sm_90", "b"), ("ptx90", "b")):
        argv += ["--image", f"file={images[key]},tu={tu}"]
    code, printed, err = cli_err(*argv)
    assert code == 0 and "left out" not in printed and "no PTX" not in err
    assert [i.arch for i in scan([out])] == ["sm_80", "compute_80", "sm_90", "compute_90"]
    # The same images as loose images share one unit: only the highest PTX stays.
    res = pack([images[k] for k in ("sm_80", "ptx80", "sm_90", "ptx90")])
    assert [p.image.arch for p in res.dropped] == ["compute_80"]
    # The newer-GPU warning is per unit: unit a has SASS and no PTX of its own.
    res = pack([PackInput(images["sm_80"].read_bytes(), "a.cubin", (("tu", "a"),)),
                PackInput(images["sm_90"].read_bytes(), "b.cubin", (("tu", "b"),)),
                PackInput(images["ptx90"].read_bytes(), "b.ptx", (("tu", "b"),))])
    assert [w for w in res.warnings if "no PTX" in w] == [
        "translation unit a: no PTX that a GPU newer than the highest SASS (sm_80) could JIT: this translation "
        "unit's code runs only on the GPUs its SASS covers"]
    # A listed policy: an arch no unit has is an error, one some unit lacks a warning.
    groups = ["a", "a", "b"]
    facts = [_facts("cubin", "sm_80"), _facts("ptx", "compute_80"), _facts("ptx", "compute_90")]
    choice = choose_ptx(facts, frozenset({80}), groups)
    assert choice.keep == (0, 1) and choice.warnings == ("translation unit b: has no PTX for compute_80",)
    with pytest.raises(UsageError, match="compute_75"):
        choose_ptx(facts, frozenset({75}), groups)


def _nvcc(tmp_path: Path, *args: str | Path) -> None:
    run_tool([require_tool("nvcc"), *[str(a) for a in args]], tmp_path)


def test_two_nvcc_fatbins_keep_each_units_ptx(tmp_path: Path) -> None:
    from tests.conftest import SOURCES
    for name, src in (("k", "kernels.cu"), ("e", "extfn.cu")):
        _nvcc(tmp_path, "-fatbin", "-rdc=true", "-gencode", "arch=compute_80,code=[sm_80,compute_80]",
              "-o", f"{name}.fatbin", SOURCES / src)
    res = pack([tmp_path / "k.fatbin", tmp_path / "e.fatbin"], format="fatbin")
    assert sorted((p.tu, p.image.arch) for p in res.images if p.image.kind == "ptx") == [
        (str(tmp_path / "e.fatbin"), "compute_80"), (str(tmp_path / "k.fatbin"), "compute_80")]
    assert not res.dropped
    # nvcc's PTX entries say --compile-only: relocatable PTX is named in a warning.
    assert sum("relocatable PTX" in w for w in res.warnings) == 2
    # The fatbin written carries each image's CompileOptions in its entry's options string.
    from devbin.formats.fatbin import parse_fatbin
    entries = parse_fatbin(res.data).entries
    ptx_entries = [e for e in entries if e.kind_name == "ptx"]
    assert ptx_entries and all("--compile-only" in e.options for e in ptx_entries)
    cubin_entries = [e for e in entries if e.kind_name == "elf"]
    opts = [p.get("CompileOptions") for p in res.images if p.image.kind == "cubin"]
    assert all(opts) and [e.options for e in cubin_entries] == opts


@pytest.fixture(scope="module")
def dlto(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``nvcc -dlto -dc`` objects: default (fatbinary compresses LTO-IR), plain, and --use_fast_math."""
    from tests.conftest import SOURCES
    out = tmp_path_factory.mktemp("dlto")
    builds = {"lto": [], "plain": ["-Xfatbin", "-compress=false"], "fast": ["--use_fast_math"]}
    for name, extra in builds.items():
        _nvcc(out, "-dlto", "-dc", "-arch=sm_90", *extra, "-o", f"{name}.o", SOURCES / "kernels.cu")
    return {name: out / f"{name}.o" for name in builds}


def test_pack_dlto_object(dlto: dict[str, Path], tmp_path: Path) -> None:
    from devbin.formats.fatbin import constants as FC
    from devbin.formats.fatbin import parse_fatbin
    from devbin.packaging.facts import LTOIR_MAGIC
    # What the real files carry: LTO-IR plain starts with NVIDIA's magic; compressed it is no zstd frame.
    plain = [i for i in scan([dlto["plain"]], all=True) if i.kind == "lto-ir"]
    assert len(plain) == 1 and bytes(plain[0].data()).startswith(LTOIR_MAGIC)
    stored = [i for i in scan([dlto["lto"]], all=True) if i.kind == "lto-ir"]
    assert len(stored) == 1 and stored[0].entry is not None and stored[0].entry.compression == "zstd"
    assert not bytes(stored[0].entry.raw_payload).startswith(b"\x28\xb5\x2f\xfd")
    with pytest.raises(DeviceBinaryError, match="NVIDIA's own encoding"):
        stored[0].entry.data()
    # The image's bytes (what extract writes) are the entry as stored, in a one-entry fatbin.
    assert stored[0].compression == "nvidia-opaque"
    (copied,) = parse_fatbin(stored[0].data()).entries
    assert bytes(copied.payload_area) == bytes(stored[0].entry.payload_area)
    assert copied.reserved == stored[0].entry.reserved != 0  # nvJitLink needs it (tests/test_nvidia_fidelity.py)
    # The review's command: the default container takes it (as a one-entry fatbin holding the entry as stored).
    out = tmp_path / "x.offload"
    assert cli("pack", "-o", str(out), "--image", f"file={dlto['lto']}")[0] == 0
    found = list(scan([out]))
    assert [(i.get("image-kind"), i.arch) for i in found] == [("ptx", "compute_90"), ("fatbinary", "compute_90")]
    inner = parse_fatbin(found[1].data()).entries
    assert len(inner) == 1 and bytes(inner[0].payload_area) == bytes(stored[0].entry.payload_area)
    assert (inner[0].flags, inner[0].uncompressed_size, inner[0].reserved) == (
        stored[0].entry.flags, stored[0].entry.uncompressed_size, stored[0].entry.reserved)
    # A fatbin copies the entry as stored, options string included; plain LTO-IR goes in decoded.
    res = pack([dlto["lto"], dlto["plain"]], format="fatbin")
    lto = [e for e in parse_fatbin(res.data).entries if e.kind == FC.KIND_LTOIR]
    assert plain[0].entry is not None
    assert [e.options for e in lto] == [stored[0].entry.options, plain[0].entry.options.strip()]
    assert bytes(lto[0].payload_area) == bytes(stored[0].entry.payload_area)
    assert lto[1].data() == plain[0].data()
    assert [p.image.arch for p in res.images if p.image.kind == "lto-ir"] == ["compute_90", "compute_90"]
    assert [p.to_dict()["kind"] for p in res.images].count("lto-ir") == 2


def test_fast_math_and_relocatable_from_real_dlto(dlto: dict[str, Path]) -> None:
    # The LTO-IR entries' options string is NVVM's: -ftz=0 -prec_div=1 -prec_sqrt=1 -fmad=1 by default,
    # -ftz=1 -prec_div=0 -prec_sqrt=0 with --use_fast_math; the PTX entries say --compile-only.
    res = check_pack([dlto["lto"], dlto["fast"]])
    assert {f.option for f in res.findings} == {"fast-math", "ftz"}
    fast = next(f for f in res.findings if f.option == "fast-math")
    lto_ir = {k: next(str(i.address) for i in scan([dlto[k]], all=True) if i.kind == "lto-ir") for k in ("lto", "fast")}
    assert fast.images == (lto_ir["lto"], lto_ir["fast"])  # the images' addresses
    assert all(relocatable(p.image) for p in res.images if p.image.kind == "ptx")
    assert not check_pack([dlto["lto"], dlto["plain"]]).findings


def check_pack(paths: list[Path]) -> PackResult:
    from devbin.packaging import check
    return check(paths)


def test_check_only_cli(dlto: dict[str, Path], tmp_path: Path) -> None:
    code, printed, err = cli_err("pack", "--check-only", "--image", f"file={dlto['lto']}", "--image",
                                 f"file={dlto['fast']}")
    assert code == 0 and "would be packed" in printed and "fast-math" in err and not list(tmp_path.iterdir())
    code, _, err = cli_err("pack", "--check-only", "--strict", "--image", f"file={dlto['lto']}", "--image",
                           f"file={dlto['fast']}")
    assert code != 0 and "contradictory options (--strict): fast-math" in err


def test_pack_bitcode_and_annotated_object(cubins: dict[str, Path], tmp_path: Path) -> None:
    # LLVM bitcode, from clang-19: kind only; the target keys come from the user.
    clang = require_tool("clang-19")
    from tests.conftest import SOURCES
    bc = tmp_path / "k.bc"
    run_tool([clang, "-c", "-emit-llvm", "--target=amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib",
              "-x", "cl", "-cl-std=CL2.0", "-o", str(bc), str(SOURCES / "amdgpu_kernels.cl")])
    assert loose_image(bc.read_bytes(), "k.bc").kind == "bitcode"
    out = tmp_path / "bc.offload"
    res = pack([PackInput(bc.read_bytes(), "k.bc", (("triple", "amdgcn-amd-amdhsa"), ("TargetID", "gfx90a")))])
    out.write_bytes(res.data)
    listing = run_tool([require_tool("llvm-objdump-19"), "--offloading", out]).stdout
    assert "llvm ir" in listing and "gfx90a" in listing
    found = list(scan([out]))
    assert found[0].data() == bc.read_bytes() and dict(found[0].metadata)["TargetID"] == "gfx90a"
    # A devbin-annotated cubin: its .devbin.meta keys fill what the cubin leaves out.
    from dataclasses import replace

    from devbin.formats.devsec.elf import annotate
    from devbin.formats.elf.reader import ElfFile
    from devbin.importers import import_code_object
    elf = ElfFile(cubins["sm_90_exec"].read_bytes())
    obj = import_code_object(elf)
    obj = replace(obj, metadata=obj.metadata.set("link-options", "-lfoo").set("compile-options", "-O3 -lineinfo"))
    res = pack([PackInput(annotate(elf, obj), "ann.cubin", (("Extra", "1"),))])
    md = dict(res.images[0].metadata)
    assert md["LinkOptions"] == "-lfoo" and md["Extra"] == "1" and md["TargetID"] == "sm_90"
    # The cubin's own facts come first: ptxas and its options from .note.nv.tkinfo.
    assert "ptxas" in md["Producer"] and md["CompileOptions"] != "-O3 -lineinfo"


def test_consistency_rules_per_vendor() -> None:
    """The code-object-version and target-feature rules apply to a vendor's code objects (AMD's carry them);
    images of different vendors are never compared (an NVIDIA and an AMD image may differ in -rdc)."""
    amd = [ImageSettings("a", "t1", "gfx90a:xnack+", "amdgpu", code_object_version=4, relocatable=True),
           ImageSettings("b", "t2", "gfx90a:xnack-", "amdgpu", code_object_version=5, relocatable=True)]
    nv = [ImageSettings("c", "t1", "sm_90", "cubin", relocatable=False), ImageSettings("d", "t2", "sm_90", "cubin")]
    found = {f.option: f.message for f in check_consistency([*amd, *nv])}
    assert found["code-object-version"] == "AMDGPU code object versions differ — v4: a; v5: b"
    assert found["xnack/sramecc"].startswith("translation units build gfx90a with different target features")
    assert "relocatable" not in found  # -rdc differs only between vendors
    assert found["arch"] == "translation units target different architectures — t1: gfx90a:xnack+, sm_90; " \
                           "t2: gfx90a:xnack-, sm_90"
