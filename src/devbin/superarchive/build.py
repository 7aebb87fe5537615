"""The editable model of a super-archive and its plan: targets -> unique members -> ar members.

Nothing here writes bytes: :func:`plan_superarchive` decides the member order, the ar name of
every unique member, the manifest and the ``/`` index, and :mod:`devbin.superarchive.writer`
emits the plan through the GNU ar writer.

Rules (docs/FORMAT.md §16):

* **Dedup**: members are identical when their bytes are (SHA-256).  Unique members are
  stored in order of first use: targets in the order given, each target's members in input
  order.  The manifest is always the first file member (ordinal 0); unique members follow as
  ordinals 1..N.
* **Names**, so that ``ar x`` never overwrites one member with another: a unique member keeps
  the name it had at its first use when no other unique member first appears under that
  name.  Otherwise it becomes ``<stem>.<target><ext>`` (``ext`` from the last ``.``, the
  first target using it, characters other than ``A-Za-z0-9._+-`` replaced by ``_``); a name
  still taken after that becomes ``<stem>.<sha256[:12]><ext>``.  Input names that are not a
  plain file name (``/``, NUL, newline, ``.``/``..``, empty) are first cleaned the same way.
  The manifest's name is reserved.  Each target keeps its own original names in the manifest,
  so ``extract --target`` gives the inputs back under their own names.
* **Symbols**: for an ELF member, its defined global symbols (what ``ar s`` indexes), or what
  its vendor's descriptor says it offers to a lookup by name where that differs (Intel: a
  zebin's kernels, which IGC writes ``STB_LOCAL``; ``Vendor.offered_symbols``); for a SPIR-V
  module, its entry points; for anything else (LLVM bitcode, text), the entries an input
  archive's index gave it, if any.
* **Storage**: ``plain`` stores each unique member as it is; ``packed``
  (:mod:`devbin.superarchive.packed`) stores it as one zstd frame whose dictionary is a few
  sibling members (the same member of other targets; layout 1: per-section frames with
  sub-member dedup).  Dedup, order and names are the same for both; a packed archive
  has no ``/`` index (its members are not objects a linker could load).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from devbin.binary import Buffer, ByteView
from devbin.errors import DeviceBinaryError, UsageError, quote
from devbin.formats.ar import ArchiveFile
from devbin.formats.ar.writer import ArMember, elf_global_symbols
from devbin.formats.elf.reader import ElfFile
from devbin.formats.magic import ELF, detect
from devbin.formats.spirv import is_spirv, read_spirv
from devbin.superarchive.chains import check_chains
from devbin.superarchive.manifest import (
    FMT,
    MANIFEST_NAME,
    Manifest,
    MemberRecord,
    Storage,
    TargetMember,
    TargetRecord,
    encode_manifest,
)
from devbin.superarchive.packed import PackOptions, pack_members
from devbin.targets.registry import vendor_for_machine

__all__ = [
    "InputMember",
    "SuperPlan",
    "TargetInput",
    "check_target_name",
    "member_from_object",
    "members_from_archive",
    "plan_superarchive",
]

StorageKind = Literal["plain", "packed"]

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-")


@dataclass(frozen=True)
class InputMember:
    """One member of one target: its name in that target, its bytes and the symbols it defines."""

    name: str
    data: bytes
    symbols: tuple[str, ...] = ()


@dataclass(frozen=True)
class TargetInput:
    """One target of the model: name (a free string), fallback chain, members in order, unknown keys."""

    name: str
    members: tuple[InputMember, ...]
    chain: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SuperPlan:
    """The planned archive: ``ar_members`` (manifest first) and the manifest they carry."""

    manifest: Manifest
    ar_members: tuple[ArMember, ...]
    input_bytes: int  # member bytes summed over every target (what N separate archives hold)
    stored_bytes: int  # bytes of the unique members as stored (packed: compressed)


def _symbols_of(name: str, data: bytes) -> tuple[str, ...]:
    """A member's symbols: an ELF's, what its vendor says it offers to a lookup by name
    (:meth:`devbin.targets.vendor.Vendor.offered_symbols`), else its defined globals; a SPIR-V
    module's, its entry points (the kernels a JIT build of it has); () for anything else."""
    try:
        if is_spirv(data):
            return tuple(dict.fromkeys(e.name for e in read_spirv(data, where=name).entry_points))
        if detect(ByteView(data, fmt="elf")) == ELF:
            elf = ElfFile(data, where=name)
            vendor = vendor_for_machine(elf.header.e_machine)
            offered = vendor.offered_symbols(elf) if vendor is not None else None
            if offered is not None:
                return offered
        return elf_global_symbols(data)
    except DeviceBinaryError as e:
        raise UsageError(f"cannot read the symbols of {quote(name)}: {e}", fmt=FMT) from e


