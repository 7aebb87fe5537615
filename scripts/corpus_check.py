"""devbin against the vendor tools on a pinned corpus of public wheels (run by hand, not in CI).

    python3 scripts/corpus_check.py [--cache DIR] [--sample N] [--only SUBSTRING]

Downloads each pinned wheel below once into the cache folder (``pip download --no-deps``),
takes the shared libraries named for it, and on every one that holds device code runs devbin
and the vendor tools and counts, per check, the libraries (or bundles, or code objects) where
they agree:

NVIDIA (cuobjdump from the CUDA toolkit):

    list            devbin list: (kind, arch) of every cubin/PTX  vs  cuobjdump -lelf -lptx
    list --all      the same with devbin list --all               vs  cuobjdump -all -lelf -lptx
    resources       devbin resources --format cuobjdump           vs  cuobjdump -res-usage (byte-identical)
    extract         devbin extract --kind cubin / --kind ptx      vs  cuobjdump -xelf all -xptx all
                    (file names and bytes); and the same with --all / -all
    (a family-specific cubin, sm_100f, is compared under the base-arch name cuobjdump gives it;
    a library cuobjdump refuses -- sm_35 in CUDA 11 fatbins, "Invalid ELF" on CUDA 12.0's early
    sm_90 cubins -- is counted on a "skipped" row, with the images it listed before stopping)

AMD (LLVM 19 tools):

    bundle list     devbin list: the target IDs of each offload bundle  vs  clang-offload-bundler -list
                    (host entries left out: devbin lists device images only)
    bundle bytes    devbin extract --kind amdgpu, up to --sample code objects per library  vs
                    clang-offload-bundler -unbundle of the same entry (bytes)
    kernel notes    on those code objects: kernel names and VGPR counts of devbin resources --json
                    vs  .name / .vgpr_count in llvm-readelf --notes
    compressed      the first 3 of those code objects bundled again here with clang-offload-bundler
                    -compress (no pinned wheel ships a compressed bundle): devbin list and extract vs
                    the bundler's -list and -unbundle (a local container around third-party objects)

Intel (SYCL host libraries of DPC++'s old offload model: __CLANG_OFFLOAD_BUNDLE__sycl-<target>
sections of zstd frames; llvm-readelf-19, ar, spirv-dis, and libzstd through the zstandard module):

    images          the images devbin lists per SYCL section  vs  the section's bytes (llvm-readelf -S)
                    walked here: 16-byte-aligned zstd frames decoded by libzstd, raw SPIR-V between them
    image bytes     devbin extract of each SPIR-V image  vs  that walk's payload (bytes)
    ar t            the members devbin lists in each decoded archive  vs  ar t (pad_* fillers left out)
    zebin bytes     devbin extract of each zebin  vs  ar p of the decoded archive
    kernels         each zebin's functions in devbin size --json (names, code sizes)  vs  llvm-readelf -s
    entry points    the kernel names of each SPIR-V image's offload entries (devbin)  vs  spirv-dis's
                    OpEntryPoint names, up to --sample images per library (a module spirv-dis cannot
                    read is counted on a "skipped" row)
    stored bytes    devbin size's stored size of each SPIR-V image  vs  that walk's frame (raw) length
    size            devbin size: device bytes = the SYCL sections' sizes (llvm-readelf -S); its overhead is
                    at most the walk's alignment padding (a frame's padding goes to its members' shares)
    prune           devbin prune --keep <the first zebin's device> -o: devbin list of the output holds only
                    that device's zebins (at least one) and every SPIR-V image, the file is smaller, and
                    readelf -a -W (GNU) and llvm-readelf -a print no warning on it (a library of SPIR-V
                    only has no device to keep: counted on a "skipped" row)

It prints one table (check, agree, disagree, first disagreement) and exits 1 when any check
but the "skipped" row disagrees.  Only the standard library and devbin (from this checkout's src/) are used.
"""

from __future__ import annotations

import argparse
import collections
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from devbin.tools import find_tool  # noqa: E402


@dataclass(frozen=True)
class Wheel:
    """A pinned wheel and the libraries in it to check (fnmatch-free: path suffixes)."""

    spec: str
    vendor: str
    era: str
    libs: tuple[str, ...]


