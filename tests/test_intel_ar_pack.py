"""Intel targets in super-archives (``devbin ar``) and Intel images in ``devbin pack``'s containers,
on zebins and SPIR-V compiled at test time from tests/sources/intel (tests/intelbuild.py), each claim
compared with ``ar``, ``nm``, ``llvm-readelf``, ``spirv-dis``, ``llvm-objdump --offloading`` and
``clang-offload-bundler`` on the same file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import devbin.superarchive as sa
from devbin.formats.elf.reader import open_elf
from devbin.targets.intel.vendor import INTEL

from tests.conftest import require_tool
from tests.intelbuild import SOURCES, build_intel, compile_cl
from tests.runners import cli, cli_err, cli_ok, run_tool


@pytest.fixture(scope="module")
def intel(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """build_intel's files and ``calls_spv``: calls.cl as SPIR-V (a kernel no pvc zebin here has)."""
    out = tmp_path_factory.mktemp("intel")
    paths = build_intel(out)
    paths["calls_spv"] = compile_cl(require_tool("ocloc"), out, SOURCES / "calls.cl", "pvc", "calls.spv",
                                       "-spv_only")
    return paths


def _kernels_per_readelf(path: Path) -> list[str]:
    """The kernels of a zebin as ``llvm-readelf`` shows them: FUNC symbols of a ``.text.<name>`` section of
    their own, in symbol-table order, with their binding."""
    sections = {}
    for line in run_tool(["llvm-readelf-19", "-SW", path]).stdout.splitlines():
        m = re.match(r"\s*\[\s*(\d+)\]\s+(\S+)", line)
        if m:
            sections[m[1]] = m[2]
    out = []
    for line in run_tool(["llvm-readelf-19", "-sW", path]).stdout.splitlines():
        f = line.split()
        if len(f) == 8 and f[3] == "FUNC" and sections.get(f[6]) == ".text." + f[7]:
            assert f[4] == "LOCAL"  # IGC writes kernels STB_LOCAL: ar s indexes none of them
            out.append(f[7])
    return out


def _spirv_entry_points(path: Path) -> list[str]:
    return re.findall(r'OpEntryPoint Kernel %\w+ "(\w+)"', run_tool(["spirv-dis", path]).stdout)


