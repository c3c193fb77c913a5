#!/usr/bin/env bash
# Runs a harness built elsewhere (run.sh --build-only) on a GPU machine, one process per
# section, so that a fault in one launch cannot hide the other results.
#   bash run_prebuilt.sh [harness args]      # from a folder holding: harness, tl/{prelude,gemm,wgmma}.cuh
# Environment: OUT (folder for the per-section logs, default /tmp/tl_wgmma_out),
# SECTIONS (default: unit unit-extra copy nvrtc gemm gemm-extra bench), BIN (default harness;
# tma_harness has the sections ws-check ws-layouts ws-tune ws-bench ws-small).
# cuBLAS and NVRTC are found in the machine's CUDA 13 toolkit.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/tl_wgmma_out}; mkdir -p "$OUT"
lib() {
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/$1" ] && { echo "$d"; return; }
  done
  find /usr /opt -name "$1" 2> /dev/null | head -1 | xargs -r dirname
}
export LD_LIBRARY_PATH="$(lib libcublas.so.13):$(lib libnvrtc.so.13)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
INC=/usr/local/cuda/include
[ -e $INC/cuda_fp16.h ] || INC=$(find /usr /opt -name cuda_fp16.h 2> /dev/null | head -1 | xargs -r dirname)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/env.log"
for s in ${SECTIONS:-unit unit-extra copy nvrtc gemm gemm-extra bench}; do
  echo "=== section $s"
  timeout 200 ./${BIN:-harness} --headers tl --cuda-include "$INC" --only "$s" "$@" 2>&1 | tee "$OUT/$s.log" | grep -vE "  ok$"
  echo "=== section $s rc=${PIPESTATUS[0]}"
done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv,noheader
