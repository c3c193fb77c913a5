#!/usr/bin/env bash
# Compiles every example's generated CUDA for sm_90a and sm_80 with nvcc and
# checks the machine code: no spills or local memory, and the vectorized
# element-wise kernel uses 128-bit global loads and stores.
# Needs: NVCC (path to nvcc) and cuobjdump/nvdisasm beside it. No GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${NVCC:?set NVCC to the nvcc binary}"
BIN_DIR=$(dirname "$NVCC")
export PATH="$BIN_DIR:$PATH"
OUT=$(mktemp -d)
cargo build --release --bin tile -q
fail=0
for ex in examples/*.rs; do
  name=$(basename "$ex" .rs)
  ./target/release/tile inspect "$ex" --target cuda --emit source > "$OUT/$name.cu"
  for arch in sm_90a sm_80; do
    n=${arch#sm_}
    log="$OUT/$name.$arch.log"
    if ! "$NVCC" -cubin "-gencode=arch=compute_$n,code=sm_$n" -O3 -std=c++17 -Xptxas -v \
        -o "$OUT/$name.$arch.cubin" "$OUT/$name.cu" > "$log" 2>&1; then
      echo "FAIL $name $arch: nvcc error"; cat "$log"; fail=1; continue
    fi
    if grep -E "[1-9][0-9]* bytes spill (stores|loads)|[1-9][0-9]* bytes stack frame" "$log" > /dev/null; then
      echo "FAIL $name $arch: spills or stack frame"; grep -E "spill|stack" "$log"; fail=1
    fi
    cuobjdump --dump-sass "$OUT/$name.$arch.cubin" > "$OUT/$name.$arch.sass"
    if grep -E "\b(LDL|STL)\b" "$OUT/$name.$arch.sass" > /dev/null; then
      echo "FAIL $name $arch: local memory access in SASS"; fail=1
    fi
    regs=$(grep -o "Used [0-9]* registers" "$log" | head -1)
    echo "ok   $name $arch ($regs)"
  done
done
# The vectorized form: 128-bit global loads and stores.
for arch in sm_90a sm_80; do
  sass="$OUT/vecadd.$arch.sass"
  if ! grep -E "LDG\.E\.128" "$sass" > /dev/null || ! grep -E "STG\.E\.128" "$sass" > /dev/null; then
    echo "FAIL vecadd $arch: no 128-bit global loads/stores"; fail=1
  else
    echo "ok   vecadd $arch uses LDG.E.128 / STG.E.128"
  fi
done
rm -rf "$OUT"
exit $fail
