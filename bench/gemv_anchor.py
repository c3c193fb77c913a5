"""What the H200 gives a memory-bound GEMV, for the gemv rows of
bench/RESULTS.md: the device-to-device copy bandwidth (bytes read plus
written), a read-only pass (torch's f32-accumulating sum), and cuBLAS's own
f16 GEMV (`torch.mv`) at 8192 x 8192, each over four rotating operands (so
that none is found in L2, 50 MB) and as a fraction of the copy. Median of
200 CUDA-event timed runs after 10 warm-up runs, each behind a 0.1 ms spin
on the GPU (so that the host's launch cost is not timed with the kernel);
random normal inputs; the GPU is kept busy for a second first, so that its
clocks are up.
    python3 bench/gemv_anchor.py
"""
import time

import torch


def bench(f, reps=200):
    for i in range(10):
        f(i)
    ts = []
    for i in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000)
        s.record()
        f(i)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    n = k = 8192
    dev = "cuda"
    src = [torch.randn(n, k, device=dev, dtype=torch.float16) for _ in range(4)]
    dst = torch.empty_like(src[0])
    nbytes = src[0].numel() * 2
    end = time.time() + 1.0
    while time.time() < end:
        dst.copy_(src[0])
        torch.cuda.synchronize()
    t = bench(lambda i: dst.copy_(src[i % 4]))
    copy_bw = 2 * nbytes / t
    print(f"copy 8192x8192 f16: {t * 1e6:.1f} us, {copy_bw / 1e9:.0f} GB/s (read + written)")
    t = bench(lambda i: src[i % 4].sum(dtype=torch.float32))
    print(f"sum (read only) 8192x8192 f16: {t * 1e6:.1f} us, {nbytes / t / 1e9:.0f} GB/s, "
          f"{nbytes / t / copy_bw:.3f} of copy")
    x = torch.randn(k, device=dev, dtype=torch.float16)
    t = bench(lambda i: torch.mv(src[i % 4], x))
    moved = (n * k + n + k) * 2
    print(f"torch.mv (cuBLAS) f16 8192x8192: {t * 1e6:.1f} us, {moved / t / 1e9:.0f} GB/s, "
          f"{moved / t / copy_bw:.3f} of copy")
    # A quarter of the bytes, as W4A16 reads: how a 32 MiB read-only pass fares.
    quarter = [s[: n // 4] for s in src]
    t = bench(lambda i: quarter[i % 4].sum(dtype=torch.float32))
    print(f"sum (read only) 2048x8192 f16 (32 MiB): {t * 1e6:.1f} us, "
          f"{nbytes / 4 / t / 1e9:.0f} GB/s, {nbytes / 4 / t / copy_bw:.3f} of copy")


if __name__ == "__main__":
    main()
