//! Conformance: kernels written in the tile language, launched on
//! `Device::default()` (the CPU here; the GPU on a machine with one, or as
//! `TILE_DEVICE` says) and compared against a host reference computed in `f64`.
//!
//! Every output is poisoned first (NaN for floats, a sentinel for integers) so
//! an element the kernel forgets to write fails the comparison. Each kernel
//! runs at sizes that divide its tile and at sizes that do not, so the bounds
//! guards on ragged edges are exercised as well as the interior fast path.

use tile::prelude::*;

// The examples' kernels are tested here too (not copied): vecadd (version A,
// f16) and the quickstart's gemm_relu.
#[allow(dead_code)]
#[path = "../examples/vecadd.rs"]
mod vecadd_example;

#[allow(dead_code)]
#[path = "../examples/quickstart.rs"]
mod quickstart;
use tile::testing::{assert_allclose, random_tensor, random_vec};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The device under test.
fn dev() -> Device {
    Device::default()
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn host<E: Element>(t: &Tensor<E>) -> Vec<f64> {
    t.to_vec()
        .expect("read tensor back")
        .iter()
        .map(|x| x.to_f64())
        .collect()
}

/// `assert_allclose` with the case named in the panic message.
fn check<E: Element>(what: &str, got: &Tensor<E>, want: &[f64], atol: f64, rtol: f64) {
    let got = got.to_vec().expect("read tensor back");
    if let Err(e) = assert_allclose(&got, want, atol, rtol) {
        panic!("{what}: {e}");
    }
}

/// Exact comparison for integer outputs (also catches unwritten sentinels).
fn check_exact<E: Element + PartialEq + std::fmt::Debug>(what: &str, got: &Tensor<E>, want: &[E]) {
    let got = got.to_vec().expect("read tensor back");
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: first mismatch at index {i}: got {:?}, want {:?}",
            got[i], want[i]
        );
    }
}

/// Rounds an exact result to the element type, as a store into an `E` buffer does.
fn round_to<E: Element>(v: f64) -> f64 {
    E::from_f64(v).to_f64()
}

// ---------------------------------------------------------------------------
// Vector add, version A: direct global loads and stores in `T::parallel`
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 1024, threads = 128)]
pub fn vecadd_a_f32(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

#[tile::kernel(block_n = 512, threads = 128)]
pub fn vecadd_a_bf16(a: Tensor<bf16, (N,)>, b: Tensor<bf16, (N,)>, c: TensorMut<bf16, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

// ---------------------------------------------------------------------------
// Vector add, version B: tiles staged in fragments with `T::copy`
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 1024, threads = 128)]
pub fn vecadd_b_f16(a: Tensor<f16, (N,)>, b: Tensor<f16, (N,)>, c: TensorMut<f16, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let a_l = T::alloc_fragment::<f16>([block_n]);
        let b_l = T::alloc_fragment::<f16>([block_n]);
        let c_l = T::alloc_fragment::<f16>([block_n]);
        T::copy(a.at(bx * block_n), a_l);
        T::copy(b.at(bx * block_n), b_l);
        for i in T::parallel(block_n) {
            c_l[i] = a_l[i] + b_l[i];
        }
        T::copy(c_l, c.at(bx * block_n));
    });
}

#[tile::kernel(block_n = 1024, threads = 128)]
pub fn vecadd_b_f32(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let a_l = T::alloc_fragment::<f32>([block_n]);
        let b_l = T::alloc_fragment::<f32>([block_n]);
        let c_l = T::alloc_fragment::<f32>([block_n]);
        T::copy(a.at(bx * block_n), a_l);
        T::copy(b.at(bx * block_n), b_l);
        for i in T::parallel(block_n) {
            c_l[i] = a_l[i] + b_l[i];
        }
        T::copy(c_l, c.at(bx * block_n));
    });
}

#[tile::kernel(block_n = 256, threads = 128)]
pub fn vecadd_b_bf16(a: Tensor<bf16, (N,)>, b: Tensor<bf16, (N,)>, c: TensorMut<bf16, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let a_l = T::alloc_fragment::<bf16>([block_n]);
        let b_l = T::alloc_fragment::<bf16>([block_n]);
        let c_l = T::alloc_fragment::<bf16>([block_n]);
        T::copy(a.at(bx * block_n), a_l);
        T::copy(b.at(bx * block_n), b_l);
        for i in T::parallel(block_n) {
            c_l[i] = a_l[i] + b_l[i];
        }
        T::copy(c_l, c.at(bx * block_n));
    });
}

type Launch<E> = fn(&Tensor<E>, &Tensor<E>, &mut Tensor<E>) -> Result<(), Error>;

/// Runs a vecadd launcher at `n` and checks it bit-exactly: the sum of two
/// values of `E` is exact in f32, so one rounding on store gives `E(a + b)`.
fn run_vecadd<E: Element>(name: &str, launch: Launch<E>, n: usize, seed: u64) -> TestResult {
    let a = random_tensor::<E>(&[n], seed, dev())?;
    let b = random_tensor::<E>(&[n], seed + 1, dev())?;
    let mut c = Tensor::full(&[n], E::from_f64(f64::NAN), dev())?;
    launch(&a, &b, &mut c)?;
    let want: Vec<f64> = host(&a)
        .iter()
        .zip(host(&b))
        .map(|(x, y)| round_to::<E>(x + y))
        .collect();
    check(&format!("{name} n={n}"), &c, &want, 0.0, 0.0);
    // Inputs are never written.
    assert_eq!(
        host(&a),
        host(&random_tensor::<E>(&[n], seed, dev())?),
        "{name}: input a changed"
    );
    Ok(())
}

const VEC_SIZES: &[usize] = &[1, 255, 256, 2047, 2048, 4096, 4097, 10_000, 65_536];

#[test]
fn vecadd_a_all_dtypes() -> TestResult {
    for (k, &n) in VEC_SIZES.iter().enumerate() {
        let seed = 10 + 3 * k as u64;
        run_vecadd::<f16>("vecadd", vecadd_example::vecadd, n, seed)?;
        run_vecadd::<f32>("vecadd_a_f32", vecadd_a_f32, n, seed)?;
        run_vecadd::<bf16>("vecadd_a_bf16", vecadd_a_bf16, n, seed)?;
    }
    Ok(())
}

#[test]
fn vecadd_b_all_dtypes() -> TestResult {
    for (k, &n) in VEC_SIZES.iter().enumerate() {
        let seed = 100 + 3 * k as u64;
        run_vecadd::<f16>("vecadd_b_f16", vecadd_b_f16, n, seed)?;
        run_vecadd::<f32>("vecadd_b_f32", vecadd_b_f32, n, seed)?;
        run_vecadd::<bf16>("vecadd_b_bf16", vecadd_b_bf16, n, seed)?;
    }
    Ok(())
}

#[test]
fn vecadd_forms_agree() -> TestResult {
    let n = 2047;
    let a = random_tensor::<f32>(&[n], 7, dev())?;
    let b = random_tensor::<f32>(&[n], 8, dev())?;
    let mut ca = Tensor::full(&[n], f32::NAN, dev())?;
    let mut cb = Tensor::full(&[n], f32::NAN, dev())?;
    vecadd_a_f32(&a, &b, &mut ca)?;
    vecadd_b_f32(&a, &b, &mut cb)?;
    assert_eq!(ca.to_vec()?, cb.to_vec()?);
    Ok(())
}

#[test]
fn empty_launch_writes_nothing() -> TestResult {
    // N = 0: the grid is empty, the launch succeeds and does nothing.
    let a = Tensor::<f32>::zeros(&[0], dev())?;
    let b = Tensor::<f32>::zeros(&[0], dev())?;
    let mut c = Tensor::<f32>::zeros(&[0], dev())?;
    vecadd_a_f32(&a, &b, &mut c)?;
    vecadd_b_f32(&a, &b, &mut c)?;
    assert!(c.to_vec()?.is_empty());
    Ok(())
}

