//! FlashAttention forward (non-causal), TileLang's flagship example in tile:
//! `O = softmax(Q Kᵀ / √d) V` for `BH` independent heads of `S` positions and
//! head dim 64, f16 in and out, f32 accumulation. Each block owns `block_m`
//! query rows; it walks the keys in tiles of `block_n` with an online softmax
//! (running row maximum `m`, running row sum `l`, the output rescaled when the
//! maximum grows), so the `S × S` score matrix never leaves the chip. Both
//! products run on tensor cores on CUDA; the scores go through shared memory
//! for the row reductions and as the second product's operand. Keys past `S`
//! (a ragged last tile) are masked to -inf.
//!
//! `cargo run --release --example flash_attention [BH] [S]`

use std::time::Instant;
use tile::prelude::*;

#[tile::kernel(dim = 64, block_m = 64, block_n = 64, stages = 2, threads = 128)]
pub fn flash_attention(
    q: Tensor<f16, (BH, S, dim)>,
    k: Tensor<f16, (BH, S, dim)>,
    v: Tensor<f16, (BH, S, dim)>,
    o: TensorMut<f16, (BH, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_m), BH], threads, |bx, bh| {
        let q_s = T::alloc_shared::<f16>([block_m, dim]);
        let k_s = T::alloc_shared::<f16>([block_n, dim]);
        let v_s = T::alloc_shared::<f16>([block_n, dim]);
        let p_s = T::alloc_shared::<f16>([block_m, block_n]);
        // The scores leave the gemm's registers for shared memory, where the row
        // reductions run (a tensor-core accumulator cannot be reduced in place yet).
        let s_s = T::alloc_shared::<f32>([block_m, block_n]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        // Per-row state, read by every thread of a row: shared.
        let m = T::alloc_shared::<f32>([block_m]);
        let m_prev = T::alloc_shared::<f32>([block_m]);
        let rescale = T::alloc_shared::<f32>([block_m]);
        let l = T::alloc_shared::<f32>([block_m]);
        let row_sum = T::alloc_shared::<f32>([block_m]);
        T::copy(q.at([bh, bx * block_m, 0]), q_s);
        T::fill(acc, 0.0);
        T::fill(l, 0.0);
        T::fill(m, -T::infinity::<f32>());
        for kt in T::pipelined(T::ceildiv(S, block_n), stages) {
            T::copy(k.at([bh, kt * block_n, 0]), k_s);
            T::copy(v.at([bh, kt * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            T::copy(s, s_s);
            // Scores in base 2: (q·k / √64) · log2(e), so exp2 below is e^x.
            for (i, j) in T::parallel([block_m, block_n]) {
                s_s[(i, j)] = T::if_then_else(
                    kt * block_n + j < S,
                    s_s[(i, j)] * 0.18033688011112042,
                    -T::infinity::<f32>(),
                );
            }
            T::copy(m, m_prev);
            T::reduce_max(s_s, m, 1, false);
            for i in T::parallel(block_m) {
                rescale[i] = T::exp2(m_prev[i] - m[i]);
            }
            for (i, j) in T::parallel([block_m, dim]) {
                acc[(i, j)] = acc[(i, j)] * rescale[i];
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                s_s[(i, j)] = T::exp2(s_s[(i, j)] - m[i]);
            }
            T::reduce_sum(s_s, row_sum, 1);
            for i in T::parallel(block_m) {
                l[i] = l[i] * rescale[i] + row_sum[i];
            }
            T::copy(s_s, p_s);
            T::gemm(p_s, v_s, acc);
        }
        for (i, j) in T::parallel([block_m, dim]) {
            acc[(i, j)] = acc[(i, j)] / l[i];
        }
        T::copy(acc, o.at([bh, bx * block_m, 0]));
    });
}

/// `O = softmax(Q Kᵀ / √d) V` per head, in f64.
fn reference(q: &[f16], k: &[f16], v: &[f16], bh: usize, s: usize, d: usize) -> Vec<f64> {
    let scale = 1.0 / (d as f64).sqrt();
    let mut o = vec![0f64; bh * s * d];
    let mut w = vec![0f64; s];
    for h in 0..bh {
        let at = |x: &[f16], r: usize, c: usize| x[(h * s + r) * d + c].to_f64();
        for i in 0..s {
            for (j, wj) in w.iter_mut().enumerate() {
                *wj = (0..d).map(|c| at(q, i, c) * at(k, j, c)).sum::<f64>() * scale;
            }
            let mx = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut sum = 0.0;
            for wj in w.iter_mut() {
                *wj = (*wj - mx).exp();
                sum += *wj;
            }
            for c in 0..d {
                let x: f64 = (0..s).map(|j| w[j] * at(v, j, c)).sum();
                o[(h * s + i) * d + c] = x / sum;
            }
        }
    }
    o
}

/// Checks `flash_attention` against the host reference for `bh` heads of `s`
/// positions on `dev`; returns the summary line. `main` and
/// `tests/examples.rs` call it.
pub fn run(dev: Device, bh: usize, s: usize) -> Result<String, Box<dyn std::error::Error>> {
    let d = 64;
    let q = tile::testing::random_tensor::<f16>(&[bh, s, d], 31, dev)?;
    let k = tile::testing::random_tensor::<f16>(&[bh, s, d], 32, dev)?;
    let v = tile::testing::random_tensor::<f16>(&[bh, s, d], 33, dev)?;
    let mut o = Tensor::full(&[bh, s, d], f16::NAN, dev)?;
    let t = Instant::now();
    flash_attention(&q, &k, &v, &mut o)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let want = reference(&q.to_vec()?, &k.to_vec()?, &v.to_vec()?, bh, s, d);
    let report = tile::testing::assert_allclose(&o.to_vec()?, &want, 2e-3, 2e-2)?;
    Ok(format!(
        "flash_attention: device={dev} bh={bh} s={s} d={d} max_abs_err={:.3e} time={:.3} ms (first call)",
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

/// Median time of `flash_attention` for `bh` heads of `s` positions on random
/// inputs (L2 flushed between runs), as a summary line with TFLOP/s
/// (`4 · bh · s² · d` flops: two products).
pub fn bench(dev: Device, bh: usize, s: usize) -> Result<String, Box<dyn std::error::Error>> {
    let d = 64;
    let q = tile::testing::random_tensor::<f16>(&[bh, s, d], 41, dev)?;
    let k = tile::testing::random_tensor::<f16>(&[bh, s, d], 42, dev)?;
    let v = tile::testing::random_tensor::<f16>(&[bh, s, d], 43, dev)?;
    let mut o = Tensor::<f16>::empty(&[bh, s, d], dev)?;
    let r = tile::do_bench(
        &dev.default_stream()?,
        |st| flash_attention::on(st).launch(&q, &k, &v, &mut o),
        &tile::BenchOptions::default(),
    )?;
    let flops = 4.0 * bh as f64 * (s * s) as f64 * d as f64;
    Ok(format!(
        "flash_attention bh={bh} s={s} d={d}: {:.3} ms, {:.1} TFLOP/s ({})",
        r.median_ms,
        flops / (r.median_ms * 1e-3) / 1e12,
        r.method
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let bh = args.next().transpose()?.unwrap_or(2);
    let s = args
        .next()
        .transpose()?
        .unwrap_or(if dev == Device::Cpu { 200 } else { 1000 });
    println!("{}", run(dev, bh, s)?);
    if dev.is_cuda() {
        // The shape of the torch SDPA row in bench/gpu_run.sh: 64 heads of 4096.
        println!("{}", bench(dev, 64, 4096)?);
    }
    Ok(())
}
