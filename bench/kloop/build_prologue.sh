#!/usr/bin/env bash
# Builds the prologue experiments (prologue.py) with kloop.cu: for each of the example's
# variants below, the kernel as generated and rewritten, each plain (timing) and traced
# (kloop's k-loop hooks plus the prologue's stamps, `<tag>_tr`).
#   NVCC=<nvcc 12.8+> bash bench/kloop/build_prologue.sh OUTDIR
# Tags: <kernel> as generated; <kernel>_e (early copies: the producer's thread
# initializes the barriers and issues the first `stages` steps before the block barrier;
# in clusters the first step only, whole tiles, with the relaxed barrier); <kernel>_rx
# (clusters: the relaxed barrier alone). Run on the GPU machine with run_prologue.sh.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
ROOT=$here/../..
TILE=${TILE:-"cargo run -q --release --manifest-path $ROOT/Cargo.toml --bin tile --"}
mkdir -p "$out/src" "$out/bin"
cp "$here/kloop.cu" "$out/src/"
mkdir -p "$out/common" && cp "$here/../common/tma_host.cuh" "$out/common/"
. "$here/kernel_src.sh"
compile() {  # tag, source, BM, BN, CX, CY, THREADS, name, trace(0/1), smem
  $NVCC -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -diag-suppress 177,550 -o "$out/bin/$1" \
    "$out/src/kloop.cu" -I"$out/src" -DKL_KFILE="\"$2\"" $([ "$9" = 1 ] && echo -DKL_TRACE) \
    -DKL_KNAME="$8" -DKL_TAG="\"$1\"" -DKL_BM=$3 -DKL_BN=$4 -DKL_CX=$5 -DKL_CY=$6 -DKL_THREADS=$7 \
    -DKL_SMEM=${10} -L"$(dirname "$NVCC")/../lib" -ldl 2>&1 | grep -v C7519 || true
}
kernel() {  # tag, variant filter, BM, BN, CX, CY, THREADS, stages
  local t=$1 k=$out/src/$1.cu name smem
  $TILE inspect "$ROOT/examples/gemm.rs" --kernel gemm_nn --variant "dtype=f16,$2" --target cuda --arch sm_90a \
    --emit source > "$k"
  name=$(kl_name "$k")
  smem=$(kl_smem "$k")
  kl_mark_maps "$k"
  local forms="base:"
  if [ "$5$6" = 11 ]; then
    forms="$forms e:--early=$8"
  else
    forms="$forms rx:--relaxed e:--early=1,--relaxed"
  fi
  for f in $forms; do
    local suffix=${f%%:*} flags=${f#*:}
    flags=${flags//,/ }
    flags=${flags//=/ }
    local tag=$t$([ "$suffix" = base ] || echo "_$suffix")
    python3 "$here/prologue.py" "$k" "$out/src/$tag.cu" $flags
    python3 "$here/prologue.py" "$k" "$out/src/${tag}_st.cu" $flags --stamps
    kl_hooks "$out/src/${tag}_st.cu" "$out/src/${tag}_tr.cu"
    compile "$tag" "$tag.cu" $3 $4 $5 $6 $7 "$name" 0 $smem &
    compile "${tag}_tr" "${tag}_tr.cu" $3 $4 $5 $6 $7 "$name" 1 $smem &
    wait
  done
}
kernel p64 "block_m=128,block_n=64,cluster=1" 128 64 1 1 384 4
kernel def "block_m=128,block_n=128,stages=3,threads=128,cluster=1,splits=1" 128 128 1 1 256 3
kernel w256 "block_m=128,block_n=256,stages=3,threads=256,cluster=1,splits=1" 128 256 1 1 384 3
kernel p128c22 "block_m=128,block_n=128,stages=4,threads=256,cluster=2,cluster_y=2" 128 128 2 2 384 4
kernel w192c42 "block_m=192" 192 64 4 2 512 7
cp "$here/run_prologue.sh" "$here/gpu_env.sh" "$out/"
ls "$out/bin"
