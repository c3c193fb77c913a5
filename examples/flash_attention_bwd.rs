//! FlashAttention backward: `dQ`, `dK`, `dV` of `O = softmax(Q Kᵀ / √d) V`
//! for `B × H` heads of `S` positions, head dims 64 and 128, f16 in, without
//! the `S × S` matrices in memory (FlashAttention-2's schedule).
//!
//! Three kernels: the forward pass again, which also writes each row's
//! log-sum-exp `lse` (base 2); a row kernel for `delta = rowsum(dO ∘ O)`;
//! and the backward kernel. Each block of the backward kernel owns `block_n`
//! keys: it keeps their `dK` and `dV` in tensor-core accumulators and walks
//! the queries in tiles of `block_m`, recomputing the probabilities
//! transposed (`Pᵀ = 2^(K Qᵀ · scale - lse)`, so their rows are the block's
//! keys), then `dV += Pᵀ dO`, `dPᵀ = V dOᵀ`, `dSᵀ = Pᵀ ∘ (dPᵀ - delta)`,
//! `dK += dSᵀ Q`; `Pᵀ` and `dSᵀ` feed their products from registers.
//! `dQ += dS K` needs `dS` the other way round, so `dSᵀ` goes through shared
//! memory and the product reads it transposed; every key block adds its
//! share into `dQ` (f32) with atomic adds.
//!
//! At head dim 128 one warpgroup cannot hold dK, dV and dQ accumulators
//! together, so two kernels replace the backward kernel: dK and dV per key
//! block as above, and dQ per query block (P and dS recomputed with the
//! queries as rows), written once, without atomics.
//!
//! `cargo run --release --example flash_attention_bwd [B] [H] [S]`

use std::time::Instant;
use tile::prelude::*;

