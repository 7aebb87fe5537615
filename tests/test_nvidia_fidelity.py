"""Agreement with NVIDIA's tools on binaries built at test time (issue 19, NVIDIA items).

* family-specific cubins (``sm_100f``, ``sm_120f``): extract names and resource listings as
  ``cuobjdump -lelf/-xelf all/-res-usage`` give them;
* PTX entries whose options descriptor records no string (CUDA 11's 0x48-byte header):
  no ``ptxasOptions =`` line, as cuobjdump;
* prototype strings of every shape ptxas writes (printf, assert, malloc/free, varargs, structs
  by value, device launches, built-ins, function pointers, ``.abi_preserve``), sm_80 to sm_120,
  against ``cuobjdump -elf``'s ``.nv.prototype`` listing; an undecodable one warns, never fails;
* LTO-IR entries: ``extract --kind lto-ir``, handed to nvJitLink.
"""

from __future__ import annotations

import json
import re
import struct
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devbin.formats.elf.reader import ElfFile
from devbin.formats.fatbin.reader import parse_fatbin
from devbin.model import TypeKind
from devbin.targets.nvidia.cubin import Cubin
from devbin.targets.nvidia.importer import import_cubin
from devbin.targets.nvidia.nvcallgraph import NvCallAbi, NvPrototype, parse_prototype_string

from tests.conftest import require_tool
from tests.runners import cli_err, cli_ok, run_tool


def _build(args: list[str]) -> None:
    p = run_tool(args, check=False)
    assert p.returncode == 0, p.stderr + p.stdout


# --------------------------------------------------------------------------- 1: family cubins

FAMILY_CU = "__global__ void kf(float *p) { p[threadIdx.x] *= 2.0f; }\n"


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = require_tool("nvcc")
    out = tmp_path_factory.mktemp("family")
    (out / "fam.cu").write_text(FAMILY_CU)
    gencode = ["-gencode=arch=compute_100f,code=sm_100f", "-gencode=arch=compute_120f,code=[sm_120f,compute_120f]",
               "-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_100a,code=sm_100a"]
    _build([nvcc, "-c", *gencode, "-o", str(out / "fam.o"), str(out / "fam.cu")])
    _build([nvcc, "-fatbin", *gencode, "-o", str(out / "fam.fatbin"), str(out / "fam.cu")])
    _build([nvcc, "-cubin", "-arch=sm_100f", "-o", str(out / "bare.cubin"), str(out / "fam.cu")])
    return {"obj": out / "fam.o", "fatbin": out / "fam.fatbin", "cubin": out / "bare.cubin"}


def _cuobjdump_names(path: Path) -> list[str]:
    p = run_tool([require_tool("cuobjdump"), "-lelf", "-lptx", str(path)], check=False)
    return [m[1] for m in re.finditer(r"^(?:ELF|PTX) file\s+\d+: (\S+)$", p.stdout, re.M)]


def test_family_cubins_extract_as_cuobjdump(family: dict[str, Path], tmp_path: Path) -> None:
    cuobjdump = require_tool("cuobjdump")
    for name, path in family.items():
        theirs, ours = tmp_path / f"{name}.cuobjdump", tmp_path / f"{name}.devbin"
        theirs.mkdir()
        for opt in ("-xelf", "-xptx"):
            p = run_tool(["bash", "-c", f"cd {theirs} && {cuobjdump} {opt} all {path}"], check=False)
            assert p.returncode in (0, 255), p.stderr
        cli_ok("extract", str(path), "-o", str(ours))
        a = {p.name: p.read_bytes() for p in theirs.iterdir()}
        b = {p.name: p.read_bytes() for p in ours.iterdir()}
        assert a == b, (name, sorted(a), sorted(b))
        assert sorted(b) == sorted(_cuobjdump_names(path)), name
    # cuobjdump names a family cubin by its e_flags (no family there), family PTX keeps the f.
    names = sorted(re.sub(r"\.\d+\.", ".", p.name) for p in (tmp_path / "obj.devbin").iterdir())
    assert names == ["fam.sm_100.cubin", "fam.sm_100a.cubin", "fam.sm_120.cubin", "fam.sm_120f.ptx", "fam.sm_90.cubin"]


