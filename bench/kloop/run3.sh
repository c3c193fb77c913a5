#!/usr/bin/env bash
# Third k-loop call: 192 x 64 tiles in 4 x 2 clusters at 4-7 stages, L2 promotion 256 and 128.
#   bash bench/kloop/run3.sh
set -u
cd "$(dirname "$0")"
. ./gpu_env.sh
t() { timeout 60 "$@" || echo "rc=$? for $*"; }
for r in 1 2; do
  for s in "1000 1000 1000" "1000 1000 4000" "1000 1000 2000" "1024 1024 1024" "2000 1000 1000" "1000 2000 1000" "1536 1536 1536"; do
    for k in w192c42 e192s5 e192s6 e192s7; do
      for p in 256 128; do KL_PROMO=$p t bin/$k $s; done
    done
  done
done
