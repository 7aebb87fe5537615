"""Run NVIDIA's ``nvlink`` on cubins devbin kept, and read back what nvlink decided.

:func:`run_nvlink` is the machine-level step of ``devbin link`` for NVIDIA: it feeds
nvlink exactly the (already pruned, :mod:`devbin.targets.nvidia.link_prune`) relocatable cubins it is
given.  :func:`nvlink_kept` and :func:`nvlink_facts` are oracles for tests: which
functions nvlink keeps (its ``-kernels-used``), and the per-kernel registers, stack
(``EIATTR_MIN_STACK_SIZE``, 0xFFFFFFFF when recursion makes it unknown) and CRS
stack it writes into the linked cubin, with its ``-dump-callgraph`` graph.

What nvlink 13.0 keeps (verified on tests/sources/link_nv, tests/test_link_nvidia.py):

* without ``-kernels-used``: every kernel, everything they call, and every
  address-taken function; a device function that is neither called nor
  address-taken is dropped;
* with ``-kernels-used=a,b``: the kernels whose name *contains* ``a`` or ``b`` (a
  substring match, not an exact one), what they call, and still **every**
  address-taken function, whatever its prototype and whether or not a kept kernel
  makes an indirect call of that prototype, and whether the address is taken in a
  table in ``.nv.global.init`` or only in the code of a dropped kernel.  Variables
  are all kept, even with ``-variables-used``.

``-dump-callgraph`` text (one line per function in input symbol order; the
``N:`` lines with nothing after them are functions nvlink dropped)::

    callgraph for sm_90:
    # A: s -> B // s (number A) potentially calls B
    ...
    9: ^k_takes_address [24] -> 8 3 2
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from devbin.errors import UsageError
from devbin.formats.elf import constants as C
from devbin.formats.elf.reader import ElfFile
from devbin.targets.nvidia.archs import try_parse_arch
from devbin.targets.nvidia.cubin import STACK_UNKNOWN, Cubin, cubin_arch
from devbin.tools import find_tool, install_hint

__all__ = [
    "NvlinkFacts", "NvlinkKernel", "NvlinkNode", "NvlinkResult", "linked_functions", "nvlink_facts", "nvlink_kept",
    "parse_dump_callgraph", "run_nvlink",
]

_NODE = re.compile(r"^(\d+): ([\^&]*)(.*) \[(\d+)\] ->(.*)$")
_EMPTY = re.compile(r"^(\d+):\s*$")
_STACK_WARNING = re.compile(r"Stack size for entry function '([^']+)' cannot be statically determined")


@dataclass(frozen=True, slots=True)
class NvlinkResult:
    output: Path
    stdout: str
    stderr: str

    @property
    def warnings(self) -> list[str]:
        return [ln.strip() for ln in (self.stdout + self.stderr).splitlines() if "nvlink warning" in ln]


def run_nvlink(inputs: Sequence[Path | bytes], arch: str, output: Path, kernels: Sequence[str] | None = None,
               extra: Sequence[str] = (), *, timeout: float = 600) -> NvlinkResult:
    """Link ``inputs`` (paths, or cubin bytes written to a temporary folder) into ``output``.

    ``kernels`` becomes ``-kernels-used=`` (nvlink matches it as a *substring* of kernel
    names); ``extra`` is passed as is.  A missing nvlink, or nvlink failing, is a
    :class:`UsageError`: the first says how to install it, the second carries nvlink's
    own error lines.
    """
    nv = try_parse_arch(arch)
    if nv is None or nv.kind != "sass":
        raise UsageError(f"not an NVIDIA SASS architecture: {arch!r} (expected sm_XX)", fmt="link", where="nvlink")
    if not inputs:
        raise UsageError("no input cubins", fmt="link", where="nvlink")
    tool = find_tool("nvlink")
    if tool is None:
        raise UsageError(f"nvlink not found: devbin link hands NVIDIA's machine-level link to it "
                         f"({install_hint('nvlink')})", fmt="tools", where="nvlink")
    with tempfile.TemporaryDirectory(prefix="devbin-nvlink-") as tmp:
        paths: list[str] = []
        for i, item in enumerate(inputs):
            if isinstance(item, bytes | bytearray):
                p = Path(tmp) / f"input{i}.cubin"
                p.write_bytes(item)
                paths.append(os.fspath(p))
            else:
                paths.append(os.fspath(item))
        argv = [tool, f"-arch={arch}", "-o", os.fspath(output), *extra]
        if kernels is not None:
            argv.append("-kernels-used=" + ",".join(kernels))
        argv += paths
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise UsageError(f"timed out after {timeout:g} s", fmt="tools", where="nvlink") from None
        except OSError as e:
            raise UsageError(f"cannot run {tool}: {e.strerror or e}", fmt="tools", where="nvlink") from None
    out, err = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (err + out).splitlines() if ln.strip() and "warning" not in ln]
        detail = "; ".join(lines[:5]) or f"exit status {proc.returncode}"
        raise UsageError(f"nvlink failed: {detail}", fmt="tools", where="nvlink")
    return NvlinkResult(output, out, err)


@dataclass(frozen=True, slots=True)
class NvlinkNode:
    """One line of ``-dump-callgraph``: a function nvlink kept and what it potentially calls."""

    number: int
    name: str
    entry: bool
    address_taken: bool
    registers: int
    calls: frozenset[str]


def parse_dump_callgraph(text: str) -> dict[str, NvlinkNode]:
    """The functions of a ``-dump-callgraph`` listing (dropped functions have no line)."""
    raw: list[tuple[int, str, str, int, list[int]]] = []
    numbered: dict[int, str] = {}
    for ln in text.splitlines():
        m = _NODE.match(ln.rstrip())
        if m is None:
            continue
        number, marks, name = int(m[1]), m[2], m[3]
        numbered[number] = name
        raw.append((number, marks, name, int(m[4]), [int(x) for x in m[5].split()]))
    out: dict[str, NvlinkNode] = {}
    for number, marks, name, regs, calls in raw:
        unknown = [c for c in calls if c not in numbered]
        if unknown:
            raise UsageError(f"nvlink callgraph: {name!r} calls function number {unknown[0]}, which is not listed",
                             fmt="tools", where="nvlink")
        out[name] = NvlinkNode(number, name, "^" in marks, "&" in marks, regs,
                               frozenset(numbered[c] for c in calls))
    return out


def linked_functions(data: bytes) -> set[str]:
    """Names of the functions in a cubin: one per ``.text.<f>`` ``SHT_PROGBITS`` section."""
    elf = ElfFile(data)
    return {f.name for f in Cubin(elf, records=False).functions if elf.sections[f.text_section].sh_type
            == C.SHT_PROGBITS}


def _arch_of(inputs: Sequence[Path | bytes]) -> str:
    first = inputs[0]
    data = first if isinstance(first, bytes) else first.read_bytes()
    return cubin_arch(ElfFile(data))


def nvlink_kept(cubins: Sequence[Path | bytes], kernels: Sequence[str] | None, *, arch: str | None = None) -> set[str]:
    """The functions nvlink keeps when linking ``cubins`` with ``-kernels-used=kernels`` (all kernels for None)."""
    return nvlink_facts(cubins, kernels, arch=arch).kept


@dataclass(frozen=True, slots=True)
class NvlinkKernel:
    """What nvlink wrote for one kernel of its output."""

    name: str
    registers: int | None
    frame_size: int | None
    min_stack_size: int | None  # None: nvlink wrote none; STACK_UNKNOWN is mapped to stack_unknown
    stack_unknown: bool  # MIN_STACK_SIZE = 0xFFFFFFFF (recursion, or an unbounded indirect call)
    crs_stack_size: int | None


@dataclass(frozen=True, slots=True)
class NvlinkFacts:
    kept: set[str]
    kernels: dict[str, NvlinkKernel]
    graph: dict[str, NvlinkNode]
    stack_warnings: frozenset[str]  # kernels nvlink warned "cannot be statically determined" about
    stdout: str
    stderr: str


def nvlink_facts(cubins: Sequence[Path | bytes], kernels: Sequence[str] | None = None, *,
                 arch: str | None = None, extra: Sequence[str] = ()) -> NvlinkFacts:
    """Link with ``-dump-callgraph-no-demangle`` and read the result (see the module docstring)."""
    arch = arch or _arch_of(cubins)
    with tempfile.TemporaryDirectory(prefix="devbin-nvlink-") as tmp:
        out = Path(tmp) / "linked.cubin"
        res = run_nvlink(list(cubins), arch, out, kernels, ["-dump-callgraph-no-demangle", *extra])
        data = out.read_bytes()
    cubin = Cubin(ElfFile(data))
    text = res.stdout + res.stderr
    facts: dict[str, NvlinkKernel] = {}
    for f in cubin.functions:
        if not f.is_entry:
            continue
        unknown = f.min_stack_size == STACK_UNKNOWN
        facts[f.name] = NvlinkKernel(f.name, f.regcount, f.frame_size, None if unknown else f.min_stack_size,
                                     unknown, f.crs_stack_size)
    return NvlinkFacts(linked_functions(data), facts, parse_dump_callgraph(text),
                       frozenset(_STACK_WARNING.findall(text)), res.stdout, res.stderr)