def test_family_cubins_listed_with_their_family(family: dict[str, Path]) -> None:
    """devbin's own listing keeps the entry header's family (what `-res-usage` prints as arch =)."""
    data = json.loads(cli_ok("list", "--json", str(family["obj"])))
    assert sorted((i["kind"], i["arch"]) for i in data["images"]) == [
        ("cubin", "sm_100a"), ("cubin", "sm_100f"), ("cubin", "sm_120f"), ("cubin", "sm_90"),
        ("ptx", "compute_120f")]


def test_family_resources_equal_cuobjdump(family: dict[str, Path]) -> None:
    cuobjdump = require_tool("cuobjdump")
    for name, path in family.items():
        theirs = run_tool([cuobjdump, "-res-usage", str(path)], check=False).stdout
        assert cli_ok("resources", "--format", "cuobjdump", str(path)) == theirs, name


# --------------------------------------------------------------------------- 2: PTX options descriptor


def _with_ptx_header(fatbin: bytes, header_size: int, descriptor: bytes) -> bytes:
    """The one-PTX-entry ``fatbin`` with its entry header rewritten: 0x40 fixed bytes, then
    ``descriptor`` (options descriptor and string) up to ``header_size``; the payload follows."""
    fb = parse_fatbin(fatbin)
    (e,) = fb.entries
    fixed = bytearray(fatbin[e.offset:e.offset + 0x40])
    struct.pack_into("<I", fixed, 0x04, header_size)
    struct.pack_into("<I", fixed, 0x14, 0x40)
    assert len(descriptor) == header_size - 0x40
    body = bytes(fixed) + descriptor + fatbin[e.payload_offset:e.payload_offset + e.payload_size]
    head = bytearray(fatbin[:16])
    struct.pack_into("<Q", head, 8, len(body))
    return bytes(head) + body