@pytest.fixture(scope="module")
def superarchive(intel: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """acm-g10 (kernels + calls), pvc (kernels), acm-g11 (spill only: it falls back to acm-g10) and spir64
    (the SPIR-V of kernels.cl and calls.cl), built by the CLI."""
    out = tmp_path_factory.mktemp("sa") / "intel.sa"
    cli_ok("ar", "create", "-o", out, "--target", f"acm-g10={intel['zebin']}", str(intel["calls"]),
           "--target", f"pvc={intel['zebin_pvc']}", "--target", f"acm-g11={intel['spill']}",
           "--target", f"spir64={intel['spv']}", str(intel["calls_spv"]))
    return out


def test_a_plain_ar_indexes_no_zebin_kernel(intel: dict[str, Path], tmp_path: Path) -> None:
    """Why the vendor names a zebin's symbols: GNU ar writes no index entry for a zebin (every symbol local)."""
    run_tool(["ar", "rcs", tmp_path / "plain.a", intel["zebin"], intel["calls"]])
    armap = run_tool(["nm", "--print-armap", tmp_path / "plain.a"]).stdout
    assert "Archive index" not in armap and _kernels_per_readelf(intel["zebin"]) == ["vadd", "reduce_slm", "priv2"]


def test_superarchive_is_a_valid_ar_with_each_member_once(intel: dict[str, Path], superarchive: Path,
                                                           tmp_path: Path) -> None:
    names = run_tool(["ar", "t", superarchive]).stdout.split()
    inputs = [intel[k] for k in ("zebin", "calls", "zebin_pvc", "spill", "spv", "calls_spv")]
    assert names == [sa.MANIFEST_NAME, *(p.name for p in inputs)]
    run_tool(["ar", "x", superarchive], tmp_path)
    for p in inputs:
        assert (tmp_path / p.name).read_bytes() == p.read_bytes()


def test_per_gpu_symbol_tables_are_the_kernels_readelf_and_spirv_dis_show(intel: dict[str, Path],
                                                                          superarchive: Path) -> None:
    lib = sa.open(superarchive.read_bytes())
    assert lib.targets() == ("acm-g10", "pvc", "acm-g11", "spir64")
    by_target = {t: [s.name for s in lib.symbols(t)] for t in lib.targets()}
    assert by_target["acm-g10"] == _kernels_per_readelf(intel["zebin"]) + _kernels_per_readelf(intel["calls"])
    assert by_target["pvc"] == _kernels_per_readelf(intel["zebin_pvc"])
    assert by_target["acm-g11"] == _kernels_per_readelf(intel["spill"]) == ["spill"]
    assert by_target["spir64"] == _spirv_entry_points(intel["spv"]) + _spirv_entry_points(intel["calls_spv"])
    # the '/' index lists the first target's, as GNU nm reads it
    armap = run_tool(["nm", "--print-armap", superarchive], check=False).stdout
    assert re.findall(r"^(\w+) in (\S+)$", armap, re.M) == (
        [(k, intel["zebin"].name) for k in _kernels_per_readelf(intel["zebin"])] + [("calls", intel["calls"].name)])


def test_default_chains_and_lookups_through_them(intel: dict[str, Path], superarchive: Path) -> None:
    doc = json.loads(cli_ok("ar", "list", superarchive, "--json"))
    chains = {t["name"]: t["chain"] for t in doc["targets"]}
    assert chains == {"acm-g10": ["acm-g10", "spir64"], "pvc": ["pvc", "spir64"],
                      "acm-g11": ["acm-g11", "acm-g10", "spir64"], "spir64": ["spir64"]}
    found = json.loads(cli_ok("ar", "symbols", superarchive, "--target", "acm-g11", "--chain", "--json"))
    where = {s["name"]: (s["level"], s["member"]) for s in found["symbols"]}
    assert where == {"spill": ("acm-g11", intel["spill"].name), "vadd": ("acm-g10", intel["zebin"].name),
                     "reduce_slm": ("acm-g10", intel["zebin"].name), "priv2": ("acm-g10", intel["zebin"].name),
                     "calls": ("acm-g10", intel["calls"].name)}
    res = json.loads(cli_ok("ar", "resolve", superarchive, "--target", "pvc", "-u", "vadd", "-u", "calls",
                            "--json"))
    assert [(p["level"], p["member"]) for p in res["pulled"]] == [("pvc", intel["zebin_pvc"].name),
                                                                  ("spir64", intel["calls_spv"].name)]


def test_extracted_target_is_the_input_archive(intel: dict[str, Path], superarchive: Path, tmp_path: Path) -> None:
    cli_ok("ar", "extract", superarchive, "--target", "acm-g10", "-o", tmp_path / "g10.a")
    assert run_tool(["ar", "t", tmp_path / "g10.a"]).stdout.split() == [intel["zebin"].name, intel["calls"].name]


def test_intel_fallback_chain_rule() -> None:
    others = ["pvc", "acm-g10", "spir64", "dg2", "12.56.5", "gfx90a", "sm_90"]
    assert INTEL.fallback_chain("acm-g11", others) == ["12.56.5", "acm-g10", "dg2", "spir64"]
    assert INTEL.fallback_chain("12.56.5", ["acm-g11", "12.55.8", "acm-g12"]) == ["acm-g11", "12.55.8"]
    assert INTEL.fallback_chain("pvc", others) == ["spir64"]
    assert INTEL.fallback_chain("dg2", ["acm-g10", "spir64-unknown-unknown"]) == ["spir64-unknown-unknown"]
    assert INTEL.fallback_chain("spir64", others) is None


def test_offered_symbols_of_a_zebin(intel: dict[str, Path]) -> None:
    elf = open_elf(intel["calls"].read_bytes())
    assert INTEL.offered_symbols(elf) == ("calls",)  # helper and helper2 are no kernels and not global


# --------------------------------------------------------------------------- pack


def _listed(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return json.loads(cli_ok("list", "--json", path))["images"]  # type: ignore[no-any-return]


def _objdump_offloading(version: int, path: Path) -> list[dict[str, str]]:
    """``llvm-objdump-<version> --offloading``: one dict per image (kind, arch, triple, producer)."""
    out = run_tool([f"llvm-objdump-{version}", "--offloading", path]).stdout
    return [dict(re.findall(r"^(kind|arch|triple|producer) +(.*?) *$", block, re.M))
            for block in out.split("OFFLOADING IMAGE")[1:]]


def _images_are(package: Path, inputs: list[Path], tmp_path: Path) -> None:
    """``devbin extract`` writes each image of ``package`` byte-exact as its input."""
    for i, (image, p) in enumerate(zip(_listed(package), inputs, strict=True)):
        folder = tmp_path / f"x{i}"
        cli_ok("extract", package, "--image", image["address"], "-o", folder)
        (written,) = folder.iterdir()
        assert written.read_bytes() == p.read_bytes()


def test_pack_zebins_and_spirv_into_an_offload_binary(intel: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "intel.offload"
    inputs = [intel["zebin"], intel["zebin_pvc"], intel["spv"]]
    cli_ok("pack", "-o", out, *(f"--image=file={p}" for p in inputs))
    listed = _listed(out)
    assert [(i["vendor"], i["kind"], i["arch"]) for i in listed] == [
        ("intel", "zebin", "dg2"), ("intel", "zebin", "pvc"), ("intel", "spirv", "")]  # spir64-*: Intel's JIT code
    assert [i["metadata"]["offload-kind"] for i in listed] == ["sycl"] * 3
    assert [i["metadata"]["image-kind"] for i in listed] == ["object", "object", "spirv"]
    generator = re.search(r"^; Generator: (.*)$", run_tool(["spirv-dis", intel["spv"]]).stdout, re.M)
    assert generator and listed[2]["metadata"]["Producer"] == generator[1]
    # LLVM 22 reads the SYCL offload kind (bit mask 8), LLVM 19 knows none
    want = [{"kind": "elf", "arch": "dg2", "triple": "spir64_gen-unknown-unknown"},
            {"kind": "elf", "arch": "pvc", "triple": "spir64_gen-unknown-unknown"},
            {"kind": "<none>", "triple": "spir64-unknown-unknown"}]
    for version, producer in ((22, "sycl"), (19, "none")):
        seen = _objdump_offloading(version, out)
        assert [{k: v for k, v in d.items() if k != "producer" and (k != "arch" or v)} for d in seen] == want
        assert {d["producer"] for d in seen} == {producer}
    _images_are(out, inputs, tmp_path)


def test_offload_binary_of_a_sycl_image_reads_as_clang_offload_packagers(intel: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    """clang-offload-packager-22 given the same zebin, triple, arch and kind=sycl: the same entry as devbin's
    but for the image kind (the packager takes it from the file name's extension: a .zebin is none)."""
    run_tool(["clang-offload-packager-22", "-o", tmp_path / "llvm.offload",
              f"--image=file={intel['zebin_pvc']},triple=spir64_gen-unknown-unknown,arch=pvc,kind=sycl"])
    cli_ok("pack", "-o", tmp_path / "devbin.offload", f"--image=file={intel['zebin_pvc']}")
    ours, theirs = _listed(tmp_path / "devbin.offload"), _listed(tmp_path / "llvm.offload")
    keys = ("vendor", "kind", "arch", "size")
    assert [{k: i[k] for k in keys} for i in ours] == [{k: i[k] for k in keys} for i in theirs]
    for key in ("triple", "arch", "offload-kind"):
        assert ours[0]["metadata"][key] == theirs[0]["metadata"][key]


def test_pack_zebins_and_spirv_into_a_bundle(intel: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "intel.bundle"
    inputs = [intel["zebin"], intel["zebin_pvc"], intel["spv"]]
    cli_ok("pack", "-o", out, "--format", "bundle", *(f"--image=file={p}" for p in inputs))
    listed = _listed(out)
    ids = ["sycl-spir64_gen-unknown-unknown--dg2", "sycl-spir64_gen-unknown-unknown--pvc",
           "sycl-spir64-unknown-unknown--"]
    assert [i["metadata"]["bundle-id"] for i in listed] == ids
    for version in (19, 22):
        bundler = f"clang-offload-bundler-{version}"
        assert sorted(run_tool([bundler, "-list", "-type=o", f"-input={out}"]).stdout.split()) == sorted(
            [*ids, "host-x86_64-unknown-linux-gnu-"])
        # upstream bundlers list a SYCL entry but refuse to unbundle it (the kind is intel/llvm's)
        refused = run_tool([bundler, "-unbundle", "-type=o", f"-input={out}", f"-targets={ids[1]}",
                            f"-output={tmp_path / 'u.zebin'}"], check=False)
        assert refused.returncode != 0 and "unknown offloading kind 'sycl'" in refused.stderr
    _images_are(out, inputs, tmp_path)


def test_pack_ocloc_fat_archive_is_byte_exact_with_ocloc(intel: dict[str, Path], tmp_path: Path) -> None:
    """ocloc's own fat archive (acm-g10, pvc, generic_ir from kernels.spv) taken apart with ar x and packed
    again from its zebins and the SPIR-V: the same bytes."""
    run_tool(["ar", "x", intel["fat"]], tmp_path)
    out = tmp_path / "devbin.ar"
    cli_ok("pack", "-o", out, "--format", "ocloc", f"--image=file={tmp_path / '64.12.55.8'},TargetID=acm-g10",
           f"--image=file={tmp_path / '64.12.60.7'}", f"--image=file={intel['spv']}")
    assert out.read_bytes() == intel["fat"].read_bytes()
    assert run_tool(["ar", "t", out]).stdout.split() == ["pad_0", "64.12.55.8", "pad_1", "64.12.60.7", "pad_2",
                                                           "generic_ir"]
    # without TargetID= the 2022 zebin names only its family: ocloc's name for that is 64.dg2
    cli_ok("pack", "-o", tmp_path / "family.ar", "--format", "ocloc", f"--image=file={intel['zebin']}")
    assert run_tool(["ar", "t", tmp_path / "family.ar"]).stdout.split() == ["pad_0", "64.dg2"]


def test_pack_ocloc_refuses_what_it_cannot_hold(intel: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = cli_err("pack", "-o", tmp_path / "x.ar", "--format", "ocloc", f"--image=file={intel['zebin']}",
                           f"--image=file={intel['spill']}")
    assert code == 1 and "64.dg2" in err and not (tmp_path / "x.ar").exists()
    code, _, err = cli_err("pack", "-o", tmp_path / "x.ar", "--format", "ocloc", f"--image=file={intel['zebin']}",
                           f"--image=file={intel['spv']}", f"--image=file={intel['calls_spv']}")
    assert code == 1 and "a second SPIR-V module" in err


def test_pack_a_zebin_into_a_wrapped_image(intel: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "pvc.wrapped"
    cli_ok("pack", "-o", out, "--format", "wrapped", f"--image=file={intel['zebin_pvc']}")
    (image,) = _listed(out)
    assert (image["vendor"], image["kind"], image["arch"]) == ("intel", "zebin", "pvc")
    assert image["metadata"]["VendorId"] == "0x8086"
    _images_are(out, [intel["zebin_pvc"]], tmp_path)


_ZEINFO = b"""---
version: '1.53'
kernels:
  - name: k
    execution_env:
      grf_count: 128
      simd_size: 16
functions:
  - name: f
    execution_env:
      grf_count: 128
      simd_size: 16
...
"""


def _zebin_with_relocation_symbol(kernel: str) -> bytes:
    """A zebin as IGC 2025+ writes them (described structurally): kernel ``kernel`` (local), external function
    ``f`` (global), and an undefined reference to the runtime's ``__INTEL_PATCH_CROSS_THREAD_OFFSET_OFF_R0``."""
    from devbin.formats.elf import constants as C
    from devbin.formats.elf.model import ElfModel, RelocSpec, SectionSpec, SymbolSpec
    from devbin.formats.elf.writer import write

    m = ElfModel(e_type=C.ET_REL, machine=C.EM_INTELGT, abiversion=1)
    code = C.SHF_ALLOC | C.SHF_EXECINSTR
    m.sections = [SectionSpec(f".text.{kernel}", flags=code, data=bytes(256)),
                  SectionSpec(".text", flags=code, data=bytes(64)),
                  SectionSpec(".ze_info", sh_type=0xFF000011, data=_ZEINFO.replace(b"name: k", b"name: " +
                                                                                    kernel.encode()))]
    m.symbols = [SymbolSpec(kernel, 0, 160, bind=C.STB_LOCAL, type=C.STT_FUNC, section=f".text.{kernel}"),
                 SymbolSpec("f", 0, 48, type=C.STT_FUNC, section=".text"),
                 SymbolSpec("__INTEL_PATCH_CROSS_THREAD_OFFSET_OFF_R0")]
    m.relocations = {f".text.{kernel}": [RelocSpec(0x4C, "__INTEL_PATCH_CROSS_THREAD_OFFSET_OFF_R0", 2, 0)]}
    m.use_rela = False
    return write(m)


def test_resolve_a_zebin_kernel_and_the_runtimes_relocation_symbol(intel: dict[str, Path], superarchive: Path,
                                                                   tmp_path: Path) -> None:
    # every kernel of a pulled zebin is defined by it: the second and third pull nothing more
    res = json.loads(cli_ok("ar", "resolve", superarchive, "--target", "acm-g11", "-u", "vadd", "-u", "reduce_slm",
                            "-u", "priv2", "--json"))
    assert [(p["level"], p["member"]) for p in res["pulled"]] == [("acm-g10", intel["zebin"].name)]
    assert res["undefined"] == []
    # the relocation symbol IGC leaves undefined is the loader's, not an undefined symbol of the library
    (tmp_path / "k.zebin").write_bytes(_zebin_with_relocation_symbol("k"))
    assert INTEL.offered_symbols(open_elf((tmp_path / "k.zebin").read_bytes())) == ("k", "f")
    lib = tmp_path / "r.sa"
    cli_ok("ar", "create", "-o", lib, "--target", f"pvc={tmp_path / 'k.zebin'}")
    sym = "__INTEL_PATCH_CROSS_THREAD_OFFSET_OFF_R0"
    code, out = cli("ar", "resolve", lib, "--target", "pvc", "-u", "k", "--explain", sym, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["undefined"] == [] and [p["member"] for p in doc["pulled"]] == ["k.zebin"]
    assert [(lk["outcome"], lk["defined_by"], lk["needed_by"]) for lk in doc["explain"][sym]] == [
        ("defined", "<loader>", "pvc(k.zebin)")]


def test_generic_ir_with_build_options_reads_with_readelf(intel: dict[str, Path], tmp_path: Path) -> None:
    """generic_ir as current ocloc writes it, with the first device's options (DPC++ 2025/2026 fat archives have
    them; Debian's 2022 ocloc writes none): llvm-readelf reads both sections back."""
    from devbin.targets.intel.fatarchive import generic_ir

    spirv = intel["spv"].read_bytes()
    (tmp_path / "generic_ir").write_bytes(generic_ir(spirv, b" -cl-fast-relaxed-math"))
    out = run_tool(["llvm-readelf-19", "-hSW", tmp_path / "generic_ir"]).stdout
    sections = re.findall(r"\] (SPIRV Object|BuildOptions|\.shstrtab) ", out)
    assert sections == ["SPIRV Object", "BuildOptions", ".shstrtab"]
    assert "Type:                              Processor Specific: (ff02)" in out
    dump = run_tool(["llvm-objcopy-19", "--dump-section", f"BuildOptions={tmp_path / 'opts'}",
                     "--dump-section", f"SPIRV Object={tmp_path / 'spv'}", tmp_path / "generic_ir", tmp_path / "copy"])
    assert dump.returncode == 0
    assert (tmp_path / "opts").read_bytes() == b" -cl-fast-relaxed-math" and (tmp_path / "spv").read_bytes() == spirv
