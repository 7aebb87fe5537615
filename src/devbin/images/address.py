"""The address of a device image: one short string naming the path through nested containers.

Grammar (docs/IMAGES.md has examples)::

    address  = text *step
    step     = "!" text [";" count]       ; a member: zip/wheel member or ar member
             / "@" text                   ; a section of the ELF file reached so far
             / "#" count "." count        ; entry E of container C: the C-th fatbin,
                                          ;   OffloadBinary or bundle
                                          ;   back to back in that file or section
    count    = "0" / %x31-39 *DIGIT       ; decimal, no leading zeros
    text     = 1*( unreserved / escaped )
    escaped  = "%" HEXDIG HEXDIG          ; one character below U+0100
    reserved = "!" / "@" / "#" / "%" / ";" / %x00-1F / %x7F

``text`` is any character except the reserved ones, which are written ``%XX`` (their code
point in two upper-case hex digits).  A member's ``;N`` (N >= 2) says which of several
members of the same name in one archive it is, counting from 1 as ``ar xN`` counts; the
first of a name has none.  Steps repeat for nesting::

    k.cubin
    k.fatbin#0.2
    libk.a!k.o@__nv_relfatbin#0.1
    torch.whl!torch/lib/libtorch_cuda.so@.nv_fatbin#12.3
    pkg.offload#0.1#0.0                  (a fatbin stored in an OffloadBinary entry, opened)
    k.o@__CLANG_OFFLOAD_BUNDLE__hip-amdgcn-amd-amdhsa--gfx90a

``str(a)`` writes an address and :meth:`Address.parse` reads it back
(``Address.parse(str(a)) == a`` for every address); the same scan gives the same addresses
run after run, since every step counts or names things in file order.
"""

from __future__ import annotations

from dataclasses import dataclass

from devbin.errors import UsageError

__all__ = ["Address", "Entry", "Member", "SectionStep", "Step", "escape", "unescape"]

_RESERVED = frozenset("!@#%;") | frozenset(chr(c) for c in (*range(0x20), 0x7F))
_HEX = frozenset("0123456789abcdefABCDEF")


def escape(text: str) -> str:
    """``text`` with every reserved character written ``%XX``."""
    if _RESERVED.isdisjoint(text):  # the usual case, checked in C: every image's address is printed
        return text
    return "".join(f"%{ord(c):02X}" if c in _RESERVED else c for c in text)


def unescape(text: str, where: str = "") -> str:
    """The text an escaped component stands for; UsageError for a ``%`` not followed by two hex digits."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "%":
            hx = text[i + 1:i + 3]
            if len(hx) != 2 or not set(hx) <= _HEX:
                raise UsageError(f"bad image address {where or text!r}: '%' must be followed by two hex digits")
            out.append(chr(int(hx, 16)))
            i += 3
            continue
        if c in _RESERVED:
            raise UsageError(f"bad image address {where or text!r}: {c!r} must be written %{ord(c):02X}")
        out.append(c)
        i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Member:
    """A member of a zip/wheel or ``ar`` archive; ``occurrence`` counts members of the same name from 1."""

    name: str
    occurrence: int = 1

    def __str__(self) -> str:
        return "!" + escape(self.name) + (f";{self.occurrence}" if self.occurrence != 1 else "")


@dataclass(frozen=True, slots=True)
class SectionStep:
    """A section of the ELF file the address has reached."""

    name: str

    def __str__(self) -> str:
        return "@" + escape(self.name)


@dataclass(frozen=True, slots=True)
class Entry:
    """Entry ``entry`` of the ``container``-th container (fatbin, OffloadBinary, bundle) of a file or section."""

    container: int
    entry: int

    def __str__(self) -> str:
        return f"#{self.container}.{self.entry}"


Step = Member | SectionStep | Entry


def _count(text: str, where: str) -> int:
    if not text.isascii() or not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        raise UsageError(f"bad image address {where!r}: {text!r} is not a count (0, 1, 2 ...)")
    return int(text)


def _split(text: str) -> list[str]:
    """``text`` cut before every step sign."""
    parts: list[str] = []
    start = 0
    for i, c in enumerate(text):
        if c in "!@#" and i:
            parts.append(text[start:i])
            start = i
    parts.append(text[start:])
    return parts


@dataclass(frozen=True, slots=True)
class Address:
    """Where an image is: the path of a file (as the scan was given it) and the steps inside it."""

    path: str
    steps: tuple[Step, ...] = ()

    def __str__(self) -> str:
        return escape(self.path) + "".join(str(s) for s in self.steps)

    @classmethod
    def parse(cls, text: str) -> Address:
        """The address ``str(a)`` wrote; UsageError for text that is no address."""
        if not text or text[0] in "!@#":
            raise UsageError(f"bad image address {text!r}: it must start with a file path")
        path, *rest = _split(text)
        steps: list[Step] = []
        for part in rest:
            sign, body = part[0], part[1:]
            if sign == "!":
                name, _, occ = body.partition(";")
                if not name:
                    raise UsageError(f"bad image address {text!r}: empty member name")
                n = _count(occ, text) if occ else 1
                if occ and n < 2:
                    raise UsageError(f"bad image address {text!r}: a member's ';N' counts from 2")
                steps.append(Member(unescape(name, text), n))
            elif sign == "@":
                if not body:
                    raise UsageError(f"bad image address {text!r}: empty section name")
                steps.append(SectionStep(unescape(body, text)))
            else:
                c, dot, e = body.partition(".")
                if not dot:
                    raise UsageError(f"bad image address {text!r}: '#' needs CONTAINER.ENTRY")
                steps.append(Entry(_count(c, text), _count(e, text)))
        return cls(unescape(path, text), tuple(steps))

    # -- views ---------------------------------------------------------------------
    def child(self, *steps: Step) -> Address:
        """This address with ``steps`` appended."""
        return Address(self.path, self.steps + steps)

    @property
    def file(self) -> Address:
        """The innermost file: this address up to its last member step (itself when it ends in one)."""
        last = max((i for i, s in enumerate(self.steps) if isinstance(s, Member)), default=-1)
        return Address(self.path, self.steps[:last + 1])

    @property
    def member(self) -> Member | None:
        """The last member step, or None."""
        return next((s for s in reversed(self.steps) if isinstance(s, Member)), None)

    @property
    def section(self) -> str:
        """The innermost ELF section named, or ``""``."""
        return next((s.name for s in reversed(self.steps) if isinstance(s, SectionStep)), "")

    @property
    def entry(self) -> Entry | None:
        """The last step when it is an entry, else None."""
        return self.steps[-1] if self.steps and isinstance(self.steps[-1], Entry) else None
