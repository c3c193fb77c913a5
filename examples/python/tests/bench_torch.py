"""tile_example.vecadd against torch.add on CUDA tensors, in one process: the
kernel reads and writes torch's memory in place (DLPack, no copy) on torch's
current stream. Median of 50 CUDA-event timed calls after 5 warm-up calls, each
call including tile's import of the three tensors and its launch checks.
Prints the figures; asserts nothing about speed."""

import tile_example
import torch


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


for n in (1 << 12, 1 << 20, 1 << 26):
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.full_like(a, float("nan"))
    ptr = c.data_ptr()
    tile_example.vecadd(a, b, c)
    torch.testing.assert_close(c, a + b)
    assert c.data_ptr() == ptr, "the output moved"
    t_tile = bench(lambda: tile_example.vecadd(a, b, c))
    t_torch = bench(lambda: torch.add(a, b, out=c))
    gbs = lambda t: 12 * n / t / 1e9
    print(
        f"vecadd f32 n={n}: tile {t_tile * 1e6:.1f} us ({gbs(t_tile):.0f} GB/s), "
        f"torch.add {t_torch * 1e6:.1f} us ({gbs(t_torch):.0f} GB/s), ratio {t_torch / t_tile:.2f}"
    )