#[test]
fn repeated_launches_reuse_the_kernel() -> TestResult {
    let n = 3000;
    let a = random_tensor::<f32>(&[n], 21, dev())?;
    let b = random_tensor::<f32>(&[n], 22, dev())?;
    let want: Vec<f64> = host(&a)
        .iter()
        .zip(host(&b))
        .map(|(x, y)| round_to::<f32>(x + y))
        .collect();
    for _ in 0..5 {
        let mut c = Tensor::full(&[n], f32::NAN, dev())?;
        vecadd_a_f32(&a, &b, &mut c)?;
        check("repeated vecadd", &c, &want, 0.0, 0.0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// 2-D element-wise add with dynamic M, N
// ---------------------------------------------------------------------------

#[tile::kernel(block_m = 32, block_n = 64, threads = 256)]
pub fn ew_add_2d(a: Tensor<f32, (M, N)>, b: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            for (local_y, local_x) in T::parallel([block_m, block_n]) {
                let y = by * block_m + local_y;
                let x = bx * block_n + local_x;
                c[(y, x)] = a[(y, x)] + b[(y, x)];
            }
        },
    );
}

#[test]
fn elementwise_2d_dynamic_shapes() -> TestResult {
    for (k, &(m, n)) in [
        (32, 64),
        (64, 128),
        (1, 1),
        (33, 65),
        (67, 129),
        (1000, 1030),
        (1, 700),
        (700, 1),
    ]
    .iter()
    .enumerate()
    {
        let a = random_tensor::<f32>(&[m, n], 300 + k as u64, dev())?;
        let b = random_tensor::<f32>(&[m, n], 400 + k as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        ew_add_2d(&a, &b, &mut c)?;
        let want: Vec<f64> = host(&a)
            .iter()
            .zip(host(&b))
            .map(|(x, y)| round_to::<f32>(x + y))
            .collect();
        check(&format!("ew_add_2d {m}x{n}"), &c, &want, 0.0, 0.0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// GEMM + ReLU (the quickstart), dynamic M, N, K
// ---------------------------------------------------------------------------

/// f32 GEMM with B given transposed (`[N, K]`), no ReLU, f32 out.
#[tile::kernel(block_m = 32, block_n = 32, block_k = 16, threads = 128)]
pub fn gemm_nt_f32(a: Tensor<f32, (M, K)>, b: Tensor<f32, (N, K)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f32>([block_m, block_k]);
            let b_s = T::alloc_shared::<f32>([block_n, block_k]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::serial(T::ceildiv(K, block_k)) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([bx * block_n, ko * block_k]), b_s);
                T::gemm(a_s, b_s, acc, transpose_b = true);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// `C = A · B` in f64 (`a` is `[m, k]`, `b` is `[k, n]`, or `[n, k]` when `b_t`).
fn matmul_ref(a: &[f64], b: &[f64], m: usize, n: usize, k: usize, b_t: bool) -> Vec<f64> {
    tile::testing::matmul_ref(a, b, (m, n, k), false, b_t)
}

const GEMM_SIZES: &[(usize, usize, usize)] = &[
    (64, 64, 32),
    (128, 64, 96),
    (67, 129, 33),
    (129, 67, 100),
    (1, 1, 1),
    (5, 3, 70),
    (200, 136, 64),
];

#[test]
fn gemm_relu_dynamic_shapes() -> TestResult {
    for (s, &(m, n, k)) in GEMM_SIZES.iter().enumerate() {
        let a = random_tensor::<f16>(&[m, k], 500 + s as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], 600 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f16::NAN, dev())?;
        quickstart::gemm_relu(&a, &b, &mut c)?;
        let want: Vec<f64> = matmul_ref(&host(&a), &host(&b), m, n, k, false)
            .into_iter()
            .map(|v| v.max(0.0))
            .collect();
        check(
            &format!("gemm_relu m={m} n={n} k={k}"),
            &c,
            &want,
            2e-2,
            2e-2,
        );
        // ReLU really happened: no negative outputs, and some exact zeros.
        let out = host(&c);
        assert!(out.iter().all(|&v| v >= 0.0));
        if m * n >= 64 {
            assert!(
                out.contains(&0.0),
                "gemm_relu m={m} n={n} k={k}: expected some clamped zeros"
            );
        }
    }
    Ok(())
}

#[test]
fn gemm_transposed_b_f32() -> TestResult {
    for (s, &(m, n, k)) in GEMM_SIZES.iter().enumerate() {
        let a = random_tensor::<f32>(&[m, k], 700 + s as u64, dev())?;
        let b = random_tensor::<f32>(&[n, k], 800 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        gemm_nt_f32(&a, &b, &mut c)?;
        let want = matmul_ref(&host(&a), &host(&b), m, n, k, true);
        check(
            &format!("gemm_nt_f32 m={m} n={n} k={k}"),
            &c,
            &want,
            1e-4,
            1e-4,
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Copies through shared memory and fragments
// ---------------------------------------------------------------------------

/// Global → shared → fragment → global, with an f16 → f32 conversion on the
/// way into the fragment.
#[tile::kernel(block_m = 16, block_n = 32, threads = 128)]
pub fn copy_widen_2d(a: Tensor<f16, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, block_n]);
            let c_l = T::alloc_fragment::<f32>([block_m, block_n]);
            T::copy(a.at([by * block_m, bx * block_n]), a_s);
            T::copy(a_s, c_l);
            T::copy(c_l, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// A 1-D fragment copied from and to one row of a 2-D tensor (leading unit dim).
#[tile::kernel(block_n = 64, threads = 64)]
pub fn row_scale(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), M], threads, |bx, by| {
        let r = T::alloc_fragment::<f32>([block_n]);
        T::copy(a.at([by, bx * block_n]), r);
        for i in T::parallel(block_n) {
            r[i] = r[i] * 3.0 - 1.0;
        }
        T::copy(r, c.at([by, bx * block_n]));
    });
}

#[test]
fn copy_through_shared_and_fragment() -> TestResult {
    for (s, &(m, n)) in [(16, 32), (48, 96), (17, 33), (100, 1), (1, 100)]
        .iter()
        .enumerate()
    {
        let a = random_tensor::<f16>(&[m, n], 900 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        copy_widen_2d(&a, &mut c)?;
        check(&format!("copy_widen_2d {m}x{n}"), &c, &host(&a), 0.0, 0.0);
    }
    Ok(())
}

#[test]
fn copy_rows_with_unit_leading_dim() -> TestResult {
    for (s, &(m, n)) in [(4, 64), (3, 200), (1, 1), (9, 63)].iter().enumerate() {
        let a = random_tensor::<f32>(&[m, n], 950 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        row_scale(&a, &mut c)?;
        let want: Vec<f64> = host(&a)
            .iter()
            .map(|&x| round_to::<f32>(x * 3.0 - 1.0))
            .collect();
        check(&format!("row_scale {m}x{n}"), &c, &want, 1e-6, 1e-6);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// `T::fill` and `T::clear`
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 128, threads = 128)]
pub fn fill_and_clear(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>, z: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let f = T::alloc_fragment::<f32>([block_n]);
        let zi = T::alloc_fragment::<i32>([block_n]);
        T::fill(f, 2.5);
        T::clear(zi);
        for i in T::parallel(block_n) {
            f[i] = f[i] + a[bx * block_n + i];
            zi[i] = zi[i] + 7;
        }
        T::copy(f, c.at(bx * block_n));
        T::copy(zi, z.at(bx * block_n));
    });
}

/// Fill of a shared 2-D tile with a value computed from the block index.
#[tile::kernel(block_m = 8, block_n = 16, threads = 128)]
pub fn fill_block_id(c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let s = T::alloc_shared::<f32>([block_m, block_n]);
            T::fill(s, (by * 1000 + bx) as f32);
            T::copy(s, c.at([by * block_m, bx * block_n]));
        },
    );
}

#[test]
fn fill_and_clear_tiles() -> TestResult {
    for (s, &n) in [128usize, 1000, 1, 129].iter().enumerate() {
        let a = random_tensor::<f32>(&[n], 1000 + s as u64, dev())?;
        let mut c = Tensor::full(&[n], f32::NAN, dev())?;
        let mut z = Tensor::full(&[n], i32::MIN, dev())?;
        fill_and_clear(&a, &mut c, &mut z)?;
        let want: Vec<f64> = host(&a).iter().map(|&x| round_to::<f32>(x + 2.5)).collect();
        check(&format!("fill n={n}"), &c, &want, 0.0, 0.0);
        check_exact(&format!("clear n={n}"), &z, &vec![7i32; n]);
    }
    Ok(())
}

#[test]
fn fill_with_block_dependent_value() -> TestResult {
    for &(m, n) in &[(8usize, 16usize), (20, 40), (1, 1), (17, 15)] {
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        fill_block_id(&mut c)?;
        let want: Vec<f64> = (0..m * n)
            .map(|e| ((e / n / 8) * 1000 + (e % n) / 16) as f64)
            .collect();
        check(&format!("fill_block_id {m}x{n}"), &c, &want, 0.0, 0.0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// `if` as a statement and as a value
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 256, threads = 128)]
pub fn piecewise(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>, d: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let x = a[bx * block_n + i];
            if x > 0.5 {
                c[bx * block_n + i] = x;
            } else if x > -0.5 {
                c[bx * block_n + i] = 0.0;
            } else {
                c[bx * block_n + i] = x * -2.0;
            }
            d[bx * block_n + i] = if x < 0.25 {
                x + 1.0
            } else {
                T::if_then_else(x >= 0.75, 9.0, -9.0)
            };
        }
    });
}

/// Block-level `if` on the block index: only even blocks write 1, odd blocks 2.
#[tile::kernel(block_n = 100, threads = 128)]
pub fn parity(c: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        if bx % 2 == 0 {
            for i in T::parallel(block_n) {
                c[bx * block_n + i] = 1;
            }
        } else {
            for i in T::parallel(block_n) {
                c[bx * block_n + i] = 2;
            }
        }
    });
}

