//! Row-wise softmax of an `M × 8192` f16 matrix, one row per block, the row
//! held in registers (a fragment) between the passes: max, exp, sum, scale.
//! Global memory is read once and written once.
//!
//! `cargo run --release --example softmax [M]`

use std::time::Instant;
use tile::prelude::*;

/// A space of block sizes (the first, 256 threads, is the default; the
/// compiler gives each thread `8192 / threads` elements and picks the vector
/// width that divides them): `softmax::tune()` times them on the call's shape.
#[tile::kernel(n = 8192, threads = [256, 128, 512, 1024])]
pub fn softmax(x: Tensor<f16, (M, n)>, y: TensorMut<f16, (M, n)>) {
    T::kernel(M, threads, |bx| {
        let row = T::alloc_fragment::<f32>([1, n]);
        let row_max = T::alloc_fragment::<f32>([1]);
        let row_sum = T::alloc_fragment::<f32>([1]);
        T::copy(x.at([bx, 0]), row);
        T::reduce_max(row, row_max, 1);
        for (i, j) in T::parallel([1, n]) {
            // e^x = 2^(x log2 e): one ex2 instruction per element.
            row[(i, j)] = T::exp2((row[(i, j)] - row_max[i]) * 1.4426950408889634);
        }
        T::reduce_sum(row, row_sum, 1);
        // One reciprocal per row, then a multiply per element.
        for i in T::parallel(1) {
            row_sum[i] = 1.0 / row_sum[i];
        }
        for (i, j) in T::parallel([1, n]) {
            row[(i, j)] = row[(i, j)] * row_sum[i];
        }
        T::copy(row, y.at([bx, 0]));
    });
}

/// Checks `softmax` against a host reference with `m` rows on `dev`; returns
/// the summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, m: usize) -> Result<String, Box<dyn std::error::Error>> {
    let n = 8192;
    let x = tile::testing::random_tensor::<f16>(&[m, n], 11, dev)?;
    let mut y = Tensor::full(&[m, n], f16::NAN, dev)?;
    let t = Instant::now();
    softmax(&x, &mut y)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let xv = x.to_vec()?;
    let mut want = vec![0f64; m * n];
    for r in 0..m {
        let row = &xv[r * n..(r + 1) * n];
        let mx = row
            .iter()
            .map(|v| v.to_f64())
            .fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v.to_f64() - mx).exp()).sum();
        for (c, v) in row.iter().enumerate() {
            want[r * n + c] = (v.to_f64() - mx).exp() / s;
        }
    }
    const ATOL: f64 = 1e-5;
    const RTOL: f64 = 1e-2;
    let report = tile::testing::assert_allclose(&y.to_vec()?, &want, ATOL, RTOL)?;
    // Every variant, through tuning (each is run and compared with the
    // default's output before it is timed), then the chosen one again.
    let mut y2 = Tensor::full(&[m, n], f16::NAN, dev)?;
    softmax::tune().launch(&x, &mut y2)?;
    tile::testing::assert_allclose(&y2.to_vec()?, &want, ATOL, RTOL)?;
    let chosen = softmax::reports()
        .iter()
        .find(|r| r.shapes[0] == [m, n])
        .map(|r| r.chosen_label.clone())
        .unwrap_or_default();
    Ok(format!(
        "softmax: device={dev} m={m} n={n} max_abs_err={:.3e} time={:.3} ms (first call); tuned: {chosen}",
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let default_m = if dev == Device::Cpu { 64 } else { 8192 };
    let m = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(default_m);
    println!("{}", run(dev, m)?);
    Ok(())
}
