"""A wheel's member names and RECORD checked as an installer checks them, before devbin rewrites one.

Layout (PEP 427, the "Binary distribution format" specification at
https://packaging.python.org/en/latest/specifications/binary-distribution-format/): a wheel is a zip
whose ``{distribution}-{version}.dist-info/RECORD`` (PEP 376; "Recording installed projects",
https://packaging.python.org/en/latest/specifications/recording-installed-packages/) is a CSV file,
one row per member: ``path,algorithm=digest,size``, the digest urlsafe base64 without ``=`` padding.
Every member but RECORD itself and its signatures ``RECORD.jws`` / ``RECORD.p7s`` has a row with a
hash and a size (RECORD's own row has neither); the hash is sha256 or stronger ("md5 and sha1 are not
permitted").

What an installer refuses, and so what :func:`verify` reports:

* **unsafe names**: pip refuses a member whose path leads outside the folder it installs into
  ("has a file ... trying to install outside the target directory"), and pypa/installer refuses
  absolute paths and ``..`` components when it writes a wheel's files; here a name is unsafe when it
  is empty, absolute (``/x``), carries a drive letter (``C:x``), a backslash (APPNOTE 4.4.17: "all
  slashes MUST be forward slashes"; Windows reads it as a separator), a NUL, or a ``..`` component;
* **duplicate names**: two members of one path (zipfile reads the last one, an extractor may write
  either; RECORD can describe only one);
* **RECORD**: not exactly one at the wheel's top (``x.dist-info/RECORD``), or not UTF-8 CSV, or a
  row that is not ``path,hash,size``;
* **rows**: a member without a row, a row naming no member, a hash of an algorithm that is not
  allowed, a hash or a size that does not match the member's bytes (pypa/installer's
  ``WheelFile.validate_record`` makes the same checks).

Unsafe and duplicate names, a wheel without exactly one RECORD and a member that cannot be read are
:attr:`Problem.fatal`: no rewrite of such a wheel is faithful.  The others say RECORD does not
describe the members; a caller that is told to go on (``prune --force``) writes a RECORD of the
members as they are.  Members are hashed as they are read, :data:`~devbin.formats.zipmember.CHUNK` at
a time (:func:`devbin.formats.zipmember.pieces`): a wheel of any size costs a piece of memory, and
:attr:`Verified.digests` keeps every member's sha256 row for the RECORD a rewrite writes.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devbin.errors import quote, short
from devbin.formats import zipmember

if TYPE_CHECKING:
    import zipfile

__all__ = ["MAX_RECORD_SIZE", "SIGNATURES", "Problem", "Verified", "encode_digest", "record_hash", "unsafe_name",
           "verify"]

#: RECORD's signatures (PEP 427), which have no row of their own.
SIGNATURES = ("RECORD.jws", "RECORD.p7s")
#: A RECORD larger than this is not read (a row is some 100 bytes: a million members).
MAX_RECORD_SIZE = 128 << 20
#: Hash algorithms the specification forbids in RECORD.
_WEAK = ("md5", "sha1")


def encode_digest(digest: bytes) -> str:
    """A digest as RECORD holds it: urlsafe base64 without ``=`` padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def record_hash(data: bytes | bytearray | memoryview) -> str:
    """``sha256=`` and the encoded digest of ``data``, as a RECORD row holds it."""
    return "sha256=" + encode_digest(hashlib.sha256(data).digest())


def unsafe_name(name: str) -> str:
    """Why an installer would refuse the member name ``name`` (module docstring), or ``""``."""
    if not name:
        return "an empty name"
    if "\x00" in name:
        return "a NUL in the name"
    if "\\" in name:
        return "a backslash in the name (zip names use '/'; Windows reads it as a separator)"
    if name.startswith("/"):
        return "an absolute path"
    if len(name) >= 2 and name[1] == ":" and name[0].isascii() and name[0].isalpha():
        return "a drive letter"
    if ".." in name.split("/"):
        return "a '..' component (it leads out of the folder the wheel installs into)"
    return ""


@dataclass(frozen=True)
class Problem:
    """One check a wheel fails: the member (or RECORD row) it is about, what is wrong, and whether no
    rewrite can go on past it."""

    member: str
    message: str
    fatal: bool

    def line(self, where: str) -> str:
        """``where!member: message`` (``where: message`` for the wheel as a whole)."""
        return f"{where}!{short(self.member)}: {self.message}" if self.member else f"{where}: {self.message}"