#[test]
fn if_statements_and_values() -> TestResult {
    for (s, &n) in [256usize, 1000, 3, 4097].iter().enumerate() {
        let a = random_tensor::<f32>(&[n], 1100 + s as u64, dev())?;
        let mut c = Tensor::full(&[n], f32::NAN, dev())?;
        let mut d = Tensor::full(&[n], f32::NAN, dev())?;
        piecewise(&a, &mut c, &mut d)?;
        let av = host(&a);
        let wc: Vec<f64> = av
            .iter()
            .map(|&x| {
                if x > 0.5 {
                    x
                } else if x > -0.5 {
                    0.0
                } else {
                    round_to::<f32>(x * -2.0)
                }
            })
            .collect();
        let wd: Vec<f64> = av
            .iter()
            .map(|&x| {
                if x < 0.25 {
                    round_to::<f32>(x + 1.0)
                } else if x >= 0.75 {
                    9.0
                } else {
                    -9.0
                }
            })
            .collect();
        check(&format!("piecewise c n={n}"), &c, &wc, 0.0, 0.0);
        check(&format!("piecewise d n={n}"), &d, &wd, 0.0, 0.0);
    }
    for &n in &[100usize, 250, 1, 999] {
        let mut c = Tensor::full(&[n], -1i32, dev())?;
        parity(&mut c)?;
        let want: Vec<i32> = (0..n)
            .map(|e| if (e / 100) % 2 == 0 { 1 } else { 2 })
            .collect();
        check_exact(&format!("parity n={n}"), &c, &want);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// `let mut` accumulation in serial loops
// ---------------------------------------------------------------------------

/// Row sums and positive counts over a dynamic K, plus a sum over the first
/// half of each row selected with an `if` on the serial index.
#[tile::kernel(block_m = 32, threads = 32)]
pub fn row_stats(
    a: Tensor<f32, (M, K)>,
    sum: TensorMut<f32, (M,)>,
    pos: TensorMut<i32, (M,)>,
    half: TensorMut<f32, (M,)>,
) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            let row = bx * block_m + i;
            let mut s = 0.0;
            let mut n = 0;
            let mut h: f32 = 0.0;
            for k in T::serial(K) {
                let v = a[(row, k)];
                s += v;
                if v > 0.0 {
                    n += 1;
                }
                if k < K / 2 {
                    h = h + v;
                }
            }
            sum[row] = s;
            pos[row] = n;
            half[row] = h;
        }
    });
}

/// Horner evaluation of a polynomial whose degree is a runtime dim (`coef[0]`
/// is the highest-degree coefficient), with `T::serial(start, end)`, and a
/// `T::unroll` over a constant range.
#[tile::kernel(block_n = 64, unroll_n = 4, threads = 64)]
pub fn horner(x: Tensor<f32, (N,)>, coef: Tensor<f32, (D,)>, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let xv = x[bx * block_n + i];
            let mut acc = 0.0;
            for d in T::serial(0, D) {
                acc = acc * xv + coef[d];
            }
            let mut extra = 0.0;
            for u in T::unroll(unroll_n) {
                extra += (u + 1) as f32;
            }
            y[bx * block_n + i] = acc + extra;
        }
    });
}

#[test]
fn let_mut_accumulation() -> TestResult {
    for (s, &(m, k)) in [(32usize, 16usize), (33, 7), (1, 1), (100, 129), (64, 0)]
        .iter()
        .enumerate()
    {
        let a = random_tensor::<f32>(&[m, k], 1200 + s as u64, dev())?;
        let mut sum = Tensor::full(&[m], f32::NAN, dev())?;
        let mut pos = Tensor::full(&[m], i32::MIN, dev())?;
        let mut half = Tensor::full(&[m], f32::NAN, dev())?;
        row_stats(&a, &mut sum, &mut pos, &mut half)?;
        let av = host(&a);
        let rows: Vec<&[f64]> = if k == 0 {
            vec![&[][..]; m]
        } else {
            av.chunks(k).collect()
        };
        let ws: Vec<f64> = rows.iter().map(|r| r.iter().sum()).collect();
        let wp: Vec<i32> = rows
            .iter()
            .map(|r| r.iter().filter(|&&v| v > 0.0).count() as i32)
            .collect();
        let wh: Vec<f64> = rows.iter().map(|r| r[..k / 2].iter().sum()).collect();
        check(&format!("row sum {m}x{k}"), &sum, &ws, 1e-4, 1e-5);
        check_exact(&format!("row positives {m}x{k}"), &pos, &wp);
        check(&format!("row half-sum {m}x{k}"), &half, &wh, 1e-4, 1e-5);
    }
    Ok(())
}

#[test]
fn serial_range_and_unroll() -> TestResult {
    for (s, &(n, d)) in [(64usize, 3usize), (100, 1), (7, 6), (200, 0)]
        .iter()
        .enumerate()
    {
        let x = random_tensor::<f32>(&[n], 1300 + s as u64, dev())?;
        let coef = random_tensor::<f32>(&[d], 1400 + s as u64, dev())?;
        let mut y = Tensor::full(&[n], f32::NAN, dev())?;
        horner(&x, &coef, &mut y)?;
        let cv = host(&coef);
        let want: Vec<f64> = host(&x)
            .iter()
            .map(|&xv| cv.iter().fold(0.0, |acc, &c| acc * xv + c) + 10.0)
            .collect();
        check(&format!("horner n={n} d={d}"), &y, &want, 1e-5, 1e-5);
    }
    Ok(())
}

