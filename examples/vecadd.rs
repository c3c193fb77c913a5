//! Version A of the source's first kernel: C = A + B, element by element,
//! reading global memory directly inside `T::parallel`.
//!
//! `cargo run --release --example vecadd [N]` — N defaults to 2^20 on the CPU
//! and 2^28 on a GPU; the output reports device, max error and bandwidth.

use std::time::Instant;
use tile::prelude::*;

#[tile::kernel(block_n = 2048, threads = 256)]
pub fn vecadd(a: Tensor<f16, (N,)>, b: Tensor<f16, (N,)>, c: TensorMut<f16, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

/// Checks `vecadd` against a host reference at size `n` on `dev`, then times
/// it; returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, n: usize) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<f16>(&[n], 1, dev)?;
    let b = tile::testing::random_tensor::<f16>(&[n], 2, dev)?;
    let mut c = Tensor::full(&[n], f16::NAN, dev)?; // poisoned: every element must be written
    vecadd(&a, &b, &mut c)?;
    dev.synchronize()?;
    let (av, bv, cv) = (a.to_vec()?, b.to_vec()?, c.to_vec()?);
    let want: Vec<f64> = av
        .iter()
        .zip(&bv)
        .map(|(x, y)| f16::from_f32(x.to_f32() + y.to_f32()).to_f64())
        .collect();
    let report = tile::testing::assert_allclose(&cv, &want, 1e-3, 1e-3)?;
    let reps = if dev == Device::Cpu { 5 } else { 50 };
    let mut times = Vec::new();
    for _ in 0..reps {
        let t = Instant::now();
        vecadd(&a, &b, &mut c)?;
        dev.synchronize()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let med = times[times.len() / 2];
    Ok(format!(
        "vecadd: device={dev} n={n} max_abs_err={:.3e} median={:.3} ms bandwidth={:.1} GB/s (3 x 2 bytes per element)",
        report.max_abs,
        med * 1e3,
        (3 * 2 * n) as f64 / med / 1e9
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let default_n = if dev == Device::Cpu { 1 << 20 } else { 1 << 28 };
    let n = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(default_n);
    println!("{}", run(dev, n)?);
    Ok(())
}
