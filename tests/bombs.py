"""Decompression bombs built at test time (issue 18, defect 7): a few kilobytes that decode to gigabytes.

The payloads are real zstd frames of ``size`` zero bytes, compressed streaming (never held
whole); the containers around them come from the project's writers (fatbin) or, for the
compressed bundle, from its documented layout (the binary bundle's table, then the CCOB v3
header: magic, version, method, total size, uncompressed size, truncated MD5).
"""

from __future__ import annotations

import hashlib
import struct

import zstandard

from devbin.formats.bundle import constants as BC
from devbin.formats.fatbin import constants as FC
from devbin.formats.fatbin.writer import FatbinImage, write_fatbin

GIB = 1 << 30
_CHUNK = 1 << 24


def zstd_zeros(size: int, prefix: bytes = b"") -> tuple[bytes, int]:
    """One zstd frame (content size recorded) of ``prefix`` then zeros up to ``size`` bytes, and the
    truncated MD5 (the CCOB hash) of those bytes."""
    cctx = zstandard.ZstdCompressor(level=3, write_content_size=True)
    co = cctx.compressobj(size=size)
    md5 = hashlib.md5(prefix)
    out = [co.compress(prefix)]
    zeros = bytes(_CHUNK)
    left = size - len(prefix)
    while left:
        piece = zeros[:min(left, _CHUNK)]
        out.append(co.compress(piece))
        md5.update(piece)
        left -= len(piece)
    out.append(co.flush())
    return b"".join(out), int.from_bytes(md5.digest()[:8], "little")


def fatbin_bomb(entries: int = 1, size: int = GIB, prefix: bytes = b"") -> bytes:
    """A fatbin of ``entries`` sm_90 ELF entries, each a zstd payload that decodes to ``size`` bytes:
    ``prefix`` (e.g. a real cubin, so that the commands parse each image), then zeros."""
    payload, _ = zstd_zeros(size, prefix)
    return write_fatbin([FatbinImage(FC.KIND_ELF, 90, payload, identifier=f"bomb{i}.cu", compression="zstd",
                                     major=1, minor=8, stored_size=size) for i in range(entries)])


def ccob_bomb(size: int = GIB, target: str = "hipv4-amdgcn-amd-amdhsa--gfx90a") -> bytes:
    """A CCOB v3 zstd bundle of one gfx90a entry: an ELF-looking first page, then zeros, ``size`` bytes
    in all once decompressed (the entry starts at 4096, as the bundler aligns HIP images)."""
    ident = target.encode()
    table = BC.BUNDLE_MAGIC + struct.pack("<Q", 1) + struct.pack("<QQQ", 4096, size - 4096, len(ident)) + ident
    elf = (b"\x7fELF\x02\x01\x01\x40\x03" + bytes(7) + struct.pack("<HHI", 3, 224, 1) + bytes(24)
           + struct.pack("<I", 0x3F))  # ET_DYN, EM_AMDGPU, e_flags gfx90a: an image header, zeros after it
    head = table + bytes(4096 - len(table)) + elf
    payload, digest = zstd_zeros(size, head)
    header = BC.CCOB_MAGIC + struct.pack("<HHQQQ", 3, BC.METHOD_ZSTD, BC.CCOB_HEADER_SIZE[3] + len(payload), size,
                                         digest)
    return header + payload
