"""Packed storage for super-archive members: zstd frames, sub-member dedup, deltas (docs/FORMAT.md §16.6).

A packed member is still one ar member per unique member (ordinals, names, ``size`` and
``sha256`` of the stored bytes, and the staleness checks of §16.7 are unchanged).  Its
stored bytes are its own *frames*, each an independent zstd frame (magicless: the 4-byte
magic is implied) or raw bytes, preceded by a small table.  All integers are ULEB128::

    version                      1
    frame_count
    frame_count x {
        kind                     0 raw (stored bytes are the content), 1 zstd, 2 zstd delta
        stored_size              bytes of the frame in this member
        content_size             bytes it decodes to
        [kind 2] base_count      1..16, then base_count x (ordinal, frame): the frames whose
                                 decoded bytes, concatenated in this order, are the frame's
                                 raw-content dictionary (``zstd --patch-from``)
    }
    layout_count
    layout_count x (ordinal, frame)   the member's content is these frames' bytes in order
    frame data                   back to back, in table order; nothing after the last one

In a reference ``(ordinal, frame)`` ordinal 0 means *this* member; any other ordinal must be
an earlier packed member (so references never form a cycle), and a base inside this member
must be an earlier frame.  A frame is one *chunk* of the content: for an ELF, its header
(with the program headers up to the first section), each section's file bytes, each gap
between sections and the section header table; anything else is one chunk.  A chunk whose
bytes were stored before (in any member) is not stored again: the layout refers to the
frame that holds it.  A new chunk may be compressed as a delta against the same-named chunk
of the same-named member of earlier targets (its *siblings*); the delta depth (a frame
whose bases have bases ...) is at most 2 when written and at most :data:`MAX_DEPTH` when
read, so reading one member decodes its own frames plus a few base *frames* (sections),
never whole other members.

The manifest record's ``storage`` map says ``{"kind": "packed", "content_size": N,
"content_sha256": bin(32), "deps": [ordinals]}``: ``deps`` lists the other members whose
frames this member refers to (each must be packed, and every reference must be in it).
The frame tables stay in the members, not in the manifest, so that opening an archive
costs the same whatever the number of frames.  Decoding is capped by the declared sizes
(:func:`devbin.formats.zstdcap.decompress_capped`), checks every reference, and checks the
decoded content against ``content_sha256``; every failure is a :class:`FormatError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import zstandard

from devbin.binary import ByteView
from devbin.binary.writer import uleb
from devbin.errors import DeviceBinaryError, FormatError, UsageError
from devbin.formats.elf.reader import ElfFile
from devbin.formats.zstdcap import decompress_capped
from devbin.superarchive.manifest import FMT, MemberRecord, Storage

__all__ = [
    "KIND",
    "MAX_DEPTH",
    "PackOptions",
    "PackedMember",
    "PackedReader",
    "chunk_content",
    "content_size_of",
    "pack_members",
]

KIND: Final = "packed"
LAYOUT_VERSION: Final = 1
RAW, ZSTD, DELTA = 0, 1, 2
MAX_DEPTH: Final = 8  # the deepest delta chain a reader follows (writers use 1-2)
MAX_BASES: Final = 16  # bases of one frame
DEFAULT_MAX: Final = 1 << 30  # the largest member content or dictionary decoded (1 GiB)
_CACHE_BYTES: Final = 64 << 20


# --------------------------------------------------------------------------- chunking


def chunk_content(data: bytes) -> list[tuple[str, bytes]]:
    """``data`` split into named chunks whose concatenation is ``data`` (see the module docstring).

    Names key the delta bases: a section's name (``#k`` added to a repeated name), ``<head>``
    (ELF and program headers up to the first section), ``<shdrs>`` (the gap holding the section
    header table) and ``<gap:next>`` (bytes before section ``next``, or ``<end>``); a non-ELF
    (or unreadable ELF) is one chunk, ``<all>``.
    """
    if not data.startswith(b"\x7fELF"):
        return [("<all>", data)] if data else []
    try:
        elf = ElfFile(data)
        spans = sorted((s.sh_offset, s.file_size, s.name) for s in elf.sections if s.file_size > 0)
        shoff = elf.header.e_shoff
    except DeviceBinaryError:
        return [("<all>", data)]
    out: list[tuple[str, bytes]] = []
    seen: dict[str, int] = {}
    pos = 0

    def gap(end: int, following: str) -> None:
        if end > pos:
            name = "<head>" if pos == 0 else "<shdrs>" if pos <= shoff < end else f"<gap:{following}>"
            out.append((name, data[pos:end]))

    for off, size, name in spans:
        if off < pos:  # overlaps what came before: left inside the earlier chunk
            continue
        gap(off, name)
        n = seen.get(name, 0)
        seen[name] = n + 1
        out.append((name if n == 0 else f"{name}#{n}", data[off:off + size]))
        pos = off + size
    if pos < len(data):
        gap(len(data), "<end>")
    return out


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class PackOptions:
    """Knobs of the packed writer.

    ``level``: zstd level (1-22); ``delta``: compress new chunks against siblings' chunks;
    ``max_bases``: sibling chunks in one dictionary; ``max_depth``: the longest delta chain
    written (1 or 2 keeps random access cheap; at most :data:`MAX_DEPTH`).
    """

    level: int = 19
    delta: bool = True
    max_bases: int = 4
    max_depth: int = 2

    def check(self) -> None:
        if not 1 <= self.level <= 22:
            raise UsageError(f"zstd level {self.level} is outside 1..22", fmt=FMT)
        if not 1 <= self.max_bases <= MAX_BASES:
            raise UsageError(f"max_bases {self.max_bases} is outside 1..{MAX_BASES}", fmt=FMT)
        if not 1 <= self.max_depth <= MAX_DEPTH:
            raise UsageError(f"max_depth {self.max_depth} is outside 1..{MAX_DEPTH}", fmt=FMT)


@dataclass(frozen=True)
class PackedMember:
    """One packed member: the stored bytes and the storage map for its record."""

    stored: bytes
    storage: Storage


@dataclass
class _Frame:
    kind: int
    payload: bytes
    content: bytes
    depth: int
    bases: tuple[tuple[int, int], ...] = ()


@dataclass
class _Packer:
    opts: PackOptions
    stored_at: dict[bytes, tuple[int, int, int]] = field(default_factory=dict)  # chunk sha -> (ordinal, frame, depth)
    by_key: dict[tuple[str, str], list[tuple[int, int, int, bytes]]] = field(default_factory=dict)

    def _compress(self, data: bytes, dictionary: bytes | None) -> bytes:
        params = zstandard.ZstdCompressionParameters.from_level(
            self.opts.level, source_size=len(data) + (len(dictionary) if dictionary else 0),
            format=zstandard.FORMAT_ZSTD1_MAGICLESS, write_content_size=False, write_checksum=False,
            write_dict_id=False)
        zdict = zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT) \
            if dictionary else None
        out: bytes = zstandard.ZstdCompressor(compression_params=params, dict_data=zdict).compress(data)
        return out

    def _encode(self, chunk: bytes, family: str, key: str) -> _Frame:
        options = [_Frame(RAW, chunk, chunk, 0)]
        if len(chunk) > 8:
            options.append(_Frame(ZSTD, self._compress(chunk, None), chunk, 0))
        siblings = self.by_key.get((family, key), []) if self.opts.delta else []
        tried: set[tuple[tuple[int, int], ...]] = set()
        for deepest in range(self.opts.max_depth):  # bases of depth <= deepest give a frame of depth deepest + 1
            picked = [s for s in reversed(siblings) if s[2] <= deepest][:self.opts.max_bases]
            refs = tuple((o, f) for o, f, _, _ in reversed(picked))
            if not picked or refs in tried:
                continue
            tried.add(refs)
            payload = self._compress(chunk, b"".join(c for _, _, _, c in reversed(picked)))
            options.append(_Frame(DELTA, payload, chunk, 1 + max(d for _, _, d, _ in picked), refs))
        best = min(options, key=lambda f: len(f.payload))
        # A shallower frame within a quarter of the best is worth more: later siblings may build on it.
        for f in sorted(options, key=lambda f: f.depth):
            if len(f.payload) <= len(best.payload) * 1.25 + 8:
                return f
        return best  # pragma: no cover - the loop always returns

    def member(self, ordinal: int, family: str, data: bytes) -> PackedMember:
        frames: list[_Frame] = []
        layout: list[tuple[int, int]] = []
        deps: set[int] = set()
        for key, chunk in chunk_content(data):
            sha = hashlib.sha256(chunk).digest()
            if sha in self.stored_at:
                o, f, d = self.stored_at[sha]
                layout.append((0 if o == ordinal else o, f))
                if o != ordinal:
                    deps.add(o)
                known = self.by_key.setdefault((family, key), [])
                if not any(k[0] == o and k[1] == f for k in known):
                    known.append((o, f, d, chunk))  # a later sibling may still use it as a base
                continue
            frame = self._encode(chunk, family, key)
            index = len(frames)
            frames.append(frame)
            layout.append((0, index))
            self.stored_at[sha] = (ordinal, index, frame.depth)
            self.by_key.setdefault((family, key), []).append((ordinal, index, frame.depth, chunk))
            deps.update(o for o, _ in frame.bases if o != ordinal)
        out = bytearray(uleb(LAYOUT_VERSION) + uleb(len(frames)))
        for fr in frames:
            out += uleb(fr.kind) + uleb(len(fr.payload)) + uleb(len(fr.content))
            if fr.kind == DELTA:
                out += uleb(len(fr.bases))
                for o, f in fr.bases:
                    out += uleb(0 if o == ordinal else o) + uleb(f)
        out += uleb(len(layout))
        for o, f in layout:
            out += uleb(o) + uleb(f)
        for fr in frames:
            out += fr.payload
        storage = Storage(KIND, {"content_size": len(data), "content_sha256": hashlib.sha256(data).digest(),
                                 "deps": sorted(deps)})
        return PackedMember(bytes(out), storage)


def pack_members(members: Sequence[tuple[str, bytes]], options: PackOptions | None = None) -> list[PackedMember]:
    """Pack unique members given in ordinal order as (family, content): ``family`` is the name the
    member had at its first use, which picks its siblings (same name, earlier ordinal)."""
    opts = options or PackOptions()
    opts.check()
    packer = _Packer(opts)
    return [packer.member(i + 1, family, data) for i, (family, data) in enumerate(members)]


# --------------------------------------------------------------------------- reading


def content_size_of(record: MemberRecord) -> int:
    """The content bytes of a member: the stored size for plain, ``content_size`` for packed."""
    if record.storage.kind == KIND:
        v = record.storage.params.get("content_size")
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    return record.size


@dataclass(frozen=True)
class _Table:
    frames: tuple[tuple[int, int, int, int, tuple[tuple[int, int], ...]], ...]  # kind, offset, stored, size, bases
    layout: tuple[tuple[int, int], ...]
    view: ByteView


@dataclass(frozen=True)
class _Params:
    content_size: int
    sha256: bytes
    deps: frozenset[int]


class PackedReader:
    """Decodes packed members of one archive; ``stored(ordinal)`` returns the hash-checked stored view.

    Tables and decoded frames are cached (frames up to 64 MiB in all), so reading a whole
    target decodes each shared base frame once.
    """

    def __init__(self, records: Sequence[MemberRecord], stored: Callable[[int], ByteView],
                 *, max_size: int = DEFAULT_MAX) -> None:
        self._records = records
        self._stored = stored
        self._max = max_size
        self._tables: dict[int, _Table] = {}
        self._params: dict[int, _Params] = {}
        self._frames: dict[tuple[int, int], bytes] = {}
        self._cached = 0

    # -- manifest parameters --------------------------------------------------------------
    def _fail(self, ordinal: int, message: str, value: object = None) -> FormatError:
        return FormatError(f"manifest members[{ordinal - 1}].storage: {message}", fmt=FMT,
                           where=self._records[ordinal - 1].name, value=value)

    def params(self, ordinal: int) -> _Params:
        if ordinal in self._params:
            return self._params[ordinal]
        st: Mapping[str, Any] = self._records[ordinal - 1].storage.params
        size = st.get("content_size")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= self._max:
            raise self._fail(ordinal, f"content_size is not an integer in 0..{self._max}", size)
        sha = st.get("content_sha256")
        if not isinstance(sha, bytes) or len(sha) != 32:
            raise self._fail(ordinal, "content_sha256 is not 32 bytes")
        deps = st.get("deps")
        if not isinstance(deps, list) or not all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d < ordinal
                                                 for d in deps):
            raise self._fail(ordinal, f"deps must be a list of ordinals in 1..{ordinal - 1}", repr(deps)[:60])
        for d in deps:
            if self._records[d - 1].storage.kind != KIND:
                raise self._fail(ordinal, f"deps: member [{d}] is not packed", d)
        p = _Params(size, sha, frozenset(deps))
        self._params[ordinal] = p
        return p

    # -- the member's table -----------------------------------------------------------------
    def table(self, ordinal: int) -> _Table:
        if ordinal in self._tables:
            return self._tables[ordinal]
        deps = self.params(ordinal).deps
        view = self._stored(ordinal)
        cur = view.cursor()

        def ref(what: str, own_limit: int) -> tuple[int, int]:
            at = cur.pos
            o = cur.uleb(what)
            f = cur.uleb(what)
            if o == 0:
                if f >= own_limit:
                    raise view.error(f"{what}: frame {f} of this member does not exist here", at, f)
                return ordinal, f
            if o not in deps:
                raise view.error(f"{what}: member [{o}] is not one of the manifest's deps {sorted(deps)}", at, o)
            return o, f

        version = cur.uleb("packed layout version")
        if version != LAYOUT_VERSION:
            raise view.error(f"packed layout version {version} is not supported (this devbin reads "
                             f"{LAYOUT_VERSION})", 0, version)
        count = cur.count(3, "frame count")
        raw: list[tuple[int, int, int, tuple[tuple[int, int], ...]]] = []
        for i in range(count):
            at = cur.pos
            kind = cur.uleb("frame kind")
            stored = cur.uleb("frame stored size")
            size = cur.uleb("frame content size")
            if kind not in (RAW, ZSTD, DELTA):
                raise view.error(f"frame [{i}]: unknown kind {kind}", at, kind)
            if size > self._max or (kind == RAW and stored != size):
                raise view.error(f"frame [{i}]: content size {size} does not fit its kind or the "
                                 f"{self._max}-byte cap", at, size)
            bases: tuple[tuple[int, int], ...] = ()
            if kind == DELTA:
                n = cur.uleb("base count")
                if not 1 <= n <= MAX_BASES:
                    raise view.error(f"frame [{i}]: base count {n} is outside 1..{MAX_BASES}", at, n)
                bases = tuple(ref(f"frame [{i}] base", i) for _ in range(n))
            raw.append((kind, stored, size, bases))
        n_layout = cur.count(2, "layout count")
        layout = tuple(ref(f"layout [{j}]", count) for j in range(n_layout))
        offset = cur.pos
        frames = []
        for i, (kind, stored, size, bases) in enumerate(raw):
            view.check(offset, stored, f"frame [{i}] data")
            frames.append((kind, offset, stored, size, bases))
            offset += stored
        if offset != len(view):
            raise view.error(f"{len(view) - offset} bytes after the last frame", offset)
        t = _Table(tuple(frames), layout, view)
        self._tables[ordinal] = t
        return t

    def _frame_entry(self, ordinal: int, frame: int, where: str) -> tuple[_Table, tuple[Any, ...]]:
        if self._records[ordinal - 1].storage.kind != KIND:  # ordinals were checked against deps
            raise self._fail(ordinal, f"{where}: member [{ordinal}] is not a packed member", ordinal)
        t = self.table(ordinal)
        if not 0 <= frame < len(t.frames):
            raise t.view.error(f"{where}: member [{ordinal}] has no frame {frame} ({len(t.frames)} frames)", 0, frame)
        return t, t.frames[frame]

    # -- frames ------------------------------------------------------------------------------------
    def frame(self, ordinal: int, frame: int, depth: int = 0) -> bytes:
        """The decoded bytes of one frame (following its bases, at most :data:`MAX_DEPTH` deep)."""
        key = (ordinal, frame)
        if key in self._frames:
            return self._frames[key]
        t, (kind, offset, stored, size, bases) = self._frame_entry(ordinal, frame, f"frame {key}")
        payload = t.view.bytes_at(offset, stored, f"frame [{frame}]")
        if kind == RAW:
            out = bytes(payload)
        else:
            dictionary = None
            if kind == DELTA:
                if depth >= MAX_DEPTH:
                    raise t.view.error(f"frame [{frame}]: delta chain deeper than {MAX_DEPTH}", offset, depth)
                parts: list[bytes] = []
                total = 0
                for o, f in bases:
                    _, entry = self._frame_entry(o, f, f"frame [{frame}] base")
                    total += entry[3]
                    if total > self._max:
                        raise t.view.error(f"frame [{frame}]: dictionary larger than {self._max} bytes", offset, total)
                    parts.append(self.frame(o, f, depth + 1))
                dictionary = b"".join(parts)
            data = decompress_capped(payload, size, self._max, fmt=FMT, where=t.view.where,
                                     offset=t.view.base + offset, dictionary=dictionary or None, magicless=True)
            if len(data) != size:
                got = str(len(data)) if len(data) <= size else f"more than {size}"
                raise t.view.error(f"frame [{frame}] decodes to {got} bytes, the table says {size}", offset, size)
            out = bytes(data)
        if self._cached + len(out) > _CACHE_BYTES:
            self._frames.clear()
            self._cached = 0
        self._frames[key] = out
        self._cached += len(out)
        return out

    def content(self, ordinal: int) -> bytes:
        """The decoded content of packed member ``ordinal``, checked against its size and SHA-256."""
        p = self.params(ordinal)
        t = self.table(ordinal)
        total = 0
        for o, f in t.layout:
            _, entry = self._frame_entry(o, f, "layout")
            total += entry[3]
        if total != p.content_size:
            raise self._fail(ordinal, f"the layout adds up to {total} bytes, content_size says {p.content_size}",
                             total)
        out = b"".join(self.frame(o, f) for o, f in t.layout)
        if hashlib.sha256(out).digest() != p.sha256:
            raise self._fail(ordinal, "decoded content does not match content_sha256")
        return out