/// The forward pass (as `examples/flash_attention.rs`), also writing each
/// query row's log-sum-exp in base 2 (`m + log2(l)` of the scaled scores).
/// Built for head dims 64 and 128 (`attention_fwd_lse::with(Config { dim })`); 64
/// query rows per block, so that one warpgroup's registers hold the 64 × 128
/// accumulator at head dim 128.
#[tile::kernel(dim = [64, 128], block_m = 64, block_n = 64, stages = 2, threads = 128)]
pub fn attention_fwd_lse(
    q: Tensor<f16, (B, H, S, dim)>,
    k: Tensor<f16, (B, H, S, dim)>,
    v: Tensor<f16, (B, H, S, dim)>,
    o: TensorMut<f16, (B, H, S, dim)>,
    lse: TensorMut<f32, (B, H, S)>,
) {
    T::kernel([T::ceildiv(S, block_m), H, B], threads, |bx, by, bz| {
        let q_s = T::alloc_shared::<f16>([block_m, dim]);
        let k_s = T::alloc_shared::<f16>([block_n, dim]);
        let v_s = T::alloc_shared::<f16>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<f16>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        let m = T::alloc_fragment::<f32>([block_m]);
        let m_prev = T::alloc_fragment::<f32>([block_m]);
        let rescale = T::alloc_fragment::<f32>([block_m]);
        let l = T::alloc_fragment::<f32>([block_m]);
        let row_sum = T::alloc_fragment::<f32>([block_m]);
        T::copy(q.at([bz, by, bx * block_m, 0]), q_s);
        T::fill(acc, 0.0);
        T::fill(l, 0.0);
        T::fill(m, -T::infinity::<f32>());
        for kt in T::pipelined(T::ceildiv(S, block_n), stages) {
            T::copy(k.at([bz, by, kt * block_n, 0]), k_s);
            T::copy(v.at([bz, by, kt * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            for (i, j) in T::parallel([block_m, block_n]) {
                s[(i, j)] = T::if_then_else(
                    kt * block_n + j < S,
                    s[(i, j)] * (1.4426950408889634 / T::sqrt(dim as f32)),
                    -T::infinity::<f32>(),
                );
            }
            T::copy(m, m_prev);
            T::reduce_max(s, m, 1, false);
            for i in T::parallel(block_m) {
                rescale[i] = T::exp2(m_prev[i] - m[i]);
            }
            for (i, j) in T::parallel([block_m, dim]) {
                acc[(i, j)] = acc[(i, j)] * rescale[i];
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                s[(i, j)] = T::exp2(s[(i, j)] - m[i]);
            }
            T::reduce_sum(s, row_sum, 1);
            for i in T::parallel(block_m) {
                l[i] = l[i] * rescale[i] + row_sum[i];
            }
            T::copy(s, p);
            T::gemm(p, v_s, acc);
        }
        for (i, j) in T::parallel([block_m, dim]) {
            acc[(i, j)] = acc[(i, j)] / l[i];
        }
        T::copy(acc, o.at([bz, by, bx * block_m, 0]));
        for i in T::parallel(block_m) {
            lse[(bz, by, bx * block_m + i)] = m[i] + T::log2(l[i]);
        }
    });
}

/// `delta[i] = Σ_d dO[i, d] · O[i, d]` per query row, and `dQ = 0` (the
/// backward kernel adds into it).
#[tile::kernel(dim = [64, 128], block_m = 64, threads = 128)]
pub fn attention_bwd_prep(
    o: Tensor<f16, (B, H, S, dim)>,
    d_o: Tensor<f16, (B, H, S, dim)>,
    delta: TensorMut<f32, (B, H, S)>,
    dq: TensorMut<f32, (B, H, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_m), H, B], threads, |bx, by, bz| {
        let prod = T::alloc_fragment::<f32>([block_m, dim]);
        // Row sums of a plain fragment (not a gemm accumulator, so there is
        // no row layout to tie them to): reduced into shared memory, from
        // which the block stores them to `delta` in one copy.
        let sum = T::alloc_shared::<f32>([block_m]);
        for (i, j) in T::parallel([block_m, dim]) {
            let row = bx * block_m + i;
            prod[(i, j)] = T::if_then_else(
                row < S,
                d_o[(bz, by, row, j)] as f32 * o[(bz, by, row, j)] as f32,
                0.0,
            );
            dq[(bz, by, row, j)] = 0.0;
        }
        T::reduce_sum(prod, sum, 1);
        T::copy(sum, delta.at([bz, by, bx * block_m]));
    });
}

/// `dK`, `dV` of `block_n` keys, and their share of `dQ` (atomic adds into
/// `dq`, which starts at zero).
#[tile::kernel(dim = 64, block_m = 64, block_n = 64, stages = 2, threads = 128)]
pub fn attention_bwd(
    q: Tensor<f16, (B, H, S, dim)>,
    k: Tensor<f16, (B, H, S, dim)>,
    v: Tensor<f16, (B, H, S, dim)>,
    d_o: Tensor<f16, (B, H, S, dim)>,
    lse: Tensor<f32, (B, H, S)>,
    delta: Tensor<f32, (B, H, S)>,
    dq: TensorMut<f32, (B, H, S, dim)>,
    dk: TensorMut<f16, (B, H, S, dim)>,
    dv: TensorMut<f16, (B, H, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_n), H, B], threads, |bx, by, bz| {
        let k_s = T::alloc_shared::<f16>([block_n, dim]);
        let v_s = T::alloc_shared::<f16>([block_n, dim]);
        let q_s = T::alloc_shared::<f16>([block_m, dim]);
        let do_s = T::alloc_shared::<f16>([block_m, dim]);
        // Per-query statistics: in the transposed tiles below a query is a
        // column (`st[(j, i)]` reads `lse_s[i]`), and a 1-D fragment can
        // follow an accumulator's rows, not its columns, so every thread
        // reads them from shared memory.
        let lse_s = T::alloc_shared::<f32>([block_m]);
        let delta_s = T::alloc_shared::<f32>([block_m]);
        let ds_s = T::alloc_shared::<f16>([block_n, block_m]);
        let st = T::alloc_fragment::<f32>([block_n, block_m]);
        let pt = T::alloc_fragment::<f16>([block_n, block_m]);
        let dpt = T::alloc_fragment::<f32>([block_n, block_m]);
        let dst = T::alloc_fragment::<f16>([block_n, block_m]);
        let dk_acc = T::alloc_fragment::<f32>([block_n, dim]);
        let dv_acc = T::alloc_fragment::<f32>([block_n, dim]);
        let dq_acc = T::alloc_fragment::<f32>([block_m, dim]);
        T::copy(k.at([bz, by, bx * block_n, 0]), k_s);
        T::copy(v.at([bz, by, bx * block_n, 0]), v_s);
        T::fill(dk_acc, 0.0);
        T::fill(dv_acc, 0.0);
        for mt in T::pipelined(T::ceildiv(S, block_m), stages) {
            T::copy(q.at([bz, by, mt * block_m, 0]), q_s);
            T::copy(d_o.at([bz, by, mt * block_m, 0]), do_s);
            T::copy(lse.at([bz, by, mt * block_m]), lse_s);
            T::copy(delta.at([bz, by, mt * block_m]), delta_s);
            // Pᵀ = 2^(K Qᵀ · scale·log2(e) - lse); queries past S give 0.
            T::clear(st);
            T::gemm(k_s, q_s, st, transpose_b = true);
            for (j, i) in T::parallel([block_n, block_m]) {
                pt[(j, i)] = T::if_then_else(
                    mt * block_m + i < S,
                    T::exp2(st[(j, i)] * (1.4426950408889634 / T::sqrt(dim as f32)) - lse_s[i]),
                    0.0,
                ) as f16;
            }
            T::gemm(pt, do_s, dv_acc);
            // dPᵀ = V dOᵀ; dSᵀ = Pᵀ ∘ (dPᵀ - delta).
            T::clear(dpt);
            T::gemm(v_s, do_s, dpt, transpose_b = true);
            for (j, i) in T::parallel([block_n, block_m]) {
                dst[(j, i)] = (pt[(j, i)] as f32 * (dpt[(j, i)] - delta_s[i])) as f16;
            }
            T::gemm(dst, q_s, dk_acc);
            // dQ += dS K · scale, dS read transposed from shared memory.
            T::copy(dst, ds_s);
            T::clear(dq_acc);
            T::gemm(ds_s, k_s, dq_acc, transpose_a = true);
            for (i, j) in T::parallel([block_m, dim]) {
                dq_acc[(i, j)] = dq_acc[(i, j)] * (1.0 / T::sqrt(dim as f32));
            }
            T::atomic_add(dq.at([bz, by, mt * block_m, 0]), dq_acc);
        }
        for (j, c) in T::parallel([block_n, dim]) {
            dk_acc[(j, c)] = dk_acc[(j, c)] * (1.0 / T::sqrt(dim as f32));
        }
        T::copy(dk_acc, dk.at([bz, by, bx * block_n, 0]));
        T::copy(dv_acc, dv.at([bz, by, bx * block_n, 0]));
    });
}

