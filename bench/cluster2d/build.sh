#!/usr/bin/env bash
# Builds repro.cu, the stand-alone driver, against generated 2-D cluster GEMM kernels:
#   k22  examples/gemm.rs-style 128 x 128 tiles in 2 x 2 clusters  (needs the 2-D variants
#        in gemm_nn's space; skipped when `tile inspect` does not know the kernel)
#   t22, t42, t12, t42w  the cluster_gemm_2d variants of tests/kernels/clusters.rs
# and, for each, variants made by editing the source:
#   base   as generated
#   dbg    TL_TMA_WAIT_LIMIT defined (waits give up after 4e8 cycles and print)
#   relcl  the consumers' remote arrivals release at cluster scope
#   acqcl  every mbarrier wait acquires at cluster scope
# Output: bin/<kernel>_<variant>; run as `bin/t22_base K` (REPRO_M, REPRO_N, REPRO_TIMEOUT_MS).
# Needs NVCC (nvcc 13) and a `tile` binary (TILE, default: cargo run --bin tile).
set -eu
cd "$(dirname "$0")"
ROOT=../..
TILE=${TILE:-"cargo run -q --manifest-path $ROOT/Cargo.toml --bin tile --"}
mkdir -p bin src
variant() {  # $1 kernel source, $2 variant name -> src/<k>_<v>.cu
  local k=$1 v=$2 out=${1%.cu}_$2.cu
  case $v in
    base) cp $k $out ;;
    dbg) { echo '#define TL_TMA_WAIT_LIMIT 400000000'; cat $k; } > $out ;;
    relcl) sed 's/mbarrier\.arrive\.shared::cluster\.b64 _, \[ra\];/mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];/' $k > $out ;;
    acqcl) sed 's/mbarrier\.try_wait\.parity\.shared::cta\.b64/mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64/' $k > $out ;;
  esac
  if [ $v != base ] && cmp -s $k $out; then echo "variant $v changed nothing in $k" >&2; exit 1; fi
  echo $out
}
build() {  # name, file, kernel, BM, BN, CX, CY, THREADS, M, N
  local n=$1 k=src/$1.cu name maps
  $TILE inspect $ROOT/$2 --kernel $3 --target cuda --arch sm_90a --emit source > $k 2>/dev/null || { echo "skip $n"; return; }
  name=$(grep -o 'void __launch_bounds__([0-9]*, 1) [a-z0-9_]*' $k | awk '{print $4}')
  # The tensor maps, from the `// tile:tma` lines: {param (0: A, 1: B), box columns, rows}.
  maps="{$(grep '^// tile:tma ' $k | sed -E 's/.*param=([0-9]+) box=([0-9]+)x([0-9]+).*/{\1,\2,\3}/' | paste -sd,)}"
  for v in ${VARIANTS:-base dbg relcl acqcl}; do
    local s; s=$(variant $k $v)
    sed -i "1i #define RP_MAPS $maps" $s
    $NVCC -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -diag-suppress 177,550 -o bin/${n}_$v repro.cu \
      -DRP_KFILE="\"$s\"" -DRP_KNAME=$name -DRP_BM=$4 -DRP_BN=$5 -DRP_CX=$6 -DRP_CY=$7 -DRP_THREADS=$8 \
      -L"$(dirname "$NVCC")/../lib" -DRP_SMEM=232448 -DRP_MROWS=$9 -DRP_NCOLS=${10} -DRP_TIMEOUT_MS=3000 &
  done
  wait
}
G=examples/gemm.rs
T=tests/kernels/clusters.rs
build k22 $G gemm_nn_f16__block_m128_block_n128_block_k64_stages4_threads256_cluster2_cluster_y2_splits1 128 128 2 2 384 256 256
build t22 $T cluster_gemm_2d__block_m128_threads256_cluster2_cluster_y2 128 64 2 2 384 256 256
build t42 $T cluster_gemm_2d__block_m128_threads256_cluster4_cluster_y2 128 64 4 2 384 256 256
build t12 $T cluster_gemm_2d__block_m128_threads256_cluster1_cluster_y2 128 64 1 2 384 256 256
build t42w $T cluster_gemm_2d__block_m192_threads384_cluster4_cluster_y2 192 64 4 2 512 384 256
ls bin
