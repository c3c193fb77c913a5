"""Which kernel cuBLAS runs for a GEMM shape, for comparing tile's tiling
with it (the 1000^3 rows of bench/RESULTS.md): run under Nsight Compute,
one launch per shape (`CUBLAS_KERNELS_NO_TIMING=1`), it lists the kernel's
name (tile shape, stages, cluster and split-K are in it), grid, block,
cluster and shared memory; run alone, it times each shape (median of 50
CUDA-event timed runs after warm-up; random normal f16 inputs).

    python3 bench/cublas_kernels.py [MxNxK ...]
    CUBLAS_KERNELS_NO_TIMING=1 ncu --clock-control none --csv \\
      --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,\\
launch__cluster_dim_x,launch__cluster_dim_y,launch__shared_mem_per_block_dynamic,\\
launch__registers_per_thread,launch__grid_dim_x,launch__grid_dim_y,launch__grid_dim_z \\
      python3 bench/cublas_kernels.py [MxNxK ...]
"""
import os
import sys

import torch

DEFAULT = ["1000x1000x1000", "1000x1000x4000", "1000x1000x256", "2000x1000x1000",
           "1000x1030x1050", "127x8192x8192", "4096x4096x4096", "16x8192x8192"]


def main():
    untimed = os.environ.get("CUBLAS_KERNELS_NO_TIMING")
    for shape in sys.argv[1:] or DEFAULT:
        m, n, k = (int(x) for x in shape.split("x"))
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = a @ b
        torch.cuda.synchronize()
        if untimed:
            continue
        for _ in range(10):
            c = a @ b
        ts = []
        for _ in range(50):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            c = a @ b
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) / 1e3)
        ts.sort()
        t = ts[len(ts) // 2]
        print(f"{shape}: {t * 1e6:.1f} us, {2 * m * n * k / t / 1e12:.1f} TFLOP/s", flush=True)
    del c


if __name__ == "__main__":
    main()
