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
#[path = "../../examples/vecadd.rs"]
mod vecadd_example;

#[allow(dead_code)]
#[path = "../../examples/quickstart.rs"]
mod quickstart;

// The suite by topic (one test binary).
mod accumulator_rows;
mod clusters;
mod copies;
mod f8;
mod helpers;
mod indices;
mod math;
mod odd_widths;
mod packed;
mod padding;
mod params;
mod phases;
mod prologue;
mod reductions;
mod scalars;
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

#[tile::kernel(dtype = [f32, bf16], block_n = 1024, threads = 128)]
pub fn vecadd_a(a: Tensor<dtype, (N,)>, b: Tensor<dtype, (N,)>, c: TensorMut<dtype, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

// ---------------------------------------------------------------------------
// Vector add, version B: tiles staged in fragments with `T::copy`
// ---------------------------------------------------------------------------

#[tile::kernel(dtype = [f16, f32, bf16], block_n = 1024, threads = 128)]
pub fn vecadd_b(a: Tensor<dtype, (N,)>, b: Tensor<dtype, (N,)>, c: TensorMut<dtype, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let a_l = T::alloc_fragment::<dtype>([block_n]);
        let b_l = T::alloc_fragment::<dtype>([block_n]);
        let c_l = T::alloc_fragment::<dtype>([block_n]);
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
        run_vecadd::<f32>("vecadd_a f32", vecadd_a, n, seed)?;
        run_vecadd::<bf16>("vecadd_a bf16", vecadd_a, n, seed)?;
    }
    Ok(())
}

#[test]
fn vecadd_b_all_dtypes() -> TestResult {
    for (k, &n) in VEC_SIZES.iter().enumerate() {
        let seed = 100 + 3 * k as u64;
        run_vecadd::<f16>("vecadd_b f16", vecadd_b, n, seed)?;
        run_vecadd::<f32>("vecadd_b f32", vecadd_b, n, seed)?;
        run_vecadd::<bf16>("vecadd_b bf16", vecadd_b, n, seed)?;
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
    vecadd_a(&a, &b, &mut ca)?;
    vecadd_b(&a, &b, &mut cb)?;
    assert_eq!(ca.to_vec()?, cb.to_vec()?);
    Ok(())
}

#[test]
fn empty_launch_writes_nothing() -> TestResult {
    // N = 0: the grid is empty, the launch succeeds and does nothing.
    let a = Tensor::<f32>::zeros(&[0], dev())?;
    let b = Tensor::<f32>::zeros(&[0], dev())?;
    let mut c = Tensor::<f32>::zeros(&[0], dev())?;
    vecadd_a(&a, &b, &mut c)?;
    vecadd_b(&a, &b, &mut c)?;
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
        vecadd_a(&a, &b, &mut c)?;
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
