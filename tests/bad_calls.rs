//! Launches with wrong arguments: each is refused with its named error before
//! anything runs, the message names the kernel, the buffer and the field, and
//! the output tensor is left exactly as it was.
//!
//! Everything runs on `Device::Cpu` (chosen explicitly). Cases that need a
//! second device run only where CUDA is usable; elsewhere the check itself is
//! exercised through `tile_runtime::check_args` and the error's `Display`.

use tile::prelude::*;
use tile::testing::random_tensor;
use tile_runtime::{check_args, ArgRef};

const CPU: Device = Device::Cpu;

/// Static shape: `n` is a compile-time parameter.
#[tile::kernel(n = 1024, block_n = 256, threads = 128)]
pub fn vecadd(a: Tensor<f32, (n,)>, b: Tensor<f32, (n,)>, c: TensorMut<f32, (n,)>) {
    T::kernel(T::ceildiv(n, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

/// Dynamic shape: `N` is bound by `a` and checked against `b` and `c`.
#[tile::kernel(block_n = 256, threads = 128)]
pub fn vecadd_dyn(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

/// Three dynamic dims, each bound by the first parameter that carries it.
#[tile::kernel(block_m = 16, block_n = 16, threads = 128)]
pub fn outer(a: Tensor<f32, (M, K)>, b: Tensor<f32, (K, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            for (i, j) in T::parallel([block_m, block_n]) {
                c[(by * block_m + i, bx * block_n + j)] =
                    a[(by * block_m + i, 0)] * b[(0, bx * block_n + j)];
            }
        },
    );
}

/// One dim used twice by the same parameter.
#[tile::kernel(block = 8, threads = 64)]
pub fn square(a: Tensor<f32, (N, N)>, c: TensorMut<f32, (N, N)>) {
    T::kernel(
        [T::ceildiv(N, block), T::ceildiv(N, block)],
        threads,
        |bx, by| {
            for (i, j) in T::parallel([block, block]) {
                c[(by * block + i, bx * block + j)] = a[(bx * block + j, by * block + i)];
            }
        },
    );
}

/// A grid that depends on the arguments in a way that can fail: one block per
/// element past the first four, and one block per chunk of `W` elements.
#[tile::kernel(threads = 32)]
pub fn skip4(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(N - 4, threads, |bx| {
        c[bx + 4] = a[bx + 4];
    });
}

#[tile::kernel(threads = 32)]
pub fn chunks(a: Tensor<f32, (N,)>, w: Tensor<f32, (W,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, W), threads, |bx| {
        for j in T::serial(W) {
            c[bx * W + j] = a[bx * W + j] * w[j];
        }
    });
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn rand(shape: &[usize], seed: u64) -> Tensor<f32> {
    random_tensor::<f32>(shape, seed, CPU).expect("allocate a random tensor")
}

/// Runs `call` on `out`, expects an error, and checks that `out` (and every
/// element of its storage that `whole` sees) is unchanged.
fn refused(whole: &Tensor<f32>, call: impl FnOnce() -> Result<(), Error>) -> Error {
    let before = whole.to_vec().expect("read before");
    let err = match call() {
        Ok(()) => panic!("the launch was expected to fail"),
        Err(e) => e,
    };
    let after = whole.to_vec().expect("read after");
    // Bitwise comparison: NaN poison must survive too.
    let same = before.len() == after.len()
        && before
            .iter()
            .zip(&after)
            .all(|(x, y)| x.to_bits() == y.to_bits());
    assert!(same, "a refused launch wrote to its output ({err})");
    err
}

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

#[test]
fn static_shape_mismatch() {
    let (a, b) = (rand(&[1000], 1), rand(&[1000], 2));
    let mut c = Tensor::full(&[1000], f32::NAN, CPU).expect("alloc");
    let snapshot = c.reshape(&[1000]).expect("view");
    let err = refused(&snapshot, || vecadd(&a, &b, &mut c));
    assert!(matches!(
        err,
        Error::ShapeMismatch {
            kernel: "vecadd",
            buffer: "a",
            dim: 0,
            expected: 1024,
            got: 1000,
            bound_by: None
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel vecadd input a shape mismatch: dim 0 expected 1024, got 1000"
    );

    // Only the output is wrong.
    let (a, b) = (rand(&[1024], 3), rand(&[1024], 4));
    let mut c = rand(&[1023], 5);
    let snapshot = c.reshape(&[1023]).expect("view");
    let err = refused(&snapshot, || vecadd(&a, &b, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel vecadd input c shape mismatch: dim 0 expected 1024, got 1023"
    );
}

#[test]
fn dynamic_dim_violated_by_later_param() {
    let (a, b) = (rand(&[1000], 10), rand(&[999], 11));
    let mut c = rand(&[1000], 12);
    let snapshot = c.reshape(&[1000]).expect("view");
    let err = refused(&snapshot, || vecadd_dyn(&a, &b, &mut c));
    assert!(matches!(
        err,
        Error::ShapeMismatch {
            kernel: "vecadd_dyn",
            buffer: "b",
            dim: 0,
            expected: 1000,
            got: 999,
            bound_by: Some(("N", "a"))
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel vecadd_dyn input b shape mismatch: dim 0 expected 1000 (N bound by a), got 999"
    );

    // The output is the one that disagrees.
    let (a, b) = (rand(&[64], 13), rand(&[64], 14));
    let mut c = rand(&[65], 15);
    let snapshot = c.reshape(&[65]).expect("view");
    let err = refused(&snapshot, || vecadd_dyn(&a, &b, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel vecadd_dyn input c shape mismatch: dim 0 expected 64 (N bound by a), got 65"
    );
}

#[test]
fn dims_bound_at_different_positions() {
    // K is bound by a's dim 1 and checked at b's dim 0.
    let (a, b) = (rand(&[20, 33], 20), rand(&[32, 40], 21));
    let mut c = rand(&[20, 40], 22);
    let snapshot = c.reshape(&[800]).expect("view");
    let err = refused(&snapshot, || outer(&a, &b, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel outer input b shape mismatch: dim 0 expected 33 (K bound by a), got 32"
    );

    // M is bound by a, N by b; c disagrees in its dim 1 (N).
    let (a, b) = (rand(&[20, 33], 23), rand(&[33, 40], 24));
    let mut c = rand(&[20, 41], 25);
    let snapshot = c.reshape(&[820]).expect("view");
    let err = refused(&snapshot, || outer(&a, &b, &mut c));
    assert!(matches!(
        err,
        Error::ShapeMismatch {
            buffer: "c",
            dim: 1,
            bound_by: Some(("N", "b")),
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel outer input c shape mismatch: dim 1 expected 40 (N bound by b), got 41"
    );

    // c disagrees in its dim 0 (M, bound by a).
    let mut c = rand(&[21, 40], 26);
    let snapshot = c.reshape(&[840]).expect("view");
    let err = refused(&snapshot, || outer(&a, &b, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel outer input c shape mismatch: dim 0 expected 20 (M bound by a), got 21"
    );

    // And the good call works, so the checks above are not refusing everything.
    let mut c = Tensor::full(&[20, 40], f32::NAN, CPU).expect("alloc");
    outer(&a, &b, &mut c).expect("valid call");
    let (av, bv, cv) = (
        a.to_vec().expect("a"),
        b.to_vec().expect("b"),
        c.to_vec().expect("c"),
    );
    for i in 0..20 {
        for j in 0..40 {
            assert_eq!(cv[i * 40 + j], av[i * 33] * bv[j], "outer[{i}, {j}]");
        }
    }
}

#[test]
fn same_dim_twice_in_one_param() {
    let a = rand(&[3, 4], 30);
    let mut c = rand(&[3, 3], 31);
    let snapshot = c.reshape(&[9]).expect("view");
    let err = refused(&snapshot, || square(&a, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel square input a shape mismatch: dim 1 expected 3 (N bound by a), got 4"
    );

    let a = rand(&[5, 5], 32);
    let mut c = rand(&[5, 6], 33);
    let snapshot = c.reshape(&[30]).expect("view");
    let err = refused(&snapshot, || square(&a, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel square input c shape mismatch: dim 1 expected 5 (N bound by a), got 6"
    );

    // Valid: the transpose of a 13x13 matrix (does not divide the 8x8 tile).
    let a = rand(&[13, 13], 34);
    let mut c = Tensor::full(&[13, 13], f32::NAN, CPU).expect("alloc");
    square(&a, &mut c).expect("valid call");
    let (av, cv) = (a.to_vec().expect("a"), c.to_vec().expect("c"));
    for i in 0..13 {
        for j in 0..13 {
            assert_eq!(cv[i * 13 + j], av[j * 13 + i]);
        }
    }
}

// ---------------------------------------------------------------------------
// Rank
// ---------------------------------------------------------------------------

#[test]
fn wrong_ndim() {
    let a = rand(&[10, 100], 40);
    let b = rand(&[1000], 41);
    let mut c = rand(&[1000], 42);
    let snapshot = c.reshape(&[1000]).expect("view");
    let err = refused(&snapshot, || vecadd_dyn(&a, &b, &mut c));
    assert!(matches!(
        err,
        Error::NdimMismatch {
            kernel: "vecadd_dyn",
            buffer: "a",
            expected: 1,
            got: 2
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel vecadd_dyn input a ndim mismatch, expected 1, got 2"
    );

    // The same data viewed as 1-D is accepted.
    let a1 = a.reshape(&[1000]).expect("view");
    vecadd_dyn(&a1, &b, &mut c).expect("valid call");

    // A 1-D output for a 2-D kernel.
    let (a, b) = (rand(&[4, 4], 43), rand(&[4, 4], 44));
    let mut c = rand(&[16], 45);
    let snapshot = c.reshape(&[16]).expect("view");
    let err = refused(&snapshot, || outer(&a, &b, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel outer input c ndim mismatch, expected 2, got 1"
    );

    // A 3-D input.
    let a = rand(&[2, 2, 2], 46);
    let mut c = rand(&[2, 2], 47);
    let snapshot = c.reshape(&[4]).expect("view");
    let err = refused(&snapshot, || square(&a, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel square input a ndim mismatch, expected 2, got 3"
    );
}

// ---------------------------------------------------------------------------
// Strides and alignment
// ---------------------------------------------------------------------------

#[test]
fn transposed_input_is_a_stride_error() {
    // a is a [6, 6] view with strides [1, 6].
    let base = rand(&[6, 6], 50);
    let a = base.transpose(0, 1);
    assert!(!a.is_contiguous());
    let mut c = rand(&[6, 6], 51);
    let snapshot = c.reshape(&[36]).expect("view");
    let err = refused(&snapshot, || square(&a, &mut c));
    assert!(matches!(
        err,
        Error::StrideMismatch {
            kernel: "square",
            buffer: "a",
            dim: 1,
            expected: 1,
            got: 6,
            output: false,
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel square input a stride mismatch: dim 1 expected 1, got 6 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)"
    );

    // A non-square transpose into a kernel with independent dims.
    let base = rand(&[4, 6], 52);
    let a = base.transpose(0, 1); // [6, 4], strides [1, 6]
    let b = rand(&[4, 5], 53);
    let mut c = rand(&[6, 5], 54);
    let snapshot = c.reshape(&[30]).expect("view");
    let err = refused(&snapshot, || outer(&a, &b, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel outer input a stride mismatch: dim 1 expected 1, got 6 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)"
    );

    // The input really was not touched either.
    assert_eq!(
        base.to_vec().expect("base"),
        rand(&[4, 6], 52).to_vec().expect("fresh")
    );
}

#[test]
fn sliced_views_are_stride_errors() {
    // Columns 1..4 of an [8, 8] matrix: [8, 3] with strides [8, 1].
    let base = rand(&[8, 8], 55);
    let a = base.slice(1, 1..4).expect("slice");
    let b = rand(&[3, 2], 56);
    let mut c = rand(&[8, 2], 57);
    let snapshot = c.reshape(&[16]).expect("view");
    let err = refused(&snapshot, || outer(&a, &b, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel outer input a stride mismatch: dim 0 expected 3, got 8 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)"
    );

    // Rows 2..5 are contiguous and accepted.
    let rows = base.slice(0, 2..5).expect("slice");
    assert!(rows.is_contiguous());
    let b = rand(&[8, 2], 58);
    let mut c = Tensor::full(&[3, 2], f32::NAN, CPU).expect("alloc");
    outer(&rows, &b, &mut c).expect("contiguous row slice");
}

#[test]
fn non_contiguous_output_is_refused_and_untouched() {
    let (a, b) = (rand(&[5, 5], 60), rand(&[5, 5], 61));
    let out_base = Tensor::full(&[5, 5], f32::NAN, CPU).expect("alloc");
    let mut c = out_base.transpose(0, 1);
    let err = refused(&out_base, || outer(&a, &b, &mut c));
    assert_eq!(
        err.to_string(),
        "kernel outer output c stride mismatch: dim 1 expected 1, got 5 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)"
    );
}

#[test]
fn misaligned_view_is_refused_when_vectorized() {
    // The kernel's required alignment comes from its widest vector access.
    let align = vecadd_dyn::SPEC.params[0].align as usize;
    assert!(align >= 4 && align.is_power_of_two(), "align {align}");
    let base = rand(&[1025], 62);
    let a = base.slice(0, 1..1025).expect("slice"); // 4 bytes past an aligned start
    let b = rand(&[1024], 63);
    let mut c = rand(&[1024], 64);
    let snapshot = c.reshape(&[1024]).expect("view");
    if align > 4 {
        let err = refused(&snapshot, || vecadd_dyn(&a, &b, &mut c));
        assert!(matches!(
            err,
            Error::Misaligned {
                kernel: "vecadd_dyn",
                buffer: "a",
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            format!("kernel vecadd_dyn input a misaligned: data pointer must be aligned to {align} bytes (a view that starts inside its allocation; `.contiguous()` makes an aligned copy)")
        );
    } else {
        vecadd_dyn(&a, &b, &mut c).expect("element alignment is enough");
    }
}

// ---------------------------------------------------------------------------
// Grid
// ---------------------------------------------------------------------------

#[test]
fn negative_grid_is_refused() {
    let a = rand(&[2], 70);
    let mut c = Tensor::full(&[2], f32::NAN, CPU).expect("alloc");
    let snapshot = c.reshape(&[2]).expect("view");
    let err = refused(&snapshot, || skip4(&a, &mut c));
    assert!(matches!(
        err,
        Error::Grid {
            kernel: "skip4",
            axis: 0,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel skip4: grid x: extent -2 is negative"
    );

    // N = 4: an empty grid is fine and writes nothing.
    let a = rand(&[4], 71);
    let mut c = Tensor::full(&[4], f32::NAN, CPU).expect("alloc");
    skip4(&a, &mut c).expect("empty grid");
    assert!(c.to_vec().expect("c").iter().all(|v| v.is_nan()));

    // N = 7: only the last three elements are written.
    let a = rand(&[7], 72);
    let mut c = Tensor::full(&[7], f32::NAN, CPU).expect("alloc");
    skip4(&a, &mut c).expect("valid call");
    let (av, cv) = (a.to_vec().expect("a"), c.to_vec().expect("c"));
    assert!(cv[..4].iter().all(|v| v.is_nan()));
    assert_eq!(&cv[4..], &av[4..]);
}

#[test]
fn grid_division_by_zero_is_refused() {
    let a = rand(&[10], 73);
    let w = Tensor::<f32>::zeros(&[0], CPU).expect("alloc");
    let mut c = Tensor::full(&[10], f32::NAN, CPU).expect("alloc");
    let snapshot = c.reshape(&[10]).expect("view");
    let err = refused(&snapshot, || chunks(&a, &w, &mut c));
    assert!(matches!(
        err,
        Error::Grid {
            kernel: "chunks",
            axis: 0,
            ..
        }
    ));
    let msg = err.to_string();
    assert!(
        msg.starts_with("kernel chunks: grid x: cannot evaluate "),
        "{msg}"
    );
    assert!(
        msg.ends_with("with dims [10, 0] (division by zero or overflow)"),
        "{msg}"
    );

    // W = 3 over N = 10: four chunks, the last one ragged.
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3], CPU).expect("alloc");
    chunks(&a, &w, &mut c).expect("valid call");
    let (av, cv) = (a.to_vec().expect("a"), c.to_vec().expect("c"));
    for e in 0..10 {
        assert_eq!(cv[e], av[e] * [1.0, 2.0, 3.0][e % 3], "chunks[{e}]");
    }
}

// ---------------------------------------------------------------------------
// Checks only reachable below the typed launcher
// ---------------------------------------------------------------------------

#[test]
fn dtype_and_arity_through_check_args() {
    // The typed launcher makes these impossible; the check behind it still names them.
    let a16 = random_tensor::<f16>(&[8], 80, CPU).expect("alloc");
    let (b, c) = (rand(&[8], 81), rand(&[8], 82));
    let err = check_args(
        &vecadd_dyn::SPEC,
        &[ArgRef::input(&a16), ArgRef::input(&b), ArgRef::input(&c)],
    )
    .expect_err("f16 for f32");
    assert!(matches!(
        err,
        Error::DtypeMismatch {
            kernel: "vecadd_dyn",
            buffer: "a",
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel vecadd_dyn input a dtype mismatch, expected float32, got float16"
    );

    let bf = random_tensor::<bf16>(&[8], 83, CPU).expect("alloc");
    let err = check_args(
        &vecadd_dyn::SPEC,
        &[ArgRef::input(&b), ArgRef::input(&c), ArgRef::input(&bf)],
    )
    .expect_err("bf16 for f32");
    assert_eq!(
        err.to_string(),
        "kernel vecadd_dyn input c dtype mismatch, expected float32, got bfloat16"
    );

    let err = check_args(&vecadd_dyn::SPEC, &[ArgRef::input(&b), ArgRef::input(&c)])
        .expect_err("two args");
    assert!(matches!(
        err,
        Error::NumArgs {
            kernel: "vecadd_dyn",
            expected: 3,
            got: 2
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel vecadd_dyn: num_args should be 3, got 2"
    );

    // ndim is checked before dtype, shape before device.
    let a2 = random_tensor::<f16>(&[2, 4], 84, CPU).expect("alloc");
    let err = check_args(
        &vecadd_dyn::SPEC,
        &[ArgRef::input(&a2), ArgRef::input(&b), ArgRef::input(&c)],
    )
    .expect_err("2-D f16");
    assert_eq!(
        err.to_string(),
        "kernel vecadd_dyn input a ndim mismatch, expected 1, got 2"
    );

    // A good call binds N.
    let bound = check_args(
        &vecadd_dyn::SPEC,
        &[ArgRef::input(&b), ArgRef::input(&c), ArgRef::input(&b)],
    )
    .expect("valid");
    assert_eq!(bound.dims, vec![8]);
    assert_eq!(bound.device, CPU);
}

#[test]
fn device_mismatch() {
    let a = rand(&[256], 90);
    let b = rand(&[256], 91);
    if Device::cuda_available() {
        // A real mismatch: a on the GPU, b and c on the host.
        let gpu = Device::cuda(0).expect("cuda:0");
        let a_gpu = a.to_device(gpu).expect("upload");
        let mut c = Tensor::full(&[256], f32::NAN, CPU).expect("alloc");
        let snapshot = c.reshape(&[256]).expect("view");
        let err = refused(&snapshot, || vecadd_dyn(&a_gpu, &b, &mut c));
        assert!(matches!(
            err,
            Error::DeviceMismatch {
                kernel: "vecadd_dyn",
                buffer: "b",
                ..
            }
        ));
        assert_eq!(
            err.to_string(),
            "kernel vecadd_dyn input b device mismatch, expected cuda:0, got cpu"
        );
        // The same through the check.
        let err = check_args(
            &vecadd_dyn::SPEC,
            &[ArgRef::input(&b), ArgRef::input(&a_gpu), ArgRef::input(&b)],
        )
        .expect_err("mixed devices");
        assert_eq!(
            err.to_string(),
            "kernel vecadd_dyn input b device mismatch, expected cpu, got cuda:0"
        );
    } else {
        // Without a GPU no tensor can live on another device: asking for one fails
        // cleanly instead of producing a tensor the check would have to catch.
        assert!(matches!(Device::cuda(0), Err(Error::NoCuda { .. })));
        assert!(Tensor::<f32>::zeros(&[4], Device::Cuda(0)).is_err());
        assert!(a.to_device(Device::Cuda(0)).is_err());
        // All-host arguments agree on the device.
        let c = rand(&[256], 92);
        let bound = check_args(
            &vecadd_dyn::SPEC,
            &[ArgRef::input(&a), ArgRef::input(&b), ArgRef::input(&c)],
        )
        .expect("valid");
        assert_eq!(bound.device, CPU);
    }
}

// ---------------------------------------------------------------------------
// Display
// ---------------------------------------------------------------------------

#[test]
fn display_names_kernel_buffer_and_field() {
    let cases: Vec<(Error, &str)> = vec![
        (
            Error::NumArgs {
                kernel: "k",
                expected: 3,
                got: 1,
            },
            "kernel k: num_args should be 3, got 1",
        ),
        (
            Error::NullPointer {
                kernel: "k",
                buffer: "x",
            },
            "kernel k input x is expected to have non-NULL pointer",
        ),
        (
            Error::NdimMismatch {
                kernel: "k",
                buffer: "x",
                expected: 2,
                got: 3,
            },
            "kernel k input x ndim mismatch, expected 2, got 3",
        ),
        (
            Error::DtypeMismatch {
                kernel: "k",
                buffer: "x",
                expected: DType::F16,
                got: DType::BF16,
            },
            "kernel k input x dtype mismatch, expected float16, got bfloat16",
        ),
        (
            Error::ShapeMismatch {
                kernel: "k",
                buffer: "x",
                dim: 1,
                expected: 64,
                got: 63,
                bound_by: None,
            },
            "kernel k input x shape mismatch: dim 1 expected 64, got 63",
        ),
        (
            Error::ShapeMismatch {
                kernel: "k",
                buffer: "y",
                dim: 0,
                expected: 7,
                got: 8,
                bound_by: Some(("M", "x")),
            },
            "kernel k input y shape mismatch: dim 0 expected 7 (M bound by x), got 8",
        ),
        (
            Error::StrideMismatch {
                kernel: "k",
                buffer: "x",
                dim: 0,
                expected: 4,
                got: 8,
                output: false,
            },
            "kernel k input x stride mismatch: dim 0 expected 4, got 8 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)",
        ),
        (
            Error::Misaligned {
                kernel: "k",
                buffer: "x",
                align: 16,
                output: false,
            },
            "kernel k input x misaligned: data pointer must be aligned to 16 bytes (a view that starts inside its allocation; `.contiguous()` makes an aligned copy)",
        ),
        (
            Error::DeviceMismatch {
                kernel: "k",
                buffer: "x",
                expected: Device::Cuda(1),
                got: Device::Cpu,
            },
            "kernel k input x device mismatch, expected cuda:1, got cpu",
        ),
        (
            Error::StreamDeviceMismatch {
                kernel: "k",
                tensors: Device::Cpu,
                stream: Device::Cuda(0),
            },
            "kernel k stream device mismatch, expected cpu (the tensors' device), got cuda:0",
        ),
        (
            Error::IndexRange {
                kernel: "k",
                buffer: "x",
            },
            "kernel k input x exceeds the 32-bit index range",
        ),
        (
            Error::Grid {
                kernel: "k",
                axis: 1,
                message: "extent -1 is negative".into(),
            },
            "kernel k: grid y: extent -1 is negative",
        ),
    ];
    for (err, want) in &cases {
        assert_eq!(err.to_string(), *want);
        // A check error has no underlying cause.
        assert!(std::error::Error::source(err).is_none());
    }
}

#[test]
fn errors_from_real_launches_convert_to_boxed_errors() {
    fn run() -> Result<(), Box<dyn std::error::Error>> {
        let (a, b) = (rand(&[8], 100), rand(&[9], 101));
        let mut c = rand(&[8], 102);
        vecadd_dyn(&a, &b, &mut c)?;
        Ok(())
    }
    let err = run().expect_err("mismatch");
    assert_eq!(
        err.to_string(),
        "kernel vecadd_dyn input b shape mismatch: dim 0 expected 8 (N bound by a), got 9"
    );
    assert!(matches!(
        err.downcast_ref::<Error>(),
        Some(Error::ShapeMismatch { .. })
    ));
}
