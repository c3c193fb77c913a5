#!/usr/bin/env bash
# Second k-loop call: deeper pipelines (kernels.rs) beside the example's variants.
#   bash bench/kloop/run2.sh
set -u
cd "$(dirname "$0")"
. ./gpu_env.sh
t() { timeout 60 "$@" || echo "rc=$? for $*"; }
echo "== stages: 1000^3, 1024^3, 1000x1000x4000, 2000x1000x1000, 2048x1024x1024"
for r in 1 2; do
  for k in p64 e64s6 e64s8 p64c2 e64c2s6 e64c2s8 e64c22s6 e64c22s8 p128 e128s6 e128c2s6 p128c22 e128c22s6 w192c42 e192s6; do
    for s in "1000 1000 1000" "1024 1024 1024" "1000 1000 4000" "2000 1000 1000" "2048 1024 1024"; do t bin/$k $s; done
  done
done
echo "== large: 4096^3"
for k in p128 e128s6 e128c2s6 e128c22s6 e64c2s8; do t bin/$k 4096 4096 4096; done
echo "== promotion (0, 128, 256), twice"
for r in 1 2; do for k in p64 e64s8 e64c2s8; do for pr in 0 128 256; do KL_PROMO=$pr t bin/$k 1000 1000 1000; done; done; done
echo "== traces"
unset KL_CUBLAS
for k in e64s8 e64c22s8 e128c22s6; do
  KL_REPS=5 t bin/${k}_tr 1000 1000 1000
  KL_REPS=5 t bin/${k}_tr 1024 1024 1024
done
