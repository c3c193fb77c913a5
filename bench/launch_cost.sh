#!/usr/bin/env bash
# Launch cost on a CUDA machine, from a bundle built by bench/bundle.sh:
# the warm launch taken apart (an ignored test of tile-runtime), then
# examples/launch_overhead RUNS times; the typed/raw ratios last.
#   bash bench/launch_cost.sh [BUNDLE_DIR] [RUNS]
set -uo pipefail
B=${1:-gpu-bundle}
RUNS=${2:-4}
export TILE_DEVICE=cuda
export TILE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
for i in 1 2; do
  "$B/tests/tile_runtime" --ignored --nocapture --exact \
    launch::bench::launch_path_gpu_decomposed 2>&1 | grep -v '^test \|^running\|^$'
done
ratios=()
for i in $(seq "$RUNS"); do
  out=$("$B/launch_overhead" 2>&1)
  echo "--- launch_overhead run $i"; echo "$out" | grep -E '^\(|^first'
  ratios+=("$(echo "$out" | grep -E '^\(b\)/\(a\) +[0-9]' | awk '{print $2}') host, per-round median $(echo "$out" | grep 'per round' | awk '{print $NF, $(NF-1)}' | awk '{print $2}')")
done
echo
echo "================ typed / raw ================"
printf '%s\n' "${ratios[@]}"
