#!/usr/bin/env bash
# The prologue experiments on the GPU machine (binaries from build_prologue.sh, in this
# folder's bin/): each kernel as generated and rewritten, alternating, two rounds, beside
# cuBLAS in the same process; then the traced builds at 1000^3; then memcheck and
# racecheck of the rewritten kernels at a ragged shape.
#   bash run_prologue.sh
set -u
cd "$(dirname "$0")"
. ./gpu_env.sh
t() { timeout 60 "$@" 2>&1 | grep -v "^  flush" || echo "rc=$? for $*"; }
small="1000 1000 1000|1000 1000 4000|1024 1024 1024|2000 1000 1000|1000 1032 1056"
big="4096 4096 4096"
echo "== timing"
for r in 1 2; do
  IFS='|'
  for s in $small; do
    unset IFS
    for k in p64 p64_e def def_e p128c22 p128c22_rx p128c22_e w192c42 w192c42_rx w192c42_e; do t bin/$k $s; done
    IFS='|'
  done
  for s in $big; do
    unset IFS
    for k in def def_e w256 w256_e; do t bin/$k $s; done
    IFS='|'
  done
  unset IFS
done
echo "== traces"
unset KL_CUBLAS
for k in p64 p64_e def def_e w256 w256_e p128c22 p128c22_rx p128c22_e w192c42 w192c42_rx w192c42_e; do
  t bin/${k}_tr 1000 1000 1000
done
for k in w256 w256_e; do t bin/${k}_tr 4096 4096 4096; done
echo "== sanitizers"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
for k in p64_e def_e w256_e p128c22_e w192c42_e; do
  KL_REPS=1 KL_NOFLUSH=1 timeout 90 $CS --tool memcheck bin/$k 500 512 520 2>&1 | grep -E "ERROR SUMMARY|WRONG| ok$" | head -3
done
for k in p64_e w192c42_e; do
  KL_REPS=1 KL_NOFLUSH=1 timeout 90 $CS --tool racecheck bin/$k 500 512 520 2>&1 | grep -E "RACECHECK SUMMARY|WRONG" | head -3
done
