"""Mutators for the CLI mutation harness (fuzz/cli_mutate.py).

Field-targeted mutators find the fields of every structure in a *valid* seed (the seeds are
built by devbin's writers, so walking them here needs no defence beyond a size check) and set
one of them to a value chosen to break a reader: 0, 1, all ones, the top bit, the value +/- 1,
twice it, the file's length (+/- 1), a small index, a random value.  Located structures:

* every ELF found in the file (at offset 0 or embedded at any offset: fatbin entries, bundle
  and OffloadBinary images, ar members, wrapped images, host sections): the ELF header,
  section headers, program headers, symbols, relocations (symbol index and type), notes
  (namesz/descsz/type), and the MessagePack lengths and integers of the AMDGPU metadata note;
* CUDA fatbin headers and entry headers, clang offload bundle headers and entry tables,
  compressed-bundle (CCOB v2/v3) headers, OffloadBinary headers, entries and string tables,
  wrapped-image headers and their ULEB metadata lengths, ar member headers (decimal size,
  name, mode fields as text) and the GNU symbol table, super-archive manifest headers, zip
  local/central/end records;

plus structure-aware rebuilders that keep the outer checksum valid, so the mutant reaches the
inner reader: a CCOB's inner bundle mutated and re-compressed with its MD5-derived hash
recomputed (``write_compressed_bundle`` of the raw bytes), a super-archive manifest whose
MessagePack map is mutated and whose SHA-256 and zstd frame are rebuilt, a zip member's
content mutated and re-written with a valid CRC (a wheel's RECORD row rewritten to match half the
time), a wheel tampered as an installer would refuse it (:data:`WHEEL_TAMPERS`: traversal, absolute
and backslash names, duplicate members, RECORD rows with a wrong hash or size, missing, extra or md5,
a RECORD that is not UTF-8, none or two, the wheel truncated); and the generic ones (bit flips, boundary
bytes, truncation, insertion, deletion, splices from another seed).
"""

from __future__ import annotations

import hashlib
import io
import random
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

Mutant = tuple[bytes, str]


@dataclass(frozen=True)
class Field:
    """One integer field: where, how wide, byte order, and what it is (for the description)."""

    offset: int
    width: int
    little: bool
    name: str
    text: bool = False  # an ar header's ASCII decimal/octal field


# --------------------------------------------------------------------------- ELF

_EHDR64 = [("e_type", 16, 2), ("e_machine", 18, 2), ("e_version", 20, 4), ("e_entry", 24, 8), ("e_phoff", 32, 8),
           ("e_shoff", 40, 8), ("e_flags", 48, 4), ("e_ehsize", 52, 2), ("e_phentsize", 54, 2), ("e_phnum", 56, 2),
           ("e_shentsize", 58, 2), ("e_shnum", 60, 2), ("e_shstrndx", 62, 2)]
_EHDR32 = [("e_type", 16, 2), ("e_machine", 18, 2), ("e_version", 20, 4), ("e_entry", 24, 4), ("e_phoff", 28, 4),
           ("e_shoff", 32, 4), ("e_flags", 36, 4), ("e_ehsize", 40, 2), ("e_phentsize", 42, 2), ("e_phnum", 44, 2),
           ("e_shentsize", 46, 2), ("e_shnum", 48, 2), ("e_shstrndx", 50, 2)]
_IDENT = [("ei_class", 4, 1), ("ei_data", 5, 1), ("ei_version", 6, 1), ("ei_osabi", 7, 1), ("ei_abiversion", 8, 1)]
_SHDR64 = [("sh_name", 0, 4), ("sh_type", 4, 4), ("sh_flags", 8, 8), ("sh_addr", 16, 8), ("sh_offset", 24, 8),
           ("sh_size", 32, 8), ("sh_link", 40, 4), ("sh_info", 44, 4), ("sh_addralign", 48, 8), ("sh_entsize", 56, 8)]
_SHDR32 = [("sh_name", 0, 4), ("sh_type", 4, 4), ("sh_flags", 8, 4), ("sh_addr", 12, 4), ("sh_offset", 16, 4),
           ("sh_size", 20, 4), ("sh_link", 24, 4), ("sh_info", 28, 4), ("sh_addralign", 32, 4), ("sh_entsize", 36, 4)]
_PHDR64 = [("p_type", 0, 4), ("p_flags", 4, 4), ("p_offset", 8, 8), ("p_vaddr", 16, 8), ("p_filesz", 32, 8),
           ("p_memsz", 40, 8), ("p_align", 48, 8)]
_PHDR32 = [("p_type", 0, 4), ("p_offset", 4, 4), ("p_vaddr", 8, 4), ("p_filesz", 16, 4), ("p_memsz", 20, 4),
           ("p_flags", 24, 4), ("p_align", 28, 4)]
