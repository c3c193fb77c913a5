#!/usr/bin/env bash
# Runs prebuilt example and test binaries on a CUDA machine and prints a
# table last. Build them on any machine first (see README, "Running on a GPU
# machine"): the binaries load libcuda at run time, so a GPU-less build runs.
#   bash bench/gpu_run.sh [BUNDLE_DIR]
# NO_SANITIZERS=1 skips the compute-sanitizer section; SANITIZERS_ONLY=1 runs
# only that section; NO_BENCH=1 skips the full `bench` run (minutes). The
# whole script takes longer than one 10-minute call on the H200: run it as
# NO_SANITIZERS=1 NO_BENCH=1, then SANITIZERS_ONLY=1.
set -uo pipefail
B=${1:-gpu-bundle}
export TILE_DEVICE=cuda
export TILE_CACHE_DIR=$(mktemp -d)
export TILE_BIN=$(cd "$B" && pwd)/tile
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
rows=()
run() {
  local name=$1; shift
  local out
  out=$("$@" 2>&1); local rc=$?
  echo "--- $name: $*"; echo "$out"
  if [ $rc -eq 0 ]; then rows+=("PASS  $name  $(echo "$out" | grep -v '^$' | tail -1 | cut -c1-150)")
  else rows+=("FAIL  $name  (exit $rc) $(echo "$out" | tail -1 | cut -c1-150)"); fi
}
# SANITIZERS_ONLY=1 runs only the compute-sanitizer section (it is the slow part).
if [ -z "${SANITIZERS_ONLY:-}" ]; then
run vecadd_2p28            "$B/vecadd"
run vecadd_2p28_again      "$B/vecadd"
run vecadd_2047            "$B/vecadd" 2047
run vecadd_ragged_vec      "$B/vecadd" 1000000
run vecadd_nvrtc           env TILE_NO_AOT=1 "$B/vecadd" 1000000
run vecadd_buffered        "$B/vecadd_buffered"
run vecadd_buffered_ragged "$B/vecadd_buffered" 1000003
run elementwise_2d         "$B/elementwise_2d" 4096 4096
run elementwise_2d_ragged  "$B/elementwise_2d" 1000 1030
run elementwise_2d_ragged_vec "$B/elementwise_2d" 1000 1032
run quickstart             "$B/quickstart"
run quickstart_ragged      "$B/quickstart" 67 129 33
run quickstart_nvrtc       env TILE_NO_AOT=1 "$B/quickstart" 255 257 129
for e in softmax rmsnorm layernorm cumsum; do
  [ -x "$B/$e" ] && run "$e" "$B/$e" && run "${e}_ragged" "$B/$e" 77
