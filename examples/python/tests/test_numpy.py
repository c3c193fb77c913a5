"""tile_example on NumPy arrays (the CPU backend): results, zero copy, and tile's
argument checks raised as tile_example.TileError. Runs under pytest, or as a plain
script that prints one 'N passed, N failed' line and exits non-zero on a failure."""

import numpy as np

import tile_example


def raises(fn, text):
    try:
        fn()
    except tile_example.TileError as e:
        assert text in str(e), f"{text!r} not in {str(e)!r}"
        return str(e)
    raise AssertionError(f"no TileError (expected {text!r})")


def test_vecadd_writes_the_output_in_place():
    n = 10_000
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.5, dtype=np.float32)
    c = np.zeros(n, dtype=np.float32)
    before = c.ctypes.data
    tile_example.vecadd(a, b, c)
    assert c.ctypes.data == before
    np.testing.assert_array_equal(c, a + b)


def test_ragged_and_empty_lengths():
    for n in (1, 3, 1023, 1025):
        a = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        c = np.empty_like(a)
        tile_example.vecadd(a, a, c)
        np.testing.assert_allclose(c, 2 * a)
    e = np.zeros(0, dtype=np.float32)
    tile_example.vecadd(e, e, e)


def test_in_place_through_the_same_array():
    a = np.arange(4096, dtype=np.float32)
    b = np.ones(4096, dtype=np.float32)
    tile_example.vecadd(a, b, a)
    np.testing.assert_array_equal(a, np.arange(4096, dtype=np.float32) + 1)
    alpha = np.array([2.0], dtype=np.float32)
    tile_example.axpy(b, a, alpha)
    np.testing.assert_array_equal(a, np.arange(4096, dtype=np.float32) + 3)


def test_dtype_is_checked_strictly():
    a = np.zeros(8, dtype=np.float64)
    c = np.zeros(8, dtype=np.float32)
    raises(lambda: tile_example.vecadd(a, a, c), "DLPack dtype mismatch, expected float32, got float64")
    i = np.zeros(8, dtype=np.int32)
    raises(lambda: tile_example.vecadd(i, i, c), "expected float32, got int32")


def test_shape_stride_and_alignment_checks():
    a = np.zeros(64, dtype=np.float32)
    raises(
        lambda: tile_example.vecadd(a, a, np.zeros(63, dtype=np.float32)),
        "kernel vecadd input c shape mismatch: dim 0 expected 64 (N bound by a), got 63",
    )
    big = np.zeros(128, dtype=np.float32)
    raises(
        lambda: tile_example.vecadd(big[::2], a, np.zeros(64, dtype=np.float32)),
        "kernel vecadd input a stride mismatch: dim 0 expected 1, got 2",
    )
    raises(
        lambda: tile_example.vecadd(big[1:65], a, np.zeros(64, dtype=np.float32)),
        "kernel vecadd input a misaligned",
    )
    raises(
        lambda: tile_example.vecadd(a.reshape(8, 8), a.reshape(8, 8), a.reshape(8, 8)),
        "kernel vecadd input a ndim mismatch, expected 1, got 2",
    )


def test_overlapping_arrays_are_refused_and_untouched():
    x = np.arange(80, dtype=np.float32)
    b = np.ones(64, dtype=np.float32)
    raises(lambda: tile_example.vecadd(x[:64], b, x[4:68]), "kernel vecadd input c overlaps input a")
    np.testing.assert_array_equal(x, np.arange(80, dtype=np.float32))


def test_sources_are_exposed():
    assert "vecadd" in tile_example.source("vecadd", "cpu")
    assert "__global__" in tile_example.source("vecadd", "cuda")


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
