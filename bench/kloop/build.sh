#!/usr/bin/env bash
# Builds kloop.cu, the stand-alone k-loop driver, against generated f16 NN GEMM
# kernels: variants of examples/gemm.rs's `gemm_nn` and of src/kernels.rs (the same
# kernel over deeper pipelines, written below). Each as bin/<tag> (as generated, for
# timing) and, where the list below says 1 last, bin/<tag>_tr (clock64 hooks after the
# pipeline's waits; kloop.cu). run.sh, run2.sh and run3.sh are the calls of
# bench/RESULTS.md's 2026-12-06 (third session) entry.
# Needs NVCC (nvcc 12.8+) and a `tile` binary (TILE, default: cargo run --bin tile).
# Run on the GPU machine: bin/<tag> M N K [KL_CUBLAS=libcublas.so.N].
set -eu
cd "$(dirname "$0")"
ROOT=../..
TILE=${TILE:-"cargo run -q --manifest-path $ROOT/Cargo.toml --bin tile --"}
mkdir -p bin src
# kernels.rs: the example's file with gemm_nn over another space (deeper pipelines); only
# `tile inspect` reads it.
python3 - "$ROOT/examples/gemm.rs" src/kernels.rs <<'PY'
import re, sys
src = open(sys.argv[1]).read()
fn = src.index("pub fn gemm_nn(")
attr = src.rindex("#[tile::kernel(", 0, fn)
space = """#[tile::kernel(
    dtype = [f16],
    block_m = [128, 192],
    block_n = [64, 128],
    block_k = 64,
    stages = [4, 5, 6, 7, 8],
    threads = [256, 384],
    cluster = [1, 2, 4],
    cluster_y = [1, 2],
    splits = 1,
    filter = (block_m == 192) == (threads == 384)
        && (block_m != 192 || (block_n == 64 && cluster == 4 && cluster_y == 2))
        && (cluster_y == 1 || cluster == 2 || block_m == 192)
        && (cluster < 4 || block_m == 192)
        && (block_m + block_n) * 64 * 2 * stages <= 225 * 1024
)]
"""
open(sys.argv[2], "w").write(src[:attr] + space + src[fn:])
PY
. ./kernel_src.sh
build() {  # tag, file, variant filter, BM, BN, CX, CY, THREADS, trace (0/1)
  local t=$1 k=src/$1.cu name
  $TILE inspect $2 --kernel gemm_nn --variant "$3" --target cuda --arch sm_90a --emit source > $k
  shift
  name=$(kl_name $k)
  kl_mark_maps $k
  kl_hooks $k src/${t}_tr.cu
  for v in "" $([ "$8" = 1 ] && echo _tr); do
    $NVCC -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -diag-suppress 177,550 -o bin/$t$v kloop.cu \
      -DKL_KFILE="\"src/$t$v.cu\"" $([ -n "$v" ] && echo -DKL_TRACE) -DKL_KNAME=$name -DKL_TAG="\"$t$v\"" \
      -DKL_BM=$3 -DKL_BN=$4 -DKL_CX=$5 -DKL_CY=$6 -DKL_THREADS=$7 -DKL_SMEM=232448 -L"$(dirname "$NVCC")/../lib" -ldl &
  done
}
G=$ROOT/examples/gemm.rs
E=src/kernels.rs
build p64 $G "block_m=128,block_n=64,cluster=1" 128 64 1 1 384 1
build p64c2 $G "block_m=128,block_n=64,cluster=2" 128 64 2 1 384 0
build p128 $G "block_m=128,block_n=128,stages=4,threads=256,cluster=1,splits=1" 128 128 1 1 384 0
build p128c22 $G "block_m=128,block_n=128,stages=4,threads=256,cluster=2,cluster_y=2" 128 128 2 2 384 1
build w192c42 $G "block_m=192" 192 64 4 2 512 0
wait
for s in 6 8; do
  build e64s$s $E "block_m=128,block_n=64,stages=$s,cluster=1,cluster_y=1" 128 64 1 1 384 1
  build e64c2s$s $E "block_m=128,block_n=64,stages=$s,cluster=2,cluster_y=1" 128 64 2 1 384 0
  build e64c22s$s $E "block_m=128,block_n=64,stages=$s,cluster=2,cluster_y=2" 128 64 2 2 384 $([ $s = 8 ] && echo 1 || echo 0)
done
wait
build e128s6 $E "block_m=128,block_n=128,stages=6,cluster=1,cluster_y=1" 128 128 1 1 384 0
build e128c2s6 $E "block_m=128,block_n=128,stages=6,cluster=2,cluster_y=1" 128 128 2 1 384 0
build e128c22s6 $E "block_m=128,block_n=128,stages=6,cluster=2,cluster_y=2" 128 128 2 2 384 1
build e192s5 $E "block_m=192,stages=5" 192 64 4 2 512 0
build e192s6 $E "block_m=192,stages=6" 192 64 4 2 512 0
build e192s7 $E "block_m=192,stages=7" 192 64 4 2 512 0
wait
ls bin
