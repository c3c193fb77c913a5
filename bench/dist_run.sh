#!/usr/bin/env bash
# Runs a bundle of bench/dist_bundle.sh on a CUDA machine: the device and
# collective tests, the tensor-parallel MLP (checked, then --bench at hidden
# 8192 / intermediate 32768) on every visible GPU, the all-reduce alone, and
# an NCCL all-reduce baseline through torch.distributed (world size 1 per
# GPU count, when torch is there). Logs go to $OUT (default ./dist-logs).
# NCCL comes from the Python packages (nvidia-nccl-*) when it is not on the
# library path already; NVLink SHARP (multicast) stays off.
#   bash gpu-dist/run.sh            (from the repository root)
# ONLY="devices dist" runs only the steps named (devices dist runtime_graph
# tile_runtime tp_mlp tp_mlp_ragged tp_mlp_1gpu tp_mlp_bench allreduce_256
# torch_allreduce_256); each step has STEP_TIMEOUT seconds (default 300).
set -uo pipefail
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/dist-logs}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export TILE_CACHE_DIR=$(mktemp -d)

# libnccl.so.2 (and libnvrtc) from the Python packages; the runtime loads
# libnccl.so, so a link by that name goes first on the path.
libdir() {
  python3 - "$1" <<'PY' 2>/dev/null
import glob, os, site, sys
roots = []
try:
    roots += site.getsitepackages()
except Exception:
    pass
roots += [site.getusersitepackages()] + sys.path
for r in roots:
    hits = sorted(glob.glob(os.path.join(r, "nvidia", "**", sys.argv[1]), recursive=True))
    if hits:
        print(os.path.dirname(hits[0]))
        break
PY
}
LINKS=$(mktemp -d)
NCCL_DIR=$(libdir 'libnccl.so.2')
if [ -n "$NCCL_DIR" ]; then
  ln -s "$NCCL_DIR/libnccl.so.2" "$LINKS/libnccl.so"
  export LD_LIBRARY_PATH="$LINKS:$NCCL_DIR:${LD_LIBRARY_PATH:-}"
fi
NVRTC_DIR=$(libdir 'libnvrtc.so.1[0-9]*')
[ -n "$NVRTC_DIR" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$NVRTC_DIR"

{
  date -u
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  nvidia-smi topo -m 2>/dev/null | head -20
  echo "NCCL library folder: ${NCCL_DIR:-none found}"
  echo "NVRTC library folder: ${NVRTC_DIR:-none found}"
  env | grep -E '^(NCCL_|LD_LIBRARY_PATH|TILE_)' | sort
} > "$OUT/env.log" 2>&1
cat "$OUT/env.log"

rows=()
run() {
  local name=$1; shift
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  echo "--- $name: $*"
  timeout "${STEP_TIMEOUT:-300}" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  tail -40 "$OUT/$name.log"
  if [ $rc -eq 0 ]; then rows+=("PASS  $name  $(grep -v '^$' "$OUT/$name.log" | tail -1 | cut -c1-150)")
  else rows+=("FAIL  $name  (exit $rc) $(tail -1 "$OUT/$name.log" | cut -c1-150)"); fi
}

run devices        "$B/tests/devices" --test-threads=1 --nocapture
run dist           "$B/tests/dist" --test-threads=1 --nocapture
[ -x "$B/tests/runtime_graph" ] && run runtime_graph "$B/tests/runtime_graph" --test-threads=4
[ -x "$B/tests/tile_runtime" ] && run tile_runtime "$B/tests/tile_runtime" --test-threads=4
run tp_mlp         "$B/tensor_parallel_mlp"
run tp_mlp_ragged  "$B/tensor_parallel_mlp" 1000 1032 1000
run tp_mlp_1gpu    "$B/tensor_parallel_mlp" --gpus 1 2048 4096 16384
run tp_mlp_bench   "$B/tensor_parallel_mlp" --bench
run allreduce_256  "$B/tensor_parallel_mlp" --allreduce 256

if python3 -c 'import torch, torch.distributed' 2>/dev/null; then
  run torch_allreduce_256 python3 - <<'PY'
# The NCCL all-reduce of 256 MiB (f32) through torch.distributed, world size 1
# (one process, one GPU): the same library call as tile's, without tile.
import os, tempfile, torch, torch.distributed as dist
store = tempfile.mktemp()
dist.init_process_group("nccl", init_method=f"file://{store}", rank=0, world_size=1,
                        device_id=torch.device("cuda:0"))
n = 256 << 18
x = torch.ones(n, dtype=torch.float32, device="cuda")
y = torch.empty_like(x)
print("torch", torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))
for label, f in [("in place", lambda: dist.all_reduce(x)),
                 ("copy, then in place", lambda: (y.copy_(x), dist.all_reduce(y)))]:
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    ts.sort(); t = ts[len(ts) // 2]
    print(f"torch all-reduce 256 MiB f32 over 1 rank, {label}: {t * 1e3:.3f} ms, "
          f"algbw {4 * n / t / 1e9:.1f} GB/s")
dist.destroy_process_group()
PY
fi

printf '%s\n' "${rows[@]}" | tee "$OUT/summary.log"
