//! Tensor-core accumulators reduced along their rows, with per-row values
//! kept in registers beside them (the layouts `plan_mma` ties to the
//! accumulator's rows): a GEMM with a row-softmax epilogue, over 4 warps
//! (each row in one warp) and over 8 warps (a row split over two warps, so
//! the reduction also combines across warps).

use super::*;

/// `c = softmax_rows(a · b)` for `n`-column rows, with the row maxima
/// (reduced once into per-row registers and once into a shared tile) and
/// the row sums written to `stats`.
#[tile::kernel(block_m = 64, n = 64, block_k = 32, two = 2, threads = 128)]
pub fn gemm_softmax_rows(
    a: Tensor<f16, (M, K)>,
    b: Tensor<f16, (K, n)>,
    c: TensorMut<f32, (M, n)>,
    stats: TensorMut<f32, (two, M)>,
) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let a_s = T::alloc_shared::<f16>([block_m, block_k]);
        let b_s = T::alloc_shared::<f16>([block_k, n]);
        let acc = T::alloc_fragment::<f32>([block_m, n]);
        let mx = T::alloc_fragment::<f32>([block_m]);
        let sum = T::alloc_fragment::<f32>([block_m]);
        let mx_s = T::alloc_shared::<f32>([block_m]);
        T::clear(acc);
        for ko in T::pipelined(T::ceildiv(K, block_k), 2) {
            T::copy(a.at([bx * block_m, ko * block_k]), a_s);
            T::copy(b.at([ko * block_k, 0]), b_s);
            T::gemm(a_s, b_s, acc);
        }
        T::reduce_max(acc, mx, 1);
        T::reduce_max(acc, mx_s, 1);
        for (i, j) in T::parallel([block_m, n]) {
            acc[(i, j)] = T::exp(acc[(i, j)] - mx[i]);
        }
        T::reduce_sum(acc, sum, 1);
        for (i, j) in T::parallel([block_m, n]) {
            acc[(i, j)] = acc[(i, j)] / sum[i];
        }
        T::copy(acc, c.at([bx * block_m, 0]));
        for i in T::parallel(block_m) {
            stats[(0, bx * block_m + i)] = mx_s[i];
            stats[(1, bx * block_m + i)] = sum[i];
        }
    });
}

/// The same over 8 warps: 64 rows allow 4 warps along M, so each row is
/// split over 2 warps along N.
#[tile::kernel(block_m = 64, n = 64, block_k = 32, two = 2, threads = 256)]
pub fn gemm_softmax_rows_8w(
    a: Tensor<f16, (M, K)>,
    b: Tensor<f16, (K, n)>,
    c: TensorMut<f32, (M, n)>,
    stats: TensorMut<f32, (two, M)>,
) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let a_s = T::alloc_shared::<f16>([block_m, block_k]);
        let b_s = T::alloc_shared::<f16>([block_k, n]);
        let acc = T::alloc_fragment::<f32>([block_m, n]);
        let mx = T::alloc_fragment::<f32>([block_m]);
        let sum = T::alloc_fragment::<f32>([block_m]);
        let mx_s = T::alloc_shared::<f32>([block_m]);
        T::clear(acc);
        for ko in T::pipelined(T::ceildiv(K, block_k), 2) {
            T::copy(a.at([bx * block_m, ko * block_k]), a_s);
            T::copy(b.at([ko * block_k, 0]), b_s);
            T::gemm(a_s, b_s, acc);
        }
        T::reduce_max(acc, mx, 1);
        T::reduce_max(acc, mx_s, 1);
        for (i, j) in T::parallel([block_m, n]) {
            acc[(i, j)] = T::exp(acc[(i, j)] - mx[i]);
        }
        T::reduce_sum(acc, sum, 1);
        for (i, j) in T::parallel([block_m, n]) {
            acc[(i, j)] = acc[(i, j)] / sum[i];
        }
        T::copy(acc, c.at([bx * block_m, 0]));
        for i in T::parallel(block_m) {
            stats[(0, bx * block_m + i)] = mx_s[i];
            stats[(1, bx * block_m + i)] = sum[i];
        }
    });
}

