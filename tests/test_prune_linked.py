"""devbin prune on finished files: shared libraries and executables shrink by whole pages, wheels and folders.

Everything is built at test time with nvcc (sm_75, sm_80, sm_90 of a small kernel; static and
shared cudart), clang-offload-bundler-19 + the linker (a host library with ``.hip_fatbin``), and
checked with the vendors' tools: cuobjdump -all -lelf -lptx, clang-offload-bundler -list, readelf -a -W,
llvm-readelf-19 -a, nm -D, ctypes.CDLL, a link with the pruned library, pip install --target.
"""

from __future__ import annotations

import base64
import csv
import ctypes
import hashlib
import io
import json
import sys
import zipfile
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from conftest import require_tool
from devbin.cli import schema_cmd
from devbin.errors import OutputError, UsageError
from devbin.formats.elf import constants as EC
from devbin.formats.elf.pages import remove_pages
from devbin.formats.elf.reader import ElfFile
from devbin.images import Image, scan_bytes
from devbin.packaging.prune_packages import BACKUP_SUFFIX, prune_tree, prune_wheel, record_hash
from devbin.packaging.pruning import prune, prune_file

from tests.runners import cli, cli_err, cli_ok, run_tool
from tests.wheelbuild import build_wheel

ARCHS = ["-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80",
         "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
# Large enough that each architecture's cubin spans several pages (60 KB), so whole pages go.
LIB_CU = r"""
template <int N> __global__ void ka(float *p) {
#pragma unroll
  for (int i = 0; i < 384; ++i) p[threadIdx.x + i * N] = p[threadIdx.x + i * 7] * (i + N) + 1.0f;
}
template __global__ void ka<1>(float *);
extern "C" int launch_a(float *p) { ka<1><<<1, 32>>>(p); return (int)cudaDeviceSynchronize(); }
extern "C" int host_add(int a, int b) { return a + b; }
"""
EXE_CU = r"""
#include <cstdio>
__global__ void k(float *p) {
#pragma unroll
  for (int i = 0; i < 384; ++i) p[threadIdx.x + i * 3] = p[threadIdx.x + i * 5] * i + 2.0f;
}
int main(int argc, char **) {
  printf("hello\n");
  if (argc < 2) return 0;
  float *d; cudaMalloc(&d, 1 << 16); k<<<1, 32>>>(d); return cudaDeviceSynchronize();
}
"""
USE_C = r"""
#include <stdio.h>
int host_add(int, int);
int main(void) { printf("%d\n", host_add(20, 22)); return 0; }
"""
PAGE = 4096


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = require_tool("nvcc")
    out = tmp_path_factory.mktemp("prune_linked")
    (out / "lib.cu").write_text(LIB_CU)
    (out / "k.cu").write_text(EXE_CU)
    run_tool([nvcc, *ARCHS, "-shared", "-Xcompiler", "-fPIC", "lib.cu", "-o", "libstatic.so"], out)
    run_tool([nvcc, *ARCHS, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "lib.cu", "-o", "libshared.so"], out)
    run_tool([nvcc, *ARCHS, "k.cu", "-o", "k.exe"], out)
    # position-dependent: the wrapper holds the fatbin's address with no relocation
    run_tool([nvcc, *ARCHS, "-Xcompiler", "-fno-pie", "-Xlinker", "-no-pie", "k.cu", "-o", "k_nopie.exe"], out)
    return out


def _cuobjdump_images(path: Path, work: Path) -> Counter[tuple[str, bytes]]:
    """(arch, bytes) of every image cuobjdump -all extracts from ``path``."""
    cuobjdump = require_tool("cuobjdump")
    work.mkdir()
    run_tool([cuobjdump, "-all", "-xelf", "all", path.resolve()], work)
    run_tool([cuobjdump, "-all", "-xptx", "all", path.resolve()], work)
    return Counter((p.name.split(".")[-2], p.read_bytes()) for p in work.iterdir())


def _listing(path: Path) -> list[str]:
    """cuobjdump -all -lelf -lptx: the (kind, arch) of each line."""
    text = run_tool([require_tool("cuobjdump"), "-all", "-lelf", "-lptx", path]).stdout
    return sorted(f"{ln.split()[0]} {ln.rsplit('.', 2)[-2]}" for ln in text.splitlines() if ln.strip())


def _readelf_messages(path: Path) -> tuple[str, str]:
    gnu = run_tool([require_tool("readelf"), "-a", "-W", path])
    llvm = run_tool([require_tool("llvm-readelf-19"), "-a", path])
    return gnu.stderr, llvm.stderr


def _host_sections(path: Path) -> dict[str, bytes]:
    """Every allocated section but the ones prune rewrites (containers, wrappers, dynamic relocations)."""
    elf = ElfFile(path.read_bytes())
    skip = {".nv_fatbin", ".nvFatBinSegment", ".hip_fatbin", ".hipFatBinSegment", ".rela.dyn"}
    return {s.name: bytes(s.data) for s in elf.sections if s.is_alloc and s.file_size and s.name not in skip}


def _dynamic_relocations(path: Path) -> list[tuple[int, int, int | None]]:
    """.rela.dyn less the wrappers' pointers (the only relocations prune moves)."""
    elf = ElfFile(path.read_bytes())
    wrap = [s for s in elf.sections if s.name in (".nvFatBinSegment", ".hipFatBinSegment")]
    sec = elf.section(".rela.dyn")
    assert sec is not None
    return [(r.r_offset, r.r_type, r.r_addend) for r in elf.relocation_table(sec.index)
            if not any(w.sh_addr <= r.r_offset < w.sh_addr + w.sh_size for w in wrap)]


@pytest.mark.parametrize("name", ["libstatic.so", "libshared.so"])
def test_library_shrinks_by_whole_pages(built: Path, name: str) -> None:
    src, out = built / name, built / f"p90_{name}"
    r = prune_file(src, out, keep="sm_90")
    dropped = sum(r.saved_by_arch().values())
    assert set(r.saved_by_arch()) == {"sm_75", "sm_80"}
    # Smaller by the dropped images' bytes less at most the two partial pages of the one removed range.
    assert r.file_bytes_saved % PAGE == 0 and dropped - 2 * PAGE < r.file_bytes_saved <= dropped
    assert out.stat().st_size == src.stat().st_size - r.file_bytes_saved
    # The vendor tool lists exactly the kept images, byte-identical to the original's.
    before = _listing(src)
    assert _listing(out) == [x for x in before if x.endswith("sm_90")]
    orig = _cuobjdump_images(src, built / f"x_{name}")
    kept = _cuobjdump_images(out, built / f"y_{name}")
    assert kept == Counter({k: n for k, n in orig.items() if k[0] == "sm_90"})
    # readelf and llvm-readelf say nothing they did not say on the original.
    assert _readelf_messages(out) == _readelf_messages(src) == ("", "")
    assert run_tool(["nm", "-D", "--defined-only", out]).stdout == run_tool(["nm", "-D", "--defined-only", src]).stdout
    dyn = [ln for ln in run_tool(["readelf", "-d", out]).stdout.splitlines() if not ln.startswith("Dynamic section")]
    assert dyn == [ln for ln in run_tool(["readelf", "-d", src]).stdout.splitlines()
                   if not ln.startswith("Dynamic section")]
    assert _host_sections(out) == _host_sections(src)
    assert _dynamic_relocations(out) == _dynamic_relocations(src)
    # Virtual addresses unchanged: every section keeps its address.
    a, b = ElfFile(src.read_bytes()), ElfFile(out.read_bytes())
    assert [(s.name, s.sh_addr) for s in a.sections] == [(s.name, s.sh_addr) for s in b.sections]
    loads = [s for s in b.segments if s.p_type == EC.PT_LOAD]
    assert all((s.p_vaddr - s.p_offset) % PAGE == 0 for s in loads)
    # The library loads and its host code runs; a program links against it and runs.
    assert ctypes.CDLL(str(out.resolve())).host_add(2, 3) == 5
    link = built / f"link_{name}"
    link.mkdir()
    (link / "libp.so").write_bytes(out.read_bytes())
    (link / "use.c").write_text(USE_C)
    run_tool([require_tool("gcc"), "use.c", "-o", "use", "-L.", "-lp", "-Wl,-rpath,$ORIGIN"], link)
    assert run_tool([link / "use"]).stdout == "42\n"
    # The result is what prune() predicts (devbin size --keep relies on it), and pruning again keeps it.
    assert prune(src.read_bytes(), keep="sm_90").data == out.read_bytes()
    assert prune(out.read_bytes(), keep="sm_90").data == out.read_bytes()


@pytest.mark.parametrize(("name", "e_type"), [("k.exe", EC.ET_DYN), ("k_nopie.exe", EC.ET_EXEC)])
def test_executable_shrinks_and_runs(built: Path, name: str, e_type: int) -> None:
    src, out = built / name, built / f"p90_{name}"
    assert ElfFile(src.read_bytes()).header.e_type == e_type
    r = prune_file(src, out, drop="sm_75,sm_80")
    assert r.file_bytes_saved > 0 and r.file_bytes_saved % PAGE == 0
    out.chmod(0o755)
    assert run_tool([out]).stdout == "hello\n"
    assert _listing(out) == [x for x in _listing(src) if x.endswith("sm_90")]
    assert _readelf_messages(out) == ("", "")


def test_removing_read_bytes_is_refused(built: Path) -> None:
    """The page remover refuses a range that relocations, symbols or the code read."""
    elf = ElfFile((built / "libstatic.so").read_bytes())
    text = elf.section(".text")
    assert text is not None
    with pytest.raises(UsageError, match="reads bytes that would be removed"):
        remove_pages(elf, [(text.sh_offset, text.sh_offset + text.sh_size)])
    data = elf.section(".data.rel.ro") or elf.section(".got")
    assert data is not None
    nothing = remove_pages(elf, [(data.sh_offset, data.sh_offset + 16)])  # no whole page: unchanged
    assert nothing.data == (built / "libstatic.so").read_bytes() and not nothing.removed


BIG_C = r"""
__attribute__((section("bigsec"), aligned(4096), used)) static const char big[65536] = {1};
#ifdef POINT_INSIDE
const char *const inside = big + 8192;
#endif
int seven(void) { return 7; }
"""


@pytest.mark.parametrize("head", [16, 0])
def test_page_remover_on_a_gcc_library(tmp_path: Path, head: int) -> None:
    """remove_pages alone: 15 of the 16 pages of a 64 KiB section go; with free bytes before the first whole
    page the program-header table moves there, without them one page is kept back for it."""
    gcc = require_tool("gcc")
    (tmp_path / "big.c").write_text(BIG_C)
    run_tool([gcc, "-shared", "-fPIC", "-O1", "big.c", "-o", "libbig.so"], tmp_path)
    src = tmp_path / "libbig.so"
    elf = ElfFile(src.read_bytes())
    sec = elf.section("bigsec")
    assert sec is not None and sec.sh_offset % PAGE == 0
    cut = remove_pages(elf, [(sec.sh_offset + head, sec.sh_offset + sec.sh_size)])
    assert cut.bytes_removed == 15 * PAGE and cut.phdr_moved_to is not None  # head 0: a page kept for the table
    out = tmp_path / "libsmall.so"
    out.write_bytes(cut.data)
    assert len(cut.data) == src.stat().st_size - cut.bytes_removed
    assert _readelf_messages(out) == _readelf_messages(src) == ("", "")
    assert ctypes.CDLL(str(out)).seven() == 7
    new = ElfFile(cut.data)
    assert [(s.name, s.sh_addr) for s in new.sections] == [(s.name, s.sh_addr) for s in elf.sections]
    assert run_tool(["nm", "-D", "--defined-only", out]).stdout == run_tool(["nm", "-D", "--defined-only", src]).stdout
    phdr = [s for s in new.segments if s.p_type == EC.PT_PHDR]
    assert all(s.p_offset == new.header.e_phoff for s in phdr)
    # A pointer into the removed pages (a relative relocation's target: big + 0x2000) is refused.
    run_tool([gcc, "-shared", "-fPIC", "-O1", "-DPOINT_INSIDE", "big.c", "-o", "libptr.so"], tmp_path)
    pointed = ElfFile((tmp_path / "libptr.so").read_bytes())
    psec = pointed.section("bigsec")
    assert psec is not None
    with pytest.raises(UsageError, match="the target of a relative relocation"):
        remove_pages(pointed, [(psec.sh_offset + head, psec.sh_offset + psec.sh_size)])


def test_page_remover_that_would_cut_no_page_leaves_the_file_as_is(tmp_path: Path) -> None:
    """One free page, and a program-header table that only fits there (no free bytes before it, none after the
    table): nothing is cut, so nothing moves either (no table moved, no PT_LOAD split around an empty range)."""
    gcc = require_tool("gcc")
    (tmp_path / "big.c").write_text(BIG_C)
    run_tool([gcc, "-shared", "-fPIC", "-O1", "big.c", "-o", "libbig.so"], tmp_path)
    data = (tmp_path / "libbig.so").read_bytes()
    elf = ElfFile(data)
    sec = elf.section("bigsec")
    assert sec is not None and sec.sh_offset % PAGE == 0
    cut = remove_pages(elf, [(sec.sh_offset, sec.sh_offset + PAGE)])
    assert (cut.data, cut.removed, cut.phdr_moved_to) == (data, [], None)
    assert any("no page removed" in n for n in cut.notes)


def test_page_remover_gives_free_bytes_as_zeros(tmp_path: Path) -> None:
    """zero_free=True (prune's copy-on-write rewrite leaves a freed tail as it was): the free bytes that stay in
    the file come out as zeros, so the result is the one of the same file with those bytes zeroed first, for
    a range with whole pages (cut; the partial pages at its ends stay) and for one without (nothing cut)."""
    gcc = require_tool("gcc")
    (tmp_path / "big.c").write_text(BIG_C)
    run_tool([gcc, "-shared", "-fPIC", "-O1", "big.c", "-o", "libbig.so"], tmp_path)
    data = (tmp_path / "libbig.so").read_bytes()  # bigsec: one byte 1, then zeros
    sec = ElfFile(data).section("bigsec")
    assert sec is not None
    for lo, hi in [(100, sec.sh_size - 50), (100, 200)]:
        free = [(sec.sh_offset + lo, sec.sh_offset + hi)]
        stale = bytearray(data)
        stale[sec.sh_offset + lo:sec.sh_offset + hi] = b"\xaa" * (hi - lo)
        want = remove_pages(ElfFile(data), free)
        got = remove_pages(ElfFile(bytes(stale)), free, zero_free=True)
        assert got.data == want.data and got.size == len(want.data)
        assert (got.removed != []) == (hi - lo > PAGE)
        assert remove_pages(ElfFile(bytes(stale)), free).data != want.data  # without it the bytes stay


def test_page_remover_splits_a_section_with_two_ranges(tmp_path: Path) -> None:
    """Two free ranges in one section: two cuts, the PT_LOAD split twice, the section split into two pieces
    of the same name (the second appended to the section header table) at their old addresses."""
    gcc = require_tool("gcc")
    (tmp_path / "big.c").write_text(BIG_C)
    run_tool([gcc, "-shared", "-fPIC", "-O1", "big.c", "-o", "libbig.so"], tmp_path)
    elf = ElfFile((tmp_path / "libbig.so").read_bytes())
    sec = elf.section("bigsec")
    assert sec is not None
    half = sec.sh_size // 2
    cut = remove_pages(elf, [(sec.sh_offset + 100, sec.sh_offset + half),
                             (sec.sh_offset + half + 100, sec.sh_offset + sec.sh_size)])
    assert cut.bytes_removed == 14 * PAGE and len(cut.removed) == 2
    (tmp_path / "out.so").write_bytes(cut.data)
    assert _readelf_messages(tmp_path / "out.so") == ("", "")
    new = ElfFile(cut.data)
    pieces = [s for s in new.sections if s.name == "bigsec"]
    assert [(p.sh_addr, p.sh_size) for p in pieces] == [(sec.sh_addr, 100), (sec.sh_addr + half, 100)]
    assert [bytes(p.data) for p in pieces] == [bytes(sec.data)[:100], bytes(sec.data)[half:half + 100]]
    loads = [s for s in new.segments if s.p_type == EC.PT_LOAD]
    assert len(loads) == len([s for s in elf.segments if s.p_type == EC.PT_LOAD]) + 2
    assert ctypes.CDLL(str(tmp_path / "out.so")).seven() == 7
    # The same in two steps: the second cut finds zero bytes, in no section, after the table the first one
    # moved, and grows the table there in place.
    first = remove_pages(elf, [(sec.sh_offset + 100, sec.sh_offset + half)])
    assert first.phdr_moved_to is not None
    tail = [s for s in ElfFile(first.data).sections if s.name == "bigsec"][-1]
    assert tail.sh_addr == sec.sh_addr + half
    second = remove_pages(ElfFile(first.data), [(tail.sh_offset + 100, tail.sh_offset + tail.sh_size)])
    assert second.phdr_moved_to is None and second.bytes_removed == 7 * PAGE
    assert ElfFile(second.data).header.e_phoff == ElfFile(first.data).header.e_phoff
    (tmp_path / "twice.so").write_bytes(second.data)
    assert _readelf_messages(tmp_path / "twice.so") == ("", "")
    assert ctypes.CDLL(str(tmp_path / "twice.so")).seven() == 7


def test_cli_safety(built: Path, tmp_path: Path) -> None:
    src = tmp_path / "lib.so"
    src.write_bytes((built / "libstatic.so").read_bytes())
    original = src.read_bytes()
    printed = cli_ok("prune", str(src), "--keep", "sm_90", "--dry-run")
    assert "dry run: nothing written" in printed and src.read_bytes() == original
    assert list(tmp_path.iterdir()) == [src]
    assert cli("prune", str(src), "--keep", "sm_90", "-o", str(src))[0] == 1
    (tmp_path / "link.so").symlink_to(src)
    assert cli("prune", str(src), "--keep", "sm_90", "-o", str(tmp_path / "link.so"))[0] == 1
    assert cli("prune", str(src), "--keep", "sm_61", "-o", str(tmp_path / "none.so"))[0] == 1
    assert src.read_bytes() == original and not (tmp_path / "none.so").exists()
    assert cli("prune", str(src), "--keep", "sm_90", "--in-place")[0] == 0
    assert (tmp_path / f"lib.so{BACKUP_SUFFIX}").read_bytes() == original
    assert len(src.read_bytes()) < len(original)
    again = tmp_path / "again.so"
    again.write_bytes(original)
    assert cli("prune", str(again), "--keep", "sm_90", "--in-place", "--no-backup")[0] == 0
    assert not (tmp_path / f"again.so{BACKUP_SUFFIX}").exists() and again.read_bytes() == src.read_bytes()


# --------------------------------------------------------------------------- AMD: .hip_fatbin in a host library


HIP_KERNEL = r"""
__attribute__((amdgpu_kernel)) void kz(float *p) {
#pragma unroll
  for (int i = 0; i < 1024; ++i) p[i * 3] = p[i * 7] * (float)i + 1.0f;
}
"""


@pytest.fixture(scope="module")
def hip_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    clang, bundler = require_tool("clang-19"), require_tool("clang-offload-bundler-19")
    gcc = require_tool("gcc")
    out = tmp_path_factory.mktemp("prune_hip")
    (out / "k.c").write_text(HIP_KERNEL)
    targets, inputs = ["host-x86_64-unknown-linux-gnu-"], ["-input=/dev/null"]
    for gfx in ("gfx90a", "gfx942", "gfx1100"):
        run_tool([clang, "--target=amdgcn-amd-amdhsa", f"-mcpu={gfx}", "-O1", "-nogpulib", "k.c", "-o", f"{gfx}.co"],
                 out)
        targets.append(f"hipv4-amdgcn-amd-amdhsa--{gfx}")
        inputs.append(f"-input={gfx}.co")
    run_tool([bundler, "-type=o", "-bundle-align=4096", f"-targets={','.join(targets)}", *inputs, "-output=k.hipfb"],
             out)
    # The bundle placed by the linker in .hip_fatbin, with the wrapper clang emits pointing at it.
    (out / "host.c").write_text(
        'asm(".section .hip_fatbin,\\"a\\",@progbits\\n.p2align 12\\nhip_fb:\\n.incbin \\"k.hipfb\\"\\n.previous");\n'
        "extern const char hip_fb[];\n"
        "struct w { unsigned m, v; const void *p; void *u; };\n"
        'const struct w wrapper __attribute__((section(".hipFatBinSegment"), used)) = {0x48495046, 1, hip_fb, 0};\n'
        "int host_add(int a, int b) { return a + b; }\n")
    run_tool([gcc, "-shared", "-fPIC", "host.c", "-o", "libhip.so"], out)
    return out


def test_hip_library_shrinks(hip_lib: Path) -> None:
    bundler = require_tool("clang-offload-bundler-19")
    src, out = hip_lib / "libhip.so", hip_lib / "libhip90a.so"
    r = prune_file(src, out, keep="gfx90a")
    assert set(r.saved_by_arch()) == {"gfx942", "gfx1100"}
    assert r.file_bytes_saved > 0 and r.file_bytes_saved % PAGE == 0
    assert _readelf_messages(out) == _readelf_messages(src)
    assert ctypes.CDLL(str(out.resolve())).host_add(1, 2) == 3
    assert _host_sections(out) == _host_sections(src)
    sec = ElfFile(out.read_bytes()).section(".hip_fatbin")
    assert sec is not None
    (hip_lib / "pruned.hipfb").write_bytes(bytes(sec.data))
    ids = run_tool([bundler, "-list", "-type=o", "-input=pruned.hipfb"], hip_lib).stdout.splitlines()
    orig = run_tool([bundler, "-list", "-type=o", "-input=k.hipfb"], hip_lib).stdout.splitlines()
    assert ids == [i for i in orig if not i.endswith(("gfx942", "gfx1100"))]
    assert "hipv4-amdgcn-amd-amdhsa--gfx90a" in ids
    run_tool([bundler, "-unbundle", "-type=o", "-input=pruned.hipfb", "-targets=hipv4-amdgcn-amd-amdhsa--gfx90a",
              "-output=back.co"], hip_lib)
    assert (hip_lib / "back.co").read_bytes() == (hip_lib / "gfx90a.co").read_bytes()


# --------------------------------------------------------------------------- wheels and folders




def _check_record(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    record = next(n for n in members if n.endswith(".dist-info/RECORD"))
    rows = list(csv.reader(io.StringIO(members[record].decode())))
    assert [r[0] for r in rows] == [n for n in members if n != record] + [record]
    for name, digest, size in rows:
        if name == record:
            assert (digest, size) == ("", "")
            continue
        want = base64.urlsafe_b64encode(hashlib.sha256(members[name]).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={want}" and int(size) == len(members[name])
    return members


def test_wheel_prune_installs(built: Path, hip_lib: Path, tmp_path: Path) -> None:
    lib, hip = (built / "libstatic.so").read_bytes(), (hip_lib / "libhip.so").read_bytes()
    src = build_wheel(tmp_path / "pkg-1.0-py3-none-any.whl",
                      {"pkg/__init__.py": b"", "pkg/libk.so": lib, "pkg/libhip.so": hip})
    out = tmp_path / "slim" / "pkg-1.0-py3-none-any.whl"
    out.parent.mkdir()
    printed = cli_ok("prune", str(src), "--keep", "sm_90", "-o", str(out), "--json")
    doc = json.loads(printed)
    jsonschema.Draft202012Validator(json.loads(schema_cmd.text("prune"))).validate(doc)
    assert doc["kind"] == "wheel" and doc["package"]["package_size_after"] == out.stat().st_size
    assert doc["package"]["package_size_before"] == src.stat().st_size > out.stat().st_size
    by_name = {f["name"]: f for f in doc["files"]}
    assert "no nvidia architecture" in by_name["pkg/libhip.so"]["untouched"]
    assert by_name["pkg/libk.so"]["output_size"] == prune(lib, keep="sm_90").output_size
    members = _check_record(out)
    assert members["pkg/libhip.so"] == hip and members["pkg/libk.so"] == prune(lib, keep="sm_90").data
    with zipfile.ZipFile(src) as z:
        assert all(members[n] == z.read(n) for n in z.namelist() if not n.endswith(("RECORD", ".so")))
    target = tmp_path / "site"
    run_tool([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", target, out])
    assert (target / "pkg" / "libk.so").read_bytes() == members["pkg/libk.so"]
    assert ctypes.CDLL(str(target / "pkg" / "libk.so")).host_add(4, 5) == 9
    # The folder (an installed site-packages) pruned in place: nothing more to drop, RECORD still right.
    r = prune_tree(target, keep="sm_90")
    assert all(f.result is None or not f.result.changed for f in r.files)
    with pytest.raises(OutputError):
        prune_wheel(src, src, keep="sm_90")


def test_folder_prune_in_place(built: Path, tmp_path: Path) -> None:
    lib = (built / "libstatic.so").read_bytes()
    src = build_wheel(tmp_path / "pkg-1.0-py3-none-any.whl", {"pkg/__init__.py": b"", "pkg/libk.so": lib})
    target = tmp_path / "site"
    run_tool([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", target, src])
    printed = cli_ok("prune", str(target), "--keep", "sm_90", "--dry-run", "--json")
    doc = json.loads(printed)
    jsonschema.Draft202012Validator(json.loads(schema_cmd.text("prune"))).validate(doc)
    assert doc["kind"] == "folder" and doc["dry_run"] and doc["output"] is None
    assert doc["files"][0]["output_size"] == prune(lib, keep="sm_90").output_size
    assert doc["arch_bytes"]["sm_80"]["after"] == 0 < doc["arch_bytes"]["sm_80"]["before"]
    assert (target / "pkg" / "libk.so").read_bytes() == lib
    assert cli("prune", str(target), "--keep", "sm_90", "--in-place")[0] == 0
    new = (target / "pkg" / "libk.so").read_bytes()
    assert new == prune(lib, keep="sm_90").data
    assert (target / "pkg" / f"libk.so{BACKUP_SUFFIX}").read_bytes() == lib
    record = next(target.glob("*.dist-info/RECORD")).read_text()
    assert f"pkg/libk.so,{record_hash(new)},{len(new)}" in record


# --------------------------------------------------------------------------- nvprune on objects and archives


def test_objects_and_archives_match_nvprune(built: Path, tmp_path: Path) -> None:
    nvprune, nvcc = require_tool("nvprune"), require_tool("nvcc")
    run_tool([nvcc, *ARCHS, "-c", built / "lib.cu", "-o", tmp_path / "lib.o"])
    run_tool([require_tool("ar"), "rcs", tmp_path / "lib.a", tmp_path / "lib.o"])
    for name in ("lib.o", "lib.a"):
        # devbin's sm_90 keeps the compute_90 PTX too: nvprune's -gencode arch=compute_90,code=[sm_90,compute_90]
        # (-arch sm_90 alone drops it; the second comparison below)
        run_tool([nvprune, "-gencode", "arch=compute_90,code=[sm_90,compute_90]", tmp_path / name, "-o",
                  tmp_path / f"nv_{name}"])
        ours = prune((tmp_path / name).read_bytes(), keep="sm_90").data
        theirs = (tmp_path / f"nv_{name}").read_bytes()
        assert ours == theirs  # the same layout too (ElfEditor rule 6: empty sections align as nvprune's do)
        assert [(i.kind, i.arch, bytes(i.data())) for i in scan_bytes(ours, "x", all=True)] == \
            [(i.kind, i.arch, bytes(i.data())) for i in scan_bytes(theirs, "x", all=True)]
        if name == "lib.o":
            skip = {".nv_fatbin", "__nv_relfatbin", ".symtab", ".strtab", ".shstrtab"}
            mine = {s.name: bytes(s.data) for s in ElfFile(ours).sections if s.file_size and s.name not in skip
                    and s.sh_type != EC.SHT_RELA}
            nv = {s.name: bytes(s.data) for s in ElfFile(theirs).sections if s.file_size and s.name not in skip
                  and s.sh_type != EC.SHT_RELA}
            assert mine == nv
        # nvprune -arch sm_90 (the cubin alone) is devbin's --drop of every other architecture
        run_tool([nvprune, "-arch", "sm_90", tmp_path / name, "-o", tmp_path / f"nv1_{name}"])
        ours = prune((tmp_path / name).read_bytes(), drop="sm_75,sm_80,compute_90").data
        theirs = (tmp_path / f"nv1_{name}").read_bytes()
        assert [(i.kind, i.arch, bytes(i.data())) for i in scan_bytes(ours, "x", all=True)] == \
            [(i.kind, i.arch, bytes(i.data())) for i in scan_bytes(theirs, "x", all=True)] == \
            [(i.kind, i.arch, bytes(i.data())) for i in scan_bytes((tmp_path / name).read_bytes(), "x", all=True)
             if i.arch == "sm_90"]


def test_ptx_policies_match_nvprune_byte_for_byte(built: Path, tmp_path: Path) -> None:
    """``--ptx none`` is ``nvprune -arch``'s rule and ``--ptx highest`` adds the highest PTX: the objects and
    archives devbin writes are nvprune's, byte for byte."""
    nvprune, nvcc = require_tool("nvprune"), require_tool("nvcc")
    gencode = ["-gencode", "arch=compute_75,code=[sm_75,compute_75]", "-gencode", "arch=compute_80,code=sm_80",
               "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
    run_tool([nvcc, *gencode, "-c", built / "lib.cu", "-o", tmp_path / "lib.o"])
    run_tool([require_tool("ar"), "rcs", tmp_path / "lib.a", tmp_path / "lib.o"])
    for name in ("lib.o", "lib.a"):
        src = (tmp_path / name).read_bytes()
        run_tool([nvprune, "-arch", "sm_90", tmp_path / name, "-o", tmp_path / f"none_{name}"])
        assert prune(src, keep="sm_90", ptx="none").data == (tmp_path / f"none_{name}").read_bytes()
        run_tool([nvprune, "-gencode", "arch=compute_75,code=[sm_75,compute_75]", "-gencode",
                  "arch=compute_90,code=compute_90", tmp_path / name, "-o", tmp_path / f"highest_{name}"])
        assert prune(src, keep="sm_75", ptx="highest").data == (tmp_path / f"highest_{name}").read_bytes()


def test_containers_that_cannot_move_are_compacted_in_place(built: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """When a reference into .nv_fatbin cannot be moved, every container stays at its offset, compacted at its
    own start; the whole pages after the last one still go, the bytes freed before the others stay as zeros
    (the section stays whole: cuobjdump reads only the first section of a name)."""
    import devbin.packaging.pruning as P

    monkeypatch.setattr(P, "retarget", lambda *a, **k: ("a reference that cannot move (test)", set()))
    src = built / "libstatic.so"
    r = prune_file(src, tmp_path / "p.so", keep="sm_90")
    assert any("stay where they are (a reference that cannot move (test))" in n for n in r.notes)
    assert r.file_bytes_saved > 0 and r.file_bytes_saved % PAGE == 0
    data = (tmp_path / "p.so").read_bytes()
    elf, old = ElfFile(data), ElfFile(src.read_bytes())
    # the wrappers were not touched: every wrapper and its relocation are as they were
    assert _dynamic_relocations(tmp_path / "p.so") == _dynamic_relocations(src)
    wrap, wrap0 = elf.section(".nvFatBinSegment"), old.section(".nvFatBinSegment")
    assert wrap is not None and wrap0 is not None and bytes(wrap.data) == bytes(wrap0.data)
    kept = [(i.kind, i.arch, bytes(i.data())) for i in scan_bytes(src.read_bytes(), "x", all=True)
            if i.arch in ("sm_90", "compute_90")]
    assert [(i.kind, i.arch, bytes(i.data())) for i in scan_bytes(data, "x", all=True)] == kept
    assert _readelf_messages(tmp_path / "p.so") == ("", "")
    assert ctypes.CDLL(str(tmp_path / "p.so")).host_add(1, 1) == 2
    assert [s.name for s in elf.sections].count(".nv_fatbin") == 1
    assert _listing(tmp_path / "p.so") == [x for x in _listing(src) if x.endswith("sm_90")]
    assert any("zero-filled, not cut out" in n for n in r.notes)


# --------------------------------------------------------------------------- fatbins in data sections


# Two fatbins in each of .rodata, .data and .ldata of a library that loads them itself (as cuFFT does): its
# code takes their addresses PC-relatively (no relocation), a table holds them (relative relocations at
# their starts), and a word of other data lies after each.  POINT_INSIDE adds a pointer into a dropped image.
DATA_C = r"""
#include "blobs.h"
#define BLOB(sec, name, c) __attribute__((section(sec), aligned(8), used, visibility("hidden"))) c unsigned char \
  name[] = {FATBIN}; __attribute__((section(sec), used)) c unsigned long long name##_after = 0x1122334455667788ULL;
BLOB(".rodata", ro0, const) BLOB(".rodata", ro1, const)
BLOB(".data", rw0, ) BLOB(".data", rw1, )
BLOB(".ldata", lg0, ) BLOB(".ldata", lg1, )
const void *blob(int i) {
  switch (i) { case 0: return ro0; case 1: return ro1; case 2: return rw0; case 3: return rw1;
               case 4: return lg0; default: return lg1; }
}
unsigned long long after(int i) {
  switch (i) { case 0: return ro0_after; case 1: return ro1_after; case 2: return rw0_after;
               case 3: return rw1_after; case 4: return lg0_after; default: return lg1_after; }
}
const void *const table[] = {ro0, ro1, rw0, rw1, lg0, lg1};
#ifdef POINT_INSIDE
const void *const inside = lg1 + 40000;
#endif
"""
# Two fatbins back to back in .rodata that only .nvFatBinSegment wrappers point at, as nvcc's registration
# reaches its fatbins: they pack as in .nv_fatbin, the second wrapper moved with its container.
WRAPPED_C = r"""
#include "blobs.h"
__attribute__((section(".rodata"), aligned(8), used, visibility("hidden"))) const unsigned char wa[] = {FATBIN};
__attribute__((section(".rodata"), aligned(8), used, visibility("hidden"))) const unsigned char wb[] = {FATBIN};
struct W { int magic; int version; const void *data; void *unused; };
__attribute__((section(".nvFatBinSegment"), aligned(8), used)) struct W wrappers[2] = {
  {0x466243b1, 1, wa, 0}, {0x466243b1, 1, wb, 0}};
const void *wrapped(int i) { return wrappers[i].data; }
"""


@pytest.fixture(scope="module")
def data_libs(built: Path) -> Path:
    """libdata.so, libdata_inside.so (POINT_INSIDE) and libwrapped.so, from the fatbin of lib.cu (sm_75, sm_80,
    sm_90 + compute_90: 60 KB an architecture, so every dropped range spans whole pages)."""
    gcc = require_tool("gcc")
    out = built / "data"
    out.mkdir()
    run_tool([require_tool("nvcc"), *ARCHS, "-fatbin", "lib.cu", "-o", out / "lib.fatbin"], built)
    fatbin = (out / "lib.fatbin").read_bytes()
    assert len(fatbin) % 8 == 0
    (out / "blobs.h").write_text("#define FATBIN " + ",".join(str(b) for b in fatbin) + "\n")
    (out / "data.c").write_text(DATA_C)
    (out / "wrapped.c").write_text(WRAPPED_C)
    for name, extra in (("libdata.so", ()), ("libdata_inside.so", ("-DPOINT_INSIDE",))):
        run_tool([gcc, "-shared", "-fPIC", "-O1", "-fno-toplevel-reorder", *extra, "data.c", "-o", name], out)
    run_tool([gcc, "-shared", "-fPIC", "-O1", "-fno-toplevel-reorder", "wrapped.c", "-o", "libwrapped.so"], out)
    return out


def _memory_fatbins(lib: ctypes.CDLL, getter: str, n: int) -> list[bytes]:
    """The fatbins a loaded library's function ``getter(i)`` points at, as the process sees them."""
    fn = getattr(lib, getter)
    fn.restype = ctypes.c_void_p
    out = []
    for i in range(n):
        at = fn(i)
        head = ctypes.string_at(at, 16)
        out.append(ctypes.string_at(at, 16 + int.from_bytes(head[8:16], "little")))
    return out


def _cuobjdump_lists(blob: bytes, work: Path) -> list[str]:
    """cuobjdump -lelf -lptx of a fatbin: the arch of each line."""
    work.write_bytes(blob)
    text = run_tool([require_tool("cuobjdump"), "-lelf", "-lptx", work]).stdout
    return [f"{ln.split()[0]} {ln.rsplit('.', 2)[-2]}" for ln in text.splitlines() if ln.strip()]


def test_data_section_fatbins_are_cut_out(data_libs: Path, tmp_path: Path) -> None:
    """Every freed range of every data section goes (two per section, each fatbin staying at its address):
    the sections split in pieces of their names, the library loads, every fatbin the process sees holds
    only the kept images (cuobjdump), the data around them is intact, and the file can be pruned again."""
    src = data_libs / "libdata.so"
    original = src.read_bytes()
    old = ElfFile(original)
    r = prune_file(src, tmp_path / "p.so", keep="sm_90")
    data = (tmp_path / "p.so").read_bytes()
    new = ElfFile(data)
    # the freed bytes of each fatbin are its dropped images: at least 80% of them leave the file
    dropped = sum(n for _, kept, n in r.rows() if not kept)
    assert r.container_bytes_freed == dropped and r.file_bytes_saved >= 0.8 * dropped
    assert r.file_bytes_saved == len(original) - len(data)
    for name in (".rodata", ".data", ".ldata"):
        pieces = [s for s in new.sections if s.name == name]
        assert len(pieces) == 3, name  # two ranges cut: three pieces, each at its old address
        before = old.section(name)
        assert before is not None and pieces[0].sh_addr == before.sh_addr
    assert any("freed in" in n and ".ldata" in n for n in r.notes)
    assert _readelf_messages(tmp_path / "p.so") == ("", "")
    lib, lib0 = ctypes.CDLL(str(tmp_path / "p.so")), ctypes.CDLL(str(src))
    lib.after.restype = lib0.after.restype = ctypes.c_ulonglong
    assert [lib.after(i) for i in range(6)] == [lib0.after(i) for i in range(6)] == [0x1122334455667788] * 6
    kept = [(i.kind, i.arch, bytes(i.data())) for i in scan_bytes(original, "x", all=True)
            if i.arch in ("sm_90", "compute_90")]
    for k, blob in enumerate(_memory_fatbins(lib, "blob", 6)):
        assert _cuobjdump_lists(blob, tmp_path / f"{k}.fatbin") == ["ELF sm_90", "PTX sm_90"]
        assert [(i.kind, i.arch, bytes(i.data())) for i in scan_bytes(blob, "b")] == kept[k * 2:k * 2 + 2]
    # the pieces number their fatbins on: the addresses are the original's, and a second prune works
    def containers(images: list[Image]) -> list[str]:
        return [str(i.address).rsplit(".", 1)[0] for i in images]  # x@.ldata#1 (the entry numbers change)

    assert containers(scan_bytes(data, "x", all=True)) == containers(
        [i for i in scan_bytes(original, "x", all=True) if i.arch in ("sm_90", "compute_90")])
    again = prune(data, keep="compute_90")
    assert [i.arch for i in scan_bytes(again.data, "x", all=True)] == ["compute_90"] * 6
    assert again.file_bytes_saved > 0


def test_a_pointer_into_a_dropped_image_is_refused(data_libs: Path, tmp_path: Path) -> None:
    """A relative relocation whose target is a dropped byte of a fatbin in .ldata: the prune is refused, one
    line naming what reads the byte, nothing written."""
    src = data_libs / "libdata_inside.so"
    with pytest.raises(UsageError, match=r"the target of a relative relocation in \.rela\.dyn .* reads bytes that "
                                         "would be removed; the file is left as is"):
        prune(src.read_bytes(), keep="sm_90")
    code, _, err = cli_err("prune", src, "--keep", "sm_90", "-o", tmp_path / "p.so")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "reads bytes that would be removed" in err
    assert not (tmp_path / "p.so").exists()


def test_wrapped_fatbins_in_rodata_pack(data_libs: Path, tmp_path: Path) -> None:
    """Two fatbins back to back in .rodata that wrappers point at: the second moves down behind the first's kept
    images, its wrapper (and relocation) with it, and the pages after both are cut."""
    src = data_libs / "libwrapped.so"
    r = prune_file(src, tmp_path / "p.so", keep="sm_90")
    old, new = ElfFile(src.read_bytes()), ElfFile((tmp_path / "p.so").read_bytes())
    lib, lib0 = ctypes.CDLL(str(tmp_path / "p.so")), ctypes.CDLL(str(src))
    before, after = _memory_fatbins(lib0, "wrapped", 2), _memory_fatbins(lib, "wrapped", 2)
    lib.wrapped.restype = lib0.wrapped.restype = ctypes.c_void_p
    base, base0 = lib.wrapped(0), lib0.wrapped(0)
    assert lib0.wrapped(1) - base0 == len(before[0])  # back to back before
    assert lib.wrapped(1) - base == len(after[0])  # and after: the second moved down
    for k, blob in enumerate(after):
        assert _cuobjdump_lists(blob, tmp_path / f"{k}.fatbin") == ["ELF sm_90", "PTX sm_90"]
    assert [s.name for s in new.sections].count(".rodata") == 1  # one range: the run's tail
    ro, ro0 = new.section(".rodata"), old.section(".rodata")
    assert ro is not None and ro0 is not None and ro.sh_size < ro0.sh_size
    assert r.file_bytes_saved >= 0.8 * r.container_bytes_freed
    assert _readelf_messages(tmp_path / "p.so") == ("", "")


def test_page_remover_many_ranges(tmp_path: Path) -> None:
    """Many ranges in one section: past ``max_segments`` only the largest are cut (a note says what stays); a
    program-header table larger than any range goes to the end of a library without PT_PHDR, and it loads."""
    gcc = require_tool("gcc")
    (tmp_path / "big.c").write_text(BIG_C.replace("65536", str(4 << 20)))
    run_tool([gcc, "-shared", "-fPIC", "-O1", "big.c", "-o", "libbig.so"], tmp_path)
    elf = ElfFile((tmp_path / "libbig.so").read_bytes())
    sec = elf.section("bigsec")
    assert sec is not None and not any(s.p_type == EC.PT_PHDR for s in elf.segments)
    # ranges of 2 whole pages, each after a page that stays (341 ranges); the 101st takes that page of the next
    free = [(sec.sh_offset + k, sec.sh_offset + k + 2 * PAGE) for k in range(PAGE, sec.sh_size - 2 * PAGE, 3 * PAGE)]
    free[100] = (free[100][0], free[100][1] + PAGE)
    cut = remove_pages(elf, free, max_segments=20_000)
    assert len(cut.removed) == len(free) and cut.bytes_removed == (2 * len(free) + 1) * PAGE
    new = ElfFile(cut.data)
    assert new.header.e_phoff > new.header.e_shoff and new.header.e_phnum == len(elf.segments) + len(free)
    assert any("moved to the end of the file" in n for n in cut.notes)
    (tmp_path / "all.so").write_bytes(cut.data)
    assert _readelf_messages(tmp_path / "all.so") == ("", "")
    assert ctypes.CDLL(str(tmp_path / "all.so")).seven() == 7
    capped = remove_pages(elf, free, max_segments=len(elf.segments) + 11)
    assert len(capped.removed) == 10 and (free[100][0] + PAGE - 1) // PAGE * PAGE in dict(capped.removed)
    assert ElfFile(capped.data).header.e_phnum <= len(elf.segments) + 11
    assert any(f"{len(free) - 10} of the {len(free)} ranges" in n for n in capped.notes)
    (tmp_path / "capped.so").write_bytes(capped.data)
    assert _readelf_messages(tmp_path / "capped.so") == ("", "")
    assert ctypes.CDLL(str(tmp_path / "capped.so")).seven() == 7


def test_max_segments_option(data_libs: Path, tmp_path: Path) -> None:
    """``--max-segments N`` caps the program headers (each range cut adds one: libdata.so's six freed ranges);
    past it the smaller ranges stay as zeros, the library still loads, and ``size --keep`` predicts the same
    bytes with the same N.  Bad values are one line (exit 2) naming the number meant."""
    src = data_libs / "libdata.so"
    nseg = len(ElfFile(src.read_bytes()).segments)
    limit = nseg + 3  # one header kept back for the table: two ranges cut
    code, out, _err = cli_err("prune", src, "--keep", "sm_90", "--max-segments", str(limit), "-o", tmp_path / "c.so",
                              "--json")
    doc = json.loads(out)
    full = prune_file(src, None, keep="sm_90")
    assert code == 0 and doc["max_segments"] == limit
    assert ElfFile((tmp_path / "c.so").read_bytes()).header.e_phnum <= limit
    assert 0 < doc["file_bytes_saved"] < full.file_bytes_saved
    assert any("4 of the 6 ranges" in n for n in doc["notes"])
    assert _readelf_messages(tmp_path / "c.so") == ("", "")
    lib = ctypes.CDLL(str(tmp_path / "c.so"))
    lib.after.restype = ctypes.c_ulonglong
    assert [lib.after(i) for i in range(6)] == [0x1122334455667788] * 6
    code, out, _err = cli_err("size", src, "--keep", "sm_90", "--max-segments", str(limit), "--json")
    assert code == 0 and json.loads(out)["savings"]["bytes"] == doc["file_bytes_saved"]
    for bad, says in (("4k", "--max-segments '4k': expected a whole number of program headers; did you mean 4096?"),
                      ("0x800", "did you mean 2048?"),
                      ("0", "--max-segments 0: expected 1 to 65,534 program headers (e_phnum is 16 bits; default "
                            "2,048)"),
                      ("70000", "expected 1 to 65,534"), ("many", "such as 4096")):
        code, out, err = cli_err("prune", src, "--keep", "sm_90", "--max-segments", bad, "--dry-run")
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, (bad, err)
    code, out, err = cli_err("size", src, "--max-segments", "4096")
    assert code == 2 and "--max-segments goes with --keep" in err
    with pytest.raises(UsageError, match="expected 1 to 65,534"):
        prune(src.read_bytes(), keep="sm_90", max_segments=0)
