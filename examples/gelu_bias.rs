//! A GEMM with its epilogue fused: `C = GELU(A · B + bias)`, the bias one
//! value per column, GELU in its exact (erf) form, computed on the f32
//! accumulator before the single rounding to the output type.
//!
//! `cargo run --release --example gelu_bias [M N K]`

use std::time::Instant;
use tile::prelude::*;

/// GELU, `x Φ(x)` with the normal CDF from `erf`.
#[tile::func]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + T::erf(x * 0.707_106_77))
}

#[tile::kernel(dtype = [f16, bf16], block_m = 128, block_n = 128, block_k = 64, stages = 3, threads = 128)]
pub fn gemm_bias_gelu(
    a: Tensor<dtype, (M, K)>,
    b: Tensor<dtype, (K, N)>,
    bias: Tensor<dtype, (N,)>,
    c: TensorMut<dtype, (M, N)>,
) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_swizzle(8);
            let a_s = T::alloc_shared::<dtype>([block_m, block_k]);
            let b_s = T::alloc_shared::<dtype>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                let v = acc[(i, j)] + bias[bx * block_n + j] as f32;
                c[(by * block_m + i, bx * block_n + j)] = gelu(v) as dtype;
            }
        },
    );
}

fn gelu_ref(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

/// erf to about 1e-7 (Abramowitz–Stegun 7.1.26 is 1.5e-7): enough for an
/// f16/bf16 output.
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let y = 1.0
        - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t
            * (-x * x).exp();
    y.copysign(x)
}

/// Checks `gemm_bias_gelu` (f16 and bf16) against a host reference on `dev`;
/// returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(
    dev: Device,
    m: usize,
    n: usize,
    k: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<f16>(&[m, k], 71, dev)?;
    let b = tile::testing::random_tensor::<f16>(&[k, n], 72, dev)?;
    let bias = tile::testing::random_tensor::<f16>(&[n], 73, dev)?;
    let mut c = Tensor::full(&[m, n], f16::NAN, dev)?;
    let t = Instant::now();
    gemm_bias_gelu(&a, &b, &bias, &mut c)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let want = reference(&a.to_vec()?, &b.to_vec()?, &bias.to_vec()?, m, n, k);
    let tol = 2e-3 * (k as f64).sqrt();
    let report = tile::testing::assert_allclose(&c.to_vec()?, &want, tol, 1e-2)?;

    let a = tile::testing::random_tensor::<bf16>(&[m, k], 74, dev)?;
    let b = tile::testing::random_tensor::<bf16>(&[k, n], 75, dev)?;
    let bias = tile::testing::random_tensor::<bf16>(&[n], 76, dev)?;
    let mut c = Tensor::full(&[m, n], bf16::NAN, dev)?;
    gemm_bias_gelu(&a, &b, &bias, &mut c)?;
    let want = reference(&a.to_vec()?, &b.to_vec()?, &bias.to_vec()?, m, n, k);
    tile::testing::assert_allclose(&c.to_vec()?, &want, 4.0 * tol, 2e-2)?;
    Ok(format!(
        "gelu_bias: device={dev} m={m} n={n} k={k} max_abs_err={:.3e} time={:.3} ms (first call); bf16 matches",
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

fn reference<E: tile::Element>(
    a: &[E],
    b: &[E],
    bias: &[E],
    m: usize,
    n: usize,
    k: usize,
) -> Vec<f64> {
    let mut out = vec![0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k)
                .map(|p| a[i * k + p].to_f64() * b[p * n + j].to_f64())
                .sum();
            out[i * n + j] = gelu_ref(s + bias[j].to_f64());
        }
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let d = if dev == Device::Cpu {
        [256, 256, 256]
    } else {
        [1024, 1024, 1024]
    };
    let mut dims = d;
    for (i, v) in dims.iter_mut().enumerate() {
        if let Some(s) = std::env::args().nth(i + 1) {
            *v = s.parse()?;
        }
    }
    println!("{}", run(dev, dims[0], dims[1], dims[2])?);
    Ok(())
}
