#!/usr/bin/env bash
# Builds the tl/wgmma.cuh tests with nvcc and runs them.
#   bash bench/tl_wgmma/run.sh               # build + host checks + GPU checks + benchmark (an H100/H200)
#   bash bench/tl_wgmma/run.sh --quick       # time only the two required tilings
#   bash bench/tl_wgmma/run.sh --build-only  # build, host checks (layout, descriptors, NVRTC compile),
#                                            # registers / spills and SASS counts; no GPU needed
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), BUILD (output
# folder, default $TMPDIR/tl_wgmma_build). The binaries in BUILD can be copied to a GPU
# machine and run there: harness --headers DIR_WITH_THE_tl_HEADERS --cuda-include DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tl_dir="$root/tile-core/src/codegen/tl"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
build=${BUILD:-${TMPDIR:-/tmp}/tl_wgmma_build}
mkdir -p "$build"
# wgmma needs the arch-specific target (compute_90a); the -arch=sm_90a shorthand is not used.
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
cuda_flags "cuda_fp16.h cublas_v2.h nvrtc.h cuda.h" "cublas nvrtc" || exit 1
# The static runtime lives in lib/ (pip wheels) or lib64/ (toolkit).
if d=$(find_dir libcudart_static.a); then link_flags+=("-L$d"); fi
# NVRTC loads its builtins library at run time from the library path.
nvrtc_dir=$(find_dir "libnvrtc.so*")
export LD_LIBRARY_PATH="$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "== nvcc: $NVCC ($("$NVCC" --version | tail -1))"
echo "== arch: $ARCH"
"$NVCC" -O1 -std=c++17 "${inc_flags[@]}" "$here/host_check.cu" -o "$build/host_check" "${link_flags[@]}" \
  > "$build/host_check.log" 2>&1 || { cat "$build/host_check.log"; exit 1; }
# shellcheck disable=SC2086
"$NVCC" -O3 -std=c++17 $ARCH -Xptxas -v -lineinfo "${inc_flags[@]}" "$here/harness.cu" -o "$build/harness" \
  "${link_flags[@]}" 2> "$build/ptxas.log" || { cat "$build/ptxas.log"; exit 1; }
if grep -iE "warning|serializ" "$build/ptxas.log"; then echo "(ptxas warnings above)"; fi
# The warp-specialized TMA GEMM (tma_harness.cu; it includes harness.cu's kernels for its fallback).
# shellcheck disable=SC2086
"$NVCC" -O3 -std=c++17 $ARCH -Xptxas -v -lineinfo "${inc_flags[@]}" "$here/tma_harness.cu" -o "$build/tma_harness" \
  "${link_flags[@]}" 2> "$build/ptxas_tma.log" || { cat "$build/ptxas_tma.log"; exit 1; }
if grep -iE "warning|serializ" "$build/ptxas_tma.log"; then echo "(ptxas warnings above)"; fi

echo "== host checks (no GPU)"
"$build/host_check" "$tl_dir" "$fp16_dir" | grep -vE ": ok, acc map ok$|matches the rule: ok$"

echo "== registers / spills of the GEMM kernels (ptxas; wg_gemm<T,BM,BN,BK,WGS,STAGES,D,EARLY,TA,TB,MINB>)"
awk '/Compiling entry function .*wg_gemm/ { match($0, /_Z7wg_gemmI[^ ]*/); name = substr($0, RSTART, RLENGTH) }
     /spill stores/ && name != "" { spill = $0; sub(/.*: +/, "", spill); sub(/^ +/, "", spill) }
     /Used [0-9]+ registers/ && name != "" { match($0, /Used [0-9]+ registers/);
       sub(/\047$/, "", name); printf "  %-4s | %s | %s\n", substr($0, RSTART + 5, RLENGTH - 15), spill, name; name = "" }' \
  "$build/ptxas.log" | { command -v c++filt > /dev/null && c++filt || cat; } | sed 's/(.*)//'
if grep -E "[1-9][0-9]* bytes (spill|stack)" "$build/ptxas.log" > /dev/null; then echo "WARNING: spills or stack"; fi
CUOBJDUMP=$(dirname "$NVCC")/cuobjdump
if [ -x "$CUOBJDUMP" ]; then
  "$CUOBJDUMP" -sass -arch sm_90a "$build/harness" > "$build/sass.txt" 2> /dev/null || true
  echo "== SASS per wg_gemm kernel (static counts; both copy modes)"
  awk '/Function : / { if (name != "") printf "  HGMMA %3d  LDGSTS %3d  BAR %2d  WG.ARRIVE %2d  LDL/STL %d | %s\n", h, l, b, w, s, name;
                       name = $3; h = l = b = s = w = 0; if (name !~ /wg_gemm/) name = "" }
       name != "" && /HGMMA/ { h++ } name != "" && /LDGSTS/ { l++ } name != "" && /BAR\.SYNC/ { b++ }
       name != "" && /WARPGROUP\.ARRIVE/ { w++ } name != "" && /[^A-Z](LDL|STL)[ .]/ { s++ }
       END { if (name != "") printf "  HGMMA %3d  LDGSTS %3d  BAR %2d  WG.ARRIVE %2d  LDL/STL %d | %s\n", h, l, b, w, s, name }' \
    "$build/sass.txt" | { command -v c++filt > /dev/null && c++filt || cat; } | sed 's/(.*)//'
  grep -m1 -oE "HGMMA\.64x[0-9]+x16\.F32[^;]*" "$build/sass.txt" | head -1 | sed 's/^/  e.g. /'
  echo "== registers / spills of the warp-specialized kernels (ws_gemm<T,BM,BN,BK,WGS,STAGES,TA,TB,MINB,EPI>)"
  awk '/Compiling entry function .*ws_gemm/ { match($0, /_Z7ws_gemmI[^ ]*/); name = substr($0, RSTART, RLENGTH) }
       /spill stores/ && name != "" { spill = $0; sub(/.*: +/, "", spill); sub(/^ +/, "", spill) }
       /Used [0-9]+ registers/ && name != "" { match($0, /Used [0-9]+ registers/);
         sub(/\047$/, "", name); printf "  %-4s | %s | %s\n", substr($0, RSTART + 5, RLENGTH - 15), spill, name; name = "" }' \
    "$build/ptxas_tma.log" | { command -v c++filt > /dev/null && c++filt || cat; } | sed 's/(.*)//'
  if grep -E "[1-9][0-9]* bytes (spill|stack)" "$build/ptxas_tma.log" > /dev/null; then echo "WARNING: spills or stack"; fi
  "$CUOBJDUMP" -sass -arch sm_90a "$build/tma_harness" > "$build/sass_tma.txt" 2> /dev/null || true
  echo "== SASS per ws_gemm kernel (static counts)"
  awk '/Function : / { if (name != "") printf "  HGMMA %2d  UTMALDG %2d  UTMASTG %d  SYNCS %2d  SETMAXREG %d  LDL/STL %d | %s\n", h, t, u, y, r, s, name;
                       name = $3; h = t = u = y = r = s = 0; if (name !~ /ws_gemm/) name = "" }
       name != "" && /HGMMA/ { h++ } name != "" && /UTMALDG/ { t++ } name != "" && /UTMASTG/ { u++ }
       name != "" && /SYNCS/ { y++ } name != "" && /SETMAXREG/ { r++ } name != "" && /[^A-Z](LDL|STL)[ .]/ { s++ }
       END { if (name != "") printf "  HGMMA %2d  UTMALDG %2d  UTMASTG %d  SYNCS %2d  SETMAXREG %d  LDL/STL %d | %s\n", h, t, u, y, r, s, name }' \
    "$build/sass_tma.txt" | { command -v c++filt > /dev/null && c++filt || cat; } | sed 's/(.*)//'
fi
[ "$mode" = build ] && exit 0

echo "== run"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2> /dev/null || true
"$build/harness" --headers "$tl_dir" --cuda-include "$fp16_dir" "${harness_args[@]}"
