//! fp8 GEMM with per-tensor scales: `C = (scale_a · scale_b) · A · Bᵀ`, A
//! `[M, K]` and B `[N, K]` in `f8e4m3` (or `f8e5m2`), accumulated in f32 and
//! written as bf16 — the form of an fp8 linear layer, whose weights are
//! stored `[out, in]`. On Hopper `T::gemm` runs on fp8 `wgmma` (k32 steps,
//! both operands K-major, which is why B is `[N, K]`), fed by bulk tensor
//! copies from a producer warpgroup; on the CPU and on sm_80, which has no
//! fp8 tensor cores, the same source runs as loops.
//!
//! `cargo run --release --example gemm_fp8 [M N K]`

use std::time::Instant;
use tile::prelude::*;

/// Four variants: 128 × 128 over two consumer warpgroups (the default) or
/// 64 × 128 over one, with 4 or 6 stages. Every tile is 128 deep (one
/// 128-byte panel of fp8 per row). Each thread holds 64 accumulator floats
/// and as many for the stage being summed: fp8 tensor-core sums are narrower
/// than f32, so each stage is summed apart and added to the accumulator in
/// f32 (as cuBLASLt does without fast accumulation), which rules out the
/// larger tiles' 128 floats per thread.
#[tile::kernel(
    dtype = [f8e4m3, f8e5m2],
    block_m = [128, 64],
    block_n = 128,
    block_k = 128,
    stages = [4, 6],
    threads = [256, 128],
    filter = block_m * block_n / threads == 64
)]
pub fn gemm_fp8(
    a: Tensor<dtype, (M, K)>,
    b: Tensor<dtype, (N, K)>,
    c: TensorMut<bf16, (M, N)>,
    scale_a: f32,
    scale_b: f32,
) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_swizzle(8);
            let a_s = T::alloc_shared::<dtype>([block_m, block_k]);
            let b_s = T::alloc_shared::<dtype>([block_n, block_k]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([bx * block_n, ko * block_k]), b_s);
                T::gemm(a_s, b_s, acc, transpose_b = true);
            }
            let scale = scale_a * scale_b;
            for (i, j) in T::parallel([block_m, block_n]) {
                acc[(i, j)] = acc[(i, j)] * scale;
            }
            let c_s = T::alloc_shared::<bf16>([block_m, block_n]);
            T::annotate_layout(c_s, T::swizzled);
            T::copy(acc, c_s);
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// The same product as a persistent kernel: `blocks` blocks (one per
/// multiprocessor of an H100/H200) walk the output tiles. On Hopper the
/// producer warpgroup runs the tile loop too, so the next tile's first
/// stages load while the consumers scale and store this one (through `c_s`,
/// which keeps bytes of its own). e4m3 only: the e5m2 instance's portable
/// code (loops: sm_80 has no fp8 tensor cores) spills 60 bytes at the
/// two-blocks-per-SM register cap; its Hopper code is the e4m3 one's.
#[tile::kernel(
    dtype = [f8e4m3],
    block_m = 128,
    block_n = 128,
    block_k = 128,
    stages = 4,
    threads = 256,
    blocks = 132
)]
pub fn gemm_fp8_persistent(
    a: Tensor<dtype, (M, K)>,
    b: Tensor<dtype, (N, K)>,
    c: TensorMut<bf16, (M, N)>,
    scale_a: f32,
    scale_b: f32,
) {
    T::kernel(blocks, threads, |bid| {
        let a_s = T::alloc_shared::<dtype>([block_m, block_k]);
        let b_s = T::alloc_shared::<dtype>([block_n, block_k]);
        let c_s = T::alloc_shared::<bf16>([block_m, block_n]);
        T::annotate_layout(c_s, T::swizzled);
        let acc = T::alloc_fragment::<f32>([block_m, block_n]);
        for (bx, by) in T::persistent(
            [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
            blocks,
            bid,
        ) {
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([bx * block_n, ko * block_k]), b_s);
                T::gemm(a_s, b_s, acc, transpose_b = true);
            }
            let scale = scale_a * scale_b;
            for (i, j) in T::parallel([block_m, block_n]) {
                acc[(i, j)] = acc[(i, j)] * scale;
            }
            T::copy(acc, c_s);
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        }
    });
}

/// The host reference: the f32-exact products of the fp8 values, summed in
/// f64, scaled.
fn reference<E: Element>(
    a: &Tensor<E>,
    b: &Tensor<E>,
    scale: f64,
    (m, n, k): (usize, usize, usize),
) -> Result<Vec<f64>, tile::Error> {
    let host = |t: &Tensor<E>| -> Result<Vec<f64>, tile::Error> {
        Ok(t.to_vec()?.iter().map(|x| x.to_f64()).collect())
    };
    let want = tile::testing::matmul_ref(&host(a)?, &host(b)?, (m, n, k), false, true);
    Ok(want.into_iter().map(|x| x * scale).collect())
}

fn check_one<E: Element>(
    name: &str,
    launch: impl Fn(&Tensor<E>, &Tensor<E>, &mut Tensor<bf16>, f32, f32) -> Result<(), tile::Error>,
    dev: Device,
    (m, n, k): (usize, usize, usize),
) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<E>(&[m, k], 31, dev)?;
    let b = tile::testing::random_tensor::<E>(&[n, k], 32, dev)?;
    let (sa, sb) = (0.75f32, 1.25f32);
    let mut c = Tensor::full(&[m, n], bf16::NAN, dev)?;
    let t = Instant::now();
    launch(&a, &b, &mut c, sa, sb)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let want = reference(&a, &b, f64::from(sa) * f64::from(sb), (m, n, k))?;
    // The products are exact in f32; what differs is the order of the f32
    // sums and the bf16 rounding of the result (2^-8 relative).
    let atol = 1e-3 * (k as f64).sqrt();
    let report = tile::testing::assert_allclose(&c.to_vec()?, &want, atol, 8e-3)
        .map_err(|e| format!("{name}: {e}"))?;
    Ok(format!(
        "{name}: max_abs_err={:.3e} time={:.3} ms (first call)",
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

pub fn run(
    dev: Device,
    m: usize,
    n: usize,
    k: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let s = (m, n, k);
    let mut lines = vec![
        check_one::<f8e4m3>("gemm_fp8 e4m3", gemm_fp8, dev, s)?,
        check_one::<f8e5m2>("gemm_fp8 e5m2", gemm_fp8, dev, s)?,
        check_one::<f8e4m3>("gemm_fp8_persistent e4m3", gemm_fp8_persistent, dev, s)?,
    ];
    for (config, label) in gemm_fp8::CONFIGS.iter().zip(gemm_fp8::LABELS) {
        lines.push(check_one::<f8e4m3>(
            &format!("gemm_fp8 e4m3 [{label}]"),
            |a, b, c, x, y| gemm_fp8::with(*config).launch(a, b, c, x, y),
            dev,
            s,
        )?);
    }
    Ok(format!(
        "gemm_fp8: device={dev} m={m} n={n} k={k}\n  {}",
        lines.join("\n  ")
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
        _ if dev == Device::Cpu => (136, 144, 160),
        _ => (1000, 1040, 1056),
    };
    println!("{}", run(dev, m, n, k)?);
    Ok(())
}
