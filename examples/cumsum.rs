//! Inclusive prefix sums along each row of an `M × 1024` f32 matrix
//! (`T::cumsum` over a shared tile of rows).
//!
//! `cargo run --release --example cumsum [M]`

use std::time::Instant;
use tile::prelude::*;

#[tile::kernel(block_m = 4, n = 1024, threads = 128)]
pub fn cumsum_rows(x: Tensor<f32, (M, n)>, y: TensorMut<f32, (M, n)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let tile = T::alloc_shared::<f32>([block_m, n]);
        let out = T::alloc_shared::<f32>([block_m, n]);
        T::copy(x.at([bx * block_m, 0]), tile);
        T::cumsum(tile, out, 1);
        T::copy(out, y.at([bx * block_m, 0]));
    });
}

/// Checks `cumsum_rows` against a host reference with `m` rows on `dev`;
/// returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, m: usize) -> Result<String, Box<dyn std::error::Error>> {
    let n = 1024;
    let x = tile::testing::random_tensor::<f32>(&[m, n], 17, dev)?;
    let mut y = Tensor::full(&[m, n], f32::NAN, dev)?;
    let t = Instant::now();
    cumsum_rows(&x, &mut y)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let xv = x.to_vec()?;
    let mut want = vec![0f64; m * n];
    for r in 0..m {
        let mut s = 0f64;
        for c in 0..n {
            s += xv[r * n + c] as f64;
            want[r * n + c] = s;
        }
    }
    let report = tile::testing::assert_allclose(&y.to_vec()?, &want, 1e-3, 1e-4)?;
    Ok(format!(
        "cumsum: device={dev} m={m} n={n} max_abs_err={:.3e} time={:.3} ms (first call)",
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let m = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1000);
    println!("{}", run(Device::default(), m)?);
    Ok(())
}