/// A bounds guard whose index uses a serial loop variable inside a
/// `T::parallel` nest (`c[d + 1]`, or `a[(row, k)]` with `k in 0..K / 2`).
/// The interior/edge split must not hoist such guards in front of the nest,
/// where the inner loop variable is not defined (a regression test).
#[test]
fn guard_on_inner_loop_variable_compiles() {
    for src in [
        r#"
        #[tile::kernel(block_n = 64, threads = 64)]
        pub fn shifted(c: Tensor<f32, (D,)>, y: TensorMut<f32, (N,)>) {
            T::kernel(T::ceildiv(N, block_n), threads, |bx| {
                for i in T::parallel(block_n) {
                    for d in T::serial(D - 1) {
                        y[bx * block_n + i] = c[d + 1];
                    }
                }
            });
        }
        "#,
        r#"
        #[tile::kernel(block_n = 64, threads = 64)]
        pub fn half_rows(a: Tensor<f32, (M, K)>, y: TensorMut<f32, (M,)>) {
            T::kernel(T::ceildiv(M, block_n), threads, |bx| {
                for i in T::parallel(block_n) {
                    let mut s = 0.0;
                    for k in 0..K / 2 {
                        s += a[(bx * block_n + i, k)];
                    }
                    y[bx * block_n + i] = s;
                }
            });
        }
        "#,
    ] {
        let def = tile_core::frontend::parse_kernel_source(src)
            .unwrap_or_else(|d| panic!("parse: {}", d[0]));
        if let Err(d) = tile_core::compile(def) {
            panic!("compile: {}", d[0]);
        }
    }
}

// ---------------------------------------------------------------------------
// Casts
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 128, threads = 128)]
pub fn casts(
    a: Tensor<f16, (N,)>,
    b: Tensor<i32, (N,)>,
    f: TensorMut<f32, (N,)>,
    i: TensorMut<i32, (N,)>,
    h: TensorMut<bf16, (N,)>,
    d: TensorMut<f64, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for j in T::parallel(block_n) {
            let x = a[bx * block_n + j];
            let k = b[bx * block_n + j];
            f[bx * block_n + j] = x as f32 + k as f32;
            i[bx * block_n + j] = (x as f32 * 100.0) as i32 + k / 3;
            h[bx * block_n + j] = (x as f32 * 0.5) as bf16;
            d[bx * block_n + j] = (k as i64 * 3000000000) as f64 + x as f64;
        }
    });
}

#[test]
fn casts_between_dtypes() -> TestResult {
    for (s, &n) in [128usize, 1000, 1].iter().enumerate() {
        let a = random_tensor::<f16>(&[n], 1500 + s as u64, dev())?;
        let b = random_tensor::<i32>(&[n], 1600 + s as u64, dev())?;
        let mut f = Tensor::full(&[n], f32::NAN, dev())?;
        let mut i = Tensor::full(&[n], i32::MIN, dev())?;
        let mut h = Tensor::full(&[n], bf16::NAN, dev())?;
        let mut d = Tensor::full(&[n], f64::NAN, dev())?;
        casts(&a, &b, &mut f, &mut i, &mut h, &mut d)?;
        let (av, bv) = (host(&a), b.to_vec()?);
        let wf: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &k)| round_to::<f32>(x + k as f64))
            .collect();
        // Rust's `as` truncates toward zero, and so does integer division.
        let wi: Vec<i32> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &k)| (x as f32 * 100.0) as i32 + k / 3)
            .collect();
        let wh: Vec<f64> = av.iter().map(|&x| round_to::<bf16>(x * 0.5)).collect();
        let wd: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &k)| (k as i64 * 3_000_000_000) as f64 + x)
            .collect();
        check(&format!("cast f32 n={n}"), &f, &wf, 0.0, 0.0);
        check_exact(&format!("cast i32 n={n}"), &i, &wi);
        check(&format!("cast bf16 n={n}"), &h, &wh, 0.0, 0.0);
        check(&format!("cast f64 n={n}"), &d, &wd, 0.0, 0.0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Math: T::max / T::min / T::exp / T::sqrt (and friends)
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 256, threads = 128)]
pub fn math_fns(
    a: Tensor<f32, (N,)>,
    b: Tensor<f32, (N,)>,
    c: TensorMut<f32, (N,)>,
    d: TensorMut<f32, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let x = a[bx * block_n + i];
            let y = b[bx * block_n + i];
            c[bx * block_n + i] = T::exp(T::min(T::max(x, -0.5), 0.5)) + T::sqrt(T::abs(y));
            d[bx * block_n + i] = T::max(x, y) - T::min(x, y) + T::tanh(x) * T::sigmoid(y);
        }
    });
}

#[tile::kernel(block_n = 64, threads = 64)]
pub fn math_f16(a: Tensor<f16, (N,)>, c: TensorMut<f16, (N,)>, m: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let x = a[bx * block_n + i];
            c[bx * block_n + i] = T::sqrt(T::exp(x));
            m[bx * block_n + i] = T::min(T::max((x * 20.0) as i32, -5), 5);
        }
    });
}

#[test]
fn math_functions() -> TestResult {
    for (s, &n) in [256usize, 1000, 1, 257].iter().enumerate() {
        let a = random_tensor::<f32>(&[n], 1700 + s as u64, dev())?;
        let b = random_tensor::<f32>(&[n], 1800 + s as u64, dev())?;
        let mut c = Tensor::full(&[n], f32::NAN, dev())?;
        let mut d = Tensor::full(&[n], f32::NAN, dev())?;
        math_fns(&a, &b, &mut c, &mut d)?;
        let (av, bv) = (host(&a), host(&b));
        let wc: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &y)| x.clamp(-0.5, 0.5).exp() + y.abs().sqrt())
            .collect();
        let wd: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &y)| x.max(y) - x.min(y) + x.tanh() / (1.0 + (-y).exp()))
            .collect();
        check(&format!("math c n={n}"), &c, &wc, 1e-5, 1e-5);
        check(&format!("math d n={n}"), &d, &wd, 1e-5, 1e-5);
    }
    for (s, &n) in [64usize, 65, 3].iter().enumerate() {
        let a = random_tensor::<f16>(&[n], 1900 + s as u64, dev())?;
        let mut c = Tensor::full(&[n], f16::NAN, dev())?;
        let mut m = Tensor::full(&[n], i32::MIN, dev())?;
        math_f16(&a, &mut c, &mut m)?;
        let av = host(&a);
        let wc: Vec<f64> = av.iter().map(|&x| x.exp().sqrt()).collect();
        check(&format!("math_f16 c n={n}"), &c, &wc, 2e-3, 2e-3);
        let got = m.to_vec()?;
        // (x * 20) may round in f16 before truncation: allow the neighbouring integer.
        for (e, (&x, &g)) in av.iter().zip(&got).enumerate() {
            let exact = ((x * 20.0).trunc() as i32).clamp(-5, 5);
            assert!(
                (g - exact).abs() <= 1 && (-5..=5).contains(&g),
                "math_f16 m[{e}] = {g}, want about {exact} (x = {x})"
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Static shapes: dims named by compile-time parameters
// ---------------------------------------------------------------------------

#[tile::kernel(n = 1000, block_n = 128, threads = 128)]
pub fn static_axpy(x: Tensor<f32, (n,)>, y: Tensor<f32, (n,)>, out: TensorMut<f32, (n,)>) {
    T::kernel(T::ceildiv(n, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            out[bx * block_n + i] = 2.0 * x[bx * block_n + i] + y[bx * block_n + i];
        }
    });
}

/// A static dim and a dynamic dim in one parameter.
#[tile::kernel(rows = 6, block_n = 32, threads = 64)]
pub fn static_rows(a: Tensor<f32, (rows, N)>, c: TensorMut<f32, (rows, N)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for (r, j) in T::parallel([rows, block_n]) {
            c[(r, bx * block_n + j)] = a[(r, bx * block_n + j)] * (r + 1) as f32;
        }
    });
}

