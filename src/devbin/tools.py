"""Find and run the external tools devbin can use as helpers or test oracles.

devbin itself is pure Python; external tools are optional.  They are looked up in
this order:

1. an environment override ``DEVBIN_<NAME>`` (for ``llvm-readelf-19``:
   ``DEVBIN_LLVM_READELF_19``) holding a path to the executable;
2. ``PATH``, trying versioned names first: ``find_tool("clang-offload-bundler",
   versions=("19", "22"))`` tries ``clang-offload-bundler-19``, then
   ``clang-offload-bundler-22``, then plain ``clang-offload-bundler``;
3. Debian's per-version LLVM directories, ``/usr/lib/llvm-<version>/bin/<name>``;
4. for a vendor's own tools (its descriptor's ``toolkit``: NVIDIA's ``cuobjdump``,
   ``nvdisasm``, ``ptxas``, ``nvlink``, ``fatbinary`` and ``nvcc``), the folders its
   descriptor names (:meth:`devbin.targets.vendor.Vendor.toolkit_dirs`: for NVIDIA
   ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``/usr/local/cuda/bin``, then the folders the
   PyPI wheels install).

:func:`run_tool` runs one and turns every failure (missing tool, non-zero exit,
timeout) into a one-line :class:`devbin.errors.UsageError`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from devbin.errors import UsageError
from devbin.targets.registry import VENDORS

__all__ = ["find_tool", "install_hint", "run_tool"]

_VERSIONED = re.compile(r"^(?P<base>.+)-(?P<version>\d+)$")

_HINTS: dict[str, str] = {
    "clang": "apt-get install clang-19",
    "clang-offload-bundler": "apt-get install clang-tools-19",
    "clang-offload-packager": "apt-get install clang-tools-19",
    "ld.lld": "apt-get install lld-19",
    "llvm-readelf": "apt-get install llvm-19",
    "llvm-readobj": "apt-get install llvm-19",
    "llvm-objdump": "apt-get install llvm-19",
    "llvm-nm": "apt-get install llvm-19",
    "llvm-ar": "apt-get install llvm-19",
    "readelf": "apt-get install binutils",
    "ar": "apt-get install binutils",
    "nm": "apt-get install binutils",
    "gcc": "apt-get install gcc",
    "chromium": "apt-get install chromium",
    "nginx": "apt-get install nginx",
    "nvprune": "bash scripts/setup-test-env.sh (takes nvprune from Debian non-free nvidia-cuda-toolkit)",
}


def _split_version(name: str) -> tuple[str, str | None]:
    """Split ``"llvm-readelf-19"`` into ``("llvm-readelf", "19")``; unversioned names give ``None``."""
    m = _VERSIONED.match(name)
    if m is None:
        return name, None
    return m.group("base"), m.group("version")


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_tool(name: str, *, versions: Sequence[str] = ("19",)) -> str | None:
    """Return the absolute path of tool ``name``, or ``None`` when it cannot be found.

    ``name`` may carry a version (``"llvm-readelf-22"``), which is then looked up
    exactly (on ``PATH`` and in ``/usr/lib/llvm-22/bin``).  For an unversioned name
    the ``versions`` are tried first, in order, then the bare name.  See the module
    docstring for the full search order.
    """
    override = os.environ.get("DEVBIN_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper())
    if override:
        p = Path(override)
        return str(p.resolve()) if _is_executable(p) else None

    base, pinned = _split_version(name)
    tried_versions: list[str] = [pinned] if pinned is not None else list(versions)
    names = [name] if pinned is not None else [f"{name}-{v}" for v in tried_versions] + [name]

    for candidate in names:
        found = shutil.which(candidate)
        if found:
            return os.path.abspath(found)
    for v in tried_versions:
        p = Path(f"/usr/lib/llvm-{v}/bin") / base
        if _is_executable(p):
            return str(p)
    for vendor in VENDORS:
        for folder in vendor.toolkit_dirs(base):
            p = folder / base
            if _is_executable(p):
                return str(p.resolve())
    return None


def install_hint(name: str) -> str:
    """A short suggestion for how to install tool ``name`` (empty when unknown)."""
    base, version = _split_version(name)
    hint = _HINTS.get(base) or next((v.toolkit[base] for v in VENDORS if base in v.toolkit), "")
    if version is not None and hint.endswith("-19"):
        hint = hint[: -len("19")] + version
    return hint


def _first_line(data: bytes, limit: int = 200) -> str:
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def run_tool(
    args: Sequence[str | os.PathLike[str]],
    *,
    input: bytes | None = None,
    timeout: float = 120,
    check: bool = True,
    versions: Sequence[str] = ("19",),
) -> subprocess.CompletedProcess[bytes]:
    """Run an external tool and return its completed process (stdout/stderr captured as bytes).

    ``args[0]`` is a tool name, resolved with :func:`find_tool` (``versions`` is passed
    on), or a path containing a ``/``, used as is.  Raises
    :class:`~devbin.errors.UsageError` with a one-line message when the tool is
    missing, cannot be started, runs past ``timeout`` seconds, or (with ``check``)
    exits with a non-zero status.
    """
    if not args:
        raise UsageError("no command given", fmt="tools")
    argv = [os.fspath(a) for a in args]
    tool = argv[0]
    label = os.path.basename(tool)
    if os.sep not in tool and (os.altsep is None or os.altsep not in tool):
        path = find_tool(tool, versions=versions)
        if path is None:
            hint = install_hint(tool)
            raise UsageError("not found on PATH" + (f" ({hint})" if hint else ""), fmt="tools", where=label)
        argv[0] = path
    try:
        proc = subprocess.run(argv, input=input, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise UsageError(f"timed out after {timeout:g} s", fmt="tools", where=label) from None
    except OSError as e:
        raise UsageError(f"cannot run {argv[0]}: {e.strerror or e}", fmt="tools", where=label) from None
    if check and proc.returncode != 0:
        detail = _first_line(proc.stderr) or _first_line(proc.stdout)
        status = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        raise UsageError(f"failed with {status}" + (f": {detail}" if detail else ""), fmt="tools", where=label)
    return proc
