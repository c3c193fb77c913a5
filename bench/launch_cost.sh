#!/usr/bin/env bash
# Launch cost on a CUDA machine, from a bundle built by bench/bundle.sh:
# the warm launch taken apart (an ignored test of tile-runtime), then
# examples/launch_overhead RUNS times; the typed/raw ratios last, for the
# plain kernel and (on Hopper) the kernel with tensor maps.
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
# The host ratio and the per-round median of the comparison labelled $1 in $out
# ("(b)/(a)": the plain kernel; "(f)/(e)": the kernel with tensor maps, Hopper only).
ratio() {
  echo "$out" | awk -v l="$1" '
    $1 == l && $2 ~ /^[0-9]/ { host = $2 }
    $1 == l && $2 == "per" { med = $(NF - 1) }
    END { if (host == "") print "skipped"; else printf "%s host, per-round median %s\n", host, med }'
}
ratios=()
for i in $(seq "$RUNS"); do
  out=$("$B/launch_overhead" 2>&1)
  echo "--- launch_overhead run $i"; echo "$out" | grep -E '^\(|^first|^tensor|^max_abs_err'
  ratios+=("plain: $(ratio '(b)/(a)'); tensor maps: $(ratio '(f)/(e)')")
done
echo
echo "================ typed / raw ================"
printf '%s\n' "${ratios[@]}"
