"""The super-archive: one GNU ar archive holding N per-target libraries, each unique member once.

Format: docs/FORMAT.md §16.  Python API::

    import devbin.superarchive as sa
    data = sa.create([sa.TargetInput("gfx90a", sa.members_from_archive(lib90a)), ...])
    lib = sa.open(data)                 # bytes, memoryview, mmap, or a host ELF that embeds one
    lib.targets(); lib.symbols("gfx90a"); lib.member_data(1)   # zero-copy memoryview

Modules: :mod:`.manifest` (codec), :mod:`.build` (model and plan), :mod:`.writer` (emit),
:mod:`.reader` (view), :mod:`.embed` (host ELF section).
"""

from __future__ import annotations

from devbin.binary import Buffer, ByteView
from devbin.superarchive.build import (
    InputMember,
    SuperPlan,
    TargetInput,
    member_from_object,
    members_from_archive,
    plan_superarchive,
)
from devbin.superarchive.embed import SECTION, embed, find_embedded
from devbin.superarchive.manifest import (
    MANIFEST_NAME,
    Manifest,
    MemberRecord,
    StaleManifest,
    Storage,
    TargetMember,
    TargetRecord,
    decode_manifest,
    encode_manifest,
)
from devbin.superarchive.reader import SuperArchive, SuperSymbol, Verify, is_superarchive
from devbin.superarchive.writer import create, write_superarchive

__all__ = [
    "MANIFEST_NAME",
    "SECTION",
    "InputMember",
    "Manifest",
    "MemberRecord",
    "StaleManifest",
    "Storage",
    "SuperArchive",
    "SuperPlan",
    "SuperSymbol",
    "TargetInput",
    "TargetMember",
    "TargetRecord",
    "create",
    "decode_manifest",
    "embed",
    "encode_manifest",
    "find_embedded",
    "is_superarchive",
    "member_from_object",
    "members_from_archive",
    "open",
    "plan_superarchive",
    "write_superarchive",
]


def open(buf: Buffer | ByteView, *, where: str = "", verify: Verify = "full") -> SuperArchive:
    """Open a super-archive from bytes, a memoryview or an mmap (or a host ELF embedding one); no member is copied."""
    return SuperArchive(buf, where=where, verify=verify)
