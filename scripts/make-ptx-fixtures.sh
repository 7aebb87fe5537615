#!/usr/bin/env bash
# Regenerate the committed PTX in tests/sources/ptx/ from tests/sources/*.cu.
#
# The conftest fixtures compile tests/sources/kernels.cu with nvcc when it is on
# PATH; on a machine that only has the PyPI wheel nvidia-cuda-nvcc (ptxas, nvlink,
# fatbinary but no cicc, so no CUDA C++ front end) they fall back to running ptxas
# on these PTX files.  Rerun this script after editing kernels.cu or extfn.cu and
# commit the result.  Needs a full CUDA toolkit (nvcc).
#
# Per architecture sm_XX it writes:
#   kernels.sm_XX.ptx        kernels.cu with -rdc=true  (ptxas -c  -> relocatable cubin)
#   kernels-whole.sm_XX.ptx  kernels.cu whole-program   (ptxas     -> executable cubin)
#   extfn.sm_XX.ptx          extfn.cu with -rdc=true    (ptxas -c  -> relocatable cubin)
# and once, for sm_80 (tests/test_api_resources.py assembles it for sm_80 and sm_90):
#   spill.sm_80.ptx          spill.cu with -rdc=true    (ptxas [-c] -> cubins that spill)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/tests/sources"
out="$src/ptx"
read -r -a archs <<<"${DEVBIN_PTX_ARCHS:-80 90}"

command -v nvcc >/dev/null || { echo "make-ptx-fixtures: nvcc not found (needs a CUDA toolkit)" >&2; exit 1; }
mkdir -p "$out"
for a in "${archs[@]}"; do
    nvcc -arch="sm_$a" -ptx -rdc=true -o "$out/kernels.sm_$a.ptx" "$src/kernels.cu"
    nvcc -arch="sm_$a" -ptx -o "$out/kernels-whole.sm_$a.ptx" "$src/kernels.cu"
    nvcc -arch="sm_$a" -ptx -rdc=true -o "$out/extfn.sm_$a.ptx" "$src/extfn.cu"
    # Check that each file assembles with the ptxas at hand.
    tmp="$(mktemp -d)"
    ptxas -arch="sm_$a" -c -o "$tmp/k.cubin" "$out/kernels.sm_$a.ptx"
    ptxas -arch="sm_$a" -o "$tmp/w.cubin" "$out/kernels-whole.sm_$a.ptx"
    ptxas -arch="sm_$a" -c -o "$tmp/e.cubin" "$out/extfn.sm_$a.ptx"
    rm -rf "$tmp"
done
nvcc -arch=sm_80 -ptx -rdc=true -o "$out/spill.sm_80.ptx" "$src/spill.cu"
echo "make-ptx-fixtures: wrote $((3 * ${#archs[@]} + 1)) files to ${out#"$root"/} ($(nvcc --version | tail -n 1))"
