//! Version B of the source's first kernel: tiles are staged in fragments with
//! `T::copy`, added there, and copied back (the same result as version A).
//!
//! `cargo run --release --example vecadd_buffered [N]`

use std::time::Instant;
use tile::prelude::*;

#[tile::kernel(block_n = 1024, threads = 128)]
pub fn vecadd_buffered(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let a_local = T::alloc_fragment::<f32>([block_n]);
        let b_local = T::alloc_fragment::<f32>([block_n]);
        let c_local = T::alloc_fragment::<f32>([block_n]);
        T::copy(a.at(bx * block_n), a_local);
        T::copy(b.at(bx * block_n), b_local);
        for i in T::parallel(block_n) {
            c_local[i] = a_local[i] + b_local[i];
        }
        T::copy(c_local, c.at(bx * block_n));
    });
}

/// Checks `vecadd_buffered` against a host reference at size `n` on `dev`;
/// returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, n: usize) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<f32>(&[n], 3, dev)?;
    let b = tile::testing::random_tensor::<f32>(&[n], 4, dev)?;
    let mut c = Tensor::full(&[n], f32::NAN, dev)?;
    let t = Instant::now();
    vecadd_buffered(&a, &b, &mut c)?;
    dev.synchronize()?;
    let first = t.elapsed();
    let (av, bv) = (a.to_vec()?, b.to_vec()?);
    let want: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| (x + y) as f64).collect();
    let report = tile::testing::assert_allclose(&c.to_vec()?, &want, 1e-6, 1e-6)?;
    let t = Instant::now();
    vecadd_buffered(&a, &b, &mut c)?;
    dev.synchronize()?;
    Ok(format!(
        "vecadd_buffered: device={dev} n={n} max_abs_err={:.3e} first call={:.3} ms, second={:.3} ms",
        report.max_abs,
        first.as_secs_f64() * 1e3,
        t.elapsed().as_secs_f64() * 1e3
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let default_n = if dev == Device::Cpu {
        1_000_003
    } else {
        1 << 26
    };
    let n = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(default_n);
    println!("{}", run(dev, n)?);
    Ok(())
}