def member_from_object(name: str, data: Buffer) -> InputMember:
    """A loose input file as a member: its symbols are its defined globals when it is an ELF."""
    raw = bytes(data)
    return InputMember(name, raw, _symbols_of(name, raw))


def members_from_archive(data: Buffer | ByteView, *, where: str = "") -> tuple[InputMember, ...]:
    """The file members of a standard archive, in order, with their symbols (see the module docstring)."""
    ar = ArchiveFile(data, where=where)
    if ar.thin:
        raise UsageError("a thin archive has no member data to store; use a regular archive", fmt="ar", where=where)
    indexed: dict[int, list[str]] = {}
    for s in ar.symbols:
        indexed.setdefault(s.header_offset, []).append(s.name)
    out: list[InputMember] = []
    for m in ar.files:
        raw = bytes(m.data)
        if raw.startswith(b"\x7fELF") or is_spirv(raw):
            syms = _symbols_of(ar.member_where(m), raw)
        else:
            syms = tuple(indexed.get(m.header_offset, ()))
        out.append(InputMember(m.name, raw, syms))
    return tuple(out)


def _clean(text: str) -> str:
    return "".join(ch if ch in _SAFE else "_" for ch in text)


#: The longest target name accepted (a target names files: `ar view -o DIR` writes one archive per level).
MAX_TARGET_NAME = 200


def check_target_name(name: object) -> None:
    """Refuse a target name that is not a plain word: empty, longer than :data:`MAX_TARGET_NAME`,
    holding ``/`` or ``\\``, ``..``, NUL, a newline or any other control character (UsageError).

    Target names are free strings (``gfx90a:xnack+``, ``sm_90a``, ``generic``), but tools put
    them in file names and messages, so what would escape a folder or break a line is refused.
    """
    if not isinstance(name, str) or not name:
        raise UsageError("a target name is empty", fmt=FMT)
    bad = next((c for c in name if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0), None)
    why = ("is longer than " + str(MAX_TARGET_NAME) + " characters" if len(name) > MAX_TARGET_NAME
           else f"holds the control character {bad!r}" if bad is not None
           else "holds '/' or '\\'" if "/" in name or "\\" in name
           else "holds '..'" if ".." in name else "")
    if why:
        raise UsageError(f"target name {quote(name)} {why}; a target name is one plain word (gfx90a:xnack+, "
                         "sm_90a)", fmt=FMT)


def _plain_name(name: str) -> str:
    if name in ("", ".", "..") or any(ch in name for ch in "/\n\0\\"):
        cleaned = _clean(name).strip(".")
        return cleaned or "member"
    return name


def _split(name: str) -> tuple[str, str]:
    dot = name.rfind(".")
    return (name[:dot], name[dot:]) if dot > 0 else (name, "")


def assign_names(uniques: Sequence[tuple[bytes, str, str]]) -> list[str]:
    """The ar name of each unique member, given (sha256, first name, first target); see the module docstring."""
    first = [_plain_name(n) for _, n, _ in uniques]
    count: dict[str, int] = {}
    for n in first:
        count[n] = count.get(n, 0) + 1
    names: list[str | None] = [n if count[n] == 1 and n != MANIFEST_NAME else None for n in first]
    taken = {n for n in names if n is not None} | {MANIFEST_NAME}
    second: list[str] = []
    for i, (_, _, target) in enumerate(uniques):
        stem, ext = _split(first[i])
        second.append(f"{stem}.{_clean(target)}{ext}")
    count2: dict[str, int] = {}
    for i, n in enumerate(second):
        if names[i] is None:
            count2[n] = count2.get(n, 0) + 1
    for i, n in enumerate(second):
        if names[i] is None and count2[n] == 1 and n not in taken:
            names[i] = n
            taken.add(n)
    for i, (sha, _, _) in enumerate(uniques):
        if names[i] is None:
            stem, ext = _split(first[i])
            n = f"{stem}.{sha.hex()[:12]}{ext}"
            if n in taken:
                raise UsageError(f"cannot give member {first[i]!r} a unique name (tried {n!r})", fmt=FMT)
            names[i] = n
            taken.add(n)
    return [n for n in names if n is not None]