done
[ -x "$B/reduce_sum" ] && run reduce_sum "$B/reduce_sum" && run reduce_sum_ragged "$B/reduce_sum" 77 5000
[ -x "$B/gemm" ] && run gemm_ragged "$B/gemm" 1000 1030 1050 && run gemm_aligned "$B/gemm" 1024 1024 1024 && run gemm_tiny "$B/gemm" 67 129 33 && run gemm_ragged_vec "$B/gemm" 1000 1000 1000
[ -x "$B/gemm_any_pitch" ] && run gemm_any_pitch "$B/gemm_any_pitch" && run gemm_any_pitch_large "$B/gemm_any_pitch" 1000 1030 1050
[ -x "$B/gemm_int8" ] && run gemm_int8 "$B/gemm_int8" && run gemm_int8_ragged "$B/gemm_int8" 67 129 33
[ -x "$B/gemm_fp8" ] && run gemm_fp8 "$B/gemm_fp8" && run gemm_fp8_aligned "$B/gemm_fp8" 1024 1024 1024 && run gemm_fp8_ragged "$B/gemm_fp8" 67 130 37
[ -x "$B/gemm_splitk" ] && run gemm_splitk "$B/gemm_splitk" && run gemm_splitk_decode "$B/gemm_splitk" 16 4096 11008 && run gemm_splitk_ragged "$B/gemm_splitk" 3 70 333
[ -x "$B/flash_attention" ] && run flash_attention "$B/flash_attention" && run flash_attention_ragged "$B/flash_attention" 2 8 2 1000
[ -x "$B/flash_attention_bwd" ] && run flash_attention_bwd "$B/flash_attention_bwd" && run flash_attention_bwd_ragged "$B/flash_attention_bwd" 2 3 1000
[ -x "$B/flash_decoding" ] && run flash_decoding "$B/flash_decoding" && run flash_decoding_ragged "$B/flash_decoding" 3 8 2 777
[ -x "$B/gemv" ] && run gemv "$B/gemv" && run gemv_ragged "$B/gemv" 1001 3000
[ -x "$B/transpose" ] && run transpose "$B/transpose" && run transpose_ragged "$B/transpose" 1000 1030
[ -x "$B/gelu_bias" ] && run gelu_bias "$B/gelu_bias" && run gelu_bias_ragged "$B/gelu_bias" 200 130 150
[ -x "$B/launch_overhead" ] && run launch_overhead "$B/launch_overhead"
[ -x "$B/bench" ] && [ -z "${NO_BENCH:-}" ] && run bench "$B/bench"
for t in "$B"/tests/*; do
  [ -x "$t" ] && run "test:$(basename "$t")" "$t" --test-threads=4
done
if command -v python3 > /dev/null; then
  run torch_baseline python3 - <<'PY'
import torch
def bench(f, reps=50):
    for _ in range(5): f()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    ts.sort(); return ts[len(ts) // 2]
n = 1 << 28
a = torch.randn(n, dtype=torch.float16, device="cuda"); b = torch.randn_like(a); c = torch.empty_like(a)
t_add = bench(lambda: torch.add(a, b, out=c))
x = torch.randn(1 << 29, dtype=torch.float16, device="cuda"); y = torch.empty_like(x)
t_cp = bench(lambda: y.copy_(x))
print(f"torch fp16 add 2^28: {6 * n / t_add / 1e9:.0f} GB/s; device copy 1 GiB: {2 * x.numel() * 2 / t_cp / 1e9:.0f} GB/s")
import torch.nn.functional as F
q, k, v = (torch.randn(1, 64, 4096, 64, dtype=torch.float16, device="cuda") for _ in range(3))
t_sdpa = bench(lambda: F.scaled_dot_product_attention(q, k, v))
print(f"torch SDPA fp16 64 heads x 4096, d=64: {t_sdpa * 1e3:.3f} ms, {4 * 64 * 4096**2 * 64 / t_sdpa / 1e12:.1f} TFLOP/s")
PY
  # The attention benchmark's shapes (examples/flash_attention.rs, BENCH_SHAPES).
  run torch_sdpa python3 "$(dirname "$0")/sdpa.py"
  # The Python example on torch CUDA tensors (zero copy, torch's stream), and
  # its vecadd against torch.add, when the bundle has the extension.
  if ls "$B"/py/tile_example*.so > /dev/null 2>&1; then
    run python_torch env PYTHONPATH="$B/py" python3 "$(dirname "$0")/../examples/python/tests/test_torch.py"
    run python_torch_bench env PYTHONPATH="$B/py" python3 "$(dirname "$0")/../examples/python/tests/bench_torch.py"
    run python_torch_overhead env PYTHONPATH="$B/py" python3 "$(dirname "$0")/../examples/python/tests/overhead_torch.py"
  fi
fi
fi
# compute-sanitizer on every example at a ragged size (each example checks
# its output against a host reference; --error-exitcode makes a finding FAIL).
# The *_ragged_vec runs have a ragged edge whose row length is a multiple of
# the vector width, so the edge moves whole vectors under one guard per chunk.
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2> /dev/null | head -1)
if [ -n "$CS" ] && [ -z "${NO_SANITIZERS:-}" ]; then
  # RC_SKIP: kernels (a name substring) racecheck leaves out for one call.
  san() {
    local name=$1; shift
    [ -x "$1" ] || return 0
    for tool in memcheck racecheck; do
      local skip=()
      if [ "$tool" = racecheck ] && [ -n "${RC_SKIP:-}" ]; then skip=(--kernel-name-exclude "kns=$RC_SKIP"); fi
      run "$tool:$name" "$CS" --tool "$tool" "${skip[@]}" --error-exitcode 1 "$@"
    done
  }
  san vecadd "$B/vecadd" 2047
  san vecadd_ragged_vec "$B/vecadd" 100004
  san vecadd_buffered "$B/vecadd_buffered" 100003
  san elementwise_2d "$B/elementwise_2d" 100 130
  san elementwise_2d_ragged_vec "$B/elementwise_2d" 100 132
  san quickstart "$B/quickstart" 67 129 33
  for e in softmax rmsnorm layernorm cumsum; do san "$e" "$B/$e" 77; done
  san reduce_sum "$B/reduce_sum" 77 5000
  # The NN variants by label, unclustered and in pairs, each in its own process:
  # racecheck faults ("failed to handle a hardware exception") on a clustered
  # launch in a process that ran the other GEMMs and the tuner first, while
  # every variant is clean alone (bench/RESULTS.md, 2026-12-04, fifth session).
  # The whole example still runs under memcheck.
  san gemm_nn "$B/gemm" 200 130 150 cluster=1
  san gemm_nn_pairs "$B/gemm" 200 130 150 cluster=2
  # K split over clusters (`T::use_split_k`): partial sums read from another
  # block's shared memory.
  san gemm_nn_split "$B/gemm" 200 130 150 splits=2
  # Each fixed kernel of the example, then the pairs, in one process: which
  # earlier kernel the clustered launch's fault under racecheck needs.
  for k in gemm_nn_f16 gemm_nn_bf16 gemm_nt gemm_tn gemm_persistent_f16 gemm_persistent_bf16; do
    san "${k}_then_pairs" "$B/gemm" 200 130 150 "$k+cluster=2"
  done
  run "memcheck:gemm" "$CS" --tool memcheck --error-exitcode 1 "$B/gemm" 200 130 150
  san gemm_ragged_vec "$B/gemm" 200 136 150 cluster=1
  san gemm_int8 "$B/gemm_int8" 67 129 33
  san gemm_any_pitch "$B/gemm_any_pitch" 131 135 139
  # Even pitches off 16 bytes (K = 66, N = 130): A and B as 4-byte words.
  san gemm_even_pitch "$B/gemm" 258 130 66 gemm_nn
  san gemm_fp8 "$B/gemm_fp8" 200 264 160
  san gemm_splitk "$B/gemm_splitk" 33 264 520
  # racecheck reported a shared-memory exchange after bar.arrive turns as a
  # hazard, even one ordered by __syncthreads() (bench/racecheck/pingpong.cu),
  # so the head-dim-128 and -256 kernels (`flash_attention_d*`), whose two
  # warpgroups take turns by bar.arrive, are left out of racecheck; built with
  # ping-pong off their output exchange was clean, and with it the reports
  # are all between that exchange's shared stores and loads, across a
  # MEMBAR, a proxy fence and the consumers' BAR.SYNC (bench/RESULTS.md,
  # 2026-12-05).
  RC_SKIP=flash_attention_d san flash_attention "$B/flash_attention" 1 4 2 130
  # More query tiles than the persistent D64 kernels' 264 blocks (768: each
  # block reloads Q for a second and third tile), GQA, ragged S.
  RC_SKIP=flash_attention_d san flash_attention_persistent "$B/flash_attention" 8 32 8 260
  # Head dim 64 causal launches a block per query tile (heaviest first)
  # where the persistent kernel's fixed order is uneven (`persistent_balances`):
  # 300 one-tile heads over 264 blocks.
  RC_SKIP=flash_attention_d san flash_attention_grid "$B/flash_attention" 1 300 3 100
  san flash_decoding "$B/flash_decoding" 1 8 2 300
  san flash_attention_bwd "$B/flash_attention_bwd" 1 2 130
  san gemv "$B/gemv" 37 1000
  san transpose "$B/transpose" 100 130
  san gelu_bias "$B/gelu_bias" 67 130 72
  # The conformance suite's tiles whose warp split is off the planner's table,
  # and three consumer warpgroups in clusters of four (tests/kernels).
  san kernels_odd_widths "$B/tests/kernels" odd_widths --test-threads=1
  san kernels_clusters "$B/tests/kernels" clusters --test-threads=1
  # A tile the warp-specialized producer copies ahead of its stages
  # (`prologue=(a_s)`), on one and two consumer warpgroups.
  san kernels_prologue "$B/tests/kernels" prologue --test-threads=1
fi
echo
echo "================ summary ================"
printf '%s\n' "${rows[@]}"
