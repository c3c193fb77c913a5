//! Matrix–vector products, the memory-bound kernel of LLM decoding:
//! `y = A · x` with `A` an `N × K` f16 matrix (`gemv`), and with `A` stored
//! as 4-bit integers, eight to a `u32`, with one f16 scale per row and group
//! of `group` columns (`gemv_w4a16`, dequantized in the kernel: a weight is
//! `(q - 8) · scale`).
//!
//! Both are written the plain way: each block owns `block_n` rows, each
//! thread accumulates its own columns' products in a fragment, and one
//! `T::reduce_sum` per row at the end combines the threads' partial sums;
//! `gemv` stages its rows through shared memory in a pipeline.
//!
//! `cargo run --release --example gemv [N] [K]`

use std::time::Instant;
use tile::prelude::*;

/// `y[n] = Σ_k a[n, k] · x[k]`, f32 accumulation. Each step's tile of rows
/// goes through shared memory in a `stages`-deep pipeline (`cp.async` on
/// CUDA), so every block keeps `stages - 1` steps of the matrix in flight:
/// a memory-bound loop reaches the bandwidth only with that many bytes
/// outstanding. (Copying the rows straight into a register fragment, one
/// step at a time, left each block waiting on one step's loads: 0.70-0.76x
/// of copy bandwidth; `bench/RESULTS.md`.) A space of tile shapes
/// (`gemv::tune()` picks per shape): rows per block trade the grid's size
/// against the bytes each block streams, from 8 to 32 elements per thread.
#[tile::kernel(
    dtype = [f16, bf16],
    block_n = [8, 4, 16],
    block_k = [256, 512, 1024],
    stages = [4, 6],
    threads = 128,
    filter = block_n * block_k / threads <= 32 && block_n * block_k / threads >= 8
)]
pub fn gemv(a: Tensor<dtype, (N, K)>, x: Tensor<dtype, (K,)>, y: TensorMut<dtype, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bn| {
        let x_s = T::alloc_shared::<dtype>([block_k]);
        let a_s = T::alloc_shared::<dtype>([block_n, block_k]);
        let acc = T::alloc_fragment::<f32>([block_n, block_k]);
        let sum = T::alloc_fragment::<f32>([block_n]);
        T::clear(acc);
        for k in T::pipelined(T::ceildiv(K, block_k), stages) {
            T::copy(x.at([k * block_k]), x_s);
            T::copy(a.at([bn * block_n, k * block_k]), a_s);
            for (i, j) in T::parallel([block_n, block_k]) {
                acc[(i, j)] += (a_s[(i, j)] as f32) * (x_s[j] as f32);
            }
        }
        T::reduce_sum(acc, sum, 1);
        T::copy(sum, y.at([bn * block_n]));
    });
}

