#!/usr/bin/env bash
# Compiles every example kernel's generated CUDA for sm_90a and sm_80 with
# nvcc (and every test file's kernels, as one unit per architecture) and
# checks the examples' machine code:
# - no spills, no stack frame, no local memory (LDL/STL) in any kernel;
# - the vectorized element-wise kernel uses 128-bit global loads and stores;
# - GEMM kernels run on tensor cores (HMMA on sm_80, HGMMA on sm_90a) and the pipelined ones copy with
#   cp.async (LDGSTS); on sm_90a the GEMM example's are warp-specialized (UTMALDG bulk tensor
#   copies, SYNCS mbarriers).
# Needs: NVCC (path to nvcc) with cuobjdump and nvdisasm beside it. No GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${NVCC:?set NVCC to the nvcc binary}"
export PATH="$(dirname "$NVCC"):$PATH"
OUT=$(mktemp -d)
cargo build --release --bin tile -q
TILE_BIN=${CARGO_TARGET_DIR:-target}/release/tile
fail=0
# The kernels of a file as `tile inspect` names them: a dtype-generic kernel
# (`#[tile::kernel(dtype = [f16, bf16], ..)] pub fn gemm_nn`) is one kernel per
# dtype (`gemm_nn_f16`, `gemm_nn_bf16`), and a kernel with a variant space one per
# variant (`gemm_nn_f16__block_m128_block_n128_block_k64_stages3_threads128`).
kernels_of() {
  "$TILE_BIN" inspect "$1" --emit names
}
# The default variant of a kernel with a variant space (the kernel itself otherwise).
default_of() { # default_of FILE KERNEL
  "$TILE_BIN" inspect "$1" --emit names | grep -E "^$2(__|\$)" | head -1
}
# The one exception to "no spills", bounded at 64 bytes: the bench's 128 x 128 x 32 GEMM
# with one consumer warpgroup on bulk copies (`gemm_nn_k32s4`) on sm_90a. Warp-specialized
# in two blocks a multiprocessor, its consumers have 216 registers for a 128-register
# accumulator, and ptxas 13.0 spills 36 bytes: values it keeps across the `setmaxnreg`
# split and the cp.async fallback the consumers run for unaligned tensors. The bulk-copy
# main loop itself does not spill (the kernel without the fallback compiles clean), and
# the same tile with k tiles of 64 columns (`gemm_nt_f16`) is clean.
SPILL_OK='^gemm_nn_k32s4_(f16|bf16)\.sm_90a$'
# Compiles kernel KERNEL of FILE for ARCH into $OUT/KERNEL.ARCH.{cu,cubin,sass,log} and
# checks it: nvcc accepts it, no spills or stack frame, no local memory in SASS.
build_kernel() { # build_kernel FILE KERNEL ARCH
  local ex=$1 k=$2 arch=$3 n=${3#sm_}
  local log="$OUT/$k.$arch.log"
  # Each arch's own code: the Hopper specialization where there is one.
  "$TILE_BIN" inspect "$ex" --kernel "$k" --target cuda --arch "$arch" --emit source > "$OUT/$k.$arch.cu"
  if ! "$NVCC" -cubin "-gencode=arch=compute_$n,code=sm_$n" -O3 -std=c++17 -Xptxas -v \
      -o "$OUT/$k.$arch.cubin" "$OUT/$k.$arch.cu" > "$log" 2>&1; then
    echo "FAIL $k $arch: nvcc error"; cat "$log"; fail=1; return
  fi
  cuobjdump --dump-sass "$OUT/$k.$arch.cubin" > "$OUT/$k.$arch.sass"
  if [[ "$k.$arch" =~ $SPILL_OK ]]; then
    local bytes
    bytes=$(grep -o '[0-9]* bytes spill stores' "$log" | head -1 | cut -d' ' -f1)
    if [ "${bytes:-0}" -gt 64 ]; then
      echo "FAIL $k $arch: $bytes bytes of spill stores (at most 64 allowed here)"; fail=1
    fi
  else
    if grep -E "[1-9][0-9]* bytes spill (stores|loads)|[1-9][0-9]* bytes stack frame" "$log" > /dev/null; then
      echo "FAIL $k $arch: spills or stack frame"; grep -E "spill|stack" "$log"; fail=1
    fi
    if grep -E "\b(LDL|STL)\b" "$OUT/$k.$arch.sass" > /dev/null; then
      echo "FAIL $k $arch: local memory access in SASS"; fail=1
    fi
  fi
  echo "ok   $k $arch ($(grep -o 'Used [0-9]* registers' "$log" | head -1))"
}
# The nvcc runs are independent and each uses one core: they run as a pool of
# `nproc` jobs, each writing its lines to its own file, printed in order once
# the pool drains (a FAIL line in any of them fails the script).
POOL=0
spawn() { # spawn COMMAND..: runs it in the background, its output kept for drain
  POOL=$((POOL + 1))
  # (Under `set -e` a failing step ends the job early; no rc file then.)
  { ("$@") > "$OUT/pool.$POOL" 2>&1; echo 0 > "$OUT/pool.$POOL.rc"; } &
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
}
drain() {
  wait
  local i
  for ((i = 1; i <= POOL; i++)); do
    cat "$OUT/pool.$i"
    if grep -q '^FAIL' "$OUT/pool.$i"; then fail=1; fi
    if [ ! -e "$OUT/pool.$i.rc" ]; then echo "FAIL a step of the job above stopped it"; fail=1; fi
    rm -f "$OUT/pool.$i" "$OUT/pool.$i.rc"
  done
  POOL=0
}
for ex in examples/*.rs; do
  for k in $(kernels_of "$ex"); do
    for arch in sm_90a sm_80; do spawn build_kernel "$ex" "$k" "$arch"; done
  done
done
drain
# A file's kernels as one unit (`tile inspect FILE --emit source`) compile together.
for ex in examples/*.rs; do
  [ "$(grep -c '#\[tile::kernel' "$ex")" -gt 1 ] || continue
  "$TILE_BIN" inspect "$ex" --target cuda --arch sm_80 --emit source > "$OUT/unit.cu"
  if "$NVCC" -cubin -gencode=arch=compute_80,code=sm_80 -std=c++17 \
      -o "$OUT/unit.cubin" "$OUT/unit.cu" > "$OUT/unit.log" 2>&1; then
    echo "ok   $ex as one unit"
  else
    echo "FAIL $ex as one unit: nvcc error"; cat "$OUT/unit.log"; fail=1
  fi
done
# The kernels of tests/ (and the downstream crate) compile too, each file's
# kernels as one unit per architecture: the build script's own nvcc pass over
# them only warns. (Compile only: the SASS rules above are the examples'.)
build_unit() { # build_unit FILE ARCH: the file's kernels as one unit
  local f=$1 arch=$2 n=${2#sm_} u="$OUT/unit.${1//\//_}.$2"
  if ! "$TILE_BIN" inspect "$f" --target cuda --arch "$arch" --emit source > "$u.cu" 2> "$u.log"; then
    echo "FAIL $f $arch: tile inspect"; cat "$u.log"; return
  fi
  if "$NVCC" -cubin "-gencode=arch=compute_$n,code=sm_$n" -O3 -std=c++17 \
      -o "$u.cubin" "$u.cu" > "$u.log" 2>&1; then
    echo "ok   $f $arch"
  else
    echo "FAIL $f $arch: nvcc error"; cat "$u.log"
  fi
}
for f in tests/*.rs tests/kernels/*.rs tests/downstream/src/*.rs; do
  # (Kernels inside a nested module are not the command's: NVRTC builds them.)
  if ! "$TILE_BIN" inspect "$f" --emit names > "$OUT/test.log" 2>&1; then
    grep -q 'no #\[tile::kernel\] function' "$OUT/test.log" && continue
    echo "FAIL $f: tile inspect"; cat "$OUT/test.log"; fail=1; continue
  fi
  for arch in sm_90a sm_80; do spawn build_unit "$f" "$arch"; done
done
drain
need() { # need KERNEL PATTERN WHAT [ARCHS]
  for arch in ${4:-sm_90a sm_80}; do
    if grep -E "$2" "$OUT/$1.$arch.sass" > /dev/null; then
      echo "ok   $1 $arch has $3"
    else
      echo "FAIL $1 $arch: no $3"; fail=1
    fi
  done
}
NN_F16=$(default_of examples/gemm.rs gemm_nn_f16)
NN_BF16=$(default_of examples/gemm.rs gemm_nn_bf16)
need vecadd 'LDG\.E\.128' '128-bit global loads (LDG.E.128)'
need vecadd 'STG\.E\.128' '128-bit global stores (STG.E.128)'
for k in gemm_relu $NN_F16 $NN_BF16 gemm_nt_f16 gemm_tn_f16; do
  need "$k" 'HMMA' 'tensor-core instructions (HMMA)' sm_80
done
# On Hopper the GEMM examples run wgmma (HGMMA), fenced for the async proxy.
for k in gemm_relu $NN_F16 $NN_BF16 gemm_nt_f16 gemm_tn_f16; do
  need "$k" 'HGMMA' 'wgmma (HGMMA)' sm_90a
  need "$k" 'FENCE.VIEW.ASYNC.S' 'the async-proxy fence' sm_90a
done
# The GEMM examples' main loops are warp-specialized on Hopper: a producer warpgroup's
# bulk tensor copies (UTMALDG; UBLKCP for plain bulk copies) on mbarriers (SYNCS). The
# bench's k32 GEMM with 4 stages asks for bulk copies of its 64-byte rows (the 64-byte
# swizzle; `instruction = "tma"`).
for k in $NN_F16 $NN_BF16 gemm_nt_f16 gemm_tn_f16 gemm_nn_k32s4_f16 gemm_nn_k32s4_bf16; do
  need "$k" 'UTMALDG|UBLKCP' 'bulk tensor copies (UTMALDG)' sm_90a
  need "$k" 'SYNCS' 'mbarrier operations (SYNCS)' sm_90a
done
need gemm_relu 'LDGSTS' 'cp.async copies (LDGSTS)'
# A variant in clusters of two, four or eight shares its A tiles: multicast bulk tensor
# copies, and the cluster barriers around the pipe. Pairs are in the GEMM example; four and
# eight only in the test suite, whose kernels the loop above does not build one by one.
for k in $(kernels_of tests/kernels/clusters.rs); do spawn build_kernel tests/kernels/clusters.rs "$k" sm_90a; done
drain
for n in 2 4 8; do
  NN_CLUSTER=$( (kernels_of examples/gemm.rs; kernels_of tests/kernels/clusters.rs) \
    | grep -E "^(gemm_nn_f16__.*_|cluster_gemm__(.*_)?)cluster$n(_cluster_y1)?(_splits1)?\$" | head -1 || true)
  if [ -z "$NN_CLUSTER" ]; then
    echo "FAIL no NN GEMM in clusters of $n among the example's and tests/kernels/clusters.rs's kernels"
    fail=1; continue
  fi
  need "$NN_CLUSTER" 'UTMALDG[.A-Z0-9]*MULTICAST' 'multicast bulk tensor copies (UTMALDG.MULTICAST)' sm_90a
  need "$NN_CLUSTER" 'UCGABAR' 'cluster barriers (UCGABAR)' sm_90a
done
# A variant whose k loop is split over the blocks of a cluster (`T::use_split_k`) adds the
# partial sums through the other blocks' shared memory between cluster barriers.
SPLITS=$( (kernels_of examples/gemm.rs; kernels_of tests/kernels/clusters.rs) \
  | grep -E "^(gemm_nn_f16__|cluster_gemm__).*_splits[248]\$" || true)
if [ -z "$SPLITS" ]; then
  echo "FAIL no GEMM with a split k loop among the example's and tests/kernels/clusters.rs's kernels"
  fail=1
fi
for k in $SPLITS; do
  need "$k" 'UCGABAR' 'cluster barriers (UCGABAR)' sm_90a
done
# fp8 GEMM on Hopper: fp8 wgmma (QGMMA) fed by bulk tensor copies on mbarriers.
for k in $(default_of examples/gemm_fp8.rs gemm_fp8_f8e4m3) $(default_of examples/gemm_fp8.rs gemm_fp8_f8e5m2); do
  need "$k" 'QGMMA' 'fp8 wgmma (QGMMA)' sm_90a
  need "$k" 'UTMALDG' 'bulk tensor copies (UTMALDG)' sm_90a
  need "$k" 'SYNCS' 'mbarrier operations (SYNCS)' sm_90a
done
# The split-K example's 64-row tile is one warpgroup's wgmma fed by bulk tensor copies.
for k in $(default_of examples/gemm_splitk.rs gemm_splitk_f16) $(default_of examples/gemm_splitk.rs gemm_splitk_bf16); do
  need "$k" 'HGMMA' 'wgmma (HGMMA)' sm_90a
  need "$k" 'UTMALDG' 'bulk tensor copies (UTMALDG)' sm_90a
done
# (On sm_90a gemm_nn_f16's tile copies are bulk tensor copies; its fallback for unaligned
# tensors copies element by element.)
need "$NN_F16" 'LDGSTS' 'cp.async copies (LDGSTS)' sm_80
rm -rf "$OUT"
exit $fail