#[test]
fn static_shape_kernel() -> TestResult {
    let x = random_tensor::<f32>(&[1000], 2000, dev())?;
    let y = random_tensor::<f32>(&[1000], 2001, dev())?;
    let mut out = Tensor::full(&[1000], f32::NAN, dev())?;
    static_axpy(&x, &y, &mut out)?;
    let want: Vec<f64> = host(&x)
        .iter()
        .zip(host(&y))
        .map(|(a, b)| round_to::<f32>(2.0 * a + b))
        .collect();
    check("static_axpy", &out, &want, 1e-6, 1e-6);
    assert_eq!(
        static_axpy::SPEC.dims.len(),
        0,
        "a fully static kernel has no dynamic dims"
    );
    Ok(())
}

#[test]
fn static_shape_is_checked() -> TestResult {
    let x = random_tensor::<f32>(&[1024], 2002, dev())?;
    let y = random_tensor::<f32>(&[1024], 2003, dev())?;
    let mut out = Tensor::full(&[1024], f32::NAN, dev())?;
    let err = static_axpy(&x, &y, &mut out).expect_err("n = 1024 must be refused");
    assert!(matches!(
        err,
        Error::ShapeMismatch {
            kernel: "static_axpy",
            buffer: "x",
            dim: 0,
            expected: 1000,
            got: 1024,
            bound_by: None
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel static_axpy input x shape mismatch: dim 0 expected 1000, got 1024"
    );
    assert!(
        out.to_vec()?.iter().all(|v| v.is_nan()),
        "a refused launch writes nothing"
    );

    // The output alone has the wrong static extent.
    let x = random_tensor::<f32>(&[1000], 2004, dev())?;
    let mut out = Tensor::full(&[999], f32::NAN, dev())?;
    let err = static_axpy(&x, &x, &mut out).expect_err("out of 999 must be refused");
    assert_eq!(
        err.to_string(),
        "kernel static_axpy input out shape mismatch: dim 0 expected 1000, got 999"
    );
    assert!(out.to_vec()?.iter().all(|v| v.is_nan()));
    Ok(())
}

#[test]
fn mixed_static_and_dynamic_dims() -> TestResult {
    for (s, &n) in [32usize, 100, 1].iter().enumerate() {
        let a = random_tensor::<f32>(&[6, n], 2100 + s as u64, dev())?;
        let mut c = Tensor::full(&[6, n], f32::NAN, dev())?;
        static_rows(&a, &mut c)?;
        let want: Vec<f64> = host(&a)
            .iter()
            .enumerate()
            .map(|(e, &v)| round_to::<f32>(v * (e / n + 1) as f64))
            .collect();
        check(&format!("static_rows n={n}"), &c, &want, 0.0, 0.0);
    }
    let a = random_tensor::<f32>(&[5, 32], 2200, dev())?;
    let mut c = Tensor::full(&[5, 32], f32::NAN, dev())?;
    let err = static_rows(&a, &mut c).expect_err("5 rows must be refused");
    assert_eq!(
        err.to_string(),
        "kernel static_rows input a shape mismatch: dim 0 expected 6, got 5"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Launch plumbing visible through the generated module
// ---------------------------------------------------------------------------

#[test]
fn generated_module_describes_the_kernel() {
    let spec = &quickstart::gemm_relu::SPEC;
    assert_eq!(spec.name, "gemm_relu");
    let names: Vec<&str> = spec.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let outputs: Vec<bool> = spec.params.iter().map(|p| p.output).collect();
    assert_eq!(outputs, [false, false, true]);
    assert_eq!(spec.dims, ["M", "K", "N"]);
    assert_eq!(spec.threads, 128);
    assert!(!quickstart::gemm_relu::source(Target::Cpu).is_empty());
    assert!(!quickstart::gemm_relu::source(Target::Cuda).is_empty());
    assert!(!quickstart::gemm_relu::ir().is_empty());
}

#[test]
fn explicit_cpu_stream() -> TestResult {
    let stream = dev().default_stream()?;
    let n = 777;
    let a = Tensor::from_vec(random_vec::<f32>(n, 1, -1.0, 1.0), &[n], dev())?;
    let b = Tensor::from_vec(random_vec::<f32>(n, 2, -1.0, 1.0), &[n], dev())?;
    let mut c = Tensor::full(&[n], f32::NAN, dev())?;
    vecadd_a_f32::on(&stream).launch(&a, &b, &mut c)?;
    stream.synchronize()?;
    let want: Vec<f64> = host(&a)
        .iter()
        .zip(host(&b))
        .map(|(x, y)| round_to::<f32>(x + y))
        .collect();
    check("vecadd on an explicit dev() stream", &c, &want, 0.0, 0.0);
    Ok(())
}

// ---------------------------------------------------------------------------
// Reductions, scans, atomics, variables, swizzle, print
// ---------------------------------------------------------------------------

/// Every reduction over both dims of a fragment tile, from f16 into f32.
#[tile::kernel(m = 8, n = 64, ops = 4, threads = 128)]
pub fn reduce_all(
    a: Tensor<f16, (m, n)>,
    rows: TensorMut<f32, (ops, m)>,
    cols: TensorMut<f32, (ops, n)>,
) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_fragment::<f16>([m, n]);
        let r = T::alloc_fragment::<f32>([m]);
        let c = T::alloc_shared::<f32>([n]);
        T::copy(a.at([bx * m, 0]), t);
        T::reduce_sum(t, r, 1);
        T::copy(r, rows.at([0, 0]));
        T::reduce_max(t, r, 1);
        T::copy(r, rows.at([1, 0]));
        T::reduce_min(t, r, 1);
        T::copy(r, rows.at([2, 0]));
        T::reduce_abssum(t, r, 1);
        T::copy(r, rows.at([3, 0]));
        T::reduce_sum(t, c, 0);
        T::copy(c, cols.at([0, 0]));
        T::reduce_max(t, c, 0);
        T::copy(c, cols.at([1, 0]));
        T::reduce_min(t, c, dim = 0);
        T::copy(c, cols.at([2, 0]));
        T::reduce_abssum(t, c, 0, true);
        T::copy(c, cols.at([3, 0]));
    });
}

/// Accumulating reductions (`clear = false`) over the column tiles of a row
/// block, from a shared tile; dynamic N, ragged tiles zero-padded.
#[tile::kernel(block_m = 4, block_n = 32, threads = 64)]
pub fn row_sums(x: Tensor<f32, (M, N)>, y: TensorMut<f32, (M,)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let tile = T::alloc_shared::<f32>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m]);
        T::clear(acc);
        for k in T::serial(T::ceildiv(N, block_n)) {
            T::copy(x.at([bx * block_m, k * block_n]), tile);
            T::reduce_sum(tile, acc, 1, false);
        }
        T::copy(acc, y.at(bx * block_m));
    });
}