def _index_name(targets: Sequence[TargetInput], index: str | bool | None, storage: str) -> str | None:
    if storage == "packed":
        if index is None or index is False:
            return None
        raise UsageError("a packed super-archive has no '/' index (its members are compressed, not objects a "
                         "linker can load); pass index=False, or use plain storage", fmt=FMT)
    if index is None:
        index = True
    if index is False:
        return None
    if index is True:
        return targets[0].name if targets else None
    if not any(t.name == index for t in targets):
        raise UsageError(f"index target {index!r} is not one of the targets", fmt=FMT)
    return index


def plan_superarchive(
    targets: Sequence[TargetInput],
    *,
    index: str | bool | None = None,
    extra: Mapping[str, Any] | None = None,
    member_extra: Mapping[bytes, Mapping[str, Any]] | None = None,
    storage: StorageKind = "plain",
    pack: PackOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SuperPlan:
    """Plan a super-archive of ``targets``.

    ``index``: True (the default for plain storage) puts the first target's symbols in the
    ``/`` index, a name picks that target, False writes no index; packed storage writes no
    index and refuses True or a name.  ``extra`` (top level) and ``member_extra`` (by SHA-256
    of the content) carry unknown manifest keys over from an archive being rewritten.
    ``storage``: ``"plain"`` or ``"packed"``; ``pack``: the packed writer's knobs.
    """
    if storage not in ("plain", "packed"):
        raise UsageError(f"unknown storage {storage!r} (plain or packed)", fmt=FMT)
    seen: set[str] = set()
    for t in targets:
        check_target_name(t.name)
        if t.name in seen:
            raise UsageError(f"target name {quote(t.name)} is given twice", fmt=FMT)
        seen.add(t.name)
    check_chains([(t.name, t.chain) for t in targets])
    index_target = _index_name(targets, index, storage)
    by_hash: dict[bytes, int] = {}
    uniques: list[tuple[bytes, str, str]] = []
    datas: list[bytes] = []
    t_members: list[list[TargetMember]] = []
    input_bytes = 0
    for t in targets:
        row: list[TargetMember] = []
        for m in t.members:
            sha = hashlib.sha256(m.data).digest()
            input_bytes += len(m.data)
            if sha not in by_hash:
                by_hash[sha] = len(uniques) + 1
                uniques.append((sha, m.name, t.name))
                datas.append(m.data)
            row.append(TargetMember(by_hash[sha], m.name))
        t_members.append(row)
    names = assign_names(uniques)
    member_extra = member_extra or {}
    if storage == "packed":
        packed = pack_members([(first, d) for (_, first, _), d in zip(uniques, datas, strict=True)], pack,
                              progress)
        stored = [p.stored for p in packed]
        storages = [p.storage for p in packed]
    else:
        stored, storages = datas, [Storage("plain")] * len(datas)
    records = tuple(
        MemberRecord(i + 1, names[i], len(stored[i]), hashlib.sha256(stored[i]).digest() if storage == "packed"
                     else sha, storages[i], dict(member_extra.get(sha, {})))
        for i, (sha, _, _) in enumerate(uniques)
    )
    trecords = tuple(
        TargetRecord(
            t.name, tuple(t.chain), tuple(row),
            tuple((s, pos) for pos, m in enumerate(t.members) for s in m.symbols), dict(t.extra),
        )
        for t, row in zip(targets, t_members, strict=True)
    )
    manifest = Manifest(trecords, records, index_target, extra=dict(extra or {}))
    index_syms: dict[int, list[str]] = {}
    if index_target is not None:
        rec = manifest.target(index_target)
        for s, pos in rec.symbols:
            index_syms.setdefault(rec.members[pos].ordinal, []).append(s)
    ar_members = [ArMember(MANIFEST_NAME, encode_manifest(manifest), ())]
    ar_members += [ArMember(r.name, d, tuple(index_syms.get(r.ordinal, ())))
                   for r, d in zip(records, stored, strict=True)]
    return SuperPlan(manifest, tuple(ar_members), input_bytes, sum(len(d) for d in stored))