@dataclass
class Verified:
    """What :func:`verify` found: RECORD's name, each member's ``(sha256 row hash, size)`` as the member
    holds it, and the problems (none: RECORD describes every member)."""

    record: str = ""
    digests: dict[str, tuple[str, int]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    @property
    def fatal(self) -> list[Problem]:
        return [p for p in self.problems if p.fatal]


def verify(zf: zipfile.ZipFile, where: str = "") -> Verified:
    """Check the wheel ``zf``'s names and RECORD (module docstring); its members are read in pieces.
    Returns early, without hashing, when a fatal problem of the names or RECORD's count is found."""
    out = Verified()
    infos = zf.infolist()
    seen: dict[str, int] = {}
    for info in infos:
        why = unsafe_name(info.filename)
        if why:
            out.problems.append(Problem(info.filename, f"unsafe member name: {why}", True))
        if not zipmember.is_folder(info):
            seen[info.filename] = seen.get(info.filename, 0) + 1
    for name, n in seen.items():
        if n > 1:
            out.problems.append(Problem(name, f"duplicate member name: {n} members of this path", True))
    records = [n for n in seen if n.endswith(".dist-info/RECORD") and n.count("/") == 1]
    if len(records) != 1:
        out.problems.append(Problem("", f"a wheel holds one top-level *.dist-info/RECORD; this one holds "
                                        f"{len(records)}", True))
    if out.problems:
        return out
    out.record = record = records[0]
    rows = _rows(zf, zf.getinfo(record), out.problems)
    folder = record.rsplit("/", 1)[0] + "/"
    for info in infos:
        name = info.filename
        if zipmember.is_folder(info) or name == record:
            continue
        row = rows.pop(name, None)
        signature = name.startswith(folder) and name[len(folder):] in SIGNATURES
        if row is None and not signature:
            out.problems.append(Problem(name, "no row in RECORD", False))
        algorithm = row[0].partition("=")[0] if row is not None and row[0] else ""
        bad_algorithm = _bad_algorithm(algorithm) if row is not None and not signature else ""
        if bad_algorithm:
            out.problems.append(Problem(name, f"RECORD's hash {quote(row[0] if row else '', 60)}: {bad_algorithm}",
                                        False))
        ours = hashlib.sha256()
        theirs = hashlib.new(algorithm) if algorithm and not bad_algorithm and algorithm != "sha256" else None
        size = 0
        try:
            for piece in zipmember.pieces(zf, info):
                ours.update(piece)
                if theirs is not None:
                    theirs.update(piece)
                size += len(piece)
        except Exception as e:  # zipfile/zlib/bz2/lzma errors, encryption
            out.problems.append(Problem(name, f"cannot read the member: {type(e).__name__}: {e}", True))
            continue
        mine = "sha256=" + encode_digest(ours.digest())
        out.digests[name] = (mine, size)
        if row is None:
            continue
        if algorithm and not bad_algorithm:
            got = mine if theirs is None else f"{algorithm}={encode_digest(theirs.digest())}"
            if row[0] != got:
                out.problems.append(Problem(name, f"RECORD says {quote(row[0], 80)} but the member hashes to {got}",
                                            False))
        if row[1] != str(size) and not (signature and not row[1]):
            out.problems.append(Problem(name, f"RECORD says size {quote(row[1], 30)} but the member holds {size} "
                                              "bytes", False))
    for name in rows:
        out.problems.append(Problem(name, "RECORD has a row for it but the wheel has no such member", False))
    return out


def _bad_algorithm(algorithm: str) -> str:
    """Why a RECORD row's hash algorithm is refused, or ``""``."""
    if not algorithm:
        return "no hash"
    if algorithm in _WEAK:
        return f"{algorithm} is not permitted (the specification asks for sha256 or stronger)"
    if algorithm not in hashlib.algorithms_guaranteed or algorithm.startswith("shake_"):
        return "not a hash algorithm Python's hashlib guarantees"
    return ""


def _rows(zf: zipfile.ZipFile, info: zipfile.ZipInfo, problems: list[Problem]) -> dict[str, tuple[str, str]]:
    """RECORD's rows but its own: path -> (hash, size); what is wrong with it goes to ``problems``."""
    name = info.filename
    if info.file_size > MAX_RECORD_SIZE:
        problems.append(Problem(name, f"RECORD of {info.file_size} bytes is larger than {MAX_RECORD_SIZE}; not read",
                                False))
        return {}
    try:
        data = b"".join(zipmember.pieces(zf, info))
    except Exception as e:  # zipfile/zlib/bz2/lzma errors, encryption
        problems.append(Problem(name, f"cannot read the member: {type(e).__name__}: {e}", True))
        return {}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        problems.append(Problem(name, f"RECORD is not UTF-8 text (byte {data[e.start]:#04x} at {e.start})", False))
        return {}
    rows: dict[str, tuple[str, str]] = {}
    try:
        for line, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):  # quoted fields may hold newlines
            if not row:
                continue
            if len(row) != 3:
                problems.append(Problem(name, f"RECORD row {line} has {len(row)} fields, not path,hash,size", False))
                continue
            path, digest, size = row
            if path == name:
                continue
            if path in rows:
                problems.append(Problem(path, f"RECORD has two rows for it (row {line})", False))
            rows[path] = (digest, size)
    except csv.Error as e:
        problems.append(Problem(name, f"RECORD is not CSV: {e}", False))
    return rows
