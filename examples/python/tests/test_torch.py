"""tile_example on PyTorch tensors: CUDA tensors on torch's current stream (zero copy),
CPU tensors on the CPU backend. Skips what it cannot run (no torch, no GPU). Runs under
pytest, or as a plain script printing one 'N passed, N failed' line."""

import tile_example

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def skip(why):
    print(f"skipped: {why}")
    return True


def test_cpu_tensors():
    if torch is None and skip("torch is not installed"):
        return
    a = torch.arange(5000, dtype=torch.float32)
    c = torch.empty_like(a)
    tile_example.vecadd(a, a, c)
    assert torch.equal(c, 2 * a)


def test_cuda_tensors_on_the_current_stream():
    if (torch is None or not torch.cuda.is_available()) and skip("no torch CUDA device"):
        return
    n = 1 << 22
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = torch.randn(n, device="cuda")
        b = torch.randn(n, device="cuda")
        c = torch.empty_like(a)
        ptr = c.data_ptr()
        tile_example.vecadd(a, b, c)  # queued on s, after the randn above
        d = c * 2  # queued after the kernel
    s.synchronize()
    assert c.data_ptr() == ptr
    torch.testing.assert_close(c, a + b)
    torch.testing.assert_close(d, 2 * (a + b))
    # The default stream and an explicit stream argument work too.
    tile_example.vecadd(a, b, c)
    tile_example.vecadd(a, a, c, stream=torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, 2 * a)


def test_cuda_errors_carry_tiles_text():
    if (torch is None or not torch.cuda.is_available()) and skip("no torch CUDA device"):
        return
    a = torch.zeros(64, device="cuda")
    try:
        tile_example.vecadd(a, a, torch.zeros(64, device="cuda", dtype=torch.float16))
    except tile_example.TileError as e:
        assert "DLPack dtype mismatch, expected float32, got float16" in str(e), str(e)
    else:
        raise AssertionError("no TileError")
    try:
        tile_example.vecadd(a, a.cpu(), torch.zeros(64, device="cuda"))
    except tile_example.TileError as e:
        assert "DLPack tensor is on cpu, the stream given on cuda:0" in str(e), str(e)
    else:
        raise AssertionError("no TileError")


if __name__ == "__main__":
    import sys
    import traceback

    tests = [(k, v) for k, v in sorted(globals().items()) if k.startswith("test_") and callable(v)]
    failed = 0
    for name, fn in tests:
        try:
            fn()
            print(f"PASS {name}")
        except Exception:
            failed += 1
            print(f"FAIL {name}")
            traceback.print_exc()
    print(f"{len(tests) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
