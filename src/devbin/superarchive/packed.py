"""Packed storage for super-archive members: zstd, deltas against sibling members (docs/FORMAT.md §16.6).

A packed member is still one ar member per unique member (ordinals, names, ``size`` and
``sha256`` of the stored bytes, and the staleness checks of §16.7 are unchanged).  The
manifest record's ``storage`` map says ``{"kind": "packed", "content_size": N,
"content_sha256": bin(32), "deps": [ordinals]}``: ``deps`` lists the other members whose
bytes this member needs (each must be packed).  The stored bytes start with a ULEB128
layout version; all integers are ULEB128.

**Layout 2** (written by default): the member is ONE frame, raw or a magicless zstd frame
(no checksum, no content size: both are in the manifest) whose raw-content dictionary is the
concatenation of its *bases'* decoded contents::

    version                      2
    kind                         0 raw (the rest is the content), 1 zstd
    base_count                   0..16, then base_count x ordinal: the bases, in dictionary order
    payload                      the rest of the member

Bases are other members of the same *family* (the name the member had at its first use: the
same object built for other targets), in any order of ordinals; ``deps`` must equal the set
of bases.  The writer picks them as a tree per family: a cheap zstd estimate of every member
against its neighbours (up to ``candidates`` on each side, in ordinal order) gives edge costs,
then a bounded-depth spanning tree (each root tried, cheapest edge added while the parent is
less than ``max_depth`` deep, or a new root where compressing alone is cheaper); a member's
bases are its ancestors, root first and parent last, so its dictionary holds exactly what
reading it decodes anyway.  **Bound**: reading one member decodes that member plus its
ancestors, at most ``max_depth`` (default 3) other members of the same family, each once
and cached; a reader refuses a member whose transitive ``deps`` exceed :data:`MAX_CLOSURE`
members or hold a cycle.  Identical members are still stored once (§16.3); identical
sections of siblings cost a few bytes as dictionary matches.

**Layout 1** (``layout=1``; still read): per-section frames with sub-member dedup::

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
an earlier packed member listed in ``deps``, and a base inside this member must be an earlier
frame.  A frame is one *chunk* of the content (:func:`chunk_content`); a chunk stored before
(in any member) is not stored again; a new chunk may be a delta against the same-named chunk
of the same-named member of earlier targets (depth at most ``max_depth`` written and at most
:data:`MAX_DEPTH` read).

The tables stay in the members, not in the manifest, so that opening an archive costs the
same whatever the storage.  Decoding is capped by the declared sizes
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

Progress = Callable[[int, int], None]  # (done, total), for a progress bar

__all__ = [
    "KIND",
    "LAYOUT_MEMBERS",
    "LAYOUT_SECTIONS",
    "MAX_CLOSURE",
    "MAX_DEPTH",
    "PackOptions",
    "PackedMember",
    "PackedReader",
    "chunk_content",
    "content_size_of",
    "pack_members",
]

KIND: Final = "packed"
LAYOUT_SECTIONS: Final = 1  # per-section frames (read; written with layout=1)
LAYOUT_MEMBERS: Final = 2  # one frame per member, dictionary = ancestors (the default)
LAYOUT_VERSION: Final = LAYOUT_MEMBERS
RAW, ZSTD, DELTA = 0, 1, 2
MAX_DEPTH: Final = 8  # the deepest delta chain a reader follows (writers use 1-3)
MAX_BASES: Final = 16  # bases of one frame or member
MAX_CLOSURE: Final = 16  # layout 2: other members one read may decode (its transitive deps)
_MAX_WINDOW_LOG: Final = 27  # the compressor's window (128 MiB): base dictionaries beyond it are seen in part
_ESTIMATE_BIG: Final = 256 << 10  # members from this size are estimated at level <= 7 (fast), smaller at `level`
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

    ``level``: zstd level (1-22); ``delta``: compress members (layout 2) or new chunks
    (layout 1) against siblings; ``max_depth``: the longest delta chain written, i.e. (layout
    2) the most other members one read decodes (at most :data:`MAX_DEPTH`); ``layout``: 2
    (whole members, the default) or 1 (per-section frames); ``candidates``: layout 2, the
    neighbours on each side a member is estimated against; ``max_bases``: layout 1, sibling
    chunks in one dictionary.
    """

    level: int = 19
    delta: bool = True
    max_bases: int = 4
    max_depth: int = 3
    layout: int = LAYOUT_MEMBERS
    candidates: int = 8

    def check(self) -> None:
        if not 1 <= self.level <= 22:
            raise UsageError(f"zstd level {self.level} is outside 1..22", fmt=FMT)
        if self.layout not in (LAYOUT_SECTIONS, LAYOUT_MEMBERS):
            raise UsageError(f"packed layout {self.layout} is not 1 (sections) or 2 (members)", fmt=FMT)
        if not 1 <= self.candidates <= 64:
            raise UsageError(f"candidates {self.candidates} is outside 1..64", fmt=FMT)
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
        out = bytearray(uleb(LAYOUT_SECTIONS) + uleb(len(frames)))
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


