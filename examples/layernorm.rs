//! Layer normalization of each row of an `M × 4096` f16 matrix with a weight
//! and a bias: `y = (x - mean) / sqrt(var + eps) * w + b`.
//!
//! `cargo run --release --example layernorm [M]`

use std::time::Instant;
use tile::prelude::*;

#[tile::kernel(n = 4096, threads = 256)]
pub fn layernorm(
    x: Tensor<f16, (M, n)>,
    w: Tensor<f16, (n,)>,
    b: Tensor<f16, (n,)>,
    y: TensorMut<f16, (M, n)>,
) {
    T::kernel(M, threads, |bx| {
        let row = T::alloc_fragment::<f32>([1, n]);
        let sq = T::alloc_fragment::<f32>([1, n]);
        let sum = T::alloc_fragment::<f32>([1]);
        let var = T::alloc_fragment::<f32>([1]);
        T::copy(x.at([bx, 0]), row);
        T::reduce_sum(row, sum, 1);
        for (i, j) in T::parallel([1, n]) {
            row[(i, j)] = row[(i, j)] - sum[i] / (n as f32);
            sq[(i, j)] = row[(i, j)] * row[(i, j)];
        }
        T::reduce_sum(sq, var, 1);
        for (i, j) in T::parallel([1, n]) {
            let inv = T::rsqrt(var[i] / (n as f32) + 1e-5);
            row[(i, j)] = row[(i, j)] * inv * (w[j] as f32) + (b[j] as f32);
        }
        T::copy(row, y.at([bx, 0]));
    });
}

/// Checks `layernorm` against a host reference with `m` rows on `dev`;
/// returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, m: usize) -> Result<String, Box<dyn std::error::Error>> {
    let n = 4096;
    let x = tile::testing::random_tensor::<f16>(&[m, n], 13, dev)?;
    let w = tile::testing::random_tensor::<f16>(&[n], 14, dev)?;
    let b = tile::testing::random_tensor::<f16>(&[n], 15, dev)?;
    let mut y = Tensor::full(&[m, n], f16::NAN, dev)?;
    let t = Instant::now();
    layernorm(&x, &w, &b, &mut y)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let (xv, wv, bv) = (x.to_vec()?, w.to_vec()?, b.to_vec()?);
    let mut want = vec![0f64; m * n];
    for r in 0..m {
        let row: Vec<f64> = xv[r * n..(r + 1) * n].iter().map(|v| v.to_f64()).collect();
        let mean = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let inv = 1.0 / (var + 1e-5).sqrt();
        for c in 0..n {
            want[r * n + c] = (row[c] - mean) * inv * wv[c].to_f64() + bv[c].to_f64();
        }
    }
    let report = tile::testing::assert_allclose(&y.to_vec()?, &want, 1e-2, 1e-2)?;
    Ok(format!(
        "layernorm: device={dev} m={m} n={n} max_abs_err={:.3e} time={:.3} ms (first call)",
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
