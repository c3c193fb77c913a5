//! Shared memory reused across phases, two gemms into one accumulator, and
//! persistent kernels.

use super::*;

// ---------------------------------------------------------------------------
// Shared memory reused across phases (CUDA merges buffers by lifetime)
// ---------------------------------------------------------------------------

/// GEMM whose A/B tiles are dead after the main loop: the f32 tile staging
/// the epilogue reuses their bytes on CUDA (16 KiB in all, not 32 KiB).
#[tile::kernel(block_m = 64, block_n = 64, block_k = 32, stages = 2, threads = 128)]
pub fn gemm_staged_epilogue(
    a: Tensor<f16, (M, K)>,
    b: Tensor<f16, (K, N)>,
    c: TensorMut<f32, (M, N)>,
) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, block_k]);
            let b_s = T::alloc_shared::<f16>([block_k, block_n]);
            let c_s = T::alloc_shared::<f32>([block_m, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c_s);
            for (i, j) in T::parallel([block_m, block_n]) {
                c_s[(i, j)] = c_s[(i, j)] * 2.0;
            }
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// Two phases through shared memory, each reading its tile transposed (so
/// threads read what others wrote): `s2` reuses `s1`'s bytes on CUDA.
#[tile::kernel(bm = 64, bn = 64, threads = 128)]
pub fn two_phase_shared(
    a: Tensor<f32, (M, N)>,
    b: Tensor<f32, (M, N)>,
    c: TensorMut<f32, (M, N)>,
    d: TensorMut<f32, (M, N)>,
) {
    T::kernel([T::ceildiv(N, bn), T::ceildiv(M, bm)], threads, |bx, by| {
        let s1 = T::alloc_shared::<f32>([bm, bn]);
        let s2 = T::alloc_shared::<f32>([bm, bn]);
        T::copy(a.at([by * bm, bx * bn]), s1);
        for (i, j) in T::parallel([bm, bn]) {
            c[(by * bm + i, bx * bn + j)] = s1[(j, i)] + 1.0;
        }
        T::copy(b.at([by * bm, bx * bn]), s2);
        for (i, j) in T::parallel([bm, bn]) {
            d[(by * bm + i, bx * bn + j)] = s2[(j, i)] * 2.0;
        }
    });
}

#[test]
fn shared_memory_reused_across_phases() -> TestResult {
    let cu = gemm_staged_epilogue::SPEC.cuda.source;
    assert!(cu.contains("unsigned char tl_smem[16384];"), "{cu}");
    let cu = two_phase_shared::SPEC.cuda.source;
    assert!(cu.contains("unsigned char tl_smem[16384];"), "{cu}");
    for (s, &(m, n, k)) in GEMM_SIZES.iter().enumerate() {
        let a = random_tensor::<f16>(&[m, k], 4200 + s as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], 4300 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        gemm_staged_epilogue(&a, &b, &mut c)?;
        let want: Vec<f64> = matmul_ref(&host(&a), &host(&b), m, n, k, false)
            .into_iter()
            .map(|v| 2.0 * v)
            .collect();
        check(
            &format!("gemm_staged_epilogue m={m} n={n} k={k}"),
            &c,
            &want,
            2e-2,
            2e-2,
        );
    }
    for (s, &(m, n)) in [(128, 192), (100, 70), (64, 64), (3, 130)]
        .iter()
        .enumerate()
    {
        let a = random_tensor::<f32>(&[m, n], 4400 + s as u64, dev())?;
        let b = random_tensor::<f32>(&[m, n], 4500 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        let mut d = Tensor::full(&[m, n], f32::NAN, dev())?;
        two_phase_shared(&a, &b, &mut c, &mut d)?;
        let (av, bv) = (host(&a), host(&b));
        // Element (r, q) of a block's output is its tile's element (q', r')
        // (block-relative, transposed); outside the input that is the
        // copy's zero padding.
        let at = |v: &[f64], r: usize, q: usize| {
            let (br, bq) = (r / 64 * 64, q / 64 * 64);
            let (sr, sq) = (br + (q - bq), bq + (r - br));
            if sr < m && sq < n {
                v[sr * n + sq]
            } else {
                0.0
            }
        };
        let want_c: Vec<f64> = (0..m * n)
            .map(|x| round_to::<f32>(at(&av, x / n, x % n) + 1.0))
            .collect();
        let want_d: Vec<f64> = (0..m * n)
            .map(|x| round_to::<f32>(at(&bv, x / n, x % n) * 2.0))
            .collect();
        check(&format!("two_phase c {m}x{n}"), &c, &want_c, 0.0, 0.0);
        check(&format!("two_phase d {m}x{n}"), &d, &want_d, 0.0, 0.0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Two gemms into one accumulator
// ---------------------------------------------------------------------------

/// `C = A[:, :32] · B[:32, :] + A[:, 32:40] · B[32:40, :]` for `K = 40`:
/// on CUDA the first gemm runs on tensor cores and the second (K = 8 does
/// not qualify) is a dot product per element over the same accumulator
/// registers.
#[tile::kernel(bm = 64, bn = 64, bk = 32, k2 = 8, threads = 128)]
pub fn gemm_two_sources(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel([T::ceildiv(N, bn), T::ceildiv(M, bm)], threads, |bx, by| {
        let a1 = T::alloc_shared::<f16>([bm, bk]);
        let b1 = T::alloc_shared::<f16>([bk, bn]);
        let a2 = T::alloc_shared::<f16>([bm, k2]);
        let b2 = T::alloc_shared::<f16>([k2, bn]);
        let acc = T::alloc_fragment::<f32>([bm, bn]);
        T::clear(acc);
        T::copy(a.at([by * bm, 0]), a1);
        T::copy(b.at([0, bx * bn]), b1);
        T::copy(a.at([by * bm, bk]), a2);
        T::copy(b.at([bk, bx * bn]), b2);
        T::gemm(a1, b1, acc);
        T::gemm(a2, b2, acc);
        T::copy(acc, c.at([by * bm, bx * bn]));
    });
}

#[test]
fn two_gemms_into_one_accumulator() -> TestResult {
    let cu = gemm_two_sources::SPEC.cuda.source;
    assert_eq!(cu.matches("tl::gemm_ss<").count(), 1, "{cu}");
    for (s, &(m, n)) in [(64, 64), (128, 192), (67, 129)].iter().enumerate() {
        let k = 40;
        let a = random_tensor::<f16>(&[m, k], 4600 + s as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], 4700 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        gemm_two_sources(&a, &b, &mut c)?;
        let want = matmul_ref(&host(&a), &host(&b), m, n, k, false);
        check(&format!("gemm_two_sources {m}x{n}"), &c, &want, 1e-2, 1e-2);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Persistent kernels (`T::persistent`)
// ---------------------------------------------------------------------------

/// A fixed grid of `blocks` blocks walks the `(M / bm) x (N / bn)` tiles of an
/// element-wise kernel: fewer blocks than tiles, and (for small shapes) more.
#[tile::kernel(bm = 16, bn = 32, blocks = 5, threads = 64)]
pub fn persistent_scale(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(blocks, threads, |bid| {
        for (tx, ty) in T::persistent([T::ceildiv(N, bn), T::ceildiv(M, bm)], blocks, bid) {
            for (i, j) in T::parallel([bm, bn]) {
                c[(ty * bm + i, tx * bn + j)] = a[(ty * bm + i, tx * bn + j)] * 3.0;
            }
        }
    });
}

/// A persistent GEMM: each of `blocks` blocks runs whole output tiles one after
/// another, reusing its shared tiles and accumulator (and, on CUDA, its
/// pipeline) from tile to tile.
#[tile::kernel(
    block_m = 64,
    block_n = 64,
    block_k = 32,
    stages = 3,
    blocks = 3,
    threads = 128
)]
pub fn persistent_gemm(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(blocks, threads, |bid| {
        let a_s = T::alloc_shared::<f16>([block_m, block_k]);
        let b_s = T::alloc_shared::<f16>([block_k, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, block_n]);
        for (bx, by) in T::persistent(
            [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
            blocks,
            bid,
        ) {
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        }
    });
}

#[test]
fn persistent_blocks_cover_every_tile_once() -> TestResult {
    // 1 tile (more blocks than tiles), 3x4 tiles, ragged 7x3 tiles.
    for (s, &(m, n)) in [(16, 32), (48, 128), (100, 70)].iter().enumerate() {
        let a = random_tensor::<f32>(&[m, n], 4600 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        persistent_scale(&a, &mut c)?;
        let want: Vec<f64> = host(&a).iter().map(|x| round_to::<f32>(x * 3.0)).collect();
        check(&format!("persistent_scale {m}x{n}"), &c, &want, 0.0, 0.0);
    }
    for (s, &(m, n, k)) in GEMM_SIZES.iter().enumerate() {
        let a = random_tensor::<f16>(&[m, k], 4700 + s as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], 4800 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        persistent_gemm(&a, &b, &mut c)?;
        let want = matmul_ref(&host(&a), &host(&b), m, n, k, false);
        check(
            &format!("persistent_gemm m={m} n={n} k={k}"),
            &c,
            &want,
            2e-2,
            2e-2,
        );
    }
    Ok(())
}