/// Row softmax of `a · b` (`m` x 64) and each row's maximum and sum of
/// exponentials, in f64.
fn softmax_reference(a: &[f64], b: &[f64], m: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let n = 64;
    let mut c = vec![0.0; m * n];
    let mut stats = vec![0.0; 2 * m];
    for i in 0..m {
        let row: Vec<f64> = (0..n)
            .map(|j| (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum())
            .collect();
        let mx = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row.iter().map(|x| (x - mx).exp()).sum();
        for j in 0..n {
            c[i * n + j] = (row[j] - mx).exp() / sum;
        }
        stats[i] = mx;
        stats[m + i] = sum;
    }
    (c, stats)
}

#[test]
fn gemm_with_row_softmax_epilogue() -> TestResult {
    // Whole tiles, and ragged M and K.
    for (m, k) in [(128, 64), (77, 45)] {
        let a = random_tensor::<f16>(&[m, k], 4100 + m as u64, dev())?;
        let b = random_tensor::<f16>(&[k, 64], 4200 + k as u64, dev())?;
        let (want_c, want_stats) = softmax_reference(&host(&a), &host(&b), m, k);
        for warps in [4, 8] {
            let mut c = Tensor::full(&[m, 64], f32::NAN, dev())?;
            let mut stats = Tensor::full(&[2, m], f32::NAN, dev())?;
            if warps == 4 {
                gemm_softmax_rows(&a, &b, &mut c, &mut stats)?;
            } else {
                gemm_softmax_rows_8w(&a, &b, &mut c, &mut stats)?;
            }
            let what = format!("{warps} warps, m={m} k={k}");
            check(&format!("softmax, {what}"), &c, &want_c, 1e-5, 1e-3);
            check(
                &format!("row max and sum, {what}"),
                &stats,
                &want_stats,
                1e-3,
                1e-3,
            );
        }
    }
    Ok(())
}

/// `c = q · (Σ_t k_t)ᵀ` over key tiles `k_t` of `block_n` rows: each block
/// loads its `block_m` rows of `q` into registers once (`T::copy(q_s,
/// q_f)`) and reads them as the A operand of every tile's product (A from
/// registers). On 8 warps (the default) that is `mma.sync` on sm_80 and
/// `wgmma` on Hopper; on 2 warps (too few for `wgmma`) `mma.sync` with a
/// transposed B everywhere.
#[tile::kernel(
    block_m = [128, 32],
    block_n = 64,
    d = 64,
    threads = [256, 64],
    filter = (block_m == 128) == (threads == 256)
)]
pub fn scores_loaded_q(
    q: Tensor<f16, (M, d)>,
    k: Tensor<f16, (S, d)>,
    c: TensorMut<f32, (M, block_n)>,
) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let q_s = T::alloc_shared::<f16>([block_m, d]);
        let q_f = T::alloc_fragment::<f16>([block_m, d]);
        let k_s = T::alloc_shared::<f16>([block_n, d]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        T::copy(q.at([bx * block_m, 0]), q_s);
        T::copy(q_s, q_f);
        T::clear(s);
        for kt in T::pipelined(T::ceildiv(S, block_n), 2) {
            T::copy(k.at([kt * block_n, 0]), k_s);
            T::gemm(q_f, k_s, s, transpose_b = true);
        }
        T::copy(s, c.at([bx * block_m, 0]));
    });
}

#[test]
fn a_tile_loaded_into_registers_is_a_gemm_operand() -> TestResult {
    let (bn, d) = (64, 64);
    // Whole tiles, and ragged M and S (the last key tile zero-filled).
    for (m, s) in [(256, 128), (77, 150)] {
        let q = random_tensor::<f16>(&[m, d], 4300 + m as u64, dev())?;
        let k = random_tensor::<f16>(&[s, d], 4400 + s as u64, dev())?;
        let (qh, kh) = (host(&q), host(&k));
        let mut want = vec![0.0; m * bn];
        for i in 0..m {
            for j in 0..bn {
                for t in (j..s).step_by(bn) {
                    want[i * bn + j] += (0..d).map(|x| qh[i * d + x] * kh[t * d + x]).sum::<f64>();
                }
            }
        }
        for (cfg, label) in scores_loaded_q::CONFIGS.iter().zip(scores_loaded_q::LABELS) {
            let mut c = Tensor::full(&[m, bn], f32::NAN, dev())?;
            scores_loaded_q::with(*cfg).launch(&q, &k, &mut c)?;
            check(
                &format!("q in registers {label}, m={m} s={s}"),
                &c,
                &want,
                1e-3,
                1e-3,
            );
        }
    }
    Ok(())
}
