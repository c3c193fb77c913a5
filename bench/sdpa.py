"""torch SDPA at the shapes of examples/flash_attention.rs (BENCH_SHAPES) and
the decoding shape, on the GPU, for the attention rows of bench/RESULTS.md.

FLOPs: 4 * B * H * Sq * Skv * D for the two products, halved when causal
(the convention of FlashAttention's and torch's benchmarks). Median of 50
CUDA-event timed runs after 5 warm-up runs; inputs are standard normal f16.
    python3 bench/sdpa.py [sweep | time B,H,HKV,S,D[,causal] ...]
"""
import sys

import torch
import torch.nn.functional as F


def bench(f, reps=50):
    for _ in range(5):
        f()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def forward(b, h, hkv, sq, skv, d, causal, dtype=torch.float16):
    """Times SDPA's forward at one shape on standard normal inputs and prints
    its line (`bf16` after `SDPA` for bfloat16)."""
    q = torch.randn(b, h, sq, d, dtype=dtype, device="cuda")
    k = torch.randn(b, hkv, skv, d, dtype=dtype, device="cuda")
    v = torch.randn(b, hkv, skv, d, dtype=dtype, device="cuda")
    gqa = {"enable_gqa": True} if hkv != h else {}
    t = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa))
    flops = 4 * b * h * sq * skv * d / (2 if causal else 1)
    name = " bf16" if dtype == torch.bfloat16 else ""
    print(
        f"torch SDPA{name} b={b} h={h} hkv={hkv} sq={sq} skv={skv} d={d}{' causal' if causal else ''}: "
        f"{t * 1e3:.3f} ms, {flops / t / 1e12:.1f} TFLOP/s"
    )


# `python3 bench/sdpa.py sweep`: head dim 128 at the key lengths of
# `flash_attention sweep` (SWEEP_SHAPES there: whole waves of 132 blocks of
# 128 query rows), non-causal then causal, and nothing else.
SWEEP = [(1, 2112, 1024), (1, 528, 2048), (1, 132, 4096), (1, 33, 8192), (1, 33, 16384)]
if sys.argv[1:] == ["sweep"]:
    for causal in (False, True):
        for b, h, s in SWEEP:
            forward(b, h, h, s, s, 128, causal)
    sys.exit(0)

# `python3 bench/sdpa.py time B,H,HKV,S,D[,causal] ...`: those shapes only
# (the shapes of `flash_attention time B H HKV S D [causal]`).
if sys.argv[1:2] == ["time"]:
    for arg in sys.argv[2:]:
        b, h, hkv, s, d, *causal = arg.split(",")
        b, h, hkv, s, d = map(int, (b, h, hkv, s, d))
        forward(b, h, hkv, s, s, d, causal == ["causal"])
    sys.exit(0)

# (B, H, HKV, Sq, Skv, D, causal)
SHAPES = [
    (4, 32, 32, 4096, 4096, 128, False),
    (4, 32, 32, 4096, 4096, 128, True),
    (1, 64, 64, 4096, 4096, 64, False),
    (8, 16, 16, 1024, 1024, 64, False),
    (1, 32, 8, 4096, 4096, 128, False),
    (1, 64, 64, 4096, 4096, 64, True),
    (4, 16, 16, 4096, 4096, 256, False),
    (4, 16, 16, 4096, 4096, 256, True),
    (32, 32, 32, 1, 8192, 128, False),
]

for shape in SHAPES:
    forward(*shape)

# bf16 at the D128 shapes (the example times bf16 there too).
for shape in SHAPES[:2]:
    forward(*shape, dtype=torch.bfloat16)

# Backward (dQ, dK, dV) of SDPA: the time of out.backward(dO) alone; FLOPs
# 2.5x the forward's (the FlashAttention convention).
for b, h, s, d in [(1, 64, 4096, 64), (4, 32, 4096, 128)]:
    q, k, v = (torch.randn(b, h, s, d, dtype=torch.float16, device="cuda", requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v)
    d_o = torch.randn_like(out)
    t = bench(lambda: out.backward(d_o, retain_graph=True))
    flops = 2.5 * 4 * b * h * s * s * d
    print(f"torch SDPA backward b={b} h={h} s={s} d={d}: {t * 1e3:.3f} ms, {flops / t / 1e12:.1f} TFLOP/s")
