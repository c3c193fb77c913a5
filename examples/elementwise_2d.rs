//! The source's 2-D element-wise add: a 2-D grid of 2-D tiles. The first grid
//! dim (bx) runs along N, the second (by) along M.
//!
//! `cargo run --release --example elementwise_2d [M N]`

use std::time::Instant;
use tile::prelude::*;

#[tile::kernel(block_m = 32, block_n = 64, threads = 256)]
pub fn elementwise_2d(a: Tensor<f32, (M, N)>, b: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
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

/// Checks `elementwise_2d` against a host reference at `m × n` on `dev`;
/// returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, m: usize, n: usize) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<f32>(&[m, n], 5, dev)?;
    let b = tile::testing::random_tensor::<f32>(&[m, n], 6, dev)?;
    let mut c = Tensor::full(&[m, n], f32::NAN, dev)?;
    let t = Instant::now();
    elementwise_2d(&a, &b, &mut c)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let (av, bv) = (a.to_vec()?, b.to_vec()?);
    let want: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| (x + y) as f64).collect();
    let report = tile::testing::assert_allclose(&c.to_vec()?, &want, 1e-6, 1e-6)?;
    Ok(format!(
        "elementwise_2d: device={dev} m={m} n={n} max_abs_err={:.3e} time={:.3} ms (first call)",
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
        _ => (1000, 1030),
    };
    println!("{}", run(Device::default(), m, n)?);
    Ok(())
}
