#!/usr/bin/env bash
# Builds the hand-written wgmma GEMM harness with nvcc and runs it on the local GPU.
#   bash bench/wgmma/run.sh                # build (sm_90a) + unit tests + checks + all variants timed
#   bash bench/wgmma/run.sh --quick        # primary configuration only
#   bash bench/wgmma/run.sh --build-only   # build, report registers/spills and SASS counts, no run
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), BUILD (output folder,
# default $TMPDIR/wgmma_build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
build=${BUILD:-${TMPDIR:-/tmp}/wgmma_build}
mkdir -p "$build"
# wgmma needs the arch-specific target; the -arch=sm_90a shorthand is not used (it also ran a
# plain sm_90 pass with some nvcc versions).
ARCH="-gencode=arch=compute_90a,code=sm_90a"

mode=run
harness_args=()
for a in "$@"; do
  case $a in
    --build-only) mode=build ;;
    *) harness_args+=("$a") ;;
  esac
done

# shellcheck source=../common/cuda_env.sh
. "$here/../common/cuda_env.sh"
cuda_flags "cuda_fp16.h cublas_v2.h" "cublas" || exit 1

echo "== nvcc: $NVCC ($("$NVCC" --version | tail -1))"
echo "== arch: $ARCH"
# shellcheck disable=SC2086
"$NVCC" -O3 -std=c++17 $ARCH -Xptxas -v -lineinfo "${inc_flags[@]}" "$here/harness.cu" -o "$build/harness" \
  "${link_flags[@]}" 2> "$build/ptxas.log" || { cat "$build/ptxas.log"; exit 1; }
if grep -iE "warning|serializ" "$build/ptxas.log" | grep -v "^$"; then echo "(ptxas warnings above)"; fi

echo "== registers / spills of the kernels (ptxas; template args: T,BM,BN,WGS,STAGES,INFLIGHT,SYNC2,LOADS_FIRST,MINB,NOFENCE,NOSTORE; ws: T,BM,BN,CWG,STAGES,LAG,PREG,CREG)"
awk '/Compiling entry function .*(wg_gemm|unit_tile)/ { match($0, /_Z[0-9]+(wg_gemm_ws|wg_gemm|unit_tile)I[^ ]*/); name = substr($0, RSTART, RLENGTH) }
     /spill stores/ && name != "" { spill = $0; sub(/.*: +/, "", spill); sub(/^ +/, "", spill) }
     /Used [0-9]+ registers/ && name != "" { match($0, /Used [0-9]+ registers/);
       sub(/\047$/, "", name); printf "  %-4s | %s | %s\n", substr($0, RSTART + 5, RLENGTH - 15), spill, name; name = "" }' \
  "$build/ptxas.log"
if grep -E "[1-9][0-9]* bytes spill" "$build/ptxas.log" > /dev/null; then echo "WARNING: spills"; fi
CUOBJDUMP=$(dirname "$NVCC")/cuobjdump
if [ -x "$CUOBJDUMP" ]; then
  "$CUOBJDUMP" -sass -arch sm_90a "$build/harness" > "$build/sass.txt" 2> /dev/null || true
  echo "== SASS instruction counts per wg_gemm kernel (whole kernel, static)"
  awk '/Function : / { if (name != "") printf "  HGMMA %3d  LDGSTS %3d  BAR %2d  LDL/STL %d | %s\n", h, l, b, s, name;
                       name = $3; h = l = b = s = 0; if (name !~ /wg_gemm|unit_tile/) name = "" }
       name != "" && /HGMMA/ { h++ } name != "" && /LDGSTS/ { l++ } name != "" && /BAR\.SYNC/ { b++ }
       name != "" && /[^A-Z](LDL|STL)[ .]/ { s++ }
       END { if (name != "") printf "  HGMMA %3d  LDGSTS %3d  BAR %2d  LDL/STL %d | %s\n", h, l, b, s, name }' "$build/sass.txt"
  printf "  total: HGMMA %d  LDGSTS %d  LDL/STL %d\n" "$(grep -c 'HGMMA' "$build/sass.txt")" \
    "$(grep -c 'LDGSTS' "$build/sass.txt")" "$(grep -cE '[^A-Z](LDL|STL)[ .]' "$build/sass.txt")"
fi
[ "$mode" = build ] && exit 0

echo "== run"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2> /dev/null || true
"$build/harness" "${harness_args[@]}"
