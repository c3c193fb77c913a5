//! Tensor-core tiles whose width is not a power of two: a score tile 48 keys
//! wide (`q · kᵀ`, an accumulator of 48 columns) fed in registers to a
//! second product whose K is 48 (`p · v`). Two variants: 32 query rows over
//! two warps, where both products run on `mma.sync` on every target (each
//! warp on 16 rows; `wgmma` needs whole warpgroups), and 64 rows over one
//! warpgroup, where Hopper runs both on `wgmma` (P as its A operand in
//! registers, 48 deep) and sm_80 on `mma.sync`. And plain gemms whose warp
//! split is off the planner's table of arrangements.

use super::*;

/// `o = f16(q · kᵀ) · v` over all `S` keys, in key tiles of `block_n`.
#[tile::kernel(
    block_m = [32, 64],
    block_n = 48,
    dim = 32,
    threads = [64, 128],
    filter = threads == 2 * block_m
)]
pub fn scores_times_values(
    q: Tensor<f16, (M, dim)>,
    k: Tensor<f16, (S, dim)>,
    v: Tensor<f16, (S, dim)>,
    o: TensorMut<f32, (M, dim)>,
) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let q_s = T::alloc_shared::<f16>([block_m, dim]);
        let k_s = T::alloc_shared::<f16>([block_n, dim]);
        let v_s = T::alloc_shared::<f16>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<f16>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        T::copy(q.at([bx * block_m, 0]), q_s);
        T::clear(acc);
        for kt in T::pipelined(T::ceildiv(S, block_n), 2) {
            T::copy(k.at([kt * block_n, 0]), k_s);
            T::copy(v.at([kt * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            T::copy(s, p);
            T::gemm(p, v_s, acc);
        }
        T::copy(acc, o.at([bx * block_m, 0]));
    });
}

#[test]
fn forty_eight_wide_tiles_on_tensor_cores() -> TestResult {
    let dim = 32;
    // Whole tiles, and ragged queries and keys (the padded keys score 0 and
    // their values read 0).
    for (m, s) in [(64, 96), (50, 100)] {
        let q = random_tensor::<f16>(&[m, dim], 4300 + m as u64, dev())?;
        let k = random_tensor::<f16>(&[s, dim], 4400 + s as u64, dev())?;
        let v = random_tensor::<f16>(&[s, dim], 4500 + s as u64, dev())?;
        let (qh, kh, vh) = (host(&q), host(&k), host(&v));
        let mut want = vec![0.0; m * dim];
        for i in 0..m {
            for j in 0..s {
                let score: f64 = (0..dim).map(|d| qh[i * dim + d] * kh[j * dim + d]).sum();
                let p = round_to::<f16>(score);
                for d in 0..dim {
                    want[i * dim + d] += p * vh[j * dim + d];
                }
            }
        }
        for (cfg, label) in scores_times_values::CONFIGS
            .iter()
            .zip(scores_times_values::LABELS)
        {
            let mut o = Tensor::full(&[m, dim], f32::NAN, dev())?;
            scores_times_values::with(*cfg).launch(&q, &k, &v, &mut o)?;
            // A score within an f16 rounding step of a tie may round the
            // other way in f32: one f16 ulp of a score (|score| < 32) times
            // |v| < 1.
            check(&format!("{label}, m={m} s={s}"), &o, &want, 2e-2, 1e-3);
        }
    }
    Ok(())
}

/// `c = a · bᵀ` in tiles where the planner's usual warp arrangement does
/// not fit `mma.sync`, so it searches the others: 32 x 48 over two warps
/// (1 x 2 would give 24 columns a warp; 2 x 1 gives 16 rows by 48) and
/// 128 x 64 over sixteen warps (beyond the table; 8 x 2 warps of 16 x 32).
/// Neither block is whole warpgroups of 64 rows each, so Hopper runs them
/// on `mma.sync` too.
#[tile::kernel(
    block_m = [32, 128],
    block_n = [48, 64],
    block_k = 32,
    threads = [64, 512],
    filter = (block_m == 32) == (block_n == 48) && (block_m == 32) == (threads == 64)
)]
pub fn nt_off_table(a: Tensor<f16, (M, K)>, b: Tensor<f16, (N, K)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, block_k]);
            let b_s = T::alloc_shared::<f16>([block_n, block_k]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for kt in T::pipelined(T::ceildiv(K, block_k), 2) {
                T::copy(a.at([by * block_m, kt * block_k]), a_s);
                T::copy(b.at([bx * block_n, kt * block_k]), b_s);
                T::gemm(a_s, b_s, acc, transpose_b = true);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

#[test]
fn warp_splits_off_the_table() -> TestResult {
    // Whole tiles, and ragged M, N and K.
    for (m, n, k) in [(128, 192, 64), (131, 101, 75)] {
        let a = random_tensor::<f16>(&[m, k], 4600 + m as u64, dev())?;
        let b = random_tensor::<f16>(&[n, k], 4700 + n as u64, dev())?;
        let (ah, bh) = (host(&a), host(&b));
        let want: Vec<f64> = (0..m * n)
            .map(|e| {
                (0..k)
                    .map(|x| ah[(e / n) * k + x] * bh[(e % n) * k + x])
                    .sum()
            })
            .collect();
        for (cfg, label) in nt_off_table::CONFIGS.iter().zip(nt_off_table::LABELS) {
            let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
            nt_off_table::with(*cfg).launch(&a, &b, &mut c)?;
            check(&format!("{label}, {m}x{n}x{k}"), &c, &want, 1e-3, 1e-3);
        }
    }
    Ok(())
}
