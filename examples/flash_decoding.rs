//! Split-KV decoding (FlashDecoding): attention of one new query token per
//! head over a long key/value cache, `O = softmax(q Kᵀ / √d) V` for `B`
//! sequences of `H` query heads and `HKV` key/value heads (grouped-query
//! attention when `HKV < H`), f16 in and out.
//!
//! One token per head leaves a single row per head: too little work for one
//! block per head, and a 1-row product off the tensor cores. So the query
//! heads that share a key/value head (`H / HKV` of them, up to `block_h`)
//! are the rows of one tile, padded to 16 (the smallest `mma.sync` tile),
//! and the keys are cut into `splits` ranges, one block each: every block
//! runs the online softmax of `flash_attention` over its range and writes a
//! partial output and its log-sum-exp. A second kernel combines the splits
//! per head, weighting each by `2^(lse - max lse)`.
//!
//! `cargo run --release --example flash_decoding [B] [H] [HKV] [S]`
//! (checks at that shape; without arguments on a GPU it also times the
//! decoding benchmark shape)

use std::time::Instant;
use tile::prelude::*;

/// The partial attention of split `bs` for the query heads of key/value
/// head `bh` of sequence `bb`. With 16 rows the 4 warps split the columns,
/// so the row statistics combine across warps and P goes through shared
/// memory (the register path needs whole rows per warp).
#[tile::kernel(
    dim = 128,
    block_h = 16,
    block_n = 64,
    splits = 8,
    stages = 3,
    threads = 128
)]
pub fn flash_decoding_split(
    q: Tensor<f16, (B, H, dim)>,
    k: Tensor<f16, (B, HKV, S, dim)>,
    v: Tensor<f16, (B, HKV, S, dim)>,
    o_part: TensorMut<f32, (B, H, splits, dim)>,
    lse: TensorMut<f32, (B, H, splits)>,
) {
    T::kernel([splits, HKV, B], threads, |bs, bh, bb| {
        let group = H / HKV;
        // Whole key tiles per split; the last splits may get fewer (or none).
        let tiles = T::ceildiv(T::ceildiv(S, block_n), splits);
        let first = bs * tiles;
        let q_s = T::alloc_shared::<f16>([block_h, dim]);
        let k_s = T::alloc_shared::<f16>([block_n, dim]);
        let v_s = T::alloc_shared::<f16>([block_n, dim]);
        let p_s = T::alloc_shared::<f16>([block_h, block_n]);
        let s = T::alloc_fragment::<f32>([block_h, block_n]);
        let acc = T::alloc_fragment::<f32>([block_h, dim]);
        let m = T::alloc_fragment::<f32>([block_h]);
        let m_prev = T::alloc_fragment::<f32>([block_h]);
        let rescale = T::alloc_fragment::<f32>([block_h]);
        let l = T::alloc_fragment::<f32>([block_h]);
        let row_sum = T::alloc_fragment::<f32>([block_h]);
        T::copy(q.at([bb, bh * group, 0]), q_s);
        T::fill(acc, 0.0);
        T::fill(l, 0.0);
        T::fill(m, -T::infinity::<f32>());
        let count = T::max(T::min(tiles, T::ceildiv(S, block_n) - first), 0);
        for kt in T::pipelined(count, stages) {
            T::copy(k.at([bb, bh, (first + kt) * block_n, 0]), k_s);
            T::copy(v.at([bb, bh, (first + kt) * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            // Scores in base 2: (q·k / √dim) · log2(e).
            for (i, j) in T::parallel([block_h, block_n]) {
                s[(i, j)] = T::if_then_else(
                    (first + kt) * block_n + j < S,
                    s[(i, j)] * (1.4426950408889634 / T::sqrt(dim as f32)),
                    -T::infinity::<f32>(),
                );
            }
            T::copy(m, m_prev);
            T::reduce_max(s, m, 1, false);
            for i in T::parallel(block_h) {
                rescale[i] = T::exp2(m_prev[i] - m[i]);
            }
            for (i, j) in T::parallel([block_h, dim]) {
                acc[(i, j)] = acc[(i, j)] * rescale[i];
            }
            for (i, j) in T::parallel([block_h, block_n]) {
                s[(i, j)] = T::exp2(s[(i, j)] - m[i]);
            }
            T::reduce_sum(s, row_sum, 1);
            for i in T::parallel(block_h) {
                l[i] = l[i] * rescale[i] + row_sum[i];
            }
            T::copy(s, p_s);
            T::gemm(p_s, v_s, acc);
        }
        // Rows past the group are other heads' (or padding): not written. A
        // split with no keys writes a zero output of weight 2^-inf = 0.
        for (i, j) in T::parallel([block_h, dim]) {
            if i < group {
                o_part[(bb, bh * group + i, bs, j)] =
                    T::if_then_else(l[i] > 0.0, acc[(i, j)] / l[i], 0.0);
            }
        }
        for i in T::parallel(block_h) {
            if i < group {
                lse[(bb, bh * group + i, bs)] =
                    T::if_then_else(l[i] > 0.0, m[i] + T::log2(l[i]), -T::infinity::<f32>());
            }
        }
    });
}

/// Combines the splits of each head: `o = Σ 2^(lse_s - max) o_s / Σ 2^(lse_s - max)`.
#[tile::kernel(dim = 128, splits = 8, threads = 128)]
pub fn flash_decoding_combine(
    o_part: Tensor<f32, (B, H, splits, dim)>,
    lse: Tensor<f32, (B, H, splits)>,
    o: TensorMut<f16, (B, H, dim)>,
) {
    T::kernel([H, B], threads, |bh, bb| {
        let l_s = T::alloc_shared::<f32>([splits]);
        let mx = T::alloc_shared::<f32>([1]);
        T::copy(lse.at([bb, bh, 0]), l_s);
        T::reduce_max(l_s, mx, 0);
        for d in T::parallel(dim) {
            let num = T::alloc_var::<f32>(0.0);
            let den = T::alloc_var::<f32>(0.0);
            for sp in T::serial(splits) {
                let w = T::exp2(l_s[sp] - mx[0]);
                num += w * o_part[(bb, bh, sp, d)];
                den += w;
            }
            o[(bb, bh, d)] = num / den;
        }
    });
}

/// `b` sequences of `h` query heads (one token each) over `s` cached
/// positions of `hkv` key/value heads, head dim 128.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub b: usize,
    pub h: usize,
    pub hkv: usize,
    pub s: usize,
}

const D: usize = 128;
const SPLITS: usize = 8;
/// Query heads per key/value head the split kernel's tile holds.
const MAX_GROUP: usize = 16;

/// Refuses shapes the split kernel's tile cannot hold.
fn check_shape(sh: Shape) -> Result<(), Box<dyn std::error::Error>> {
    if sh.hkv == 0 || !sh.h.is_multiple_of(sh.hkv) || sh.h / sh.hkv > MAX_GROUP {
        return Err(format!(
            "flash_decoding: {} query heads over {} key/value heads (at most {MAX_GROUP} per group)",
            sh.h, sh.hkv
        )
        .into());
    }
    Ok(())
}

/// Both kernels on `st`; `o_part` and `lse` are the scratch between them.
fn launch(
    st: &tile::Stream,
    (q, k, v): (&Tensor<f16>, &Tensor<f16>, &Tensor<f16>),
    (o_part, lse): (&mut Tensor<f32>, &mut Tensor<f32>),
    o: &mut Tensor<f16>,
) -> Result<(), tile::Error> {
    flash_decoding_split::on(st).launch(q, k, v, o_part, lse)?;
    flash_decoding_combine::on(st).launch(o_part, lse, o)
}

/// One query per head against the cache, in f64.
fn reference(q: &[f16], k: &[f16], v: &[f16], sh: Shape) -> Vec<f64> {
    let Shape { b, h, hkv, s } = sh;
    let scale = 1.0 / (D as f64).sqrt();
    let mut o = vec![0f64; b * h * D];
    for bi in 0..b {
        for hi in 0..h {
            let qh = (bi * h + hi) * D;
            let kh = (bi * hkv + hi / (h / hkv)) * s;
            let w: Vec<f64> = (0..s)
                .map(|j| {
                    (0..D)
                        .map(|c| q[qh + c].to_f64() * k[(kh + j) * D + c].to_f64())
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let mx = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = w.iter().map(|x| (x - mx).exp()).collect();
            let sum: f64 = e.iter().sum();
            for c in 0..D {
                let x: f64 = (0..s).map(|j| e[j] * v[(kh + j) * D + c].to_f64()).sum();
                o[qh + c] = x / sum;
            }
        }
    }
    o
}

/// Random inputs and outputs for `sh` on `dev` (outputs NaN-poisoned).
#[allow(clippy::type_complexity)]
fn tensors(
    dev: Device,
    sh: Shape,
    seed: u64,
) -> Result<([Tensor<f16>; 3], [Tensor<f32>; 2], Tensor<f16>), Box<dyn std::error::Error>> {
    let q = tile::testing::random_tensor::<f16>(&[sh.b, sh.h, D], seed, dev)?;
    let k = tile::testing::random_tensor::<f16>(&[sh.b, sh.hkv, sh.s, D], seed + 1, dev)?;
    let v = tile::testing::random_tensor::<f16>(&[sh.b, sh.hkv, sh.s, D], seed + 2, dev)?;
    let o_part = Tensor::full(&[sh.b, sh.h, SPLITS, D], f32::NAN, dev)?;
    let lse = Tensor::full(&[sh.b, sh.h, SPLITS], f32::NAN, dev)?;
    let o = Tensor::full(&[sh.b, sh.h, D], f16::NAN, dev)?;
    Ok(([q, k, v], [o_part, lse], o))
}

/// Checks both kernels against the host reference at `sh` on `dev`;
/// returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, sh: Shape) -> Result<String, Box<dyn std::error::Error>> {
    check_shape(sh)?;
    let ([q, k, v], [mut o_part, mut lse], mut o) = tensors(dev, sh, 51)?;
    let t = Instant::now();
    let st = dev.default_stream()?;
    launch(&st, (&q, &k, &v), (&mut o_part, &mut lse), &mut o)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let want = reference(&q.to_vec()?, &k.to_vec()?, &v.to_vec()?, sh);
    let report = tile::testing::assert_allclose(&o.to_vec()?, &want, 2e-3, 2e-2)?;
    Ok(format!(
        "flash_decoding: device={dev} b={} h={} hkv={} s={} d={D} max_abs_err={:.3e} time={:.3} ms (first call)",
        sh.b,
        sh.h,
        sh.hkv,
        sh.s,
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

/// Median time of both kernels at `sh` (L2 flushed between runs), with the
/// bandwidth of the key/value cache they read and TFLOP/s (`4·B·H·S·D`).
pub fn bench(dev: Device, sh: Shape) -> Result<String, Box<dyn std::error::Error>> {
    check_shape(sh)?;
    let ([q, k, v], [mut o_part, mut lse], mut o) = tensors(dev, sh, 61)?;
    let r = tile::do_bench(
        &dev.default_stream()?,
        |st| launch(st, (&q, &k, &v), (&mut o_part, &mut lse), &mut o),
        &tile::BenchOptions::default(),
    )?;
    let secs = r.median_ms * 1e-3;
    let kv_bytes = 2.0 * (sh.b * sh.hkv * sh.s * D * 2) as f64;
    let flops = 4.0 * (sh.b * sh.h * sh.s * D) as f64;
    Ok(format!(
        "flash_decoding b={} h={} hkv={} s={} d={D}: {:.3} ms, {:.0} GB/s of K/V, {:.1} TFLOP/s ({})",
        sh.b,
        sh.h,
        sh.hkv,
        sh.s,
        r.median_ms,
        kv_bytes / secs / 1e9,
        flops / secs / 1e12,
        r.method
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let timed = std::env::args().len() == 1 && dev.is_cuda();
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let mut next = |default: usize| args.next().transpose().map(|x| x.unwrap_or(default));
    let (b, h, hkv) = (next(2)?, next(8)?, next(2)?);
    let s = next(if dev == Device::Cpu { 300 } else { 5000 })?;
    println!("{}", run(dev, Shape { b, h, hkv, s })?);
    if timed {
        println!(
            "{}",
            bench(
                dev,
                Shape {
                    b: 32,
                    h: 32,
                    hkv: 32,
                    s: 8192
                }
            )?
        );
        println!(
            "{}",
            bench(
                dev,
                Shape {
                    b: 32,
                    h: 32,
                    hkv: 8,
                    s: 8192
                }
            )?
        );
    }
    Ok(())
}
