//! Row sums of an `M × N` f32 matrix with dynamic `M` and `N`: each block
//! walks its rows' column tiles, accumulating with `T::reduce_sum(.., clear =
//! false)`; ragged tiles are zero-padded by the copy.
//!
//! `cargo run --release --example reduce_sum [M N]`

use std::time::Instant;
use tile::prelude::*;

#[tile::kernel(block_m = 4, block_n = 1024, threads = 256)]
pub fn row_sum(x: Tensor<f32, (M, N)>, y: TensorMut<f32, (M,)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let tile = T::alloc_fragment::<f32>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m]);
        T::clear(acc);
        for k in T::serial(T::ceildiv(N, block_n)) {
            T::copy(x.at([bx * block_m, k * block_n]), tile);
            T::reduce_sum(tile, acc, 1, false);
        }
        T::copy(acc, y.at(bx * block_m));
    });
}

/// Checks `row_sum` against a host reference at `m × n` on `dev`; returns the
/// summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, m: usize, n: usize) -> Result<String, Box<dyn std::error::Error>> {
    let x = tile::testing::random_tensor::<f32>(&[m, n], 16, dev)?;
    let mut y = Tensor::full(&[m], f32::NAN, dev)?;
    let t = Instant::now();
    row_sum(&x, &mut y)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let xv = x.to_vec()?;
    let want: Vec<f64> = (0..m)
        .map(|r| xv[r * n..(r + 1) * n].iter().map(|&v| v as f64).sum())
        .collect();
    let report = tile::testing::assert_allclose(&y.to_vec()?, &want, 1e-3, 1e-4)?;
    Ok(format!(
        "reduce_sum: device={dev} m={m} n={n} max_abs_err={:.3e} time={:.3} ms (first call)",
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let (m, n) = match args.as_slice() {
        [m, n] => (*m, *n),
        _ => (1000, 3000),
    };
    println!("{}", run(Device::default(), m, n)?);
    Ok(())
}
