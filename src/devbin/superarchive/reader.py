"""Read view of a super-archive over any buffer: bytes, bytearray, memoryview, mmap, or a host ELF.

``SuperArchive(buf)`` parses the ar member headers (no member data is read), decodes the
manifest (the first file member) and checks it against the archive:

* always, at open (cost: one pass over the member headers): the archive has exactly
  1 + N file members, and member ``i`` has the name and size record ``i`` gives;
* the SHA-256 of every member: at open with ``verify="full"`` (the default; it reads every
  member once, about 1-2 GB/s), or with ``verify="lazy"`` on the first
  :meth:`SuperArchive.member_data` of each member (a runtime that loads one target from a
  large library then hashes only that target's members).

Any mismatch raises :class:`StaleManifest`: the archive was changed after it was built
(``ar r`` replaced a member, ``ar d`` removed one, ``ar m`` moved one) and its per-target
tables cannot be trusted.  ``ranlib``/``ar s`` only rewrite the ``/`` index and move offsets;
ordinals and hashes still match, so such a file opens (:meth:`index_status` then says the
index is no longer the index target's).

Member data is never copied: :meth:`member_data` returns a ``memoryview`` over the caller's
buffer (for an mmap, keep the map open while views are alive).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from devbin.binary import Buffer, ByteView
from devbin.errors import FormatError, NotThisFormat, UnsupportedVersion, UsageError, quote
from devbin.formats.ar import ArchiveFile, Member
from devbin.superarchive.build import InputMember, TargetInput
from devbin.superarchive.chains import effective_chain
from devbin.superarchive.embed import find_embedded
from devbin.superarchive.manifest import (
    FMT,
    MANIFEST_NAME,
    Manifest,
    MemberRecord,
    StaleManifest,
    TargetMember,
    TargetRecord,
    decode_manifest,
)
from devbin.superarchive.packed import KIND as PACKED
from devbin.superarchive.packed import PackedReader, content_size_of
from devbin.superarchive.resolve import Resolution, RootObject, resolve

__all__ = ["SuperArchive", "SuperSymbol", "is_superarchive"]

Verify = Literal["full", "lazy"]


@dataclass(frozen=True)
class SuperSymbol:
    """One entry of a target's symbol table: the symbol, the member's ordinal and its name in the target."""

    name: str
    ordinal: int
    member: str


def is_superarchive(buf: Buffer | ByteView) -> bool:
    """True when ``buf`` is an ar archive whose first file member is a super-archive manifest (cheap)."""
    try:
        SuperArchive(buf, verify="lazy")
    except FormatError:
        return False
    return True


class SuperArchive:
    """A validated, read-only super-archive (see the module docstring)."""

    def __init__(self, buf: Buffer | ByteView, *, where: str = "", verify: Verify = "full") -> None:
        view = buf if isinstance(buf, ByteView) else ByteView(buf, fmt=FMT, where=where)
        self.embedded = view.startswith(b"\x7fELF")
        if self.embedded:
            view = find_embedded(view, where=where)
        self.where = where
        self.archive = ArchiveFile(view, where=where)
        if self.archive.thin:
            raise view.error("a thin archive cannot be a super-archive (its members are outside it)", 0)
        self.files: tuple[Member, ...] = self.archive.files
        self._check_manifest_position()
        self.manifest: Manifest = decode_manifest(self.files[0].view, where=self.archive.member_where(self.files[0]))
        self._records = self.manifest.members
        self._check_structure()
        self._hashed: set[int] = set()
        self._packed: PackedReader | None = None
        if verify == "full":
            self.verify()

    # -- checks ---------------------------------------------------------------------------
    def _stale(self, message: str, member: Member | None = None) -> StaleManifest:
        where = self.archive.member_where(member) if member is not None else (self.where or "<archive>")
        return StaleManifest(f"stale manifest: {message}; the archive was changed after it was built "
                             "(rebuild it with devbin ar create)", fmt=FMT, where=where,
                             offset=None if member is None else member.header_offset)

    def _check_manifest_position(self) -> None:
        for i, m in enumerate(self.files):
            if m.name == MANIFEST_NAME:
                if i:
                    raise self._stale(f"the manifest is member [{i}], not the first member", m)
                return
        raise self.archive.view.error(f"not a super-archive: no {MANIFEST_NAME!r} member", 0, cls=NotThisFormat)

    def _check_structure(self) -> None:
        if len(self.files) != 1 + len(self._records):
            raise self._stale(f"the archive has {len(self.files) - 1} members after the manifest, "
                              f"the manifest lists {len(self._records)}")
        for r in self._records:
            m = self.files[r.ordinal]
            if m.name != r.name:
                raise self._stale(f"member [{r.ordinal}] is named {quote(m.name)}, the manifest expects "
                                  f"{quote(r.name)}", m)
            if m.size != r.size:
                raise self._stale(f"member [{r.ordinal}] has {m.size} bytes, the manifest expects {r.size}", m)

    def _check_hash(self, record: MemberRecord) -> None:
        if record.ordinal in self._hashed:
            return
        m = self.files[record.ordinal]
        digest = hashlib.sha256(m.data).digest()
        if digest != record.sha256:
            raise self._stale(f"member [{record.ordinal}] has sha256 {digest.hex()[:16]}..., the manifest expects "
                              f"{record.sha256.hex()[:16]}...", m)
        self._hashed.add(record.ordinal)

    def verify(self) -> None:
        """Hash every member now (what ``verify="full"`` does at open)."""
        for r in self._records:
            self._check_hash(r)

    # -- queries ---------------------------------------------------------------------------
    def targets(self) -> tuple[str, ...]:
        """The target names, in manifest order."""
        return tuple(t.name for t in self.manifest.targets)

    def target(self, name: str) -> TargetRecord:
        return self.manifest.target(name)

    @property
    def index_target(self) -> str | None:
        """The target whose symbols the ``/`` index was written with (None: no index written)."""
        return self.manifest.index_target

    def declared_chain(self, target: str) -> tuple[str, ...]:
        """The fallback chain stored for ``target`` as declared at build time (may be empty)."""
        return self.target(target).chain

    def chain(self, target: str) -> tuple[str, ...]:
        """The levels searched for ``target``, itself first: the declared chain, or the default one
        derived from the vendors' rules (:mod:`devbin.superarchive.chains`)."""
        return effective_chain(target, self.target(target).chain, self.targets())

    def lookup(self, target: str, symbol: str) -> tuple[str, SuperSymbol] | None:
        """The first definition of ``symbol`` through ``target``'s chain: (level, symbol entry), or None.

        This is the static answer (rule 1 of :mod:`devbin.superarchive.resolve`); what a link
        pulls in also depends on the other members pulled, which :meth:`resolve` computes.
        """
        for level in self.chain(target):
            t = self.target(level)
            for s, pos in t.symbols:
                if s == symbol:
                    tm = t.members[pos]
                    return level, SuperSymbol(s, tm.ordinal, tm.name)
        return None

    def resolve(self, target: str, symbols: Sequence[str] = (), objects: Sequence[RootObject] = ()) -> Resolution:
        """Layered resolution of ``symbols`` and ``objects``' references through ``target``'s chain."""
        return resolve(self, target, list(symbols), list(objects))

    def members(self, target: str) -> tuple[TargetMember, ...]:
        """The members of ``target`` in its input order: ordinal and the name it had in that target."""
        return self.target(target).members

    def records(self) -> tuple[MemberRecord, ...]:
        """Every unique member's record, in ordinal order (1..N)."""
        return self._records

    def record(self, ordinal: int) -> MemberRecord:
        if not 1 <= ordinal <= len(self._records):
            raise UsageError(f"no member with ordinal {ordinal} (1..{len(self._records)})", fmt=FMT,
                             where=self.where, value=ordinal)
        return self._records[ordinal - 1]

    def symbols(self, target: str) -> tuple[SuperSymbol, ...]:
        """``target``'s symbol table, in its order."""
        t = self.target(target)
        return tuple(SuperSymbol(s, t.members[pos].ordinal, t.members[pos].name) for s, pos in t.symbols)

    def sharing(self) -> dict[int, tuple[str, ...]]:
        """For each ordinal, the targets that use it (in target order)."""
        out: dict[int, list[str]] = {r.ordinal: [] for r in self._records}
        for t in self.manifest.targets:
            for tm in t.members:
                if t.name not in out[tm.ordinal]:
                    out[tm.ordinal].append(t.name)
        return {k: tuple(v) for k, v in out.items()}

    def stored_data(self, ordinal: int) -> memoryview:
        """The ar member's bytes as stored (no storage decoding, no hash check)."""
        return self.files[self.record(ordinal).ordinal].data

    def member_data(self, ordinal: int) -> memoryview:
        """A member's content: the one way to read member data.

        Checks the hash (once per member) and decodes its storage kind.  For ``plain`` the
        result is a zero-copy window over the buffer the archive was opened on; ``packed``
        members are decoded (their own frames plus the base frames they name) into new bytes.
        """
        record = self.record(ordinal)
        self._check_hash(record)
        stored = self.files[ordinal].data
        kind = record.storage.kind
        if kind == "plain":
            return stored
        if kind == PACKED:
            if self._packed is None:
                self._packed = PackedReader(self._records, self._stored_view)
            return memoryview(self._packed.content(ordinal)).toreadonly()  # the reader's cache stays whole
        raise UnsupportedVersion(f"member [{ordinal}] {quote(record.name)}: storage kind {kind!r} is not supported "
                                 "by this devbin", fmt=FMT, where=self.archive.member_where(self.files[ordinal]))

    def _stored_view(self, ordinal: int) -> ByteView:
        record = self.record(ordinal)
        self._check_hash(record)
        m = self.files[ordinal]
        return ByteView(m.data, fmt=FMT, where=self.archive.member_where(m), base=m.view.base)

    def index_status(self) -> str:
        """``"target"``: the ``/`` index lists exactly the index target's symbols; ``"absent"``: no index;
        ``"other"``: an index rewritten since (``ranlib`` indexes every object, not one target's)."""
        entries = self.archive.symbols
        if not entries:
            return "absent"
        ordinal_of = {m.header_offset: i for i, m in enumerate(self.files)}
        have = {(s.name, ordinal_of.get(s.header_offset, -1)) for s in entries}
        want: set[tuple[str, int]] = set()
        if self.index_target is not None:
            want = {(s.name, s.ordinal) for s in self.symbols(self.index_target)}
        return "target" if have == want else "other"

    # -- sizes --------------------------------------------------------------------------------
    @property
    def input_bytes(self) -> int:
        """Member content bytes summed over every target: what N separate archives would hold."""
        return sum(content_size_of(self._records[tm.ordinal - 1]) for t in self.manifest.targets for tm in t.members)

    @property
    def stored_bytes(self) -> int:
        """Bytes of the unique members as the archive holds them (packed: compressed)."""
        return sum(r.size for r in self._records)

    # -- conversion to the editable model ----------------------------------------------------------
    def to_targets(self) -> list[TargetInput]:
        """The editable model (member bytes copied): rebuild with :func:`devbin.superarchive.create`."""
        out: list[TargetInput] = []
        for t in self.manifest.targets:
            syms: dict[int, list[str]] = {}
            for s, pos in t.symbols:
                syms.setdefault(pos, []).append(s)
            members = tuple(InputMember(tm.name, bytes(self.member_data(tm.ordinal)), tuple(syms.get(pos, ())))
                            for pos, tm in enumerate(t.members))
            out.append(TargetInput(t.name, members, t.chain, dict(t.extra)))
        return out
