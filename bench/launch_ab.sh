#!/usr/bin/env bash
# A/B of two builds of examples/launch_overhead on one machine, alternating, so
# that the host's drift falls on both: BUNDLE/launch_overhead_before (built from
# an older commit) and BUNDLE/launch_overhead. Prints one line per run.
#   bash bench/launch_ab.sh [BUNDLE_DIR]
export TILE_DEVICE=cuda TILE_CACHE_DIR=$(mktemp -d)
B=${1:-gpu-bundle}
rows=()
for i in 1 2 3 4 5 6; do
  for v in before after; do
    exe=$B/launch_overhead; [ $v = before ] && exe=$B/launch_overhead_before
    out=$($exe 2>&1)
    r=$(echo "$out" | grep -E '^\(b\)/\(a\) +[0-9]' | awk '{print $2}')
    pr=$(echo "$out" | grep 'per round' | awk '{print $(NF-1)}')
    raw=$(echo "$out" | grep '^(a) raw' | awk '{print $4}')
    typed=$(echo "$out" | grep '^(b) typed' | awk '{print $5}')
    rows+=("$i $v raw=$raw typed=$typed ratio=$r per-round=$pr")
  done
done
printf '%s\n' "${rows[@]}"
