"""Fuzz target: the super-archive reader and manifest codec over any bytes.

Contract under test: for any bytes, :func:`devbin.superarchive.open` and
:func:`devbin.superarchive.decode_manifest` either succeed or raise
:class:`devbin.errors.DeviceBinaryError`.  Everything is consumed: targets, members,
symbols, chains, sharing, member data, the ``/`` index check, layered resolution through
every target's chain (which parses pulled members as ELF) and the per-target views.

Each input is read (a) as it is, (b) as a manifest, (c) as the body of a manifest with
a valid header and checksum, stored as the first member of a well-formed archive, so that
mutated bytes reach the MessagePack schema checks and the archive-versus-manifest checks,
and (d) spliced into a member of a *packed* archive (docs/FORMAT.md §16.6, layouts 2 and 1) whose manifest
record is fixed up (size, SHA-256), so that mutated bytes reach the frame-table parser, the
reference checks, the capped zstd decoder and the delta bases.

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_superarchive.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib

from devbin.errors import DeviceBinaryError
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.superarchive import MANIFEST_NAME, InputMember, TargetInput, create, decode_manifest, encode_manifest
from devbin.superarchive import open as sa_open
from devbin.superarchive.manifest import manifest_map
from devbin.superarchive.views import level_archives, single_archive

_BASE = create([
    TargetInput("gfx90a", (InputMember("k.o", b"kernel-a", ("f", "g")), InputMember("n.bc", b"neutral", ()))),
    TargetInput("gfx942:xnack+", (InputMember("k.o", b"kernel-b", ("f",)), InputMember("n.bc", b"neutral", ())),
                ("gfx90a",)),
], index=False)
_BODY = manifest_map(sa_open(_BASE).files[0].data.tobytes())  # the MessagePack map, spliced into v1 manifests
_KERNEL = bytes(range(64)) * 6
_PACKED_TARGETS = [
    TargetInput(f"t{i}", (InputMember("k.o", _KERNEL[i:] + _KERNEL[:i] + bytes([i]) * 9),
                          InputMember("n.bc", b"neutral" * 20)))
    for i in range(3)
]
_PACKED = create(_PACKED_TARGETS, storage="packed")  # layout 2: whole members against sibling members
_PACKED_SECTIONS = create(_PACKED_TARGETS, storage="packed", layout=1)  # layout 1: per-section frames


def _read(data: bytes) -> None:
    try:
        lib = sa_open(data, verify="lazy")
        for t in lib.targets():
            lib.chain(t)
            lib.members(t)
            lib.symbols(t)
        lib.sharing()
        lib.index_status()
        _ = (lib.input_bytes, lib.stored_bytes)
        for r in lib.records():
            bytes(lib.member_data(r.ordinal))
        for t in lib.targets():
            wanted = [s.name for s in lib.symbols(t)[:3]] or ["f"]
            res = lib.resolve(t, wanted)
            for s in wanted:
                res.explain(s)
            lib.lookup(t, wanted[0])
            level_archives(lib, t)
            single_archive(lib, t)
    except DeviceBinaryError:
        pass


def _manifest(data: bytes) -> None:
    with contextlib.suppress(DeviceBinaryError):
        decode_manifest(data)


def _spliced(data: bytes) -> bytes:
    """The valid manifest body with ``data`` written over it at an offset taken from ``data``."""
    if not data:
        return _BODY
    at = data[0] % len(_BODY)
    return _BODY[:at] + data[1:] + _BODY[at + len(data) - 1:]


def _wrapped(body: bytes) -> bytes:
    head = b"DEVBINSA" + (1).to_bytes(2, "little") + bytes(2) + len(body).to_bytes(4, "little")
    manifest = head + hashlib.sha256(body).digest() + body
    members = [ArMember(m.name, bytes(m.data), ()) for m in sa_open(_BASE).files[1:]]
    return write_archive([ArMember(MANIFEST_NAME, manifest, ()), *members])


def _packed_spliced(data: bytes, packed: bytes = _PACKED) -> bytes:
    """The packed archive with ``data`` written into one member's stored bytes (record fixed up)."""
    lib = sa_open(packed, verify="lazy")
    stored = [m.data.tobytes() for m in lib.files[1:]]
    o = 1 + (data[0] if data else 0) % len(stored)
    at = (data[1] if len(data) > 1 else 0) % (len(stored[o - 1]) + 1)
    blob = stored[o - 1][:at] + data[2:] + stored[o - 1][at + max(0, len(data) - 2):]
    stored[o - 1] = blob
    records = list(lib.manifest.members)
    records[o - 1] = dataclasses.replace(records[o - 1], size=len(blob), sha256=hashlib.sha256(blob).digest())
    manifest = encode_manifest(dataclasses.replace(lib.manifest, members=tuple(records)))
    return write_archive([ArMember(MANIFEST_NAME, manifest, ()),
                          *(ArMember(m.name, b, ()) for m, b in zip(lib.files[1:], stored, strict=True))])


def TestOneInput(data: bytes) -> None:  # atheris' required name
    _read(data)
    _manifest(data)
    _read(_wrapped(data))
    _read(_wrapped(_spliced(data[:16])))
    _read(_packed_spliced(data[:64]))
    _read(_packed_spliced(data[:64], _PACKED_SECTIONS))


if __name__ == "__main__":
    from fuzz.engine import fuzz

    fuzz(TestOneInput)