def _zstd(data: bytes, dictionary: bytes, level: int) -> bytes:
    """A magicless zstd frame of ``data`` (no checksum, no size) with ``dictionary`` as raw content,
    the window large enough (up to 2^27) and long-distance matching on, so matches reach the whole
    dictionary."""
    total = len(data) + len(dictionary)
    window_log = max(10, min(_MAX_WINDOW_LOG, max(total - 1, 1).bit_length()))
    params = zstandard.ZstdCompressionParameters.from_level(
        level, source_size=total, window_log=window_log, enable_ldm=total > (1 << 20),
        format=zstandard.FORMAT_ZSTD1_MAGICLESS, write_content_size=False, write_checksum=False,
        write_dict_id=False)
    zdict = zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT) \
        if dictionary else None
    out: bytes = zstandard.ZstdCompressor(compression_params=params, dict_data=zdict).compress(data)
    return out


def _tree(contents: Sequence[bytes], opts: PackOptions) -> list[int | None]:
    """Layout 2: the parent of each member of one family (an index into ``contents``, or None for a root).

    Edge costs are estimated zstd sizes of member ``v`` against member ``u`` alone (``u`` within
    ``candidates`` of ``v``); each member is tried as the first root, and members are added
    cheapest edge first from a tree member less than ``max_depth`` deep, or as a new root when
    compressing alone is cheaper.  The cheapest tree wins (ties: the lowest first root).
    """
    k = len(contents)

    def level(data: bytes) -> int:
        return opts.level if len(data) < _ESTIMATE_BIG else min(opts.level, 7)

    alone = [min(len(c), len(_zstd(c, b"", level(c))) if c else 0) for c in contents]
    edges: list[tuple[int, int, int]] = []  # (cost of v from u, v, u)
    for v in range(k):
        if not contents[v]:
            continue
        for u in range(max(0, v - opts.candidates), min(k, v + opts.candidates + 1)):
            if u != v and contents[u]:
                edges.append((len(_zstd(contents[v], contents[u], level(contents[v]))), v, u))
    edges.sort()
    best: tuple[int, list[int | None]] | None = None
    for first in range(k):
        depth = {first: 0}
        parent: list[int | None] = [None] * k
        total = alone[first]
        while len(depth) < k:
            pick = next(((c, v, u) for c, v, u in edges
                         if v not in depth and u in depth and depth[u] < opts.max_depth), None)
            root = min((alone[v], v) for v in range(k) if v not in depth)
            if pick is None or root[0] <= pick[0]:
                depth[root[1]] = 0
                total += root[0]
            else:
                c, v, u = pick
                depth[v] = depth[u] + 1
                parent[v] = u
                total += c
        if best is None or total < best[0]:
            best = (total, parent)
    assert best is not None
    return best[1]


def _pack_layout2(members: Sequence[tuple[str, bytes]], opts: PackOptions,
                  progress: Progress | None = None) -> list[PackedMember]:
    total = 2 * len(members)  # choosing the bases (per family), then compressing (per member)
    done = 0
    families: dict[str, list[int]] = {}
    for i, (family, _) in enumerate(members):
        families.setdefault(family, []).append(i)
    ancestors: list[list[int]] = [[] for _ in members]  # indices, root first, parent last
    for group in families.values():
        if not opts.delta or len(group) < 2:
            continue
        parent = _tree([members[i][1] for i in group], opts)
        for pos, i in enumerate(group):
            chain: list[int] = []
            up = parent[pos]
            while up is not None:
                chain.append(group[up])
                up = parent[up]
            ancestors[i] = chain[::-1]
        done += len(group)
        if progress is not None:
            progress(done, total)
    done = len(members)
    out: list[PackedMember] = []
    for i, (_, data) in enumerate(members):
        if progress is not None:
            progress(done + i, total)
        bases = ancestors[i]
        payload = _zstd(data, b"".join(members[b][1] for b in bases), opts.level) if data else b""
        if len(payload) >= len(data):
            head, payload, bases = uleb(LAYOUT_MEMBERS) + uleb(RAW) + uleb(0), data, []
        else:
            head = uleb(LAYOUT_MEMBERS) + uleb(ZSTD) + uleb(len(bases)) + b"".join(uleb(b + 1) for b in bases)
        storage = Storage(KIND, {"content_size": len(data), "content_sha256": hashlib.sha256(data).digest(),
                                 "deps": sorted(b + 1 for b in bases)})
        out.append(PackedMember(head + payload, storage))
    if progress is not None:
        progress(total, total)
    return out


