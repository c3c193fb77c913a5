#!/usr/bin/env bash
# Builds the nvcc sample that `tile-fuzz --emit-cuda DIR` wrote: every
# `<n>.sm_80.cu` for sm_80 and every `<n>.sm_90a.cu` for sm_90a, with the
# flags tile-fuzz uses, in parallel over the machine's cores. Prints one
# line per rejected file (with its input `<n>.rs`) and a count; exit status
# 1 if any file was rejected.
#   NVCC=/path/to/nvcc bash bench/fuzz_nvcc.sh DIR [JOBS]
set -uo pipefail
DIR=${1:?usage: fuzz_nvcc.sh DIR [JOBS]}
JOBS=${2:-$(nproc)}
NVCC=${NVCC:-nvcc}
"$NVCC" --version | tail -1
build() {
  f=$1
  arch=${f##*.sm_}; arch=${arch%.cu}
  out=$(mktemp -d)
  if timeout 300 "$NVCC" -cubin "-gencode=arch=compute_${arch},code=sm_${arch}" \
      -std=c++17 -O3 -o "$out/k.cubin" "$f" >"$out/log" 2>&1; then
    echo "ok $f"
  else
    echo "REJECTED $f (input ${f%%.sm_*}.rs): $(grep -m1 error "$out/log")"
  fi
  rm -rf "$out"
}
export -f build
export NVCC
start=$(date +%s)
ls "$DIR"/*.cu | xargs -P "$JOBS" -I{} bash -c 'build {}' > "$DIR/nvcc.log"
grep REJECTED "$DIR/nvcc.log"
kernels=$(ls "$DIR"/*.rs | wc -l)
files=$(wc -l < "$DIR/nvcc.log")
bad=$(grep -c REJECTED "$DIR/nvcc.log")
echo "nvcc sample: $kernels accepted kernels, $files CUDA files (sm_80 + sm_90a) in $(( $(date +%s) - start )) s, $bad rejected"
[ "$bad" -eq 0 ]
