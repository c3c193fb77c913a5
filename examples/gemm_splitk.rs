//! Split-K GEMM `C = A · B` for few rows (decode shapes, M ≤ 64): a grid of
//! output tiles alone leaves most of the GPU idle when M is small and N is
//! not huge (16 × 4096 output columns is 32 tiles of 128 on a 132-SM GPU).
//! The K loop is therefore split over `splits` blocks per output tile: each
//! writes its partial sums (f32) into its own slice of a workspace, and a
//! second kernel adds the slices and rounds once to the output dtype. Two
//! plain passes instead of atomics: no zeroing of C first, and the same bits
//! on every run.
//!
//! `cargo run --release --example gemm_splitk [M N K]`

use std::time::Instant;
use tile::prelude::*;

/// Pass 1: block `(bx, by, bz)` sums K tiles `bz·per .. (bz+1)·per` of
/// output tile `(by, bx)` into `w[bz]`. The last split's range is cut at K
/// (a split past the end runs no iterations and writes zeros). On Hopper
/// the 64-row tile is one warpgroup's `wgmma` strip fed by bulk tensor
/// copies; elsewhere `mma.sync`.
#[tile::kernel(
    dtype = [f16, bf16],
    splits = [4, 8, 2, 16],
    block_m = [64, 16],
    block_n = [128, 64],
    block_k = [64, 128],
    stages = 4,
    threads = 128,
    filter = (block_m == 16) == (block_n == 64) && (block_m == 16) == (block_k == 128)
)]
pub fn gemm_splitk(
    a: Tensor<dtype, (M, K)>,
    b: Tensor<dtype, (K, N)>,
    w: TensorMut<f32, (splits, M, N)>,
) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m), splits],
        threads,
        |bx, by, bz| {
            let a_s = T::alloc_shared::<dtype>([block_m, block_k]);
            let b_s = T::alloc_shared::<dtype>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            let per = T::ceildiv(T::ceildiv(K, block_k), splits);
            let k0 = bz * per;
            let count = T::max(T::min(per, T::ceildiv(K, block_k) - k0), 0);
            for ko in T::pipelined(count, stages) {
                T::copy(a.at([by * block_m, (k0 + ko) * block_k]), a_s);
                T::copy(b.at([(k0 + ko) * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, w.at([bz, by * block_m, bx * block_n]));
        },
    );
}

/// Pass 2: `c = Σ_s w[s]`, rounded once.
#[tile::kernel(dtype = [f16, bf16], splits = [4, 8, 2, 16], block = 1024, threads = 256)]
pub fn splitk_reduce(w: Tensor<f32, (splits, M, N)>, c: TensorMut<dtype, (M, N)>) {
    T::kernel([T::ceildiv(N, block), M], threads, |bx, by| {
        for j in T::parallel(block) {
            let mut s = 0.0f32;
            for z in T::unroll(splits) {
                s += w[(z, by, bx * block + j)];
            }
            c[(by, bx * block + j)] = s as dtype;
        }
    });
}

/// One split-K product: `w` (`[splits, M, N]` f32) gets the partial sums,
/// `c` their total. `splits` is 2, 4, 8 or 16 (another count fails at
/// launch: no such variant); `small` picks the 16-row tile (M ≤ 16) over the
/// 64-row one.
pub fn gemm_split_k<E: gemm_splitk::Dtype + splitk_reduce::Dtype>(
    a: &Tensor<E>,
    b: &Tensor<E>,
    w: &mut Tensor<f32>,
    c: &mut Tensor<E>,
    small: bool,
) -> Result<(), tile::Error> {
    let splits = w.shape().first().copied().unwrap_or(0) as i64;
    let (block_m, block_n, block_k) = if small { (16, 64, 128) } else { (64, 128, 64) };
    gemm_splitk::with(gemm_splitk::Config {
        splits,
        block_m,
        block_n,
        block_k,
    })
    .launch(a, b, w)?;
    splitk_reduce::with(splitk_reduce::Config { splits }).launch(w, c)
}

fn check_one<E: gemm_splitk::Dtype + splitk_reduce::Dtype>(
    dev: Device,
    (m, n, k): (usize, usize, usize),
    splits: usize,
    small: bool,
) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<E>(&[m, k], 7100 + splits as u64, dev)?;
    let b = tile::testing::random_tensor::<E>(&[k, n], 7200 + splits as u64, dev)?;
    let mut w = Tensor::full(&[splits, m, n], f32::NAN, dev)?;
    let mut c = Tensor::full(&[m, n], E::from_f64(f64::NAN), dev)?;
    let t = Instant::now();
    gemm_split_k(&a, &b, &mut w, &mut c, small)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let host = |t: &Tensor<E>| -> Result<Vec<f64>, tile::Error> {
        Ok(t.to_vec()?.iter().map(|x| x.to_f64()).collect())
    };
    let want = tile::testing::matmul_ref(&host(&a)?, &host(&b)?, (m, n, k), false, false);
    let name = format!(
        "gemm_split_k {} splits={splits} {}",
        E::DTYPE,
        if small { "16-row tile" } else { "64-row tile" }
    );
    let report = tile::testing::assert_allclose(&c.to_vec()?, &want, 5e-2, 2e-2)
        .map_err(|e| format!("{name}: {e}"))?;
    Ok(format!(
        "{name}: max_abs_err={:.3e} time={:.3} ms (first call)",
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

/// Checks both dtypes, every split count and both tiles at `m × n × k`.
pub fn run(
    dev: Device,
    m: usize,
    n: usize,
    k: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let s = (m, n, k);
    let mut lines = Vec::new();
    for splits in [4, 8, 2, 16] {
        for small in [false, true] {
            lines.push(check_one::<f16>(dev, s, splits, small)?);
        }
        lines.push(check_one::<bf16>(dev, s, splits, false)?);
    }
    Ok(format!(
        "gemm_splitk: device={dev} m={m} n={n} k={k}\n  {}",
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
        _ if dev == Device::Cpu => (20, 136, 300),
        _ => (33, 1030, 4100),
    };
    println!("{}", run(dev, m, n, k)?);
    Ok(())
}