# Pinned corpus: NVIDIA libraries of CUDA 11.8, 12.0, 12.4, 12.5, 12.9 and 13 eras, an ML project's own CUDA kernels
# built against several CUDA versions, and CuPy's ROCm builds for ROCm 4.3, 5.0 and 7.0
# (HIP fat binaries: .hip_fatbin sections holding clang offload bundles).
WHEELS: tuple[Wheel, ...] = (
    Wheel("nvidia-curand-cu11==10.3.0.86", "nvidia", "CUDA 11.8", ("nvidia/curand/lib/libcurand.so.10",)),
    Wheel("nvidia-nvjpeg-cu11==11.9.0.86", "nvidia", "CUDA 11.8", ("nvidia/nvjpeg/lib/libnvjpeg.so.11",)),
    Wheel("nvidia-curand-cu12==10.3.1.50", "nvidia", "CUDA 12.0", ("nvidia/curand/lib/libcurand.so.10",)),
    Wheel("nvidia-nvjpeg-cu12==12.1.0.39", "nvidia", "CUDA 12.0", ("nvidia/nvjpeg/lib/libnvjpeg.so.12",)),
    Wheel("nvidia-curand-cu12==10.3.5.147", "nvidia", "CUDA 12.4", ("nvidia/curand/lib/libcurand.so.10",)),
    Wheel("nvidia-nvjpeg-cu12==12.3.1.117", "nvidia", "CUDA 12.5", ("nvidia/nvjpeg/lib/libnvjpeg.so.12",)),
    Wheel("cupy-cuda12x==13.3.0", "nvidia", "CUDA 12.x (project kernels)",
          ("cupy/cuda/thrust.cpython-311-x86_64-linux-gnu.so", "cupy/cuda/cub.cpython-311-x86_64-linux-gnu.so",
           "cupy/random/_generator_api.cpython-311-x86_64-linux-gnu.so")),
    Wheel("cupy-cuda12x==14.2.0", "nvidia", "CUDA 12.9 (project kernels, family-specific sm_100f/sm_120f)",
          ("cupy/cuda/cub.cpython-311-x86_64-linux-gnu.so",
           "cupy/random/_generator_api.cpython-311-x86_64-linux-gnu.so")),
    Wheel("nvidia-curand-cu12==10.3.10.19", "nvidia", "CUDA 12.9", ("nvidia/curand/lib/libcurand.so.10",)),
    Wheel("nvidia-curand==10.4.4.72", "nvidia", "CUDA 13", ("nvidia/cu13/lib/libcurand.so.10",)),
    Wheel("bitsandbytes==0.45.0", "nvidia", "CUDA 11.7-12.6 (project kernels)",
          ("bitsandbytes/libbitsandbytes_cuda117.so", "bitsandbytes/libbitsandbytes_cuda118.so",
           "bitsandbytes/libbitsandbytes_cuda126.so")),
    Wheel("cupy-rocm-4-3==13.3.0", "amd", "ROCm 4.3",
          ("cupy/cuda/thrust.cpython-311-x86_64-linux-gnu.so", "cupy/cuda/cub.cpython-311-x86_64-linux-gnu.so",
           "cupy/random/_generator_api.cpython-311-x86_64-linux-gnu.so")),
    Wheel("cupy-rocm-5-0==13.3.0", "amd", "ROCm 5.0",
          ("cupy/cuda/thrust.cpython-311-x86_64-linux-gnu.so", "cupy/cuda/cub.cpython-311-x86_64-linux-gnu.so",
           "cupy/random/_generator_api.cpython-311-x86_64-linux-gnu.so")),
    Wheel("cupy-rocm-7-0==14.2.0", "amd", "ROCm 7.0",
          ("cupy/cuda/thrust.cpython-311-x86_64-linux-gnu.so",
           "cupy/random/_generator_api.cpython-311-x86_64-linux-gnu.so")),
    Wheel("bitsandbytes==0.50.2", "intel", "DPC++ 2025.1 and 2026.0 (the project's own kernels; AOT + SPIR-V)",
          ("bitsandbytes/libbitsandbytes_xpu2025.so", "bitsandbytes/libbitsandbytes_xpu2026.so")),
    Wheel("onemkl-sycl-blas==2026.2.0", "intel", "oneMKL 2026.2, DPC++ 2026.2 (SPIR-V only)",
          ("onemkl_sycl_blas-2026.2.0.data/data/lib/libmkl_sycl_blas.so.6",)),
)


@dataclass
class Tally:
    agree: int = 0
    disagree: int = 0
    first: str = ""
    errors: list[str] = field(default_factory=list)

    def add(self, ok: bool, where: str, detail: str = "") -> None:
        if ok:
            self.agree += 1
        else:
            self.disagree += 1
            if not self.first:
                self.first = f"{where}: {detail}"[:600]


