//! Transpose of an `M × N` matrix through a shared tile: each block reads a
//! `block × block` tile row by row (coalesced), and writes it transposed,
//! again row by row, reading the shared tile by columns. The shared tile is
//! swizzled so that the column reads do not fall in one memory bank.
//!
//! `cargo run --release --example transpose [M] [N]`

use std::time::Instant;
use tile::prelude::*;

/// Tiles of 64 or 128 (the first is the default; `transpose::tune()` picks).
#[tile::kernel(dtype = [f16, bf16], block = [64, 128], threads = [256, 512])]
pub fn transpose(x: Tensor<dtype, (M, N)>, y: TensorMut<dtype, (N, M)>) {
    T::kernel(
        [T::ceildiv(N, block), T::ceildiv(M, block)],
        threads,
        |bx, by| {
            let s = T::alloc_shared::<dtype>([block, block]);
            T::annotate_layout(s, T::swizzled);
            T::copy(x.at([by * block, bx * block]), s);
            for (i, j) in T::parallel([block, block]) {
                y[(bx * block + i, by * block + j)] = s[(j, i)];
            }
        },
    );
}

/// Checks `transpose` (f16 and bf16) against the host on `dev`; returns the
/// summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, m: usize, n: usize) -> Result<String, Box<dyn std::error::Error>> {
    let x = tile::testing::random_tensor::<f16>(&[m, n], 61, dev)?;
    let mut y = Tensor::full(&[n, m], f16::NAN, dev)?;
    let t = Instant::now();
    transpose(&x, &mut y)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let (xv, yv) = (x.to_vec()?, y.to_vec()?);
    for r in 0..n {
        for c in 0..m {
            if yv[r * m + c].to_bits() != xv[c * n + r].to_bits() {
                return Err(format!(
                    "transpose f16 {m}x{n}: y[{r}, {c}] = {} != x[{c}, {r}] = {}",
                    yv[r * m + c],
                    xv[c * n + r]
                )
                .into());
            }
        }
    }
    let x32 = tile::testing::random_tensor::<bf16>(&[m, n], 62, dev)?;
    let mut y32 = Tensor::full(&[n, m], bf16::NAN, dev)?;
    transpose(&x32, &mut y32)?;
    let (xv, yv) = (x32.to_vec()?, y32.to_vec()?);
    if (0..n * m).any(|e| yv[e].to_bits() != xv[(e % m) * n + e / m].to_bits()) {
        return Err(format!("transpose bf16 {m}x{n}: mismatch").into());
    }
    Ok(format!(
        "transpose: device={dev} m={m} n={n} exact (f16, bf16) time={:.3} ms (first call)",
        el.as_secs_f64() * 1e3
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let d = if dev == Device::Cpu { 1000 } else { 8192 };
    let arg = |i: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(std::env::args()
            .nth(i)
            .map(|s| s.parse())
            .transpose()?
            .unwrap_or(d))
    };
    println!("{}", run(dev, arg(1)?, arg(2)?)?);
    Ok(())
}
