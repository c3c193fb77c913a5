#!/usr/bin/env bash
# Builds the examples and the test binaries in release mode and copies them
# into a folder to run on a GPU machine with bench/gpu_run.sh. A GPU is not
# needed here; with NVCC set, cubins are embedded (else NVRTC compiles there).
#   NVCC=/path/to/nvcc bash bench/bundle.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-gpu-bundle}
TGT=${CARGO_TARGET_DIR:-target}
rm -rf "$DIR" && mkdir -p "$DIR/tests"
cargo build --release --examples
# Examples behind a feature (candle_rmsnorm) are not built here.
for e in examples/*.rs; do
  b="$TGT/release/examples/$(basename "$e" .rs)"
  if [ -f "$b" ]; then cp "$b" "$DIR/"; fi
done
# Test binaries that launch kernels (compile-only suites stay behind).
cargo test --workspace --release --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"]
        if name in ("kernels", "examples", "bad_calls", "run", "tile_runtime",
                    "runtime_cache", "runtime_cache_faults", "runtime_graph",
                    "runtime_keys", "interop_views", "index_range", "autotune"):
            print(name, m["executable"])' \
  | while read -r name exe; do cp "$exe" "$DIR/tests/$name"; done
# The Python example's extension (pyo3, abi3: any CPython >= 3.9 there) for its
# torch test, unless NO_PYTHON is set.
if [ -z "${NO_PYTHON:-}" ]; then
  (cd examples/python && cargo build --release)
  mkdir -p "$DIR/py"
  cp examples/python/target/release/libtile_example.so "$DIR/py/tile_example.abi3.so"
fi
# The cache tests drive the `tile` command (found through TILE_BIN there).
cargo build --release --bin tile
cp "$TGT/release/tile" "$DIR/tile"
ls -l "$DIR" "$DIR/tests"