@pytest.fixture(scope="module")
def ptx_fatbin(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    nvcc = require_tool("nvcc")
    out = tmp_path_factory.mktemp("ptxhdr")
    (out / "k.cu").write_text(FAMILY_CU)
    _build([nvcc, "-fatbin", "-gencode=arch=compute_80,code=compute_80", "-Xfatbin", "-compress=false",
            "-o", str(out / "k.fatbin"), str(out / "k.cu")])
    data = (out / "k.fatbin").read_bytes()
    (e,) = parse_fatbin(data).entries
    assert (e.header_size, e.options_offset, e.has_options, e.options) == (0x50, 0x40, True, "")
    return data


@pytest.mark.parametrize("case,header_size,descriptor,line", [
    ("cuda11", 0x48, struct.pack("<II", 0, 0), None),               # descriptor only, no string
    ("no-string-80", 0x50, struct.pack("<II", 0, 0) + bytes(8), None),
    ("no-string-len", 0x48, struct.pack("<II", 0, 5), None),        # a length without a string
    ("empty", 0x50, struct.pack("<II", 0x48, 0) + bytes(8), ""),     # CUDA 13's own layout
    ("options", 0x50, struct.pack("<II", 0x48, 3) + b"-O3" + bytes(5), "-O3"),
])
def test_ptxas_options_line_as_cuobjdump(ptx_fatbin: bytes, tmp_path: Path, case: str, header_size: int,
                                         descriptor: bytes, line: str | None) -> None:
    cuobjdump = require_tool("cuobjdump")
    path = tmp_path / f"{case}.fatbin"
    path.write_bytes(_with_ptx_header(ptx_fatbin, header_size, descriptor))
    (e,) = parse_fatbin(path.read_bytes()).entries
    assert e.header_size == header_size and e.has_options == (line is not None)
    assert e.options == (line or "") and e.data() == parse_fatbin(ptx_fatbin).entries[0].data()
    theirs = run_tool([cuobjdump, "-res-usage", str(path)], check=False).stdout
    ours = cli_ok("resources", "--format", "cuobjdump", str(path))
    assert ours == theirs
    assert ("ptxasOptions = " in ours) == (line is not None)
    assert _cuobjdump_names(path) == [f"{case}.1.sm_80.ptx"]
    cli_ok("extract", str(path), "-o", str(tmp_path / "x"))
    assert [p.name for p in (tmp_path / "x").iterdir()] == [f"{case}.1.sm_80.ptx"]


# --------------------------------------------------------------------------- 4: prototype strings

SHAPES_CU = r"""
#include <cstdio>
#include <cassert>
#include <cstdint>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
struct S12 { int a, b, c; };
struct S16 { double a, b; };
struct S24 { double a; int b; double c; };
struct S3 { char a, b, c; };
struct S64 { double v[8]; };
struct alignas(16) A16 { float x, y, z, w; };
__device__ __noinline__ char f_c(char a) { return a + 1; }
__device__ __noinline__ short f_s(short a, unsigned char b) { return a + b; }
__device__ __noinline__ float f_f(float a, double b) { return a + b; }
__device__ __noinline__ double f_d(double a) { return a / 3.0 + sqrt(a); }
__device__ __noinline__ void f_v(int *p) { *p = 1; }
__device__ __noinline__ S12 f_s12(S12 a) { a.a++; return a; }
__device__ __noinline__ S16 f_s16(S16 a, S24 b) { a.a += b.c; return a; }
__device__ __noinline__ S3 f_s3(S3 a) { a.a++; return a; }
__device__ __noinline__ S64 f_s64(S64 a) { a.v[0]++; return a; }
__device__ __noinline__ A16 f_a16(A16 a) { a.x++; return a; }
__device__ __noinline__ float4 f_f4(float4 a) { a.x++; return a; }
__device__ __noinline__ __half f_h(__half a) { return a; }
__device__ __noinline__ long long f_ll(long long a, long long b) { return a / b + a % b; }
__device__ __noinline__ bool f_b(bool a) { return !a; }
__device__ __noinline__ int2 f_i2(int2 a) { return a; }
__device__ __noinline__ uint64_t f_u128(unsigned __int128 *a) { return (uint64_t)*a; }
__device__ int vsum(int n, ...) { return n; }
typedef int (*fp_t)(int, float);
__device__ __noinline__ int cb1(int a, float b) { return a + (int)b; }
__device__ __noinline__ int cb2(int a, float b) { return a - (int)b; }
__device__ fp_t tbl[2] = {cb1, cb2};
typedef S12 (*fps_t)(S12, double);
__device__ __noinline__ S12 cbs(S12 a, double d) { a.b += d; return a; }
__device__ fps_t tbls[1] = {cbs};
__global__ void child(int *p) { p[threadIdx.x] = 1; }
__global__ void k(int *p, double *d, S12 *s, S16 *s16, S24 *s24, S3 *s3, S64 *s64, A16 *a16, float4 *f4,
                  __half *h, int i) {
  printf("hello %d %f\n", i, 1.0);
  assert(i > 0);
  p[0] = f_c(i) + f_s(i, i) + f_f(i, i) + f_d(i) + f_ll(i, i) + f_b(i);
  f_v(p);
  s[0] = f_s12(s[0]);
  s16[0] = f_s16(s16[0], s24[0]);
  s3[0] = f_s3(s3[0]);
  s64[0] = f_s64(s64[0]);
  a16[0] = f_a16(a16[0]);
  f4[0] = f_f4(f4[0]);
  h[0] = f_h(h[0]);
  int2 q = f_i2(make_int2(i, i)); p[1] = q.x;
  p[2] = f_u128((unsigned __int128*)d);
  p[3] = tbl[i & 1](i, 2.0f);
  s[1] = tbls[0](s[1], 1.0);
  int *m = (int*)malloc(16); m[0] = i; p[4] = m[0]; free(m);
  child<<<1, 32>>>(p);
  cooperative_groups::this_grid().sync();
}
"""

#: Hand-written PTX: .b128, aggregates with alignment, and ptxas's custom-ABI directives.
ABI_PTX = """.version 9.0
.target {arch}
.address_size 64
.visible .func (.param .b128 r) f128(.param .b128 a)
{{ .reg .b128 %q<3>; ld.param.b128 %q1, [a]; st.param.b128 [r], %q1; ret; }}
.visible .func (.param .b32 r) fp(.param .b32 a) .abi_preserve 8 .abi_preserve_control 2
{{ .reg .b32 %r<3>; ld.param.b32 %r1, [a]; st.param.b32 [r], %r1; ret; }}
.extern .func (.param .b32 r) e16(.param .b32 a) .abi_preserve 16;
.extern .func (.param .b32 r) ec4(.param .b32 a) .abi_preserve_control 4;
.extern .func (.param .b64 r) e7(.param .b64 a, .param .b64 b, .param .b64 c, .param .b64 d, .param .b64 e,
                                 .param .b64 f, .param .b64 g) .abi_preserve 8;
.extern .func (.param .align 16 .b8 r[32]) eagg(.param .align 8 .b8 a[24], .param .b32 b);
.visible .entry k(.param .u64 out)
{{
  .reg .b32 %r<8>; .reg .b64 %d<4>; .reg .b128 %q<3>;
  ld.param.u64 %d1, [out];
  {{ .param .b128 a; .param .b128 r; mov.b128 %q1, {{%d1, %d1}}; st.param.b128 [a], %q1; call (r), f128, (a);
     ld.param.b128 %q2, [r]; }}
  {{ .param .b32 a; .param .b32 r; st.param.b32 [a], 1; call (r), fp, (a); ld.param.b32 %r1, [r]; }}
  {{ .param .b32 a; .param .b32 r; st.param.b32 [a], 1; call (r), e16, (a); ld.param.b32 %r2, [r]; }}
  {{ .param .b32 a; .param .b32 r; st.param.b32 [a], 1; call (r), ec4, (a); ld.param.b32 %r3, [r]; }}
  {{ .param .b64 a; .param .b64 b; .param .b64 c; .param .b64 d; .param .b64 e; .param .b64 f; .param .b64 g;
     .param .b64 r; st.param.b64 [a], %d1; call (r), e7, (a, b, c, d, e, f, g); ld.param.b64 %d2, [r]; }}
  {{ .param .align 8 .b8 a[24]; .param .b32 b; .param .align 16 .b8 r[32]; st.param.b32 [b], 1;
     call (r), eagg, (a, b); ld.param.b32 %r5, [r]; }}
  st.global.b32 [%d1+8], %r1; st.global.b32 [%d1+12], %r2; st.global.b32 [%d1+16], %r3;
  st.global.b32 [%d1+24], %r5; st.global.b64 [%d1+32], %d2; st.global.b128 [%d1+48], %q2;
  ret;
}}
"""

#: Arithmetic whose slow paths ptxas calls as routines of its own (typed prototypes at -O0).
OPS_CU = r"""
__global__ void k(float *f, double *d, long long *l, unsigned long long *ul) {
  f[0] = f[1] / f[2]; f[3] = sqrtf(f[4]); f[5] = 1.0f / f[6];
  d[0] = d[1] / d[2]; d[3] = sqrt(d[4]); d[5] = 1.0 / d[6]; d[7] = rsqrt(d[8]);
  l[0] = l[1] / l[2]; l[3] = l[4] % l[5]; ul[0] = ul[1] / ul[2];
}
"""

ARCHS = ("sm_80", "sm_90", "sm_100", "sm_120")


@pytest.fixture(scope="module")
def proto_cubins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc, ptxas = require_tool("nvcc"), require_tool("ptxas")
    out = tmp_path_factory.mktemp("protos")
    (out / "shapes.cu").write_text(SHAPES_CU)
    (out / "ops.cu").write_text(OPS_CU)
    built = {}
    for arch in ARCHS:
        built[f"ops_{arch}"] = out / f"ops_{arch}.cubin"
        _build([nvcc, "-rdc=true", f"-arch={arch}", "-cubin", "-Xptxas", "-O0", "-o", str(built[f"ops_{arch}"]),
                str(out / "ops.cu")])
        built[f"shapes_{arch}"] = out / f"shapes_{arch}.cubin"
        _build([nvcc, "-rdc=true", f"-arch={arch}", "-cubin", "-o", str(built[f"shapes_{arch}"]),
                str(out / "shapes.cu")])
        ptx = out / f"abi_{arch}.ptx"
        ptx.write_text(ABI_PTX.format(arch=arch))
        built[f"abi_{arch}"] = out / f"abi_{arch}.cubin"
        _build([ptxas, "-c", f"-arch={arch}", "-o", str(built[f"abi_{arch}"]), str(ptx)])
    return built


def _cuobjdump_prototypes(path: Path) -> list[str]:
    """The strings ``cuobjdump -elf`` prints for ``.nv.prototype`` (``<sym,offset(string)>``)."""
    text = run_tool([require_tool("cuobjdump"), "-elf", str(path)], check=False).stdout
    block = re.search(r"^\.nv\.prototype\n(.*?)\n\n", text, re.M | re.S)
    assert block is not None
    return re.findall(r"<\d+,\d+\((.*)\)>", block[1])


def test_every_prototype_decodes_and_round_trips(proto_cubins: dict[str, Path]) -> None:
    seen: set[str] = set()
    for name, path in proto_cubins.items():
        cubin = Cubin(ElfFile(path.read_bytes()))
        strings = list(cubin.prototypes.values())
        assert strings == _cuobjdump_prototypes(path), name
        cg = cubin.callgraph
        assert cg is not None
        strings += [t for _, t in cg.indirect + cg.address_taken if t]
        for text in strings:
            assert parse_prototype_string(text).text() == text
        seen.update(strings)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            obj = import_cubin(ElfFile(path.read_bytes()))
        assert not [v for k, v in obj.metadata.items() if k == "nvidia.undecoded-prototype"], name
        code, out, err = cli_err("callgraph", str(path))
        assert code == 0, err
        assert err == "" and out.startswith(f"callgraph for {name.split('_', 1)[1]}:"), name
    # Every shape the grammar names was met.
    assert {"#ill|12p4r20sRx" + "0" * 60 + "fff9", "#vllill|12p4r20sRx" + "0" * 60 + "fff9", "#iib0", "#xx",
            "#b12b12l", "#b16b16b24", "#b2b2", "#ii|sBx0000000f", "#b32b24i", "#iii", "#lll", "#vl",
            "#ff", "#fff", "#ddd", "#ddiddd", "#dd", "#ddi"} <= seen
    assert any(t.startswith("#ii|1p4r22sBx00000003sRx7f") for t in seen)
    assert any(t.startswith("#llllllll|14p32r22sRx7f") for t in seen)


def test_prototype_meanings() -> None:
    vprintf = parse_prototype_string("#ill|12p4r20sRx" + "0" * 60 + "fff9")
    p = vprintf.prototype()
    assert (p.ret.kind, p.ret.size) == (TypeKind.BITS, 4)
    assert [(t.kind, t.size) for t in p.params] == [(TypeKind.BITS, 8), (TypeKind.BITS, 8)]
    assert vprintf.abi == NvCallAbi(12, 4, 20, False, (("R", 0xFFF9, 64),))
    assert vprintf.abi.scratch_registers("R") == (0, *range(3, 16))
    preserve8 = parse_prototype_string("#ii|1p4r22sBx00000003sRx7" + "f" * 57 + "00fff9")
    assert preserve8.abi is not None and preserve8.abi.scratch_registers("B") == (0, 1)
    assert set(range(16, 24)).isdisjoint(preserve8.abi.scratch_registers("R"))
    assert preserve8.abi.scratch_registers("R")[-1] == 254  # RZ (R255) is never scratch
    varargs = parse_prototype_string("#iib0").prototype()
    assert [(t.kind, t.size) for t in varargs.params] == [(TypeKind.BITS, 4), (TypeKind.AGGREGATE, 0)]
    assert parse_prototype_string("#xx").prototype().ret.size == 16
    div = parse_prototype_string("#ddd").prototype()  # __cuda_sm20_div_rn_f64_full
    assert [(t.kind, t.size) for t in (div.ret, *div.params)] == [(TypeKind.FLOAT, 8)] * 3
    assert parse_prototype_string("#ff").prototype().ret == parse_prototype_string("#fi").prototype().ret


_TYPES = st.one_of(st.sampled_from(["i", "l", "x", "f", "d"]), st.integers(0, 1 << 20).map(lambda n: f"b{n}"))


@st.composite
def _abis(draw: st.DrawFn) -> NvCallAbi:
    regs = st.integers(0, 255)
    count = draw(st.none() | regs)
    ra = draw(st.none() | regs)
    classes = draw(st.lists(st.text("BRPU", min_size=1, max_size=2), max_size=3))
    scratch = []
    for c in classes:
        digits = draw(st.integers(1, 64))
        scratch.append((c, draw(st.integers(0, 16 ** digits - 1)), digits))
    abi = NvCallAbi(count, None if count is None else draw(regs), ra, ra is not None and draw(st.booleans()),
                    tuple(scratch))
    return abi


@given(ret=st.one_of(st.just("v"), _TYPES), params=st.lists(_TYPES, max_size=8), abi=st.none() | _abis())
def test_prototype_string_round_trip(ret: str, params: list[str], abi: NvCallAbi | None) -> None:
    if abi is not None and not abi.text():
        abi = None  # "#i|" is no prototype string
    proto = NvPrototype((ret, *params), abi)
    assert parse_prototype_string(proto.text()) == proto


@pytest.mark.parametrize("bad", ["#iq", "#ib", "#iv", "#", "iii", "#ii|", "#ii|zz", "#ii|1p", "#ii|sRx",
                                 "#ii|1p04", "#ii|sBxG0"])
def test_bad_prototype_strings_raise(bad: str) -> None:
    from devbin.errors import FormatError

    with pytest.raises(FormatError):
        parse_prototype_string(bad)


def test_corrupt_prototype_warns_once_and_goes_on(proto_cubins: dict[str, Path], tmp_path: Path) -> None:
    data = proto_cubins["shapes_sm_80"].read_bytes()
    good = "#vllill|12p4r20sRx"
    assert data.count(good.encode()) == 1
    bad = tmp_path / "bad.cubin"
    bad.write_bytes(data.replace(good.encode(), b"#vllq?l|12p4r20sRx"))
    code, out, err = cli_err("callgraph", str(bad))
    assert code == 0, err
    assert out == cli_ok("callgraph", str(proto_cubins["shapes_sm_80"]))
    assert err.count("warning: ") == 1 and "unknown type letter 'q'" in err
    assert "#vllq?l|12p4r20sRx" in err
    json_out = cli_ok("callgraph", "--json", str(bad))
    assert json.loads(json_out)["images"][0]["nodes"]
    with pytest.warns(Warning, match="unknown type letter 'q'"):
        obj = import_cubin(ElfFile(bad.read_bytes()))
    raw = [v for k, v in obj.metadata.items() if k == "nvidia.undecoded-prototype"]
    assert raw == ["#vllq?l|12p4r20sRx" + "0" * 60 + "fff9"]
    collected: list[Exception] = []
    import_cubin(ElfFile(bad.read_bytes()), diag=collected.append)
    assert len(collected) == 1


# --------------------------------------------------------------------------- 6: LTO-IR

LTO_CU = ("__device__ int sq(int x) { return x * x; }\n"
          "__global__ void kl(int *p) { p[threadIdx.x] = sq(p[threadIdx.x]); }\n")


def require_nvjitlink() -> Any:
    """``cuda.bindings.nvjitlink`` (the test extra installs cuda-bindings and nvidia-nvjitlink);
    skip when missing, fail under CI, as :func:`require_tool`."""
    from tests.conftest import in_ci

    try:
        from cuda.bindings import nvjitlink
        nvjitlink.version()
    except Exception as e:  # ImportError, or the library not found by cuda-pathfinder
        msg = f"nvJitLink not usable ({e}): pip install cuda-bindings nvidia-nvjitlink"
        if in_ci():
            pytest.fail(msg + " -- oracle tests must not skip in CI", pytrace=False)
        pytest.skip(msg)
    return nvjitlink


def _nvjitlink(data: bytes, fatbin: bool, arch: str = "sm_90") -> bytes:
    """Link one input with nvJitLink (``-lto``; no GPU needed) and return the cubin."""
    J = require_nvjitlink()
    h = J.create(2, [f"-arch={arch}", "-lto"])
    try:
        kind = J.InputType.FATBIN if fatbin else J.InputType.LTOIR
        J.add_data(h, kind, data, len(data), "input")
        J.complete(h)
        out = bytearray(J.get_linked_cubin_size(h))
        J.get_linked_cubin(h, out)
        return bytes(out)
    finally:
        J.destroy(h)


@pytest.fixture(scope="module")
def lto_objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = require_tool("nvcc")
    out = tmp_path_factory.mktemp("lto")
    (out / "lto.cu").write_text(LTO_CU)
    lto90 = "-gencode=arch=compute_90,code=lto_90"
    builds = {"plain": [lto90, "-Xfatbin", "-compress=false"], "zstd": [lto90],
              "lz4": [lto90, "-Xfatbin", "-compress-mode=speed"], "dlto": ["-dlto", "-arch=sm_90"]}
    built = {}
    for name, flags in builds.items():
        built[name] = out / f"{name}.o"
        _build([nvcc, "-dc", *flags, "-o", str(built[name]), str(out / "lto.cu")])
    return built


def test_lto_ir_listed_with_its_encoding(lto_objects: dict[str, Path]) -> None:
    for name, path in lto_objects.items():
        data = json.loads(cli_ok("list", "--json", str(path)))
        (lto,) = [i for i in data["images"] if i["kind"] == "lto-ir"]
        assert lto["arch"] == "compute_90"
        assert lto["compression"] == ("none" if name == "plain" else "nvidia-opaque"), name


def test_lto_ir_extracted_and_linked_by_nvjitlink(lto_objects: dict[str, Path], tmp_path: Path) -> None:
    from devbin.images import scan

    cuobjdump = require_tool("cuobjdump")
    for name, path in lto_objects.items():
        folder = tmp_path / name
        cli_ok("extract", str(path), "--kind", "lto-ir", "-o", str(folder))
        (written,) = folder.iterdir()
        (image,) = [i for i in scan([str(path)]) if i.kind == "lto-ir"]
        e = image.entry
        assert e is not None
        data = written.read_bytes()
        if name == "plain":
            assert written.name == f"{name}.1.sm_90.ltoir"
            assert data == bytes(e.raw_payload) and data[:4] == b"\xed\x43\x4e\x7f"  # byte-exact LTO-IR
        else:
            # NVIDIA's own encoding: the entry as stored, in a one-entry fatbin (same entry bytes).
            assert written.name == f"{name}.1.sm_90.ltoir.fatbin"
            (copy,) = parse_fatbin(data).entries
            original = path.read_bytes()[e.offset:e.offset + e.header_size + e.payload_size]
            assert data[16:] == original
            assert (copy.reserved, copy.flags, copy.options) == (e.reserved, e.flags, e.options)
        cubin = _nvjitlink(data, fatbin=name != "plain")
        linked = tmp_path / f"{name}.linked.cubin"
        linked.write_bytes(cubin)
        theirs = run_tool([cuobjdump, "-res-usage", str(linked)], check=False).stdout
        assert "Function _Z2klPi:" in theirs, (name, theirs)
        assert cli_ok("resources", "--format", "cuobjdump", str(linked)) == theirs
    # Default extract stays cuobjdump's (-xelf all / -xptx all): LTO-IR only on request.
    cli_ok("extract", str(lto_objects["dlto"]), "-o", str(tmp_path / "default"))
    assert [p.name for p in (tmp_path / "default").iterdir()] == ["dlto.1.sm_90.ptx"]