#[test]
fn reductions() -> TestResult {
    let (m, n) = (8, 64);
    let a = random_tensor::<f16>(&[m, n], 3100, dev())?;
    let mut rows = Tensor::full(&[4, m], f32::NAN, dev())?;
    let mut cols = Tensor::full(&[4, n], f32::NAN, dev())?;
    reduce_all(&a, &mut rows, &mut cols)?;
    let av = host(&a);
    let mut want_rows = vec![0f64; 4 * m];
    let mut want_cols = vec![0f64; 4 * n];
    for (k, op) in [0usize, 1, 2, 3].iter().enumerate() {
        let f = |xs: Vec<f64>| match op {
            0 => xs.iter().sum(),
            1 => xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            2 => xs.iter().cloned().fold(f64::INFINITY, f64::min),
            _ => xs.iter().map(|x| x.abs()).sum(),
        };
        for i in 0..m {
            want_rows[k * m + i] = f((0..n).map(|j| av[i * n + j]).collect());
        }
        for j in 0..n {
            want_cols[k * n + j] = f((0..m).map(|i| av[i * n + j]).collect());
        }
    }
    check("row reductions", &rows, &want_rows, 1e-4, 1e-5);
    check("column reductions", &cols, &want_cols, 1e-4, 1e-5);

    for (s, &(m, n)) in [(64, 32), (37, 100), (4, 1)].iter().enumerate() {
        let x = random_tensor::<f32>(&[m, n], 3200 + s as u64, dev())?;
        let mut y = Tensor::full(&[m], f32::NAN, dev())?;
        row_sums(&x, &mut y)?;
        let xv = host(&x);
        let want: Vec<f64> = (0..m)
            .map(|i| (0..n).map(|j| xv[i * n + j]).sum())
            .collect();
        check(&format!("row_sums {m}x{n}"), &y, &want, 1e-4, 1e-5);
    }
    Ok(())
}

#[tile::kernel(m = 6, n = 40, threads = 64)]
pub fn scans(
    a: Tensor<f32, (m, n)>,
    along_rows: TensorMut<f32, (m, n)>,
    along_cols: TensorMut<f32, (m, n)>,
    reversed: TensorMut<f32, (m, n)>,
) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_shared::<f32>([m, n]);
        let o = T::alloc_fragment::<f32>([m, n]);
        T::copy(a.at([bx, 0]), t);
        T::cumsum(t, o, 1);
        T::copy(o, along_rows);
        T::cumsum(t, o, 0);
        T::copy(o, along_cols);
        T::cumsum(t, o, dim = 1, reverse = true);
        T::copy(o, reversed);
    });
}

#[test]
fn cumulative_sums() -> TestResult {
    let (m, n) = (6, 40);
    let a = random_tensor::<f32>(&[m, n], 3300, dev())?;
    let mut r = Tensor::full(&[m, n], f32::NAN, dev())?;
    let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
    let mut v = Tensor::full(&[m, n], f32::NAN, dev())?;
    scans(&a, &mut r, &mut c, &mut v)?;
    let av = host(&a);
    let (mut wr, mut wc, mut wv) = (vec![0f64; m * n], vec![0f64; m * n], vec![0f64; m * n]);
    for i in 0..m {
        for j in 0..n {
            wr[i * n + j] = (0..=j).map(|k| av[i * n + k]).sum();
            wc[i * n + j] = (0..=i).map(|k| av[k * n + j]).sum();
            wv[i * n + j] = (j..n).map(|k| av[i * n + k]).sum();
        }
    }
    check("cumsum dim 1", &r, &wr, 1e-4, 1e-5);
    check("cumsum dim 0", &c, &wc, 1e-4, 1e-5);
    check("cumsum reverse", &v, &wv, 1e-4, 1e-5);
    Ok(())
}

/// Column sums by atomics from every block: element form and tile form.
#[tile::kernel(block_m = 16, n = 64, threads = 64)]
pub fn atomic_col_sums(x: Tensor<f32, (M, n)>, s1: TensorMut<f32, (n,)>, s2: TensorMut<f32, (n,)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let part = T::alloc_shared::<f32>([n]);
        let t = T::alloc_shared::<f32>([block_m, n]);
        T::copy(x.at([bx * block_m, 0]), t);
        T::reduce_sum(t, part, 0);
        for j in T::parallel(n) {
            T::atomic_add(s1[j], part[j]);
        }
        T::atomic_add(s2.at(0), part);
    });
}

#[test]
fn atomic_adds_from_every_block() -> TestResult {
    for (s, m) in [64usize, 100, 3].into_iter().enumerate() {
        let n = 64;
        let x = random_tensor::<f32>(&[m, n], 3400 + s as u64, dev())?;
        let mut s1 = Tensor::zeros(&[n], dev())?;
        let mut s2 = Tensor::zeros(&[n], dev())?;
        atomic_col_sums(&x, &mut s1, &mut s2)?;
        let xv = host(&x);
        let want: Vec<f64> = (0..n)
            .map(|j| (0..m).map(|i| xv[i * n + j]).sum())
            .collect();
        check(
            &format!("atomic element form m={m}"),
            &s1,
            &want,
            1e-4,
            1e-5,
        );
        check(&format!("atomic tile form m={m}"), &s2, &want, 1e-4, 1e-5);
    }
    Ok(())
}

/// `T::alloc_var`, `T::infinity`, `T::max_value`.
#[tile::kernel(block_n = 128, k8 = 8, threads = 128)]
pub fn running_min(x: Tensor<f32, (N, k8)>, y: TensorMut<f32, (N,)>, z: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let lo = T::alloc_var::<f32>(T::infinity::<f32>());
            let count = T::alloc_var::<i32>();
            for k in T::serial(k8) {
                lo = T::min(lo, x[(bx * block_n + i, k)]);
                count += 1;
            }
            y[bx * block_n + i] = lo;
            z[bx * block_n + i] = T::min(count, T::max_value::<i32>());
        }
    });
}

#[test]
fn variables_and_constants() -> TestResult {
    let n = 300;
    let x = random_tensor::<f32>(&[n, 8], 3500, dev())?;
    let mut y = Tensor::full(&[n], f32::NAN, dev())?;
    let mut z = Tensor::full(&[n], -1i32, dev())?;
    running_min(&x, &mut y, &mut z)?;
    let xv = host(&x);
    let want: Vec<f64> = (0..n)
        .map(|i| (0..8).map(|k| xv[i * 8 + k]).fold(f64::INFINITY, f64::min))
        .collect();
    check("running min", &y, &want, 0.0, 0.0);
    check_exact("count", &z, &vec![8; n]);
    Ok(())
}

/// A 2-D element-wise kernel with block rasterization: every tile must still
/// be visited exactly once.
#[tile::kernel(block_m = 16, block_n = 16, threads = 128)]
pub fn swizzled_add(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_swizzle(3);
            for (i, j) in T::parallel([block_m, block_n]) {
                c[(by * block_m + i, bx * block_n + j)] =
                    a[(by * block_m + i, bx * block_n + j)] + 1.0;
            }
        },
    );
}

#[test]
fn swizzle_visits_every_tile_once() -> TestResult {
    for (s, &(m, n)) in [(100, 200), (16, 16), (250, 33)].iter().enumerate() {
        let a = random_tensor::<f32>(&[m, n], 3600 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        swizzled_add(&a, &mut c)?;
        let want: Vec<f64> = host(&a).iter().map(|v| round_to::<f32>(v + 1.0)).collect();
        check(&format!("swizzled {m}x{n}"), &c, &want, 0.0, 0.0);
    }
    Ok(())
}

#[tile::kernel(n = 4, threads = 32)]
pub fn printer(a: Tensor<f32, (n,)>) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_shared::<f32>([n]);
        T::copy(a, t);
        T::print(t[0] + t[1], "sum of the first two");
        T::print(t);
    });
}

#[test]
fn print_runs() -> TestResult {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], dev())?;
    printer(&a)?;
    dev().synchronize()?;
    Ok(())
}

