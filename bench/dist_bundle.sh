#!/usr/bin/env bash
# Builds what bench/dist_run.sh runs on a GPU machine: the tensor-parallel
# example and the test binaries of devices, collectives, graphs and the
# runtime, in release mode and stripped, with bench/dist_run.sh as run.sh.
# A GPU is not needed here; with NVCC set, cubins are embedded (for
# TILE_CUDA_ARCHS, default sm_90a,sm_80).
#   NVCC=/path/to/nvcc TILE_CUDA_ARCHS=sm_90a bash bench/dist_bundle.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-gpu-dist}
TGT=${CARGO_TARGET_DIR:-target}
rm -rf "$DIR" && mkdir -p "$DIR/tests"
cargo build --release --example tensor_parallel_mlp
cp "$TGT/release/examples/tensor_parallel_mlp" "$DIR/"
{ cargo test --release --no-run --message-format=json \
      --test devices --test dist --test runtime_graph 2>/dev/null
  cargo test --release --no-run --message-format=json -p tile-runtime --lib 2>/dev/null; } \
  | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"]
        if name in ("devices", "dist", "runtime_graph", "tile_runtime"):
            print(name, m["executable"])' \
  | while read -r name exe; do cp "$exe" "$DIR/tests/$name"; done
strip "$DIR/tensor_parallel_mlp" "$DIR"/tests/*
cp bench/dist_run.sh "$DIR/run.sh"
ls -l "$DIR" "$DIR/tests"
du -sh "$DIR"
