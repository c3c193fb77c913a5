#!/usr/bin/env bash
# Builds the tl/gemm.cuh harness with nvcc and runs it on the local GPU.
#   bash bench/tl_gemm/run.sh                # build (sm_90a) + run everything
#   bash bench/tl_gemm/run.sh --quick        # skip the alternative tilings
#   bash bench/tl_gemm/run.sh --build-only   # build for sm_90a and sm_80, report registers/SASS, no run
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), ARCH (gencode flags),
# BUILD (output folder, default $TMPDIR/tl_gemm_build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
header="$root/tile-core/src/codegen/tl/gemm.cuh"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
build=${BUILD:-${TMPDIR:-/tmp}/tl_gemm_build}
mkdir -p "$build"

mode=run
harness_args=()
for a in "$@"; do
  case $a in
    --build-only) mode=build ;;
    *) harness_args+=("$a") ;;
  esac
done
if [ "$mode" = build ]; then
  ARCH=${ARCH:-"-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80"}
else
  ARCH=${ARCH:-"-gencode=arch=compute_90a,code=sm_90a"}
fi

# shellcheck source=../common/cuda_env.sh
. "$here/../common/cuda_env.sh"
cuda_flags "cuda_fp16.h cublas_v2.h nvrtc.h" "cublas nvrtc" || exit 1

echo "== nvcc: $NVCC ($("$NVCC" --version | tail -1))"
echo "== arch: $ARCH"
set -o pipefail
# shellcheck disable=SC2086
"$NVCC" -O3 -std=c++17 $ARCH -Xptxas -v -lineinfo \
  -DTL_HEADER_PATH="\"$header\"" -DTL_CUDA_INC="\"$fp16_dir\"" \
  "${inc_flags[@]}" "$here/harness.cu" -o "$build/harness" "${link_flags[@]}" 2> "$build/ptxas.log" \
  || { cat "$build/ptxas.log"; exit 1; }

echo "== registers / spills of the GEMM kernels (ptxas)"
awk '/Compiling entry function .*tile_gemm/ { match($0, /tile_gemmI[^ ]*/); name = substr($0, RSTART, RLENGTH);
       match($0, /for .sm_[0-9a]+/); arch = substr($0, RSTART + 5, RLENGTH - 5) }
     /spill stores/ && name != "" { spill = $0; sub(/.*: +/, "", spill) }
     /Used [0-9]+ registers/ && name != "" { match($0, /Used [0-9]+ registers/);
       sub(/\047$/, "", name); printf "  %-7s %-4s %s | %s\n", arch, substr($0, RSTART + 5, RLENGTH - 15), spill, name; name = "" }' \
  "$build/ptxas.log"
if grep -q "tile_gemm" "$build/ptxas.log" && grep -A2 tile_gemm "$build/ptxas.log" | grep -E "[1-9][0-9]* bytes spill" > /dev/null; then
  echo "WARNING: spills"
fi
CUOBJDUMP=$(dirname "$NVCC")/cuobjdump
if [ -x "$CUOBJDUMP" ]; then
  echo "== SASS instruction counts (all tile_gemm kernels, per arch)"
  for a in $(echo "$ARCH" | grep -oE "code=sm_[0-9a]+" | cut -d= -f2); do
    "$CUOBJDUMP" -sass -arch "$a" "$build/harness" > "$build/sass_$a.txt" 2> /dev/null || true
    printf "  %-7s HMMA %5d  LDSM %5d  LDGSTS %5d  LDL/STL %d\n" "$a" \
      "$(grep -c 'HMMA\.16816' "$build/sass_$a.txt")" "$(grep -c 'LDSM' "$build/sass_$a.txt")" \
      "$(grep -c 'LDGSTS' "$build/sass_$a.txt")" "$(grep -cE '\b(LDL|STL)\b' "$build/sass_$a.txt")"
  done
fi
[ "$mode" = build ] && exit 0

echo "== run"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2> /dev/null || true
"$build/harness" "${harness_args[@]}"