/// `T::get_thread_binding` in a CUDA-only kernel: each thread writes its index.
#[tile::kernel(n = 128, threads = 128, target = "cuda")]
pub fn lane_ids(c: TensorMut<i32, (n,)>) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_local::<i32>([1]);
        t[0] = T::get_thread_binding();
        c[t[0]] = t[0];
    });
}

#[test]
fn thread_binding_is_cuda_only() -> TestResult {
    assert!(lane_ids::SPEC.cpu.source.is_empty());
    assert!(lane_ids::SPEC.cuda.source.contains("threadIdx.x"));
    let mut c = Tensor::full(&[128], -1i32, dev())?;
    let r = lane_ids(&mut c);
    if dev().is_cuda() {
        r?;
        check_exact("lane ids", &c, &(0..128).collect::<Vec<i32>>());
    } else {
        assert!(r.is_err(), "a CUDA-only kernel must refuse a CPU launch");
        check_exact("untouched", &c, &vec![-1; 128]);
    }
    Ok(())
}

/// A transpose through a swizzled shared tile (`T::annotate_layout`): rows
/// are written and columns read; the layout changes where elements live, not
/// the result.
#[tile::kernel(b = 64, threads = 128)]
pub fn transpose_swizzled(a: Tensor<f16, (M, N)>, c: TensorMut<f16, (N, M)>) {
    T::kernel([T::ceildiv(N, b), T::ceildiv(M, b)], threads, |bx, by| {
        let s = T::alloc_shared::<f16>([b, b]);
        T::annotate_layout(s, T::swizzled);
        T::copy(a.at([by * b, bx * b]), s);
        for (i, j) in T::parallel([b, b]) {
            c[(bx * b + i, by * b + j)] = s[(j, i)];
        }
    });
}

#[test]
fn swizzled_layout_transpose() -> TestResult {
    assert!(transpose_swizzled::SPEC.ir.contains("layout=\"swizzled\""));
    for (s, &(m, n)) in [(128, 64), (100, 70)].iter().enumerate() {
        let a = random_tensor::<f16>(&[m, n], 3700 + s as u64, dev())?;
        let mut c = Tensor::full(&[n, m], f16::NAN, dev())?;
        transpose_swizzled(&a, &mut c)?;
        let av = host(&a);
        let want: Vec<f64> = (0..n * m).map(|x| av[(x % m) * n + x / m]).collect();
        check(&format!("transpose {m}x{n}"), &c, &want, 0.0, 0.0);
    }
    Ok(())
}

/// Outputs the launcher allocates (`Output<..>`, TileLang's `out_idx`):
/// shapes come from the inputs' bound dims; the call returns them.
#[tile::kernel(block_n = 256, threads = 128)]
pub fn add_and_scale(
    a: Tensor<f32, (M, N)>,
    b: Tensor<f32, (M, N)>,
    sum: Output<f32, (M, N)>,
    scaled: Output<f16, (M, N)>,
) {
    T::kernel([T::ceildiv(N, block_n), M], threads, |bx, by| {
        for j in T::parallel(block_n) {
            sum[(by, bx * block_n + j)] = a[(by, bx * block_n + j)] + b[(by, bx * block_n + j)];
            scaled[(by, bx * block_n + j)] = (a[(by, bx * block_n + j)] * 0.5) as f16;
        }
    });
}

#[tile::kernel(threads = 64)]
pub fn negate(a: Tensor<f32, (N,)>, out: Output<f32, (N,)>) {
    T::kernel(T::ceildiv(N, 64), threads, |bx| {
        for i in T::parallel(64) {
            out[bx * 64 + i] = -a[bx * 64 + i];
        }
    });
}

#[test]
fn launcher_allocated_outputs() -> TestResult {
    for (s, &(m, n)) in [(3, 256), (5, 1000)].iter().enumerate() {
        let a = random_tensor::<f32>(&[m, n], 3800 + s as u64, dev())?;
        let b = random_tensor::<f32>(&[m, n], 3900 + s as u64, dev())?;
        let (sum, scaled) = add_and_scale(&a, &b)?;
        assert_eq!(sum.shape(), &[m, n]);
        assert_eq!(scaled.device(), dev());
        let (av, bv) = (host(&a), host(&b));
        let want: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(x, y)| round_to::<f32>(x + y))
            .collect();
        check("sum", &sum, &want, 0.0, 0.0);
        let half: Vec<f64> = av.iter().map(|x| round_to::<f16>(x * 0.5)).collect();
        check("scaled", &scaled, &half, 0.0, 0.0);
    }
    let a = random_tensor::<f32>(&[1000], 4000, dev())?;
    let out = negate::on(&dev().default_stream()?).launch(&a)?;
    check(
        "negate",
        &out,
        &host(&a).iter().map(|x| -x).collect::<Vec<_>>(),
        0.0,
        0.0,
    );
    // A bad input is refused before anything is launched.
    let bad = random_tensor::<f32>(&[4, 300], 4001, dev())?;
    let err = add_and_scale(&a.reshape(&[4, 250])?, &bad)
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("input b shape mismatch"), "{err}");
    Ok(())
}

/// A 64 KiB shared tile: past the 48 KiB static limit the CUDA backend uses
/// dynamic shared memory (the runtime sizes it at launch).
#[tile::kernel(bm = 64, n = 256, threads = 256)]
pub fn big_shared_scale(a: Tensor<f32, (M, n)>, c: TensorMut<f32, (M, n)>) {
    T::kernel(T::ceildiv(M, bm), threads, |bx| {
        let s = T::alloc_shared::<f32>([bm, n]);
        T::copy(a.at([bx * bm, 0]), s);
        for (i, j) in T::parallel([bm, n]) {
            s[(i, j)] = s[(i, j)] * 3.0;
        }
        T::copy(s, c.at([bx * bm, 0]));
    });
}

