//! Tensor-core tiles whose width is not a power of two: a score tile 48 keys
//! wide (`q · kᵀ`, an accumulator of 48 columns) fed in registers to a
//! second product whose K is 48 (`p · v`). Two variants: 32 query rows over
//! two warps, where both products run on `mma.sync` on every target (each
//! warp on 16 rows; `wgmma` needs whole warpgroups), and 64 rows over one
//! warpgroup, where Hopper runs both on `wgmma` (P as its A operand in
//! registers, 48 deep) and sm_80 on `mma.sync`.

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
