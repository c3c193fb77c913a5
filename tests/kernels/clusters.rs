//! Clusters of blocks on Hopper. Clusters of four and eight that multicast
//! their A tiles (`T::use_cluster`): each block of a cluster loads `1 / n`
//! of A's rows and the copy engine delivers them to all `n`; elsewhere (and
//! on a grid whose x extent `n` does not divide) every block loads its own.
//! The GEMM example keeps only pairs in its tuning space (clusters of four
//! and eight fill at most 120 of the H200's 132 SMs at one block an SM, so
//! they lost everywhere they were timed: bench/RESULTS.md), so this is where
//! the larger clusters run against a host reference, with 192-row tiles on
//! three consumer warpgroups beside them. And clusters of two, four and
//! eight that split the k loop (`T::use_split_k`): each block sums a range
//! of the k steps and the first adds the others' partial sums, read from
//! their shared memory, before its epilogue (elsewhere the kernel runs
//! unsplit).

use super::*;

/// 128-row tiles in clusters of four and eight, and 192-row tiles on three
/// consumer warpgroups (`bench wide`) alone and in clusters of four: 48 of
/// A's rows per block of a cluster, and a B tile
/// whose 512 16-byte chunks are not a multiple of the 384 threads (the
/// fallback copy's last pass covers the rows left). The k loop split over
/// two, four and eight blocks of 128-row tiles, and over two of 192-row
/// ones.
#[tile::kernel(
    block_m = [128, 192],
    block_n = 64,
    block_k = 64,
    stages = 4,
    threads = [256, 384],
    cluster = [4, 8, 1],
    splits = [1, 2, 4, 8],
    filter = (block_m == 192) == (threads == 384)
        && (cluster != 8 || block_m == 128)
        && (cluster != 1 || block_m == 192 || splits > 1)
        && (splits == 1 || (cluster == 1 && (block_m == 128 || splits == 2)))
)]
pub fn cluster_gemm(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_cluster(cluster);
            T::use_split_k(splits);
            T::use_swizzle(8);
            let a_s = T::alloc_shared::<f16>([block_m, block_k]);
            let b_s = T::alloc_shared::<f16>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

#[test]
fn clusters_multicast_a_or_split_k() -> TestResult {
    // x grids of 8 and 16 blocks (every cluster size divides them), 4 (clusters
    // of eight fall back to single blocks) and 5 (both fall back); ragged M
    // and K, and one k step; split, fewer k steps than blocks (K of 64 to
    // 200), K pitches off 16 bytes (130, 200: the element-wise copies), and
    // nine k steps over bulk tensor copies (520).
    for (m, n, k) in [
        (304, 512, 200),
        (130, 1024, 64),
        (200, 256, 130),
        (64, 320, 72),
        (136, 192, 520),
    ] {
        let a = random_tensor::<f16>(&[m, k], 7100 + m as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], 7200 + n as u64, dev())?;
        let want: Vec<f64> = matmul_ref(&host(&a), &host(&b), m, n, k, false)
            .into_iter()
            .map(round_to::<f16>)
            .collect();
        for (cfg, label) in cluster_gemm::CONFIGS.iter().zip(cluster_gemm::LABELS) {
            // Twice: a kernel's first launch takes the general path, later
            // ones the warm path; both must run the split grid.
            for call in ["first", "second"] {
                let mut c = Tensor::full(&[m, n], f16::NAN, dev())?;
                cluster_gemm::with(*cfg).launch(&a, &b, &mut c)?;
                check(
                    &format!("cluster_gemm {label}, {m}x{n}x{k}, {call} call"),
                    &c,
                    &want,
                    2e-2,
                    2e-2,
                );
            }
        }
    }
    Ok(())
}