#[test]
fn shared_memory_beyond_48k() -> TestResult {
    assert_eq!(big_shared_scale::SPEC.cuda.shared_bytes, 64 * 256 * 4);
    assert!(big_shared_scale::SPEC
        .cuda
        .source
        .contains("extern __shared__"));
    for (s, m) in [128usize, 100].into_iter().enumerate() {
        let a = random_tensor::<f32>(&[m, 256], 4100 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, 256], f32::NAN, dev())?;
        big_shared_scale(&a, &mut c)?;
        let want: Vec<f64> = host(&a).iter().map(|x| round_to::<f32>(x * 3.0)).collect();
        check(&format!("big shared m={m}"), &c, &want, 0.0, 0.0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Shared memory reused across phases (CUDA merges buffers by lifetime)
// ---------------------------------------------------------------------------

/// GEMM whose A/B tiles are dead after the main loop: the f32 tile staging
/// the epilogue reuses their bytes on CUDA (16 KiB in all, not 32 KiB).
#[tile::kernel(block_m = 64, block_n = 64, block_k = 32, stages = 2, threads = 128)]
pub fn gemm_staged_epilogue(
    a: Tensor<f16, (M, K)>,
    b: Tensor<f16, (K, N)>,
    c: TensorMut<f32, (M, N)>,
) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, block_k]);
            let b_s = T::alloc_shared::<f16>([block_k, block_n]);
            let c_s = T::alloc_shared::<f32>([block_m, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c_s);
            for (i, j) in T::parallel([block_m, block_n]) {
                c_s[(i, j)] = c_s[(i, j)] * 2.0;
            }
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// Two phases through shared memory, each reading its tile transposed (so
/// threads read what others wrote): `s2` reuses `s1`'s bytes on CUDA.
#[tile::kernel(bm = 64, bn = 64, threads = 128)]
pub fn two_phase_shared(
    a: Tensor<f32, (M, N)>,
    b: Tensor<f32, (M, N)>,
    c: TensorMut<f32, (M, N)>,
    d: TensorMut<f32, (M, N)>,
) {
    T::kernel([T::ceildiv(N, bn), T::ceildiv(M, bm)], threads, |bx, by| {
        let s1 = T::alloc_shared::<f32>([bm, bn]);
        let s2 = T::alloc_shared::<f32>([bm, bn]);
        T::copy(a.at([by * bm, bx * bn]), s1);
        for (i, j) in T::parallel([bm, bn]) {
            c[(by * bm + i, bx * bn + j)] = s1[(j, i)] + 1.0;
        }
        T::copy(b.at([by * bm, bx * bn]), s2);
        for (i, j) in T::parallel([bm, bn]) {
            d[(by * bm + i, bx * bn + j)] = s2[(j, i)] * 2.0;
        }
    });
}

#[test]
fn shared_memory_reused_across_phases() -> TestResult {
    let cu = gemm_staged_epilogue::SPEC.cuda.source;
    assert!(cu.contains("unsigned char tl_smem[16384];"), "{cu}");
    let cu = two_phase_shared::SPEC.cuda.source;
    assert!(cu.contains("unsigned char tl_smem[16384];"), "{cu}");
    for (s, &(m, n, k)) in GEMM_SIZES.iter().enumerate() {
        let a = random_tensor::<f16>(&[m, k], 4200 + s as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], 4300 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        gemm_staged_epilogue(&a, &b, &mut c)?;
        let want: Vec<f64> = matmul_ref(&host(&a), &host(&b), m, n, k, false)
            .into_iter()
            .map(|v| 2.0 * v)
            .collect();
        check(
            &format!("gemm_staged_epilogue m={m} n={n} k={k}"),
            &c,
            &want,
            2e-2,
            2e-2,
        );
    }
    for (s, &(m, n)) in [(128, 192), (100, 70), (64, 64), (3, 130)]
        .iter()
        .enumerate()
    {
        let a = random_tensor::<f32>(&[m, n], 4400 + s as u64, dev())?;
        let b = random_tensor::<f32>(&[m, n], 4500 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        let mut d = Tensor::full(&[m, n], f32::NAN, dev())?;
        two_phase_shared(&a, &b, &mut c, &mut d)?;
        let (av, bv) = (host(&a), host(&b));
        // Element (r, q) of a block's output is its tile's element (q', r')
        // (block-relative, transposed); outside the input that is the
        // copy's zero padding.
        let at = |v: &[f64], r: usize, q: usize| {
            let (br, bq) = (r / 64 * 64, q / 64 * 64);
            let (sr, sq) = (br + (q - bq), bq + (r - br));
            if sr < m && sq < n {
                v[sr * n + sq]
            } else {
                0.0
            }
        };
        let want_c: Vec<f64> = (0..m * n)
            .map(|x| round_to::<f32>(at(&av, x / n, x % n) + 1.0))
            .collect();
        let want_d: Vec<f64> = (0..m * n)
            .map(|x| round_to::<f32>(at(&bv, x / n, x % n) * 2.0))
            .collect();
        check(&format!("two_phase c {m}x{n}"), &c, &want_c, 0.0, 0.0);
        check(&format!("two_phase d {m}x{n}"), &d, &want_d, 0.0, 0.0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Two gemms into one accumulator
// ---------------------------------------------------------------------------

/// `C = A[:, :32] · B[:32, :] + A[:, 32:40] · B[32:40, :]` for `K = 40`:
/// on CUDA the first gemm runs on tensor cores and the second (K = 8 does
/// not qualify) is a dot product per element over the same accumulator
/// registers.
#[tile::kernel(bm = 64, bn = 64, bk = 32, k2 = 8, threads = 128)]
pub fn gemm_two_sources(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel([T::ceildiv(N, bn), T::ceildiv(M, bm)], threads, |bx, by| {
        let a1 = T::alloc_shared::<f16>([bm, bk]);
        let b1 = T::alloc_shared::<f16>([bk, bn]);
        let a2 = T::alloc_shared::<f16>([bm, k2]);
        let b2 = T::alloc_shared::<f16>([k2, bn]);
        let acc = T::alloc_fragment::<f32>([bm, bn]);
        T::clear(acc);
        T::copy(a.at([by * bm, 0]), a1);
        T::copy(b.at([0, bx * bn]), b1);
        T::copy(a.at([by * bm, bk]), a2);
        T::copy(b.at([bk, bx * bn]), b2);
        T::gemm(a1, b1, acc);
        T::gemm(a2, b2, acc);
        T::copy(acc, c.at([by * bm, bx * bn]));
    });
}

#[test]
fn two_gemms_into_one_accumulator() -> TestResult {
    let cu = gemm_two_sources::SPEC.cuda.source;
    assert_eq!(cu.matches("tl::gemm_ss<").count(), 1, "{cu}");
    for (s, &(m, n)) in [(64, 64), (128, 192), (67, 129)].iter().enumerate() {
        let k = 40;
        let a = random_tensor::<f16>(&[m, k], 4600 + s as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], 4700 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        gemm_two_sources(&a, &b, &mut c)?;
        let want = matmul_ref(&host(&a), &host(&b), m, n, k, false);
        check(&format!("gemm_two_sources {m}x{n}"), &c, &want, 1e-2, 1e-2);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Persistent kernels (`T::persistent`)
// ---------------------------------------------------------------------------

/// A fixed grid of `blocks` blocks walks the `(M / bm) x (N / bn)` tiles of an
/// element-wise kernel: fewer blocks than tiles, and (for small shapes) more.
#[tile::kernel(bm = 16, bn = 32, blocks = 5, threads = 64)]
pub fn persistent_scale(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(blocks, threads, |bid| {
        for (tx, ty) in T::persistent([T::ceildiv(N, bn), T::ceildiv(M, bm)], blocks, bid) {
            for (i, j) in T::parallel([bm, bn]) {
                c[(ty * bm + i, tx * bn + j)] = a[(ty * bm + i, tx * bn + j)] * 3.0;
            }
        }
    });
}

/// A persistent GEMM: each of `blocks` blocks runs whole output tiles one after
/// another, reusing its shared tiles and accumulator (and, on CUDA, its
/// pipeline) from tile to tile.
#[tile::kernel(
    block_m = 64,
    block_n = 64,
    block_k = 32,
    stages = 3,
    blocks = 3,
    threads = 128
)]
pub fn persistent_gemm(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(blocks, threads, |bid| {
        let a_s = T::alloc_shared::<f16>([block_m, block_k]);
        let b_s = T::alloc_shared::<f16>([block_k, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, block_n]);
        for (bx, by) in T::persistent(
            [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
            blocks,
            bid,
        ) {
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        }
    });
}

#[test]
fn persistent_blocks_cover_every_tile_once() -> TestResult {
    // 1 tile (more blocks than tiles), 3x4 tiles, ragged 7x3 tiles.
    for (s, &(m, n)) in [(16, 32), (48, 128), (100, 70)].iter().enumerate() {
        let a = random_tensor::<f32>(&[m, n], 4600 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        persistent_scale(&a, &mut c)?;
        let want: Vec<f64> = host(&a).iter().map(|x| round_to::<f32>(x * 3.0)).collect();
        check(&format!("persistent_scale {m}x{n}"), &c, &want, 0.0, 0.0);
    }
    for (s, &(m, n, k)) in GEMM_SIZES.iter().enumerate() {
        let a = random_tensor::<f16>(&[m, k], 4700 + s as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], 4800 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        persistent_gemm(&a, &b, &mut c)?;
        let want = matmul_ref(&host(&a), &host(&b), m, n, k, false);
        check(
            &format!("persistent_gemm m={m} n={n} k={k}"),
            &c,
            &want,
            2e-2,
            2e-2,
        );
    }
    Ok(())
}
