"""``--budget`` rules: limits on device bytes for CI, checked against a measured build.

Rule syntax (one rule per ``--budget``; sizes take the binary units of ``--max-memory``: ``512K``,
``20M``, ``1.5G``, or plain bytes)::

    total=SIZE               device bytes of every file together (``totals.device_bytes``)
    file=SIZE                device bytes of each file (``device_bytes``: its device sections)
    file:GLOB=SIZE           ... of each file whose path matches GLOB (fnmatch: ``*libcudf*``)
    arch=SIZE                stored bytes of each architecture, over every file (``by_arch``)
    arch:ARCH=SIZE           ... of the architectures matching ARCH (``sm_90``, ``sm_1*``, ``gfx9*``)
    kernel=SIZE              size (``st_size``) of each kernel copy
    kernel:GLOB=SIZE         ... of the kernels whose mangled or demangled name matches GLOB
    function=SIZE            size of each function copy (kernels and device functions)
    function:GLOB=SIZE       ... of those whose mangled or demangled name matches GLOB

Every rule is checked; each subject over its limit is one :class:`Violation`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from devbin.binary.budget import parse_size
from devbin.errors import UsageError
from devbin.size.account import FileSize

__all__ = ["SCOPES", "Rule", "Violation", "check", "parse_rule"]

#: The scopes a rule may name.
SCOPES: Final = ("total", "file", "arch", "kernel", "function")


@dataclass(frozen=True, slots=True)
class Rule:
    text: str
    scope: str
    pattern: str  # "" (every subject) or a glob
    limit: int


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    scope: str
    subject: str  # the file, architecture or "<address>:<function>"; "total" for total
    bytes: int
    limit: int
    arch: str = ""  # a function's architecture ("" for total and file; the subject itself for arch)

    def label(self) -> str:
        """The subject as the text report names it: a function copy with its architecture (the address
        alone, ``lib.so@.nv_fatbin#1.1:heavy``, does not say which of the fatbin's cubins it is)."""
        return f"{self.subject} ({self.arch})" if self.arch and self.arch != self.subject else self.subject

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "scope": self.scope, "subject": self.subject, "arch": self.arch,
                "bytes": self.bytes, "limit": self.limit, "over": self.bytes - self.limit}


def parse_rule(text: str) -> Rule:
    """``arch:sm_90=10M`` -> ``Rule("arch", "sm_90", 10485760)``; UsageError for anything else."""
    lhs, eq, size = text.partition("=")
    if not eq:
        raise UsageError(f"budget rule {text!r}: expected SCOPE[:PATTERN]=SIZE (scopes: {', '.join(SCOPES)})")
    scope, _, pattern = lhs.strip().partition(":")
    if scope not in SCOPES:
        raise UsageError(f"budget rule {text!r}: unknown scope {scope!r} (scopes: {', '.join(SCOPES)})")
    if scope == "total" and pattern:
        raise UsageError(f"budget rule {text!r}: total takes no pattern")
    try:
        limit = parse_size(size.strip())
    except UsageError as e:
        raise UsageError(f"budget rule {text!r}: {e.message}") from None
    return Rule(text, scope, pattern, limit)


def _match(pattern: str, *names: str) -> bool:
    return not pattern or any(fnmatch.fnmatchcase(n, pattern) for n in names)


def check(rules: Sequence[Rule], files: Sequence[FileSize]) -> list[Violation]:
    """Every subject over its rule's limit, rule by rule, largest first within a rule."""
    out: list[Violation] = []
    for r in rules:
        found: list[Violation] = []
        if r.scope == "total":
            total = sum(f.device_bytes for f in files)
            if total > r.limit:
                found.append(Violation(r.text, r.scope, "total", total, r.limit))
        elif r.scope == "file":
            found += [Violation(r.text, r.scope, f.path, f.device_bytes, r.limit) for f in files
                      if f.device_bytes > r.limit and _match(r.pattern, f.path)]
        elif r.scope == "arch":
            per: dict[str, int] = {}
            for f in files:
                for i in f.images:
                    per[i.image.arch] = per.get(i.image.arch, 0) + i.stored
            found += [Violation(r.text, r.scope, a, n, r.limit, a) for a, n in per.items()
                      if n > r.limit and _match(r.pattern, a)]
        else:
            for f in files:
                for i in f.images:
                    for fn in i.functions:
                        if (fn.size > r.limit and (r.scope == "function" or fn.kind == "kernel")
                                and _match(r.pattern, fn.name, fn.demangled)):
                            found.append(Violation(r.text, r.scope, f"{i.address}:{fn.name}", fn.size, r.limit,
                                                   i.image.arch))
        found.sort(key=lambda v: (-v.bytes, v.subject))
        out += found
    return out