_SYM64 = [("st_name", 0, 4), ("st_info", 4, 1), ("st_other", 5, 1), ("st_shndx", 6, 2), ("st_value", 8, 8),
          ("st_size", 16, 8)]
_SYM32 = [("st_name", 0, 4), ("st_value", 4, 4), ("st_size", 8, 4), ("st_info", 12, 1), ("st_other", 13, 1),
          ("st_shndx", 14, 2)]
SHT_SYMTAB, SHT_NOTE, SHT_RELA, SHT_REL, SHT_DYNSYM = 2, 7, 4, 9, 11
NT_AMDGPU_METADATA = 32


def _u(data: bytes | bytearray, off: int, width: int, little: bool) -> int:
    return int.from_bytes(data[off:off + width], "little" if little else "big")


def elf_fields(data: bytes, base: int, end: int) -> list[Field]:
    """The fields of the ELF at ``data[base:end]`` (a seed's, so valid; anything odd stops the walk)."""
    if end - base < 52 or data[base + 4] not in (1, 2) or data[base + 5] not in (1, 2):
        return []
    is64, little = data[base + 4] == 2, data[base + 5] == 1
    out = [Field(base + o, w, little, f"elf@{base:#x}.{n}") for n, o, w in _IDENT + (_EHDR64 if is64 else _EHDR32)]
    hdr = dict((n, _u(data, base + o, w, little)) for n, o, w in (_EHDR64 if is64 else _EHDR32))
    shdr, phdr = (_SHDR64, _PHDR64) if is64 else (_SHDR32, _PHDR32)
    shsize, phsize = (64, 56) if is64 else (40, 32)
    for i in range(min(hdr["e_phnum"], 64)):
        at = base + hdr["e_phoff"] + i * phsize
        if at + phsize > end:
            break
        out += [Field(at + o, w, little, f"elf@{base:#x}.phdr[{i}].{n}") for n, o, w in phdr]
    sections = []
    for i in range(min(hdr["e_shnum"], 512)):
        at = base + hdr["e_shoff"] + i * shsize
        if at + shsize > end:
            break
        out += [Field(at + o, w, little, f"elf@{base:#x}.shdr[{i}].{n}") for n, o, w in shdr]
        sections.append({n: _u(data, at + o, w, little) for n, o, w in shdr})
    for i, s in enumerate(sections):
        start, size = base + s["sh_offset"], s["sh_size"]
        if start + size > end or s["sh_type"] not in (SHT_SYMTAB, SHT_DYNSYM, SHT_REL, SHT_RELA, SHT_NOTE):
            continue
        where = f"elf@{base:#x}.sec[{i}]"
        if s["sh_type"] in (SHT_SYMTAB, SHT_DYNSYM):
            esz = 24 if is64 else 16
            for k in range(min(size // esz, 256)):
                out += [Field(start + k * esz + o, w, little, f"{where}.sym[{k}].{n}") for n, o, w in
                        (_SYM64 if is64 else _SYM32)]
        elif s["sh_type"] in (SHT_REL, SHT_RELA):
            esz = (16 if is64 else 8) + ((8 if is64 else 4) if s["sh_type"] == SHT_RELA else 0)
            for k in range(min(size // esz, 256)):
                at = start + k * esz
                if is64:  # r_info: symbol in the high 32 bits, type in the low 32
                    sym_at, type_at = (at + 12, at + 8) if little else (at + 8, at + 12)
                    out += [Field(at, 8, little, f"{where}.rel[{k}].r_offset"),
                            Field(sym_at, 4, little, f"{where}.rel[{k}].r_sym"),
                            Field(type_at, 4, little, f"{where}.rel[{k}].r_type")]
                else:
                    out += [Field(at, 4, little, f"{where}.rel[{k}].r_offset"),
                            Field(at + 4, 4, little, f"{where}.rel[{k}].r_info")]
                if s["sh_type"] == SHT_RELA:
                    out.append(Field(at + (16 if is64 else 8), 8 if is64 else 4, little, f"{where}.rel[{k}].r_addend"))
        else:
            out += note_fields(data, start, start + size, little, where)
    return out


def note_fields(data: bytes, at: int, end: int, little: bool, where: str) -> list[Field]:
    out: list[Field] = []
    k = 0
    while at + 12 <= end and k < 64:
        namesz, descsz, ntype = (_u(data, at + j, 4, little) for j in (0, 4, 8))
        out += [Field(at, 4, little, f"{where}.note[{k}].namesz"),
                Field(at + 4, 4, little, f"{where}.note[{k}].descsz"),
                Field(at + 8, 4, little, f"{where}.note[{k}].type")]
        desc = at + 12 + ((namesz + 3) & ~3)
        if desc + descsz > end:
            break
        if ntype == NT_AMDGPU_METADATA and data[at + 12:at + 12 + namesz].rstrip(b"\0") == b"AMDGPU":
            out += [Field(o, w, False, f"{where}.note[{k}].msgpack@{o - desc:#x}.{n}")
                    for o, w, n in msgpack_fields(data, desc, desc + descsz)]
        at = desc + ((descsz + 3) & ~3)
        k += 1
    return out


def msgpack_fields(data: bytes, start: int, end: int) -> list[tuple[int, int, str]]:
    """(offset, width, what) of every length and integer in the MessagePack value(s) at data[start:end].

    Fix-width lengths (fixmap/fixarray/fixstr) are reported as the type byte itself (width 1):
    changing it changes both the type and the length, which is the point.
    """
    out: list[tuple[int, int, str]] = []
    pos = start

    def one(depth: int) -> None:
        nonlocal pos
        if pos >= end or depth > 32 or len(out) > 4000:
            raise ValueError
        b = data[pos]
        at = pos
        pos += 1
        if b <= 0x7F:
            out.append((at, 1, "fixint"))
        elif 0x80 <= b <= 0x9F:
            out.append((at, 1, "fixmap" if b < 0x90 else "fixarray"))
            for _ in range((b & 0x0F) * (2 if b < 0x90 else 1)):
                one(depth + 1)
        elif 0xA0 <= b <= 0xBF:
            out.append((at, 1, "fixstr"))
            pos += b & 0x1F
        elif b in (0xC0, 0xC2, 0xC3) or b >= 0xE0:
            pass
        elif b in (0xC4, 0xC5, 0xC6, 0xD9, 0xDA, 0xDB):
            w = {0xC4: 1, 0xC5: 2, 0xC6: 4, 0xD9: 1, 0xDA: 2, 0xDB: 4}[b]
            out.append((pos, w, "binlen" if b < 0xD0 else "strlen"))
            pos += w + int.from_bytes(data[pos:pos + w], "big")
        elif b in (0xCA, 0xCB):
            pos += 4 if b == 0xCA else 8
        elif 0xCC <= b <= 0xD3:
            w = 1 << ((b - 0xCC) % 4)
            out.append((pos, w, "int"))
            pos += w
        elif b in (0xDC, 0xDD, 0xDE, 0xDF):
            w = 2 if b in (0xDC, 0xDE) else 4
            n = int.from_bytes(data[pos:pos + w], "big")
            out.append((pos, w, "arraylen" if b < 0xDE else "maplen"))
            pos += w
            for _ in range(n * (2 if b >= 0xDE else 1)):
                one(depth + 1)
        else:  # ext types: not in AMDGPU metadata
            raise ValueError

    try:
        while pos < end and data[pos] != 0:
            one(0)
    except (ValueError, IndexError):
        pass
    return out


def embedded_elfs(data: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of every ELF found at any offset; its end is its section table's end or the file's."""
    at = data.find(b"\x7fELF")
    while at >= 0:
        yield at, len(data)
        at = data.find(b"\x7fELF", at + 1)


# --------------------------------------------------------------------------- containers

FATBIN_MAGIC = b"\x50\xed\x55\xba"
_FAT_ENTRY = [("kind", 0, 2), ("version", 2, 2), ("header_size", 4, 4), ("payload_size", 8, 8),
              ("compressed_size", 16, 4), ("options_offset", 20, 4), ("minor", 24, 2), ("major", 26, 2),
              ("arch", 28, 4), ("identifier_offset", 32, 4), ("identifier_len", 36, 4), ("flags", 40, 8),
              ("zero", 48, 8), ("uncompressed_size", 56, 8)]


def fatbin_fields(data: bytes) -> list[Field]:
    out: list[Field] = []
    at = data.find(FATBIN_MAGIC)
    while at >= 0 and at + 16 <= len(data):
        w = f"fatbin@{at:#x}"
        out += [Field(at + 4, 2, True, f"{w}.version"), Field(at + 6, 2, True, f"{w}.header_size"),
                Field(at + 8, 8, True, f"{w}.fat_size")]
        end = at + _u(data, at + 6, 2, True) + _u(data, at + 8, 8, True)
        e = at + _u(data, at + 6, 2, True)
        k = 0
        while e + 64 <= min(end, len(data)) and k < 64:
            out += [Field(e + o, n_w, True, f"{w}.entry[{k}].{n}") for n, o, n_w in _FAT_ENTRY]
            hs, ps = _u(data, e + 4, 4, True), _u(data, e + 8, 8, True)
            if hs == 0:
                break
            e += hs + ps
            k += 1
        at = data.find(FATBIN_MAGIC, at + 4)
    return out


BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"


def bundle_fields(data: bytes) -> list[Field]:
    out: list[Field] = []
    at = data.find(BUNDLE_MAGIC)
    while at >= 0 and at + 32 <= len(data):
        w = f"bundle@{at:#x}"
        out.append(Field(at + 24, 8, True, f"{w}.count"))
        e = at + 32
        for k in range(min(_u(data, at + 24, 8, True), 64)):
            if e + 24 > len(data):
                break
            out += [Field(e, 8, True, f"{w}.entry[{k}].offset"), Field(e + 8, 8, True, f"{w}.entry[{k}].size"),
                    Field(e + 16, 8, True, f"{w}.entry[{k}].id_len")]
            e += 24 + _u(data, e + 16, 8, True)
        at = data.find(BUNDLE_MAGIC, at + 1)
    return out


def ccob_fields(data: bytes) -> list[Field]:
    if not data.startswith(b"CCOB") or len(data) < 32:
        return []
    v = _u(data, 4, 2, True)
    out = [Field(4, 2, True, "ccob.version"), Field(6, 2, True, "ccob.method")]
    if v == 2:
        return [*out, Field(8, 4, True, "ccob.total_size"), Field(12, 4, True, "ccob.uncompressed_size"),
                Field(16, 8, True, "ccob.hash")]
    return [*out, Field(8, 8, True, "ccob.total_size"), Field(16, 8, True, "ccob.uncompressed_size"),
            Field(24, 8, True, "ccob.hash")]


OFFLOAD_MAGIC = b"\x10\xff\x10\xad"


def offload_fields(data: bytes) -> list[Field]:
    out: list[Field] = []
    at = data.find(OFFLOAD_MAGIC)
    while at >= 0 and at + 32 <= len(data):
        w = f"offload@{at:#x}"
        version = _u(data, at + 4, 4, True)
        out += [Field(at + 4, 4, True, f"{w}.version"), Field(at + 8, 8, True, f"{w}.size"),
                Field(at + 16, 8, True, f"{w}.entry_offset"), Field(at + 24, 8, True, f"{w}.entry_size_or_count")]
        count = 1 if version == 1 else min(_u(data, at + 24, 8, True), 16)
        e = at + _u(data, at + 16, 8, True)
        for k in range(count):
            if e + 40 > len(data):
                break
            ew = f"{w}.entry[{k}]"
            out += [Field(e, 2, True, f"{ew}.image_kind"), Field(e + 2, 2, True, f"{ew}.offload_kind"),
                    Field(e + 4, 4, True, f"{ew}.flags"), Field(e + 8, 8, True, f"{ew}.string_offset"),
                    Field(e + 16, 8, True, f"{ew}.num_strings"), Field(e + 24, 8, True, f"{ew}.image_offset"),
                    Field(e + 32, 8, True, f"{ew}.image_size")]
            s, n = at + _u(data, e + 8, 8, True), min(_u(data, e + 16, 8, True), 16)
            ssz = 16 if version == 1 else 24
            for j in range(n):
                if s + ssz > len(data):
                    break
                out += [Field(s, 8, True, f"{ew}.string[{j}].key"), Field(s + 8, 8, True, f"{ew}.string[{j}].value")]
                if version != 1:
                    out.append(Field(s + 16, 8, True, f"{ew}.string[{j}].value_size"))
                s += ssz
            e += 40
        at = data.find(OFFLOAD_MAGIC, at + 4)
    return out


WRAPPED_MAGIC = b"DEVBINW\0"


def wrapped_fields(data: bytes) -> list[Field]:
    at = data.find(WRAPPED_MAGIC)
    if at < 0 or at + 32 > len(data):
        return []
    out = [Field(at + o, w, True, f"wrapped.{n}") for n, o, w in
           (("version", 8, 2), ("flags", 10, 2), ("header_size", 12, 4), ("image_size", 16, 8), ("pairs", 24, 4),
            ("reserved", 28, 4))]
    p, hs = at + 32, at + _u(data, at + 12, 4, True)
    k = 0
    while p < min(hs, len(data)) and k < 64:  # ULEB lengths of each key and value (one byte each here)
        n = data[p]
        if n == 0 and k % 2 == 0:
            break
        out.append(Field(p, 1, True, f"wrapped.uleb[{k}]"))
        p += 1 + (n & 0x7F)
        k += 1
    return out


AR_MAGIC = b"!<arch>\n"


def ar_members(data: bytes) -> list[tuple[int, str, int, int]]:
    """(header offset, name field text, content offset, content size) of each member of a valid archive."""
    out = []
    at = 8
    while at + 60 <= len(data):
        name = data[at:at + 16].decode("latin-1").rstrip()
        try:
            size = int(data[at + 48:at + 58].decode("ascii").strip() or "0")
        except ValueError:
            break
        out.append((at, name, at + 60, size))
        at += 60 + size + (size & 1)
    return out


def ar_fields(data: bytes) -> list[Field]:
    if not data.startswith(AR_MAGIC):
        return []
    out: list[Field] = []
    for k, (at, name, content, size) in enumerate(ar_members(data)):
        w = f"ar.member[{k}]({name})"
        out += [Field(at, 16, True, f"{w}.name", True), Field(at + 16, 12, True, f"{w}.date", True),
                Field(at + 40, 8, True, f"{w}.mode", True), Field(at + 48, 10, True, f"{w}.size", True),
                Field(at + 58, 2, True, f"{w}.fmag", True)]
        if name == "/" and size >= 4:  # GNU symbol table: big-endian count, then offsets
            n = _u(data, content, 4, False)
            out.append(Field(content, 4, False, f"{w}.symtab.count"))
            out += [Field(content + 4 + 4 * j, 4, False, f"{w}.symtab.offset[{j}]") for j in range(min(n, 64))]
        elif name == "__devbin_sa.idx/" and size >= 48:
            out += [Field(content + 8, 2, True, f"{w}.manifest.version"),
                    Field(content + 10, 2, True, f"{w}.manifest.flags"),
                    Field(content + 12, 4, True, f"{w}.manifest.body_size"),
                    Field(content + 48, 4, True, f"{w}.manifest.map_size")]
    return out


def zip_fields(data: bytes) -> list[Field]:
    out: list[Field] = []
    for sig, rec, fields in ((b"PK\x03\x04", "local", (("version", 4, 2), ("flags", 6, 2), ("method", 8, 2),
                                                       ("crc", 14, 4), ("csize", 18, 4), ("usize", 22, 4),
                                                       ("name_len", 26, 2), ("extra_len", 28, 2))),
                             (b"PK\x01\x02", "central", (("method", 10, 2), ("crc", 16, 4), ("csize", 20, 4),
                                                         ("usize", 24, 4), ("name_len", 28, 2), ("extra_len", 30, 2),
                                                         ("comment_len", 32, 2), ("local_offset", 42, 4))),
                             (b"PK\x05\x06", "end", (("disk_entries", 8, 2), ("entries", 10, 2), ("cd_size", 12, 4),
                                                     ("cd_offset", 16, 4), ("comment_len", 20, 2)))):
        at = data.find(sig)
        k = 0
        while at >= 0 and k < 32:
            out += [Field(at + o, w, True, f"zip.{rec}@{at:#x}.{n}") for n, o, w in fields]
            at = data.find(sig, at + 4)
            k += 1
    return out


@lru_cache(maxsize=64)
def fields_of(data: bytes) -> tuple[Field, ...]:
    out: list[Field] = []
    for base, end in embedded_elfs(data):
        out += elf_fields(data, base, end)
    for f in (fatbin_fields, bundle_fields, ccob_fields, offload_fields, wrapped_fields, ar_fields, zip_fields):
        out += f(data)
    return tuple(f for f in out if f.offset + f.width <= len(data))


# --------------------------------------------------------------------------- value choice

def interesting(rng: random.Random, old: int, width: int, size: int) -> int:
    top = (1 << (8 * width)) - 1
    choices = [0, 1, 2, top, top - 1, 1 << (8 * width - 1), (1 << (8 * width - 1)) - 1, old + 1, old - 1, old * 2,
               old + 0x1000, size, size - 1, size + 1, old ^ (1 << rng.randrange(8 * width)), rng.randrange(top + 1),
               rng.randrange(0, 64), 0x7FFFFFFF, 0x80000000, 0x100000000]
    return rng.choice(choices) & top


def set_field(rng: random.Random, data: bytes, f: Field) -> Mutant:
    buf = bytearray(data)
    if f.text:
        old = buf[f.offset:f.offset + f.width].decode("latin-1")
        new = rng.choice(["", "-1", "0", "1", "9" * f.width, "99999999999999", " " * f.width, "0x10", "1e9",
                          str(len(data)), str(len(data) * 2), "/", "//", "/9999", "/-1", "#1/9999", "../../x/",
                          "/abs/x/", "a\nb/", "\0", old.strip()[::-1], old.replace("/", "")])
        raw = new.encode("latin-1")[:f.width].ljust(f.width)
        buf[f.offset:f.offset + f.width] = raw
        return bytes(buf), f"{f.name}={new!r}"
    old_v = _u(data, f.offset, f.width, f.little)
    if "fix" in f.name.rsplit(".", 1)[-1]:  # a MessagePack fix-width type byte: keep the type, change the length
        hi = old_v & (0xE0 if old_v >= 0xA0 else 0xF0) if old_v >= 0x80 else 0
        mask = 0x1F if old_v >= 0xA0 else (0x0F if old_v >= 0x80 else 0x7F)
        v = rng.choice([hi | rng.randrange(mask + 1), 0xDB, 0xDD, 0xDF, 0xC1, 0xD4, 0xC0])
    else:
        v = interesting(rng, old_v, f.width, len(data))
    buf[f.offset:f.offset + f.width] = v.to_bytes(f.width, "little" if f.little else "big")
    return bytes(buf), f"{f.name}: {old_v:#x}->{v:#x}"


def group_of(f: Field) -> str:
    """The structure a field belongs to, so each kind of structure is picked as often as any other
    (an ELF has hundreds of symbol fields and a bundle header three)."""
    if f.name.startswith("elf"):
        for key, group in (("msgpack", "msgpack"), (".note[", "elf-note"), (".rel[", "elf-rel"), (".sym[", "elf-sym"),
                           (".shdr[", "elf-shdr"), (".phdr[", "elf-phdr")):
            if key in f.name:
                return group
        return "elf-header"
    if ".symtab" in f.name or ".manifest" in f.name:
        return "ar-tables"
    return f.name.split("@")[0].split(".")[0]


@lru_cache(maxsize=64)
def _groups(data: bytes) -> dict[str, tuple[Field, ...]]:
    groups: dict[str, list[Field]] = {}
    for f in fields_of(data):
        groups.setdefault(group_of(f), []).append(f)
    return {k: tuple(v) for k, v in sorted(groups.items())}


def field_mutant(rng: random.Random, data: bytes) -> Mutant | None:
    groups = _groups(data)
    if not groups:
        return None
    names = list(groups)
    out, what = data, []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        out, w = set_field(rng, out, rng.choice(groups[rng.choice(names)]))
        what.append(w)
    return out, "field " + "; ".join(what)


# --------------------------------------------------------------------------- generic

_BOUNDARY = (0, 1, 0x7F, 0x80, 0xFF)


def generic_mutant(rng: random.Random, data: bytes, pool: list[bytes]) -> Mutant:
    buf = bytearray(data)
    what = []
    op = rng.randrange(7)
    if op == 0 or not buf:
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(buf) or 1) if buf else 0
            if buf:
                buf[i] ^= 1 << rng.randrange(8)
        what.append("bitflips")
    elif op == 1:
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] = rng.choice(_BOUNDARY)
        what.append("boundary bytes")
    elif op == 2:
        cut = rng.choice((rng.randrange(len(buf)), len(buf) - rng.randint(1, 16), rng.randrange(min(len(buf), 128))))
        del buf[max(cut, 0):]
        what.append(f"truncate@{max(cut, 0):#x}")
    elif op == 3:
        i = rng.randrange(len(buf))
        n = rng.randint(1, 64)
        del buf[i:i + n]
        what.append(f"delete {n}@{i:#x}")
    elif op == 4:
        i = rng.randrange(len(buf))
        ins = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
        buf[i:i] = ins
        what.append(f"insert {len(ins)}@{i:#x}")
    elif op == 5:
        other = rng.choice(pool)
        i, j = rng.randrange(len(buf)), rng.randrange(len(other) or 1)
        n = rng.randint(1, 512)
        buf[i:i + n] = other[j:j + n]
        what.append(f"splice {n}@{i:#x}")
    else:
        i = rng.randrange(len(buf))
        n = rng.randint(1, 256)
        buf[i:i] = buf[i:i + n]
        what.append(f"duplicate {n}@{i:#x}")
    return bytes(buf), "generic " + ", ".join(what)


# --------------------------------------------------------------------------- rebuilders (valid outer checksum)

def ccob_inner_mutant(rng: random.Random, data: bytes, pool: list[bytes]) -> Mutant | None:
    """Mutate the bundle inside a CCOB and compress it again, hash and sizes recomputed."""
    if not data.startswith(b"CCOB"):
        return None
    from devbin.formats.bundle.compress import decompress
    from devbin.formats.bundle.writer import write_compressed_bundle

    version, method = _u(data, 4, 2, True), _u(data, 6, 2, True)
    hsize, usize = (24, _u(data, 12, 4, True)) if version == 2 else (32, _u(data, 16, 8, True))
    name = {0: "zlib", 1: "zstd"}.get(method, "zstd")
    inner = bytes(decompress(method, data[hsize:], usize))
    m = field_mutant(rng, inner) if rng.random() < 0.7 else None
    new, what = m if m else generic_mutant(rng, inner, pool)
    return write_compressed_bundle(new, method=name, version=version), f"ccob inner ({what}), hash recomputed"


def _replace_ar_member(data: bytes, at: int, content_at: int, size: int, new: bytes) -> bytes:
    """``data`` with the member at ``at`` holding ``new``; the GNU "/" offsets after it shifted to match."""
    old_total = size + (size & 1)
    new_total = len(new) + (len(new) & 1)
    delta = new_total - old_total
    hdr = bytearray(data[at:at + 60])
    hdr[48:58] = str(len(new)).encode().ljust(10)
    out = bytearray(data[:at] + bytes(hdr) + new + (b"\n" if len(new) & 1 else b"") + data[content_at + old_total:])
    if delta:
        for _at, name, c, sz in ar_members(bytes(out)):
            if name == "/" and sz >= 4:
                n = _u(out, c, 4, False)
                for j in range(min(n, (sz - 4) // 4)):
                    o = _u(out, c + 4 + 4 * j, 4, False)
                    if o > at:
                        out[c + 4 + 4 * j:c + 8 + 4 * j] = (o + delta).to_bytes(4, "big")
    return bytes(out)


def manifest_mutant(rng: random.Random, data: bytes, pool: list[bytes]) -> Mutant | None:
    """Mutate a super-archive manifest's MessagePack map; rebuild its zstd frame, SHA-256 and member size."""
    if not data.startswith(AR_MAGIC):
        return None
    import zstandard

    for at, name, content, size in ar_members(data):
        if name != "__devbin_sa.idx/":
            continue
        man = data[content:content + size]
        version = _u(man, 8, 2, True)
        if version == 2:
            map_size = _u(man, 48, 4, True)
            body_map = zstandard.ZstdDecompressor().decompress(man[52:], max_output_size=map_size)
        else:
            body_map = man[48:]
        fields = [Field(o, w, False, f"manifest.msgpack@{o:#x}.{n}") for o, w, n in
                  msgpack_fields(body_map, 0, len(body_map))]
        if fields and rng.random() < 0.8:
            new_map, what = body_map, []
            for _ in range(rng.choice((1, 1, 2))):
                new_map, w = set_field(rng, new_map, rng.choice(fields))
                what.append(w)
            desc = "; ".join(what)
        else:
            new_map, desc = generic_mutant(rng, body_map, pool)
        if version == 2:
            body = len(new_map).to_bytes(4, "little") + zstandard.ZstdCompressor(level=3).compress(new_map)
        else:
            body = new_map
        header = man[:12] + len(body).to_bytes(4, "little") + hashlib.sha256(body).digest()
        return _replace_ar_member(data, at, content, size, header + body), f"manifest ({desc}), sha256 recomputed"
    return None


def ar_member_mutant(rng: random.Random, data: bytes, pool: list[bytes]) -> Mutant | None:
    """Mutate one ar member's content (field-targeted when it holds an ELF); sizes and "/" offsets kept right."""
    if not data.startswith(AR_MAGIC):
        return None
    members = [m for m in ar_members(data) if m[1] not in ("/", "//", "__devbin_sa.idx/")]
    if not members:
        return None
    at, name, content, size = rng.choice(members)
    inner = data[content:content + size]
    m = field_mutant(rng, inner) if rng.random() < 0.7 else None
    new, what = m if m else generic_mutant(rng, inner, pool)
    return _replace_ar_member(data, at, content, size, new), f"ar member {name!r} ({what})"


def zip_member_mutant(rng: random.Random, data: bytes, pool: list[bytes]) -> Mutant | None:
    """Mutate one zip member's content and write the zip again (valid CRC), so devbin's readers see it."""
    if not data.startswith(b"PK\x03\x04"):
        return None
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
        contents = [z.read(i) for i in infos]
    k = rng.randrange(len(infos))
    sub = mutate(rng, contents[k], pool, depth=1)
    contents[k] = sub[0]
    record = next((n for n, i in enumerate(infos) if i.filename.endswith(".dist-info/RECORD")), None)
    resigned = record is not None and record != k and rng.random() < 0.5
    if resigned:  # a wheel whose RECORD vouches for the mutated member: the mutant reaches the pruner
        assert record is not None
        contents[record] = _resigned(contents[record], infos[k].filename, contents[k])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for i, c in zip(infos, contents, strict=True):
            z.writestr(i, c)
    return buf.getvalue(), f"zip member {infos[k].filename!r} ({sub[1]}){', RECORD row rewritten' if resigned else ''}"


def _resigned(record: bytes, name: str, data: bytes) -> bytes:
    """RECORD's bytes with the row of ``name`` giving ``data``'s hash and size."""
    from devbin.formats.wheel import record_hash

    rows = record.decode("utf-8", "replace").splitlines()
    return "".join(f"{name},{record_hash(data)},{len(data)}\n" if r.split(",", 1)[0] == name else r + "\n"
                   for r in rows).encode()


#: Tampered wheels (issue 24): what an installer refuses, and RECORDs that do not vouch for the members.
WHEEL_TAMPERS = ("traversal", "absolute", "inner traversal", "backslash", "drive", "duplicate", "wrong hash",
                 "wrong size", "missing row", "extra row", "md5 row", "not utf-8", "no record", "two records",
                 "truncated")


def wheel_tamper_mutant(rng: random.Random, data: bytes, pool: list[bytes]) -> Mutant | None:
    """A wheel (a zip with a ``*.dist-info/RECORD``) tampered with one of :data:`WHEEL_TAMPERS`: every
    command must read it or refuse it in one line, and ``prune`` must refuse to sign it."""
    return tamper_wheel(rng, data, rng.choice(WHEEL_TAMPERS))


def tamper_wheel(rng: random.Random, data: bytes, how: str) -> Mutant | None:
    """The wheel ``data`` tampered with ``how`` (one of :data:`WHEEL_TAMPERS`), or None for no wheel."""
    if not data.startswith(b"PK\x03\x04"):
        return None
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = [(i, z.read(i)) for i in z.infolist()]
    record = next((n for n, (i, _) in enumerate(members) if i.filename.endswith(".dist-info/RECORD")), None)
    if record is None:
        return None
    rows = members[record][1].decode().splitlines(keepends=True)
    victim = rng.choice([r for r in rows if not r.startswith(members[record][0].filename + ",")])
    name = victim.split(",", 1)[0]
    evil = {"traversal": "../../evil.py", "absolute": "/abs/evil.py", "inner traversal": "pkg/lib/../../x.so",
            "backslash": "pkg\\..\\evil.py", "drive": "C:/evil.py"}
    extra: list[tuple[str, bytes]] = []
    if how in evil:
        extra.append((evil[how], b"import os\n"))
    elif how == "duplicate":
        extra.append((name, b"# another member of the same path\n"))
    elif how == "wrong hash":
        rows[rows.index(victim)] = victim.replace(",sha256=", ",sha256=AAAA", 1)
    elif how == "wrong size":
        head, _, size = victim.rstrip("\n").rpartition(",")
        rows[rows.index(victim)] = f"{head},{int(size or 0) + rng.choice((-1, 1, 4096))}\n"
    elif how == "missing row":
        rows.remove(victim)
    elif how == "extra row":
        rows.insert(0, "pkg/gone.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n")
    elif how == "md5 row":
        rows[rows.index(victim)] = victim.replace(",sha256=", ",md5=", 1)
    elif how == "two records":
        extra.append(("pkg-2.0.dist-info/RECORD", members[record][1]))
    new_record = b"" if how == "no record" else "".join(rows).encode("latin-1" if how == "not utf-8" else "utf-8")
    if how == "not utf-8":
        new_record += "pkg/caf\xe9.py,,\n".encode("latin-1")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile's "Duplicate name" UserWarning: the duplicate is the point
        for n, (info, content) in enumerate(members):
            if n == record:
                if how != "no record":
                    z.writestr(info, new_record)
                continue
            z.writestr(info, content)
        for n, content in extra:
            z.writestr(zipfile.ZipInfo(n, date_time=(2024, 1, 1, 0, 0, 0)), content)
    out = buf.getvalue()
    if how == "truncated":
        out = out[:rng.randrange(1, len(out))]
    return out, f"tampered wheel: {how} ({name!r})"


Rebuilder = Callable[[random.Random, bytes, list[bytes]], "Mutant | None"]
REBUILDERS: tuple[Rebuilder, ...] = (ccob_inner_mutant, manifest_mutant, ar_member_mutant, zip_member_mutant,
                                     wheel_tamper_mutant)


def mutate(rng: random.Random, data: bytes, pool: list[bytes], depth: int = 0) -> Mutant:
    """One mutant of ``data``: a rebuilder when one applies (a third of the time; 60 % for compressed
    bundles, zips and super-archives, whose bytes are mostly behind a checksum), else a field-targeted
    edit, else a generic one."""
    r = rng.random()
    wrapped_whole = data.startswith((b"CCOB", b"PK\x03\x04")) or b"__devbin_sa.idx/" in data[:4096]
    if depth == 0 and r < (0.6 if wrapped_whole else 0.33):
        for rb in rng.sample(REBUILDERS, len(REBUILDERS)):
            m = rb(rng, data, pool)
            if m is not None:
                return m
    if r < 0.75:
        m = field_mutant(rng, data)
        if m is not None:
            return m
    return generic_mutant(rng, data, pool)


__all__ = ["WHEEL_TAMPERS", "Field", "Mutant", "fields_of", "msgpack_fields", "mutate", "tamper_wheel"]
