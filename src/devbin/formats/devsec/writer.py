"""Encoder of the devbin sections (format v1).

Deterministic: the output depends only on the model and the symbol numbering.
Records and lists are written in the canonical order the spec fixes
(symbol index, attribute id, prototype index), so equal models give equal
bytes whatever order their parts were built in.  Sections with nothing to say
are left out; a section whose header state (minor, flags) was kept from a read
is written even when empty, so that state survives.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass

from devbin.binary.writer import sleb, uleb
from devbin.errors import UsageError
from devbin.formats.devsec import constants as C
from devbin.model import AttrForm, Attribute, CallGraph, CodeObject, ParamType, Prototype

__all__ = ["EncodedSection", "encode", "encode_attribute"]

SymbolIndex = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class EncodedSection:
    """One section to add to the ELF file: sh_flags 0, sh_addralign 1, sh_entsize 0;
    sh_link = index of ``.symtab`` when ``links_symtab``, else 0."""

    name: str
    sh_type: int
    data: bytes
    links_symtab: bool


def _header(minor: int, flags: int, symtab_count: int) -> bytes:
    return struct.pack("<BBHI", C.VERSION_MAJOR, minor, flags, symtab_count)


def encode_attribute(a: Attribute) -> bytes:
    """Key then value, by form."""
    out = bytearray(uleb((a.id << C.FORM_BITS) | int(a.form)))
    v = a.value
    if a.form == AttrForm.UINT:
        out += uleb(v)  # type: ignore[arg-type]
    elif a.form == AttrForm.SINT:
        out += sleb(v)  # type: ignore[arg-type]
    elif a.form == AttrForm.BYTES:
        assert isinstance(v, bytes)
        out += uleb(len(v)) + v
    elif a.form == AttrForm.FLAG:
        pass
    elif a.form == AttrForm.DIM3:
        assert isinstance(v, tuple)
        out += b"".join(uleb(x) for x in v)
    elif a.form == AttrForm.LIST:
        assert isinstance(v, tuple)
        out += uleb(len(v)) + b"".join(uleb(x) for x in v)
    else:  # reserved forms: the raw rest of the record
        assert isinstance(v, bytes)
        out += v
    return bytes(out)


def _type(t: ParamType) -> bytes:
    return bytes([int(t.kind)]) + uleb(t.size) + bytes([t.align.bit_length() - 1])


def _block(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + uleb(len(payload)) + payload


class _Numbering:
    def __init__(self, symbol_index: SymbolIndex, symtab_count: int) -> None:
        self.symbol_index = symbol_index
        self.symtab_count = symtab_count

    def __call__(self, name: str) -> int:
        i = self.symbol_index(name)
        if isinstance(i, bool) or not isinstance(i, int) or not 0 < i < self.symtab_count:
            raise UsageError(f"devsec: symbol index {i!r} of {name!r} is not in 1..{self.symtab_count - 1}")
        return i


def _strict(items: list[int], what: str) -> None:
    for a, b in itertools.pairwise(items):
        if a == b:
            raise UsageError(f"devsec: two {what} map to the same symbol index {a}")


def _func_body(obj: CodeObject, sym: _Numbering) -> bytes:
    recs = sorted(((sym(f.name), f) for f in obj.functions), key=lambda r: r[0])
    _strict([i for i, _ in recs], "functions")
    out = bytearray(uleb(len(recs)))
    for i, f in recs:
        attrs = b"".join(encode_attribute(a) for a in f.attributes)
        out += uleb(i) + bytes([int(f.kind)]) + uleb(len(attrs)) + attrs
    return bytes(out)


def _callgraph_body(cg: CallGraph, sym: _Numbering, proto_index: Callable[[Prototype], int]) -> bytes:
    blocks: list[tuple[int, bytes]] = list(cg.unknown_blocks)

    def grouped(pairs: dict[int, list[int]], what: str) -> bytes:
        out = bytearray(uleb(len(pairs)))
        for caller in sorted(pairs):
            targets = sorted(pairs[caller])
            _strict(targets, what)
            out += uleb(caller) + uleb(len(targets)) + b"".join(uleb(t) for t in targets)
        return bytes(out)

    if cg.direct:
        by: dict[int, list[int]] = {}
        callers: dict[int, str] = {}
        for caller, callee in cg.direct:
            ci = sym(caller)
            if callers.setdefault(ci, caller) != caller:
                raise UsageError(f"devsec: callers {callers[ci]!r} and {caller!r} map to symbol index {ci}")
            by.setdefault(ci, []).append(sym(callee))
        blocks.append((C.BLOCK_DIRECT, grouped(by, "callees")))
    if cg.indirect_sites:
        by = {}
        callers = {}
        for caller, p in cg.indirect_sites:
            ci = sym(caller)
            if callers.setdefault(ci, caller) != caller:
                raise UsageError(f"devsec: callers {callers[ci]!r} and {caller!r} map to symbol index {ci}")
            by.setdefault(ci, []).append(proto_index(p))
        blocks.append((C.BLOCK_INDIRECT, grouped(by, "indirect-call prototypes")))
    if cg.address_taken:
        pairs = sorted((sym(fn), proto_index(p)) for fn, p in cg.address_taken)
        for a, b in itertools.pairwise(pairs):
            if a == b:
                raise UsageError(f"devsec: two address-taken entries map to symbol {a[0]}, prototype {a[1]}")
        blocks.append((C.BLOCK_ADDRESS_TAKEN, uleb(len(pairs)) + b"".join(uleb(s) + uleb(p) for s, p in pairs)))
    if cg.external:
        ext = sorted(sym(e) for e in cg.external)
        _strict(ext, "external callees")
        blocks.append((C.BLOCK_EXTERNAL, uleb(len(ext)) + b"".join(uleb(e) for e in ext)))
    blocks.sort(key=lambda b: b[0])  # stable: unknown blocks of one tag keep their order
    return b"".join(_block(t, p) for t, p in blocks)


def _proto_body(protos: tuple[Prototype, ...]) -> bytes:
    out = bytearray(uleb(len(protos)))
    for p in protos:
        out += uleb(p.callconv) + _type(p.ret) + uleb(len(p.params)) + b"".join(_type(t) for t in p.params)
    return bytes(out)


def _meta_body(obj: CodeObject) -> bytes:
    out = bytearray(uleb(len(obj.metadata)))
    for k, v in obj.metadata.items():
        kb = k.encode("utf-8")
        out += uleb(len(kb)) + kb
        if isinstance(v, str):
            vb = v.encode("utf-8")
            out += bytes([C.META_STRING]) + uleb(len(vb)) + vb
        elif isinstance(v, int):
            out += bytes([C.META_UINT]) + uleb(v)
        else:
            out += bytes([C.META_BYTES]) + uleb(len(v)) + v
    return bytes(out)


def encode(obj: CodeObject, symbol_index: SymbolIndex, symtab_count: int) -> list[EncodedSection]:
    """Encode ``obj`` into the devbin sections, in the order func, callgraph, proto, meta.

    ``symbol_index(name)`` gives the index of a function's symbol in the
    ``.symtab`` the sections will link to; ``symtab_count`` is that table's
    size, recorded for the staleness check.
    """
    if isinstance(symtab_count, bool) or not isinstance(symtab_count, int) or not 0 <= symtab_count <= 0xFFFFFFFF:
        raise UsageError(f"devsec: symtab_count out of the u32 range: {symtab_count!r}")
    sym = _Numbering(symbol_index, symtab_count)
    first: dict[Prototype, int] = {}
    for i, p in enumerate(obj.prototypes):
        first.setdefault(p, i)

    def proto_index(p: Prototype) -> int:
        return first[p]  # CodeObject guarantees every call-graph prototype is in the table

    bodies = (
        (C.SEC_FUNC, _func_body(obj, sym) if obj.functions else b"", symtab_count),
        (C.SEC_CALLGRAPH, _callgraph_body(obj.callgraph, sym, proto_index) if obj.callgraph else b"", symtab_count),
        (C.SEC_PROTO, _proto_body(obj.prototypes) if obj.prototypes else b"", 0),
        (C.SEC_META, _meta_body(obj) if obj.metadata else b"", 0),
    )
    out: list[EncodedSection] = []
    for name, body, count in bodies:
        ver = obj.section_version(name)
        if not body and not (ver.minor or ver.flags):
            continue
        if not body and name != C.SEC_CALLGRAPH:
            body = uleb(0)  # an empty counted list; the call graph body is just "no blocks"
        out.append(EncodedSection(name, C.SH_TYPES[name], _header(ver.minor, ver.flags, count) + body,
                                  name in C.LINKS_SYMTAB))
    return out