TALLY: dict[str, Tally] = collections.OrderedDict()


def tally(name: str) -> Tally:
    return TALLY.setdefault(name, Tally())


class VendorRefuses(RuntimeError):
    """The vendor tool refuses the whole library (cuobjdump 13 on a fatbin with sm_35 cubins, ...)."""


def run(cmd: list[str], cwd: Path | None = None,
        ok_codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[bytes]:
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
    if p.returncode not in ok_codes:
        if b"cuobjdump fatal" in p.stderr:
            # cuobjdump 13 refuses whole libraries: "Support for 'sm_35' has been removed", and
            # "Invalid ELF" on CUDA 12.0-era libraries (it lists the first images, then stops)
            raise VendorRefuses(p.stderr.decode(errors="replace").strip()[-300:])
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode(errors='replace')[-800:]}")
    return p


def devbin(*args: str, cwd: Path | None = None, ok_codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[bytes]:
    env_cmd = [sys.executable, "-m", "devbin", *args]
    return run(env_cmd, cwd=cwd, ok_codes=ok_codes)


def fetch(wheel: Wheel, cache: Path) -> list[Path]:
    """The wheel's libraries, unpacked once into the cache folder."""
    name, version = wheel.spec.split("==")
    stem = name.replace("-", "_")
    out = cache / f"{stem}-{version}"
    libs = [out / rel for rel in wheel.libs]
    if all(p.exists() for p in libs):
        return libs
    whls = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if not whls:
        run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(cache), wheel.spec])
        whls = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    with zipfile.ZipFile(whls[0]) as z:
        for rel, lib in zip(wheel.libs, libs, strict=True):
            lib.parent.mkdir(parents=True, exist_ok=True)
            lib.write_bytes(z.read(rel))
    return libs


# -- NVIDIA -------------------------------------------------------------------------------------

_CUOBJ_LINE = re.compile(r"^(ELF|PTX) file\s+\d+: (.+)$")


def cuobjdump_listing(cuobjdump: str, lib: Path, all_: bool) -> tuple[list[tuple[str, str]], str]:
    """(kind, arch) of each image in cuobjdump's order, and its complaint when it stopped early."""
    args = [cuobjdump, *(["-all"] if all_ else []), "-lelf", "-lptx", str(lib)]
    p = run(args, ok_codes=(0, 1))
    rows = []
    for line in p.stdout.decode().splitlines():
        m = _CUOBJ_LINE.match(line.strip())
        if m:
            kind = "cubin" if m.group(1) == "ELF" else "ptx"
            parts = m.group(2).rsplit(".", 2)  # <name>.<arch>.<cubin|ptx>
            rows.append((kind, arch_number(parts[-2]) if len(parts) == 3 else "?"))
    return rows, (p.stderr.decode(errors="replace").strip() if p.returncode else "")


def devbin_listing(lib: Path, all_: bool) -> list[tuple[str, str]]:
    """(kind, arch) of each cubin/PTX devbin lists, arch as cuobjdump's file names give it.

    A family-specific cubin (sm_100f) is listed by devbin with its family; cuobjdump names its
    file by the base architecture (sm_100), so the comparison drops the ``f`` and counts them.
    """
    p = devbin("list", "--json", *(["--all"] if all_ else []), str(lib))
    images = json.loads(p.stdout)["images"]
    rows = []
    for i in images:
        if i["kind"] not in ("cubin", "ptx"):
            continue
        arch = arch_number(i["arch"])
        if i["kind"] == "cubin" and re.fullmatch(r"\d+f", arch):
            if not all_:
                tally("nvidia family-specific cubins listed as sm_NNNf (a count)").agree += 1
            arch = arch[:-1]
        rows.append((i["kind"], arch))
    return rows


def arch_number(arch: str) -> str:
    """``sm_90a`` / ``compute_90a`` -> ``90a``: cuobjdump names a PTX file by sm_NN, devbin says compute_NN."""
    return arch.split("_", 1)[-1]


