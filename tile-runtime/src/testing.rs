//! Helpers for kernel tests: deterministic random data and tolerance checks against a
//! host reference computed in `f64`.
//!
//! Invariants: the same `(seed, n, lo, hi)` gives the same data on every platform (a
//! SplitMix64 generator, no global state); integer and `bool` dtypes get whole numbers;
//! a NaN in the actual data always fails a comparison.

use crate::device::Device;
use crate::dtype::Element;
use crate::error::Result;
use crate::tensor::Tensor;

/// SplitMix64: small, fast, and good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed` (the same seed gives the same numbers).
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// `n` values uniform in `[lo, hi)`, converted with [`Element::from_f64`]; integer and
/// `bool` dtypes get `floor`ed values.
pub fn random_vec<T: Element>(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<T> {
    let mut rng = Rng::new(seed);
    let whole = !T::DTYPE.is_float();
    (0..n)
        .map(|_| {
            let x = lo + (hi - lo) * rng.next_f64();
            T::from_f64(if whole { x.floor() } else { x })
        })
        .collect()
}

/// The default range of [`random_tensor`] for `T`: `[-1, 1)` for floats, `[-2, 2)` for
/// f8 (whose values are coarse: the spread puts data in several binades, and products
/// of two stay far from the formats' overflow), `[-16, 16)` for signed integers,
/// `[0, 32)` for unsigned ones, `{0, 1}` for `bool`.
pub fn default_range<T: Element>() -> (f64, f64) {
    let d = T::DTYPE;
    if matches!(d, crate::DType::F8E4M3 | crate::DType::F8E5M2) {
        (-2.0, 2.0)
    } else if d.is_float() {
        (-1.0, 1.0)
    } else if d == crate::DType::Bool {
        (0.0, 2.0)
    } else if d.is_signed_int() {
        (-16.0, 16.0)
    } else {
        (0.0, 32.0)
    }
}

/// A contiguous tensor of `shape` on `device` with [`random_vec`] data in the
/// [`default_range`] of `T`.
pub fn random_tensor<T: Element>(shape: &[usize], seed: u64, device: Device) -> Result<Tensor<T>> {
    let n = shape.iter().product();
    let (lo, hi) = default_range::<T>();
    Tensor::from_vec(random_vec::<T>(n, seed, lo, hi), shape, device)
}

/// Largest `|actual[i] - expected[i]|` (NaN if any actual value is NaN or the lengths
/// differ).
pub fn max_abs_err<T: Element>(actual: &[T], expected: &[f64]) -> f64 {
    if actual.len() != expected.len() {
        return f64::NAN;
    }
    let mut max = 0.0f64;
    for (a, e) in actual.iter().zip(expected) {
        let d = (a.to_f64() - e).abs();
        if d.is_nan() {
            return f64::NAN;
        }
        max = max.max(d);
    }
    max
}

/// What a passing [`assert_allclose`] measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// Largest `|a - e|` over all elements.
    pub max_abs: f64,
    /// Largest `|a - e| / |e|` over elements with `e != 0`.
    pub max_rel: f64,
}

/// `C = A · B` in `f64` on the host (row-major `m × n`), the reference of GEMM kernels.
/// `a` is `[m, k]`, or `[k, m]` when `trans_a`; `b` is `[k, n]`, or `[n, k]` when
/// `trans_b`. Rows are split over the host's cores (at 2000³ one core took seconds per
/// check, which a GPU run's checks of many kernels multiply); each row is summed in
/// the same order on any number of cores, so the result does not depend on them.
pub fn matmul_ref(
    a: &[f64],
    b: &[f64],
    (m, n, k): (usize, usize, usize),
    trans_a: bool,
    trans_b: bool,
) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    if n == 0 {
        return c;
    }
    let rows = |first: usize, out: &mut [f64]| {
        for (r, row) in out.chunks_mut(n).enumerate() {
            let i = first + r;
            for p in 0..k {
                let x = if trans_a { a[p * m + i] } else { a[i * k + p] };
                for (j, cj) in row.iter_mut().enumerate() {
                    *cj += x * if trans_b { b[j * k + p] } else { b[p * n + j] };
                }
            }
        }
    };
    // Threads only where the work is worth starting them (about a million products).
    if m * n * k < 1 << 20 {
        rows(0, &mut c);
    } else {
        par_rows(&mut c, n, rows);
    }
    c
}

/// Runs `f(first, rows)` over `out` split into runs of whole rows of `row_len` values,
/// one run per host core, in parallel: `first` is the index of the run's first row.
/// Host references use it (a GPU check at thousands of rows waits on the reference,
/// not the kernel); each row is computed by one call, so results do not depend on the
/// number of cores.
pub fn par_rows(out: &mut [f64], row_len: usize, f: impl Fn(usize, &mut [f64]) + Sync) {
    let row_len = row_len.max(1);
    let rows = out.len() / row_len;
    let workers = std::thread::available_parallelism().map_or(1, |w| w.get());
    let per = rows.div_ceil(workers.clamp(1, rows.max(1))).max(1);
    std::thread::scope(|sc| {
        for (t, run) in out.chunks_mut(per * row_len).enumerate() {
            let f = &f;
            sc.spawn(move || f(t * per, run));
        }
    });
}

