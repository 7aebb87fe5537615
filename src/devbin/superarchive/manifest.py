"""The super-archive manifest: codec and record types (docs/FORMAT.md §16).

The manifest is one plain-named ar member, ``__devbin_sa.idx``, the first file member of the
archive.  Layout (little-endian)::

    +0x00  char[8]   magic "DEVBINSA"
    +0x08  u16       version (2 written; 1 still read)
    +0x0a  u16       flags (0; unknown bits are kept and shown, never fatal)
    +0x0c  u32       body_size (bytes stored)
    +0x10  u8[32]    SHA-256 of the stored body
    +0x30  body      version 1: one MessagePack map (body_size bytes), nothing after it
                     version 2: u32 map_size, then one zstd frame holding that MessagePack map
                                (map_size bytes once decoded; decoding is capped by it)

Version 2 compresses the map because it is mostly symbol names, repeated once per target
(N targets defining essentially the same symbols): on one libcurand translation unit for 13
GPUs the map is 160 KB and its zstd frame a tenth of that, which is what lets a packed
super-archive come in under ``fatbinary --compress-mode=size --concat`` as a whole file.

Body keys (written in this order, then unknown keys sorted by name)::

    "targets":      [ {"name": str, "chain": [str], "members": [[ordinal, name]],
                       "symbols": [[symbol, position]], ...} ]
    "members":      [ {"ordinal": int, "name": str, "size": int, "sha256": bin(32),
                       "storage": {"kind": "plain", ...}, ...} ]
    "index_target": str | nil       the target whose symbols the "/" index lists

Why MessagePack rather than devbin's own ULEB layout: the manifest is a tree of maps whose
keys must be extensible in three places (file, target, member, storage) and whose unknown
keys must survive a rewrite; a self-describing map gives that without a private type
system, and ``msgpack`` is already a dependency.  The fixed binary header in front keeps the
version and checksum readable without decoding the body, so a corrupt or newer body is
refused before MessagePack sees it.

Why ordinals plus hashes and never offsets: ``ranlib``/``ar s`` rewrite the ``/`` index and
so move every member's byte offset, but keep the member order (binutils ``ar`` manual, ``s``
modifier; measured with GNU ar and llvm-ar-19); an ordinal (the member's position in ``ar t``
order, the manifest being ordinal 0) survives that, and the SHA-256 catches a member replaced in place by ``ar r``.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack  # type: ignore[import-untyped]
import zstandard

from devbin.binary import Buffer, ByteView
from devbin.errors import FormatError, NotThisFormat, UnsupportedVersion, UsageError, quote
from devbin.formats.zstdcap import decompress_capped

__all__ = [
    "HEADER_SIZE",
    "MAGIC",
    "MANIFEST_NAME",
    "VERSION",
    "Manifest",
    "MemberRecord",
    "StaleManifest",
    "Storage",
    "TargetMember",
    "TargetRecord",
    "decode_manifest",
    "encode_manifest",
    "manifest_map",
]

MAGIC: Final = b"DEVBINSA"
VERSION: Final = 2
READ_VERSIONS: Final = (1, 2)
MAX_MAP_SIZE: Final = 1 << 30  # a decoded manifest map larger than this is refused
_LEVEL = 19
HEADER_SIZE: Final = 48
MANIFEST_NAME: Final = "__devbin_sa.idx"  # 15 bytes: fits ar_name with its "/", so no "//" is needed for it
_HEADER = struct.Struct("<8sHHI32s")
_U64 = (1 << 64) - 1
FMT: Final = "superarchive"


class StaleManifest(FormatError):
    """The archive's members no longer match the manifest (``ar r``/``ar d``/``ar m`` after the build)."""