/// `dK`, `dV` of `block_n` keys at head dim 128, without dQ: beside 64 × 128
/// accumulators for dK and dV, one warpgroup's registers have no room for a
/// 64 × 128 dQ as well (the D64 kernel above keeps all three), so
/// `attention_bwd_dq` computes dQ per query block instead, recomputing P and
/// dS there (seven tile products per pair of tiles instead of five, and no
/// atomic adds). The queries go by in tiles of 32, which keeps the transposed
/// scores at 16 registers per thread.
#[tile::kernel(dim = 128, block_m = 32, block_n = 64, stages = 2, threads = 128)]
pub fn attention_bwd_dkdv(
    q: Tensor<f16, (B, H, S, dim)>,
    k: Tensor<f16, (B, H, S, dim)>,
    v: Tensor<f16, (B, H, S, dim)>,
    d_o: Tensor<f16, (B, H, S, dim)>,
    lse: Tensor<f32, (B, H, S)>,
    delta: Tensor<f32, (B, H, S)>,
    dk: TensorMut<f16, (B, H, S, dim)>,
    dv: TensorMut<f16, (B, H, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_n), H, B], threads, |bx, by, bz| {
        let k_s = T::alloc_shared::<f16>([block_n, dim]);
        let v_s = T::alloc_shared::<f16>([block_n, dim]);
        let q_s = T::alloc_shared::<f16>([block_m, dim]);
        let do_s = T::alloc_shared::<f16>([block_m, dim]);
        // Per-query statistics are columns here (see `attention_bwd`).
        let lse_s = T::alloc_shared::<f32>([block_m]);
        let delta_s = T::alloc_shared::<f32>([block_m]);
        let st = T::alloc_fragment::<f32>([block_n, block_m]);
        let pt = T::alloc_fragment::<f16>([block_n, block_m]);
        let dpt = T::alloc_fragment::<f32>([block_n, block_m]);
        let dst = T::alloc_fragment::<f16>([block_n, block_m]);
        let dk_acc = T::alloc_fragment::<f32>([block_n, dim]);
        let dv_acc = T::alloc_fragment::<f32>([block_n, dim]);
        T::copy(k.at([bz, by, bx * block_n, 0]), k_s);
        T::copy(v.at([bz, by, bx * block_n, 0]), v_s);
        T::fill(dk_acc, 0.0);
        T::fill(dv_acc, 0.0);
        for mt in T::pipelined(T::ceildiv(S, block_m), stages) {
            T::copy(q.at([bz, by, mt * block_m, 0]), q_s);
            T::copy(d_o.at([bz, by, mt * block_m, 0]), do_s);
            T::copy(lse.at([bz, by, mt * block_m]), lse_s);
            T::copy(delta.at([bz, by, mt * block_m]), delta_s);
            T::clear(st);
            T::gemm(k_s, q_s, st, transpose_b = true);
            for (j, i) in T::parallel([block_n, block_m]) {
                pt[(j, i)] = T::if_then_else(
                    mt * block_m + i < S,
                    T::exp2(st[(j, i)] * (1.4426950408889634 / T::sqrt(dim as f32)) - lse_s[i]),
                    0.0,
                ) as f16;
            }
            T::gemm(pt, do_s, dv_acc);
            T::clear(dpt);
            T::gemm(v_s, do_s, dpt, transpose_b = true);
            for (j, i) in T::parallel([block_n, block_m]) {
                dst[(j, i)] = (pt[(j, i)] as f32 * (dpt[(j, i)] - delta_s[i])) as f16;
            }
            T::gemm(dst, q_s, dk_acc);
        }
        for (j, c) in T::parallel([block_n, dim]) {
            dk_acc[(j, c)] = dk_acc[(j, c)] * (1.0 / T::sqrt(dim as f32));
        }
        T::copy(dk_acc, dk.at([bz, by, bx * block_n, 0]));
        T::copy(dv_acc, dv.at([bz, by, bx * block_n, 0]));
    });
}