def diff_rows(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> str:
    ca, cb = collections.Counter(a), collections.Counter(b)
    only_a = sorted((ca - cb).items())[:5]
    only_b = sorted((cb - ca).items())[:5]
    return f"devbin {len(a)} images, vendor {len(b)}; devbin only {only_a}; vendor only {only_b}"


def first_line_diff(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for n, (x, y) in enumerate(zip(la, lb, strict=False), 1):
        if x != y:
            return f"line {n}: devbin {x!r} vs vendor {y!r}"
    return f"devbin {len(la)} lines vs vendor {len(lb)} lines"


def compare_dirs(a: Path, b: Path) -> tuple[bool, str]:
    na = sorted(p.name for p in a.iterdir())
    nb = sorted(p.name for p in b.iterdir())
    if na != nb:
        sa, sb = set(na), set(nb)
        return False, (f"devbin {len(na)} files, vendor {len(nb)}; devbin only {sorted(sa - sb)[:3]}; "
                       f"vendor only {sorted(sb - sa)[:3]}")
    for name in na:
        if not filecmp.cmp(a / name, b / name, shallow=False):
            return False, f"{name}: bytes differ"
    return True, f"{len(na)} files"


def check_nvidia(lib: Path, label: str, cuobjdump: str, work: Path) -> None:
    for all_ in (False, True):
        name = "nvidia list --all (cuobjdump -all -lelf -lptx)" if all_ else "nvidia list (cuobjdump -lelf -lptx)"
        mine, (theirs, refused) = devbin_listing(lib, all_), cuobjdump_listing(cuobjdump, lib, all_)
        if refused:
            # cuobjdump lists images in order until one it refuses: the images it did list, in order
            if theirs:
                tally("nvidia list, images cuobjdump lists before it stops").add(
                    mine[:len(theirs)] == theirs, label, diff_rows(mine[:len(theirs)], theirs))
            raise VendorRefuses(f"{refused} (after {len(theirs)} of devbin's {len(mine)} images)")
        tally(name).add(sorted(mine) == sorted(theirs), label, diff_rows(mine, theirs))
    mine_res = devbin("resources", "--format", "cuobjdump", str(lib)).stdout.decode()
    theirs_res = run([cuobjdump, "-res-usage", str(lib)]).stdout.decode()
    tally("nvidia resources (cuobjdump -res-usage, bytes)").add(
        mine_res == theirs_res, label, first_line_diff(mine_res, theirs_res))
    for all_ in (False, True):
        d_mine, d_theirs = work / "devbin", work / "cuobjdump"
        for d in (d_mine, d_theirs):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
        flag = ["-all"] if all_ else []
        run([cuobjdump, *flag, "-xelf", "all", "-xptx", "all", str(lib)], cwd=d_theirs)
        for kind in ("cubin", "ptx"):
            devbin("extract", *(["--all"] if all_ else []), "--kind", kind, "-o", str(d_mine), str(lib),
                   ok_codes=(0, 3))
        ok, detail = compare_dirs(d_mine, d_theirs)
        name = "nvidia extract --all (cuobjdump -all -xelf/-xptx all)" if all_ else \
            "nvidia extract (cuobjdump -xelf/-xptx all: names, bytes)"
        tally(name).add(ok, label, detail)


# -- AMD ----------------------------------------------------------------------------------------

_KERNEL_KEY = re.compile(r"^(?:  - |    )\.(name|vgpr_count):\s+(.+?)\s*$")


def notes_kernels(readelf: str, obj: Path) -> list[tuple[str, int]]:
    """(kernel name, VGPR count) from the amdhsa.kernels list as llvm-readelf --notes prints its YAML.

    A kernel starts at a ``  - `` line in that list; its own keys sit at column 4 (deeper ones,
    such as the arguments' ``.name``, belong to nested lists).
    """
    out = run([readelf, "--notes", str(obj)]).stdout.decode(errors="replace")
    kernels: list[tuple[str, int]] = []
    current: dict[str, str] | None = None
    in_kernels = False
    for line in out.splitlines():
        if not line.startswith(" ") and line.strip():
            in_kernels = line.startswith("amdhsa.kernels:")
            continue
        if not in_kernels:
            continue
        if line.startswith("  - "):
            if current is not None:
                kernels.append((current.get("name", "?"), int(current.get("vgpr_count", "-1"))))
            current = {}
        m = _KERNEL_KEY.match(line)
        if m and current is not None:
            current[m.group(1)] = m.group(2).strip("'\"")
    if current is not None:
        kernels.append((current.get("name", "?"), int(current.get("vgpr_count", "-1"))))
    return sorted(kernels)


def devbin_kernels(obj: Path) -> list[tuple[str, int]]:
    data = json.loads(devbin("resources", "--json", str(obj)).stdout)
    rows = []
    for image in data["images"]:
        for fn in image["functions"]:
            if fn["kind"] == "kernel":
                rows.append((fn["name"], fn["resources"]["vgprs"]))
    return sorted(rows)


def unbundle(bundler: str, bundle: Path, target: str, out: Path) -> None:
    """clang-offload-bundler -unbundle of one entry; LLVM 19 does not know the newest processors
    (gfx950: "Can't find bundles for ..."), so such an entry is unbundled by a newer bundler."""
    try:
        run([bundler, "-unbundle", "-type=o", f"-input={bundle}", f"-targets={target}", f"-output={out}"])
    except RuntimeError:
        newer = find_tool("clang-offload-bundler", versions=("22", "21", "20"))
        if newer is None:
            raise
        tally("amd entries LLVM 19 cannot unbundle (unbundled by LLVM 20+; a count)").agree += 1
        run([newer, "-unbundle", "-type=o", f"-input={bundle}", f"-targets={target}", f"-output={out}"])


def check_amd(lib: Path, label: str, bundler: str, readelf: str, work: Path, sample: int) -> None:
    images = json.loads(devbin("list", "--json", str(lib)).stdout)["images"]
    data = lib.read_bytes()
    by_offset: dict[int, list[str]] = collections.OrderedDict()
    for im in images:
        if im.get("container") == "bundle":
            by_offset.setdefault(int(im["offset"]), []).append(im["metadata"]["bundle-id"])
    offsets = sorted(by_offset)
    for n, off in enumerate(offsets):
        end = offsets[n + 1] if n + 1 < len(offsets) else len(data)
        blob = work / f"bundle{n}.bin"
        blob.write_bytes(data[off:end])
        out = run([bundler, "-list", "-type=o", f"-input={blob}"]).stdout.decode()
        theirs = sorted(t for t in out.split() if not t.startswith("host-"))
        mine = sorted(by_offset[off])
        tally("amd bundle list (clang-offload-bundler -list)").add(
            mine == theirs, f"{label} bundle at {off:#x}",
            f"devbin {mine[:4]}... ({len(mine)}) vs bundler {theirs[:4]}... ({len(theirs)})")
    # extract every code object, compare a sample with the bundler's and with the notes
    d = work / "amd"
    shutil.rmtree(d, ignore_errors=True)
    written = json.loads(devbin("extract", "--json", "--kind", "amdgpu", "-o", str(d), str(lib)).stdout)["written"]
    tally("amd extract count (= devbin list amdgpu images)").add(
        len(written) == sum(1 for im in images if im["kind"] == "amdgpu"), label,
        f"extract wrote {len(written)}, list shows {len(images)}")
    step = max(1, len(written) // max(1, sample))
    for w in written[::step][:sample]:
        off = int(next(im["offset"] for im in images if im["address"] == w["address"]))
        n = offsets.index(off)
        target = next(im["metadata"]["bundle-id"] for im in images if im["address"] == w["address"])
        unbundled = work / "unbundled.o"
        unbundle(bundler, work / f"bundle{n}.bin", target, unbundled)
        tally("amd bundle bytes (clang-offload-bundler -unbundle)").add(
            filecmp.cmp(unbundled, w["file"], shallow=False), f"{label} {w['address']}", "bytes differ")
        mine_k, theirs_k = devbin_kernels(Path(w["file"])), notes_kernels(readelf, Path(w["file"]))
        tally("amd kernels: names, VGPRs (llvm-readelf --notes)").add(
            mine_k == theirs_k, f"{label} {w['address']}",
            f"devbin {len(mine_k)} kernels, notes {len(theirs_k)}; devbin only "
            f"{sorted(set(mine_k) - set(theirs_k))[:2]}; notes only {sorted(set(theirs_k) - set(mine_k))[:2]}")
        tally("amd kernels compared (a count, not a check)").agree += len(theirs_k)
    for blob in work.glob("bundle*.bin"):
        blob.unlink()
    check_compressed(written, label, bundler, work)


def check_compressed(written: list[dict[str, str]], label: str, bundler: str, work: Path) -> None:
    """ROCm 6+ compresses bundles (``--offload-compress``); no pinned wheel here ships one, so the
    wheel's own code objects (up to 3) are bundled again here with ``clang-offload-bundler -compress``:
    the bundle is local, its entries are the third-party code objects."""
    objs = written[:3]
    targets = ["host-x86_64-unknown-linux-gnu-"] + [f"hipv4-amdgcn-amd-amdhsa--{w['arch']}" for w in objs]
    if len(set(targets)) != len(targets):
        return
    ccob = work / "compressed.hipfb"
    run([bundler, "-type=o", "-compress", f"-targets={','.join(targets)}", "-input=/dev/null",
         *[f"-input={w['file']}" for w in objs], f"-output={ccob}"])
    images = json.loads(devbin("list", "--json", str(ccob)).stdout)["images"]
    mine = sorted(im["metadata"]["bundle-id"] for im in images)
    theirs = sorted(t for t in run([bundler, "-list", "-type=o", f"-input={ccob}"]).stdout.decode().split()
                    if not t.startswith("host-"))
    tally("amd compressed bundle list (local re-bundle, -compress)").add(
        mine == theirs, label, f"devbin {mine} vs bundler {theirs}")
    d = work / "ccob"
    out = json.loads(devbin("extract", "--json", "--kind", "amdgpu", "-o", str(d), str(ccob)).stdout)["written"]
    for w in out:
        target = next(im["metadata"]["bundle-id"] for im in images if im["address"] == w["address"])
        unbundled = work / "unbundled.o"
        unbundle(bundler, ccob, target, unbundled)
        tally("amd compressed bundle bytes (local re-bundle, -unbundle)").add(
            filecmp.cmp(unbundled, w["file"], shallow=False), f"{label} {target}", "bytes differ")


# -- Intel --------------------------------------------------------------------------------------

_SYCL_PREFIX = "__CLANG_OFFLOAD_BUNDLE__sycl-"
_ZSTD, _SPIRV, _AR = b"\x28\xb5\x2f\xfd", b"\x03\x02\x23\x07", b"!<arch>\n"
_ADDR = re.compile(r"@(__CLANG_OFFLOAD_BUNDLE__sycl-[^#]+)#0\.(\d+)(?:!([^@]+))?")


def sycl_sections(readelf: str, lib: Path) -> dict[str, tuple[int, int]]:
    """``{name: (file offset, size)}`` of the SYCL sections, as llvm-readelf -S gives them."""
    out = run([readelf, "-S", "-W", str(lib)]).stdout.decode()
    found = {}
    for m in re.finditer(r"\]\s+(" + re.escape(_SYCL_PREFIX) + r"\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)",
                         out):
        found[m[1]] = (int(m[2], 16), int(m[3], 16))
    return found


def walk_section(data: bytes) -> list[tuple[bytes, int]]:
    """The payloads of a SYCL section and the bytes each is stored in: zstd frames decoded by libzstd
    (``unused_data`` says where each ends), raw SPIR-V up to the next 16-byte-aligned frame or module
    (its zero padding cut, to a whole word)."""
    import zstandard
    out: list[tuple[bytes, int]] = []
    pos = 0
    while pos < len(data):
        if not any(data[pos:pos + 16]):
            pos += 16
            continue
        if data.startswith(_ZSTD, pos):
            d = zstandard.ZstdDecompressor().decompressobj()
            payload = d.decompress(data[pos:])
            used = len(data) - pos - len(d.unused_data)
            out.append((payload, used))
        else:
            stop = pos + 16
            while stop < len(data) and not data.startswith((_ZSTD, _SPIRV), stop):
                stop += 16
            raw = data[pos:stop].rstrip(b"\0")
            raw += bytes(-len(raw) % 4)
            used = len(raw)
            out.append((raw, used))
        pos += -(-used // 16) * 16
    return out


def readelf_functions(readelf: str, obj: Path) -> list[tuple[str, int]]:
    rows = [line.split() for line in run([readelf, "-s", "-W", str(obj)]).stdout.decode().splitlines()]
    return sorted((r[7], int(r[2])) for r in rows
                  if len(r) >= 8 and r[0].endswith(":") and r[3] == "FUNC" and r[6] != "UND")


def check_intel(lib: Path, label: str, readelf: str, spirv_dis: str | None, work: Path, sample: int) -> None:
    images = json.loads(devbin("list", "--json", str(lib)).stdout)["images"]
    written = json.loads(devbin("extract", "--json", "-o", str(work / "x"), str(lib)).stdout)["written"]
    files = {w["address"]: Path(w["file"]) for w in written}
    sizes = {i["address"]: i for f in json.loads(devbin("size", "--json", str(lib)).stdout)["files"]
             for i in f["images"]}
    sections = sycl_sections(readelf, lib)
    data = lib.read_bytes()
    mine: dict[tuple[str, int], list[dict[str, object]]] = collections.OrderedDict()
    for im in images:
        m = _ADDR.search(im["address"])
        if m:
            mine.setdefault((m[1], int(m[2])), []).append({**im, "member": m[3] or ""})
    sample_left = sample
    padding = 0
    for name, (off, size) in sections.items():
        walked = walk_section(data[off:off + size])
        payloads = [p for p, _ in walked]
        padding += size - sum(n for _, n in walked)
        keys = sorted(i for s, i in mine if s == name)
        tally("intel images per SYCL section (libzstd walk)").add(
            keys == list(range(len(payloads))), f"{label} {name}", f"devbin {len(keys)}, walk {len(payloads)}")
        for i, payload in enumerate(payloads):
            parts = mine.get((name, i), [])
            where = f"{label} {name}#0.{i}"
            if not payload.startswith(_AR):
                (im,) = parts or [{}]
                got = files.get(str(im.get("address")))
                tally("intel image bytes (libzstd / raw), SPIR-V images").add(
                    got is not None and got.read_bytes() == payload, where, "bytes differ")
                tally("intel stored bytes (frame length by libzstd / raw length), SPIR-V images").add(
                    sizes.get(str(im.get("address")), {}).get("stored_size") == walked[i][1], where,
                    f"devbin {sizes.get(str(im.get('address')), {}).get('stored_size')}, walk {walked[i][1]}")
                if spirv_dis is not None and payload.startswith(_SPIRV) and sample_left > 0:
                    sample_left -= 1
                    spv = work / "m.spv"
                    spv.write_bytes(payload)
                    p = subprocess.run([spirv_dis, str(spv)], capture_output=True, check=False)
                    if p.returncode:
                        tally("skipped: spirv-dis cannot read the module (a count)").disagree += 1
                        continue
                    theirs = sorted(re.findall(r'OpEntryPoint Kernel %\S+ "([^"]+)"', p.stdout.decode()))
                    ours = sorted(str(dict(im.get("metadata", {})).get("entries", "")).split())
                    tally("intel SPIR-V entry points (spirv-dis) = offload entries (devbin)").add(
                        ours == theirs, where,
                        f"devbin {ours[:2]} ({len(ours)}), spirv-dis {theirs[:2]} ({len(theirs)})")
                continue
            arch = work / "a.ar"
            arch.write_bytes(payload)
            members = [n for n in run(["ar", "t", str(arch)]).stdout.decode().split() if not n.startswith("pad_")]
            listed = [str(p["member"]) for p in parts]
            tally("intel ar t of each decoded archive, archives").add(listed == members, where,
                                                                     f"devbin {listed}, ar t {members}")
            for p in parts:
                if p["kind"] != "zebin":
                    continue
                code = run(["ar", "p", str(arch), str(p["member"])]).stdout
                got = files.get(str(p["address"]))
                tally("intel zebin bytes (ar p), zebins").add(got is not None and got.read_bytes() == code,
                                                               str(p["address"]), "bytes differ")
                obj = work / "z.elf"
                obj.write_bytes(code)
                theirs_f = readelf_functions(readelf, obj)
                ours_f = sorted((f["name"], f["size"]) for f in sizes[str(p["address"])]["functions"])
                tally("intel kernels: names, code sizes (llvm-readelf -s), zebins").add(
                    ours_f == theirs_f, str(p["address"]), f"devbin {ours_f[:2]}, readelf {theirs_f[:2]}")
                tally("intel kernels compared (a count, not a check)").agree += len(theirs_f)
    (f,) = json.loads(devbin("size", "--json", str(lib)).stdout)["files"]
    total = sum(s for _, s in sections.values())
    tally("intel size: device bytes = SYCL sections (llvm-readelf -S), overhead <= alignment padding").add(
        f["device_bytes"] == total and 0 <= f["overhead"] <= padding, label,
        f"device_bytes {f['device_bytes']} vs sections {total}, overhead {f['overhead']}, padding {padding}")
    check_intel_prune(lib, label, readelf, images, work)


def check_intel_prune(lib: Path, label: str, readelf: str, images: list[dict[str, Any]], work: Path) -> None:
    """``prune --keep`` the first zebin's device: listed again, only zebins of that device remain (at least one)
    and every SPIR-V image stays (the default policy keeps them); the file is smaller; ``readelf -a -W`` (GNU)
    and ``llvm-readelf -a`` print no warning on it.  A library of SPIR-V only has no device to keep."""
    zebins = [i for i in images if i["kind"] == "zebin"]
    if not zebins:
        tally("skipped: intel prune, a library of SPIR-V only (a count)").disagree += 1
        return
    keep = str(zebins[0]["arch"])
    out = work / "pruned.so"
    devbin("prune", "--keep", keep, "-o", str(out), str(lib))
    after = json.loads(devbin("list", "--json", str(out)).stdout)["images"]
    kept = [str(i["arch"]) for i in after if i["kind"] == "zebin"]
    spirv = [sum(1 for i in imgs if i["kind"] == "spirv") for imgs in (images, after)]
    tally("intel prune --keep one device: only its zebins listed after, SPIR-V kept, libraries").add(
        bool(kept) and set(kept) == {keep} and spirv[0] == spirv[1] and out.stat().st_size < lib.stat().st_size,
        label, f"kept {keep}: zebins after {sorted(set(kept))} ({len(kept)} of {len(zebins)}), SPIR-V {spirv}, "
               f"{lib.stat().st_size} -> {out.stat().st_size} bytes")
    noisy = []
    for tool in ("readelf", readelf):
        if shutil.which(tool) is None and not Path(tool).exists():
            continue
        p = subprocess.run([tool, "-a", "-W", str(out)], capture_output=True, check=False)
        if p.returncode or p.stderr.strip():
            noisy.append(f"{Path(tool).name}: {p.stderr.decode(errors='replace').strip()[:120] or p.returncode}")
    tally("intel prune: readelf -a and llvm-readelf -a silent on the pruned library, libraries").add(
        not noisy, label, "; ".join(noisy))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "devbin-corpus-cache")
    ap.add_argument("--sample", type=int, default=1000, help="AMD code objects per library checked byte-wise and "
                    "against the notes (default 1000: all)")
    ap.add_argument("--only", default="", help="check only the wheels whose spec contains this")
    args = ap.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    vendors = {w.vendor for w in WHEELS if args.only in w.spec}
    cuobjdump = find_tool("cuobjdump")
    bundler = find_tool("clang-offload-bundler", versions=("19",))
    readelf = find_tool("llvm-readelf", versions=("19",))
    spirv_dis = shutil.which("spirv-dis")
    if readelf is None or ("nvidia" in vendors and cuobjdump is None) or ("amd" in vendors and bundler is None):
        raise SystemExit("corpus_check: needs llvm-readelf-19, and cuobjdump (NVIDIA wheels) and "
                         "clang-offload-bundler-19 (AMD wheels)")
    version = next((ln for ln in run([cuobjdump, "--version"]).stdout.decode().splitlines() if "release" in ln),
                   "?") if cuobjdump else "-"
    print(f"cuobjdump: {version}; {bundler}; {readelf}; {spirv_dis}")
    start = time.perf_counter()
    nlibs = 0
    for wheel in WHEELS:
        if args.only not in wheel.spec:
            continue
        for lib in fetch(wheel, args.cache):
            label = f"{wheel.spec}:{lib.name}"
            print(f"[{time.perf_counter() - start:6.0f}s] {label}", file=sys.stderr, flush=True)
            nlibs += 1
            with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
                try:
                    if wheel.vendor == "nvidia" and cuobjdump is not None:
                        check_nvidia(lib, label, cuobjdump, Path(tmp))
                    elif wheel.vendor == "intel":
                        check_intel(lib, label, readelf, spirv_dis, Path(tmp), args.sample)
                    elif bundler is not None:
                        check_amd(lib, label, bundler, readelf, Path(tmp), args.sample)
                except VendorRefuses as exc:
                    skipped = tally("skipped: the vendor tool refuses the library")
                    skipped.add(False, label, str(exc))
                    skipped.errors.append(f"{label}: {str(exc).splitlines()[0]}")
                    continue
                except RuntimeError as exc:
                    tally("runs without error").add(False, label, str(exc))
                else:
                    tally("runs without error").add(True, label)
    print(f"corpus: {nlibs} libraries from {sum(1 for w in WHEELS if args.only in w.spec)} wheels, "
          f"{time.perf_counter() - start:.0f} s")
    width = max(len(k) for k in TALLY)
    print(f"{'check':<{width}}  {'agree':>6}  {'disagree':>8}  first disagreement")
    for name, t in TALLY.items():
        print(f"{name:<{width}}  {t.agree:>6}  {t.disagree:>8}  {t.first}")
    for name, t in TALLY.items():
        if t.errors:
            print(f"\n{name}:")
            for line in t.errors:
                print(f"  {line}")
    sys.exit(1 if any(t.disagree for name, t in TALLY.items() if not name.startswith("skipped")) else 0)


if __name__ == "__main__":
    main()