/// Checks `|actual - expected| <= atol + rtol * |expected|` element-wise. Infinities must
/// match exactly; a NaN in `actual` always fails (even against a NaN reference), so a
/// kernel cannot hide a NaN. The error names the first bad index.
pub fn assert_allclose<T: Element>(
    actual: &[T],
    expected: &[f64],
    atol: f64,
    rtol: f64,
) -> std::result::Result<Report, String> {
    if actual.len() != expected.len() {
        return Err(format!(
            "length mismatch: actual has {} elements, expected {}",
            actual.len(),
            expected.len()
        ));
    }
    let mut report = Report {
        max_abs: 0.0,
        max_rel: 0.0,
    };
    let mut first_bad: Option<(usize, f64, f64)> = None;
    let mut bad = 0usize;
    for (i, (a, &e)) in actual.iter().zip(expected).enumerate() {
        let a = a.to_f64();
        let ok = if a.is_nan() {
            false
        } else if a.is_infinite() || e.is_infinite() {
            a == e
        } else {
            let d = (a - e).abs();
            report.max_abs = report.max_abs.max(d);
            if e != 0.0 {
                report.max_rel = report.max_rel.max(d / e.abs());
            }
            d <= atol + rtol * e.abs()
        };
        if !ok {
            bad += 1;
            if first_bad.is_none() {
                first_bad = Some((i, a, e));
            }
        }
    }
    match first_bad {
        None => Ok(report),
        Some((i, a, e)) => Err(format!(
            "mismatch at index {i}: actual {a}, expected {e} (|diff| {} > atol {atol} + rtol {rtol} * |expected|); \
             {bad} of {} elements differ; max abs err {}, max rel err {}",
            (a - e).abs(),
            actual.len(),
            report.max_abs,
            report.max_rel
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_reference_and_its_transposes() {
        // A = [[1, 2, 3], [4, 5, 6]] (2 x 3), B = [[1, 0], [0, 1], [1, 1]] (3 x 2).
        let (a, b) = ([1., 2., 3., 4., 5., 6.], [1., 0., 0., 1., 1., 1.]);
        let want = vec![4., 5., 10., 11.];
        assert_eq!(matmul_ref(&a, &b, (2, 2, 3), false, false), want);
        let a_t = [1., 4., 2., 5., 3., 6.];
        let b_t = [1., 0., 1., 0., 1., 1.];
        assert_eq!(matmul_ref(&a_t, &b_t, (2, 2, 3), true, true), want);
    }

    #[test]
    fn matmul_reference_split_over_threads_sums_as_one() {
        // Over the threading threshold, with rows that do not split evenly.
        let (m, n, k) = (131, 121, 71);
        let a = random_vec::<f64>(m * k, 3, -1.0, 1.0);
        let b = random_vec::<f64>(k * n, 4, -1.0, 1.0);
        let mut want = vec![0f64; m * n];
        for i in 0..m {
            for p in 0..k {
                for j in 0..n {
                    want[i * n + j] += a[i * k + p] * b[p * n + j];
                }
            }
        }
        assert_eq!(matmul_ref(&a, &b, (m, n, k), false, false), want);
        assert!(matmul_ref(&[], &[], (0, 5, 0), false, false)
            .iter()
            .all(|&x| x == 0.0));
        assert!(matmul_ref(&a, &[], (m, 0, k), false, false).is_empty());
    }

    #[test]
    fn deterministic_and_in_range() {
        let a = random_vec::<f32>(1000, 7, -2.0, 3.0);
        assert_eq!(a, random_vec::<f32>(1000, 7, -2.0, 3.0));
        assert_ne!(a, random_vec::<f32>(1000, 8, -2.0, 3.0));
        assert!(a.iter().all(|&x| (-2.0..3.0).contains(&x)));
        let i = random_vec::<i32>(1000, 1, -16.0, 16.0);
        assert!(i.iter().all(|&x| (-16..16).contains(&x)));
        assert!(i.contains(&-16) && i.contains(&15));
        let b = random_vec::<bool>(100, 3, 0.0, 2.0);
        assert!(b.iter().any(|&x| x) && b.iter().any(|&x| !x));
        let h = random_vec::<half::f16>(10, 1, -1.0, 1.0);
        assert!(h.iter().all(|x| x.to_f64().abs() <= 1.0));
    }

    #[test]
    fn random_tensors() -> Result<()> {
        let t = random_tensor::<half::bf16>(&[3, 5], 42, Device::Cpu)?;
        assert_eq!(t.shape(), &[3, 5]);
        assert_eq!(t.to_vec()?.len(), 15);
        Ok(())
    }

    #[test]
    fn allclose() {
        let actual = [1.0f32, 2.0, 3.0005];
        let r = assert_allclose(&actual, &[1.0, 2.0, 3.0], 1e-3, 0.0);
        assert!(r.is_ok_and(|r| r.max_abs > 4e-4 && r.max_abs < 6e-4));
        let e = assert_allclose(&actual, &[1.0, 2.5, 3.0], 1e-3, 1e-3)
            .err()
            .unwrap_or_default();
        assert!(
            e.starts_with("mismatch at index 1: actual 2, expected 2.5"),
            "{e}"
        );
        assert!(e.contains("1 of 3 elements differ"), "{e}");
        let nan = assert_allclose(&[f32::NAN], &[f64::NAN], 1.0, 1.0);
        assert!(nan.is_err());
        assert!(assert_allclose(&[f32::INFINITY], &[f64::INFINITY], 0.0, 0.0).is_ok());
        assert!(assert_allclose(&[1.0f32], &[1.0, 2.0], 0.0, 0.0).is_err());
        assert_eq!(max_abs_err(&[1i32, 5], &[1.0, 3.0]), 2.0);
        assert!(max_abs_err(&[f32::NAN], &[0.0]).is_nan());
    }
}
