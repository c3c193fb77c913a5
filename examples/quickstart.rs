//! The source's quickstart: C = ReLU(A · B) in f16 with f32 accumulation,
//! tiled over a 2-D grid with a K loop, correct for any M, N, K.
//!
//! `cargo run --release --example quickstart [M N K]`

use std::time::Instant;
use tile::prelude::*;

#[tile::kernel(block_m = 64, block_n = 64, block_k = 32, stages = 3, threads = 128)]
pub fn gemm_relu(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, block_k]);
            let b_s = T::alloc_shared::<f16>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                acc[(i, j)] = T::max(acc[(i, j)], 0.0);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// Checks `gemm_relu` against a host reference at `m × n × k` on `dev`;
/// returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(
    dev: Device,
    m: usize,
    n: usize,
    k: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<f16>(&[m, k], 7, dev)?;
    let b = tile::testing::random_tensor::<f16>(&[k, n], 8, dev)?;
    let mut c = Tensor::full(&[m, n], f16::NAN, dev)?;
    let t = Instant::now();
    gemm_relu(&a, &b, &mut c)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let host = |t: &Tensor<f16>| -> Result<Vec<f64>, tile::Error> {
        Ok(t.to_vec()?.iter().map(|x| x.to_f64()).collect())
    };
    let mut want = tile::testing::matmul_ref(&host(&a)?, &host(&b)?, (m, n, k), false, false);
    want.iter_mut().for_each(|w| *w = w.max(0.0));
    let report = tile::testing::assert_allclose(&c.to_vec()?, &want, 2e-2, 2e-2)?;
    Ok(format!(
        "quickstart: device={dev} m={m} n={n} k={k} max_abs_err={:.3e} time={:.3} ms (first call) {:.2} TFLOP/s",
        report.max_abs,
        el.as_secs_f64() * 1e3,
        2.0 * (m * n * k) as f64 / el.as_secs_f64() / 1e12
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let (m, n, k) = match args.as_slice() {
        [m, n, k] => (*m, *n, *k),
        _ if dev == Device::Cpu => (200, 136, 100),
        _ => (1000, 1030, 1050),
    };
    println!("{}", run(dev, m, n, k)?);
    Ok(())
}