/// `y[n] = Σ_k (q[n, k] - 8) · scale[n, k / group] · x[k]`, where `q[n, k]`
/// is bits `4 (k % 8) ..` of `w[n, k / 8]`. `K` must be a multiple of
/// `group` (a multiple of 8); a ragged last step reads zero words.
/// Like `gemv`, each step's words, scales and slice of `x` go through
/// shared memory in a pipeline: loaded straight into registers one step at
/// a time, every block waited a memory latency per step and the kernel ran
/// at a quarter of the bandwidth (`bench/RESULTS.md`, 2026-12-03).
///
/// A thread owns one column of words (`j`) in all `block_n` rows of the
/// block: the serial loop over `i` inside the nest keeps `block_n` of
/// `acc2`'s rows in its registers (per-thread rows), and the eight `x` a
/// word needs are read from shared memory once, as four f16 pairs, for
/// every row. (With one row per thread every weight read its `x` from
/// shared memory, and the kernel was bound by shared-memory bandwidth.)
///
/// The weights are dequantized and multiplied two at a time, in `f16x2`
/// pairs: a word's nibbles `t` and `t + 4` masked into the mantissas of a
/// pair of 1024.0 (`0x6400`) read as `1024 + q`, exactly, so one AND-OR, one
/// paired subtract and one paired FMA handle two weights (in f32, one
/// weight took an AND-OR, an add and an FMA: the kernel was issue-bound at
/// 1.84x the f16 GEMV, `bench/RESULTS.md`). A word's eight products are
/// summed in a pair (at most 4 terms a half, `|q - 8| <= 8` times an `x`)
/// and added, times the group's scale, into the row's pair of partial sums
/// (one per thread and row, `K / block_k` words long), which become f32
/// only for the final sum over the threads. Converting each word's sum to
/// f32 instead took 6-9% longer (17.3-17.8 against 16.3-16.6 us at
/// 8192^2, `bench/RESULTS.md`), for an error that stays under the f16
/// output's rounding either way.
#[tile::kernel(
    block_n = [16, 8, 32],
    block_k = [1024, 2048],
    group = 128,
    stages = [4, 3],
    threads = [128, 256],
    filter = (block_k / 8) % threads == 0
)]
pub fn gemv_w4a16(
    w: Tensor<u32, (N, KW)>,
    scale: Tensor<f16, (N, G)>,
    x: Tensor<f16, (K,)>,
    y: TensorMut<f16, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bn| {
        // Eight weights per word: the fragments run over words.
        let x_s = T::alloc_shared::<f16>([block_k]);
        let w_s = T::alloc_shared::<u32>([block_n, block_k / 8]);
        let s_s = T::alloc_shared::<f16>([block_n, block_k / group]);
        // A thread's eight x as the pairs its nibbles pair with:
        // (x0, x4), (x1, x5) / 16, (x2, x6), (x3, x7) / 16.
        let xp = T::alloc_local::<f16x2>([4]);
        let acc2 = T::alloc_fragment::<f16x2>([block_n, block_k / 8]);
        let acc = T::alloc_fragment::<f32>([block_n, block_k / 8]);
        let sum = T::alloc_fragment::<f32>([block_n]);
        T::clear(acc2);
        for k in T::pipelined(T::ceildiv(K, block_k), stages) {
            T::copy(x.at([k * block_k]), x_s);
            T::copy(w.at([bn * block_n, k * (block_k / 8)]), w_s);
            T::copy(scale.at([bn * block_n, k * (block_k / group)]), s_s);
            for j in T::parallel(block_k / 8) {
                for t in T::unroll(2) {
                    let b = j * 8 + 2 * t;
                    xp[2 * t] = T::pack2(x_s[b], x_s[b + 4]);
                    xp[2 * t + 1] = T::pack2(x_s[b + 1], x_s[b + 5]) * 0.0625;
                }
                for i in T::unroll(block_n) {
                    let word = w_s[(i, j)];
                    let mut dot = T::splat::<f16x2>(0.0);
                    for t in T::unroll(2) {
                        // Nibbles 2t, 2t + 4 at bits 0 and 16 of `src`, and
                        // 2t + 1, 2t + 5 at bits 4 and 20 (read as 16 q).
                        let src = word >> (8 * t);
                        let even = (src & 0x000f000fu32) | 0x64006400u32;
                        let odd = (src & 0x00f000f0u32) | 0x64006400u32;
                        let qe = T::bitcast::<f16x2>(even) - 1032.0;
                        let qo = T::bitcast::<f16x2>(odd) - 1152.0;
                        dot = T::fma(qe, xp[2 * t], dot);
                        dot = T::fma(qo, xp[2 * t + 1], dot);
                    }
                    acc2[(i, j)] = T::fma(dot, s_s[(i, j * 8 / group)], acc2[(i, j)]);
                }
            }
        }
        for j in T::parallel(block_k / 8) {
            for i in T::unroll(block_n) {
                acc[(i, j)] = T::low(acc2[(i, j)]) as f32 + T::high(acc2[(i, j)]) as f32;
            }
        }
        T::reduce_sum(acc, sum, 1);
        T::copy(sum, y.at([bn * block_n]));
    });
}

/// Host reference of `gemv` in f64.
fn gemv_ref(a: &[f64], x: &[f64], n: usize, k: usize) -> Vec<f64> {
    (0..n)
        .map(|r| (0..k).map(|c| a[r * k + c] * x[c]).sum())
        .collect()
}

