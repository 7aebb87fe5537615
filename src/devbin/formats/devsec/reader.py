"""Decoder of the devbin sections (format v1).

Every byte is read through :class:`~devbin.binary.ByteView` / ``Cursor``;
every problem is a :class:`~devbin.errors.DeviceBinaryError` with format
``devsec``, a ``where`` naming the section and an absolute offset.

Strictness, and why: lists that the spec orders (function records by symbol,
attributes by id, call-graph entries) must be *strictly* increasing.  That
rules out duplicates, which would be ambiguous (which register count
counts?), and it makes every accepted encoding canonical up to LEB128 padding,
empty blocks and empty sections.  Things the spec lets grow are kept, not
rejected: unknown attribute ids and forms, unknown call-graph blocks, unknown
function kinds, unknown header flag bits and higher minor versions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from devbin.binary import Buffer, ByteView, Cursor
from devbin.errors import DeviceBinaryError, FormatError, UnsupportedVersion
from devbin.formats.devsec import constants as C
from devbin.model import (
    AttrForm,
    Attribute,
    AttrValue,
    CallGraph,
    CodeObject,
    Function,
    Metadata,
    MetaValue,
    ParamType,
    Prototype,
    SectionVersion,
    StdAttr,
    Target,
    decode_param_layout,
)

__all__ = [
    "SectionHeader",
    "StaleSection",
    "decode",
    "decode_callgraph",
    "decode_func",
    "decode_meta",
    "decode_proto",
    "decode_section",
    "read_header",
]

SymbolName = Callable[[int], str]


class StaleSection(FormatError):
    """A section's recorded symbol count differs from the linked symbol table's.

    A tool that does not know the devbin sections (a foreign linker, ``strip``)
    renumbered the symbols and left the section behind: its symbol indices can
    no longer be trusted.  Callers keep the section raw and report it.
    """


@dataclass(frozen=True, slots=True)
class SectionHeader:
    """The 8-byte header every devbin section starts with."""

    major: int
    minor: int
    flags: int
    symtab_count: int


def _view(name: str, data: ByteView | Buffer) -> ByteView:
    base = data.base if isinstance(data, ByteView) else 0
    return ByteView(data, fmt=C.FMT, where=f"section {name!r}", base=base)


def read_header(view: ByteView) -> SectionHeader:
    """Read and check the header; an unknown major raises :class:`UnsupportedVersion`."""
    major = view.u8(0)
    if major != C.VERSION_MAJOR:
        raise view.error(f"major version {major} is not supported (this reader knows {C.VERSION_MAJOR})", 0, major,
                         cls=UnsupportedVersion)
    view.check(0, C.HEADER_SIZE, "section header")
    return SectionHeader(major, view.u8(1), view.u16(2), view.u32(4))


def _begin(view: ByteView, symtab_count: int | None, uses_symbols: bool) -> tuple[SectionHeader, Cursor]:
    hdr = read_header(view)
    if not uses_symbols and hdr.symtab_count != 0:
        raise view.error("symtab_count must be 0 in a section that references no symbols", 4, hdr.symtab_count)
    if uses_symbols and symtab_count is not None and hdr.symtab_count != symtab_count:
        raise view.error(
            f"stale section: written for a symbol table of {hdr.symtab_count} symbols, the linked table has "
            f"{symtab_count} (symbols were renumbered by a tool that does not know this section)",
            4, hdr.symtab_count, cls=StaleSection,
        )
    return hdr, view.cursor(C.HEADER_SIZE)


def _finish(cur: Cursor) -> None:
    if not cur.at_end():
        raise cur.error(f"{cur.remaining} trailing bytes after the section body", cur.remaining)


def _version(name: str, hdr: SectionHeader) -> SectionVersion:
    return SectionVersion(name, hdr.minor, hdr.flags)


class _Symbols:
    """Symbol-index checks and lookups for one section."""

    def __init__(self, view: ByteView, hdr: SectionHeader, symbol_name: SymbolName) -> None:
        self.view = view
        self.count = hdr.symtab_count
        self.symbol_name = symbol_name

    def read(self, cur: Cursor, what: str, after: int = 0) -> tuple[int, str]:
        at = cur.pos
        sym = cur.uleb(what)
        if sym == 0:
            raise self.view.error(f"{what}: symbol index 0 (the null symbol)", at, sym)
        if sym >= self.count:
            raise self.view.error(f"{what}: symbol index beyond the recorded symtab_count {self.count}", at, sym)
        if sym <= after:
            raise self.view.error(f"{what}: not in strictly increasing order (after {after})", at, sym)
        try:
            name = self.symbol_name(sym)
        except DeviceBinaryError as e:
            raise self.view.error(f"{what}: symbol lookup failed: {e.message}", at, sym) from e
        if not isinstance(name, str):
            raise self.view.error(f"{what}: symbol lookup did not return a name", at, sym)
        return sym, name


# -- .devbin.proto ----------------------------------------------------------------

def _read_type(cur: Cursor) -> ParamType:
    kind = cur.u8()
    size = cur.uleb("type size")
    at = cur.pos
    log2 = cur.u8()
    if log2 > 63:
        raise cur.error("type alignment: log2 above 63", log2, offset=at)
    return ParamType(kind, size, 1 << log2)


def decode_proto(view: ByteView | Buffer, name: str = C.SEC_PROTO) -> tuple[tuple[Prototype, ...], SectionVersion]:
    """The prototype table, in section order (indices are what other sections reference)."""
    view = _view(name, view)
    hdr, cur = _begin(view, None, uses_symbols=False)
    n = cur.count(5, "prototype count")  # callconv 1 + ret type 3 + nparams 1
    protos: list[Prototype] = []
    for _ in range(n):
        callconv = cur.uleb("callconv")
        ret = _read_type(cur)
        np_ = cur.count(3, "parameter count")
        params = tuple(_read_type(cur) for _ in range(np_))
        protos.append(Prototype(ret, params, callconv))
    _finish(cur)
    return tuple(protos), _version(name, hdr)


# -- .devbin.meta -----------------------------------------------------------------

def decode_meta(view: ByteView | Buffer, name: str = C.SEC_META) -> tuple[Metadata, SectionVersion]:
    view = _view(name, view)
    hdr, cur = _begin(view, None, uses_symbols=False)
    n = cur.count(4, "entry count")  # key length 1 + key >= 1 + type 1 + value >= 1
    entries: list[tuple[str, MetaValue]] = []
    seen: set[str] = set()
    for _ in range(n):
        at = cur.pos
        key = cur.str_with_len("metadata key")
        if not key:
            raise view.error("metadata key is empty", at)
        if key in seen:
            raise view.error(f"metadata key {key!r} appears twice", at)
        seen.add(key)
        tat = cur.pos
        vtype = cur.u8()
        value: MetaValue
        if vtype == C.META_STRING:
            value = cur.str_with_len(f"metadata {key!r} string")
        elif vtype == C.META_UINT:
            value = cur.uleb(f"metadata {key!r} uint")
        elif vtype == C.META_BYTES:
            ln = cur.uleb(f"metadata {key!r} length")
            value = bytes(cur.bytes(ln, f"metadata {key!r} bytes"))
        else:
            raise view.error(f"metadata {key!r}: unknown value type (cannot be sized)", tat, vtype)
        entries.append((key, value))
    _finish(cur)
    return Metadata(tuple(entries)), _version(name, hdr)


# -- .devbin.func -----------------------------------------------------------------

def _read_value(cur: Cursor, form: int, attr_id: int) -> AttrValue:
    what = f"attribute {attr_id:#x}"
    if form == AttrForm.UINT:
        return cur.uleb(what)
    if form == AttrForm.SINT:
        return cur.sleb(what)
    if form == AttrForm.BYTES:
        n = cur.uleb(f"{what} length")
        return bytes(cur.bytes(n, what))
    if form == AttrForm.FLAG:
        return True
    if form == AttrForm.DIM3:
        return (cur.uleb(what), cur.uleb(what), cur.uleb(what))
    if form == AttrForm.LIST:
        n = cur.count(1, f"{what} count")
        return tuple(cur.uleb(what) for _ in range(n))
    # Reserved forms 6 and 7: unsizable; keep the rest of the record raw.
    return bytes(cur.bytes(cur.remaining, what))


def _read_attributes(view: ByteView, n_protos: int | None) -> tuple[Attribute, ...]:
    cur = view.cursor()
    attrs: list[Attribute] = []
    prev = -1
    while not cur.at_end():
        at = cur.pos
        key = cur.uleb("attribute key")
        attr_id, form = key >> C.FORM_BITS, key & C.FORM_MASK
        if attr_id <= prev:
            raise view.error(f"attribute {attr_id:#x}: ids not in strictly increasing order", at, attr_id)
        prev = attr_id
        vat = cur.pos
        value = _read_value(cur, form, attr_id)
        if attr_id == StdAttr.PARAM_LAYOUT and form == AttrForm.BYTES:
            ln = len(value) if isinstance(value, bytes) else 0
            decode_param_layout(view.sub(cur.pos - ln, ln, where=f"{view.where}: param_layout"))
        if (attr_id == StdAttr.PROTOTYPE and form == AttrForm.UINT and isinstance(value, int)
                and (n_protos is None or value >= n_protos)):
            raise view.error(f"prototype index beyond the prototype table ({n_protos or 0} entries)", vat, value)
        attrs.append(Attribute(attr_id, value, AttrForm(form)))
    return tuple(attrs)


def decode_func(
    view: ByteView | Buffer,
    symbol_name: SymbolName,
    symtab_count: int | None = None,
    n_protos: int | None = None,
    name: str = C.SEC_FUNC,
) -> tuple[tuple[Function, ...], SectionVersion]:
    """Function records; ``n_protos`` is the size of the prototype table (for index checks)."""
    view = _view(name, view)
    hdr, cur = _begin(view, symtab_count, uses_symbols=True)
    syms = _Symbols(view, hdr, symbol_name)
    n = cur.count(3, "record count")  # sym 1 + kind 1 + attr_bytes 1
    funcs: list[Function] = []
    names: dict[str, int] = {}
    prev = 0
    for _ in range(n):
        at = cur.pos
        prev, fname = syms.read(cur, "function record", prev)
        if fname in names:
            raise view.error(f"symbols {names[fname]} and {prev} have the same name {fname!r}", at, prev)
        names[fname] = prev
        kind = cur.u8()
        ln = cur.uleb("attr_bytes")
        view.check(cur.pos, ln, "attr_bytes")
        sub = view.sub(cur.pos, ln, where=f"{view.where}: function {fname!r}")
        cur.skip(ln)
        funcs.append(Function(fname, kind, _read_attributes(sub, n_protos)))
    _finish(cur)
    return tuple(funcs), _version(name, hdr)


# -- .devbin.callgraph ------------------------------------------------------------

def decode_callgraph(
    view: ByteView | Buffer,
    symbol_name: SymbolName,
    symtab_count: int | None = None,
    prototypes: tuple[Prototype, ...] = (),
    name: str = C.SEC_CALLGRAPH,
) -> tuple[CallGraph, SectionVersion]:
    view = _view(name, view)
    hdr, cur = _begin(view, symtab_count, uses_symbols=True)
    direct: list[tuple[str, str]] = []
    indirect: list[tuple[str, Prototype]] = []
    taken: list[tuple[str, Prototype]] = []
    external: list[str] = []
    unknown: list[tuple[int, bytes]] = []
    seen: set[int] = set()

    def proto(c: Cursor, after: int) -> tuple[int, Prototype]:
        at = c.pos
        i = c.uleb("prototype index")
        if i >= len(prototypes):
            raise c.error(f"prototype index beyond the prototype table ({len(prototypes)} entries)", i, offset=at)
        if i <= after:
            raise c.error(f"prototype index not in strictly increasing order (after {after})", i, offset=at)
        return i, prototypes[i]

    while not cur.at_end():
        at = cur.pos
        tag = cur.u8()
        ln = cur.uleb("block length")
        view.check(cur.pos, ln, f"block {tag}")
        block = view.sub(cur.pos, ln, where=f"{view.where}: block {tag}")
        cur.skip(ln)
        if tag not in (C.BLOCK_DIRECT, C.BLOCK_INDIRECT, C.BLOCK_ADDRESS_TAKEN, C.BLOCK_EXTERNAL):
            unknown.append((tag, block.tobytes()))
            continue
        if tag in seen:
            raise view.error(f"block {tag} appears twice", at, tag)
        seen.add(tag)
        b = block.cursor()
        bsyms = _Symbols(block, hdr, symbol_name)
        if tag in (C.BLOCK_DIRECT, C.BLOCK_INDIRECT):
            n = b.count(2, "caller count")
            prev = 0
            for _ in range(n):
                prev, caller = bsyms.read(b, "caller", prev)
                m = b.count(1, "callee count")
                last = 0 if tag == C.BLOCK_DIRECT else -1
                for _ in range(m):
                    if tag == C.BLOCK_DIRECT:
                        last, callee = bsyms.read(b, "callee", last)
                        direct.append((caller, callee))
                    else:
                        last, p = proto(b, last)
                        indirect.append((caller, p))
        elif tag == C.BLOCK_ADDRESS_TAKEN:
            n = b.count(2, "address-taken count")
            prev_pair = (0, -1)
            for _ in range(n):
                pat = b.pos
                sym, fname = bsyms.read(b, "address-taken function", prev_pair[0] - 1)
                i, p = proto(b, -1)
                if (sym, i) <= prev_pair:
                    raise block.error("address-taken entries not in strictly increasing order", pat, sym)
                prev_pair = (sym, i)
                taken.append((fname, p))
        else:
            n = b.count(1, "external count")
            prev = 0
            for _ in range(n):
                prev, ext = bsyms.read(b, "external callee", prev)
                external.append(ext)
        if not b.at_end():
            raise block.error(f"block {tag}: {b.remaining} bytes left after its entries", b.pos, b.remaining)
    return CallGraph(tuple(direct), tuple(indirect), tuple(taken), tuple(external), tuple(unknown)), _version(name, hdr)


# -- everything -----------------------------------------------------------------------

def decode_section(
    name: str,
    view: ByteView | Buffer,
    symbol_name: SymbolName | None = None,
    symtab_count: int | None = None,
    prototypes: tuple[Prototype, ...] = (),
) -> tuple[object, SectionVersion]:
    """Decode one section by name; returns (value, version) where value is the
    prototype tuple, ``Metadata``, function tuple or ``CallGraph``."""
    def no_symbols(i: int) -> str:
        raise FormatError("no symbol table given", fmt=C.FMT, where=f"section {name!r}", value=i)

    sym = symbol_name or no_symbols
    if name == C.SEC_PROTO:
        return decode_proto(view, name)
    if name == C.SEC_META:
        return decode_meta(view, name)
    if name == C.SEC_FUNC:
        return decode_func(view, sym, symtab_count, len(prototypes), name)
    if name == C.SEC_CALLGRAPH:
        return decode_callgraph(view, sym, symtab_count, prototypes, name)
    raise FormatError(f"not a devbin section: {name!r}", fmt=C.FMT, where=f"section {name!r}")


def decode(
    sections: Mapping[str, ByteView | Buffer],
    symbol_name: SymbolName,
    symtab_count: int | None,
    *,
    target: Target | None = None,
) -> CodeObject:
    """Build a :class:`CodeObject` from the devbin sections present in ``sections``.

    Other keys are ignored.  ``symtab_count`` is the real size of the linked
    symbol table (``None`` skips the staleness check, which raises
    :class:`StaleSection`).  ``target`` (e.g. from the ELF header) is used when
    ``.devbin.meta`` names none.  Raises only :class:`DeviceBinaryError`.
    """
    versions: list[SectionVersion] = []
    prototypes: tuple[Prototype, ...] = ()
    metadata = Metadata()
    functions: tuple[Function, ...] = ()
    callgraph = CallGraph()
    if C.SEC_PROTO in sections:
        prototypes, v = decode_proto(sections[C.SEC_PROTO])
        versions.append(v)
    if C.SEC_META in sections:
        metadata, v = decode_meta(sections[C.SEC_META])
        versions.append(v)
    if C.SEC_FUNC in sections:
        functions, v = decode_func(sections[C.SEC_FUNC], symbol_name, symtab_count, len(prototypes))
        versions.append(v)
    if C.SEC_CALLGRAPH in sections:
        callgraph, v = decode_callgraph(sections[C.SEC_CALLGRAPH], symbol_name, symtab_count, prototypes)
        versions.append(v)
    if "target-id" in metadata:
        target = None  # the section's own target wins (CodeObject derives it)
    try:
        return CodeObject(target, functions, callgraph, metadata, prototypes, tuple(versions))
    except DeviceBinaryError as e:  # a model rule the sections break together
        raise FormatError(f"inconsistent devbin sections: {e.message}", fmt=C.FMT, where="devbin sections") from e
