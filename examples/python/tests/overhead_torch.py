"""Where the host time of one tile_example.vecadd call on torch CUDA tensors
goes: the whole call (with and without an explicit stream), torch.add for
scale, and the Python-level pieces tile's import runs per argument (torch's
current stream, __dlpack_device__, __dlpack__ with a stream). Host time per
call, mean over 2000 calls after 100 warm-up calls, at n = 4096 (the GPU
work is a few microseconds, so the host sets the pace). Prints the figures;
asserts nothing about speed."""

import time

import tile_example
import torch


def per_call(f, reps=2000):
    for _ in range(100):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        f()
    dt = (time.perf_counter() - t) / reps
    torch.cuda.synchronize()
    return dt * 1e6


n = 1 << 12
a = torch.randn(n, device="cuda")
b = torch.randn_like(a)
c = torch.empty_like(a)
h = torch.cuda.current_stream().cuda_stream
s = h if h else 1  # DLPack's name for the legacy default stream


def three_imports():
    for t in (a, b, c):
        t.__dlpack_device__()
        t.__dlpack__(stream=s)


rows = [
    ("tile_example.vecadd(a, b, c)", lambda: tile_example.vecadd(a, b, c)),
    ("tile_example.vecadd(a, b, c, stream=h)", lambda: tile_example.vecadd(a, b, c, stream=h)),
    ("torch.add(a, b, out=c)", lambda: torch.add(a, b, out=c)),
    ("torch.cuda.current_stream(0).cuda_stream", lambda: torch.cuda.current_stream(0).cuda_stream),
    ("a.__dlpack_device__()", lambda: a.__dlpack_device__()),
    ("a.__dlpack__(stream=h)", lambda: a.__dlpack__(stream=s)),
    ("3 x (__dlpack_device__, __dlpack__)", three_imports),
]
for label, f in rows:
    print(f"{label:<45} {per_call(f):8.2f} us per call (host)")
tile_example.vecadd(a, b, c)
torch.testing.assert_close(c, a + b)
