"""Fuzz target: the super-archive reader and manifest codec over any bytes.

Contract under test: for any bytes, :func:`devbin.superarchive.open` and
:func:`devbin.superarchive.decode_manifest` either succeed or raise
:class:`devbin.errors.DeviceBinaryError`.  Everything is consumed: targets, members,
symbols, chains, sharing, member data and the ``/`` index check.

Each input is read (a) as it is, (b) as a manifest, and (c) as the body of a manifest with
a valid header and checksum, stored as the first member of a well-formed archive, so that
mutated bytes reach the MessagePack schema checks and the archive-versus-manifest checks.

Run with atheris (coverage-guided):  PYTHONPATH=src:. python fuzz/fuzz_superarchive.py CORPUS_DIR -max_total_time=60
"""

from __future__ import annotations

import contextlib
import hashlib
import sys

from devbin.errors import DeviceBinaryError
from devbin.formats.ar.writer import ArMember, write_archive
from devbin.superarchive import MANIFEST_NAME, InputMember, TargetInput, create, decode_manifest
from devbin.superarchive import open as sa_open
from devbin.superarchive.manifest import HEADER_SIZE

_BASE = create([
    TargetInput("gfx90a", (InputMember("k.o", b"kernel-a", ("f", "g")), InputMember("n.bc", b"neutral", ()))),
    TargetInput("gfx942:xnack+", (InputMember("k.o", b"kernel-b", ("f",)), InputMember("n.bc", b"neutral", ())),
                ("gfx942", "generic")),
], index=False)
_BODY = sa_open(_BASE).files[0].data.tobytes()[HEADER_SIZE:]


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


def TestOneInput(data: bytes) -> None:  # atheris' required name
    _read(data)
    _manifest(data)
    _read(_wrapped(data))
    _read(_wrapped(_spliced(data[:16])))


def main() -> None:
    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