/// `dQ` of `block_m` queries at head dim 128: P and dS again, with the queries
/// as rows (so their statistics are row fragments), over every key tile:
/// `dQ = Σ dS K / √d`, written once.
#[tile::kernel(dim = 128, block_m = 64, block_n = 64, stages = 2, threads = 128)]
pub fn attention_bwd_dq(
    q: Tensor<f16, (B, H, S, dim)>,
    k: Tensor<f16, (B, H, S, dim)>,
    v: Tensor<f16, (B, H, S, dim)>,
    d_o: Tensor<f16, (B, H, S, dim)>,
    lse: Tensor<f32, (B, H, S)>,
    delta: Tensor<f32, (B, H, S)>,
    dq: TensorMut<f32, (B, H, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_m), H, B], threads, |bx, by, bz| {
        let q_s = T::alloc_shared::<f16>([block_m, dim]);
        let do_s = T::alloc_shared::<f16>([block_m, dim]);
        let k_s = T::alloc_shared::<f16>([block_n, dim]);
        let v_s = T::alloc_shared::<f16>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<f16>([block_m, block_n]);
        let dp = T::alloc_fragment::<f32>([block_m, block_n]);
        let ds = T::alloc_fragment::<f16>([block_m, block_n]);
        let dq_acc = T::alloc_fragment::<f32>([block_m, dim]);
        let lse_f = T::alloc_fragment::<f32>([block_m]);
        let delta_f = T::alloc_fragment::<f32>([block_m]);
        T::copy(q.at([bz, by, bx * block_m, 0]), q_s);
        T::copy(d_o.at([bz, by, bx * block_m, 0]), do_s);
        // Queries past S read 0 (their rows of dQ are not written).
        for i in T::parallel(block_m) {
            lse_f[i] = lse[(bz, by, bx * block_m + i)];
            delta_f[i] = delta[(bz, by, bx * block_m + i)];
        }
        T::fill(dq_acc, 0.0);
        for nt in T::pipelined(T::ceildiv(S, block_n), stages) {
            T::copy(k.at([bz, by, nt * block_n, 0]), k_s);
            T::copy(v.at([bz, by, nt * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            for (i, j) in T::parallel([block_m, block_n]) {
                p[(i, j)] = T::if_then_else(
                    nt * block_n + j < S,
                    T::exp2(s[(i, j)] * (1.4426950408889634 / T::sqrt(dim as f32)) - lse_f[i]),
                    0.0,
                ) as f16;
            }
            T::clear(dp);
            T::gemm(do_s, v_s, dp, transpose_b = true);
            for (i, j) in T::parallel([block_m, block_n]) {
                ds[(i, j)] = (p[(i, j)] as f32 * (dp[(i, j)] - delta_f[i])) as f16;
            }
            T::gemm(ds, k_s, dq_acc);
        }
        for (i, c) in T::parallel([block_m, dim]) {
            dq_acc[(i, c)] = dq_acc[(i, c)] * (1.0 / T::sqrt(dim as f32));
        }
        T::copy(dq_acc, dq.at([bz, by, bx * block_m, 0]));
    });
}

/// The head dims the example runs.
pub const DIMS: [usize; 2] = [64, 128];

/// `dQ, dK, dV` in f64 for `bh` heads of `s` positions of head dim `d`.
#[allow(clippy::type_complexity)]
fn reference(
    (q, k, v, d_o): (&[f16], &[f16], &[f16], &[f16]),
    bh: usize,
    s: usize,
    d: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let scale = 1.0 / (d as f64).sqrt();
    let at = |x: &[f16], h: usize, r: usize, c: usize| x[(h * s + r) * d + c].to_f64();
    let (mut dq, mut dk, mut dv) = (
        vec![0f64; bh * s * d],
        vec![0f64; bh * s * d],
        vec![0f64; bh * s * d],
    );
    for h in 0..bh {
        for i in 0..s {
            let w: Vec<f64> = (0..s)
                .map(|j| (0..d).map(|c| at(q, h, i, c) * at(k, h, j, c)).sum::<f64>() * scale)
                .collect();
            let mx = w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = w.iter().map(|x| (x - mx).exp()).collect();
            let sum: f64 = e.iter().sum();
            let p: Vec<f64> = e.iter().map(|x| x / sum).collect();
            // dP = dO Vᵀ; dS = P ∘ (dP - rowsum(dP ∘ P)).
            let dp: Vec<f64> = (0..s)
                .map(|j| (0..d).map(|c| at(d_o, h, i, c) * at(v, h, j, c)).sum())
                .collect();
            let delta: f64 = (0..s).map(|j| dp[j] * p[j]).sum();
            for j in 0..s {
                let ds = p[j] * (dp[j] - delta);
                for c in 0..d {
                    dv[(h * s + j) * d + c] += p[j] * at(d_o, h, i, c);
                    dk[(h * s + j) * d + c] += ds * at(q, h, i, c) * scale;
                    dq[(h * s + i) * d + c] += ds * at(k, h, j, c) * scale;
                }
            }
        }
    }
    (dq, dk, dv)
}

struct Grads {
    dq: Tensor<f32>,
    dk: Tensor<f16>,
    dv: Tensor<f16>,
}

/// The inputs `q, k, v, dO` and the forward's outputs `O, lse` and `delta`.
struct Inputs {
    q: Tensor<f16>,
    k: Tensor<f16>,
    v: Tensor<f16>,
    d_o: Tensor<f16>,
    o: Tensor<f16>,
    lse: Tensor<f32>,
    delta: Tensor<f32>,
}

impl Inputs {
    /// Random `q, k, v, dO` of shape `[b, h, s, d]` (from `seed`); the rest
    /// NaN until the forward and the prep kernel write them.
    fn random(dev: Device, [b, h, s, d]: [usize; 4], seed: u64) -> Result<Self, tile::Error> {
        let shape = [b, h, s, d];
        let r = |i: u64| tile::testing::random_tensor::<f16>(&shape, seed + i, dev);
        Ok(Inputs {
            q: r(0)?,
            k: r(1)?,
            v: r(2)?,
            d_o: r(3)?,
            o: Tensor::full(&shape, f16::NAN, dev)?,
            lse: Tensor::full(&[b, h, s], f32::NAN, dev)?,
            delta: Tensor::full(&[b, h, s], f32::NAN, dev)?,
        })
    }
}

/// The forward with its log-sum-exp, at head dim `d`.
fn forward(st: &tile::Stream, d: usize, x: &mut Inputs) -> Result<(), tile::Error> {
    let dim = d as i64;
    attention_fwd_lse::with(attention_fwd_lse::Config { dim })
        .on(st)
        .launch(&x.q, &x.k, &x.v, &mut x.o, &mut x.lse)
}

/// The backward kernels at head dim `d` after the forward: delta (and dQ
/// zeroed), then the backward kernel (D64), or the dK/dV and dQ kernels
/// (D128).
fn backward(st: &tile::Stream, d: usize, x: &mut Inputs, g: &mut Grads) -> Result<(), tile::Error> {
    let dim = d as i64;
    attention_bwd_prep::with(attention_bwd_prep::Config { dim })
        .on(st)
        .launch(&x.o, &x.d_o, &mut x.delta, &mut g.dq)?;
    let (q, k, v, d_o, lse, delta) = (&x.q, &x.k, &x.v, &x.d_o, &x.lse, &x.delta);
    if d == 64 {
        return attention_bwd::on(st)
            .launch(q, k, v, d_o, lse, delta, &mut g.dq, &mut g.dk, &mut g.dv);
    }
    attention_bwd_dkdv::on(st).launch(q, k, v, d_o, lse, delta, &mut g.dk, &mut g.dv)?;
    attention_bwd_dq::on(st).launch(q, k, v, d_o, lse, delta, &mut g.dq)
}

/// NaN-poisoned gradients of shape `[b, h, s, d]`.
fn grads(dev: Device, shape: [usize; 4]) -> Result<Grads, tile::Error> {
    Ok(Grads {
        dq: Tensor::full(&shape, f32::NAN, dev)?,
        dk: Tensor::full(&shape, f16::NAN, dev)?,
        dv: Tensor::full(&shape, f16::NAN, dev)?,
    })
}

/// Runs the backward pass at `b × h × s`, head dims 64 and 128, on `dev` and
/// checks the three gradients against the host reference; returns the
/// summary line.
pub fn run(
    dev: Device,
    b: usize,
    h: usize,
    s: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut lines = Vec::new();
    for d in DIMS {
        let mut x = Inputs::random(dev, [b, h, s, d], 71)?;
        let mut g = grads(dev, [b, h, s, d])?;
        let t = Instant::now();
        let st = dev.default_stream()?;
        forward(&st, d, &mut x)?;
        backward(&st, d, &mut x, &mut g)?;
        dev.synchronize()?;
        let el = t.elapsed();
        let (q, k, v, d_o) = (x.q.to_vec()?, x.k.to_vec()?, x.v.to_vec()?, x.d_o.to_vec()?);
        let (want_dq, want_dk, want_dv) = reference((&q, &k, &v, &d_o), b * h, s, d);
        let rq = tile::testing::assert_allclose(&g.dq.to_vec()?, &want_dq, 5e-3, 2e-2)?;
        let rk = tile::testing::assert_allclose(&g.dk.to_vec()?, &want_dk, 5e-3, 2e-2)?;
        let rv = tile::testing::assert_allclose(&g.dv.to_vec()?, &want_dv, 5e-3, 2e-2)?;
        lines.push(format!(
            "flash_attention_bwd: device={dev} b={b} h={h} s={s} d={d} max_abs_err dq={:.2e} dk={:.2e} dv={:.2e} time={:.3} ms (first call)",
            rq.max_abs,
            rk.max_abs,
            rv.max_abs,
            el.as_secs_f64() * 1e3
        ));
    }
    Ok(lines.join("\n"))
}

/// Median time of the backward kernels (delta and zeroing dQ, then the
/// backward kernels; the forward with lse runs once before) at `b × h × s`
/// and head dim `d`, with TFLOP/s at 2.5 times the forward's `4·B·H·S²·D`
/// (the FlashAttention convention, whatever products the kernels recompute).
pub fn bench(
    dev: Device,
    b: usize,
    h: usize,
    s: usize,
    d: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let mut x = Inputs::random(dev, [b, h, s, d], 81)?;
    let mut g = grads(dev, [b, h, s, d])?;
    let st = dev.default_stream()?;
    forward(&st, d, &mut x)?;
    let r = tile::do_bench(
        &st,
        |st| backward(st, d, &mut x, &mut g),
        &tile::BenchOptions::default(),
    )?;
    let flops = 2.5 * 4.0 * (b * h) as f64 * (s * s) as f64 * d as f64;
    Ok(format!(
        "flash_attention_bwd b={b} h={h} s={s} d={d}: {:.3} ms, {:.1} TFLOP/s ({})",
        r.median_ms,
        flops / (r.median_ms * 1e-3) / 1e12,
        r.method
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let timed = std::env::args().len() == 1 && dev.is_cuda();
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let mut next = |default: usize| args.next().transpose().map(|x| x.unwrap_or(default));
    let (b, h) = (next(1)?, next(2)?);
    let s = next(if dev == Device::Cpu { 130 } else { 1000 })?;
    println!("{}", run(dev, b, h, s)?);
    if timed {
        println!("{}", bench(dev, 1, 64, 4096, 64)?);
        println!("{}", bench(dev, 4, 32, 4096, 128)?);
    }
    Ok(())
}
