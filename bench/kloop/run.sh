#!/usr/bin/env bash
# The k-loop experiments on the GPU machine (binaries from build.sh in bin/):
#   bash bench/kloop/run.sh
# Finds libcublas beside torch for the same-process cuBLAS rows.
set -u
cd "$(dirname "$0")"
. ./gpu_env.sh
t() { timeout 60 "$@" || echo "rc=$? for $*"; }
echo "== timing: every kernel at 1000^3, 1024^3, 1000x1000x4000"
for k in p64 p64c2 p128 p128c22 w192c42; do
  for s in "1000 1000 1000" "1024 1024 1024" "1000 1000 4000"; do t bin/$k $s; done
done
echo "== pitch: 1000^3 read at other row pitches (elements; bytes mod 128: 1000 -> 80, 1008 -> 96, 1016 -> 112, 1024 -> 0, 1040 -> 32, 1088 -> 0)"
for k in p64 p128c22 w192c42; do
  for p in 1008 1016 1024 1040 1088; do KL_PA=$p KL_PB=$p t bin/$k 1000 1000 1000; done
  KL_PA=1024 t bin/$k 1000 1000 1000
  KL_PB=1024 t bin/$k 1000 1000 1000
done
echo "== L2: no flush; promotion"
for k in p64 p128c22; do
  KL_NOFLUSH=1 t bin/$k 1000 1000 1000
  KL_NOFLUSH=1 t bin/$k 1024 1024 1024
  for pr in 0 128; do KL_PROMO=$pr t bin/$k 1000 1000 1000; done
done
echo "== traces"
unset KL_CUBLAS
for k in p64 p128c22 w192c42; do
  KL_REPS=5 t bin/${k}_tr 1000 1000 1000
  KL_REPS=5 t bin/${k}_tr 1024 1024 1024
  KL_REPS=5 KL_PA=1024 KL_PB=1024 t bin/${k}_tr 1000 1000 1000
done
