"""Seeds for the CLI mutation harness (fuzz/cli_mutate.py), built at run time.

Every seed is a real file: the shipped samples (src/devbin/samples/) as they are, and
containers built from them with devbin's own writers (fatbin, OffloadBinary v1/v2, plain and
compressed clang offload bundles, wrapped images, ar archives, super-archives plain and
packed, a host object carrying .nv_fatbin and .hip_fatbin), plus a zip and a wheel holding
some of them (zipfile), the wheel with a RECORD that matches its members.  Same bytes on every
run, so a campaign is reproducible from its --seed alone.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Seed:
    """One seed file: its format (the table's row group), the file name the CLI sees, its bytes,
    the device ``select``/``prune``/``load`` name, and the super-archive target ``ar`` takes."""

    fmt: str
    name: str
    data: bytes
    device: str = "gfx90a"
    target: str = "gfx90a"


def sample(name: str) -> bytes:
    return (resources.files("devbin.samples") / name).read_bytes()


def _zip(members: list[tuple[str, bytes]], comment: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for i, (n, d) in enumerate(members):
            info = zipfile.ZipInfo(n, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if i % 2 == 0 else zipfile.ZIP_STORED
            z.writestr(info, d)
        z.comment = comment
    return buf.getvalue()


def _wheel(members: list[tuple[str, bytes]]) -> bytes:
    """A wheel of ``members`` and the RECORD that vouches for them (PEP 427), which devbin verifies before
    it rewrites one: a mutant that changes a member without its row is a tampered wheel."""
    from devbin.formats.wheel import record_hash

    record = "pkg-1.0.dist-info/RECORD"
    rows = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in members) + f"{record},,\n"
    return _zip([*members, (record, rows.encode())])


def build_seeds() -> list[Seed]:
    from devbin.formats.ar.writer import ArMember, write_archive
    from devbin.formats.bundle.writer import write_bundle, write_compressed_bundle
    from devbin.formats.elf.edit import ElfEditor, NewSection
    from devbin.formats.elf.reader import ElfFile
    from devbin.formats.fatbin import constants as FC
    from devbin.formats.fatbin.writer import FatbinImage, write_fatbin
    from devbin.formats.offload import constants as OC
    from devbin.formats.offload.writer import OffloadImage, write_offload_binary
    from devbin.formats.wrapped.writer import write_wrapped
    from devbin.superarchive import InputMember, TargetInput, create

    cubin = sample("sample_sm90.cubin")
    rdc = sample("sample_sm90_rdc.cubin")
    ptx = sample("sample.ptx")
    gfx = sample("sample_gfx90a.o")
    kern = sample("sample_link_kern.o")
    lib = sample("sample_link_lib.o")
    so = sample("sample_load_lib.so")
    amd_id = "hipv4-amdgcn-amd-amdhsa--gfx90a"

    fatbin = write_fatbin([
        FatbinImage(FC.KIND_ELF, 90, cubin, identifier="sample.cu"),
        FatbinImage(FC.KIND_PTX, 90, ptx, identifier="sample.cu", options="-O3"),
        FatbinImage(FC.KIND_ELF, 90, rdc, identifier="rdc.cu", compression="zstd"),
    ])
    offload1 = write_offload_binary([
        OffloadImage.of(cubin, image_kind=OC.IMG_CUBIN, offload_kind=OC.OFK_CUDA,
                        strings={"triple": "nvptx64-nvidia-cuda", "arch": "sm_90"}),
        OffloadImage.of(gfx, image_kind=OC.IMG_OBJECT, offload_kind=OC.OFK_HIP,
                        strings={"triple": "amdgcn-amd-amdhsa", "arch": "gfx90a"}),
    ])
    offload2 = write_offload_binary([
        OffloadImage.of(gfx, image_kind=OC.IMG_OBJECT, offload_kind=OC.OFK_OPENMP,
                        strings={"triple": "amdgcn-amd-amdhsa", "arch": "gfx90a:xnack+"}),
        OffloadImage.of(cubin, image_kind=OC.IMG_CUBIN, offload_kind=OC.OFK_OPENMP,
                        strings={"triple": "nvptx64-nvidia-cuda", "arch": "sm_90"}),
    ], version=OC.VERSION_2)
    entries = [("host-x86_64-unknown-linux-gnu-", b""), (amd_id, gfx), ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", kern)]
    bundle = write_bundle(entries)
    ccob2 = write_compressed_bundle(entries, method="zstd", version=2)
    ccob3 = write_compressed_bundle(entries, method="zlib", version=3)
    wrapped = write_wrapped(cubin, {"producer": "devbin-fuzz", "arch": "sm_90"})
    ar = write_archive([ArMember("kern.o", kern), ArMember("lib.o", lib), ArMember("a_rather_long_member_name.o", gfx)])
    sa_plain = create([TargetInput("gfx90a", (InputMember("kern.o", kern), InputMember("lib.o", lib))),
                       TargetInput("sm_90", (InputMember("rdc.o", rdc),))])
    sa_packed = create([TargetInput("gfx90a", (InputMember("kern.o", kern), InputMember("lib.o", lib))),
                        TargetInput("gfx90a:xnack+", (InputMember("kern.o", kern), InputMember("g.o", gfx)))],
                       storage="packed")
    from tests.elfbuild import small_elf  # a relocatable x86-64 host object, from devbin's ELF writer

    ed = ElfEditor(ElfFile(small_elf()))
    ed.add_section(NewSection(".nv_fatbin", fatbin, align=8))
    ed.add_section(NewSection(".hip_fatbin", write_bundle(entries, align=4096), align=4096))
    host = ed.write()
    zipped = _zip([("pkg/k.sm_90.cubin", cubin), ("pkg/app.fatbin", fatbin), ("pkg/k.hipfb", ccob2),
                   ("pkg/lib.a", ar)])
    wheel = _wheel([("pkg/lib/libk.so", host), ("pkg/k.offload", offload1),
                    ("pkg/__init__.py", b"from . import lib\n")])
    return [
        Seed("cubin", "k.sm_90.cubin", cubin, device="sm_90", target="sm_90"),
        Seed("cubin-rdc", "rdc.sm_90.cubin", rdc, device="sm_90", target="sm_90"),
        Seed("amdgpu", "k.gfx90a.o", gfx),
        Seed("amdgpu-reloc", "kern.o", kern),
        Seed("amdgpu-so", "lib.so", so),
        Seed("fatbin", "app.fatbin", fatbin, device="sm_90", target="sm_90"),
        Seed("offload", "app.offload", offload1),
        Seed("offload-v2", "app2.offload", offload2),
        Seed("bundle", "app.hipfb", bundle),
        Seed("ccob-v2", "app.ccob", ccob2),
        Seed("ccob-v3", "app3.ccob", ccob3),
        Seed("wrapped", "k.devbinw", wrapped, device="sm_90", target="sm_90"),
        Seed("ar", "libk.a", ar),
        Seed("superarchive", "libsa.a", sa_plain),
        Seed("superarchive-packed", "libsap.a", sa_packed, device="gfx90a:xnack+", target="gfx90a:xnack+"),
        Seed("host", "host.o", host, device="sm_90", target="sm_90"),
        Seed("zip", "pkg.zip", zipped, device="sm_90", target="sm_90"),
        Seed("wheel", "pkg-1.0-py3-none-any.whl", wheel),
    ]