@dataclass(frozen=True)
class Storage:
    """How a member's content is stored in its ar member: ``kind`` plus kind-specific parameters.

    ``"plain"`` (the member *is* the content) is the only kind this version writes and reads;
    other kinds are kept and listed, and reading their data raises :class:`UnsupportedVersion`.
    """

    kind: str = "plain"
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MemberRecord:
    """One unique member: ``ordinal`` in ``ar t`` order, its ar ``name``, the stored ``size`` and
    ``sha256`` of the ar member's bytes, its storage, and unknown keys (``extra``)."""

    ordinal: int
    name: str
    size: int
    sha256: bytes
    storage: Storage = field(default_factory=Storage)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetMember:
    """A target's use of a member: the ordinal and the member's original name in that target."""

    ordinal: int
    name: str


@dataclass(frozen=True)
class TargetRecord:
    """One target: its name, fallback chain, members (in input order) and symbol table.

    ``symbols`` pairs each symbol with a *position* in ``members`` (not an ordinal), so a
    target that holds the same content twice keeps each copy's symbols apart.
    """

    name: str
    chain: tuple[str, ...] = ()
    members: tuple[TargetMember, ...] = ()
    symbols: tuple[tuple[str, int], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Manifest:
    """The decoded manifest (header fields plus body)."""

    targets: tuple[TargetRecord, ...]
    members: tuple[MemberRecord, ...]
    index_target: str | None = None
    flags: int = 0
    version: int = VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    def target(self, name: str) -> TargetRecord:
        for t in self.targets:
            if t.name == name:
                return t
        known = ", ".join(t.name for t in self.targets) or "none"
        raise UsageError(f"no target {quote(name)} in this super-archive (targets: {known})", fmt=FMT)


# --------------------------------------------------------------------------- encoding

_TOP_KEYS = ("targets", "members", "index_target")
_TARGET_KEYS = ("name", "chain", "members", "symbols")
_MEMBER_KEYS = ("ordinal", "name", "size", "sha256", "storage")


def _with_extra(known: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for k in sorted(extra):
        if k in known:
            raise UsageError(f"manifest: extra key {k!r} shadows a known key", fmt=FMT)
        known[k] = extra[k]
    return known


def encode_body(m: Manifest) -> bytes:
    """The MessagePack body of ``m`` (deterministic: fixed key order, extra keys sorted)."""
    body = _with_extra({
        "targets": [
            _with_extra({
                "name": t.name,
                "chain": list(t.chain),
                "members": [[tm.ordinal, tm.name] for tm in t.members],
                "symbols": [[s, p] for s, p in t.symbols],
            }, t.extra)
            for t in m.targets
        ],
        "members": [
            _with_extra({
                "ordinal": r.ordinal,
                "name": r.name,
                "size": r.size,
                "sha256": bytes(r.sha256),
                "storage": _with_extra({"kind": r.storage.kind}, r.storage.params),
            }, r.extra)
            for r in m.members
        ],
        "index_target": m.index_target,
    }, m.extra)
    try:
        out: bytes = msgpack.packb(body, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:
        raise UsageError(f"manifest: cannot encode: {e}", fmt=FMT) from e
    return out


def encode_manifest(m: Manifest) -> bytes:
    """Header plus body (see the module docstring): version 2 (compressed) unless ``m.version`` is 1."""
    body = encode_body(m)
    if m.version not in READ_VERSIONS:
        raise UsageError(f"manifest: cannot write version {m.version}", fmt=FMT)
    if m.version >= 2:
        body = struct.pack("<I", len(body)) + zstandard.ZstdCompressor(level=_LEVEL, write_checksum=False,
                                                                      write_content_size=True).compress(body)
    return _HEADER.pack(MAGIC, m.version, m.flags, len(body), hashlib.sha256(body).digest()) + body


# --------------------------------------------------------------------------- decoding


class _Checker:
    """Typed access to decoded MessagePack values; every mismatch is a FormatError."""

    def __init__(self, view: ByteView) -> None:
        self.view = view

    def fail(self, path: str, message: str, value: object = None) -> FormatError:
        return self.view.error(f"manifest {path}: {message}", HEADER_SIZE, value)

    def mapping(self, v: object, path: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.fail(path, f"expected a map, found {type(v).__name__}")
        for k in v:
            if not isinstance(k, str):
                raise self.fail(path, "map keys must be strings", repr(k)[:40])
        return v

    def seq(self, v: object, path: str) -> list[Any]:
        if not isinstance(v, list):
            raise self.fail(path, f"expected a list, found {type(v).__name__}")
        return v

    def text(self, v: object, path: str) -> str:
        if not isinstance(v, str):
            raise self.fail(path, f"expected a string, found {type(v).__name__}")
        return v

    def uint(self, v: object, path: str) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= _U64:
            raise self.fail(path, "expected an unsigned integer", v if isinstance(v, int) else None)
        return v

    def key(self, m: dict[str, Any], k: str, path: str) -> Any:
        if k not in m:
            raise self.fail(path, f"missing key {k!r}")
        return m[k]


def decode_manifest(data: Buffer | ByteView, *, where: str = "") -> Manifest:
    """Decode and validate a manifest member's bytes (header, checksum, body, references).

    Raises :class:`NotThisFormat` (bad magic), :class:`UnsupportedVersion` (a newer version)
    or :class:`FormatError` (anything else); never another exception type.
    """
    view = data if isinstance(data, ByteView) else ByteView(data)
    view = ByteView(view, fmt=FMT, where=where or view.where or MANIFEST_NAME, base=view.base)
    if not view.startswith(MAGIC):
        raise view.error("not a super-archive manifest (bad magic)", 0, cls=NotThisFormat)
    view.check(0, HEADER_SIZE, "manifest header")
    magic, version, flags, body_size, digest = _HEADER.unpack(bytes(view.bytes_at(0, HEADER_SIZE)))
    if magic != MAGIC:
        raise view.error("not a super-archive manifest (bad magic)", 0, magic, cls=NotThisFormat)
    if version not in READ_VERSIONS:
        raise view.error(f"manifest version {version} is not supported (this devbin reads "
                         f"{', '.join(map(str, READ_VERSIONS))})", 8, version, cls=UnsupportedVersion)
    body = view.bytes_at(HEADER_SIZE, body_size, "manifest body")
    if len(view) != HEADER_SIZE + body_size:
        raise view.error(f"{len(view) - HEADER_SIZE - body_size} bytes after the manifest body",
                         HEADER_SIZE + body_size)
    if hashlib.sha256(body).digest() != digest:
        raise view.error("manifest checksum mismatch (the manifest is corrupt)", 0x10)
    mapped = _inflate(view, body_size) if version >= 2 else bytes(body)
    try:
        raw = msgpack.unpackb(mapped, raw=False, use_list=True, strict_map_key=True)
    except Exception as e:  # msgpack's errors (ValueError family, ExtraData, StackError, ...): translate them
        raise view.error(f"manifest body is not valid MessagePack ({type(e).__name__}: {e})", HEADER_SIZE) from None
    return _decode_body(_Checker(view), raw, version, flags)


def manifest_map(data: Buffer | ByteView) -> bytes:
    """The MessagePack map bytes of a manifest member of any supported version (no schema checks)."""
    view = data if isinstance(data, ByteView) else ByteView(data, fmt=FMT)
    view.check(0, HEADER_SIZE, "manifest header")
    _, version, _, body_size, _ = _HEADER.unpack(bytes(view.bytes_at(0, HEADER_SIZE)))
    if version >= 2:
        return _inflate(view, body_size)
    return bytes(view.bytes_at(HEADER_SIZE, body_size, "manifest body"))


def _inflate(view: ByteView, body_size: int) -> bytes:
    """The MessagePack map of a version-2 body: ``u32 map_size`` then a zstd frame, decoded capped."""
    view.check(HEADER_SIZE, 4, "manifest map size")
    (size,) = struct.unpack("<I", bytes(view.bytes_at(HEADER_SIZE, 4)))
    if size > MAX_MAP_SIZE:
        raise view.error(f"manifest map of {size} bytes is over the {MAX_MAP_SIZE}-byte limit", HEADER_SIZE, size)
    frame = view.bytes_at(HEADER_SIZE + 4, body_size - 4, "manifest frame") if body_size >= 4 else b""
    out = decompress_capped(frame, size, MAX_MAP_SIZE, fmt=FMT, where=view.where, offset=view.base + HEADER_SIZE + 4)
    if len(out) != size:
        raise view.error(f"manifest frame decodes to {len(out)} bytes, the header says {size}", HEADER_SIZE + 4,
                         len(out))
    return bytes(out)


def _extra(m: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k not in known}


def _decode_body(c: _Checker, raw: object, version: int, flags: int) -> Manifest:
    top = c.mapping(raw, "body")
    members: list[MemberRecord] = []
    for i, rm in enumerate(c.seq(c.key(top, "members", "body"), "members")):
        p = f"members[{i}]"
        m = c.mapping(rm, p)
        ordinal = c.uint(c.key(m, "ordinal", p), p + ".ordinal")
        if ordinal != i + 1:
            raise c.fail(p + ".ordinal", f"expected ordinal {i + 1} (members are listed in archive order)", ordinal)
        sha = c.key(m, "sha256", p)
        if not isinstance(sha, bytes) or len(sha) != 32:
            raise c.fail(p + ".sha256", "expected 32 bytes")
        st = c.mapping(c.key(m, "storage", p), p + ".storage")
        storage = Storage(c.text(c.key(st, "kind", p + ".storage"), p + ".storage.kind"), _extra(st, ("kind",)))
        members.append(MemberRecord(ordinal, c.text(c.key(m, "name", p), p + ".name"),
                                    c.uint(c.key(m, "size", p), p + ".size"), sha, storage,
                                    _extra(m, _MEMBER_KEYS)))
    targets: list[TargetRecord] = []
    names: set[str] = set()
    for i, rt in enumerate(c.seq(c.key(top, "targets", "body"), "targets")):
        p = f"targets[{i}]"
        t = c.mapping(rt, p)
        name = c.text(c.key(t, "name", p), p + ".name")
        if not name or name in names:
            raise c.fail(p + ".name", "target name is empty or repeated", name)
        names.add(name)
        chain = tuple(c.text(x, f"{p}.chain[{j}]") for j, x in enumerate(c.seq(c.key(t, "chain", p), p + ".chain")))
        tms: list[TargetMember] = []
        for j, e in enumerate(c.seq(c.key(t, "members", p), p + ".members")):
            q = f"{p}.members[{j}]"
            pair = c.seq(e, q)
            if len(pair) != 2:
                raise c.fail(q, "expected [ordinal, name]")
            o = c.uint(pair[0], q)
            if not 1 <= o <= len(members):
                raise c.fail(q, f"ordinal outside 1..{len(members)}", o)
            tms.append(TargetMember(o, c.text(pair[1], q)))
        syms: list[tuple[str, int]] = []
        for j, e in enumerate(c.seq(c.key(t, "symbols", p), p + ".symbols")):
            q = f"{p}.symbols[{j}]"
            pair = c.seq(e, q)
            if len(pair) != 2:
                raise c.fail(q, "expected [symbol, position]")
            pos = c.uint(pair[1], q)
            if pos >= len(tms):
                raise c.fail(q, f"position outside the target's {len(tms)} members", pos)
            syms.append((c.text(pair[0], q), pos))
        targets.append(TargetRecord(name, chain, tuple(tms), tuple(syms), _extra(t, _TARGET_KEYS)))
    index_target = c.key(top, "index_target", "body")
    if index_target is not None and (not isinstance(index_target, str) or index_target not in names):
        raise c.fail("index_target", "not the name of a target", index_target)
    return Manifest(tuple(targets), tuple(members), index_target, flags, version, _extra(top, _TOP_KEYS))