/// Checks `gemv` (f16 and bf16) and `gemv_w4a16` against host references on
/// `dev`; returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, n: usize, k: usize) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<f16>(&[n, k], 51, dev)?;
    let x = tile::testing::random_tensor::<f16>(&[k], 52, dev)?;
    let mut y = Tensor::full(&[n], f16::NAN, dev)?;
    let t = Instant::now();
    gemv(&a, &x, &mut y)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let to64 = |v: Vec<f16>| v.into_iter().map(|e| e.to_f64()).collect::<Vec<_>>();
    let (av, xv) = (to64(a.to_vec()?), to64(x.to_vec()?));
    let want = gemv_ref(&av, &xv, n, k);
    // Sums of k products of values in [-1, 1): the error grows with sqrt(k).
    let atol = 2e-3 * (k as f64).sqrt();
    let report = tile::testing::assert_allclose(&y.to_vec()?, &want, atol, 1e-2)?;
    // Every variant, through tuning (each runs and is compared with the
    // default's output before it is timed), then the chosen one again.
    let mut y2 = Tensor::full(&[n], f16::NAN, dev)?;
    gemv::tune().launch(&a, &x, &mut y2)?;
    tile::testing::assert_allclose(&y2.to_vec()?, &want, atol, 1e-2)?;

    let ab = tile::testing::random_tensor::<bf16>(&[n, k], 53, dev)?;
    let xb = tile::testing::random_tensor::<bf16>(&[k], 54, dev)?;
    let mut yb = Tensor::full(&[n], bf16::NAN, dev)?;
    gemv(&ab, &xb, &mut yb)?;
    let to64b = |v: Vec<bf16>| v.into_iter().map(|e| e.to_f64()).collect::<Vec<_>>();
    let want = gemv_ref(&to64b(ab.to_vec()?), &to64b(xb.to_vec()?), n, k);
    tile::testing::assert_allclose(&yb.to_vec()?, &want, 4.0 * atol, 2e-2)?;

    let group = 128;
    let kq = k.div_ceil(group) * group; // the W4 kernel's K is whole groups
    let (w, scale, words) = quantized(dev, n, kq, group, 55)?;
    let xq = tile::testing::random_tensor::<f16>(&[kq], 56, dev)?;
    let mut yq = Tensor::full(&[n], f16::NAN, dev)?;
    gemv_w4a16::tune().launch(&w, &scale, &xq, &mut yq)?;
    let want = gemv_ref(
        &dequantized(&words, &scale.to_vec()?, n, kq, group),
        &to64(xq.to_vec()?),
        n,
        kq,
    );
    let atol_q = 4e-2 * (kq as f64).sqrt();
    tile::testing::assert_allclose(&yq.to_vec()?, &want, atol_q, 1e-2)?;
    Ok(format!(
        "gemv: device={dev} n={n} k={k} max_abs_err={:.3e} time={:.3} ms (first call); bf16 and w4a16 (k={kq}) match",
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

/// Packed int4 weights on the device, their per-group scales, and the words on the host.
pub type Quantized = (Tensor<u32>, Tensor<f16>, Vec<u32>);

/// Random 4-bit weights (packed, eight per `u32`, low bits first) and
/// per-group f16 scales, and the words on the host.
pub fn quantized(
    dev: Device,
    n: usize,
    k: usize,
    group: usize,
    seed: u64,
) -> Result<Quantized, Box<dyn std::error::Error>> {
    let mut rng = tile::testing::Rng::new(seed);
    let words: Vec<u32> = (0..n * k / 8).map(|_| rng.next_u64() as u32).collect();
    let w = Tensor::from_slice(&words, &[n, k / 8], dev)?;
    let scale = tile::testing::random_tensor::<f16>(&[n, k / group], seed + 1, dev)?;
    Ok((w, scale, words))
}

/// The weights the packed words and scales stand for, in f64.
pub fn dequantized(words: &[u32], scale: &[f16], n: usize, k: usize, group: usize) -> Vec<f64> {
    let mut out = vec![0f64; n * k];
    for r in 0..n {
        for c in 0..k {
            let q = (words[(r * k + c) / 8] >> (4 * (c % 8))) & 15;
            out[r * k + c] = (q as f64 - 8.0) * scale[r * (k / group) + c / group].to_f64();
        }
    }
    out
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let (dn, dk) = if dev == Device::Cpu {
        (256, 1024)
    } else {
        (8192, 8192)
    };
    let arg = |i: usize, d: usize| -> Result<usize, Box<dyn std::error::Error>> {
        Ok(std::env::args()
            .nth(i)
            .map(|s| s.parse())
            .transpose()?
            .unwrap_or(d))
    };
    println!("{}", run(dev, arg(1, dn)?, arg(2, dk)?)?);
    Ok(())
}