def pack_members(members: Sequence[tuple[str, bytes]], options: PackOptions | None = None,
                 progress: Progress | None = None) -> list[PackedMember]:
    """Pack unique members given in ordinal order as (family, content): ``family`` is the name the
    member had at its first use, which picks its siblings (same name; layout 1: earlier ordinal)."""
    opts = options or PackOptions()
    opts.check()
    if opts.layout == LAYOUT_MEMBERS:
        return _pack_layout2(members, opts, progress)
    packer = _Packer(opts)
    out = []
    for i, (family, data) in enumerate(members):
        if progress is not None:
            progress(i, len(members))
        out.append(packer.member(i + 1, family, data))
    return out


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

    Tables, decoded frames (layout 1) and decoded members (layout 2) are cached (up to 64 MiB
    each), so reading a whole target decodes each shared base once.
    """

    def __init__(self, records: Sequence[MemberRecord], stored: Callable[[int], ByteView],
                 *, max_size: int = DEFAULT_MAX) -> None:
        self._records = records
        self._stored = stored
        self._max = max_size
        self._tables: dict[int, _Table] = {}
        self._params: dict[int, _Params] = {}
        self._frames: dict[tuple[int, int], bytes | bytearray] = {}
        self._cached = 0
        self._contents: dict[int, bytes | bytearray] = {}
        self._cached_contents = 0

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
        n = len(self._records)
        if not isinstance(deps, list) or not all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= n
                                                 and d != ordinal for d in deps):
            raise self._fail(ordinal, f"deps must be a list of other ordinals in 1..{n}", repr(deps)[:60])
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
        if version != LAYOUT_SECTIONS:
            raise view.error(f"packed layout version {version} is not supported here (member [{ordinal}] is "
                             f"referred to by frame; layout {LAYOUT_SECTIONS} has frames)", 0, version)
        later = [d for d in deps if d > ordinal]
        if later:
            raise self._fail(ordinal, f"deps of a layout-1 member must be earlier ordinals, not {later}", later[0])
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
    def frame(self, ordinal: int, frame: int, depth: int = 0) -> bytes | bytearray:
        """The decoded bytes of one frame (following its bases, at most :data:`MAX_DEPTH` deep)."""
        key = (ordinal, frame)
        if key in self._frames:
            return self._frames[key]
        t, (kind, offset, stored, size, bases) = self._frame_entry(ordinal, frame, f"frame {key}")
        payload = t.view.bytes_at(offset, stored, f"frame [{frame}]")
        out: bytes | bytearray
        if kind == RAW:
            out = bytes(payload)
        else:
            dictionary = None
            if kind == DELTA:
                if depth >= MAX_DEPTH:
                    raise t.view.error(f"frame [{frame}]: delta chain deeper than {MAX_DEPTH}", offset, depth)
                parts: list[bytes | bytearray] = []
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
            out = data  # the one budget-charged buffer decoded into (devbin.binary.budget), not a copy
        if self._cached + len(out) > _CACHE_BYTES:
            self._frames.clear()
            self._cached = 0
        self._frames[key] = out
        self._cached += len(out)
        return out

    def version(self, ordinal: int) -> int:
        """The layout version a packed member's stored bytes start with (1 or 2)."""
        view = self._stored(ordinal)
        version = view.cursor().uleb("packed layout version")
        if version not in (LAYOUT_SECTIONS, LAYOUT_MEMBERS):
            raise view.error(f"packed layout version {version} is not supported (this devbin reads "
                             f"{LAYOUT_SECTIONS} and {LAYOUT_MEMBERS})", 0, version)
        return version

    def content(self, ordinal: int) -> bytes | bytearray:
        """The decoded content of packed member ``ordinal``, checked against its size and SHA-256.

        Layout 2: decodes the member's bases first (each at most once, cached), never more than
        :data:`MAX_CLOSURE` other members; layout 1: its frames and their base frames.
        """
        if ordinal in self._contents:
            return self._contents[ordinal]
        if self.version(ordinal) == LAYOUT_MEMBERS:
            self._closure(ordinal)
            return self._content2(ordinal, ())
        return self._content1(ordinal)

    def _closure(self, ordinal: int) -> None:
        """Refuse a member whose transitive deps (from the manifest, nothing decoded) are too many."""
        seen: set[int] = set()
        todo = list(self.params(ordinal).deps)
        while todo:
            d = todo.pop()
            if d in seen:
                continue
            seen.add(d)
            if len(seen) > MAX_CLOSURE:
                raise self._fail(ordinal, f"more than {MAX_CLOSURE} members to decode for one read (deps of deps)",
                                 len(seen))
            if self._records[d - 1].storage.kind != KIND:
                raise self._fail(ordinal, f"deps: member [{d}] is not packed", d)
            todo += self.params(d).deps

    def _table2(self, ordinal: int) -> tuple[int, tuple[int, ...], int, ByteView]:
        """Layout 2: (kind, bases, payload offset, view), every base checked against ``deps``."""
        p = self.params(ordinal)
        view = self._stored(ordinal)
        cur = view.cursor()
        cur.uleb("packed layout version")
        at = cur.pos
        kind = cur.uleb("member kind")
        if kind not in (RAW, ZSTD):
            raise view.error(f"unknown member kind {kind} (layout 2: 0 raw, 1 zstd)", at, kind)
        at = cur.pos
        n = cur.uleb("base count")
        if n > MAX_BASES or (kind == RAW and n):
            raise view.error(f"base count {n} is outside 0..{0 if kind == RAW else MAX_BASES}", at, n)
        bases: list[int] = []
        for i in range(n):
            at = cur.pos
            b = cur.uleb(f"base [{i}]")
            if b not in p.deps or b in bases:
                raise view.error(f"base [{i}]: member [{b}] is not one of the manifest's deps {sorted(p.deps)} "
                                 "(or is named twice)", at, b)
            bases.append(b)
        if set(bases) != p.deps:
            raise self._fail(ordinal, f"deps {sorted(p.deps)} are not the member's bases {bases}")
        if kind == RAW and len(view) - cur.pos != p.content_size:
            raise view.error(f"raw member holds {len(view) - cur.pos} bytes, content_size says {p.content_size}",
                             cur.pos, len(view) - cur.pos)
        return kind, tuple(bases), cur.pos, view

    def _content2(self, ordinal: int, active: tuple[int, ...]) -> bytes | bytearray:
        if ordinal in self._contents:
            return self._contents[ordinal]
        if ordinal in active:
            raise self._fail(active[0], f"member [{ordinal}] is its own base (a cycle through {list(active)})",
                             ordinal)
        if len(active) > MAX_DEPTH:
            raise self._fail(active[0], f"base chain deeper than {MAX_DEPTH}", len(active))
        p = self.params(ordinal)
        if self.version(ordinal) != LAYOUT_MEMBERS:
            out = self._content1(ordinal)
        else:
            kind, bases, offset, view = self._table2(ordinal)
            payload = view.bytes_at(offset, len(view) - offset, "member payload")
            if kind == RAW:
                out = bytes(payload)
            else:
                total = sum(self.params(b).content_size for b in bases)
                if total > self._max:
                    raise view.error(f"dictionary larger than {self._max} bytes", offset, total)
                dictionary = b"".join(self._content2(b, (*active, ordinal)) for b in bases)
                data = decompress_capped(payload, p.content_size, self._max, fmt=FMT, where=view.where,
                                         offset=view.base + offset, dictionary=dictionary or None, magicless=True)
                if len(data) != p.content_size:
                    got = str(len(data)) if len(data) <= p.content_size else f"more than {p.content_size}"
                    raise view.error(f"member decodes to {got} bytes, content_size says {p.content_size}",
                                     offset, p.content_size)
                out = data  # the one budget-charged buffer decoded into (devbin.binary.budget), not a copy
            if hashlib.sha256(out).digest() != p.sha256:
                raise self._fail(ordinal, "decoded content does not match content_sha256")
        self._keep(ordinal, out)
        return out

    def _keep(self, ordinal: int, out: bytes | bytearray) -> None:
        if self._cached_contents + len(out) > _CACHE_BYTES:
            self._contents.clear()
            self._cached_contents = 0
        self._contents[ordinal] = out
        self._cached_contents += len(out)

    def _content1(self, ordinal: int) -> bytes | bytearray:
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
