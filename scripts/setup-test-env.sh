#!/usr/bin/env bash
# Prepare a Debian 12 (bookworm) machine to run devbin's whole test suite.
#
#  1. Debian packages for the oracle tools and fixture compilers (LLVM 19 and 22,
#     lld, binutils, gcc; Intel's ocloc, iga64 and spirv-tools; chromium for the HTML report test;
#     nginx, the HTTP server of the URL tests).  Skipped entirely when every tool is already on PATH,
#     so a second run is fast.
#  2. python3 -m pip install -e '.[test]' (into .venv where python3 is externally managed,
#     PEP 668: scripts/pep668-venv.sh) (test deps, plus the PyPI wheels that
#     carry cuobjdump and nvdisasm), and nvidia-cuda-nvcc (ptxas, nvlink,
#     fatbinary) when no CUDA toolkit ptxas is on PATH.  Skipped when nothing
#     changed since the last successful run (stamp in build/); set
#     DEVBIN_FORCE_SETUP=1 to redo it.
#  3. A short summary of the tool versions found.
#
# Idempotent; safe to rerun.  Needs root or sudo for apt-get.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

log() { printf 'setup-test-env: %s\n' "$*"; }
die() { printf 'setup-test-env: error: %s\n' "$*" >&2; exit 1; }

# --- 1. Debian packages -------------------------------------------------------
# tool on PATH -> Debian package that provides it
declare -A tool_pkg=(
    [clang-19]=clang-19
    [clang-offload-bundler-19]=clang-tools-19
    [clang-offload-packager-19]=clang-tools-19
    [ld.lld-19]=lld-19
    [llvm-readelf-19]=llvm-19
    [clang-offload-bundler-22]=clang-tools-22
    [llvm-readelf-22]=llvm-22
    [ar]=binutils
    [nm]=binutils
    [readelf]=binutils
    [gcc]=gcc
    [chromium]=chromium  # the HTML report's headless-browser test (tests/test_htmlreport.py)
    [ocloc]=intel-opencl-icd  # Intel GPU compiler: zebins, fat archives, SPIR-V (tests/intelbuild.py)
    [iga64]=libigc-tools      # Intel GPU assembler/disassembler (libiga64, which ocloc disasm loads)
    [spirv-dis]=spirv-tools   # SPIR-V disassembler, the SPIR-V reader's oracle
    [nginx]=nginx             # the HTTP server with range requests of tests/test_dask.py (URL inputs)
)

missing_pkgs=()
for tool in "${!tool_pkg[@]}"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        pkg="${tool_pkg[$tool]}"
        [[ " ${missing_pkgs[*]-} " == *" $pkg "* ]] || missing_pkgs+=("$pkg")
    fi
done

if ((${#missing_pkgs[@]} == 0)); then
    log "Debian tools already present, skipping apt-get"
elif ! command -v apt-get >/dev/null 2>&1; then
    # Not Debian: leave it to the user.  Oracle tests skip locally and fail in CI.
    msg="apt-get not available; install these packages by other means: ${missing_pkgs[*]}"
    [[ -n "${CI:-}" ]] && die "$msg"
    log "warning: $msg"
else
    sudo_cmd=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "not root and no sudo: cannot install ${missing_pkgs[*]}"
        sudo_cmd=(sudo)
    fi
    log "installing Debian packages: ${missing_pkgs[*]}"
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing_pkgs[@]}" >/dev/null
fi

# --- 1b. nvprune (the oracle of tests/test_prune_linked.py) -------------------------
# nvprune ships in no PyPI wheel; Debian packages it in non-free's nvidia-cuda-toolkit
# (CUDA 11.8).  Only its nvprune binary is taken: the .deb is downloaded (84 MB, no
# dependencies installed) from a one-off non-free source list and the binary copied to
# /usr/local/bin.  nvprune 11.8 prunes CUDA 13 objects for the architectures the tests use.
if ! command -v nvprune >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
        && [[ "$(dpkg --print-architecture 2>/dev/null)" == amd64 ]]; then
    sudo_cmd=()
    [[ "$(id -u)" != 0 ]] && sudo_cmd=(sudo)
    tmp="$(mktemp -d)"
    list="$tmp/non-free.list"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm non-free" >"$list"
    apt_opts=(-o "Dir::Etc::sourcelist=$list" -o "Dir::Etc::sourceparts=-" -o "APT::Get::List-Cleanup=0")
    log "nvprune: downloading Debian non-free nvidia-cuda-toolkit for its nvprune binary"
    if "${sudo_cmd[@]}" apt-get "${apt_opts[@]}" update -qq \
        && (cd "$tmp" && apt-get "${apt_opts[@]}" download -qq nvidia-cuda-toolkit 2>/dev/null) \
        && dpkg-deb --fsys-tarfile "$tmp"/nvidia-cuda-toolkit_*.deb | tar -x -C "$tmp" ./usr/bin/nvprune; then
        "${sudo_cmd[@]}" install -m 0755 "$tmp/usr/bin/nvprune" /usr/local/bin/nvprune
    else
        msg="nvprune not installed (Debian non-free nvidia-cuda-toolkit could not be fetched)"
        [[ -n "${CI:-}" ]] && die "$msg"
        log "$msg"
    fi
    rm -rf "$tmp"
fi

# --- 2. Python packages ---------------------------------------------------------
[[ -f pyproject.toml ]] || die "no pyproject.toml in $root"
# An externally managed python3 (PEP 668, Debian 12's system Python): install into .venv instead.
source "$root/scripts/pep668-venv.sh"

extra_pkgs=()
have_toolkit_ptxas() {
    command -v ptxas >/dev/null 2>&1 && return 0
    local d
    for d in ${CUDA_HOME:+"$CUDA_HOME/bin"} ${CUDA_PATH:+"$CUDA_PATH/bin"} /usr/local/cuda/bin; do
        [[ -x "$d/ptxas" ]] && return 0
    done
    return 1
}
if ! have_toolkit_ptxas; then
    # No CUDA toolkit: the wheel supplies ptxas/nvlink/fatbinary (no cicc, so no nvcc
    # front end; the fixtures then assemble the committed PTX in tests/sources/ptx).
    extra_pkgs+=(nvidia-cuda-nvcc)
fi

stamp_dir="$root/build"
stamp="$stamp_dir/.setup-test-env.stamp"
want_stamp="$(
    {
        command -v python3
        python3 --version
        sha256sum pyproject.toml
        echo "${extra_pkgs[*]-}"
    } | sha256sum | cut -d' ' -f1
)"
# The editable install must still point at this checkout.
installed_here() {
    python3 - "$root/src" <<'PY'
import os, sys
try:
    import devbin
except Exception:
    sys.exit(1)
here = os.path.realpath(sys.argv[1])
sys.exit(0 if any(os.path.realpath(p).startswith(here) for p in devbin.__path__) else 1)
PY
}

if [[ -z "${DEVBIN_FORCE_SETUP:-}" && -f "$stamp" && "$(cat "$stamp")" == "$want_stamp" ]] && installed_here; then
    log "Python packages up to date (stamp $(realpath --relative-to="$root" "$stamp")), skipping pip"
else
    log "python3 -m pip install -e '.[test]' ${extra_pkgs[*]-}"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check -e '.[test]' "${extra_pkgs[@]}"
    mkdir -p "$stamp_dir"
    echo "$want_stamp" >"$stamp"
fi

# --- 3. Summary -----------------------------------------------------------------
PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" python3 - <<'PY'
import re
import subprocess
import sys

from devbin.tools import find_tool

TOOLS = [
    ("nvcc", ()), ("ptxas", ()), ("nvlink", ()), ("fatbinary", ()), ("cuobjdump", ()), ("nvdisasm", ()),
    ("clang-19", ()), ("ld.lld-19", ()), ("llvm-readelf-19", ()), ("llvm-readelf-22", ()),
    ("clang-offload-bundler-19", ()), ("clang-offload-packager-19", ()),
    ("readelf", ()), ("ar", ()), ("nm", ()), ("gcc", ()), ("ruff", ()),
    ("ocloc", ()), ("iga64", ()), ("spirv-dis", ()),
]


def version_of(path: str) -> str:
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(--version failed: {e})"
    lines = [ln.strip() for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
    for pattern in (r"(release|version) \d+\.\d", r"\d+\.\d"):
        for ln in lines:
            if re.search(pattern, ln, re.I):
                return ln
    return lines[0] if lines else "(no version output)"


print(f"setup-test-env: python3 {sys.version.split()[0]} ({sys.executable})")
for name, versions in TOOLS:
    path = find_tool(name, versions=versions)
    print(f"  {name:26} {version_of(path) + '  [' + path + ']' if path else 'MISSING'}")
PY
